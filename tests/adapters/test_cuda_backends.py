"""The accelerator backends: torch-eager-cuda and torch-aoti-cuda (backend_adapters/_device.py).

On a machine without a CUDA device: building either backend, or certifying it, is refused before
anything runs (the CLI's exit 2 for a backend that cannot be loaded), and the device path of the
eager adapter (program moved, inputs copied to the device, outputs copied back to host arrays)
runs on the CPU. On a machine with one, the tests marked ``needs_cuda`` run both backends on it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import sys
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from backend_adapters import _device, aoti, torch_eager  # noqa: E402
from conformance.checks import _support as support  # noqa: E402
from conformance.checks import _timing  # noqa: E402
from conformance.discovery import DiscoveryError, load  # noqa: E402
from conformance.driver import Driver  # noqa: E402
from tests.certifying import certify  # noqa: E402

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA device: torch.cuda.is_available() is False on this machine")
without_cuda = pytest.mark.skipif(CUDA, reason="this machine has a CUDA device: the refusal is for machines without one")
CUDA_BACKENDS = {"torch-eager-cuda": "torch-eager", "torch-aoti-cuda": "torch-aoti"}
CUDA_LATITUDES = ("tf32", "ftz", "signed-zero", "fast-division", "reassociation")


class Weighted(torch.nn.Module):
    """Weights (moved with the program), and a factory call whose device the program records."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.linear(x) + torch.arange(4, dtype=torch.float32), x.sum()


def _weighted():
    torch.manual_seed(0)
    inputs = (np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32),)
    program = torch.export.export(Weighted().eval(), (torch.from_numpy(inputs[0]),)).run_decompositions()
    return program, inputs


def _run(backend, program, inputs):
    expected = support.eager_outputs(program, inputs)
    return Driver(backend).run(program, list(inputs), expected).outputs, expected


# -- no CUDA device: refused before anything runs ------------------------------------------------


@without_cuda
@pytest.mark.parametrize("name", sorted(CUDA_BACKENDS))
def test_a_cuda_backend_is_refused_without_a_cuda_device(name):
    message = (
        f"{name} needs a CUDA device; torch.cuda.is_available() is False on this machine: certify {CUDA_BACKENDS[name]} for CPU"
    )
    with pytest.raises(DiscoveryError) as info:
        load(name)  # the entry point (pip install -e . registers it)
    assert str(info.value) == message


@pytest.mark.slow
@without_cuda
@pytest.mark.parametrize("name", sorted(CUDA_BACKENDS))
def test_certifying_a_cuda_backend_without_a_cuda_device_exits_2_before_any_check(name, tmp_path):
    out = tmp_path / "reports"
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "conformance", "certify", name, "--profile", "interface", "--output", str(out)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"conformance: {name} needs a CUDA device; torch.cuda.is_available() is False" in done.stderr
    assert not out.exists()  # no session started, no result written
    assert time.monotonic() - start < 60


def test_the_cpu_backends_stay_on_the_cpu():
    for backend in (torch_eager.backend(), aoti.backend()):
        assert backend.device == "cpu" and backend.runtime.device == "cpu"
        assert not backend.manifest.latitudes
    assert torch_eager.backend("cpu").name == "torch-eager" and aoti.backend("cpu").name == "torch-aoti"
    assert aoti.details("cpu") is aoti.AotiDetails


def test_the_cuda_claims_declare_the_latitudes_cuda_takes():
    from backend_adapters import _claims

    for name, cpu in CUDA_BACKENDS.items():
        claims, base = _claims.load(name), _claims.load(cpu)
        assert claims.latitudes == CUDA_LATITUDES
        assert claims.manifest().ops == base.manifest().ops
        assert dict(claims.not_applicable) == dict(base.not_applicable)
        assert claims.blob_version == base.blob_version


def test_a_device_the_adapters_have_no_claims_for_is_refused():
    with pytest.raises(DiscoveryError, match="run on cpu or cuda"):
        torch_eager.backend("xpu")
    with pytest.raises(DiscoveryError, match="run on cpu or cuda"):
        aoti.backend("cuda:x")


def test_the_cpu_package_cache_keys_do_not_change():
    """CPU packages cached before the device option keep their names (a cold AOTInductor cache costs
    hours): the key of a CPU package is the program, the torch version and the options alone."""
    h = hashlib.sha256()
    for part in (f"aoti-cache-{aoti.CACHE_FORMAT}", torch.__version__, repr(sorted(aoti.COMPILE_OPTIONS.items()))):
        h.update(part.encode() + b"\0")
    h.update(b"program")
    assert aoti.cache_key(b"program") == aoti.cache_key(b"program", "cpu") == h.hexdigest()[:32]


# -- the device path, on the CPU -----------------------------------------------------------------


@pytest.mark.slow
def test_the_device_path_runs_on_the_cpu():
    """The eager adapter's device path (program moved at init, inputs copied to the device, outputs
    copied back into host arrays) under the device name "cpu:0", which takes it as a device other
    than "cpu": preprocess, init, execute and destroy give eager's outputs bit for bit."""
    program, inputs = _weighted()
    backend = torch_eager.backend("cpu")
    on_device = dataclasses.replace(backend, runtime=torch_eager.EagerRuntime("cpu:0"), device="cpu:0")
    for which in (backend, on_device):
        outputs, expected = _run(which, program, inputs)
        for got, want in zip(outputs, expected):
            assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert any(key[1] == "cpu:0" for key in torch_eager._loaded)  # a program loaded for the device


@pytest.mark.slow
def test_moving_a_program_moves_its_weights_and_factory_calls():
    program, _ = _weighted()
    moved = _device.move_program(program, "meta", "torch-eager-meta")
    assert all(t.device.type == "meta" for t in moved.state_dict.values())
    devices = [n.kwargs["device"] for n in moved.graph.nodes if n.op == "call_function" and "device" in n.kwargs]
    assert devices and all(torch.device(d).type == "meta" for d in devices)


# -- on a CUDA device ----------------------------------------------------------------------------


@needs_cuda
@pytest.mark.parametrize("name", sorted(CUDA_BACKENDS))
def test_a_cuda_backend_is_built_for_the_current_device(name):
    backend = load(name)
    assert backend.name == name and backend.device == f"cuda:{torch.cuda.current_device()}"
    assert backend.runtime.is_available() and backend.manifest.latitudes == CUDA_LATITUDES
    assert torch.cuda.get_device_name(backend.device) in backend.version


@needs_cuda
@pytest.mark.parametrize("name", sorted(CUDA_BACKENDS))
def test_a_program_runs_on_the_device_with_host_arrays_at_the_boundary(name):
    program, inputs = _weighted()
    outputs, expected = _run(load(name), program, inputs)
    for got, want in zip(outputs, expected):
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)  # TF32 where cuDNN or cuBLAS take it


@needs_cuda
def test_the_device_is_synchronized_around_timed_regions():
    wait = _timing.synchronizer(f"cuda:{torch.cuda.current_device()}")
    x = torch.randn(2048, 2048, device="cuda")
    (x @ x).sum()
    wait()  # torch.cuda.synchronize: returns once the queued matmul is done
    assert torch.cuda.current_stream().query()


@needs_cuda
def test_short_certification_of_torch_eager_cuda(tmp_path):
    selection = ["test_PRE_002", "test_RT_002", "test_RT_009", "test_RT_019", "test_DBG_001",
                 "(NUM and aten.relu.default)", "(NUM and aten.add.Tensor)"]  # fmt: skip
    results, _ = certify("torch-eager-cuda", tmp_path, "core-fp32", *selection)
    failing = {rid: (r["category"], r.get("message", "")[:300]) for rid, r in results.items() if r["category"] != "PASS"}
    assert results and not failing, failing
