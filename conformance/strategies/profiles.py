"""Hypothesis settings profiles shared by the project's tests and certification runs.

ci        deterministic (derandomize), 6 examples per op x dtype: CI and the default certify
          run (2001 op x dtype pairs in the full profile: ~12,000 examples in under 3 minutes)
dev       hypothesis' default example count, random, with its example database
thorough  many examples, for nightly or pre-release certification
Select with ``--hypothesis-profile NAME`` or ``HYPOTHESIS_PROFILE=NAME``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

PROFILES = ("ci", "dev", "thorough")
_SLOW_DRAWS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def register() -> None:
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
    settings.register_profile(
        "thorough", max_examples=1000, deadline=None, suppress_health_check=_SLOW_DRAWS
    )
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
