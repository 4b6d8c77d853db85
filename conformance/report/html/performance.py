"""The page's performance section: the table of timings and ratios, and the chart drawn from it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from conformance.report.markdown import performance_devices, performance_gaps, performance_table

SERIES = (("reference", "backend / reference", "#1565c0"), ("eager", "backend / eager", "#00897b"))
"""Performance ratios drawn, their legend and colour."""


def section(report: Mapping[str, Any]) -> dict[str, Any]:
    rows = performance_table(report)
    return {
        "gaps": performance_gaps(report),
        "devices": performance_devices(report) if rows else None,
        "chart": perf_chart(rows) if rows else None,
        "rows": [
            (p, s, *(_fmt(v) for v in (b, ref, eag)), *(_fmt(v, "×") for v in (rr, re))) for p, s, b, ref, eag, rr, re in rows
        ],
    }


def _fmt(value: Any, prefix: str = "") -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return ""
    return f"{prefix}{value:.3g}" if prefix else f"{value:.3f}"


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and value > 0 and math.isfinite(value)


def perf_chart(rows: list[tuple]) -> dict[str, Any]:
    """The geometry of the performance chart (``report.html.j2`` draws it as inline SVG): one group
    per (program, stage), a bar per ratio, log2 scale, a line at 1.0."""
    label_w, chart_w, value_w = 190, 620, 70
    bar_h, bar_gap, group_gap, top, bottom = 14, 3, 10, 30, 28
    ratios = [v for row in rows for v in row[5:7] if _positive(v)]
    span = max([1.0] + [abs(math.log2(v)) for v in ratios])
    span = min(float(math.ceil(span)), 10.0)

    def x_of(ratio: float) -> float:
        lg = max(-span, min(span, math.log2(ratio)))
        return label_w + chart_w * (lg + span) / (2 * span)

    groups = []
    y = top
    for program, stage, _b, _ref, _eag, vs_ref, vs_eager in rows:
        series = [
            (key, legend, colour, value) for (key, legend, colour), value in zip(SERIES, (vs_ref, vs_eager)) if _positive(value)
        ]
        if not series:
            continue
        height = len(series) * (bar_h + bar_gap) - bar_gap
        group = {"program": program, "stage": stage, "label_y": y + height / 2 + 4, "bars": []}
        for key, legend, colour, value in series:
            x0, x1 = x_of(1.0), x_of(value)
            group["bars"].append(
                {
                    "series": key,
                    "legend": legend,
                    "colour": colour,
                    "ratio": value,
                    "x": min(x0, x1),
                    "y": y,
                    "width": max(abs(x1 - x0), 1.0),
                    "end": x1,
                }
            )
            y += bar_h + bar_gap
        groups.append(group)
        y += group_gap - bar_gap
    ticks = [
        {"x": x_of(2.0**p), "label": f"×{2.0**p:g}" if p > 0 else f"×1/{2**-p}"}
        for p in range(-int(span), int(span) + 1)
        if not (span > 6 and p % 2) and p != 0  # the parity line (p == 0) has its own label
    ]
    return {
        "label_w": label_w,
        "chart_w": chart_w,
        "width": label_w + chart_w + value_w,
        "height": y + bottom,
        "bar_h": bar_h,
        "top": top,
        "bottom_y": y,
        "parity_x": x_of(1.0),
        "series": [{"x": label_w + i * 190, "text": t, "colour": c} for i, (_k, t, c) in enumerate(SERIES)],
        "ticks": ticks,
        "groups": groups,
    }
