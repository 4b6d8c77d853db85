"""A backend's outputs against the expected ones: the oracle's layered tolerance, and where the
backend declares numerical latitudes (conformance.latitudes), each output that fails the strict
comparison judged again within their model."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from conformance import latitudes, oracle
from conformance.case.accumulation import bounds
from conformance.case.expected import alternatives, reference
from conformance.case.outcome import Compared


def compare(backend, spec, op: str, outputs, expected, call=None, bounds=(), alternatives=()) -> tuple[Compared, ...]:
    """Every output against its expected value, with the oracle's layered tolerance and the outputs'
    accumulation ``bounds`` and ``alternatives`` (``Prepared``), the way the op spec's ``values`` says
    (``oracle.compare_outputs``: a law of random or undefined values needs the ``call``, whose
    arguments it involves)."""
    tols = [oracle.tolerance_for(spec, oracle.dtype_name(e.dtype), backend.manifest, op) for e in expected]
    outputs = [np.asarray(a) for a in outputs]
    compared = oracle.compare_outputs(spec, call, outputs, expected, tols, bounds or None, alternatives or None)
    declared = getattr(backend.manifest, "latitudes", ())
    if not declared or call is None or spec is None or spec.values != "reference":
        return tuple(Compared(i, c, t) for i, (c, t) in enumerate(zip(compared, tols)))
    model = _LatitudeModel(spec, call, expected, bounds, alternatives)
    out = []
    for i, (a, e, c, t) in enumerate(zip(outputs, expected, compared, tols)):
        names = latitudes.covering(declared, spec, call, oracle.dtype_name(np.asarray(e).dtype))
        if not names or oracle.undefined_output(spec, call, i) is not None or a.shape != e.shape or a.dtype != e.dtype:
            out.append(Compared(i, c, t))
        elif c.ok:
            taken = ("reassociation",) if "reassociation" in names and c.max_abs != 0 else ()
            out.append(Compared(i, c, t, taken))
        else:
            out.append(model.judge(i, a, c, t, names))
    return tuple(out)


class _LatitudeModel:
    """The expected outputs of one call as declared latitudes model them (conformance.latitudes),
    computed once for the call's outputs that fail the strict comparison."""

    def __init__(self, spec, call, expected, bounds, alternatives):
        self.spec, self.call, self.expected = spec, call, tuple(expected)
        self.bounds, self.alternatives = tuple(bounds or ()), tuple(alternatives or ())
        self._inputs: dict[tuple[str, ...], tuple] = {}

    def _recomputed(self, names: tuple[str, ...]):
        """(expected, bounds, alternatives, call) with the inputs as ``names`` read them; None where
        the reference fails on them or gives another number of outputs."""
        key = tuple(n for n in names if n in latitudes.INPUT_LATITUDES)
        if not key:
            return self.expected, self.bounds, self.alternatives, self.call
        if key not in self._inputs:
            moved = latitudes.transformed_call(self.call, self.spec, key)
            try:
                with np.errstate(all="ignore"):
                    raw = reference(moved)
            except Exception:  # the reference refuses the transformed inputs: no model, the strict verdict stands
                raw = []
            expected = tuple(r for r in raw if r is not None)
            if len(expected) != len(self.expected):
                self._inputs[key] = None
            else:
                defined = [[b for r, b in zip(raw, judged) if r is not None] for judged in (bounds(self.spec, moved, raw), alternatives(moved, raw))]
                self._inputs[key] = (expected, *(tuple(d) if len(d) == len(expected) else () for d in defined), moved)
        return self._inputs[key]

    def judge(self, i: int, actual: np.ndarray, strict: oracle.Comparison, tol, names: tuple[str, ...]) -> Compared:
        """Output ``i``, which failed the strict comparison, against the latitudes ``names``: passes
        within their model, naming the fewest of them it needs (each dropped that it passes without),
        else fails with them all named."""
        modelled = self._model(i, actual, tol, names)
        if modelled is None:
            said = ", ".join(names)
            return Compared(i, replace(strict, message=f"{strict.message} (declared latitude {said}: no model of this call)"), tol, names)
        cmp, amended = modelled
        if not cmp.ok:
            return Compared(i, replace(cmp, message=f"beyond its declared latitude {', '.join(names)}: {cmp.message}"), amended, names)
        for name in names if len(names) > 1 else ():
            fewer = tuple(n for n in names if n != name)
            again = self._model(i, actual, tol, fewer) if fewer else None
            if again is not None and again[0].ok:
                names, (cmp, amended) = fewer, again
        return Compared(i, replace(cmp, message=f"within declared latitude {', '.join(names)}"), amended, names)

    def _model(self, i: int, actual: np.ndarray, tol, names: tuple[str, ...]):
        """(the comparison of output ``i`` within the model of ``names``, its tolerance), or None."""
        modelled = self._recomputed(names)
        if modelled is None:
            return None
        expected, limits, others, call = modelled
        e = expected[i]
        bound = limits[i] if i < len(limits) and limits[i] is not None and np.shape(limits[i]) == np.shape(e) else None
        also = others[i] if i < len(others) else None
        if "fast-division" in names:
            also = latitudes.reciprocal_quotient(call, self.spec, e)
        if "ftz" in names:
            actual, e = latitudes.flush(actual), latitudes.flush(e)
            also = None if also is None else latitudes.flush(also)
        amended = latitudes.tolerance(tol, names)
        return oracle.compare(actual, e, amended, bound, also), amended
