"""report.json -> Markdown: verdict first, fit for a pull-request comment. A pure function."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from tabulate import tabulate

from conformance.api.scalar_type import DTYPE_ORDER
from conformance.report import safe
from conformance.report.document import read_report
from conformance.report.model import records
from conformance.results import REFUSAL_LEAD, Category, listed_results
from conformance.specs import EDGE_KINDS

MARKS = {
    Category.PASS.value: "✅",
    Category.NOT_SUPPORTED.value: "—",
    Category.NOT_APPLICABLE.value: "n/a",
    Category.MISMATCH.value: "❌",
    Category.PREPROCESS_FAIL.value: "⛔",
    Category.INIT_FAIL.value: "⛔",
    Category.EXECUTE_FAIL.value: "⛔",
    Category.CONTRACT_VIOLATION.value: "⚠️",
    Category.CRASH.value: "💥",
    Category.TIMEOUT.value: "⏱",
    Category.ORACLE_DISAGREEMENT.value: "❓",
    Category.HARNESS_ERROR.value: "❓",
}
PERF_COLUMNS = ("preprocess", "init", "execute")
INTEGRITY_LINE = "Report integrity: sha256 `{}`"
"""The last line: which report.json this rendering shows (``verify`` compares them)."""
_INTEGRITY = re.compile(r"Report integrity: sha256 `([0-9a-f]{64})`")


def _cell(text: Any) -> str:
    return safe.markdown(text)


def render(report: Mapping[str, Any], clauses: Mapping[str, Any] | None = None, *, max_failures: int = 50) -> str:
    report = read_report(report)
    backend = report["backend"]
    verdict = report["verdict"]
    summary = report["summary"]
    icon = "✅" if verdict["certified"] else "❌"
    lines = [
        f"# {icon} {_cell(backend['name'])}: {verdict['text']}",
        "",
        f"Backend version `{safe.code(backend['version'])}` · harness {report['harness']['version']} · "
        f"spec `{report['spec']['digest'][:12]}` · profile `{verdict['profile']}` · "
        f"hypothesis profile `{report['run']['hypothesis_profile']}`",
        "",
    ]
    if report["run"].get("partial"):
        lines += [f"> ⚠️ **Partial run**: {_cell(report['run']['partial'])}. The results below are those it finished.", ""]
    counts = summary["counts"]
    lines += [
        "## Results",
        "",
        tabulate(
            [(c, counts[c]) for c in sorted(counts, key=lambda c: list(Category.__members__).index(c))],
            headers=["category", "count"],
            tablefmt="github",
        ),
        "",
        f"Mandatory checks passed: **{summary['mandatory']['passed']} / {summary['mandatory']['total']}**. "
        f"Numerics: {summary['numerics']['passed']} / {summary['numerics']['total']} op x dtype pass "
        f"({summary['numerics']['not_supported']} not supported) over {summary['numerics']['ops']} ops and "
        f"{summary['numerics']['dtypes']} dtypes.",
        "",
    ]
    unsupported = verdict.get("unsupported") or []
    if verdict["failing_clauses"] or unsupported or verdict["inconclusive"] or verdict["not_run"]:
        lines += ["## Why not certified", ""]
        failing_ids = set(verdict.get("failing") or ())
        per_clause: dict[str, int] = defaultdict(int)
        for r in records(report["results"]):
            if r.id in failing_ids:
                per_clause[r.clause] += 1
        rows = []
        for clause in verdict["failing_clauses"]:
            meaning = clauses[clause].text if clauses and clause in clauses else ""
            rows.append((clause, per_clause.get(clause, 0), _cell(meaning)))
        if rows:
            lines += ["Failing clauses (each failure is listed under Failures below):", ""]
            lines += [tabulate(rows, headers=["clause", "failing checks", "what must hold"], tablefmt="github"), ""]
        if unsupported:
            shown = ", ".join(f"`{_cell(u)}`" for u in unsupported[:30])
            more = f" and {len(unsupported) - 30} more" if len(unsupported) > 30 else ""
            way_out = (
                "" if verdict["profile"].startswith("claimed")
                else " To certify only what the backend claims, run with `--profile claimed` (or a profiles file of your own)."
            )
            lines += [
                f"**{len(unsupported)} mandatory op x dtype(s) not supported**: the backend refused them cleanly "
                f"(NOT_SUPPORTED), which is not a failure of any check, but profile `{verdict['profile']}` requires them: "
                f"{shown}{more}.{way_out}",
                "",
            ]
        if verdict["inconclusive"]:
            lines += [f"Inconclusive (harness or reference at fault): {', '.join(verdict['inconclusive'][:20])}", ""]
        if verdict["not_run"]:
            lines += [f"Mandatory but not run: {', '.join(verdict['not_run'][:20])}", ""]
    failures = [r for r in records(report["results"]) if r.category.is_failure]
    if failures:
        lines += ["## Failures", ""]
        rows = [
            (_cell(r.id), r.category.value, _cell(safe.plain(r.message, 300)), f"`{safe.code(r.replay)}`" if r.replay else "")
            for r in failures[:max_failures]
        ]
        lines += [tabulate(rows, headers=["check", "category", "message", "replay"], tablefmt="github"), ""]
        if len(failures) > max_failures:
            lines += [f"... and {len(failures) - max_failures} more in report.json.", ""]
        by_kind = failures_by_kind(report)
        if by_kind:
            lines += [
                "### Failing cases by kind",
                "",
                "A failing op x dtype check runs its remaining cases (edge set, layouts, hypothesis draws) within a budget of time "
                "after its first failure, which stays its verdict and its replay. Each outcome is listed with the kinds of case "
                "every one of its failures has (failing of run), or else its commonest.",
                "",
                tabulate(by_kind, headers=["op", "dtype", "result", "failed / ran", "ran after the first", "by outcome"], tablefmt="github"),
                "",
            ]
    depth = numerics_depth(report)
    if depth["checks"]:
        lines += [
            "## Depth of the numerics",
            "",
            f"{depth['checks']} op x dtype checks compared {depth['compared']} programs with the reference: "
            f"{depth['examples']} hypothesis examples and the deterministic edge set below; "
            f"{depth['layouts']} runs with non-contiguous inputs ({', '.join(f'{k} {v}' for k, v in sorted(depth['by_layout'].items()))}).",
            "",
            tabulate(
                [(k, depth["applied"].get(k, 0), depth["not_applicable"].get(k, 0)) for k in EDGE_KINDS],
                headers=["edge case", "applied", "not applicable to the op"],
                tablefmt="github",
            ),
            "",
        ]
    scope = report["spec"].get("out_of_scope") or {}
    if scope:
        lines += [
            "## Core ATen overloads no check certifies",
            "",
            f"Every overload torch tags core has an op spec, except these {len(scope)} (specs/scope.toml):",
            "",
            tabulate([(f"`{safe.code(name)}`", _cell(why)) for name, why in sorted(scope.items())],
                     headers=["overload", "why"], tablefmt="github"),
            "",
        ]
    refused = refusal_groups(report)
    if refused:
        checks = sum(g["checks"] for g in refused)
        lines += [
            "## Not supported: what the backend refused",
            "",
            f"{checks} op x dtype check(s) refused on every draw (NOT_SUPPORTED), {len(refused)} refusal(s): each is shown once "
            "(the first refused draw's message) with the ops and dtypes it covers. " + REFUSAL_NOTE,
            "",
            unpadded_table([(_cell(g["refusal"]), g["checks"], _cell(ops_and_dtypes(g["ops"]))) for g in refused],
                           ["refusal", "checks", "op (dtypes)"]),
            "",
        ]
    domain = supported_domain(report)
    if domain:
        lines += [
            "## Supported domain: what the backend partly refused",
            "",
            "Every op x dtype check keeps drawing after a refusal and compares every draw the backend takes; "
            "these compared some draws and refused others (kinds it never took are listed as always refused).",
            "",
            unpadded_table(domain, ["op", "dtype", "result", "compared", "refused", "by kind"]),
            "",
        ]
    for heading, note, rows, columns in (
        ("Models", MODELS_NOTE, model_table(report), MODEL_COLUMNS),
        ("Quantized programs", QUANTIZED_NOTE, quantized_table(report), QUANTIZED_COLUMNS),
    ):
        if rows:
            lines += [f"## {heading}", "", note, "", tabulate(rows, headers=columns, tablefmt="github"), ""]
    matrix = op_dtype_matrix(report)
    if matrix:
        dtypes = sorted({d for row in matrix.values() for d in row})
        rows = [[op] + [MARKS.get(matrix[op].get(d, ""), matrix[op].get(d, "")) for d in dtypes] for op in sorted(matrix)]
        lines += ["## Operators x dtypes", "", unpadded_table([[_cell(r[0]), *r[1:]] for r in rows], ["op"] + dtypes), ""]
        lines += ["✅ pass · ❌ mismatch · ⛔ stage failure · ⚠️ contract violation · 💥 crash · ⏱ timeout · — not supported · ❓ inconclusive", ""]
    perf = performance_table(report)
    gaps = performance_gaps(report)
    devices = performance_devices(report)
    if gaps and not perf:
        lines += ["## Performance", "", gaps, ""]
    if perf:
        lines += ["## Performance (median, backend / reference and backend / eager)", ""]
        if devices:
            lines += [_cell(devices), ""]
        if gaps:
            lines += [gaps, ""]
        lines += [
            tabulate(
                perf,
                headers=["program", "stage", "backend ms", "reference ms", "eager ms", "vs reference", "vs eager"],
                tablefmt="github",
                floatfmt=".3f",
            ),
            "",
        ]
    env = report["environment"]
    lines += [
        "## Environment",
        "",
        f"Python {env['python']}, torch {env['torch']}, numpy {env['numpy']}, ml_dtypes {env['ml_dtypes']}, "
        f"{_cell(env['cpu'])} x{env['cpu_count']}, {env['os']}."
        + "".join(f" {_cell(d.get('name', '?'))} (compute capability {d.get('compute_capability', '?')}, CUDA {d.get('cuda', '?')})." for d in env.get("devices") or [] if isinstance(d, dict)),
        "",
        INTEGRITY_LINE.format((report.get("integrity") or {}).get("sha256", "")),
        "",
    ]
    return "\n".join(lines)


def unpadded_table(rows: list[tuple], headers: list[str]) -> str:
    """A GitHub table whose cells are not padded to their column's width: for tables with long
    cells or many rows, where padding would multiply the file's size (cells already ``_cell``'d)."""
    lines = [f"| {' | '.join(headers)} |", f"|{'|'.join('---' for _ in headers)}|"]
    lines += [f"| {' | '.join(str(c) for c in row)} |" for row in rows]
    return "\n".join(lines)


def embedded_hash(text: str) -> str | None:
    """The integrity sha256 named on the last line of a rendering (None without one)."""
    last = next((line for line in reversed(text.splitlines()) if line.strip()), "")
    found = _INTEGRITY.fullmatch(last.strip())
    return found.group(1) if found else None


def numerics_depth(report: Mapping[str, Any]) -> dict[str, Any]:
    """What the NUM checks compared: programs, hypothesis examples, edge cases by kind, layouts."""
    out: dict[str, Any] = {"checks": 0, "compared": 0, "examples": 0, "layouts": 0, "by_layout": {}, "applied": {}, "not_applicable": {}}
    for r in records(report["results"]):
        stats = r.stats
        if r.family != "NUM" or "edge_cases" not in stats:
            continue
        out["checks"] += 1
        out["compared"] += int(stats.get("compared") or 0)
        out["examples"] += int(stats.get("examples") or 0)
        for layout, runs in (stats.get("layouts") or {}).items():  # runs per layout (report/2)
            out["layouts"] += int(runs)
            out["by_layout"][layout] = out["by_layout"].get(layout, 0) + int(runs)
        for key, field in (("applied", "edge_cases"), ("not_applicable", "edge_cases_not_applicable")):
            for kind, n in (stats.get(field) or {}).items():
                out[key][kind] = out[key].get(kind, 0) + int(n)
    return out


def supported_domain(report: Mapping[str, Any]) -> list[tuple]:
    """(op, dtype, category, compared, refused, summary) of every NUM check that refused a draw and
    compared others (one refused on every draw is in ``refusal_groups``)."""
    rows = []
    for r in records(report["results"]):
        stats = r.stats
        if r.family == "NUM" and int(stats.get("refused") or 0) > 0 and not refused_entirely(r.to_json()):
            summary = str(stats.get("refusal_summary", "")).partition(": ")[2]
            rows.append((_cell(r.op or ""), r.dtype or "", r.category.value, int(stats.get("compared") or 0), int(stats["refused"]), _cell(summary)))
    return sorted(rows)


REFUSAL_NOTE = "Long hexadecimal names (a program's file, an address), which differ from program to program, are shown as …."
_CASE_LABEL = re.compile(r"^\[[^\]]*\] ")
_HEX_NAME = re.compile(r"(?:0x)?[0-9a-f]{12,}")


def refused_entirely(r: Mapping[str, Any]) -> bool:
    """A NUM check (a result as report.json holds it) the backend refused on every draw:
    NOT_SUPPORTED, nothing compared. Plain JSON, so a newer harness's report renders too."""
    stats = r.get("stats") or {}
    return str(r.get("clause") or "").startswith("NUM-") and r.get("category") == Category.NOT_SUPPORTED.value and not stats.get("compared")


def refusal(r: Mapping[str, Any], *, mask: bool = True) -> str:
    """What a NUM check refused on every draw says, without what is its own: the lead naming the op,
    the dtype and the draws (``REFUSAL_LEAD``), the label of the case refused first, and (``mask``)
    long hexadecimal names, shown as …, so that checks refused for one reason say the same."""
    message, op, dtype = str(r.get("message") or ""), r.get("op"), r.get("dtype")
    summary = (r.get("stats") or {}).get("refusal_summary")
    lead = REFUSAL_LEAD.format(op=op, dtype=dtype, summary=summary) if isinstance(summary, str) else f"{op} {dtype}: "
    text = _CASE_LABEL.sub("", message[len(lead) :] if message.startswith(lead) else message.removeprefix(f"{op} {dtype}: "))
    return (_HEX_NAME.sub("…", text) if mask else text) or "(no message)"


def refusal_groups(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The NUM checks refused on every draw (NOT_SUPPORTED, nothing compared), one group per
    ``refusal``: {"refusal", "checks", "ops": [(op, [dtype, ...]), ...]}, most checks first."""
    groups: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for r in listed_results(report["results"]):
        if r.get("op") and refused_entirely(r):
            groups[refusal(r)][str(r["op"])].append(str(r.get("dtype") or ""))
    out = [
        {"refusal": text, "checks": sum(map(len, ops.values())),
         "ops": [(op, sorted(dtypes, key=_dtype_rank)) for op, dtypes in sorted(ops.items())]}
        for text, ops in groups.items()
    ]  # fmt: skip
    return sorted(out, key=lambda g: (-g["checks"], g["refusal"]))


def _dtype_rank(dtype: str) -> tuple[int, str]:
    return (DTYPE_ORDER.index(dtype), dtype) if dtype in DTYPE_ORDER else (len(DTYPE_ORDER), dtype)


def ops_and_dtypes(ops: list[tuple[str, list[str]]]) -> str:
    """"aten.add.Tensor (float16, float32), aten.mul.Tensor (int32)"."""
    return ", ".join(f"{op} ({', '.join(dtypes)})" for op, dtypes in ops)


def failures_by_kind(report: Mapping[str, Any]) -> list[tuple]:
    """(op, dtype, category, failed / ran, ran after the first, outcomes) of every check with a failure summary."""
    rows = []
    for r in records(report["results"]):
        f = r.failures
        if f is None:
            continue
        after = f"{f.after_first}" + (f" (cut short: {f.budget_s:g} s budget)" if f.cut_short else "")
        rows.append((_cell(r.op or r.id), r.dtype or "", r.category.value, f"{f.failed} / {f.ran}", after, _cell(f.outcome_words())))
    return sorted(rows)


MODEL_COLUMNS = ("model", "result", "depth", "runs", "atol = rtol", "max abs", "MAE", "SNR dB", "max abs vs eager", "delegated", "first diverging op")
QUANTIZED_COLUMNS = ("program", "clause", "result", "depth", "runs", "budget (steps)", "max steps", "max steps vs eager", "delegated", "first diverging op")
MODELS_NOTE = (
    "Each model lowered once and run on its own inputs, the edge set and drawn inputs; its outputs against the "
    "reference within a tolerance of (per-op tolerance x depth). Worst over every output and run; the reference "
    "is itself checked against eager, and the backend's distance to eager is shown too."
)
QUANTIZED_NOTE = (
    "Each int8 program (PyTorch 2 export quantization with ExecuTorch's XNNPACKQuantizer) lowered once and run on its "
    "own inputs, the edge set and drawn inputs; its outputs against the reference within a budget of quantization "
    "steps of the output's scale (QNT-001, QNT-002) and on the output's quantization grid (QNT-003). \"delegated\": "
    "the part a partially delegating backend took (the rest ran on its fallback and is not counted as a pass)."
)


def model_table(report: Mapping[str, Any]) -> list[tuple]:
    """One row per MOD result (``MODEL_COLUMNS``): its verdict and its worst statistics over every output."""
    rows = []
    for r in sorted((r for r in report.get("results") or [] if (r.get("clause") or "").startswith("MOD-")), key=lambda r: str(r.get("model"))):
        stats = r.get("stats") or {}
        outputs = stats.get("outputs") or []
        eager = stats.get("outputs_vs_eager") or []
        snrs = [o["snr_db"] for o in outputs if isinstance(o.get("snr_db"), (int, float))]
        found = stats.get("localization") or {}
        rows.append((
            r.get("model"),
            r.get("category"),
            stats.get("depth", ""),
            stats.get("examples", ""),
            f"{stats['atol']:.2g}" if isinstance(stats.get("atol"), (int, float)) else "",
            f"{max(o.get('max_abs', 0) for o in outputs):.3g}" if outputs else "",
            f"{max(o.get('mae', 0) for o in outputs):.3g}" if outputs else "",
            (f"{min(snrs):.1f}" if snrs else "inf") if outputs else "",
            f"{max(o.get('max_abs', 0) for o in eager):.3g}" if eager else "",
            delegated_cell(stats),
            f"{found['node']} ({found['op']})" if found else "",
        ))  # fmt: skip
    return rows


def delegated_cell(stats: Mapping[str, Any]) -> str:
    """"69/70 ops, 100% FLOPs" for a partially delegated program (``_whole.Delegation``); "" otherwise."""
    d = stats.get("delegated")
    if not d:
        return ""
    flops = f", {100 * d['flops_fraction']:.0f}% FLOPs" if isinstance(d.get("flops_fraction"), (int, float)) else ""
    return f"{d['ops']}/{d['ops_total']} ops{flops}"


def quantized_table(report: Mapping[str, Any]) -> list[tuple]:
    """One row per QNT result (``QUANTIZED_COLUMNS``): its verdict, its budget and worst error in
    quantization steps (against the reference and eager), the delegated fraction."""
    rows = []
    results = [r for r in report.get("results") or [] if (r.get("clause") or "").startswith("QNT-")]
    for r in sorted(results, key=lambda r: (str(r.get("clause")), str(r.get("model")))):
        stats = r.get("stats") or {}
        found = stats.get("localization") or {}
        rows.append((
            r.get("model"),
            r.get("clause"),
            r.get("category"),
            stats.get("depth", ""),
            stats.get("examples", ""),
            *(f"{stats[k]:g}" if isinstance(stats.get(k), (int, float)) else "" for k in ("lsb", "max_lsb", "max_lsb_vs_eager")),
            delegated_cell(stats),
            f"{found['node']} ({found['op']})" if found else "",
        ))  # fmt: skip
    return rows


def op_dtype_matrix(report: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """op -> dtype -> category of its numerics result."""
    matrix: dict[str, dict[str, str]] = defaultdict(dict)
    for r in records(report["results"]):
        if r.family == "NUM" and r.op and r.dtype:
            matrix[r.op][r.dtype] = r.category.value
    return dict(matrix)


def performance_gaps(report: Mapping[str, Any]) -> str | None:
    """Why the backend has no timing for some performance programs (it refused them, failed them,
    they were not run), or None when every program it was timed on has a time."""
    missing: dict[str, set[str]] = defaultdict(set)
    for r in records(report["results"]):
        if r.family == "PERF" and r.runner == "backend" and r.category is not Category.PASS:
            missing[r.category.value].add(str(r.program or "?"))
    if not missing:
        return None
    parts = []
    for category, programs in sorted(missing.items()):
        why = {
            Category.NOT_SUPPORTED.value: "refused (NOT_SUPPORTED: they use ops the backend does not take)",
            Category.SKIP.value: "not run",
        }.get(category, f"not timed ({category})")
        parts.append(f"{', '.join(sorted(programs))}: {why}")
    return ("No backend timing for the performance program(s) " + "; ".join(parts)
            + ". PERF times only the contract programs (specs/interface.toml, PERF-001..003) a backend takes.")


PERF_RUNNERS = ("backend", "reference", "eager")


def performance_devices(report: Mapping[str, Any]) -> str | None:
    """Which device each runner's timings are of (the PERF results' ``measurements.device``), where
    one is not the CPU; None for a run timed on the CPU alone (or measured before results named it)."""
    devices: dict[str, set[str]] = defaultdict(set)
    for r in records(report["results"]):
        device = (r.measurements or {}).get("device") if r.family == "PERF" and r.category is Category.PASS else None
        if device:
            devices[str(r.runner)].add(safe.plain(device, 40))
    if all(d == "cpu" for found in devices.values() for d in found):
        return None
    order = sorted(devices, key=lambda runner: (PERF_RUNNERS.index(runner) if runner in PERF_RUNNERS else len(PERF_RUNNERS), runner))
    where = "; ".join(f"{runner} on {', '.join(sorted(devices[runner]))}" for runner in order)
    return (f"Timed {where}. Off the CPU, each timed region starts after the device has finished its queued work and "
            "ends only when the device has finished the region's (synchronized before the clock starts and before it stops).")


def performance_table(report: Mapping[str, Any]) -> list[tuple]:
    """Rows of (program, stage, backend, reference, eager, ratios) from PERF results."""
    medians: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for r in records(report["results"]):
        if r.family == "PERF" and r.category is Category.PASS:
            median = r.timings.get("median_ms")
            if median is not None:
                medians[(r.program, r.stage)][r.runner] = median
    rows = []
    for (program, stage), by in sorted(medians.items()):
        b, ref, eag = by.get("backend"), by.get("reference"), by.get("eager")
        rows.append(
            (
                program,
                stage,
                b,
                ref,
                eag,
                (b / ref) if b and ref else None,
                (b / eag) if b and eag else None,
            )
        )
    return rows
