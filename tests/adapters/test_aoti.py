"""The AOTInductor adapter: its mapping onto the contract, the on-disk package cache, the findings.

One program is compiled (the contract program "chain", ~20-60 s of C++ compile on a cold cache);
it is cached under conformance.programs.cache_dir()/aoti, so later runs take seconds. The findings
tests pin what reports/notes/aoti.md describes, each as its smallest reproduction.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from backend_adapters import aoti  # noqa: E402
from conformance.api import BackendError, Error, EValue  # noqa: E402
from conformance.checks import _support as support  # noqa: E402
from conformance.driver import Driver  # noqa: E402
from conformance.results import CheckFailure  # noqa: E402


@pytest.fixture(scope="module")
def backend():
    return aoti.backend()


@pytest.fixture(scope="module")
def chain(backend):
    """The chain program's preprocess output (compiled once, or read from the disk cache)."""
    program = support.contract_program("chain")
    out, _ = Driver(backend).preprocess(program.fresh())
    return program, out


def _context():
    from conformance.api import BackendExecutionContext, EventTracer, MemoryAllocator

    return BackendExecutionContext(temp_allocator=MemoryAllocator(1 << 20), event_tracer=EventTracer())


def test_entry_point_family_and_claims(backend):
    from conformance import specs as spec_module

    assert backend.name == "torch-aoti" and backend.family == "delegate"
    assert backend.runtime.is_available()
    assert set(backend.manifest.ops) == set(spec_module.load().ops)
    for clause in ("PRE-004", "DBG-001", "RT-013"):
        assert backend.manifest.not_applicable_reason(clause)
    assert os.environ.get(aoti.CHECK_INPUTS_ENV) == "1" or aoti.CHECK_INPUTS_ENV in os.environ


def test_cache_key_is_the_program_hash():
    a, b = b"program a", b"program b"
    assert aoti.cache_key(a) == aoti.cache_key(a) != aoti.cache_key(b)
    assert len(aoti.cache_key(a)) == 32


@pytest.mark.slow
def test_round_trip_and_second_preprocess_hits_the_cache(backend, chain):
    program, out = chain
    assert out.processed_bytes[:2] == b"PK"  # the .pt2 package (a zip archive) is the processed blob
    hits, compiles = aoti.STATS.cache_hits, aoti.STATS.compiles
    again, _ = Driver(backend).preprocess(program.fresh())
    assert aoti.STATS.compiles == compiles and aoti.STATS.cache_hits == hits + 1
    assert again.processed_bytes == out.processed_bytes
    expected = support.eager_outputs(program.exported, program.inputs)
    ran = Driver(backend).run(program.exported, program.inputs, expected)
    support.compare_outputs(ran.outputs, expected, what="chain through AOTInductor")


def test_unreadable_package_is_invalid_program(backend, chain):
    _, out = chain
    driver = Driver(backend)
    for blob in (b"", out.processed_bytes[: len(out.processed_bytes) // 2], b"PK\x03\x04" + b"\0" * 64):
        with pytest.raises(CheckFailure) as info:
            driver.init(out, processed_bytes=blob)
        assert "InvalidProgram" in info.value.message


@pytest.mark.slow
def test_execute_checks_arguments_and_handles(backend, chain):
    program, out = chain
    driver = Driver(backend)
    loaded = driver.init(out)
    x, y = program.inputs
    result = [EValue(np.zeros((4, 8), np.float32))]
    cases = {
        "arity": [EValue(x)] + result,
        "dtype": [EValue(x.astype(np.float64)), EValue(y)] + result,
        "shape": [EValue(np.zeros((5, 8), np.float32)), EValue(y)] + result,
    }
    for label, args in cases.items():
        with pytest.raises(BackendError) as info:
            backend.runtime.execute(_context(), loaded.handle, args)
        assert info.value.error is Error.InvalidArgument, (label, info.value)
    driver.destroy(loaded)
    with pytest.raises(BackendError) as info:
        backend.runtime.execute(_context(), loaded.handle, [EValue(x), EValue(y)] + result)
    assert info.value.error is Error.DelegateInvalidHandle


# -- findings (reports/notes/aoti.md) ----------------------------------------------------------


@pytest.mark.slow
def test_finding_inputs_unchecked_by_default(chain, tmp_path):
    """AOTInductor's runner checks input dtypes and shapes only with AOTI_RUNTIME_CHECK_INPUTS=1.

    Without it (the default), a float64 input to a float32 package is read as float32 bits and a
    shorter input is read past its end: no error, wrong numbers.
    """
    _, out = chain
    package = tmp_path / "chain.pt2"
    package.write_bytes(out.processed_bytes)
    script = textwrap.dedent(
        f"""
        import torch
        runner = torch._inductor.aoti_load_package({str(package)!r})
        x = torch.ones(4, 8, dtype=torch.float64)
        y = torch.ones(4, 8, dtype=torch.float32)
        try:
            out = runner(x, y)
            print("ACCEPTED", bool(torch.isfinite(out[0] if isinstance(out, (list, tuple)) else out).all()))
        except Exception as exc:
            print("REFUSED", type(exc).__name__)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != aoti.CHECK_INPUTS_ENV}
    unchecked = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    checked = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env={**env, aoti.CHECK_INPUTS_ENV: "1"}, timeout=120
    )
    assert "ACCEPTED" in unchecked.stdout, unchecked.stdout + unchecked.stderr[-2000:]
    assert "REFUSED" in checked.stdout, checked.stdout + checked.stderr[-2000:]


CORRUPT_AND_LOAD = """
import struct, sys, tempfile, zipfile, torch
blob = bytearray(open(sys.argv[1], "rb").read())
member = next(i for i in zipfile.ZipFile(sys.argv[1]).infolist() if i.filename.endswith(".so"))
name_len, extra_len = struct.unpack("<HH", blob[member.header_offset + 26 : member.header_offset + 30])
so = member.header_offset + 30 + name_len + extra_len          # the shared library's first byte
phentsize = struct.unpack("<H", blob[so + 54 : so + 56])[0]
blob[so + 64 + phentsize] ^= 0xFF                              # p_type of its second program header
path = tempfile.mktemp(suffix=".pt2"); open(path, "wb").write(blob)
assert zipfile.ZipFile(path).testzip() == member.filename      # the archive's CRC shows the damage
try:
    torch._inductor.aoti_load_package(path)
    print("LOADED")
except Exception as exc:
    print("REFUSED", type(exc).__name__)
"""


@pytest.mark.slow
def test_finding_corrupted_package_crashes_the_loader(chain, tmp_path):
    """aoti_load_package extracts the .so without checking the zip CRC and dlopens it: one flipped
    byte in the library's ELF program headers kills the process (RT-011 CRASH)."""
    _, out = chain
    package = tmp_path / "chain.pt2"
    package.write_bytes(out.processed_bytes)
    done = subprocess.run([sys.executable, "-c", CORRUPT_AND_LOAD, str(package)], capture_output=True, text=True, timeout=120)
    assert done.returncode < 0, (done.returncode, done.stdout, done.stderr[-2000:])  # killed by a signal
    assert "LOADED" not in done.stdout and "REFUSED" not in done.stdout
