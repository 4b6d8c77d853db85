"""MOD: whole models, end to end, against the reference and eager.

One check per model of the profile (specs/models.toml; conformance/models.py builds them). The
model is lowered once (preprocess, init) and executed on its own inputs, on the edge set (every
input at the low and the high end of its spec'd range, and zeros) and on hypothesis-drawn
inputs in those ranges. Each execution's outputs are compared with the reference's (the
reference's with eager's first: a disagreement there is ORACLE_DISAGREEMENT), within the
model's tolerance for its depth (``ModelSpec.tolerance``). The check records per-output
statistics over every execution (max abs, MAE, SNR, max ULP), against the reference and against
eager, and, when an output differs, names
the first operator that goes wrong (``conformance.localize``): the verdict stays MISMATCH on the
model's output, the message and the stats say where it starts.

A model the backend refuses at preprocess is NOT_SUPPORTED, naming the ops its manifest does not
claim; refusing a model made only of claimed ops is PREPROCESS_FAIL. A backend that declares
partial delegation is asked for the part it takes: the whole model is still compared, the
delegated fraction reported, and the result NOT_SUPPORTED, never a pass (``_whole``, which QNT
shares).
"""

from __future__ import annotations

from conformance.results import Category, CheckFailure

from . import _whole


def pytest_generate_tests(metafunc):
    if "model" not in metafunc.fixturenames:
        return
    from conformance.plugin import state

    models = state(metafunc.config).profile.models
    metafunc.parametrize("model", models, ids=list(models))


def test_MOD_001_model_matches_reference(backend, result, model, specs):
    from conformance.programs.models import model_program

    spec = specs.models[model]
    result.set(model=model)
    try:
        program = model_program(model)
    except Exception as exc:
        raise CheckFailure(Category.HARNESS_ERROR, f"{model}: the model did not export: {type(exc).__name__}: {exc}") from exc
    if len(spec.inputs) != len(program.inputs):
        raise CheckFailure(
            Category.HARNESS_ERROR,
            f"{model}: specs/models.toml gives {len(spec.inputs)} input range(s), the model takes {len(program.inputs)}",
        )
    tolerance = spec.tolerance(program.depth)
    result.stats(
        depth=program.depth,
        nodes=sum(1 for n in program.exported.graph.nodes if n.op == "call_function"),
        atol=tolerance.atol,
        rtol=tolerance.rtol,
    )
    subject = _whole.Subject(
        label=model,
        seed_key=f"MOD-001|{model}",
        program=program,
        ranges=spec.inputs,
        examples=spec.examples,
        tolerances=[tolerance] * len(program.exported.graph_signature.user_outputs),
        localize_tolerance=spec.tolerance,
        edges=_whole.edge_inputs(spec.inputs, program.inputs),
    )
    _whole.check(backend, result, subject)
