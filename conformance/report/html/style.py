"""The look every page shares (the report and the scoreboard): each category's colour, glyph and
chip, the verdict's badge and colour, and the orders of categories, dtypes and clauses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from conformance.api.scalar_type import DTYPE_ORDER
from conformance.results import COLOURS, FAILURES, Category
from conformance.specs import FAMILIES

UNKNOWN_COLOUR = "#757575"
"""A category this harness does not know (a report from a newer harness)."""

GLYPHS = {
    Category.PASS: "✓",
    Category.NOT_SUPPORTED: "–",
    Category.NOT_APPLICABLE: "·",
    Category.PREPROCESS_FAIL: "P",
    Category.INIT_FAIL: "I",
    Category.EXECUTE_FAIL: "E",
    Category.MISMATCH: "✕",
    Category.CONTRACT_VIOLATION: "C",
    Category.CRASH: "☠",
    Category.TIMEOUT: "T",
    Category.ORACLE_DISAGREEMENT: "?",
    Category.HARNESS_ERROR: "H",
    Category.SKIP: "s",
    Category.XFAIL: "x",
    Category.XPASS: "!",
}
"""One character per category, so the matrix reads without colour too."""


def category_of(value: Any) -> Category | None:
    try:
        return Category(value)
    except ValueError:
        return None


def colour_of(value: Any) -> str:
    category = category_of(value)
    return COLOURS[category] if category is not None else UNKNOWN_COLOUR


def glyph_of(value: Any) -> str:
    category = category_of(value)
    return GLYPHS.get(category, "?") if category is not None else "?"


def label_of(value: Any) -> str:
    category = category_of(value)
    return category.label if category is not None else str(value)


def ink_on(background: str) -> str:
    """Black or white, whichever reads better on ``background`` (#rrggbb)."""
    r, g, b = (int(background[i : i + 2], 16) / 255 for i in (1, 3, 5))
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    luminance = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    return "#000" if luminance > 0.35 else "#fff"


def chip_style(category: Any) -> str:
    colour = colour_of(category)
    return f"background:{colour};color:{ink_on(colour)}"


def tint_style(category: Any, strength: float = 0.16) -> str:
    """The category's colour as text on a pale wash of itself: for cells that should not shout (PASS)."""
    colour = colour_of(category)
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    wash = "#" + "".join(f"{round(255 - (255 - c) * strength):02x}" for c in (r, g, b))
    return f"background:{wash};color:{colour}"


def category_rank(value: Any) -> int:
    """Order of Category's declaration; unknown categories last."""
    names = list(Category.__members__)
    return names.index(value) if value in names else len(names)


def dtype_key(dtype: str) -> tuple[int, str]:
    return (DTYPE_ORDER.index(dtype), dtype) if dtype in DTYPE_ORDER else (len(DTYPE_ORDER), dtype)


def clause_key(clause: Any) -> tuple:
    """Clauses in the spec's order of families (PRE, RT, ... LAZY), then by number; unknown families last."""
    family, _, number = str(clause or "").partition("-")
    return (
        FAMILIES.index(family) if family in FAMILIES else len(FAMILIES),
        family,
        int(number) if number.isdigit() else 0,
        number,
    )


def shorten(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_failure(value: Any) -> bool:
    category = category_of(value)
    return category is not None and category in FAILURES


VERDICT_COLOURS = {"certified": COLOURS[Category.PASS], "failed": "#c62828", "incomplete": "#9a6700"}
VERDICT_BADGES = {"certified": "CERTIFIED", "failed": "NOT CERTIFIED", "incomplete": "NOT CERTIFIED (incomplete)"}


def verdict_state(verdict: Mapping[str, Any]) -> str:
    """certified; failed (a failing check, or a mandatory op x dtype not supported); or incomplete
    (inconclusive or not run, nothing failing)."""
    if verdict.get("certified"):
        return "certified"
    return "failed" if verdict.get("failing_clauses") or verdict.get("unsupported") else "incomplete"
