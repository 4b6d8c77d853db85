"""Deciding whether two results agree, and measuring by how much.

Tolerances are layered and live only here (``tolerances``): the dtype default (torch.testing's
assert_close defaults), then the op spec's override, then a loosening the backend declares in
its manifest. The chosen tolerance says where it came from, so a report can print it with its
reason.

Rules (``comparison``): shapes and dtypes must match exactly; integers and bools exactly (with
exact statistics, int64 extremes included); for floating point, NaN must be where NaN is
expected, infinities must match in position and sign, and a finite element passes when it is
within ``ulp`` ULP of the expected value or within ``atol + rtol * |e|`` -- an absolute
tolerance never passes an element that is off by 100% or more of a nonzero expected value
(except for ops whose spec says they accumulate, where cancellation makes absolute error the
measure). Ops the spec marks ``exact`` (correctly rounded) compare bit for bit, and ops marked
``signed_zero`` compare the sign of zero. Every comparison records max abs error, max ULP
distance, MAE, SNR and the worst index, pass or fail. An op with a derived ``bound`` adds its
per-element accumulation bound (``bounds``); random and undefined outputs are judged by the
law their spec names (``laws``), with exact tests at one false-alarm rate (``statistics``).
Every expected output is cross-checked by one rule (``expectation``): eager held to the reference
as a backend is.
"""

from conformance.api.scalar_type import dtype_name
from conformance.oracle import bounds, comparison, expectation, laws, statistics, tolerances
from conformance.oracle.bounds import *  # noqa: F403
from conformance.oracle.comparison import *  # noqa: F403
from conformance.oracle.expectation import *  # noqa: F403
from conformance.oracle.laws import *  # noqa: F403
from conformance.oracle.statistics import *  # noqa: F403
from conformance.oracle.tolerances import *  # noqa: F403
from conformance.specs import Tolerance

__all__ = ["Tolerance", "dtype_name"]
__all__ += tolerances.__all__
__all__ += bounds.__all__
__all__ += comparison.__all__
__all__ += statistics.__all__
__all__ += laws.__all__
__all__ += expectation.__all__
