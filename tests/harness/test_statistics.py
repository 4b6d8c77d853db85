"""The catalog of statistics (conformance/statistics.py) covers every statistic the harness writes: in
the checked-in reports, at every place in conformance/ that writes one, in a fresh certify run; a
check that writes an undeclared key or a value of another type fails; and the table in
docs/reports.md is the catalog's."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from conformance import oracle, statistics
from conformance.plugin.capture import ResultRecorder, merge_failure_stats
from conformance.report.model import load_report, schema, validate
from conformance.results import CLAUSE_FAMILIES, CLAUSE_PATTERN, CaseResult, Category, CheckFailure

ROOT = Path(__file__).resolve().parents[2]
REPORTS = sorted((ROOT / "reports").glob("**/report.json"))


def _check_report(report: dict) -> list[str]:
    """Every result's statistics declared and typed; a named statistic written only by the clauses its declaration names."""
    problems = []
    for r in report["results"]:
        stats, clause = r.get("stats") or {}, r.get("clause")
        try:
            statistics.check(stats, clause=clause)
        except TypeError as exc:
            problems.append(f"{r['id']}: {exc}")
        for key in stats:
            found = statistics.declaration(key)
            if found is not None and found.clauses and clause and not {clause, clause.split("-")[0]} & set(found.clauses):
                problems.append(f"{r['id']}: {key!r} is declared as written by {', '.join(found.clauses)}, not {clause}")
    return problems


def test_the_catalog_is_well_formed():
    names = [s.name for s in statistics.CATALOG]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    types = {"string", "integer", "number", "boolean", "array", "object", "null"}
    for s in statistics.CATALOG:
        assert set(s.schema) == {"type"} and set(s.types) <= types, s  # nesting is said in words: both checks see the same thing
        assert s.description and "\n" not in s.description, s
        assert all(CLAUSE_PATTERN.match(c) or c in CLAUSE_FAMILIES for c in s.clauses), s
        if s.pattern:
            assert s.name.startswith("^") and s.name.endswith("$") and s.clauses, s  # anchored: JSON Schema's patterns search


@pytest.mark.slow
@pytest.mark.parametrize("path", REPORTS, ids=[str(p.parent.relative_to(ROOT / "reports")) for p in REPORTS])
def test_every_statistic_of_a_checked_in_report_is_declared_and_typed(path):
    assert _check_report(load_report(path)) == []
    assert validate(json.loads(path.read_text())) == []  # and the shipped schema, which lists them, agrees


# ---------------------------------------------------------------------------------------------
# Every place in conformance/ that writes a statistic, read with ast


class Unresolved(Exception):
    """An expression whose keys cannot be read from the source."""


PASSED_ON = {
    ("conformance/plugin/capture.py", "stats"): "the recorder's keywords: each result.stats(...) call is scanned",
    ("conformance/plugin/capture.py", "exc.stats"): "a CheckFailure's statistics: scanned where it is raised",
    ("conformance/plugin/capture.py", "recorder.record.stats"): "the recorder's own statistics",
    ("conformance/case/outcome.py", "self.stats"): "an Outcome's statistics: scanned where it is made",
    ("conformance/case/outcome.py", "stats"): "Outcome.failure's keywords: each .failure(...) call is scanned",
    ("conformance/case/running.py", "exc.stats"): "a CheckFailure's statistics: scanned where it is raised",
    ("conformance/report/document.py", "r['stats']"): "a report's statistics, copied as they are read",
}
"""Expressions that pass statistics on from another writer, by module: that writer is scanned instead."""

DATA_KEYS = {("conformance/checks/test_torchscript.py", "refusals"): "RT-051"}
"""Statistics whose keys are a check's data (its probes' labels), declared by a pattern of the clause named."""


def _comparison_keys() -> set[str]:
    """The keys of a comparison's statistics, a law's ``test`` included."""
    cmp = oracle.compare(np.array([1.0, 2.0], np.float32), np.array([1.0, 2.5], np.float32), oracle.CONTRACT_TOLERANCE)
    return set(dataclasses.replace(cmp, test={}).stats())


class Package:
    """The modules of conformance/ parsed, and the keys of the statistics their expressions write."""

    def __init__(self):
        self.trees = {p.relative_to(ROOT).as_posix(): ast.parse(p.read_text(), str(p)) for p in sorted((ROOT / "conformance").rglob("*.py"))}
        self.parents = {child: node for tree in self.trees.values() for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        self.module_of = {node: rel for rel, tree in self.trees.items() for node in ast.walk(tree)}
        self.functions: dict[str, ast.FunctionDef] = {}
        for tree in self.trees.values():
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef):
                    self.functions.setdefault(node.name, node)
        self.data: set[tuple[str, str]] = set()
        self.unresolved: list[str] = []

    def scope(self, node: ast.AST) -> ast.AST:
        while node in self.parents and not isinstance(node, ast.FunctionDef):
            node = self.parents[node]
        return node

    def writes(self):
        """(module, line, keys) of each call that writes statistics: ``result.stats(...)``, ``Outcome.failure(...)``,
        ``record.stats.update(...)``, and every ``stats=`` keyword (``CheckFailure``, ``Outcome``); what cannot be
        read goes to ``unresolved``."""
        for rel, node, what in self._writers():
            try:
                yield rel, node.lineno, self.call_keys(node, node) if what is node else self.keys(what, node)
            except Unresolved as exc:
                self.unresolved.append(f"line {node.lineno} of {exc}")

    def _writers(self):
        for rel, tree in self.trees.items():
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                if isinstance(func, ast.Attribute) and (
                    (func.attr in ("stats", "failure") and node.keywords)
                    or (func.attr == "stats" and node.args)
                    or (func.attr == "update" and isinstance(func.value, ast.Attribute) and func.value.attr == "stats")
                ):
                    yield rel, node, node
                for kw in node.keywords:
                    if kw.arg == "stats":
                        yield rel, node, kw.value

    def call_keys(self, call: ast.Call, at: ast.AST, seen: frozenset = frozenset()) -> set[str]:
        out = set()
        for kw in call.keywords:
            out |= self.keys(kw.value, at, seen) if kw.arg is None else {kw.arg}
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "failure"):  # failure's argument is its message
            for arg in call.args:
                out |= self.keys(arg, at, seen)
        return out

    def keys(self, expr: ast.expr, at: ast.AST, seen: frozenset = frozenset()) -> set[str]:
        """The keys of ``expr``, a mapping of statistics written at ``at``."""
        text, rel = ast.unparse(expr), self.module_of[at]
        if (rel, text) in PASSED_ON or text in seen:
            return set()
        if (rel, text) in DATA_KEYS:
            self.data.add((rel, text))
            return set()
        if isinstance(expr, ast.Dict):
            return set().union(*(self.keys(v, at, seen) if k is None else self.key_names(k, at) for k, v in zip(expr.keys, expr.values)))
        if isinstance(expr, ast.IfExp):
            return self.keys(expr.body, at, seen) | self.keys(expr.orelse, at, seen)
        if isinstance(expr, ast.DictComp) and len(expr.generators) == 1:
            return self.comprehension_keys(expr)
        if isinstance(expr, ast.Call):
            name = expr.func.id if isinstance(expr.func, ast.Name) else getattr(expr.func, "attr", None)
            if name == "dict":
                return self.call_keys(expr, at, seen)
            if name == "stats" and not expr.args and not expr.keywords:
                return _comparison_keys()  # the only statistics spread whole are a comparison's
            function = next((n for n in ast.walk(self.scope(at)) if isinstance(n, ast.FunctionDef) and n.name == name), None)
            function = function or self.functions.get(name)
            if function is not None:
                returns = [n for n in ast.walk(function) if isinstance(n, ast.Return) and n.value is not None]
                return set().union(*(self.keys(r.value, r, seen | {text}) for r in returns))
        if isinstance(expr, (ast.Name, ast.Attribute)):
            return self.assigned(expr, at, seen | {text})
        raise Unresolved(f"{rel}: {text}")

    def assigned(self, expr: ast.Name | ast.Attribute, at: ast.AST, seen: frozenset) -> set[str]:
        """The keys given to a name (in its function) or an attribute (anywhere): assigned, set by subscript, updated."""
        trees = [self.scope(at)] if isinstance(expr, ast.Name) else list(self.trees.values())
        out, found = set(), False
        for node in (n for tree in trees for n in ast.walk(tree)):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    pairs = zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) else [(target, node.value)]
                    for t, value in pairs:
                        if _same(t, expr):
                            found, out = True, out | self.keys(value, node, seen)
                        elif isinstance(t, ast.Subscript) and _same(t.value, expr):
                            found, out = True, out | self.key_names(t.slice, node)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update" and _same(node.func.value, expr):
                found, out = True, out | self.call_keys(node, node, seen)
        if not found:
            raise Unresolved(f"{self.module_of[at]}: {ast.unparse(expr)}")
        return out

    def key_names(self, key: ast.expr, at: ast.AST) -> set[str]:
        """A key written as a string, or as the variable of a loop over rows of strings (``for key, name in (("a", "b"), ...)``)."""
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return {key.value}
        node = at
        while isinstance(key, ast.Name) and node in self.parents:
            node = self.parents[node]
            if isinstance(node, ast.For) and key.id in _names(node.target):
                return {_constant(row[key.id], key) for row in _rows(node.target, node.iter, key)}
        raise Unresolved(f"{self.module_of[at]}: {ast.unparse(key)}")

    def comprehension_keys(self, comp: ast.DictComp) -> set[str]:
        """The keys of ``{f"nodes_with_{k}": ... for k in ("a", "b")}`` and ``{k: v for k, v in (("a", x), ...)}``."""
        gen, out = comp.generators[0], set()
        for row in _rows(gen.target, gen.iter, comp):
            if isinstance(comp.key, ast.Name):
                out.add(_constant(row[comp.key.id], comp))
            elif isinstance(comp.key, ast.JoinedStr):
                out.add("".join(p.value if isinstance(p, ast.Constant) else _constant(row[p.value.id], comp) for p in comp.key.values))
            else:
                raise Unresolved(ast.unparse(comp))
        return out


def _names(target: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _rows(target: ast.expr, iterable: ast.expr, where: ast.AST) -> list[dict[str, ast.expr]]:
    """The loop variables of each row of a literal tuple or list, as expressions."""
    if not isinstance(iterable, (ast.Tuple, ast.List)):
        raise Unresolved(ast.unparse(where))
    if isinstance(target, ast.Name):
        return [{target.id: e} for e in iterable.elts]
    return [{t.id: v for t, v in zip(target.elts, row.elts) if isinstance(t, ast.Name)} for row in iterable.elts if isinstance(row, ast.Tuple)]


def _constant(node: ast.expr, where: ast.AST) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    raise Unresolved(ast.unparse(where))


def _same(a: ast.expr, b: ast.expr) -> bool:
    """The same variable (a name), or an attribute of the same name on any object (``self.worst``, ``case.worst``)."""
    if isinstance(b, ast.Name):
        return isinstance(a, ast.Name) and a.id == b.id
    return isinstance(a, ast.Attribute) and a.attr == b.attr


@pytest.mark.slow
def test_every_statistic_written_in_the_package_is_declared():
    package, written = Package(), {}
    for rel, line, keys in package.writes():
        for key in keys:
            written.setdefault(key, []).append(f"{rel}:{line}")
    assert package.unresolved == [], "write statistics by name, or declare data keys by a pattern (DATA_KEYS, statistics.PATTERNS)"
    assert package.data == set(DATA_KEYS)
    for clause in DATA_KEYS.values():
        assert any(clause in s.clauses for _, s in statistics.PATTERNS), f"no pattern of keys declared for {clause}"
    undeclared = {k: v for k, v in written.items() if statistics.declaration(k) is None}
    assert undeclared == {}, f"declare them in {statistics.WHERE}"
    assert sorted(set(statistics.NAMED) - set(written)) == []  # declared, and written somewhere


# ---------------------------------------------------------------------------------------------
# A check's mistake fails the check


def test_an_undeclared_statistic_is_a_type_error_naming_it():
    result = ResultRecorder("NUM-001")
    with pytest.raises(TypeError, match=r"'max_abss' \(a float\) is not declared in conformance/statistics.py"):
        result.stats(max_abss=1.0)
    with pytest.raises(TypeError, match=r"'mae' is a list, declared number or string in conformance/statistics.py"):
        result.stats(mae=[1.0])
    with pytest.raises(TypeError, match=r"'compared' is a float"):
        result.stats(compared=2.0)
    with pytest.raises(TypeError, match=r"'input 0 as float64'.*only RT-051 may write"):
        result.stats(**{"input 0 as float64": "InvalidArgument"})  # a pattern belongs to its clause
    assert result.record.stats == {}  # nothing of a refused call is kept


def test_a_failure_with_a_wrong_statistic_stays_the_verdict_without_it():
    """A failure is a verdict on the backend: a mistake in the statistics it carries leaves them out
    and says so, and never turns it into another category."""
    record = CaseResult(clause="NUM-001", category=Category.MISMATCH, message="off by one")
    merge_failure_stats(record, CheckFailure(Category.MISMATCH, "off by one", stats={"off_grd": 3, "max_abs": 1.0}))
    assert record.category is Category.MISMATCH and record.stats == {}
    assert record.message.startswith("off by one [statistics left out: statistic 'off_grd'")
    merge_failure_stats(record, CheckFailure(Category.MISMATCH, "off by one", stats={"max_abs": 1.0, "mismatched": 2}))
    assert record.stats == {"max_abs": 1.0, "mismatched": 2}


def test_declared_statistics_are_recorded_as_given():
    result = ResultRecorder("RT-051")
    result.stats(**{"input 0 as float64": "InvalidArgument", "a larger input 0 [7, 11]": "Internal"})
    result.stats(max_abs=np.float32(0.5), mae=float("nan"), worst_index=(0, 1), total=np.int64(4), ok=np.bool_(True), snr_db=None)
    assert result.record.stats["a larger input 0 [7, 11]"] == "Internal" and result.record.stats["total"] == 4


def test_the_shipped_schema_refuses_what_the_catalog_refuses():
    record = Draft202012Validator({"$defs": schema()["$defs"], "$ref": "#/$defs/result"})
    base = {"id": "t", "clause": "RT-051", "category": "PASS", "mandatory": True}
    assert list(record.iter_errors({**base, "stats": {"input 0 as float64": "Internal", "max_abs": "inf", "compared": 3}})) == []
    bad = {"max_abss": 1.0}, {"compared": "3"}, {"input 0 as float64": 4}, {"layouts": "offset"}
    for stats in bad:
        assert list(record.iter_errors({**base, "stats": stats})), stats


# ---------------------------------------------------------------------------------------------
# A real run, and the docs


@pytest.mark.slow
def test_a_certify_run_writes_only_declared_statistics(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "certify", "reference", "--profile", "core-fp32", "--ops", "aten.relu.default",
         "--dtypes", "float32", "--skip-perf", "--workers", "1", "--output", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0 and "CERTIFIED" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = tmp_path.glob("*/report.json")
    report = load_report(path)
    assert any(r.get("stats") for r in report["results"])
    assert _check_report(report) == [] and validate(json.loads(path.read_text())) == []


def test_the_docs_table_is_the_catalog():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "statistics_table.py")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout in (ROOT / "docs" / "reports.md").read_text(), "docs/reports.md's statistics are stale: run python tools/statistics_table.py --write"
