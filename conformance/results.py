"""Result categories: one enum, one mapping to labels and colours.

A fault of the harness (HARNESS_ERROR) or of the reference (ORACLE_DISAGREEMENT)
is its own category and never counts against the backend.
"""

from __future__ import annotations

from enum import Enum


class Category(str, Enum):
    PASS = "PASS"
    NOT_SUPPORTED = "NOT_SUPPORTED"
    """Refused cleanly and not claimed. Shown, never counted as a pass."""
    NOT_APPLICABLE = "NOT_APPLICABLE"
    """The clause cannot be observed on this backend; the manifest says why."""
    PREPROCESS_FAIL = "PREPROCESS_FAIL"
    INIT_FAIL = "INIT_FAIL"
    EXECUTE_FAIL = "EXECUTE_FAIL"
    MISMATCH = "MISMATCH"
    CONTRACT_VIOLATION = "CONTRACT_VIOLATION"
    CRASH = "CRASH"
    """The process died (the check ran in a pytest-xdist worker that was lost)."""
    TIMEOUT = "TIMEOUT"
    ORACLE_DISAGREEMENT = "ORACLE_DISAGREEMENT"
    """The reference and PyTorch eager disagree: a harness or spec bug, not the backend's."""
    HARNESS_ERROR = "HARNESS_ERROR"
    """The harness failed to build what the check needs (export, strategy)."""
    SKIP = "SKIP"
    XFAIL = "XFAIL"
    XPASS = "XPASS"

    @property
    def is_failure(self) -> bool:
        """Counts against the backend's verdict."""
        return self in FAILURES

    @property
    def label(self) -> str:
        return self.value.replace("_", " ").lower()

    @property
    def colour(self) -> str:
        return COLOURS[self]


FAILURES = frozenset(
    {
        Category.PREPROCESS_FAIL,
        Category.INIT_FAIL,
        Category.EXECUTE_FAIL,
        Category.MISMATCH,
        Category.CONTRACT_VIOLATION,
        Category.CRASH,
        Category.TIMEOUT,
        Category.XPASS,
    }
)
INCONCLUSIVE = frozenset({Category.ORACLE_DISAGREEMENT, Category.HARNESS_ERROR})
"""Results that say nothing about the backend; a mandatory one leaves the verdict open."""

COLOURS = {
    Category.PASS: "#2e7d32",
    Category.NOT_SUPPORTED: "#9e9e9e",
    Category.NOT_APPLICABLE: "#bdbdbd",
    Category.PREPROCESS_FAIL: "#c62828",
    Category.INIT_FAIL: "#c62828",
    Category.EXECUTE_FAIL: "#c62828",
    Category.MISMATCH: "#d84315",
    Category.CONTRACT_VIOLATION: "#6a1b9a",
    Category.CRASH: "#000000",
    Category.TIMEOUT: "#4e342e",
    Category.ORACLE_DISAGREEMENT: "#f9a825",
    Category.HARNESS_ERROR: "#f9a825",
    Category.SKIP: "#e0e0e0",
    Category.XFAIL: "#90a4ae",
    Category.XPASS: "#ad1457",
}


class CheckFailure(AssertionError):
    """A check's verdict against the backend (or the harness), with its category.

    Raised inside a check; the plugin reads ``category``, ``stats`` and ``artifacts``
    from it when it builds the result. An AssertionError, so pytest and hypothesis
    treat it as an ordinary test failure (hypothesis shrinks it).
    """

    def __init__(self, category: Category, message: str, *, stats: dict | None = None, stage: str | None = None):
        super().__init__(f"{category.value}: {message}")
        self.category = category
        self.message = message
        self.stats = stats or {}
        self.stage = stage
