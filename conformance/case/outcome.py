"""The records of one numerics case: an output's comparison (``Compared``), what a case needs before
the backend (``Prepared``) and its verdict with everything it ran (``Outcome``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from conformance import oracle
from conformance.programs import Program
from conformance.results import Category, CheckFailure


@dataclass(frozen=True)
class Compared:
    """One output's comparison with its expected value, and the tolerance it was held to."""

    index: int
    comparison: oracle.Comparison
    tolerance: Any  # conformance.specs.Tolerance
    latitudes: tuple[str, ...] = ()
    """The declared latitudes this output was judged by (conformance.latitudes): those it passed
    under where the strict comparison failed (reassociation: passed within the bound, not bit for
    bit), or those it failed beyond."""

    @property
    def ok(self) -> bool:
        return self.comparison.ok


@dataclass(frozen=True)
class Prepared:
    """What a case needs before the backend: the expected outputs and the program."""

    expected: tuple[np.ndarray, ...]
    program: Program
    bounds: tuple[np.ndarray | None, ...] = ()
    """Per expected output, its accumulation bound (``bounds``), None where the op derives none."""
    alternatives: tuple[np.ndarray | None, ...] = ()
    """Per expected output, the other result eager's paths accept (``alternatives``), if any."""


@dataclass(frozen=True, eq=False)
class Outcome:
    """The verdict of one case, and everything it ran."""

    category: Category
    """PASS, MISMATCH, a stage's category (NOT_SUPPORTED for a clean refusal), HARNESS_ERROR or
    ORACLE_DISAGREEMENT before the backend ran, SKIP for a call set aside (see ``prepare``)."""
    message: str = ""
    """The verdict naming the call ("" on PASS), without any caller's label."""
    detail: str = ""
    """A failed stage's own message (the driver's), or why a call was set aside."""
    stage: str | None = None
    """The contract stage that failed (preprocess, init, execute, destroy), if one did."""
    stats: dict = field(default_factory=dict)
    """The failure's statistics: the differing output's comparison, or the stage's."""
    expected: tuple[np.ndarray, ...] | None = None
    outputs: tuple[np.ndarray, ...] | None = None
    """What the backend wrote (None unless execute returned)."""
    comparisons: tuple[Compared, ...] = ()
    """Every output compared (empty unless execute returned)."""
    program: Program | None = None
    preprocessed: Any = None
    """preprocess's PreprocessResult (or the one passed in), None if preprocess did not return."""
    blob: bytes | None = None
    """The processed bytes init was given (preprocess's or the override), None before init."""
    seconds: float | None = None
    """Wall time of the backend's stages; None when the backend was not run."""

    @property
    def ok(self) -> bool:
        return self.category is Category.PASS

    @property
    def ran(self) -> bool:
        """Whether the backend was run (refusals included)."""
        return self.seconds is not None

    @property
    def differing(self) -> Compared | None:
        """The first output that differs, if one does."""
        return next((c for c in self.comparisons if not c.ok), None)

    def failure(self, prefix: str = "", **stats) -> CheckFailure:
        """The outcome as the ``CheckFailure`` a check raises (``prefix`` before the message, ``stats`` after its own)."""
        return CheckFailure(self.category, f"{prefix}{self.message}", stats={**self.stats, **stats}, stage=self.stage)
