"""What certify needs is checked before any check runs (exit 2, one line), profiles beyond the spec's
own (claimed, a file, --ops/--dtypes), verdicts that say why, and a run stopped half-way (issue 13)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.report.model import load_report

ROOT = Path(__file__).resolve().parent.parent

BACKENDS = """
from dataclasses import replace

import reference_backend


def _with_claims(ops):
    b = reference_backend.backend_under_test()
    return replace(b, manifest=replace(b.manifest, ops=ops))


def typo():
    b = reference_backend.backend_under_test()
    return _with_claims({**b.manifest.ops, "aten.relu.defualt": ("float32",)})


def few():
    # Claims add (float32) and neg (every dtype), and refuses every other op cleanly.
    from conformance.api import BackendError, Error
    from conformance.api.ops import op_name

    b = _with_claims({"aten.add.Tensor": ("float32",), "aten.neg.default": "*"})

    class Details(b.details):
        @staticmethod
        def preprocess(program, compile_specs):
            for node in program.graph.nodes:
                if node.op == "call_function" and op_name(node.target) not in ("aten.add.Tensor", "aten.neg.default"):
                    raise BackendError(Error.NotSupported, f"{op_name(node.target)} is not supported")
            return b.details.preprocess(program, compile_specs)

    return replace(b, details=Details)


def returns_str():
    # preprocess hands back its blob as a str: a contract violation whatever the program
    b = reference_backend.backend_under_test()

    class Details(b.details):
        @staticmethod
        def preprocess(program, compile_specs):
            out = b.details.preprocess(program, compile_specs)
            return replace(out, processed_bytes=out.processed_bytes.decode("latin-1"))

    return replace(b, details=Details)
"""


def run(*args, env=None, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "conformance", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def backends(tmp_path) -> Path:
    path = tmp_path / "backends.py"
    path.write_text(BACKENDS)
    return path


def _bad_inputs(tmp_path: Path, backends: Path) -> dict[str, tuple[list[str], dict, str]]:
    """name -> (certify arguments, environment, what the one line must say)."""
    (tmp_path / "a-file").write_text("")
    (tmp_path / "bad-op.toml").write_text('[profile.mine]\ndescription = "d"\nops = ["aten.add.Tensr"]\n')
    (tmp_path / "broken.toml").write_text("[profile.mine\n")
    (tmp_path / "two.toml").write_text('[profile.a]\ndescription = "a"\n[profile.b]\ndescription = "b"\n')
    (tmp_path / "waivers.toml").write_text('[[waiver]]\nid = "x"\n')
    broken_specs = tmp_path / "broken-specs"
    shutil.copytree(ROOT / "specs", broken_specs)
    with open(broken_specs / "profiles.toml", "a") as f:
        f.write("\n[[[\n")
    bad_signature = tmp_path / "bad-signature"
    shutil.copytree(ROOT / "specs", bad_signature)
    activation = bad_signature / "ops" / "activation.toml"
    activation.write_text(activation.read_text().replace('signature = "unary"', 'signature = "unray"', 1))
    out = str(tmp_path / "out")
    return {
        "unknown profile": (["reference", "--profile", "nope"], {}, "unknown profile 'nope'"),
        "profile file with an unknown op": (["reference", "--profile", str(tmp_path / "bad-op.toml")], {}, "did you mean aten.add.Tensor?"),
        "profile file that is not TOML": (["reference", "--profile", str(tmp_path / "broken.toml")], {}, "not valid TOML"),
        "profile file of two profiles": (["reference", "--profile", str(tmp_path / "two.toml")], {}, "say which"),
        "--ops matching nothing": (["reference", "--ops", "aten.ad.Tensor"], {}, "match(es) no op of profile full"),
        "--dtypes unknown": (["reference", "--dtypes", "float33"], {}, "unknown dtype(s) ['float33']"),
        "--waivers without --baseline": (["reference", "--waivers", str(tmp_path / "waivers.toml")], {}, "pass --baseline too"),
        "malformed waivers": (
            ["reference", "--waivers", str(tmp_path / "waivers.toml"), "--baseline", str(ROOT / "reports/reference/report.json")],
            {},
            "every waiver names the result",
        ),
        "--output under a file": (["reference", "--output", str(tmp_path / "a-file" / "x")], {}, "is a file, not a directory"),
        "--baseline the run would overwrite": (
            ["reference", "--output", out, "--baseline", f"{out}/reference/report.json"],
            {},
            "is a file this run writes",
        ),
        "a manifest claiming an op no spec names": ([f"{backends}:typo"], {}, "'aten.relu.defualt' (did you mean aten.relu.default?)"),
        "a spec file that is not TOML": (["reference", "--specs", str(broken_specs)], {}, "profiles.toml: not valid TOML"),
        "no specs directory": (["reference", "--specs", str(tmp_path / "nowhere")], {}, "no interface.toml"),
        "a spec naming an undefined signature": (["reference", "--specs", str(bad_signature)], {}, "signature 'unray' is not defined (did you mean unary?)"),
    }


@pytest.mark.slow
def test_every_bad_input_is_exit_2_with_one_line_before_any_check_runs(tmp_path, backends):
    cases = _bad_inputs(tmp_path, backends)
    for name, (args, env, says) in cases.items():
        done = run("certify", *args, env=env, timeout=120)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, (name, done.returncode, done.stderr[-2000:])
        assert len(lines) == 1 and lines[0].startswith("conformance: ") and says in lines[0], (name, done.stderr)
        assert "session starts" not in done.stdout, name  # no pytest session was started
    assert not (tmp_path / "out" / "reference" / "results").exists()


@pytest.mark.slow
def test_claimed_profile_selection_and_a_verdict_that_says_why(tmp_path, backends):
    """--profile claimed certifies exactly the manifest's claims; the report carries the profile's
    definition (verify recomputes the verdict from it); --ops/--dtypes narrow a profile; a profile
    the backend does not support in full says so first, with the way out, in every rendering.
    certify --sign signs the report its report session builds."""
    from tests.reports.test_signatures import write_keypair

    private, public = write_keypair(tmp_path / "keys")
    out = tmp_path / "claimed"
    done = run("certify", f"{backends}:few", "--profile", "claimed", "--workers", "1", "--skip-perf", "--output", str(out),
               "--sign", str(private))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1].startswith("CERTIFIED: reference: certified for profile claimed")
    report_dir = next(p.parent for p in out.glob("*/report.json"))
    report = load_report(report_dir / "report.json")
    definition = report["spec"]["profile_definition"]
    assert definition["ops"] == {"aten.add.Tensor": ["float32"], "aten.neg.default": list(definition["ops"]["aten.neg.default"])}
    assert len(definition["ops"]["aten.neg.default"]) >= 8  # "*": every dtype the spec gives neg
    num = {(r["op"], r["dtype"]) for r in report["results"] if r["clause"] == "NUM-001"}
    assert ("aten.add.Tensor", "float32") in num and ("aten.add.Tensor", "int32") not in num
    assert run("verify", "--public-key", str(public), str(report_dir / "report.json")).returncode == 0

    # The same backend on a profile it does not cover: not certified, and the reason comes first.
    out = tmp_path / "smoke"
    done = run("certify", f"{backends}:few", "--profile", "smoke", "--ops", "aten.add.*,aten.mul.*", "--dtypes", "float32",
               "--workers", "1", "--skip-perf", "--output", str(out))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last == (
        "NOT CERTIFIED: reference: not certified for profile smoke[ops aten.add.*,aten.mul.*; dtypes float32]: "
        "1 mandatory op x dtype(s) not supported (--profile claimed certifies only what the backend claims)"
    ), last
    report_dir = next(p.parent for p in out.glob("*/report.json"))
    report = load_report(report_dir / "report.json")
    assert report["verdict"]["unsupported"] == ["aten.mul.Tensor float32"] and report["verdict"]["failing"] == []
    assert {(r["op"], r["dtype"]) for r in report["results"] if r["clause"] == "NUM-001"} == {
        ("aten.add.Tensor", "float32"), ("aten.mul.Tensor", "float32")}
    markdown = (report_dir / "report.md").read_text()
    assert "## Why not certified" in markdown and "`aten.mul.Tensor float32`" in markdown and "--profile claimed" in markdown
    html = (report_dir / "report.html").read_text()
    assert "Mandatory, not supported" in html and 'data-state="failed"' in html
    junit = (report_dir / "junit.xml").read_text()
    from xml.etree import ElementTree as ET

    root = ET.fromstring(junit)
    assert int(root.get("failures")) >= 2  # the refused mandatory op and the verdict itself
    verdict_case = root.find(".//testsuite[@name='reference.VERDICT']/testcase/failure")
    assert verdict_case is not None and verdict_case.get("type") == "NOT_CERTIFIED"
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["conformance.certified"] == "false" and props["conformance.profile"].startswith("smoke[")
    assert props["conformance.spec.digest"] == report["spec"]["digest"]
    assert run("verify", str(report_dir / "report.json")).returncode == 5  # valid, unsigned


def _deaf_to_ctrl_c():
    """What a parent may hand on: SIGINT ignored (a background job of a non-interactive shell) and blocked."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


@pytest.mark.slow
@pytest.mark.parametrize(
    ("how", "inherited"),
    [(signal.SIGINT, None), (signal.SIGTERM, None), (signal.SIGINT, _deaf_to_ctrl_c)],
    ids=["ctrl-c", "sigterm", "ctrl-c, SIGINT ignored and blocked by the parent"],
)
def test_an_interrupted_run_writes_a_partial_report(tmp_path, how, inherited):
    """Ctrl-C (SIGINT to the CLI, as a terminal sends it) or a cancelled CI job (SIGTERM): the session
    is stopped, what finished is kept, the rest is recorded not run, the report says partial (130).
    certify answers SIGINT even when the process that started it ignored or blocked it."""
    out = tmp_path / "out"
    # The full profile (2,000+ checks): the run is still going when the first results are in, however
    # slow or loaded the machine (a smoke run once finished before this loop saw them, under load).
    proc = subprocess.Popen(
        [sys.executable, "-m", "conformance", "certify", "reference", "--profile", "full", "--workers", "1", "--output", str(out)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=inherited,  # noqa: PLW1509
    )
    journal = out / "reference" / "results" / "checks.journal"
    deadline, seen = time.monotonic() + 300, []
    while time.monotonic() < deadline and proc.poll() is None:  # a few results, so some are kept and some are not
        seen.append(len(journal.read_text().splitlines()) if journal.exists() else 0)
        if seen[-1] > 6:
            break
        time.sleep(0.2)
    running = proc.poll() is None
    proc.send_signal(how)
    stdout, stderr = proc.communicate(timeout=300)
    assert running, f"the run ended before it could be interrupted (journal lines seen: {seen[-20:]}): {stdout[-3000:]}"
    assert proc.returncode == 130, stdout[-3000:] + stderr[-3000:]
    report = load_report(out / "reference" / "report.json")
    assert "planned check(s) not run" in report["run"]["partial"] and not report["verdict"]["certified"]
    kept = [r for r in report["results"] if r["category"] == "PASS"]
    left = [r for r in report["results"] if r["category"] == "SKIP"]
    assert kept and left and all("not run: the run was" in r["message"] for r in left)
    assert "Partial run" in (out / "reference" / "report.md").read_text()
    assert run("verify", str(out / "reference" / "report.json")).returncode == 5  # valid, unsigned
    assert not subprocess.run(["pgrep", "-f", str(out)], capture_output=True).stdout  # no session left behind


@pytest.mark.slow
def test_list_shows_backends_and_profiles_and_survives_a_closed_pipe():
    done = run("list")
    assert done.returncode == 0
    assert "reference" in done.stdout and "core-fp32" in done.stdout and "claimed" in done.stdout
    head = subprocess.run(
        f"{sys.executable} -m conformance list --ops | head -1", shell=True, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert head.stdout.startswith("aten.") and "Traceback" not in head.stderr and "BrokenPipe" not in head.stderr
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("torch-backend-conformance ")


@pytest.mark.slow
def test_pytest_speaks_the_harness_categories(tmp_path):
    """pytest's closing line counts the harness's categories, not passed/skipped (a NOT_SUPPORTED
    is not a skip), so it cannot contradict the harness's summary."""
    done = run("certify", "reference", "--profile", "smoke", "--ops", "aten.add.Tensor", "--dtypes", "float32",
               "-k", "NUM", "--workers", "1", "--skip-perf", "--output", str(tmp_path))
    assert done.returncode == 1, done.stdout[-2000:]  # -k leaves the contract checks out: not certified
    closing = [line for line in done.stdout.splitlines() if line.startswith("=") and " in " in line][-1]
    assert " PASS in " in closing and "passed" not in closing, closing


@pytest.mark.slow
def test_the_printed_replay_command_works_for_a_backend_given_as_a_path(tmp_path):
    """The replay directory is named after a sanitized copy of the backend (not loadable for a
    ``path.py:attr``); the saved example's call.json keeps what certify was given, and replay loads that."""
    backend = f"{ROOT / 'tests' / 'seeded' / 'defects.py'}:relu_nan_is_zero"
    done = run("certify", backend, "--profile", "seeded", "--ops", "aten.relu.default", "-k", "NUM",
               "--workers", "1", "--skip-perf", "--output", str(tmp_path))
    assert done.returncode == 1, done.stdout[-2000:]
    report = load_report(next(tmp_path.glob("*/report.json")))
    replay = next(r["replay"] for r in report["results"] if r.get("replay"))
    assert replay.startswith("python -m conformance replay ")
    again = run(*replay.split()[3:])
    assert again.returncode == 1, again.stdout[-2000:] + again.stderr[-2000:]  # it fails again, on the same backend
    assert f"backend: {report['backend']['name']}" in again.stdout and "NaN" in again.stdout


@pytest.mark.slow
def test_a_preprocess_returning_str_is_told_as_such_by_pre_001(tmp_path, backends):
    """It was reported under PRE-001 as "accepted none of the contract programs: mlp ... permute"
    (every program skipped as if refused); the cause appeared only in NUM rows."""
    done = run("certify", f"{backends}:returns_str", "--profile", "interface", "-k", "PRE_001 or RT_002",
               "--workers", "1", "--skip-perf", "--output", str(tmp_path))
    assert done.returncode == 1, done.stdout[-2000:]
    report = load_report(next(tmp_path.glob("*/report.json")))
    by_clause = {r["clause"]: r for r in report["results"]}
    for clause in ("PRE-001", "RT-002"):
        assert by_clause[clause]["category"] == "CONTRACT_VIOLATION", by_clause[clause]
        assert by_clause[clause]["message"].startswith("processed_bytes is str, not bytes (preprocess of the mlp program)")
