"""Hypothesis settings profiles shared by the project's tests and certification runs.

ci        deterministic (derandomize), 8 examples per op x dtype: CI and the default certify
          run (2001 op x dtype pairs in the full profile: 16,000 examples)
dev       hypothesis' default example count, random, with its example database
thorough  many examples, for nightly or pre-release certification
Select with ``--hypothesis-profile NAME`` (hypothesis' own pytest option; certify's too); ``ci`` is loaded by default.

``register`` also makes every draw independent of what the process has imported. Hypothesis
6.170 draws, with probability ~5%, a "local constant": one of the literals it scans out of
every module loaded from outside site-packages and the standard library (the harness, the
reference, a backend given by path, whatever a pytest-xdist worker happened to import for the
checks it ran before). So the examples of a check depended on how the checks were distributed
over workers, i.e. on load, and a backend's own source could change what it is tested with.
Hypothesis offers no switch for it (6.170.15: searched its settings, environment variables and
docs), so ``register`` replaces the internal scan with a fixed empty pool: draws still come
from hypothesis' global constants (the same in every process), never from local ones. The
hook is internal, so it is checked and the failure is loud; pyproject.toml pins hypothesis to
the series it was checked against.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

_SLOW_DRAWS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
CHECKED_SERIES = "6.170"
"""The hypothesis minor series whose internals ``draw_only_global_constants`` was written for."""


class HypothesisInternalsChanged(RuntimeError):
    """The installed hypothesis no longer has the local-constants hook this module replaces."""


def draw_only_global_constants() -> None:
    """Make hypothesis draw from its fixed global constants only, never from constants of the
    modules this process happens to have loaded. Idempotent; raises HypothesisInternalsChanged
    when hypothesis' internals are not the ones this was written for."""
    import hypothesis

    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants

        current = providers._get_local_constants
        reads = providers.HypothesisProvider._local_constants.func.__code__.co_names
        draws = providers.HypothesisProvider._maybe_draw_constant.__code__.co_names
        cache = providers.CONSTANTS_CACHE.cache
        problem = None
        if not callable(current):
            problem = "providers._get_local_constants is not a function"
        elif "_get_local_constants" not in reads:
            problem = "HypothesisProvider._local_constants no longer calls providers._get_local_constants"
        elif "_local_constants" not in draws or "GLOBAL_CONSTANTS" not in draws:
            problem = "HypothesisProvider._maybe_draw_constant no longer draws from _local_constants and GLOBAL_CONSTANTS"
    except (ImportError, AttributeError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem is not None:
        raise HypothesisInternalsChanged(
            f"hypothesis {hypothesis.__version__} changed the internals that conformance/strategies/profiles.py "
            f"replaces to keep draws independent of the modules a process has loaded ({problem}). Without it a "
            f"check's examples depend on which checks its pytest-xdist worker ran before. Install hypothesis "
            f"{CHECKED_SERIES}.* (pyproject.toml pins it) or update profiles.draw_only_global_constants for this version."
        )
    if getattr(current, "_conformance_global_only", False):
        return
    empty = Constants()

    def no_local_constants() -> Constants:
        return empty

    no_local_constants._conformance_global_only = True  # type: ignore[attr-defined]
    providers._get_local_constants = no_local_constants
    cache.clear()  # pools computed with local constants before now


def register() -> None:
    draw_only_global_constants()
    settings.register_profile(
        "ci",
        derandomize=True,
        max_examples=8,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=_SLOW_DRAWS,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    )
    settings.register_profile("dev", max_examples=100, deadline=None, suppress_health_check=_SLOW_DRAWS)
    settings.register_profile("thorough", max_examples=1000, deadline=None, suppress_health_check=_SLOW_DRAWS)
    settings.load_profile("ci")  # hypothesis' pytest plugin then loads the one --hypothesis-profile names
