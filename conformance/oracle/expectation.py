"""The cross-check of every expected output: PyTorch eager held to the reference by the rule a
backend is held to, so an output of eager's passes as a backend's and the rule is one in both
directions (docs/design.md, "A verdict is sound at the margins"). NUM (conformance.case), the
contract programs (checks/_support), whole programs (checks/_whole) and the reference's own
test (tests/reference/test_kernels_vs_eager.py) all call ``expect``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from conformance.api.scalar_type import dtype_name
from conformance.oracle.comparison import compare
from conformance.oracle.laws import compare_outputs, undefined_output
from conformance.oracle.tolerances import tolerance_for
from conformance.results import Category, CheckFailure
from conformance.specs import OpSpec, Tolerance

__all__ = ["expect"]


def expect(reference, eager, *, what: str, spec: OpSpec | None = None, call=None, tolerances: Sequence[Tolerance] | None = None,
           bounds=(), alternatives=()) -> None:
    """Hold ``eager``'s outputs to the ``reference``'s (None for an output the call leaves undefined),
    as ``compare`` holds a backend's: with ``tolerances`` (per output; the op spec's per dtype where
    None), each output's accumulation ``bounds`` and the other result eager's paths accept
    (``alternatives``). An op whose spec leaves its values random or undefined (``spec.values``) has
    the reference's outputs and eager's each held to the op's law instead, never to each other.
    ``what`` names the computation in a message ("aten.add.Tensor(...)", "mlp [own inputs]").

    Raises CheckFailure ORACLE_DISAGREEMENT at the first output that fails."""
    if spec is not None and spec.values != "reference":
        tols = [tolerance_for(spec, dtype_name(e.dtype)) for e in eager]
        for whose, outputs in (("the reference", reference), ("eager", eager)):
            for i, cmp in enumerate(compare_outputs(spec, call, outputs, eager, tols)):
                if not cmp.ok:
                    raise CheckFailure(
                        Category.ORACLE_DISAGREEMENT,
                        f"{whose} breaks the law of {what} (values = {spec.values!r}) in output {i}: {cmp.message}",
                        stats=cmp.stats(),
                    )
        return
    for i, (r, e) in enumerate(zip(reference, eager)):
        if r is None:
            continue  # an output the call leaves undefined (output_mask): eager may compute it anyway
        if undefined_output(spec, call, i) is not None:
            continue  # values eager leaves undefined for this call (op spec defined_outputs)
        if e is None:
            raise CheckFailure(Category.ORACLE_DISAGREEMENT, f"eager leaves output {i} of {what} undefined, the reference does not")
        r = np.asarray(r)
        tol = tolerances[i] if tolerances is not None else tolerance_for(spec, dtype_name(r.dtype))
        limit = bounds[i] if i < len(bounds) and bounds[i] is not None and np.shape(bounds[i]) == r.shape else None
        other = alternatives[i] if i < len(alternatives) else None
        cmp = compare(e, r, tol, limit, other)
        if not cmp.ok:
            raise CheckFailure(
                Category.ORACLE_DISAGREEMENT,
                f"eager's output would fail as a backend's on {what} output {i} (eager held to the reference by the "
                f"backend's rule): {cmp.message}",
                stats=cmp.stats(),
            )
