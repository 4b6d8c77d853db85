"""Running one case: ``prepare`` (expected outputs and the single-op program, or the Outcome that
ends the case before the backend), then ``run`` through the driver and the comparison (the package's
docstring says how)."""

from __future__ import annotations

import time

from conformance import oracle
from conformance.case.comparing import compare
from conformance.case.expected import expectations, judging
from conformance.case.outcome import Outcome, Prepared
from conformance.driver import Driver
from conformance.programs import HarnessError, Program, meta_program, output_capacities, program_for, shapes_disagree
from conformance.results import Category, CheckFailure


def prepare(spec, call, *, expected=None, program=None) -> Prepared | Outcome:
    """The expected outputs and the program of ``call`` (those given are kept), or the Outcome
    that ends the case before the backend: HARNESS_ERROR, ORACLE_DISAGREEMENT, or SKIP for a call
    set aside (PyTorch's tracing refuses a call eager computes, or declares other output shapes)."""
    built, like, limits, others = program is None, None, None, ()
    try:
        if expected is None:
            expected, like, limits, others = expectations(spec, call)
        expected = tuple(expected)
        if limits is None:
            limits, others = judging(spec, call, expected)
        if built:
            program = program_for(call, dynamic=spec.dynamic, like=like)
    except CheckFailure as exc:
        return Outcome(exc.category, exc.message, stats=exc.stats, expected=expected)
    except HarnessError as exc:
        return Outcome(Category.HARNESS_ERROR, f"{call.describe()}: {exc}", detail=str(exc), expected=expected)
    except Exception as exc:
        # Eager computes the call but PyTorch's tracing (its meta kernel) refuses it (seen:
        # linalg_vector_norm's inf norm of an empty tensor): no program, so no test of a backend.
        reason = f"tracing refused a call eager computes: {exc}"
        return Outcome(Category.SKIP, f"{call.describe()}: {reason}", detail=reason, expected=expected)
    if built:
        declared = declared_shapes(program.exported)
        shapes = [tuple(e.shape) for e in expected]
        if declared is not None and declared != shapes:
            # PyTorch's own meta kernel disagrees with eager on this call (seen: aten.index.Tensor on
            # empty operands); no backend can honour both, so the example is not a test of one.
            reason = shapes_disagree(declared, shapes)
            return Outcome(Category.SKIP, f"{call.describe()}: {reason}", detail=reason, expected=expected, program=program)
    return Prepared(expected, program, limits, others)


def declared_shapes(exported) -> list[tuple] | None:
    """The program's output shapes, or None where they are symbolic (an exported dynamic program)."""
    try:
        shapes = [tuple(n.meta["val"].shape) for n in exported.graph.output_node().args[0]]
    except (TypeError, AttributeError, KeyError):
        return None
    if not all(type(d) is int for shape in shapes for d in shape):
        return None  # a SymInt: int() of a data-dependent one raises rather than guess
    return shapes


def _input_at(call, comparison) -> str:
    """", where the first tensor holds <value>" when the worst element has a counterpart in the call's
    first tensor argument (the same shape: an elementwise op), naming the input that went wrong (a
    tie, a subnormal), which the output values alone do not show."""
    tensors = call.tensors()
    index = comparison.worst_index
    if index is None or not tensors or tuple(tensors[0].value.shape) != tuple(comparison.shape):
        return ""
    value = tensors[0].value[tuple(index)]
    return f", where the first tensor holds {value.item() if value.dtype.kind in 'biuc' else float(value)!r}"


def run(
    backend,
    spec,
    call,
    *,
    expected=None,
    program: Program | None = None,
    layout: str = "contiguous",
    blob: bytes | None = None,
    preprocessed=None,
) -> Outcome:
    """Run ``call`` on ``backend`` and compare (see the module's docstring).

    ``expected`` and ``program``: those of an earlier run of the same call (a layout re-run, a saved
    example), used instead of computing them. ``layout``: how the inputs reach the backend
    (INPUT_LAYOUTS). ``blob``: processed bytes given to init instead of preprocess's.
    ``preprocessed``: an earlier PreprocessResult of ``program``, so preprocess does not run again."""
    prepared = prepare(spec, call, expected=expected, program=program)
    if isinstance(prepared, Outcome):
        return prepared
    outcome = _run(backend, spec, call, prepared, layout, blob, preprocessed)
    if outcome.ok or not prepared.program.outputs_from_eager:
        return outcome
    # Not a pass, on outputs described from eager's: the verdict of the meta kernel's program.
    checked = meta_program(prepared.program, call)
    if checked is prepared.program:
        return outcome
    if isinstance(checked, str):
        return Outcome(Category.SKIP, f"{call.describe()}: {checked}", detail=checked, expected=prepared.expected, program=prepared.program)
    return _run(backend, spec, call, Prepared(prepared.expected, checked, prepared.bounds, prepared.alternatives), layout, blob, None)


def _run(backend, spec, call, prepared: Prepared, layout: str, blob: bytes | None, preprocessed) -> Outcome:
    expected, program = prepared.expected, prepared.program
    driver = Driver(backend)
    result, given = preprocessed, None
    started = time.perf_counter()
    try:
        if result is None:
            result, _ = driver.preprocess(program.exported)
        given = result.processed_bytes if blob is None else blob
        loaded = driver.init(result, processed_bytes=blob)
        try:
            undefined = [oracle.undefined_output(spec, call, i) is not None for i in range(len(expected))]
            execution = driver.execute(loaded, program.inputs, expected, layout=layout, capacities=output_capacities(program.exported),
                                       undefined=undefined)
        finally:
            driver.destroy(loaded)
    except CheckFailure as exc:
        return Outcome(
            exc.category, f"{call.describe()}: {exc.message}", detail=exc.message, stage=exc.stage, stats=exc.stats,
            expected=expected, program=program, preprocessed=result, blob=given, seconds=time.perf_counter() - started,
        )  # fmt: skip
    seconds = time.perf_counter() - started
    outputs = tuple(execution.outputs)
    comparisons = compare(backend, spec, call.op, outputs, expected, call, prepared.bounds, prepared.alternatives)
    ran = {"expected": expected, "outputs": outputs, "comparisons": comparisons, "program": program,
           "preprocessed": result, "blob": given, "seconds": seconds}  # fmt: skip
    differing = next((c for c in comparisons if not c.ok), None)
    if differing is None:
        return Outcome(Category.PASS, **ran)
    message = f"{call.describe()} output {differing.index}: {differing.comparison.message}{_input_at(call, differing.comparison)}"
    return Outcome(Category.MISMATCH, message, detail=differing.comparison.message, stats=differing.comparison.stats(), **ran)
