"""Hypothesis settings profiles shared by the project's tests and certification runs.

ci        deterministic (derandomize), 8 examples per op x dtype: CI and the default certify
          run (2001 op x dtype pairs in the full profile: 16,000 examples)
dev       hypothesis' default example count, random, with its example database
thorough  many examples, for nightly or pre-release certification
Select with ``--hypothesis-profile NAME`` (hypothesis' own pytest option; certify's too); ``ci`` is loaded by default.

``register`` also makes every draw independent of what the process has imported, where
``conformance.compat.hypothesis.draw_only_global_constants`` can (its docstring says why and how).
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

from conformance.compat import hypothesis as compat_hypothesis

_SLOW_DRAWS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def register() -> None:
    compat_hypothesis.draw_only_global_constants()
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
