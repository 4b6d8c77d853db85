"""The TorchScript to_backend adapter: its mapping onto the contract, the findings it reports, its seeded defect.

The findings tests pin the behaviour reports/README.md describes ("## TorchScript
to_backend backends"); each is the smallest reproduction of one finding. If a torch
release fixes one, its test fails and the README entry must be updated.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from backend_adapters import torchscript as ts  # noqa: E402
from backend_adapters import torchscript_codegen as codegen  # noqa: E402
from conformance import specs as spec_module  # noqa: E402
from conformance.api import BackendError, Error, EValue  # noqa: E402
from conformance.call import Call, Tensor  # noqa: E402
from conformance.checks import _support as support  # noqa: E402
from conformance.driver import Driver  # noqa: E402
from conformance.programs import program_for  # noqa: E402
from conformance.report.model import load_report  # noqa: E402
from conformance.results import Category, CheckFailure  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:Only the first elements")


@pytest.fixture(scope="module")
def demo():
    return ts.backend_with_compiler_demo()


@pytest.fixture(scope="module")
def test_backend():
    return ts.test_backend()


def _binary(op: str, x, y, **kwargs):
    call = Call(op, (Tensor(np.asarray(x, np.float32)), Tensor(np.asarray(y, np.float32))), kwargs)
    return program_for(call, dynamic=False)


def _handles(exported) -> dict[str, int]:
    return {n.name: n.meta["debug_handle"] for n in exported.graph.nodes if n.op == "call_function"}


def _op_handle(exported, op: str) -> int:
    """The debug handle of the one node calling ``op`` (node names differ between torch.export and build_program)."""
    (handle,) = [n.meta["debug_handle"] for n in exported.graph.nodes if n.op == "call_function" and str(n.target) == op]
    return handle


def _init(driver, out, blob=None):
    return driver.init(out, processed_bytes=blob)


# ---------------------------------------------------------------------------------------------
# The mapping


def test_entry_points_give_torchscript_backends():
    from conformance.discovery import load

    for name in ("torchscript-backend-with-compiler-demo", "torchscript-test-backend"):
        backend = load(name)
        assert backend.family == "torchscript"
        assert backend.runtime.is_available() is True


def test_codegen_writes_a_real_file_one_statement_per_node():
    program = support.contract_program("mlp")
    first = codegen.generate(program.fresh())
    again = codegen.generate(program.fresh())
    assert first.digest == again.digest and first.path == again.path  # same text, same file, same TorchScript type
    assert first.path.is_file() and first.path.read_text() == first.source
    assert sorted(h for _, h, _ in first.line_nodes.values()) == sorted(_handles(program.exported).values())
    assert "torch.ops.aten.addmm(" in first.source and len(first.attributes) == 4  # weights and biases as buffers
    import torch

    scripted = torch.jit.script(codegen.instantiate(first, program.exported))
    codegen.verify(first, scripted)  # every FX op resolved to exactly its overload
    x = torch.from_numpy(program.inputs[0])
    np.testing.assert_allclose(scripted(x).numpy(), program.module(x).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_scalar_overload_twin_is_accepted_and_other_overloads_are_not():
    # attention multiplies by a Python float: FX keeps aten.mul.Tensor, TorchScript picks aten.mul.Scalar,
    # which ATen computes as mul.Tensor on a wrapped number. Any other divergence is refused.
    program = support.contract_program("attention")
    generated, scripted = ts.TorchScriptDetails("test_backend", "libjitbackend_test.so", "module").script(program.fresh())
    assert generated.scalar_operands
    generated.line_nodes = {line: (name, handle, "aten.mul.Scalar" if op == "aten.addmm.default" else op)
                            for line, (name, handle, op) in generated.line_nodes.items()}
    with pytest.raises(codegen.Unexpressible, match="overload resolution"):
        codegen.verify(generated, scripted)


def test_demo_blob_is_the_forward_string_with_debug_handles_mapped_to_nodes(demo):
    program = _binary("aten.add.Tensor", [1.0, 2.0], [3.0, 4.0])
    out, _ = Driver(demo).preprocess(program.exported)
    match = re.fullmatch(rb"prim::Constant#1<debug_handle>(\d+),aten::add<debug_handle>(\d+)", out.processed_bytes)
    assert match, out.processed_bytes
    add_handle = _op_handle(program.exported, "aten.add.Tensor")
    assert out.debug_handle_map[int(match.group(2))] == (add_handle,)
    assert set().union(*out.debug_handle_map.values()) == {add_handle}
    assert ts.SKELETON_KEY in out.data_store_output.entries


def test_demo_refusal_is_not_supported_and_names_the_node(demo):
    program = _binary("aten.mul.Tensor", [1.0], [2.0])
    with pytest.raises(CheckFailure) as info:
        Driver(demo).preprocess(program.exported)
    cause = info.value.__cause__
    assert info.value.category is Category.NOT_SUPPORTED
    assert isinstance(cause, BackendError) and cause.error is Error.NotSupported
    assert "aten::mul is not supported in this compiler" in cause.message
    assert cause.debug_handle == _op_handle(program.exported, "aten.mul.Tensor")


def test_execute_errors_map_to_contract_codes(demo):
    program = _binary("aten.add.Tensor", 1.5, 2.0)
    driver = Driver(demo)
    out, _ = driver.preprocess(program.exported)
    loaded = _init(driver, out)
    try:
        assert driver.execute(loaded, program.inputs, [np.zeros((), np.float32)]).outputs[0] == np.float32(3.5)
        runtime, handle = demo.runtime, loaded.handle
        with pytest.raises(BackendError) as arity:  # TorchScript's own schema check
            runtime.execute(support_context(), handle, [EValue(np.array(1, np.float32)), EValue(np.zeros((), np.float32))])
        assert arity.value.error is Error.InvalidArgument
        with pytest.raises(BackendError) as dtype:  # the backend's TORCH_CHECK, rethrown as RuntimeError
            runtime.execute(support_context(), handle, [EValue(np.array(1, np.float64)), EValue(np.array(2, np.float32)), EValue(np.zeros((), np.float32))])
        assert dtype.value.error is Error.Internal and "Only float tensors" in dtype.value.message
    finally:
        driver.destroy(loaded)
    with pytest.raises(BackendError) as gone:
        demo.runtime.execute(support_context(), loaded.handle, [])
    assert gone.value.error is Error.DelegateInvalidHandle


def support_context():
    from conformance.api import BackendExecutionContext, EventTracer, MemoryAllocator

    return BackendExecutionContext(temp_allocator=MemoryAllocator(1 << 20), event_tracer=EventTracer())


def test_init_feeds_the_raw_blob_to_the_backends_compile(demo):
    program = _binary("aten.add.Tensor", 1.5, 2.0)
    driver = Driver(demo)
    out, _ = driver.preprocess(program.exported)
    handle = out.processed_bytes.split(b"<debug_handle>")[-1]
    with pytest.raises(CheckFailure) as info:  # compile runs std::stoi on the handle
        _init(driver, out, out.processed_bytes[: -len(handle)] + b"X")
    assert info.value.category is Category.INIT_FAIL and "stoi" in info.value.message
    assert info.value.__cause__.error is Error.InvalidProgram
    raw = out.processed_bytes.replace(b"aten::add", b"aten::\xffdd")  # not UTF-8: only the pickle-level install gets it there
    loaded = _init(driver, out, raw)
    try:
        with pytest.raises(CheckFailure) as ran:
            driver.execute(loaded, program.inputs, [np.zeros((), np.float32)])
        assert ran.value.category is Category.EXECUTE_FAIL and "is not supported" in ran.value.message
    finally:
        driver.destroy(loaded)


def test_lite_interpreter_symbolicates_an_execute_error_to_the_program_line(demo):
    # DBG-051's mechanism: the demo throws its size check with the add instruction's debug handle
    # (TORCH_DELEGATED_BACKEND_THROW); the desktop interpreter drops it, the lite interpreter maps it
    # to the generated source line, which names the FX node.
    import io
    import warnings

    import torch
    from torch.jit.mobile import _load_for_lite_interpreter

    program = support.contract_program("elementwise_add")
    lowering = demo.details.lower(program.fresh(), [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = _load_for_lite_interpreter(io.BytesIO(lowering.lowered._save_to_buffer_for_lite_interpreter(_save_mobile_debug_info=True)))
        with pytest.raises(RuntimeError) as info:
            module(torch.zeros(7, 11), torch.zeros(4, 8))
    text = str(info.value)
    assert "Module hierarchy:" in text and "forward.aten::add" in text
    hits = [lowering.generated.node_at(path, int(line)) for path, line in re.findall(r'File "([^"]+)", line (\d+)', text)]
    (name, handle, op), = [h for h in hits if h]
    assert op == "aten.add.Tensor" and handle == _op_handle(program.exported, "aten.add.Tensor")
    with pytest.raises(RuntimeError) as desktop:
        lowering.lowered(torch.zeros(7, 11), torch.zeros(4, 8))
    assert str(lowering.generated.path) not in str(desktop.value)  # the desktop interpreter drops the handle


# ---------------------------------------------------------------------------------------------
# Findings (reports/README.md, "## TorchScript to_backend backends")


def test_finding_demo_computes_only_element_zero(demo):
    x = np.array([[1234.5, 2.25], [3.125, 4.5]], np.float32)
    y = np.array([[1000.25, 20.5], [30.75, 40.125]], np.float32)
    program = _binary("aten.add.Tensor", x, y)
    ran = Driver(demo).run(program.exported, program.inputs, [x + y])
    out = ran.outputs[0]
    assert out[0, 0] == x[0, 0] + y[0, 0]
    assert (out.reshape(-1)[1:] != (x + y).reshape(-1)[1:]).any()  # uninitialized memory, not the sums


def test_finding_demo_blobs_embed_process_global_debug_handles(demo):
    program = _binary("aten.add.Tensor", [1.0], [2.0])
    driver = Driver(demo)
    first, _ = driver.preprocess(program.exported)
    second, _ = driver.preprocess(program.exported)
    assert first.processed_bytes != second.processed_bytes
    strip = lambda b: re.sub(rb"<debug_handle>\d+", b"<debug_handle>N", b)  # noqa: E731
    assert strip(first.processed_bytes) == strip(second.processed_bytes)


def test_finding_demo_accepts_truncated_blobs_at_init(demo):
    program = _binary("aten.add.Tensor", 1.5, 2.0)
    driver = Driver(demo)
    out, _ = driver.preprocess(program.exported)
    for n in (0, out.processed_bytes.index(b"<debug_handle>", 20)):  # empty; and "prim::Constant#1<debug_handle>k,aten::add"
        loaded = _init(driver, out, out.processed_bytes[:n])
        driver.destroy(loaded)
    truncated = out.processed_bytes[: out.processed_bytes.index(b"<debug_handle>", 20)]
    loaded = _init(driver, out, truncated)
    try:  # and the truncated blob even runs: the instruction parses without its debug handle
        assert driver.execute(loaded, program.inputs, [np.zeros((), np.float32)]).outputs[0] == np.float32(3.5)
    finally:
        driver.destroy(loaded)


@pytest.mark.slow
def test_finding_demo_segfaults_on_empty_tensors():
    library = ts.torch_lib_dir() / "libbackend_with_compiler.so"
    source = textwrap.dedent(
        f"""
        import torch
        torch.ops.load_library({str(library)!r})
        class Add(torch.nn.Module):
            def forward(self, x, h):
                return x + h
        lowered = torch._C._jit_to_backend("backend_with_compiler_demo", torch.jit.script(Add()), {{"forward": {{"": ""}}}})
        print(lowered(torch.tensor(1.0), torch.tensor(2.0)).item(), flush=True)
        lowered(torch.empty(0), torch.empty(0))
        print("survived", flush=True)
        """
    )
    with_file = ROOT / ".pytest-torchscript-empty-repro.py"  # TorchScript reads module source from a real file
    with_file.write_text(source)
    try:
        done = subprocess.run([sys.executable, str(with_file)], capture_output=True, text=True, timeout=120)
    finally:
        with_file.unlink(missing_ok=True)
    assert done.stdout.splitlines()[0] == "3.0"
    assert done.returncode == -signal.SIGSEGV, (done.returncode, done.stdout, done.stderr[-2000:])


def test_finding_test_backend_accepts_everything_and_computes_nothing(test_backend):
    program = support.contract_program("unsupported_probe")
    driver = Driver(test_backend)
    out, _ = driver.preprocess(program.fresh())  # lowering never refuses: preprocess returns the module
    assert out.debug_handle_map is None
    loaded = _init(driver, out)
    try:
        with pytest.raises(CheckFailure) as info:
            driver.execute(loaded, program.inputs, [np.zeros((4, 4), np.float32)])
        assert "Expected 1 elements in a list but found 2" in info.value.message
    finally:
        driver.destroy(loaded)


def test_finding_test_backend_blob_carries_a_mangled_type_name(test_backend):
    import io
    import zipfile

    program = _binary("aten.add.Tensor", [1.0], [2.0])
    driver = Driver(test_backend)
    names = []
    for _ in range(2):
        out, _ = driver.preprocess(program.exported)
        names.append([n for n in zipfile.ZipFile(io.BytesIO(out.processed_bytes)).namelist() if "___torch_mangle_" in n])
    assert names[0] and names[1] and names[0] != names[1]


# ---------------------------------------------------------------------------------------------
# The seeded defect

_SEEDED_OPS = """\
# The demo's documented domain: "a sum of 2 inputs", float tensors, alpha 1; it computes element 0
# only, so the inputs are 0-d. The harness must tell the real demo (right there) from the seeded one.
[[op]]
name = "aten.add.Tensor"
signature = "binary"
dtypes = ["float32"]
params = { max_rank = 0, mixed_dtypes = false }
attrs = { alpha = [1] }

# Named so the demo's claims (add and sub) are ops of this spec: certify checks a manifest's claims first.
[[op]]
name = "aten.sub.Tensor"
signature = "binary"
dtypes = ["float32"]
params = { max_rank = 0, mixed_dtypes = false }
attrs = { alpha = [1] }
"""

_SEEDED_PROFILE = """\
[profile.torchscript-seeded]
description = "NUM of aten.add.Tensor float32 on the demo backend's documented domain."
clauses = ["NUM-*"]
ops = ["aten.add.Tensor"]
dtypes = ["float32"]
"""


@pytest.fixture(scope="module")
def seeded_session(tmp_path_factory):
    root = tmp_path_factory.mktemp("torchscript-seeded")
    specs_dir = root / "specs"
    (specs_dir / "ops").mkdir(parents=True)
    shutil.copy(spec_module.specs_root() / "interface.toml", specs_dir / "interface.toml")
    (specs_dir / "profiles.toml").write_text(_SEEDED_PROFILE)
    (specs_dir / "ops" / "binary.toml").write_text(_SEEDED_OPS)
    out = root / "out"
    seeded = "tests/seeded/torchscript_defects.py:perturbed_demo"
    command = [
        sys.executable, "-m", "conformance", "certify", "torchscript-backend-with-compiler-demo", seeded,
        "--profile", "torchscript-seeded", "--specs", str(specs_dir), "--output", str(out),
        "--workers", "0", "--timeout", "120", "--skip-perf", "-k", "test_NUM_001",
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    reports = {}
    for path in out.glob("*/report.json"):
        report = load_report(path)
        reports[report["backend"]["name"]] = report
    return reports, str(specs_dir), seeded


def _num(report) -> dict:
    (only,) = [r for r in report["results"] if r["clause"] == "NUM-001"]
    return only


@pytest.mark.slow
def test_seeded_perturbation_is_caught_where_the_real_demo_passes(seeded_session, monkeypatch, capsys):
    from conformance import cli

    reports, specs_dir, seeded = seeded_session
    real = _num(reports["torchscript-backend-with-compiler-demo"])
    perturbed = _num(reports["torchscript-demo-perturbed"])
    assert real["category"] == Category.PASS.value, real
    assert perturbed["category"] == Category.MISMATCH.value, perturbed
    assert not reports["torchscript-demo-perturbed"]["verdict"]["certified"]
    # The saved example replays: the perturbed backend still fails it, the real demo computes it right.
    replay_dir = perturbed["replay"].split(" replay ", 1)[1]
    # In-process (`python -m conformance replay DIR --backend NAME` is this call), to spare two torch imports.
    monkeypatch.chdir(ROOT)
    for backend, status in ((seeded, 1), ("torchscript-backend-with-compiler-demo", 0)):
        code = cli.main(["replay", replay_dir, "--backend", backend, "--specs", specs_dir])
        out = capsys.readouterr().out
        assert code == status, (backend, out)
        assert ("MISMATCH" in out) == (status == 1), out
