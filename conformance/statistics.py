"""The catalog of statistics: every key a check may write into ``CaseResult.stats``, with its JSON
type and what it means.

A check records statistics with ``result.stats(name=value)`` or ``CheckFailure(..., stats={...})``;
both go through ``check``, so a misspelt name or a value of another type is a TypeError in the check
(its result a HARNESS_ERROR in the harness's own tests), never a new key in a report. The report's
schema (``json_schema``, ``$defs.result.properties.stats`` of report.schema.json) lists the same
declarations, so ``verify`` type-checks the statistics of every report too.

A declaration gives the statistic's JSON type(s) (a JSON Schema fragment of ``type`` only: what a
value nests is said in words), one sentence for a report's reader, and the clauses or families that
write it (none: any check, e.g. every comparison of an output). A check whose keys are data rather
than names (RT-051's probe labels) declares a pattern: a regular expression every such key matches,
the one clause that may write it, and the type of every value. A statistic is typed as report.json
holds it: a non-finite float is written as a string ("inf", "nan"), a tuple or an array as a list.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

WHERE = "conformance/statistics.py (CATALOG)"
"""Where a statistic is declared, as an error names it."""


@dataclass(frozen=True)
class Statistic:
    """One declared statistic: a key of ``CaseResult.stats``, or a pattern of keys."""

    name: str
    """The key; for a pattern, a regular expression every such key matches whole."""
    schema: dict[str, Any]
    """Its JSON type(s), as a JSON Schema fragment (``{"type": ...}``)."""
    description: str
    """What it means, in one sentence for a report's reader."""
    clauses: tuple[str, ...] = ()
    """The clauses or families that write it; empty for any check."""
    pattern: bool = False
    """Whether ``name`` is a pattern of keys (a check's data, such as a probe's label) rather than a key."""

    @property
    def types(self) -> tuple[str, ...]:
        declared = self.schema["type"]
        return (declared,) if isinstance(declared, str) else tuple(declared)

    def writes(self, clause: str | None) -> bool:
        """Whether a check of ``clause`` may write it: a pattern's keys are one check's data, written by
        its clauses alone; a named statistic by any check (its ``clauses`` say who writes it, for readers)."""
        if not self.pattern or clause is None:
            return True
        return clause in self.clauses or clause.split("-")[0] in self.clauses


def _t(*types: str) -> dict[str, Any]:
    return {"type": types[0] if len(types) == 1 else list(types)}


STRING, INTEGER, NUMBER, BOOLEAN, ARRAY, OBJECT = (_t(t) for t in ("string", "integer", "number", "boolean", "array", "object"))
MEASURE = _t("number", "string")
"""A float that may be infinite or NaN (written "inf", "nan"), or an integer too large to carry exactly ("123...")."""

COMPARED = ()
"""Written by every comparison of an output with its expected value (``oracle.Comparison.stats``): NUM-001,
the RT checks that run a program, MOD and QNT, and an ORACLE_DISAGREEMENT anywhere."""
LOST = ()
"""Written by the supervisor for a check whose process died or was killed (CRASH, TIMEOUT), whatever its clause."""

CATALOG: tuple[Statistic, ...] = (
    # One output against its expected value (conformance/oracle/comparison.py)
    Statistic("ok", BOOLEAN, "whether the output agreed with its expected value", COMPARED),
    Statistic("dtype", STRING, "the expected output's dtype", COMPARED),
    Statistic("shape", ARRAY, "the expected output's shape", COMPARED),
    Statistic("total", INTEGER, "elements compared", COMPARED),
    Statistic("mismatched", INTEGER, "elements beyond the tolerance (all of them when a law's test fails)", COMPARED),
    Statistic("max_abs", MEASURE, "the largest |actual - expected| over finite pairs (exact for integer dtypes)", COMPARED),
    Statistic("max_ulp", MEASURE, "the largest distance in units in the last place between actual and expected", COMPARED),
    Statistic("mae", MEASURE, "the mean absolute error", COMPARED),
    Statistic("snr_db", _t("number", "string", "null"), "signal-to-noise ratio in dB (\"inf\" for identical outputs, null when undefined)", COMPARED),
    Statistic("worst_index", _t("array", "null"), "the index of the worst element (null when no element differs)", COMPARED),
    Statistic("expected_at_worst", _t("number", "string", "boolean", "null"), "the expected value at the worst element", COMPARED),
    Statistic("actual_at_worst", _t("number", "string", "boolean", "null"), "the backend's value at the worst element", COMPARED),
    Statistic("atol", NUMBER, "the absolute tolerance the output was held to", ("NUM", "RT", "MOD", "QNT")),
    Statistic("rtol", NUMBER, "the relative tolerance the output was held to", ("NUM", "RT", "MOD", "QNT")),
    Statistic("ulp", INTEGER, "the tolerance in units in the last place", COMPARED),
    Statistic(
        "test", OBJECT, "a law's statistical test: what was tested, its statistic, p-value, false-alarm rate and sample size",
        COMPARED,
    ),
    Statistic("tolerance_source", STRING, "where the worst output's tolerance came from, when not the dtype's default", ("NUM-001",)),
    Statistic("tolerance_reason", STRING, "why that tolerance is what it is", ("NUM-001",)),
    Statistic(
        "localization", OBJECT,
        "the first operator whose output the backend computes unlike eager: node, op, debug handle, depth, how it was "
        "found, whether it differs alone, its own error statistics (node_*), and whether it ran inside the delegate",
        ("RT", "MOD", "QNT"),
    ),
    # The depth of a NUM check (conformance/checks/test_numerics.py)
    Statistic("claimed", BOOLEAN, "whether the backend's manifest claims the op and dtype", ("NUM-001",)),
    Statistic("examples", INTEGER, "hypothesis draws (NUM) or runs of the whole program (MOD, QNT)", ("NUM-001", "MOD", "QNT")),
    Statistic("edge_cases", OBJECT, "directed edge cases applied, by kind", ("NUM-001",)),
    Statistic("edge_cases_not_applicable", OBJECT, "directed edge cases that do not apply to the op, by kind", ("NUM-001",)),
    Statistic(
        "layouts", _t("array", "object"),
        "the non-contiguous input layouts checked: one name per run as a check records it, runs per layout in report.json",
        ("NUM-001",),
    ),
    Statistic("compared", INTEGER, "calls the backend took and that were compared", ("NUM-001",)),
    Statistic("refused", INTEGER, "calls the backend refused (NUM-001), or mutated blobs init refused (RT-011)", ("NUM-001", "RT-011")),
    Statistic("refusals", OBJECT, "refusals by kind of call (Call.features)", ("NUM-001",)),
    Statistic("refusal_summary", STRING, "the refusals in words: which kinds of call were always or sometimes refused", ("NUM-001",)),
    Statistic("batched", INTEGER, "calls compared through one batch program (a backend with a slow preprocess)", ("NUM-001",)),
    Statistic("latitudes_taken", OBJECT, "outputs that passed only under a declared latitude, by latitude", ("NUM-001",)),
    Statistic(
        "skipped_meta_disagreement", STRING, "the first call set aside because PyTorch itself shapes its program unlike eager",
        ("NUM-001",),
    ),
    Statistic("case", STRING, "the edge case of the first failure", ("NUM-001",)),
    Statistic("layout", STRING, "the input layout of the first failure", ("NUM-001",)),
    # A whole program: models and quantized programs (conformance/checks/_whole.py)
    Statistic("depth", INTEGER, "operator nodes on the program's longest path from an input to an output", ("MOD", "QNT")),
    Statistic("nodes", INTEGER, "operator nodes of the program (MOD, QNT, PRE-003) or nodes debug_handle_map covers (DBG-002)",
              ("MOD", "QNT", "PRE-003", "DBG-002")),
    Statistic("outputs", ARRAY, "per output, its worst error against the reference over every run (shape, max_abs, mae, max_ulp, snr_db)",
              ("MOD", "QNT")),
    Statistic("outputs_vs_eager", ARRAY, "the same against PyTorch eager", ("MOD", "QNT")),
    Statistic(
        "delegated", OBJECT, "how much of the program a partially delegating backend took: ops, FLOPs, their fractions, the ops left outside",
        ("MOD", "QNT"),
    ),
    Statistic("quantizer", STRING, "the quantizer that made the int8 program", ("QNT",)),
    Statistic("lsb", NUMBER, "the tolerance in quantization steps", ("QNT",)),
    Statistic("grids", ARRAY, "each output's quantization grid: scale, zero point, range", ("QNT",)),
    Statistic("max_lsb", MEASURE, "the worst error against the reference in quantization steps", ("QNT",)),
    Statistic("max_lsb_vs_eager", MEASURE, "the worst error against PyTorch eager in quantization steps", ("QNT",)),
    Statistic("off_grid", INTEGER, "output values off the grid of their dequantize", ("QNT-003",)),
    Statistic("output", INTEGER, "the output with values off its grid", ("QNT-003",)),
    Statistic("index", ARRAY, "the index of the first value off its grid", ("QNT",)),
    Statistic("value", MEASURE, "the first value off its grid", ("QNT-003",)),
    Statistic(
        "input_ties", _t("integer", "string"),
        "input elements quantized from exact ties of their grid, or why no such input was checked", ("QNT",),
    ),
    Statistic("input_ties_off", INTEGER, "elements of an exact-tie input quantized to the wrong step", ("QNT",)),
    Statistic("input", INTEGER, "the program input whose exact ties were quantized wrongly", ("QNT",)),
    # Preprocess (conformance/checks/test_preprocess.py)
    Statistic("processed_bytes", INTEGER, "bytes of the processed blob", ("PRE-001", "PRE-008")),
    Statistic("meta_entries", INTEGER, "node metadata entries of the program given to preprocess", ("PRE-003",)),
    Statistic("nodes_with_stack_trace", INTEGER, "nodes carrying meta['stack_trace']", ("PRE-003",)),
    Statistic("nodes_with_nn_module_stack", INTEGER, "nodes carrying meta['nn_module_stack']", ("PRE-003",)),
    Statistic("nodes_with_from_node", INTEGER, "nodes carrying meta['from_node']", ("PRE-003",)),
    Statistic("nodes_with_val", INTEGER, "nodes carrying meta['val']", ("PRE-003",)),
    Statistic("programs", INTEGER, "contract programs whose named data was checked", ("PRE-005",)),
    Statistic("partitions", INTEGER, "partitions the backend's partitioner proposed", ("PRE-007",)),
    Statistic("processes", INTEGER, "fresh processes that preprocessed the same program", ("PRE-008",)),
    # Runtime (conformance/checks/test_runtime.py, _leaks.py)
    Statistic("handles", INTEGER, "handles initialized from one blob and used interleaved", ("RT-003",)),
    Statistic("probes", ARRAY, "the wrong dtypes or shapes execute refused", ("RT-009", "RT-010")),
    Statistic("accepted", INTEGER, "mutated blobs init accepted (and execute then ran or refused cleanly)", ("RT-011",)),
    Statistic("lengths_checked", INTEGER, "truncated lengths of the blob init refused", ("RT-012",)),
    Statistic("init", STRING, "what init did with an exhausted runtime allocator: the error it returned, or succeeded", ("RT-014",)),
    Statistic("execute", STRING, "what execute did with an exhausted temp allocator: the error it returned, or succeeded", ("RT-014",)),
    Statistic("threads", INTEGER, "threads executing one handle at once", ("RT-015",)),
    Statistic("executions", INTEGER, "executions across those threads", ("RT-015",)),
    Statistic("resources_grown", OBJECT, "growth of file descriptors and threads over the init/destroy cycles, by resource", ("RT-016",)),
    Statistic("resource_cycles", INTEGER, "init/destroy cycles the resources were counted over", ("RT-016",)),
    Statistic("budget_bytes_per_op", OBJECT, "the memory growth allowed per operation, by measure", ("RT-016", "RT-018")),
    Statistic("threads_left", ARRAY, "Python threads still running after every handle was destroyed (name, daemon or not)", ("RT",)),
    Statistic("later_inits", INTEGER, "inits after the first one that were checked", ("RT-019",)),
    # TorchScript lowering (conformance/checks/test_torchscript.py)
    Statistic("archive_bytes", INTEGER, "bytes of the lowered module saved with torch.jit.save", ("RT-050",)),
    Statistic("outcome", STRING, "how the lowered module ran on its program's inputs: ok or error", ("RT-050",)),
    Statistic("repeatable_before_save", BOOLEAN, "whether two runs before the round trip gave bitwise the same outputs", ("RT-050",)),
    Statistic(
        r"^input 0 as [a-z0-9_]+$", STRING, "the error execute returned for input 0 in another dtype (the key names the dtype)",
        ("RT-051",), pattern=True,
    ),
    Statistic(
        r"^a larger input 0 \[[0-9, ]*\]$", STRING, "the error execute returned for a larger input 0 (the key names its shape)",
        ("RT-051",), pattern=True,
    ),
    Statistic(
        r"^input 0 of higher rank \[[0-9, ]*\]$", STRING, "the error execute returned for input 0 of higher rank (the key names its shape)",
        ("RT-051",), pattern=True,
    ),
    # Registry and debugging (conformance/checks/test_registry.py, test_debug.py, test_torchscript.py)
    Statistic("slots", INTEGER, "registry slots filled before the one-too-many registration", ("REG-001",)),
    Statistic("default_registry", STRING, "why the process-wide default registry was not checked", ("REG-006",)),
    Statistic("debug_handle", _t("integer", "null"), "the debug handle a failure or refusal named", ("DBG",)),
    Statistic("source_nodes", ARRAY, "the nodes that debug handle maps to", ("DBG-001",)),
    Statistic("ids", INTEGER, "entries of debug_handle_map", ("DBG-002",)),
    Statistic("events", INTEGER, "profiling events execute reported", ("DBG-003",)),
    Statistic("node", STRING, "the node a refusal or an execute error was followed back to", ("DBG-050", "DBG-051")),
    Statistic("error", STRING, "the first line of the execute error", ("DBG-051",)),
    Statistic("source_line", INTEGER, "the line of the program's source the error names", ("DBG-051",)),
    Statistic("op", _t("string", "null"), "the operator of that node", ("DBG-051",)),
    Statistic("instruction", _t("string", "null"), "the delegated instruction the error was raised in", ("DBG-051",)),
    # Lazy tensor backends (conformance/checks/test_lazy.py)
    Statistic("transfers", INTEGER, "tensors sent to the lazy device and back", ("LAZY-001",)),
    Statistic("dtypes", INTEGER, "dtypes those tensors covered", ("LAZY-001",)),
    Statistic("computations", INTEGER, "traced computations compared with eager", ("LAZY-002", "LAZY-003")),
    Statistic("compiles_in_first_two_steps", INTEGER, "computations compiled in the first two traced steps", ("LAZY-004",)),
    Statistic("uncached_compiles_on_rerun", INTEGER, "new compilations when the step ran again on inputs of the same shapes", ("LAZY-004",)),
    Statistic("cached_compiles_on_rerun", INTEGER, "compilations the cache served on that rerun", ("LAZY-004",)),
    Statistic("default_device_type", STRING, "the lazy device's default device type", ("LAZY-005",)),
    Statistic("mixing_ordinals", STRING, "what happened when two device ordinals were mixed (an observation)", ("LAZY-005",)),
    Statistic("ops", INTEGER, "random ops checked", ("LAZY-006", "LAZY-007")),
    Statistic("same_values_as_eager", ARRAY, "random ops whose seeded values equal eager's", ("LAZY-006",)),
    Statistic("changed", INTEGER, "random ops whose values changed with the seed", ("LAZY-007",)),
    Statistic("forced_fallback_counters", ARRAY, "fallback counters that grew for an op forced to fall back", ("LAZY-008",)),
    Statistic("digamma_counters", ARRAY, "the counters that grew for digamma (a fallback or a traced op)", ("LAZY-008",)),
    Statistic("counters", INTEGER, "metric counters the backend exposed", ("LAZY-009",)),
    Statistic("report_chars", INTEGER, "characters of its metrics report", ("LAZY-009",)),
    Statistic("devices", ARRAY, "the devices the backend lists (type, ordinal)", ("LAZY",)),
    # A check whose process died (conformance/run/supervision.py)
    Statistic("last_stage", STRING, "the contract call the process was in when it died", LOST),
    Statistic("where", STRING, "the backend's frame it died in", LOST),
    Statistic("innermost_frame", STRING, "the innermost frame of its last stack", LOST),
    Statistic("exit_status", INTEGER, "its exit status (negative: the signal that killed it)", LOST),
    Statistic("signal", STRING, "the signal that killed it", LOST),
    Statistic("killed_after_s", NUMBER, "seconds after which the watchdog killed it", LOST),
)

NAMED: dict[str, Statistic] = {s.name: s for s in CATALOG if not s.pattern}
"""The statistics declared by name."""
PATTERNS: tuple[tuple[re.Pattern[str], Statistic], ...] = tuple((re.compile(s.name), s) for s in CATALOG if s.pattern)
"""The statistics declared by a pattern of keys."""


def declaration(key: str) -> Statistic | None:
    """The declaration of ``key``: by its name, else the pattern it matches whole; None when undeclared."""
    found = NAMED.get(key)
    if found is not None:
        return found
    return next((s for pattern, s in PATTERNS if pattern.fullmatch(key)), None)


def json_types(value: Any) -> frozenset[str]:
    """The JSON types ``value`` has as report.json holds it (an integer is a number too); empty for a
    value with no JSON form."""
    if value is None:
        return frozenset({"null"})
    if isinstance(value, bool):
        return frozenset({"boolean"})
    if isinstance(value, str):
        return frozenset({"string"})
    if isinstance(value, Mapping):
        return frozenset({"object"})
    if isinstance(value, (list, tuple, set, frozenset, complex)):
        return frozenset({"array"})
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return json_types(value.tolist())  # numpy scalars and arrays travel as their Python values
    if isinstance(value, numbers.Integral):
        return frozenset({"integer", "number"})
    if isinstance(value, numbers.Real):
        return frozenset({"number"}) if math.isfinite(value) else frozenset({"string"})
    return frozenset()


def check(stats: Mapping[str, Any], *, clause: str | None = None) -> None:
    """TypeError unless every key of ``stats`` is declared (for a check of ``clause``, when given) and
    its value has a declared type."""
    for key, value in stats.items():
        found = declaration(key) if isinstance(key, str) else None
        kind = type(value).__name__
        if found is None:
            raise TypeError(f"statistic {key!r} (a {kind}) is not declared in {WHERE}")
        if not found.writes(clause):
            raise TypeError(f"statistic {key!r} (a {kind}) matches {found.name!r}, which only {', '.join(found.clauses)} may write "
                            f"(not {clause}) in {WHERE}")
        if not json_types(value) & set(found.types):
            declared = " or ".join(found.types)
            raise TypeError(f"statistic {key!r} is a {kind}, declared {declared} in {WHERE}")


def json_schema() -> dict[str, Any]:
    """The JSON Schema of ``CaseResult.stats``: every declared statistic with its type and meaning."""
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {s.name: {**s.schema, "description": s.description} for s in CATALOG if not s.pattern},
        "patternProperties": {s.name: {**s.schema, "description": s.description} for s in CATALOG if s.pattern},
    }
