"""Ahead-of-time half of the ExecuTorch adapters: a harness program -> Edge -> XNNPACK or a .pte.

The harness hands ``preprocess`` a core-ATen ExportedProgram whose call_function
nodes carry its debug handles. ExecuTorch wants its own Edge dialect, so this
module lowers a private copy the way an ExecuTorch user would:

- XNNPACK: ``to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])``
  then ``to_executorch()``; the delegate payload, debug_handle_map and named data
  are ``XnnpackBackend.preprocess``'s own output for the one delegated partition.
- portable: ``to_edge(program).to_executorch()``: no partitioner, every op on
  ExecuTorch's CPU kernels; the whole .pte is the blob.

Three things the harness program needs before ExecuTorch takes it:

1. Debug handles. ``to_edge`` renumbers ``node.meta["debug_handle"]`` by source
   ancestor. Each harness handle is carried through in ``node.meta["custom"]``
   (which torch.export's retracing propagates to every node an op becomes) and a
   transform pass, run after ``to_edge`` and before partitioning, writes it back as
   the debug handle. XNNPACK's XNodes and the emitter's instruction map then name
   harness nodes. Nodes ExecuTorch created from nothing keep no handle.
2. Dynamic dimensions. The harness exports sizes dynamic and unbounded
   (``Dim.AUTO``); ExecuTorch plans memory for the upper bound of every size and
   falls back to the export hint when it is unbounded, so one program would only
   take its first example's sizes. Each unbounded size is bounded to
   ``max(hint, DYNAMIC_DIM_BOUND)`` on the private copy (the strategies draw sides
   of at most 10). A larger input is refused by ExecuTorch at ``set_inputs``.
3. Cost. Three things keep it down, none of which changes what is produced:

   - No redundant re-tracing. ``to_edge_transform_and_lower`` calls
     ``run_decompositions`` three times (functionalize; decompose all but what
     the partitioner keeps; decompose the rest), ``to_edge`` once. On a harness
     program that is already functional, static-shaped core ATen with no target
     in the table, each call only re-traces the graph: 75-90% of a lowering. The
     private copy's ``run_decompositions`` returns the program itself when
     ``compat.torch.retrace_is_identity`` proves the call would decompose nothing
     (``executorch_compat.without_redundant_retraces``, where its version check
     holds); everything else runs as ExecuTorch wrote it.
     tests/adapters/test_executorch.py lowers NUM programs of thirteen of the
     executorch profile's ops, every contract program and a batch both ways and
     compares the .pte, payload, debug handle map, named data and refusal
     messages byte for byte. Measured on NUM programs of those thirteen ops
     (2 cores): XNNPACK 0.57 s -> 0.07 s per lowering, portable 0.22 s -> 0.04 s;
     ops torch decomposes on the way (max_pool2d, prelu: CompositeImplicitAutograd)
     keep their real decomposition and gain least (0.52 -> 0.18 s).
   - A cache in memory. Lowerings (refusals and crashes too) are kept by a content hash of
     the program and compile specs (``fingerprint``). To keep PRE-002
     (determinism) honest, the first repeat of a program lowered in this
     process re-runs the real ``XnnpackBackend.preprocess`` on a fresh copy of
     the partition (for portable: ``to_executorch`` again) and returns that
     second output; later repeats return the cached result.
   - A cache on disk (``LoweringDiskCache``, under ``programs.cache_dir()``),
     shared by xdist workers and later runs, for the NUM checks' programs only:
     single-operator programs the harness built itself (``disk_cacheable``).
     Contract programs (torch.export of a model) are lowered in every process,
     so PRE-002 still compares two real preprocess outputs of this process and
     PRE-008's fresh processes really preprocess. A NUM program found on disk is
     returned as stored, repeats included: nothing is re-run for it.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
import operator
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.api import BackendError, CompileSpec, DataEntry, Error, NamedDataStoreOutput
from conformance.api.ops import op_name
from conformance.compat import torch as compat_torch

from . import executorch_compat

DYNAMIC_DIM_BOUND = 16
"""Upper bound given to each unbounded dynamic size (never below the export hint)."""
CACHE_ENTRIES = 256
CUSTOM_KEY = "conformance_debug_handle"
LOWERING_FORMAT = 1
"""Version of the disk cache's entry layout; with the source of this module, part of every key."""
DISK_CACHE_MB = 512
"""The disk cache keeps at most this much; the least recently used entries go first."""
NO_DISK_CACHE_ENV = "CONFORMANCE_NO_LOWERING_CACHE"
"""Set to 1 to neither read nor write lowered programs on disk."""

log = logging.getLogger(__name__)


@dataclass
class LoweringStats:
    """What this process's lowerings cost and where their results came from."""

    lowerings: int = 0
    """Full lowerings run (to_edge... to_executorch), refusals included."""
    lowering_seconds: float = 0.0
    memory_hits: int = 0
    disk_hits: int = 0
    disk_writes: int = 0
    retraces_skipped: int = 0
    """``run_decompositions`` calls answered with the program itself (``compat.torch.retrace_is_identity``)."""
    retraces_run: int = 0


STATS = LoweringStats()

_BOOKKEEPING = frozenset(
    {
        "getitem",
        "aten.sym_size.int",
        "aten.sym_numel.default",
        "aten.sym_stride.int",
        "aten.sym_storage_offset.default",
        "aten._assert_scalar.default",
        "aten._assert_async.msg",
        "aten.sym_constrain_range_for_size.default",
        "aten._assert_tensor_metadata.default",
    }
)
"""Graph nodes that compute no tensor: shape arithmetic and runtime asserts."""


# ---------------------------------------------------------------------------------------------
# The harness program, prepared for ExecuTorch


def fingerprint(program, compile_specs: Sequence[CompileSpec], flavour: str) -> str:
    """A content hash: graph, the node metadata that matters, ranges, weights and compile specs."""
    import torch

    h = hashlib.sha256(flavour.encode())
    h.update(program.graph_module.code.encode())
    for node in program.graph.nodes:
        val = node.meta.get("val")
        desc = f"{getattr(val, 'dtype', '')}{list(getattr(val, 'shape', ()))}" if val is not None else ""
        h.update(f"{node.name}|{node.op}|{node.target}|{node.args}|{node.kwargs}|{node.meta.get('debug_handle')}|{desc}".encode())
    h.update(repr(sorted((str(k), str(v)) for k, v in program.range_constraints.items())).encode())
    h.update(repr(program.graph_signature).encode())
    for name, tensor in sorted({**program.state_dict, **program.constants}.items()):
        h.update(name.encode())
        if isinstance(tensor, torch.Tensor):
            t = tensor.detach().contiguous().reshape(-1)
            h.update(f"{t.dtype}{list(tensor.shape)}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes())
        else:
            h.update(repr(tensor).encode())
    for spec in compile_specs:
        h.update(spec.key.encode() + b"=" + spec.value)
    return h.hexdigest()


def prepared_copy(program):
    """A private copy with harness handles in ``meta["custom"]`` and every dynamic size bounded."""
    exported = copy.deepcopy(program)
    shape_envs = set()
    for node in exported.graph.nodes:
        if node.op == "call_function" and "debug_handle" in node.meta:
            custom = dict(node.meta.get("custom") or {})
            custom[CUSTOM_KEY] = node.meta["debug_handle"]
            node.meta["custom"] = custom
        val = node.meta.get("val")
        for size in getattr(val, "shape", ()) or ():
            env = getattr(getattr(size, "node", None), "shape_env", None)
            if env is not None:
                shape_envs.add(env)
    hints = {}
    for env in shape_envs:
        for sym, hint in getattr(env, "backed_var_to_val", getattr(env, "var_to_val", {})).items():
            hints[sym] = hint
    for sym, vr in list(exported.range_constraints.items()):
        if not compat_torch.is_unbounded(vr.upper):
            continue  # already bounded
        upper = max(int(hints.get(sym, 0)), DYNAMIC_DIM_BOUND)
        bounded = compat_torch.value_range(vr.lower, upper)
        exported.range_constraints[sym] = bounded
        for env in shape_envs:
            if sym in env.var_to_range:
                env.var_to_range[sym] = bounded
    return exported


def restore_harness_handles(graph_module):
    """Transform pass: the debug handle of every node is the harness handle it came from."""
    from torch.fx.passes.infra.pass_base import PassResult

    modules = [graph_module] + [m for m in graph_module.modules() if m is not graph_module and hasattr(m, "graph")]
    for gm in modules:
        for node in gm.graph.nodes:
            if node.op in ("placeholder", "output"):
                continue
            handle = (node.meta.get("custom") or {}).get(CUSTOM_KEY)
            if handle is None:
                node.meta.pop("debug_handle", None)
            else:
                node.meta["debug_handle"] = handle
    return PassResult(graph_module, True)


def leftover_ops(graph) -> tuple[list[str], int]:
    """(compute ops outside any delegate, each with its tensor arguments, as in
    ``aten.relu.default(float32[0])``; number of delegate calls) of a lowered top-level graph."""
    leftovers, delegates = [], 0
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        name = op_name(node.target)
        if "executorch_call_delegate" in name:
            delegates += 1
        elif name.startswith("sym.") or name in _BOOKKEEPING:
            continue
        else:
            leftovers.append(f"{name}({', '.join(_arg_specs(node))})")
    return leftovers, delegates


def _arg_specs(node) -> list[str]:
    """``float32[2, 0]`` for each tensor argument of ``node`` (what the partitioner judged)."""
    specs = []
    for arg in node.all_input_nodes:
        val = arg.meta.get("val")
        if hasattr(val, "dtype") and hasattr(val, "shape"):
            specs.append(f"{str(val.dtype).removeprefix('torch.')}{list(val.shape)}")
    return specs


UNDELEGATED_HINT = (
    "XnnpackPartitioner's common constraints (partition/config/xnnpack_config.py) refuse empty tensors "
    "and mixed input dtypes, its op configs their own attribute limits"
)


def _describe(ops: list[str]) -> str:
    counts: dict[str, int] = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    return ", ".join(f"{op} (x{n})" if n > 1 else op for op, n in sorted(counts.items()))


def refusal_from(exc: Exception) -> BackendError | None:
    """ExecuTorch's own clean refusals as BackendError(NotSupported); None for anything else."""
    if compat_torch.is_spec_violation(exc):
        text = " ".join(str(exc).split())
        return BackendError(Error.NotSupported, f"ExecuTorch's Edge dialect verifier refuses the program: {text[:600]}")
    return None


# ---------------------------------------------------------------------------------------------
# Re-tracing that changes nothing


def _count_retrace(skipped: bool) -> None:
    if skipped:
        STATS.retraces_skipped += 1
    else:
        STATS.retraces_run += 1


# ---------------------------------------------------------------------------------------------
# Results


@dataclass
class Lowered:
    """What one lowering produced, kept for repeats and for the runtime."""

    processed_bytes: bytes
    debug_handle_map: dict[int, tuple[int, ...]]
    named_data: dict[str, DataEntry]
    pte: bytes = b""
    """XNNPACK: the whole lowered program as ``to_executorch`` serialized it (``template`` is read from it)."""
    partition: Any = None
    """XNNPACK: the Edge program of the delegated partition (re-preprocessed for PRE-002)."""
    et_compile_specs: list = field(default_factory=list)
    edge: Any = None
    """portable: the EdgeProgramManager (to_executorch again for PRE-002)."""
    reproduced: bool = False
    """Nothing is left to re-run: the first repeat happened, or the entry came from disk."""
    from_disk: bool = False
    _template: Any = field(default=None, repr=False)

    @property
    def template(self):
        """XNNPACK: the PTEFile the delegate payload is embedded in at init (deserialized on first use)."""
        if self._template is None and self.pte:
            self._template = executorch_compat.deserialize_pte(self.pte)
        return self._template

    def named_output(self) -> NamedDataStoreOutput | None:
        return NamedDataStoreOutput(dict(self.named_data)) if self.named_data else None


class _Cache:
    """LRU of Lowered results, BackendError refusals and Crashes by fingerprint; thread safe."""

    def __init__(self, size: int = CACHE_ENTRIES):
        self.size = size
        self.entries: OrderedDict[str, Lowered | BackendError] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: str):
        with self.lock:
            entry = self.entries.get(key)
            if entry is not None:
                self.entries.move_to_end(key)
            return entry

    def put(self, key: str, entry) -> None:
        with self.lock:
            self.entries[key] = entry
            self.entries.move_to_end(key)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)


@dataclass(frozen=True)
class Crash:
    """A lowering that raised something other than BackendError: ExecuTorch's own pass or
    serializer failing on the program. Deterministic for a given program, ExecuTorch and torch
    (all in the cache key), so it is kept like a refusal and raised again on a repeat, under
    the same type name and message (the report reads ``preprocess raised Type: message``)."""

    type_name: str
    message: str
    traceback: str

    NOT_KEPT = (MemoryError, OSError, RecursionError)
    """Failures of the machine, not of the lowering: lowered again next time."""

    @classmethod
    def of(cls, exc: Exception) -> Crash | None:
        import traceback

        if isinstance(exc, (BackendError, *cls.NOT_KEPT)):
            return None
        text = "".join(traceback.format_exception(exc))[-4000:]
        return cls(type(exc).__name__, str(exc), text)

    def exception(self) -> Exception:
        kind = type(self.type_name, (CachedCrash,), {"__module__": __name__})
        exc = kind(self.message)
        exc.add_note(f"the lowering raised this when first run (kept in the lowering cache); its traceback then:\n{self.traceback}")
        return exc


class CachedCrash(Exception):
    """Base of the exceptions a cached ``Crash`` is raised again as (named like the original)."""


_XNNPACK_CACHE = _Cache()
_PORTABLE_CACHE = _Cache()
_XNNPACK_PARTIAL_CACHE = _Cache()
_LOWER_LOCK = threading.Lock()  # ExecuTorch's lowering keeps global state (op registries, fake modes)


# ---------------------------------------------------------------------------------------------
# The disk cache


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def disk_cacheable(program) -> bool:
    """Whether lowerings of ``program`` may be kept on disk: a program the harness built
    itself (``programs.build_program`` or ``batch_program``: no torch.export provenance,
    ``nn_module_stack``, on any node) whose compute nodes all apply one operator, with no
    argument whose spelling holds a memory address (the fingerprint would differ per process).
    Those are the NUM checks' programs; contract programs are exports of models."""
    targets = set()
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        if "nn_module_stack" in node.meta:
            return False
        if _ADDRESS.search(f"{node.args}{node.kwargs}"):
            return False
        if node.target is not operator.getitem:
            targets.add(node.target)
    return len(targets) == 1


@functools.cache
def _versions() -> str:
    """What else a stored lowering depends on: ExecuTorch, torch, the entry layout, this module."""
    import torch
    from executorch.version import __version__ as et_version

    source = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return f"executorch {et_version}|torch {torch.__version__}|format {LOWERING_FORMAT}|bound {DYNAMIC_DIM_BOUND}|{source}"


class LoweringDiskCache:
    """Lowered results, clean refusals and crashes, one file per key under ``directory``.

    A file is ``MAGIC``, a 4-byte header length, a JSON header (kind, refusal or crash message,
    debug handle map, named-data keys and alignments, section lengths, SHA-256 of the
    sections) and the sections: processed bytes, the .pte (XNNPACK), each named-data
    buffer. Writes go to a temporary file renamed into place, so concurrent xdist workers
    read whole entries or none; an unreadable entry is deleted and lowered again. A hit
    refreshes the file's mtime; past ``max_bytes`` the oldest files go until 80% remain.
    """

    MAGIC = b"CFLOWER\x01"

    def __init__(self, directory: Path, max_bytes: int = DISK_CACHE_MB << 20):
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self._written = None  # bytes this process believes are stored; None: not yet scanned
        self._lock = threading.Lock()

    def key(self, fingerprint_: str) -> str:
        return hashlib.sha256(f"{fingerprint_}|{_versions()}".encode()).hexdigest()[:40]

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.lowered"

    def load(self, key: str) -> Lowered | BackendError | Crash | None:
        path = self.path(key)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        try:
            entry = self._decode(data)
        except Exception as exc:  # truncated, corrupt or foreign: lower again
            log.warning("lowering cache entry %s unreadable (%s); lowering again", path, exc)
            path.unlink(missing_ok=True)
            return None
        try:
            os.utime(path)
        except OSError:
            pass
        return entry

    def store(self, key: str, entry: Lowered | BackendError | Crash) -> None:
        data = self._encode(entry)
        path = self.path(key)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError as exc:  # a read-only or full disk costs time, not correctness
            log.warning("could not store lowering %s: %s", path, exc)
            tmp.unlink(missing_ok=True)
            return
        with self._lock:
            self._written = None if self._written is None else self._written + len(data)
            over = self._written is None or self._written > self.max_bytes
        if over:
            self.evict()

    def evict(self) -> None:
        """Delete the least recently used entries while the directory holds more than ``max_bytes``."""
        files = []
        now = time.time()
        try:
            scan = list(os.scandir(self.directory))
        except OSError:
            return
        for item in scan:
            try:
                stat = item.stat()
            except OSError:
                continue
            if item.name.endswith(".tmp"):
                if now - stat.st_mtime > 3600:  # left by a killed writer
                    Path(item.path).unlink(missing_ok=True)
                continue
            if item.name.endswith(".lowered"):
                files.append((stat.st_mtime, stat.st_size, item.path))
        total = sum(size for _, size, _ in files)
        if total > self.max_bytes:
            for _, size, path in sorted(files):
                if total <= self.max_bytes * 0.8:
                    break
                Path(path).unlink(missing_ok=True)
                total -= size
        with self._lock:
            self._written = total

    def _encode(self, entry: Lowered | BackendError | Crash) -> bytes:
        if isinstance(entry, BackendError):
            header = {"kind": "refused", "error": int(entry.error), "message": entry.message, "sections": []}
            sections: list[bytes] = []
        elif isinstance(entry, Crash):
            header = {"kind": "crashed", "type": entry.type_name, "message": entry.message, "traceback": entry.traceback, "sections": []}
            sections = []
        else:
            names = sorted(entry.named_data)
            sections = [entry.processed_bytes, entry.pte, *(entry.named_data[n].data for n in names)]
            header = {
                "kind": "lowered",
                "debug_handle_map": [[k, list(v)] for k, v in entry.debug_handle_map.items()],
                "named_data": [[n, entry.named_data[n].alignment] for n in names],
                "sections": [len(b) for b in sections],
            }
        body = b"".join(sections)
        header["format"] = LOWERING_FORMAT
        header["sha256"] = hashlib.sha256(body).hexdigest()
        text = json.dumps(header, sort_keys=True).encode()
        return self.MAGIC + len(text).to_bytes(4, "little") + text + body

    def _decode(self, data: bytes) -> Lowered | BackendError | Crash:
        if not data.startswith(self.MAGIC):
            raise ValueError("not a lowering cache entry")
        start = len(self.MAGIC) + 4
        size = int.from_bytes(data[len(self.MAGIC) : start], "little")
        header = json.loads(data[start : start + size])
        body = data[start + size :]
        if header.get("format") != LOWERING_FORMAT or hashlib.sha256(body).hexdigest() != header["sha256"]:
            raise ValueError("format or checksum mismatch")
        if header["kind"] == "refused":
            return BackendError(Error(header["error"]), header["message"])
        if header["kind"] == "crashed":
            if not str(header["type"]).isidentifier():
                raise ValueError("crash entry with a type name that is not an identifier")
            return Crash(header["type"], header["message"], header["traceback"])
        sections, offset = [], 0
        for length in header["sections"]:
            sections.append(body[offset : offset + length])
            offset += length
        processed, pte, *buffers = sections
        named = {name: DataEntry(buffer, alignment) for (name, alignment), buffer in zip(header["named_data"], buffers)}
        dhm = {key: tuple(values) for key, values in header["debug_handle_map"]}
        return Lowered(processed, dhm, named, pte=pte, reproduced=True, from_disk=True)


_DISK_CACHES: dict[Path, LoweringDiskCache] = {}


def disk_cache() -> LoweringDiskCache | None:
    """The disk cache under ``programs.cache_dir()``; None when ``CONFORMANCE_NO_LOWERING_CACHE=1``."""
    from conformance.programs import cache_dir

    if os.environ.get(NO_DISK_CACHE_ENV) == "1":
        return None
    directory = cache_dir() / "lowered"
    cache = _DISK_CACHES.get(directory)
    if cache is None:
        cache = _DISK_CACHES.setdefault(directory, LoweringDiskCache(directory))
    return cache


def _lowered(program, compile_specs, flavour: str, memory: _Cache, lower, reproduce) -> Lowered:
    """The lowering of ``program``: from memory, from disk, or ``lower``; raises its refusal.

    A program lowered in this process is re-preprocessed (``reproduce``) on its first
    repeat, for PRE-002; see the module docstring."""
    key = fingerprint(program, compile_specs, flavour)
    entry = memory.get(key)
    if entry is None:
        disk = disk_cache() if disk_cacheable(program) else None
        disk_key = disk.key(key) if disk is not None else None
        if disk is not None:
            entry = disk.load(disk_key)
            if entry is not None:
                STATS.disk_hits += 1
                memory.put(key, entry)
        if entry is None:

            def keep(outcome: Lowered | BackendError | Crash) -> None:
                memory.put(key, outcome)
                if disk is not None:
                    disk.store(disk_key, outcome)
                    STATS.disk_writes += 1

            start = time.perf_counter()
            STATS.lowerings += 1
            try:
                entry = lower(program, compile_specs)
            except BackendError as exc:
                if exc.error is Error.NotSupported:
                    keep(exc)
                raise
            except Exception as exc:
                crash = Crash.of(exc)
                if crash is not None:
                    keep(crash)
                raise
            finally:
                STATS.lowering_seconds += time.perf_counter() - start
            keep(entry)
            return entry
    else:
        STATS.memory_hits += 1
    if isinstance(entry, BackendError):
        raise BackendError(entry.error, entry.message)
    if isinstance(entry, Crash):
        raise entry.exception()
    if not entry.reproduced:
        entry.reproduced = True
        again = reproduce(entry)
        if again is not None:
            return again
    return entry


def _named_data(output) -> dict[str, DataEntry]:
    """ExecuTorch's NamedDataStoreOutput (pte_data: key -> buffer index, alignment) as harness entries."""
    if output is None:
        return {}
    if output.external_data:
        raise BackendError(
            Error.NotSupported,
            f"the delegate stored named data outside the program ({sorted(output.external_data)}); "
            "the adapter carries only data stored in the .pte",
        )
    return {key: DataEntry(bytes(output.buffers[e.buffer_index]), int(e.alignment)) for key, e in output.pte_data.items()}


def _et_specs(compile_specs: Sequence[CompileSpec]) -> list:
    from executorch.exir.backend.compile_spec_schema import CompileSpec as ETCompileSpec

    return [ETCompileSpec(s.key, s.value) for s in compile_specs]


def _dhm(raw) -> dict[int, tuple[int, ...]]:
    out = {}
    for key, value in (raw or {}).items():
        values = value if isinstance(value, (list, tuple)) else (value,)
        out[int(key) if not isinstance(key, str) else key] = tuple(int(v) for v in values if v is not None)
    return out


def _private_copy(program, skip_retraces: bool):
    exported = prepared_copy(program)
    return executorch_compat.without_redundant_retraces(exported, _count_retrace) if skip_retraces else exported


# ---------------------------------------------------------------------------------------------
# XNNPACK


def lower_xnnpack(program, compile_specs: Sequence[CompileSpec]) -> Lowered:
    """Preprocess for executorch-xnnpack (cached); raises BackendError(NotSupported) on refusal."""
    return _lowered(program, compile_specs, "xnnpack", _XNNPACK_CACHE, _lower_xnnpack, _repreprocess_xnnpack)


def _xnnpack_edge(exported):
    """``to_edge_transform_and_lower`` with the XnnpackPartitioner, the harness's debug handles
    restored; ExecuTorch's clean refusals as BackendError(NotSupported). Under ``_LOWER_LOCK``."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    return _refusing(lambda: to_edge_transform_and_lower(exported, transform_passes=[restore_harness_handles], partitioner=[XnnpackPartitioner()]))


def _lower_xnnpack(program, compile_specs, *, skip_retraces: bool = True) -> Lowered:
    exported = _private_copy(program, skip_retraces)
    with _LOWER_LOCK:
        edge = _xnnpack_edge(exported)
        top = edge.exported_program()
        leftovers, delegates = leftover_ops(top.graph)
        if leftovers:
            raise BackendError(
                Error.NotSupported,
                f"{_describe(leftovers)} left undelegated by the XnnpackPartitioner "
                f"(they would run on ExecuTorch's CPU kernels, not on XNNPACK; {UNDELEGATED_HINT})",
            )
        lowered = [m for _, m in top.graph_module.named_children() if hasattr(m, "processed_bytes")]
        if delegates == 0 or not lowered:
            raise BackendError(Error.NotSupported, "the XnnpackPartitioner delegated nothing of this program")
        if len(lowered) > 1 or delegates > 1:
            raise BackendError(
                Error.NotSupported,
                f"the XnnpackPartitioner split the program into {len(lowered)} delegate partitions; "
                "the adapter certifies one XNNPACK blob per program",
            )
        module = lowered[0]
        if module.backend_id != "XnnpackBackend":
            raise BackendError(Error.NotSupported, f"the program was delegated to {module.backend_id}, not XnnpackBackend")
        executorch = edge.to_executorch()
    dhm = (module.meta or {}).get("debug_handle_map") if hasattr(module, "meta") else None
    return Lowered(
        processed_bytes=bytes(module.processed_bytes),
        debug_handle_map=_dhm(dhm),
        named_data=_named_data(module.named_data_store_output),
        pte=bytes(executorch.buffer),
        partition=copy.deepcopy(module.original_module),
        et_compile_specs=list(module.compile_specs),
    )


def _repreprocess_xnnpack(entry: Lowered) -> Lowered | None:
    """XnnpackBackend.preprocess again, on a fresh copy of the partition it lowered."""
    from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend

    with _LOWER_LOCK:
        result = XnnpackBackend.preprocess(copy.deepcopy(entry.partition), list(entry.et_compile_specs))
    return Lowered(
        processed_bytes=bytes(result.processed_bytes),
        debug_handle_map=_dhm(result.debug_handle_map),
        named_data=_named_data(result.data_store_output),
        pte=entry.pte,
        partition=entry.partition,
        et_compile_specs=entry.et_compile_specs,
        reproduced=True,
        _template=entry._template,
    )


def lower_xnnpack_partial(program, compile_specs: Sequence[CompileSpec]) -> Lowered:
    """Preprocess for executorch-xnnpack under ``PARTIAL_DELEGATION`` (cached): what the
    XnnpackPartitioner takes goes to XNNPACK, the rest stays on ExecuTorch's CPU kernels, and the
    blob is the whole .pte; raises BackendError(NotSupported) when nothing is delegated."""
    return _lowered(program, compile_specs, "xnnpack-partial", _XNNPACK_PARTIAL_CACHE, _lower_xnnpack_partial,
                    lambda entry: _reexecutorch(entry, _delegated_map))


def _lower_xnnpack_partial(program, compile_specs, *, skip_retraces: bool = True) -> Lowered:
    from .executorch_runtime import load_kernel_libraries

    load_kernel_libraries()  # the out variants of the quantized_decomposed ops left outside the delegate
    exported = _private_copy(program, skip_retraces)
    with _LOWER_LOCK:
        edge = _xnnpack_edge(exported)
        if leftover_ops(edge.exported_program().graph)[1] == 0:
            raise BackendError(Error.NotSupported, "the XnnpackPartitioner delegated nothing of this program")
        executorch = _runnable(edge, ", left outside the XNNPACK delegate")
    return Lowered(bytes(executorch.buffer), _delegated_map(executorch), {}, edge=edge)


def _delegated_map(executorch) -> dict[int, tuple[int, ...]]:
    """The emitter's instruction -> debug handles map, for the delegate calls only: the nodes XNNPACK computes."""
    delegates = executorch.delegate_map.get("forward", {})
    return {k: v for k, v in _instruction_map(executorch).items() if k in delegates}


# ---------------------------------------------------------------------------------------------
# portable


@functools.lru_cache(maxsize=1)
def runtime_operators() -> frozenset[str]:
    """The kernels the pip runtime registered, as ``aten::add.out`` (the quantized library's included)."""
    from executorch.runtime import Runtime

    from .executorch_runtime import load_kernel_libraries

    load_kernel_libraries()

    return frozenset(Runtime.get().operator_registry.operator_names)


def lower_portable(program, compile_specs: Sequence[CompileSpec]) -> Lowered:
    """Preprocess for executorch-portable (cached); raises BackendError(NotSupported) on refusal."""
    return _lowered(program, compile_specs, "portable", _PORTABLE_CACHE, _lower_portable, lambda entry: _reexecutorch(entry, _instruction_map))


def _refusing(lower):
    """``lower()``, with ExecuTorch's own clean refusals raised as BackendError(NotSupported)."""
    try:
        return lower()
    except Exception as exc:
        refusal = refusal_from(exc)
        if refusal is not None:
            raise refusal from exc
        raise


def _runnable(edge, where: str = ""):
    """``to_executorch`` of a copy of ``edge``; NotSupported when the pip runtime registered no kernel
    for an operator of its plan (``where``: where those operators are)."""
    executorch = copy.deepcopy(edge).to_executorch()
    plan = executorch.executorch_program.execution_plan[0]
    have = runtime_operators()
    missing = sorted({f"{o.name.replace('::', '.')}.{o.overload or 'default'}"
                      for o in plan.operators
                      if f"{o.name}.{o.overload}" not in have and o.name not in have})
    if missing:
        raise BackendError(
            Error.NotSupported,
            f"the ExecuTorch runtime has no kernel for {', '.join(missing)}{where} (it would fail at load_method with OperatorMissing)",
        )
    return executorch


def _reexecutorch(entry: Lowered, debug_handle_map) -> Lowered:
    """``to_executorch`` again on the entry's Edge program (PRE-002), its map made by ``debug_handle_map``."""
    with _LOWER_LOCK:
        executorch = copy.deepcopy(entry.edge).to_executorch()
    return Lowered(bytes(executorch.buffer), debug_handle_map(executorch), {}, reproduced=True)


def _instruction_map(executorch) -> dict[int, tuple[int, ...]]:
    raw = executorch.debug_handle_map.get("forward", {})
    return {int(k): v for k, v in _dhm(raw).items() if v}


def _refuse_dtypes_without_kernels(program) -> None:
    """NotSupported for a program holding a tensor of a dtype ExecuTorch's CPU kernels do not compute:
    they dispatch over the real types, Half, BFloat16 and Bool (ET_SWITCH_REALHBBF16_TYPES), so a
    uint16/32/64, complex or float8 tensor lowers to a .pte whose kernels fail at execute
    ("Unhandled dtype UInt16", InvalidArgument) or is refused by the Edge verifier."""
    from conformance.api import DTYPE_NAMES

    for node in program.graph.nodes:
        val = node.meta.get("val")
        for v in val if isinstance(val, (list, tuple)) else (val,):
            name = str(getattr(v, "dtype", "")).removeprefix("torch.")
            if name and hasattr(v, "shape") and name not in DTYPE_NAMES:
                raise BackendError(Error.NotSupported, f"executorch-portable: {node.name} is a {name} tensor; ExecuTorch's CPU kernels compute {', '.join(DTYPE_NAMES)}")


def _lower_portable(program, compile_specs, *, skip_retraces: bool = True) -> Lowered:
    from .executorch_runtime import load_kernel_libraries

    load_kernel_libraries()  # the out variants of the quantized_decomposed ops (PT2E programs)
    from executorch.exir import to_edge

    if compile_specs:
        raise BackendError(Error.InvalidArgument, f"executorch-portable takes no compile specs, got {[s.key for s in compile_specs]}")
    _refuse_dtypes_without_kernels(program)
    exported = _private_copy(program, skip_retraces)
    with _LOWER_LOCK:
        edge = _refusing(lambda: to_edge(exported).transform([restore_harness_handles]))
        executorch = _runnable(edge)
    return Lowered(bytes(executorch.buffer), _instruction_map(executorch), {}, edge=edge)
