"""The structure of the spec files, checked by JSON Schema (schemas/*.schema.json, one per kind of
file), and the messages that say what is wrong.

A schema says which fields a table has, their types, the values a field takes and which fields
are required; a file that breaks it is refused with a SpecError naming the file, the table path
(``specs/ops/binary.toml: [aten.add.Tensor].tolerance.float32.rtol``), what is wrong and what is
accepted, with a "did you mean" where a name is misspelt. What a schema cannot say (a profile
naming an op no spec defines, a tolerance for a dtype the op does not take) the loaders check
after it (conformance.specs.loading, conformance.specs.profiles).
"""

from __future__ import annotations

import difflib
import functools
import json
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource

from conformance.specs.model import SpecError

__all__ = ["read_toml", "expect_field", "closest", "with_suggestion"]

SCHEMAS = Path(__file__).resolve().parent / "schemas"
KINDS = ("clauses", "ops", "profiles", "models", "quantized", "scope", "profile-definition")
"""The kinds of spec document, each checked by ``schemas/KIND.schema.json``."""

# JSON Schema counts 1.0 as an integer and True as neither; TOML keeps 1 and 1.0 apart, and so do the records
_TYPES = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool)
)
_Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_TYPES)

_TABLES = {"clause", "profile", "model", "program"}
"""Top-level tables of named tables: [clause.PRE-001], [profile.smoke], ..."""
_ENTRIES = {"op", "out_of_scope"}
"""Top-level arrays of tables whose entries are known by their name field: [[op]] name = "aten.add.Tensor"."""
_WORDS = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
          "object": "a table", "array": "a list", "null": "nothing"}  # fmt: skip


def read_toml(path: Path, *, error: type[Exception] = SpecError, missing: str = "") -> dict:
    """A TOML file of records; ``error`` (naming the file) when it is missing or not TOML."""
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise error(f"{path}: missing{missing}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML: {exc}") from None


def expect_field(where: str, data: Mapping, key: str, kind: type | tuple, default: Any = ..., *, error: type[Exception] = SpecError) -> Any:
    """``data[key]`` of type ``kind`` (``default`` when absent, if given); ``error`` naming ``where`` and the field otherwise."""
    if key not in data:
        if default is ...:
            raise error(f"{where}: missing field {key!r}")
        return default
    value = data[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise error(f"{where}: field {key!r} must be {names}, got {type(value).__name__} {value!r}")
    return value


def closest(name: str, known: Iterable[str], cutoff: float = 0.8) -> str | None:
    """The known name ``name`` most likely misspells, if one is close enough."""
    close = difflib.get_close_matches(str(name), sorted(known), n=1, cutoff=cutoff)
    return close[0] if close else None


def with_suggestion(name: str, known: Iterable[str]) -> str:
    hint = closest(name, known)
    return f"{name!r} (did you mean {hint}?)" if hint else repr(name)


@functools.cache
def schema(kind: str) -> dict:
    """The JSON Schema of a kind of spec document (``KINDS``)."""
    return json.loads((SCHEMAS / f"{kind}.schema.json").read_text())


@functools.cache
def _validator(kind: str) -> jsonschema.protocols.Validator:
    shared = Registry().with_resource("common.schema.json", Resource.from_contents(schema("common"))).crawl()
    return _Validator(_inlined(schema(kind), schema(kind)), registry=shared)


def _inlined(node: Any, document: dict) -> Any:
    """``node`` of ``document`` with each ``$ref`` replaced by what it names, where no keyword of the
    two meets: the same checks, a third of the time (jsonschema resolves a reference at every use;
    the spec's ops alone use about 2,500)."""
    if isinstance(node, list):
        return [_inlined(item, document) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _inlined(value, document) for key, value in node.items()}
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.partition("#")[2].startswith("/$defs/"):
        file, _, pointer = ref.partition("#")
        source = schema(file.removesuffix(".schema.json")) if file else document
        target = source
        for part in pointer.strip("/").split("/"):
            target = target[part]
        rest = {key: value for key, value in node.items() if key != "$ref"}
        if not set(rest) & set(target):
            node = {**_inlined(target, source), **rest}
    return node


def validate(kind: str, data: Any, where: str) -> None:
    """SpecError unless ``data`` (a document read from ``where``) has the structure of ``kind``'s
    schema: the first problem in the document's order, and how many more there are."""
    errors = list(_validator(kind).iter_errors(data))
    if not errors:
        return
    # top to bottom; at one place an unknown field first: a misspelt field is also a missing one
    errors.sort(key=lambda e: (_order(data, e.absolute_path), e.validator != "additionalProperties"))
    more = f" (+{len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    raise SpecError(f"{where}: {describe(errors[0], data)}{more}")


def _order(data: Any, path: Iterable) -> tuple[int, ...]:
    """The position of ``path`` in the document, for reporting its problems top to bottom."""
    out = []
    for key in path:
        if isinstance(data, Mapping):
            out.append(list(data).index(key) if key in data else len(data))
        elif isinstance(data, list) and isinstance(key, int) and key < len(data):
            out.append(key)
        else:
            break
        data = data[key]
    return tuple(out)


def table_path(data: Any, path: Iterable) -> str:
    """A path into a spec document as its TOML reads: ``[clause.PRE-001].text``, ``[defaults].lsb``,
    ``[aten.add.Tensor].tolerance.float32`` (an ``[[op]]`` by its name), ``inputs[0].low``."""
    parts = list(path)
    out = ""
    if parts and parts[0] == "defaults":
        out, parts = "[defaults]", parts[1:]
    elif len(parts) >= 2 and parts[0] in _TABLES:
        out, parts = f"[{parts[0]}.{parts[1]}]", parts[2:]
    elif len(parts) >= 2 and parts[0] in _ENTRIES and isinstance(parts[1], int):
        entry = data.get(parts[0], [])[parts[1]] if isinstance(data, Mapping) else None
        name = entry.get("name") if isinstance(entry, Mapping) else None
        out = f"[{name}]" if isinstance(name, str) else f"[[{parts[0]}]] #{parts[1] + 1}"
        parts = parts[2:]
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            key = part if re.fullmatch(r"[A-Za-z0-9_-]+", str(part)) else json.dumps(part)
            out += f".{key}" if out else key
    return out


def _at(path: str) -> str:
    return f"{path} " if path else ""


def _show(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _alternatives(values: list) -> str:
    shown = [_show(v) for v in values]
    if len(shown) == 1:
        return shown[0]
    if len(shown) == 2:
        return f"{shown[0]} or {shown[1]}"
    return "one of " + ", ".join(shown)


def _enums(error: jsonschema.ValidationError) -> list:
    """Every value an enum or const below ``error`` accepts (for a "did you mean")."""
    out = list(error.validator_value) if error.validator == "enum" else [error.validator_value] if error.validator == "const" else []
    for e in error.context:
        out += [v for v in _enums(e) if v not in out]
    return [v for v in out if isinstance(v, str)]


def _did_you_mean(value: Any, known: list) -> str:
    hint = closest(value, known, cutoff=0.6) if isinstance(value, str) and known else None
    return f" (did you mean {_show(hint)}?)" if hint else ""


def describe(error: jsonschema.ValidationError, data: Any) -> str:
    """One problem: where, what is wrong and what is accepted."""
    path = table_path(data, error.absolute_path)
    keyword, value, instance = error.validator, error.validator_value, error.instance
    about = error.schema.get("description") if isinstance(error.schema, Mapping) else None
    if keyword in ("oneOf", "anyOf"):
        inner = _branch_error(error)
        if inner is not None and not (about and list(inner.absolute_path) == list(error.absolute_path)
                                      and not inner.schema.get("description")):
            return describe(inner, data)
        types = [b.get("type") for b in value if isinstance(b, Mapping) and isinstance(b.get("type"), str)]
        known = _enums(error)
        accepted = f"; accepted: {', '.join(known)}" if 1 < len(known) <= 40 and isinstance(instance, str) else ""
        what = about or " or ".join(_WORDS.get(t, t) for t in types) or "of another form"
        return f"{_at(path)}must be {what}, got {_show(instance)}{_did_you_mean(instance, known)}{accepted}"
    if keyword == "required":
        missing = [k for k in value if isinstance(instance, Mapping) and k not in instance]
        return f"{path + ': ' if path else ''}missing field {missing[0]!r}"
    if keyword == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(k for k in instance if k not in allowed)
        hints = [h for k in extra if (h := closest(k, allowed, cutoff=0.6))]
        hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
        return f"{path + ': ' if path else ''}unknown field(s) {extra}{hint}; allowed: {allowed}"
    if "propertyNames" in error.schema_path:
        return f"{table_path(data, [*error.absolute_path, instance])}: the name must be {about or 'another name'}"
    if keyword == "uniqueItems":
        seen: list = []
        twice = next(item for item in instance if item in seen or seen.append(item))
        return f"{_at(path)}names {_show(twice)} twice"
    hint = ""
    if keyword == "type":
        expected = [value] if isinstance(value, str) else list(value)
        what = about or " or ".join(_WORDS.get(t, t) for t in expected)
    elif keyword in ("enum", "const"):
        values = list(value) if keyword == "enum" else [value]
        what = _alternatives(values) + (f" ({about})" if about and keyword == "enum" else "")
        hint = _did_you_mean(instance, values)
    elif keyword == "minimum":
        what = f"{value:g} or more"
    elif keyword == "exclusiveMinimum":
        what = "positive" if value == 0 else f"more than {value:g}"
    elif keyword == "minItems":
        what = about or "a non-empty list"
    elif keyword == "minProperties":
        what = about or "a non-empty table"
    elif keyword == "pattern":
        what = about or f"a string matching {value}"
    else:
        what = about or error.message
    return f"{_at(path)}must be {what}, got {_show(instance)}{hint}"


def _branch_error(error: jsonschema.ValidationError) -> jsonschema.ValidationError | None:
    """The error to report of a oneOf/anyOf none of whose branches holds: that of the one branch
    whose type the value has, if exactly one has it; None otherwise (the holder's description says
    what is accepted)."""
    by_branch: dict[int, list[jsonschema.ValidationError]] = {}
    for e in error.context:
        by_branch.setdefault(e.relative_schema_path[0], []).append(e)
    typed = [errs for errs in by_branch.values() if not any(e.validator == "type" and not e.relative_path for e in errs)]
    if len(typed) != 1:
        return None
    return min(typed[0], key=lambda e: (-len(e.absolute_path), e.validator in ("anyOf", "oneOf")))
