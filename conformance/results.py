"""Result categories: one enum, one mapping to labels and colours.

A fault of the harness (HARNESS_ERROR) or of the reference (ORACLE_DISAGREEMENT)
is its own category and never counts against the backend.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar

from conformance import statistics

CLAUSE_FAMILIES = ("PRE", "RT", "REG", "DBG", "NUM", "MOD", "QNT", "PERF", "LAZY")
"""The families of contract clauses (specs/interface.toml IDs look like PRE-001)."""
CHECK_PARAMETERS = ("op", "dtype", "program", "model", "runner", "stage")
"""A check's parameters other than the backend, in the order its id names them (``test[op|dtype]``)."""
CLAUSE_PATTERN = re.compile(rf"^({'|'.join(CLAUSE_FAMILIES)})-[0-9]{{3}}$")


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
    treat it as an ordinary test failure (hypothesis shrinks it). ``stats`` are declared
    statistics (``conformance.statistics``), checked where the plugin records them: a failure is a
    verdict on the backend, which a mistake in its statistics must not replace.
    """

    def __init__(self, category: Category, message: str, *, stats: dict | None = None, stage: str | None = None):
        super().__init__(f"{category.value}: {message}")
        self.category = category
        self.message = message
        self.stats = stats or {}
        self.stage = stage


def _field(description: str, schema: dict[str, Any], *, report: bool = True, default: Any = None, factory=None):
    metadata = {"description": description, "schema": schema, "report": report}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def _object_schema(cls) -> dict[str, Any]:
    """The JSON Schema of a record whose every field carries its description and schema (``_field``)."""
    fields_ = dataclasses.fields(cls)
    return {
        "type": "object",
        "required": [f.name for f in fields_],
        "additionalProperties": False,
        "properties": {f.name: {**f.metadata["schema"], "description": f.metadata["description"]} for f in fields_},
    }


@dataclass(frozen=True)
class KindCount:
    """How many failing cases of one outcome had a kind of case, out of every case of that kind run."""

    kind: str = _field(
        "a kind of case: Call.features (empty, 0-d, rank N, mixed dtypes, broadcasting, large), a kind of input or "
        "expected value (NaN inputs, infinite inputs, subnormal inputs, subnormal expected), where the case came from "
        "(edge set: <directed kind>, hypothesis draw) or its input layout (inputs <layout>)",
        {"type": "string"}, default="",
    )
    failed: int = _field("failing cases of the outcome that are of this kind", {"type": "integer", "minimum": 0}, default=0)
    of: int = _field("cases of this kind the check ran on the backend, failing or not", {"type": "integer", "minimum": 0}, default=0)


@dataclass(frozen=True)
class FailureKind:
    """One way the cases of a failing check went wrong, and the kinds of case it happened on."""

    outcome: str = _field(
        "what went wrong: for MISMATCH the kind of element violation (NaN mismatch, infinity mismatch, finite beyond "
        "tolerance, zero of the wrong sign, wrong shape, wrong dtype, law violated); else the stage "
        "(preprocess failed, init failed, execute failed, contract violation)", {"type": "string"}, default="",
    )
    cases: int = _field("failing cases with this outcome", {"type": "integer", "minimum": 1}, default=0)
    kinds: tuple[KindCount, ...] = _field(
        "the kinds of those cases: those every one of them has first, most specific (failed / of) first",
        {"type": "array", "items": _object_schema(KindCount)}, factory=tuple,
    )


@dataclass(frozen=True)
class FailureSummary:
    """A failing NUM check's failures by kind: it runs its remaining cases after the first failure
    (within ``budget_s``), as it summarizes refusals; the verdict stays the first failure's."""

    failed: int = _field("failing cases", {"type": "integer", "minimum": 1}, default=0)
    ran: int = _field("cases run on the backend, failing or matching (refusals not counted)", {"type": "integer", "minimum": 0}, default=0)
    after_first: int = _field("cases run after the first failure", {"type": "integer", "minimum": 0}, default=0)
    budget_s: float = _field(
        "seconds the check may run after its first failure (a quarter of the per-check timeout, at most 30)",
        {"type": "number", "minimum": 0}, default=0.0,
    )
    cut_short: bool = _field("whether the budget ended the check before its remaining cases", {"type": "boolean"}, default=False)
    outcomes: tuple[FailureKind, ...] = _field(
        "the failing cases by outcome, most frequent first", {"type": "array", "items": _object_schema(FailureKind)}, factory=tuple
    )
    summary: str = _field("the same in words (``words``)", {"type": "string"}, default="")

    def outcome_words(self) -> str:
        """"NaN mismatch in 3 (NaN inputs 3 of 3); execute failed in 2 (most: rank 1 2 of 9, ...)": per
        outcome, the kinds every one of its cases has (up to three), else its two commonest kinds."""
        parts = []
        for o in self.outcomes:
            shared = [k for k in o.kinds if k.failed == o.cases][:3]
            kinds = ", ".join(f"{k.kind} {k.failed} of {k.of}" for k in shared or o.kinds[:2])
            parts.append(f"{o.outcome} in {o.cases} ({'' if shared else 'most: '}{kinds})" if kinds else f"{o.outcome} in {o.cases}")
        return "; ".join(parts)

    def words(self) -> str:
        """"5 of 32 cases failed (29 run after the first): " and ``outcome_words``."""
        cut = f"; cut short by its {self.budget_s:g} s budget" if self.cut_short else ""
        return f"{self.failed} of {self.ran} cases failed ({self.after_first} run after the first{cut}): {self.outcome_words()}"

    def to_json(self) -> dict[str, Any]:
        return {
            **{f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "outcomes"},
            "outcomes": [
                {"outcome": o.outcome, "cases": o.cases, "kinds": [dataclasses.asdict(k) for k in o.kinds]} for o in self.outcomes
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FailureSummary:
        outcomes = tuple(
            FailureKind(o["outcome"], o["cases"], tuple(KindCount(**k) for k in o.get("kinds", ()))) for o in data.get("outcomes", ())
        )
        return cls(**{**data, "outcomes": outcomes})


@dataclass
class CaseResult:
    """What one check found: the one record a check produces, the journals and results documents
    carry and every renderer reads (``report.json``'s ``results`` are ``to_json()`` of these).

    The plugin fills it in the process that ran the check (``conformance.plugin.ResultRecorder``);
    the supervisor writes one for a check whose process died or that never ran. Fields that say
    where a record travels (``backend``, ``nodeid``, ``phase``) are not part of the report.
    """

    category: Category = _field("the outcome (conformance.results.Category)", {"$ref": "#/$defs/category"}, default=Category.HARNESS_ERROR)
    clause: str | None = _field(
        "the contract clause the check verifies (specs/interface.toml, or NUM-001 for an op spec)",
        {"type": ["string", "null"], "pattern": CLAUSE_PATTERN.pattern},
    )
    id: str = _field("backend-independent check id: test[params]", {"type": "string"}, default="")
    mandatory: bool = _field("whether the report's profile makes this check count for the verdict", {"type": "boolean"}, default=False)
    test: str | None = _field("the check's function name", {"type": "string"})
    op: str | None = _field("the ATen overload a NUM check compares", {"type": "string"})
    dtype: str | None = _field("the dtype a NUM check compares", {"type": "string"})
    program: str | None = _field("the contract program a check runs (mlp, chain, conv_block, attention)", {"type": "string"})
    model: str | None = _field(
        "the model a MOD check runs (specs/models.toml, conformance/models.py), or the quantized program a QNT check runs "
        "(specs/quantized.toml, conformance/quantize.py)",
        {"type": "string"},
    )
    runner: str | None = _field("who a PERF check times: backend, reference or eager", {"type": "string"})
    stage: str | None = _field("the contract call a check measures (preprocess, init, execute)", {"type": "string"})
    failed_stage: str | None = _field(
        "the contract call a failing check failed in (preprocess, init, execute, destroy)", {"type": "string"}
    )
    message: str = _field("why the check ended as it did (empty for a plain pass)", {"type": "string"}, default="")
    stats: dict[str, Any] = _field(
        "error statistics (max_abs, max_ulp, mae, snr_db, worst_index, ...) and check-specific counts, each declared in "
        "conformance/statistics.py", statistics.json_schema(), factory=dict
    )
    timings: dict[str, float] = _field(
        "durations in milliseconds (vary run to run)", {"type": "object", "additionalProperties": {"type": ["number", "integer"]}}, factory=dict
    )
    measurements: dict[str, Any] = _field("values that vary run to run (memory growth)", {"type": "object"}, factory=dict)
    duration_s: float | None = _field("seconds the check took", {"type": "number", "minimum": 0})
    replay: str | None = _field("a command that replays a failing example", {"type": "string"})
    failures: FailureSummary | None = _field(
        "a failing NUM check's failing cases by kind (the category and message are its first failure's)",
        _object_schema(FailureSummary),
    )
    backend: str | None = _field("the backend as the run named it", {"type": "string"}, report=False)
    nodeid: str | None = _field("pytest's node id of the check", {"type": "string"}, report=False)
    phase: str | None = _field("pytest's phase the record comes from (setup, call, teardown)", {"type": "string"}, report=False)

    REQUIRED: ClassVar[tuple[str, ...]] = ("id", "clause", "category", "mandatory")

    def __post_init__(self):
        if not isinstance(self.category, Category):
            self.category = Category(self.category)
        if isinstance(self.failures, Mapping):
            self.failures = FailureSummary.from_json(self.failures)

    @property
    def family(self) -> str | None:
        """The clause family (NUM, PERF, ...), or None for a check that cites no clause."""
        return self.clause.split("-")[0] if self.clause else None

    def update(self, **fields: Any) -> None:
        """Set fields by name (an unknown name is a TypeError, not a silently new key)."""
        known = _FIELD_NAMES
        for name, value in fields.items():
            if name not in known:
                raise TypeError(f"CaseResult has no field {name!r}")
            setattr(self, name, value)
        if "category" in fields or "failures" in fields:
            self.__post_init__()

    def to_json(self, *, transport: bool = False) -> dict[str, Any]:
        """The record as a JSON object: unset fields left out; ``transport`` keeps the fields that
        say where it travels (journals), which a results document and the report do not carry."""
        out: dict[str, Any] = {}
        for f in _FIELDS:
            if not f.metadata["report"] and not transport:
                continue
            value = getattr(self, f.name)
            if f.name in self.REQUIRED:
                out[f.name] = value.value if isinstance(value, Category) else value
            elif isinstance(value, FailureSummary):
                out[f.name] = value.to_json()
            elif value is not None and value != {} and value != "":
                out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CaseResult:
        """The record of a JSON object (``to_json``'s inverse); an unknown key or category is a ValueError."""
        unknown = set(data) - _FIELD_NAMES
        if unknown:
            raise ValueError(f"a result record has unknown field(s) {', '.join(sorted(unknown))}")
        return cls(**{k: (dict(v) if isinstance(v, Mapping) else v) for k, v in data.items()})

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON Schema of a result in report.json (``$defs.result`` of report.schema.json)."""
        return {
            "type": "object",
            "required": list(cls.REQUIRED),
            "additionalProperties": False,
            "properties": {
                f.name: {**f.metadata["schema"], "description": f.metadata["description"]} for f in _FIELDS if f.metadata["report"]
            },
        }


_FIELDS = tuple(f for f in dataclasses.fields(CaseResult))
_FIELD_NAMES = frozenset(f.name for f in _FIELDS)


# ---------------------------------------------------------------------------------------------
# The records as report.json (report/2) stores them: tables


def result_id(record: Mapping[str, Any]) -> str:
    """A backend-independent, stable id: the check and its parameters other than the backend."""
    params = [record[k] for k in CHECK_PARAMETERS if record.get(k)]
    test = record.get("test") or record.get("clause") or "?"
    return f"{test}[{'|'.join(params)}]" if params else test


REFUSAL_LEAD = "{op} {dtype}: {summary}; first: "
"""How the message of a NUM check that refused every draw begins (conformance/checks/test_numerics.py:
op, dtype, ``stats.refusal_summary``); what follows, the first refusal, is often the same for many checks."""
SHARED_TEXT_MIN = 16
"""Shorter strings are left where they are: a reference to the table of texts costs about as much."""


def _flat(value: Mapping[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path, value) of every leaf of a JSON object; an empty object and a list are leaves."""
    for key, item in value.items():
        if isinstance(item, Mapping) and item:
            yield from _flat(item, (*path, key))
        else:
            yield (*path, key), item


def _nest(cells: Iterable[tuple[tuple[str, ...], Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, value in cells:
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return out


def _refusal_lead(record: Mapping[str, Any]) -> str | None:
    summary = (record.get("stats") or {}).get("refusal_summary")
    if not (isinstance(summary, str) and record.get("op") and record.get("dtype")):
        return None
    return REFUSAL_LEAD.format(op=record["op"], dtype=record["dtype"], summary=summary)


class _Refusal(str):
    """A refusal's message while tables are made: the first refusal, after ``_refusal_lead``."""


def tabulate_results(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The records (``CaseResult.to_json()`` each, as JSON data) as report.json stores them: the name
    of each field written once per table instead of once per result, and a text many results share
    written once. ``untabulate_results`` is its inverse (records in id order)::

        {"paths": [path, ...], "texts": [text, ...],
         "tables": [{"constant": [[p, value], ...], "fields": [p, ...], "text_fields": [i, ...],
                     "rows": [[value of each field], ...]}, ...]}

    - A record's nested objects are flattened to paths (``["stats", "max_ulp"]``); an empty object
      and a list are values. A table names a path by its index p in ``paths``. Records with the
      same paths share a table; a path with one value in every row of a table (two rows or more)
      is one of its ``constant``.
    - ``id`` is left out where ``result_id`` of the record gives it.
    - In a text field (one whose every value in the table is a string), an integer n stands for
      ``texts[n]``: a text of at least ``SHARED_TEXT_MIN`` characters found in two cells or more
      (tolerance reasons, not-applicable reasons, refusals). In ``message``, ``[n]`` stands for a
      refused NUM check's message: ``REFUSAL_LEAD`` of the record, then ``texts[n]``.
    """
    groups: dict[tuple[tuple[str, ...], ...], list[dict[tuple[str, ...], Any]]] = {}
    for entry in sorted(entries, key=lambda e: str(e.get("id"))):
        cells = dict(_flat(entry))
        if cells.get(("id",)) == result_id(entry):
            del cells[("id",)]
        lead = _refusal_lead(entry)
        message = cells.get(("message",))
        if lead and isinstance(message, str) and message.startswith(lead):
            cells[("message",)] = _Refusal(message[len(lead) :])
        groups.setdefault(tuple(sorted(cells)), []).append(cells)
    shaped = []
    for paths, rows in groups.items():
        constant = [p for p in paths if len(rows) > 1 and not isinstance(rows[0][p], _Refusal) and _same(r[p] for r in rows)]
        fields = [p for p in paths if p not in constant]
        text_fields = [i for i, p in enumerate(fields) if all(isinstance(r[p], str) for r in rows)]
        shaped.append((rows, constant, fields, text_fields))
    uses = Counter(
        r[fields[i]] for rows, _, fields, text_fields in shaped for r in rows for i in text_fields
        if not isinstance(r[fields[i]], _Refusal) and len(r[fields[i]]) >= SHARED_TEXT_MIN
    )  # fmt: skip
    texts: list[str] = []
    index: dict[str, int] = {}

    def cell(value: Any, is_text: bool) -> Any:
        if not is_text:
            return value
        shared = isinstance(value, _Refusal) or uses[value] > 1
        if not shared:
            return value
        text = str(value)
        if text not in index:
            index[text] = len(texts)
            texts.append(text)
        return [index[text]] if isinstance(value, _Refusal) else index[text]

    paths = sorted({p for rows, constant, fields, _ in shaped for p in (*constant, *fields)})
    number = {p: i for i, p in enumerate(paths)}
    tables = []
    for rows, constant, fields, text_fields in shaped:
        table: dict[str, Any] = {}
        if constant:
            table["constant"] = [[number[p], rows[0][p]] for p in constant]
        table["fields"] = [number[p] for p in fields]
        if text_fields:
            table["text_fields"] = text_fields
        table["rows"] = [[cell(r[p], i in text_fields) for i, p in enumerate(fields)] for r in rows]
        tables.append(table)
    return {"paths": [list(p) for p in paths], "texts": texts, "tables": tables}


def _same(values: Iterable[Any]) -> bool:
    first, *rest = values
    return all(type(v) is type(first) and v == first for v in rest)


def untabulate_results(block: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The records of ``tabulate_results``' tables, in id order; ValueError naming the table and row
    of a malformed one."""
    paths, texts, tables = block.get("paths"), block.get("texts"), block.get("tables")
    if not (isinstance(paths, list) and isinstance(texts, list) and isinstance(tables, list)):
        raise ValueError("results: tables of records need lists of paths, texts and tables")
    out = []
    for t, table in enumerate(tables):
        try:
            fields = [_path(paths, p) for p in table["fields"]]
            constant = [(_path(paths, p), v) for p, v in table.get("constant", ())]
            text_fields = set(table.get("text_fields", ()))
            rows = table["rows"]
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"results: table {t} is malformed ({exc!r})") from None
        for n, row in enumerate(rows):
            if not isinstance(row, list) or len(row) != len(fields):
                raise ValueError(f"results: table {t}, row {n}: {len(row) if isinstance(row, list) else 'no'} values for {len(fields)} fields")
            cells, refusal = list(constant), None
            for i, (path, value) in enumerate(zip(fields, row)):
                if i in text_fields and not isinstance(value, str):
                    shared = value[0] if isinstance(value, list) and len(value) == 1 and path == ("message",) else value
                    if not (isinstance(shared, int) and not isinstance(shared, bool) and 0 <= shared < len(texts)):
                        raise ValueError(f"results: table {t}, row {n}: {'/'.join(path)} refers to no text ({value!r})")
                    if isinstance(value, list):
                        refusal = texts[shared]
                        continue
                    value = texts[shared]
                cells.append((path, value))
            record = _nest(cells)
            if refusal is not None:
                lead = _refusal_lead(record)
                if lead is None:
                    raise ValueError(f"results: table {t}, row {n}: a refusal's message without op, dtype and stats.refusal_summary")
                record["message"] = lead + refusal
            record.setdefault("id", result_id(record))
            out.append(record)
    return sorted(out, key=lambda r: str(r["id"]))


def _path(paths: list, p: Any) -> tuple[str, ...]:
    if not (isinstance(p, int) and 0 <= p < len(paths)):
        raise ValueError(f"no path {p!r}")
    return tuple(paths[p])


def listed_results(results: Any) -> list[dict[str, Any]]:
    """The records of report.json's ``results`` in either form (a list, or ``tabulate_results``' tables)."""
    if isinstance(results, Mapping):
        return untabulate_results(results)
    return list(results or ())
