"""A check draws the same examples whatever else its process has imported.

Hypothesis 6.170 draws, now and then, constants it scans out of every local module loaded in
the process; which modules a pytest-xdist worker has loaded depends on which checks it ran
before, i.e. on load. conformance.strategies.profiles.register() makes hypothesis draw from its
global constants only, where conformance.compat.hypothesis.draw_only_global_constants takes its
private route (with CONFORMANCE_COMPAT=public it does not, and the proof is skipped). Proof: the same strategies under the same seed and settings, drawn in a
fresh process and in one that first imports a local module full of integer and float
literals, give the same calls, value for value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conformance import compat
from conformance.compat import hypothesis as compat_hypothesis
from conformance.strategies import profiles

ROOT = Path(__file__).resolve().parents[2]
CASES = [
    ("aten.div.Tensor_mode", "int32"),  # the seeded proof that failed under load (int_div_rounds_toward_zero)
    ("aten.add.Tensor", "int64"),
    ("aten.mul.Tensor", "float32"),
    ("aten.add.Scalar", "float64"),
    ("aten.full.default", "int64"),  # without the fix, most of its draws change (measured: 55 of 60)
]
EXAMPLES = 60

DRAW = textwrap.dedent(
    """
    import hashlib, json, sys

    if sys.argv[1] == "with-local-constants":
        sys.path.insert(0, sys.argv[2])
        import conformance_local_constants  # noqa: F401  (hypothesis scans what is loaded)

    import numpy as np
    from hypothesis import HealthCheck, given, seed, settings, strategies as st

    from conformance import specs
    from conformance.strategies import calls, profiles

    profiles.register()
    loaded = specs.load()
    drawn = {}
    for op, dtype in json.loads(sys.argv[3]):
        strategy = calls(loaded.op(op), dtype, op)
        out = drawn[f"{op} {dtype}"] = []

        @seed(20261124)
        @settings(
            settings.get_profile("ci"),
            max_examples=int(sys.argv[4]),
            derandomize=False,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(data=st.data())
        def draw(data):
            call = data.draw(strategy, label="call")
            h = hashlib.sha256()
            for t in call.tensors():
                h.update(str(t.value.dtype).encode() + repr(t.value.shape).encode())
                h.update(np.ascontiguousarray(t.value).view(np.uint8).tobytes() if t.value.size else b"")
            out.append(f"{call.describe()} {h.hexdigest()[:16]}")

        draw()
    print(json.dumps(drawn))
    """
)


def _local_module(directory: Path) -> None:
    """A module hypothesis counts as local (outside site-packages, not a test file), full of
    literals it would draw: integers past +-100 and nonzero finite floats."""
    ints = [v for i in range(1, 301) for v in (100 + 37 * i, -(100 + 53 * i))] + [2**31 - 1, -(2**31), 2**62, -(2**63)]
    floats = [v for i in range(1, 151) for v in (i * 0.37, -i * 1.5e3)] + [1e-30, 6.5e4, 3.4e38, -1e-3]
    (directory / "conformance_local_constants.py").write_text(f"INTEGERS = {ints!r}\nFLOATS = {floats!r}\n", encoding="utf-8")


def _draws(mode: str, local: Path, *, patched: bool = True) -> dict[str, list[str]]:
    script = DRAW
    if not patched:  # the proof's control: register() without the fix
        script = script.replace("profiles.register()",
                                "profiles.compat_hypothesis.draw_only_global_constants = lambda: False\nprofiles.register()")
    env = dict(os.environ)
    done = subprocess.run(
        [sys.executable, "-c", script, mode, str(local), json.dumps(CASES), str(EXAMPLES)],
        cwd=local,  # not the repository: hypothesis keeps its cache (.hypothesis/) where it runs
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("local_constants")
    _local_module(directory)
    return directory


@pytest.mark.slow
@pytest.mark.skipif(compat.forced_public(), reason="CONFORMANCE_COMPAT=public: hypothesis' local constants stay on")
def test_draws_do_not_depend_on_the_modules_a_process_has_loaded(local):
    plain = _draws("plain", local)
    loaded = _draws("with-local-constants", local)
    assert [len(v) for v in plain.values()] == [EXAMPLES] * len(CASES)
    for key in plain:
        assert plain[key] == loaded[key], f"{key}: the drawn calls changed when a local module was imported"


@pytest.mark.slow
def test_without_the_fix_the_same_draws_do_depend_on_them(local):
    """The control: with hypothesis' local constants left on, the same comparison differs, so the
    test above would catch the fix going missing (e.g. a hypothesis upgrade that moves the hook)."""
    plain = _draws("plain", local, patched=False)
    loaded = _draws("with-local-constants", local, patched=False)
    assert plain != loaded


@pytest.mark.skipif(compat.forced_public(), reason="CONFORMANCE_COMPAT=public: the fix is not applied")
def test_the_fix_is_in_place_in_this_process_and_idempotent():
    from hypothesis.internal.conjecture import providers

    profiles.register()  # tests/conftest.py has registered already: a second call changes nothing
    assert compat_hypothesis.draw_only_global_constants()
    constants = providers._get_local_constants()
    assert len(constants) == 0
    assert getattr(providers._get_local_constants, "_conformance_global_only", False)


def test_a_changed_hypothesis_internal_takes_the_public_fallback(monkeypatch, caplog):
    """A hypothesis whose internals are not the tested ones is not patched: draws stay valid (the public
    route), the fallback is logged, and nothing raises."""
    from hypothesis.internal.conjecture import providers

    monkeypatch.delattr(providers, "_get_local_constants")
    compat._decided.cache_clear()
    try:
        with caplog.at_level("WARNING", logger="conformance.compat"):
            assert compat_hypothesis.draw_only_global_constants() is False
        assert compat.forced_public() or "_get_local_constants" in caplog.text
    finally:
        monkeypatch.undo()
        compat._decided.cache_clear()


def test_the_private_route_is_taken_only_on_the_tested_hypothesis_series(monkeypatch):
    import hypothesis

    compat._decided.cache_clear()
    compat_hypothesis._tested.cache_clear()
    try:
        monkeypatch.setattr(hypothesis, "__version__", "6.171.0")
        assert compat_hypothesis.draw_only_global_constants() is False
    finally:
        monkeypatch.undo()
        compat._decided.cache_clear()
        compat_hypothesis._tested.cache_clear()
    assert compat_hypothesis.draw_only_global_constants() is not compat.forced_public()
