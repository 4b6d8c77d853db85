"""The statistical tests of the oracle, all exact and from scipy.stats, at one false-alarm rate:
the bias of a half type's rounding, and the laws of random ops' samples."""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = ["FALSE_ALARM", "bias_test"]

FALSE_ALARM = 1e-8
"""The false-alarm rate of every statistical test of a law: the probability that a correct sample
fails it. A NUM check of a random op runs a few dozen (one per case for each of eager, the reference
and the backend), so a check false-alarms with probability below 1e-6, and a full certification,
with about twenty random op x dtype checks, below 1e-5. Every test is exact at every sample size,
from scipy.stats: Kolmogorov-Smirnov by the exact distribution of its statistic (kstwo), binomial
and hypergeometric counts by their exact tails (binomtest, hypergeom), several tests at once by
Bonferroni's correction."""


def bias_test(actual: np.ndarray, expected: np.ndarray) -> dict | None:
    """Whether the elements of ``actual`` that differ from ``expected`` lean one way: above vs below
    it, and toward zero vs away from it. A correctly rounding kernel differs from the reference only
    where a near-tie went the other way, equally often each way (each direction Bernoulli(1/2));
    one that truncates lands below |e| on about half of all elements. Both counts by the exact
    binomial test (scipy.stats.binomtest, two-sided), two tests at once (Bonferroni) at
    ``FALSE_ALARM``. None when nothing differs."""
    from scipy import stats

    a, e = actual.astype(np.float64).reshape(-1), expected.astype(np.float64).reshape(-1)
    differ = a != e
    m = int(differ.sum())
    if m == 0:
        return None
    a, e = a[differ], e[differ]
    counts = {"above": int((a > e).sum()), "toward zero": int((np.abs(a) < np.abs(e)).sum())}
    p_values = {k: float(stats.binomtest(c, m, 0.5).pvalue) for k, c in counts.items()}
    kind = min(p_values, key=p_values.__getitem__)
    leaning = counts[kind] if 2 * counts[kind] >= m else m - counts[kind]
    where = {"above": ("above the expected value", "below the expected value"),
             "toward zero": ("nearer zero than the expected value", "farther from zero than the expected value")}[kind]
    detail = where[0] if 2 * counts[kind] >= m else where[1]
    return {"test": f"sign of the differing elements' errors: {kind} (exact binomial, two tests)", "statistic": counts[kind],
            "p_value": min(1.0, 2 * p_values[kind]), "false_alarm": FALSE_ALARM, "n": m, "leaning": leaning,
            "detail": f"of {m} that differ are {detail}"}  # fmt: skip


def resolution_of(dtype: np.dtype) -> float:
    """The unit roundoff of a float dtype (2**-11 for float16, 2**-8 for bfloat16): the widest gap
    between neighbours in [0.5, 1), so rounding a uniform sample into the dtype (or drawing it on a
    grid of that step, as ATen does) moves its CDF by at most this much; a normal sample's CDF moves
    by at most max |x| phi(x) = 0.242 times it."""
    return float(ml_dtypes.finfo(dtype).eps) / 2


def ks_test(x: np.ndarray, cdf, resolution: float) -> tuple[float, float]:
    """The Kolmogorov-Smirnov statistic sup |F_n - F| of sample ``x`` against the continuous CDF
    ``cdf`` (scipy.stats.kstest), and its p-value with ``resolution`` of it set aside for the dtype's
    rounding (scipy.stats.kstwo, the exact distribution of the two-sided statistic)."""
    from scipy import stats

    x = x.reshape(-1)
    statistic = float(stats.kstest(x, cdf).statistic)
    return statistic, float(stats.kstwo.sf(max(0.0, statistic - resolution), x.size))


def normal_cdf(x: np.ndarray) -> np.ndarray:
    from scipy import stats

    return stats.norm.cdf(np.asarray(x, np.float64))
