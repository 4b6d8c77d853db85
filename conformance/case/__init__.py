"""One numerics case: a drawn ``Call`` through eager, the reference kernel and a backend, compared.

``run`` is the one execution path of a numerics example. The NUM check (its bookkeeping:
counts, refusals by kind, worst statistics, batches), ``python -m conformance replay`` and
the ExecuTorch blob fuzzing call it; it keeps no counts and knows nothing of pytest.

1. Expected outputs: PyTorch eager and the reference kernel on the call. Eager refusing the
   call is HARNESS_ERROR (the op spec's domain is wrong); the reference failing, or disagreeing
   with eager beyond the op's tolerance, is ORACLE_DISAGREEMENT. A caller that already has
   expected outputs (a layout re-run, a saved example) passes them and none are computed.
2. The single-op program (``program_for``), its outputs described from eager's where the op
   makes fresh tensors (PyTorch's meta kernel costs more than the rest of the program). A call
   PyTorch's own tracing refuses, or shapes unlike eager, is set aside (SKIP): no backend can
   honour both. Whether it does is asked of the meta kernel only when the backend's verdict is
   not PASS: then the case stands as it is where the meta kernel describes the same outputs, is
   set aside where it refuses the call or disagrees with eager, and runs again on the meta
   kernel's program where only strides differ. The verdict is the one a program built by the
   meta kernel from the start would get.
3. preprocess -> init -> execute -> destroy through the ``Driver``, the inputs in ``layout``;
   ``blob`` replaces preprocess's processed bytes at init, ``preprocessed`` reuses an earlier
   preprocess result instead of running preprocess again. A stage's ``CheckFailure`` is the
   verdict (NOT_SUPPORTED for a clean refusal).
4. Every output compared with the oracle's layered tolerance
   (``oracle.tolerance_for(spec, dtype, backend.manifest, op)``), or held to the op's law where its
   values are random or undefined (op spec ``values``, ``oracle.compare_outputs``); the first that
   differs is the MISMATCH.

Messages name the call (``Call.describe``) and never a caller's label: a check prefixes its own.
"""

from conformance.case.accumulation import bounds
from conformance.case.comparing import compare
from conformance.case.expected import alternatives, expectations, expected_outputs, reference
from conformance.case.outcome import Compared, Outcome, Prepared
from conformance.case.running import declared_shapes, prepare, run

__all__ = [
    "Compared", "Outcome", "Prepared", "alternatives", "bounds", "compare", "declared_shapes", "expectations",
    "expected_outputs", "prepare", "reference", "run",
]  # fmt: skip
