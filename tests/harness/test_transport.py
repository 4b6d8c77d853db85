"""Nothing a backend produces can end the session: results cross the xdist boundary as JSON.

execnet (pytest-xdist's transport) refuses integers below -2**31 and strings that are not
UTF-8 encodable; a report it refuses kills the worker, and every check queued on it is lost.
These tests run real sessions on two workers with such values in a failure's statistics,
message and traceback, and read what reached the report.
"""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys
from pathlib import Path

import execnet
import ml_dtypes
import numpy as np
import pytest

from conformance.report.model import read_report
from conformance.run import transport
from conformance.run.files import write_json_atomic

ROOT = Path(__file__).resolve().parents[2]
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
HOSTILE = "device fault \udc80\r at \x1b[31mcore 3\x1b[0m\x00 (see log)"
"""A lone surrogate (execnet cannot encode it), terminal escapes, NUL and CR."""


def _strict_json(text: str):
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


# ---------------------------------------------------------------------------------------------
# The encoding


def test_integers_of_any_size_and_numpy_values_round_trip_exactly():
    record = {
        "py_min": INT64_MIN,
        "np_min": np.int64(INT64_MIN),
        "np_max": np.int64(INT64_MAX),
        "uint64_max": np.uint64(2**64 - 1),
        "huge": 2**80,
        "neg_huge": -(2**80),
        "floats": [np.float32(0.1), np.float16(-0.0), 1e308, ml_dtypes.bfloat16(1.5)],
        "specials": [float("nan"), np.float32("inf"), -math.inf, np.float64("nan")],
        "array": np.array([[INT64_MIN, INT64_MAX]], dtype=np.int64),
        "bf16_array": np.array([1.0, 2.5], dtype=ml_dtypes.bfloat16),
        "bools": [np.bool_(True), False],
        "tuple": (1, (2, 3)),
        "none": None,
        7: "an int key",
    }
    decoded = transport.decode(transport.encode(record))
    assert decoded["py_min"] == INT64_MIN and type(decoded["py_min"]) is int
    assert decoded["np_min"] == INT64_MIN and decoded["np_max"] == INT64_MAX
    assert decoded["uint64_max"] == 2**64 - 1
    assert decoded["huge"] == 2**80 and decoded["neg_huge"] == -(2**80)
    assert decoded["floats"] == [float(np.float32(0.1)), -0.0, 1e308, 1.5]
    assert math.copysign(1, decoded["floats"][1]) < 0
    assert decoded["specials"] == ["nan", "inf", "-inf", "nan"]
    assert decoded["array"] == [[INT64_MIN, INT64_MAX]]
    assert decoded["bf16_array"] == [1.0, 2.5]
    assert decoded["bools"] == [True, False]
    assert decoded["tuple"] == [1, [2, 3]]
    assert decoded["none"] is None and decoded["7"] == "an int key"
    # What execnet refused before, it now carries (one ASCII string).
    encoded = transport.encode(record)
    assert encoded.isascii()
    assert execnet.loads(execnet.dumps(encoded)) == encoded
    with pytest.raises((execnet.DumpError, struct.error)):  # what killed the worker
        execnet.dumps({"py_min": INT64_MIN})


def test_strings_are_cleaned_and_capped():
    text = transport.clean_text(HOSTILE)
    assert text == "device fault \\udc80\\x0d at \\x1b[31mcore 3\\x1b[0m\\x00 (see log)"
    text.encode("utf-8")  # no surrogate left
    assert transport.clean_text("tab\tand\nnewline stay") == "tab\tand\nnewline stay"
    long = transport.clean_text("x" * 10_000)
    assert len(long) <= transport.MESSAGE_LIMIT
    assert long.endswith(f" ... [truncated {10_000 - long.index(' ...')} characters]")
    assert transport.clean_text("é ü 中") == "é ü 中"  # non-ASCII text is not control text


def test_encoding_is_idempotent_so_a_written_hash_still_holds():
    record = {"message": HOSTILE + "y" * 9_000, "stats": {"v": [INT64_MIN, float("nan")], "s": "\x9b"}}
    once = transport.decode(transport.encode(record))
    assert transport.decode(transport.encode(once)) == once
    assert transport.jsonable(once, None) == once


def test_anything_else_becomes_its_cleaned_repr_and_nothing_raises():
    class Hostile:
        def __repr__(self):
            return "<hostile \udc80>"

    class Broken:
        def __repr__(self):
            raise RuntimeError("no repr")

        def __str__(self):
            raise RuntimeError("no str")

    cyclic: list = []
    cyclic.append(cyclic)
    decoded = transport.decode(
        transport.encode({"h": Hostile(), "b": Broken(), "c": cyclic, "bytes": b"\xff\x00", "set": {3, 1}, "cx": 1 + 2j})
    )
    assert decoded["h"] == "<hostile \\udc80>"
    assert "repr() failed" in decoded["b"]
    assert decoded["bytes"] == "b'\\xff\\x00'"
    assert decoded["set"] == [1, 3] and decoded["cx"] == [1.0, 2.0]
    assert isinstance(json.dumps(decoded["c"]), str)
    assert transport.clean_text(Broken()).startswith("<Broken")


def test_the_json_writer_writes_strict_json(tmp_path):
    path = tmp_path / "doc.json"
    write_json_atomic(path, {"a": float("nan"), "b": [INT64_MIN, 2**70], "c": HOSTILE, "d": "z" * 50_000})
    document = _strict_json(path.read_text(encoding="utf-8"))
    assert document["a"] == "nan" and document["b"] == [INT64_MIN, 2**70]
    assert document["c"] == transport.clean_text(HOSTILE)
    assert document["d"] == "z" * 50_000  # documents are cleaned, never cut


# ---------------------------------------------------------------------------------------------
# Real sessions on two workers

RAW_CHECKS = '''
import numpy as np

from conformance.results import Category, CheckFailure

HOSTILE = {hostile!r}


def test_NUM_001_raw_statistics(backend, result):
    result.set(op="aten.add.Tensor", dtype="int64")
    raise CheckFailure(
        Category.MISMATCH,
        HOSTILE + "x" * 10_000,
        stats={{
            "max_abs": -(2**63),
            "expected_at_worst": np.int64(-(2**63)),
            "actual_at_worst": np.int64(2**63 - 1),
            "snr_db": float("nan"),
            "max_ulp": np.float32("inf"),
            "worst_index": np.array([-(2**63), 2**63 - 1]),
            "refusal_summary": HOSTILE,
        }},
    )


def test_NUM_001_refused_with_a_surrogate(backend, result):
    result.not_supported(HOSTILE)


def test_NUM_001_assertion_with_a_surrogate(backend, result):
    assert False, HOSTILE


def test_NUM_001_own_property_execnet_refuses(backend, result, record_property):
    record_property("odd", -(2**40))


''' + "".join(f"\n\ndef test_NUM_001_queued_after_{i}(backend, result):\n    pass\n" for i in range(6))


def _results(out: Path, backend: str = "reference") -> dict:
    (path,) = (out / backend / "results").glob("*.json")
    return _strict_json(path.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_a_session_with_raw_hostile_values_completes_with_every_result(tmp_path):
    """Values straight from a check (no oracle in between) on two xdist workers."""
    (tmp_path / "test_raw.py").write_text(RAW_CHECKS.format(hostile=HOSTILE), encoding="utf-8")
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "pytest", "test_raw.py", "--conformance-backend", "reference", "--conformance-profile", "seeded",
        "--conformance-out", str(out), "-n", "2", "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", str(tmp_path),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, errors="backslashreplace")
    log = done.stdout + done.stderr
    assert done.returncode == 1, log[-6000:]
    assert "INTERNALERROR" not in log and "crashed" not in log, log[-6000:]
    results = {r["id"]: r for r in _results(out)["results"]}
    assert len(results) == 10, sorted(results)

    raw = results["test_NUM_001_raw_statistics"]  # ids come from parameters, not from what a check sets
    assert raw["category"] == "MISMATCH" and raw["clause"] == "NUM-001"
    stats = raw["stats"]
    assert stats["max_abs"] == INT64_MIN and stats["expected_at_worst"] == INT64_MIN and stats["actual_at_worst"] == INT64_MAX
    assert stats["snr_db"] == "nan" and stats["max_ulp"] == "inf"
    assert stats["worst_index"] == [INT64_MIN, INT64_MAX]
    assert stats["refusal_summary"] == transport.clean_text(HOSTILE)
    assert raw["message"].startswith(transport.clean_text(HOSTILE))
    assert len(raw["message"]) <= transport.MESSAGE_LIMIT and "[truncated" in raw["message"]

    refused = results["test_NUM_001_refused_with_a_surrogate"]
    assert refused["category"] == "NOT_SUPPORTED" and refused["message"] == transport.clean_text(HOSTILE)
    asserted = results["test_NUM_001_assertion_with_a_surrogate"]
    assert asserted["category"] == "CONTRACT_VIOLATION"
    assert results["test_NUM_001_own_property_execnet_refuses"]["category"] == "PASS"
    assert all(results[f"test_NUM_001_queued_after_{i}"]["category"] == "PASS" for i in range(6))
    # The failure's own text reached the controller (cleaned): the terminal shows it.
    assert "\\udc80" in log and "\\x1b[31m" in log


HOSTILE_BACKEND = '''
"""The reference with three wrong kernels and one that fails with a hostile message."""
import numpy as np

from conformance.api import BackendError, Error
from reference_backend import ReferenceRuntime
from reference_backend.kernels import KERNELS
from tests.seeded.defects import _make

INT64_MIN, INT64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max
MESSAGE = {hostile!r}


def _first(out, value, otherwise):
    out = np.array(out, copy=True)
    if out.size:
        out.flat[0] = otherwise if out.flat[0] == value else value
    return out


def add(self, other, *, alpha=1):  # int64: int64 min where the sum is anything else
    out = KERNELS["aten.add.Tensor"](self, other, alpha=alpha)
    return _first(out, INT64_MIN, INT64_MAX) if out.dtype == np.int64 else out


def sub(self, other, *, alpha=1):  # int64: int64 max where the difference is anything else
    out = KERNELS["aten.sub.Tensor"](self, other, alpha=alpha)
    return _first(out, INT64_MAX, INT64_MIN) if out.dtype == np.int64 else out


def mul(self, other):  # float32: NaN where the product is a number, and a number where it is NaN
    out = KERNELS["aten.mul.Tensor"](self, other)
    if out.dtype == np.float32 and out.size:
        out = np.array(out, copy=True)
        out.flat[0] = 1.0 if np.isnan(out.flat[0]) else np.nan
    return out


def neg(self):
    raise BackendError(Error.Internal, MESSAGE)


table = dict(KERNELS)
table.update({{"aten.add.Tensor": add, "aten.sub.Tensor": sub, "aten.mul.Tensor": mul, "aten.neg.default": neg}})
backend = _make("hostile_values", runtime=ReferenceRuntime(kernels=table))
'''
SELECTED = ("aten.add.Tensor-int64", "aten.sub.Tensor-int64", "aten.mul.Tensor-float32", "aten.neg.default-float32",
            "aten.relu.default-float32", "aten.abs.default-float32")  # fmt: skip


@pytest.mark.slow
def test_certify_a_backend_whose_failures_carry_int64_extremes_nan_and_a_surrogate(tmp_path):
    (tmp_path / "hostile.py").write_text(HOSTILE_BACKEND.format(hostile=HOSTILE), encoding="utf-8")
    out = tmp_path / "out"
    selection = f"NUM_001 and ({' or '.join(SELECTED)})"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    command = [
        sys.executable, "-m", "conformance", "certify", f"{tmp_path / 'hostile.py'}:backend", "--profile", "full",
        "--workers", "2", "--skip-perf", "--output", str(out), "-k", selection,
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, errors="backslashreplace")
    log = done.stdout + done.stderr
    assert done.returncode == 1, log[-6000:]
    assert "INTERNALERROR" not in log and "pytest exit code" not in log, log[-6000:]  # the session ended normally

    (report_dir,) = [p for p in out.iterdir() if (p / "report.json").exists()]
    text = (report_dir / "report.json").read_text(encoding="utf-8")
    report = read_report(_strict_json(text))
    results = {(r["op"], r["dtype"]): r for r in report["results"]}
    assert {f"{op}-{dtype}" for op, dtype in results} == set(SELECTED), sorted(results)  # nothing lost
    assert "NUM-001" in report["verdict"]["failing_clauses"]

    def exact(value) -> int:  # the oracle may send int64 extremes as decimal strings; exact either way
        assert isinstance(value, int) or (isinstance(value, str) and value.lstrip("-").isdigit()), value
        return int(value)

    add = results[("aten.add.Tensor", "int64")]
    assert add["category"] == "MISMATCH" and add["clause"] == "NUM-001"
    assert exact(add["stats"]["actual_at_worst"]) == INT64_MIN
    assert exact(add["stats"]["max_abs"]) == abs(INT64_MIN - exact(add["stats"]["expected_at_worst"]))
    sub = results[("aten.sub.Tensor", "int64")]
    assert sub["category"] == "MISMATCH" and exact(sub["stats"]["actual_at_worst"]) == INT64_MAX
    mul = results[("aten.mul.Tensor", "float32")]
    assert mul["category"] == "MISMATCH" and "nan" in (mul["stats"]["actual_at_worst"], mul["stats"]["expected_at_worst"])
    neg = results[("aten.neg.default", "float32")]
    assert neg["category"] == "EXECUTE_FAIL"
    assert transport.clean_text(HOSTILE) in neg["message"]
    assert results[("aten.relu.default", "float32")]["category"] == "PASS"
    assert results[("aten.abs.default", "float32")]["category"] == "PASS"
    # The published document verifies (schema, integrity hash, verdict): valid, unsigned (5).
    verified = subprocess.run(
        [sys.executable, "-m", "conformance", "verify", str(report_dir / "report.json")],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert verified.returncode == 5, verified.stdout + verified.stderr
