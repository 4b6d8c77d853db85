"""QNT: quantized int8 programs end to end, within a stated number of quantization steps.

One check per quantized program of the profile (specs/quantized.toml; conformance/quantize.py
builds them with PyTorch 2 export quantization and ExecuTorch's XNNPACKQuantizer): QNT-001 for
the operator patterns, QNT-002 for the quantized models, and QNT-003 for every program's outputs
lying on the quantization grid of the dequantize that produces them. Each is lowered once and run
on its own inputs, on the edge set (every input at the ends of its calibrated range, zeros, and
past the range, where the input quantize clamps) and on drawn inputs, like MOD (``_whole``): the
reference is checked against eager first, every output compared with the reference within
``lsb`` steps of its scale, statistics kept in steps too (``max_lsb``), a difference localized.
"""

from __future__ import annotations

import numpy as np

from conformance.results import Category, CheckFailure
from conformance.specs import quantized_programs

from . import _support as support
from . import _whole


def pytest_generate_tests(metafunc):
    if "model" not in metafunc.fixturenames:
        return
    from conformance.plugin import state

    st_ = state(metafunc.config)
    clause = "-".join(metafunc.function.__name__.split("_")[1:3])  # test_QNT_001_... -> QNT-001
    names = list(quantized_programs(clause, st_.profile, st_.specs))
    metafunc.parametrize("model", names, ids=names)


def _program(spec):
    from conformance.programs.quantize import QuantizerMissing, quantized_program

    try:
        quantized = quantized_program(spec.name, spec.kind, spec.inputs)
    except QuantizerMissing as exc:
        raise CheckFailure(Category.HARNESS_ERROR, f"{spec.name}: {exc}") from exc
    except Exception as exc:
        raise CheckFailure(Category.HARNESS_ERROR, f"{spec.name}: the quantized program did not build: {type(exc).__name__}: {exc}") from exc
    if any(g is None for g in quantized.grids):
        raise CheckFailure(
            Category.HARNESS_ERROR,
            f"{spec.name}: an output is not produced by a per-tensor dequantize, so it has no quantization grid "
            "to state a tolerance in (specs/quantized.toml lists only programs whose outputs are quantized)",
        )
    return quantized


def _run(backend, result, spec, *, grid_only: bool) -> None:
    """QNT-001/002 (``grid_only`` False): the outputs against the reference in quantization steps;
    QNT-003 (``grid_only``): every run's outputs on their grids, whatever their distance."""
    quantized = _program(spec)
    program, grids = quantized.program, quantized.grids
    tolerances = [spec.tolerance(g.scale) for g in grids]
    result.stats(
        quantizer="XNNPACKQuantizer (symmetric, per-channel weights)",
        depth=program.depth,
        nodes=sum(1 for n in program.exported.graph.nodes if n.op == "call_function"),
        lsb=spec.lsb,
        grids=[{"scale": g.scale, "zero_point": g.zero_point, "quant_min": g.quant_min, "quant_max": g.quant_max} for g in grids],
    )

    def on_grid(label: str, outputs: list[np.ndarray]) -> None:
        for i, (out, grid) in enumerate(zip(outputs, grids)):
            bad = grid.off_grid(out)
            if bad.any():
                where = tuple(int(k) for k in np.argwhere(bad)[0])
                value = float(out[where])
                raise CheckFailure(
                    Category.MISMATCH,
                    f"quantized {spec.name} [{label}] output {i}: {int(bad.sum())} of {out.size} values are off the grid of "
                    f"its dequantize (scale {grid.scale:.6g}, zero point {grid.zero_point}, range [{grid.quant_min}, "
                    f"{grid.quant_max}]); the first, at index {list(where)}, is {value!r}: "
                    f"{grid.steps(value) - grid.zero_point:.4f} steps from zero, not a whole number of steps in range",
                    stats={"off_grid": int(bad.sum()), "output": i, "index": list(where), "value": value},
                )

    subject = _whole.Subject(
        label=f"quantized {spec.name}",
        seed_key=f"QNT|{spec.name}",
        program=program,
        ranges=spec.inputs,
        examples=spec.examples,
        tolerances=tolerances,
        localize_tolerance=lambda depth: tolerances[0],
        edges=[*_whole.edge_inputs(spec.inputs, program.inputs, past=True), *_tie_edge(program)],
        on_outputs=on_grid if grid_only else None,
        judge_values=not grid_only,
    )
    try:
        _whole.check(backend, result, subject)
    finally:
        result.stats(**_max_lsb(result.record.stats, grids))
    if not grid_only:
        _input_ties_exact(backend, result, spec, program)


TIES = "exact ties at the input quantize"


def _tie_inputs(program):
    """The program's inputs with every input that a quantize reads made of exact ties of its grid
    (``quantize.tie_values``), or None when no quantize reads an input."""
    from conformance.programs.quantize import input_quantizes, tie_values

    quantizes = input_quantizes(program.exported)
    if not quantizes:
        return None, ()
    inputs = list(program.inputs)
    for q in quantizes:
        inputs[q.input] = tie_values(q.grid, inputs[q.input].shape)
    return tuple(inputs), quantizes


def _tie_edge(program) -> list:
    inputs, _ = _tie_inputs(program)
    return [] if inputs is None else [(TIES, inputs)]


def _input_ties_exact(backend, result, spec, program) -> None:
    """Zero steps on exact ties: the input quantizes alone (the program cut after them:
    ``localize.exposing``) on inputs that are exact ties of their grids must give the reference's
    integers exactly, because PyTorch rounds half to even there (torch.round) and a tie is the one
    input where a rounding rule shows. Through the whole pattern a tie rounded away from zero moves
    an output by one step, inside the budget; here it is a wrong integer. A backend that refuses or
    cannot run the cut program is recorded (``input_ties``), not judged: the patterns hold it."""
    import torch

    from conformance import localize
    from conformance.api.tensors import to_numpy, to_torch
    from conformance.driver import Driver

    inputs, quantizes = _tie_inputs(program)
    if inputs is None:
        result.stats(input_ties="no quantize reads a program input")
        return
    exposed = localize.exposing(program.exported, [q.node for q in quantizes])
    with torch.no_grad():
        eager = [to_numpy(o) for o in exposed.module()(*[to_torch(a) for a in inputs])]
    expected = support.reference_outputs(exposed, inputs, eager)
    for i, (r, e) in enumerate(zip(expected, eager)):
        if not np.array_equal(np.asarray(r), e):
            raise CheckFailure(
                Category.ORACLE_DISAGREEMENT, f"quantized {spec.name} [{TIES}]: reference and eager quantize ties differently (quantize {i})"
            )
    try:
        got = Driver(backend).run(exposed, inputs, expected).outputs
    except CheckFailure as exc:
        result.stats(input_ties=f"not observed: the input quantizes alone: {exc.category.value}: {exc.message[:300]}")
        return
    for q, a, e in zip(quantizes, got, expected):
        a, e = np.asarray(a), np.asarray(e)
        bad = a != e
        if bad.any():
            where = tuple(int(k) for k in np.argwhere(bad)[0])
            x = float(inputs[q.input][where])
            raise CheckFailure(
                Category.MISMATCH,
                f"quantized {spec.name} [{TIES}]: the quantize of input {q.input} ({q.node}: scale {q.grid.scale:.6g}, zero point "
                f"{q.grid.zero_point}) gives {int(bad.sum())} of {a.size} integers off the reference's (held to 0 steps on exact "
                f"ties); the first, at index {list(where)}: x = {x!r}, x / scale + zero point = "
                f"{float(np.float32(x) * np.float32(1.0 / q.grid.scale)) + q.grid.zero_point}, got {int(a[where])}, expected "
                f"{int(e[where])} (round half to even, as torch.round)",
                stats={"input_ties_off": int(bad.sum()), "input": q.input, "index": list(where)},
            )
    result.stats(input_ties=sum(int(np.asarray(e).size) for e in expected))


def _max_lsb(stats: dict, grids) -> dict:
    """The worst error in quantization steps over every run and output, against the reference and eager."""
    out = {}
    for key, name in (("outputs", "max_lsb"), ("outputs_vs_eager", "max_lsb_vs_eager")):
        outputs = stats.get(key) or []
        if outputs:
            out[name] = round(max(float(o.get("max_abs", 0.0)) / g.scale for o, g in zip(outputs, grids)), 3)
    return out


def test_QNT_001_quantized_op_matches_reference(backend, result, model, specs):
    result.set(model=model)
    _run(backend, result, specs.quantized[model], grid_only=False)


def test_QNT_002_quantized_model_matches_reference(backend, result, model, specs):
    result.set(model=model)
    _run(backend, result, specs.quantized[model], grid_only=False)


def test_QNT_003_outputs_on_quantization_grid(backend, result, model, specs):
    result.set(model=model)
    _run(backend, result, specs.quantized[model], grid_only=True)
