"""The saved failing example of a numerics case: the one owner of its files.

A directory (``<out>/<backend>/replays/NUM-001-<op>-<dtype>/`` for the NUM check) holds:

- ``call.json``: ``{"format": 2, "call": Call.to_json(), "message": ..., "backend": {"kind", "value"},
  "specs": {"root", "digest"}, "dtypes": {"expected": [...], "actual": [...]}, "layout": [...]}``.
  ``layout`` is how the inputs reached the backend, one of ``INPUT_LAYOUTS`` per input (absent:
  every input contiguous); the call carries the rest of the case (which tensors are program
  constants: ``role`` "parameter"), so a replay runs the case that failed, not a contiguous
  cousin that passes. ``backend`` is how
  certify was given the backend: an entry-point name, a ``module:attr``, or a ``path.py:attr`` with
  the path made absolute, so ``replay`` loads it from any working directory. ``specs`` is the spec
  of record the example ran under (its directory, absolute, and digest): ``replay`` uses that
  directory unless told ``--specs``, and says so when the spec it replays under is another.
- ``arrays.npz``: ``tensor<i>`` (the call's tensors, ``Call.tensors()`` order), ``expected<i>``,
  ``actual<i>`` (what the backend wrote, if it ran); bfloat16 as its uint16 bits.
- ``blob.bin``: the processed bytes the backend ran, when it ran.

Older runs (no ``format``) recorded the backend in ``replays/backend.txt`` beside the example
directories, or not at all (then the backend directory's name is the best guess); ``load``
reads them too.

``python -m conformance replay DIR [--backend NAME]`` is ``load`` then ``rerun``.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import ml_dtypes
import numpy as np

from conformance.api.tensors import describe_layout, input_layouts
from conformance.call import Call

FORMAT = 2
CALL_FILE, ARRAYS_FILE, BLOB_FILE = "call.json", "arrays.npz", "blob.bin"
LEGACY_BACKEND_FILE = "backend.txt"
"""Older runs: ``replays/backend.txt``, the backend as certify was given it, for every example beside it."""


class NoSavedExample(LookupError):
    """The directory holds no saved example (a file is missing)."""


@dataclass(frozen=True)
class BackendSource:
    """How the backend of a saved example is loaded (``conformance.discovery.load(name)``)."""

    kind: str
    """"entry point", "module" (``module:attr``), "path" (``/abs/file.py:attr``), or, for an old
    example that recorded nothing, "directory name" (a guess)."""
    name: str

    @classmethod
    def of(cls, requested: str) -> BackendSource:
        """The backend as certify was given it, a ``path.py:attr`` made absolute (as discovery reads it)."""
        module_part, sep, attr = requested.rpartition(":")
        if not sep or not module_part:
            return cls("entry point", requested)
        if module_part.endswith(".py") or "/" in module_part:
            return cls("path", f"{os.path.abspath(module_part)}:{attr}")
        return cls("module", requested)


@dataclass(frozen=True, eq=False)
class Saved:
    """A saved failing example."""

    call: Call
    expected: tuple[np.ndarray, ...]
    actual: tuple[np.ndarray, ...] | None
    """What the backend wrote, or None when it failed before (a stage's failure, a refusal)."""
    blob: bytes | None
    message: str
    """The verdict when it was saved."""
    backend: BackendSource
    format: int
    specs_root: Path | None = None
    """The spec of record's directory when the example was saved (None: not recorded, older runs)."""
    specs_digest: str | None = None
    layout: tuple[str, ...] | str = "contiguous"
    """How the inputs reached the backend (``conformance.api.tensors.Layout``)."""

    @property
    def inputs(self) -> list[np.ndarray]:
        """The program's runtime inputs (the call's input tensors; parameters are baked into the program)."""
        return [t.value for t in self.call.inputs()]


def save(
    directory: Path, call: Call, expected, actual=None, blob: bytes | None = None, message: str = "",
    backend: str | None = None, specs=None, layout="contiguous",
) -> None:  # fmt: skip
    """Write the example to ``directory`` (created). ``backend``: as certify was given it; ``specs``:
    the ``conformance.specs.Specs`` the example ran under; ``layout``: how its inputs reached the
    backend (``conformance.api.tensors.Layout``)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for i, t in enumerate(call.tensors()):
        arrays[f"tensor{i}"] = _storable(t.value)
    scalars = [i for i, e in enumerate(expected) if isinstance(e, np.generic)]  # Scalar outputs, not 0-d tensors
    expected = [np.asarray(e) for e in expected]
    actual = None if actual is None else [np.asarray(a) for a in actual]
    for i, e in enumerate(expected):
        arrays[f"expected{i}"] = _storable(e)
    for i, a in enumerate(actual or ()):
        arrays[f"actual{i}"] = _storable(a)
    np.savez(directory / ARRAYS_FILE, **arrays)
    document = {"format": FORMAT, "call": call.to_json(), "message": message}
    if backend:
        source = BackendSource.of(backend)
        document["backend"] = {"kind": source.kind, "value": source.name}
    if specs is not None:
        document["specs"] = {"root": os.path.abspath(specs.root), "digest": specs.digest}
    document["dtypes"] = {"expected": [e.dtype.name for e in expected], "actual": [a.dtype.name for a in actual or ()]}
    if scalars:
        document["scalar_outputs"] = scalars
    layouts = input_layouts(layout, len(call.inputs()))
    if any(name != "contiguous" for name in layouts):
        document["layout"] = list(layouts)
    (directory / CALL_FILE).write_text(json.dumps(document, indent=1))
    blob_path = directory / BLOB_FILE
    if blob is not None:
        blob_path.write_bytes(blob)
    elif blob_path.exists():
        blob_path.unlink()  # an earlier example's blob would pass for this one's


def load(directory: Path) -> Saved:
    """The example saved in ``directory`` (this format or an older one). Raises NoSavedExample."""
    directory = Path(directory)
    try:
        document = json.loads((directory / CALL_FILE).read_text())
        with np.load(directory / ARRAYS_FILE) as npz:
            arrays = dict(npz)
    except FileNotFoundError as exc:
        raise NoSavedExample(f"{directory} holds no saved example ({exc.filename} missing)") from None
    call = Call.from_json(document["call"], arrays)
    dtypes = document.get("dtypes") or {}

    def stored(prefix: str) -> list[np.ndarray]:
        found = sorted((k for k in arrays if k.startswith(prefix) and k[len(prefix):].isdigit()), key=lambda k: int(k[len(prefix):]))
        names = dtypes.get(prefix)
        if names is None:  # older examples: bfloat16 bits told apart by the call's first tensor
            tensors = call.tensors()
            bf16 = bool(tensors) and tensors[0].dtype == "bfloat16"
            names = ["bfloat16" if bf16 and arrays[k].dtype == np.uint16 else arrays[k].dtype.name for k in found]
        return [arrays[k].view(getattr(ml_dtypes, name)) if name in _BITS_STORED else arrays[k] for k, name in zip(found, names)]

    actual = stored("actual")
    expected = stored("expected")
    for i in document.get("scalar_outputs", ()):
        expected[i] = expected[i][()]  # a NumPy scalar again: the output is a Scalar EValue
    blob_path = directory / BLOB_FILE
    ran_under = document["specs"] if isinstance(document.get("specs"), dict) else {}  # older examples: none
    return Saved(
        call=call,
        expected=tuple(expected),
        actual=tuple(actual) if actual else None,
        blob=blob_path.read_bytes() if blob_path.is_file() else None,
        message=document.get("message", ""),
        backend=_backend_of(directory, document),
        format=int(document.get("format", 1)),
        specs_root=Path(ran_under["root"]) if "root" in ran_under else None,
        specs_digest=ran_under.get("digest"),
        layout=input_layouts(tuple(document["layout"]), len(call.inputs())) if document.get("layout") else "contiguous",
    )


def _backend_of(directory: Path, document: dict) -> BackendSource:
    recorded = document.get("backend")
    if isinstance(recorded, dict) and recorded.get("value"):
        return BackendSource(recorded.get("kind", "entry point"), recorded["value"])
    legacy = directory.parent / LEGACY_BACKEND_FILE
    if legacy.is_file():
        return BackendSource.of(legacy.read_text(encoding="utf-8").strip())
    return BackendSource("directory name", directory.parent.parent.name)


def rerun(saved: Saved, backend, out: TextIO | None = None) -> bool:
    """Run the saved example on ``backend`` through the case core (the saved expected outputs, the
    program rebuilt) and print what happens; True when it passes now."""
    from conformance import case
    from conformance import specs as spec_module

    out = out or sys.stdout
    call = saved.call
    specs = spec_module.load(replay_specs_root(saved))
    spec = specs.op(call.op)
    print(f"backend: {backend.name}\ncall:    {call.describe()}\nsaved:   {saved.message}", file=out)
    if describe_layout(saved.layout) != "contiguous":
        print(f"layout:  {describe_layout(saved.layout)}", file=out)
    if saved.specs_digest and saved.specs_digest != specs.digest:
        print(f"spec:    {specs.root} (digest {specs.digest[:16]}) is not the spec the example ran under "
              f"({saved.specs_root}, digest {saved.specs_digest[:16]}): tolerances may differ", file=out)
    outcome = case.run(backend, spec, call, expected=saved.expected, layout=saved.layout)
    if not outcome.comparisons:  # it did not get as far as outputs
        print(f"now:     {outcome.category.value}: {outcome.detail if outcome.stage else outcome.message}", file=out)
        return False
    for c in outcome.comparisons:
        cmp = c.comparison
        print(f"output {c.index}: {'ok' if cmp.ok else 'MISMATCH'}: {cmp.message} (max abs {cmp.max_abs:g}, max ulp {cmp.max_ulp:g})", file=out)
    return outcome.ok


def replay_specs_root(saved: Saved) -> Path | None:
    """The spec to replay ``saved`` under: the one chosen for this process (``--specs``), else the
    directory it ran under where that still holds a spec, else the installed one (None)."""
    from conformance import specs as spec_module

    if spec_module.chosen_root() is not None:
        return None  # spec_module.load() gives the chosen one
    root = saved.specs_root
    return root if root is not None and (root / "interface.toml").is_file() else None


_BITS_STORED = {"bfloat16": np.uint16, "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8}


def _storable(a: np.ndarray) -> np.ndarray:
    # npz cannot hold ml_dtypes' bfloat16 and float8; keep their bits (call.json's dtypes say which).
    return a.view(_BITS_STORED[a.dtype.name]) if a.dtype.name in _BITS_STORED else a
