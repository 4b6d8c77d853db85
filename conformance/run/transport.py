"""What leaves a check: plain JSON that every process boundary and every file can carry.

A result record crosses from a pytest-xdist worker to the controller on pytest's
report object, which execnet serializes. execnet refuses integers below -2**31
and strings that are not UTF-8 encodable (a lone surrogate), and when it refuses
a report the worker dies and every check queued on it is lost. So every record is
encoded here into one JSON string before it is put on a report, and decoded on the
controller; the same cleaning applies to the failure text (longrepr) pytest sends
along, and to every JSON document the harness writes.

The encoding never raises and is idempotent (encoding its own output changes
nothing, so a hash over a written document still holds when it is written again):

- integers of any size stay exact (NumPy integer scalars become Python ints);
- floats stay floats, except NaN and the infinities, which become "nan", "inf"
  and "-inf" (JSON has no spelling for them);
- NumPy arrays and scalars, tuples and sets become lists and plain numbers;
- strings are cleaned: a lone surrogate becomes its escape (``\\udc80``), control
  characters other than newline and tab become ``\\xNN``, and a string longer than
  the limit keeps its head and says how much was cut;
- anything else is its cleaned ``repr``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

MESSAGE_LIMIT = 4_000
"""Characters kept of one string in a result record (messages, statistics)."""
LONGREPR_LIMIT = 20_000
"""Characters kept of one string of a failure's text (a traceback line, a section)."""
_MAX_DEPTH = 64
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 and C1 controls but \t and \n


def clean_text(value: Any, limit: int | None = MESSAGE_LIMIT) -> str:
    """``value`` as a string execnet, JSON and a terminal can all carry; never raises."""
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:
        text = f"<{type(value).__name__} whose str() failed>"
    # Lone surrogates (e.g. bytes decoded with errors="surrogateescape") become "\udc80".
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    if limit is not None and len(text) > limit:
        note = f" ... [truncated {len(text)} characters]"  # an upper bound on the final note's length
        keep = max(0, limit - len(note))
        text = f"{text[:keep]} ... [truncated {len(text) - keep} characters]"
    return text


def _float(value: float) -> float | str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def jsonable(value: Any, limit: int | None = MESSAGE_LIMIT, _depth: int = 0) -> Any:
    """``value`` as plain JSON data (dict with str keys, list, str, int, float, bool, None)."""
    try:
        return _jsonable(value, limit, _depth)
    except Exception:  # a hostile __repr__, a recursion limit: still something to show
        return _repr(value, limit)


def _jsonable(value: Any, limit: int | None, depth: int) -> Any:
    if value is None or value is True or value is False:
        return value
    if depth > _MAX_DEPTH:
        return _repr(value, limit)
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)  # exact, whatever its size
    if isinstance(value, float):
        return _float(float(value))
    if isinstance(value, str):
        return clean_text(value, limit)
    if isinstance(value, Mapping):
        return {_key(k, limit): _jsonable(v, limit, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, limit, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [_jsonable(v, limit, depth + 1) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return clean_text(repr(bytes(value)), limit)
    if isinstance(value, PurePath):
        return clean_text(str(value), limit)
    if isinstance(value, complex):
        return [_float(value.real), _float(value.imag)]
    numpy = _numpy(value)
    if numpy is not None:
        return numpy(value, limit, depth)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value), limit, depth + 1)
    return _repr(value, limit)


def _key(key: Any, limit: int | None) -> str:
    if isinstance(key, enum.Enum):
        key = key.value
    if isinstance(key, str):
        return clean_text(key, limit)
    converted = jsonable(key, limit)
    return converted if isinstance(converted, str) else json.dumps(converted)


def _numpy(value: Any):
    """A converter for NumPy (and ml_dtypes) values, or None for anything else."""
    module = type(value).__module__ or ""
    if not (module == "numpy" or module.startswith(("numpy.", "ml_dtypes"))):
        return None
    import numpy as np

    if isinstance(value, np.ndarray):
        return _numpy_array
    if isinstance(value, np.generic):
        return _numpy_scalar
    return None


def _numpy_scalar(value, limit, depth):
    import numpy as np

    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.complexfloating):
        return [_float(float(value.real)), _float(float(value.imag))]
    if isinstance(value, (np.str_, np.bytes_)):
        return _jsonable(value.item(), limit, depth + 1)
    try:
        return _float(float(value))  # float16/32/64, and ml_dtypes' bfloat16 and friends
    except (TypeError, ValueError):
        return _repr(value, limit)


def _numpy_array(value, limit, depth):
    kind = value.dtype.kind
    if kind in "biufc":
        if kind == "f" and value.dtype.itemsize == 16:  # longdouble: float() of each element
            return _jsonable([float(v) for v in value.reshape(-1)], limit, depth + 1)
        return _jsonable(value.tolist(), limit, depth + 1)
    try:  # ml_dtypes (bfloat16, float8 ...): not native kinds, but each element converts to float
        return _jsonable(value.astype("float64").tolist(), limit, depth + 1)
    except (TypeError, ValueError):
        return _jsonable(value.tolist(), limit, depth + 1)


def _repr(value: Any, limit: int | None) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__} whose repr() failed>"
    return clean_text(text, limit)


def encode(value: Any, limit: int | None = MESSAGE_LIMIT) -> str:
    """One JSON string (ASCII only) for ``value``; never raises."""
    return json.dumps(jsonable(value, limit), allow_nan=False, ensure_ascii=True, sort_keys=True)


def decode(text: Any) -> Any:
    """What ``encode`` encoded. Anything not a string is passed through (an in-process record)."""
    if isinstance(text, (str, bytes)):
        return json.loads(text)
    return text


def dumps_document(document: Any, *, indent: int | None = 1) -> str:
    """A document as JSON text: strict (no NaN), ASCII, keys sorted; no string is cut."""
    return json.dumps(jsonable(document, None), indent=indent, sort_keys=True, allow_nan=False, ensure_ascii=True)


# ---------------------------------------------------------------------------------------------
# Failure text (pytest's longrepr) and captured output


def clean_longrepr(longrepr: Any, limit: int | None = LONGREPR_LIMIT) -> Any:
    """``longrepr`` (a string, a skip's (path, line, reason) or pytest's traceback objects) with
    every string in it cleaned as above, structure kept; a string of it when the walk fails."""
    if longrepr is None:
        return None
    try:
        return _clean_tree(longrepr, limit, 0, set())
    except Exception:
        try:
            return clean_text(str(longrepr), limit)
        except Exception:
            return "<the failure's text could not be rendered>"


def _clean_tree(value: Any, limit: int | None, depth: int, seen: set[int]) -> Any:
    if isinstance(value, str):
        return clean_text(value, limit)
    if depth > _MAX_DEPTH or value is None or isinstance(value, (int, float, bool)):
        return value
    if isinstance(value, list):
        value[:] = [_clean_tree(v, limit, depth + 1, seen) for v in value]
        return value
    if isinstance(value, tuple):
        return type(value)(_clean_tree(v, limit, depth + 1, seen) for v in value) if type(value) is tuple else value
    if isinstance(value, dict):
        for k in list(value):
            value[k] = _clean_tree(value[k], limit, depth + 1, seen)
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if id(value) in seen:
            return value
        seen.add(id(value))
        for field in dataclasses.fields(value):
            current = getattr(value, field.name, None)
            cleaned = _clean_tree(current, limit, depth + 1, seen)
            if cleaned is not current:
                object.__setattr__(value, field.name, cleaned)  # pytest's repr classes, frozen or not
        return value
    return value


def clean_sections(sections: list[tuple[str, str]], limit: int | None = LONGREPR_LIMIT * 5) -> list[tuple[str, str]]:
    """Captured output sections with every string cleaned (a backend may print anything)."""
    out = []
    for section in sections:
        try:
            title, content = section
            out.append((clean_text(title, limit), clean_text(content, limit)))
        except Exception:
            out.append(("section", clean_text(repr(section), limit)))
    return out


def carriable(value: Any, _depth: int = 0) -> Any:
    """A serialized report (pytest_report_to_serializable's dict) that execnet can carry:
    strings cleaned, integers execnet refuses as decimal strings, unknown objects as repr."""
    if value is None or isinstance(value, bool):
        return value
    if _depth > _MAX_DEPTH:
        return _repr(value, LONGREPR_LIMIT)
    if isinstance(value, int):
        return int(value) if value >= -(2**31) else str(int(value))  # execnet's 4-byte path has no lower check
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return clean_text(value, None)
    if isinstance(value, dict):
        return {carriable(k, _depth + 1): carriable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [carriable(v, _depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(carriable(v, _depth + 1) for v in value)
    if isinstance(value, bytes):
        return bytes(value)
    return _repr(value, LONGREPR_LIMIT)
