"""TorchScript to_backend family clauses (RT-050/051, DBG-050/051): what only a lowered module has.

A backend of the family ``torchscript`` is lowered with ``torch._C._jit_to_backend``;
its runtime half exposes ``lowered_module(handle)``, the live lowered
``torch.jit.ScriptModule`` of a handle (conformance/adapters/torchscript.py).

Why some contract clauses do not apply to the family (``applies_to`` in
specs/interface.toml):
- PRE-003 (program not mutated), PRE-007 (preprocess_multimethod), RT-005
  (processed buffer freed), RT-006/RT-007 (destroyed or foreign handles): the
  backend never sees the ExportedProgram, the blob buffer or the handle object;
  those are the adapter's, so the clauses would certify the adapter.
- PRE-005 (named data), RT-013 (blob format version), RT-014 (allocators),
  REG-* (the 16-slot registry): to_backend has no named data, no versioned blob,
  no allocator injection (c10's CPU allocator) and registers backends statically
  by name (torch::jit::backend<T>) instead of in a slot table.
- RT-009/RT-010 (wrong dtype or shape reports InvalidArgument): the TorchScript
  interpreter rethrows every error as RuntimeError, so no backend of the family
  can report an error code; RT-051 checks what is observable.
- DBG-003 (profiling events): backends record events to the lite interpreter's
  edge profiler (RECORD_BACKEND_EVENT_TO_EDGE_PROFILER), absent from the
  desktop runtime.
- RT-016 (no leak over init/destroy cycles) measures the Python heap over a
  thousand torch.jit.load calls, i.e. TorchScript's loader rather than the backend.
"""

from __future__ import annotations

import io
import re

import numpy as np

from conformance.api import BackendError, Error, EValue
from conformance.driver import CLEAN_REFUSALS, Driver, describe_exception
from conformance.results import Category, CheckFailure

from . import _runtime_errors as runtime_errors
from . import _support as support


def _lowered_module(backend, handle, result):
    getter = getattr(backend.runtime, "lowered_module", None)
    if getter is None:
        result.not_applicable("the runtime exposes no lowered_module(handle), so its lowered module cannot be saved")
    return getter(handle)


def _canonical(value):
    """A comparable form of __getstate__ parts: strings, dicts, lists, modules (code and tensors)."""
    import torch

    if isinstance(value, str):
        return value.encode("utf-8", errors="surrogateescape")
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, torch._C.ScriptModule):
        module = torch.jit._recursive.wrap_cpp_module(value)
        tensors = {k: v.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes() for k, v in module.state_dict().items()}
        return ("module", module.code, tensors)
    return value


def _state(module):
    lowered = module._c.__getattr__("__loweredModule__")
    spec, processed, flag = lowered.__getstate__()[0]
    return {"compile spec": _canonical(spec), "processed": _canonical(processed), "flag": flag}


def _run(module, inputs):
    """("ok", outputs as bytes) or ("error", the error's last line)."""
    import torch

    from conformance.api.tensors import to_numpy, to_torch

    try:
        with torch.no_grad():
            out = module(*[to_torch(a) for a in inputs])
    except Exception as exc:
        lines = [line for line in str(exc).splitlines() if line.strip() and not line.strip().startswith("frame #")]
        errors = [line for line in lines if "Error: " in line or "Exception: " in line]
        return ("error", (errors or lines or [type(exc).__name__])[-1].strip())
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return ("ok", [to_numpy(o).tobytes() for o in outs])


def test_RT_050_save_load_round_trip(backend, result):
    import torch

    program = support.runnable(backend)
    result.set(program=program.name)
    driver = Driver(backend)
    out, _ = driver.preprocess(program.fresh())
    loaded = driver.init(out)
    try:
        module = _lowered_module(backend, loaded.handle, result)
        before = _state(module)
        first, again = _run(module, program.inputs), _run(module, program.inputs)
        buffer = io.BytesIO()
        try:
            torch.jit.save(module, buffer)
            reloaded = torch.jit.load(io.BytesIO(buffer.getvalue()))
        except Exception as exc:
            raise CheckFailure(Category.CONTRACT_VIOLATION, f"the lowered module did not survive torch.jit.save/load: {describe_exception(exc)[:600]}") from exc
        after = _state(reloaded)
        changed = [part for part in before if before[part] != after[part]]
        if changed:
            raise CheckFailure(Category.CONTRACT_VIOLATION, f"the {' and '.join(changed)} of the lowered module changed in a save/load round trip")
        then = _run(reloaded, program.inputs)
    finally:
        driver.destroy(loaded)
    repeatable = first == again
    result.stats(archive_bytes=len(buffer.getvalue()), outcome=first[0], repeatable_before_save=repeatable)
    if first[0] == "error":
        if then != first:
            raise CheckFailure(
                Category.CONTRACT_VIOLATION, f"before the round trip the module failed with {first[1]!r}, after it {then[1] if then[0] == 'error' else 'ran'}"
            )
        return
    if then[0] == "error":
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"the module ran before the round trip and fails after it: {then[1]}")
    if repeatable and then != first:
        raise CheckFailure(Category.CONTRACT_VIOLATION, "the reloaded module's outputs differ bitwise from the original's on the same inputs")


def test_RT_051_wrong_dtype_or_shape_refused(backend, result):
    driver, program, out, expected = support.prepared(backend, result)
    loaded = driver.init(out)
    try:
        try:
            driver.execute(loaded, program.inputs, expected)
        except CheckFailure as exc:
            raise CheckFailure(
                exc.category,
                "precondition: the lowered method must run on inputs of its program's dtypes and shapes before "
                f"refusing other ones says anything; it fails on them: {exc.message}",
                stage=exc.stage,
            ) from exc
        first = program.inputs[0]
        wrong = np.float64 if first.dtype != np.float64 else np.float32
        variants = (
            (f"input 0 as {np.dtype(wrong).name}", first.astype(wrong)),
            (f"a larger input 0 {[s + 3 for s in first.shape]}", np.zeros(tuple(s + 3 for s in first.shape), first.dtype)),
            (f"input 0 of higher rank {list(first.shape) + [2]}", np.zeros(first.shape + (2,), first.dtype)),
        )
        refusals = {}
        for label, value in variants:
            args = [EValue(value)] + [EValue(np.array(a)) for a in program.inputs[1:]] + [EValue(np.zeros_like(e)) for e in expected]
            try:
                status = backend.runtime.execute(runtime_errors.context(), loaded.handle, args)
            except BackendError as exc:
                refusals[label] = exc.error.name
                continue
            except Exception as exc:
                raise CheckFailure(
                    Category.CONTRACT_VIOLATION, f"execute with {label} raised {describe_exception(exc)}; only BackendError may leave execute"
                ) from exc
            if isinstance(status, Error) and status is not Error.Ok:
                refusals[label] = status.name
                continue
            raise CheckFailure(Category.CONTRACT_VIOLATION, f"execute with {label} reported {status!r}: the input was read as the program's")
    finally:
        driver.destroy(loaded)
    result.stats(**refusals)


def test_DBG_050_lowering_refusal_names_the_node(backend, result):
    program = support.contract_program("unsupported_probe")
    result.set(program=program.name)
    exported = program.fresh()
    probe = {n.meta.get("debug_handle"): n.name for n in exported.graph.nodes if n.op == "call_function" and "digamma" in str(n.target)}
    try:
        Driver(backend).preprocess(exported)
    except CheckFailure as exc:
        cause = exc.__cause__
        if not (isinstance(cause, BackendError) and cause.error in CLEAN_REFUSALS):
            result.not_applicable(f"the backend did not refuse {support.PROBE_OP} cleanly (PRE-006 judges that): {exc.message}")
        if cause.debug_handle not in probe:
            raise CheckFailure(
                Category.CONTRACT_VIOLATION,
                f"the refusal of {support.PROBE_OP} carries debug handle {cause.debug_handle}, not the refused node's "
                f"({next(iter(probe))}, {next(iter(probe.values()))}); the error names no source the handle maps to: {cause}",
            ) from exc
        result.stats(debug_handle=cause.debug_handle, node=probe[cause.debug_handle])
        return
    result.not_applicable(f"the backend accepted {support.PROBE_OP}, so it has no refusal to name (PRE-006 checks what it computes)")


_FRAME_RE = re.compile(r'File "([^"]+)", line (\d+)')
_HIERARCHY_RE = re.compile(r"Module hierarchy:(\S+)")


def test_DBG_051_execute_error_names_the_source_line(backend, result):
    """Make the backend's execute fail (input 0 larger than the program's, so the inputs no longer
    match each other), on the lite interpreter that symbolicates delegated debug handles, and follow
    the error back to a source line of the program and the node written there."""
    import warnings

    import torch
    from torch.jit.mobile import _load_for_lite_interpreter

    lower = getattr(backend.details, "lower", None)
    if lower is None:
        result.not_applicable("the AOT half exposes no lower(program, compile_specs), so its lowered module cannot be saved for the lite interpreter")
    program = support.runnable(backend)
    result.set(program=program.name)
    exported = program.fresh()
    try:
        lowering = lower(exported, list(backend.compile_specs))
    except BackendError as exc:
        raise CheckFailure(Category.PREPROCESS_FAIL, f"lowering {program.name} again failed: {exc}") from exc
    nodes = {n.name: n.meta.get("debug_handle") for n in exported.graph.nodes if n.op == "call_function"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Lite Interpreter is deprecated"
        try:
            archive = lowering.lowered._save_to_buffer_for_lite_interpreter(_save_mobile_debug_info=True)
            module = _load_for_lite_interpreter(io.BytesIO(archive))
        except Exception as exc:
            raise CheckFailure(
                Category.CONTRACT_VIOLATION, f"the lowered module does not save/load for the lite interpreter: {describe_exception(exc)[:600]}"
            ) from exc
        try:
            with torch.no_grad():
                module(*[torch.from_numpy(np.array(a)) for a in program.inputs])
            own = None
        except Exception as exc:
            own = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        first = program.inputs[0]
        bigger = np.zeros(tuple(s + 3 for s in first.shape), first.dtype)
        inputs = [torch.from_numpy(bigger)] + [torch.from_numpy(np.array(a)) for a in program.inputs[1:]]
        try:
            with torch.no_grad():
                module(*inputs)
        except Exception as exc:
            message = str(exc)
        else:
            result.not_applicable(
                f"execute accepted input 0 of shape {list(bigger.shape)} with the other inputs unchanged, so there is no "
                "execute error to follow (RT-051 judges accepting it)"
            )
    hierarchy = _HIERARCHY_RE.search(message)
    frames = [(path, int(line)) for path, line in _FRAME_RE.findall(message)]
    hits = [lowering.generated.node_at(path, line) for path, line in frames]
    hits = [(line, hit) for (_, line), hit in zip(frames, hits) if hit is not None]
    first_line = next((line.strip() for line in message.splitlines() if line.strip()), "")
    if not hits:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"the execute error ({first_line[:200]}) names no line of the program's source "
            f"({lowering.generated.path.name}): it was raised at {hierarchy.group(1) if hierarchy else 'an unnamed frame'} without "
            "a delegated instruction's debug handle (c10::BackendRuntimeException, TORCH_DELEGATED_BACKEND_THROW), so the "
            "lite interpreter cannot symbolicate it"
            + (f"; the method fails on its program's own inputs too ({own[:200]})" if own else ""),
        )
    line, (name, handle, op) = hits[-1]
    if nodes.get(name) != handle or handle is None:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"the error's source line {line} names node {name}, which the program does not have")
    mapped = sorted({h for values in (lowering.result.debug_handle_map or {}).values() for h in values})
    if lowering.result.debug_handle_map is not None and handle not in mapped:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"the error leads to node {name} (debug handle {handle}), which debug_handle_map does not cover ({mapped})",
        )
    result.stats(error=first_line[:160], source_line=line, node=name, debug_handle=handle, op=op,
                 instruction=hierarchy.group(1).rsplit(".", 1)[-1] if hierarchy else None)
