"""The unit of certification: a backend, what it claims, and how to build it.

A third-party package exposes a ``BackendUnderTest`` (or a zero-argument
callable returning one) through the entry-point group ``conformance.backends``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .backend import BackendInterface, CompileSpec
from .scalar_type import DTYPE_NAMES, KNOWN_DTYPE_NAMES

ALL_DTYPES = "*"
FAMILIES = ("delegate", "torchscript", "lazy")


@dataclass(frozen=True)
class ToleranceLoosening:
    """A tolerance a backend widens for one op, with the reason a reader will see in its report."""

    op: str
    reason: str
    dtypes: tuple[str, ...] = ()
    """Dtypes it applies to; empty means every dtype."""
    atol: float | None = None
    rtol: float | None = None
    ulp: int | None = None

    def __post_init__(self):
        if not self.reason.strip():
            raise ValueError(f"tolerance loosening for {self.op}: a reason is required")
        if self.atol is None and self.rtol is None and self.ulp is None:
            raise ValueError(f"tolerance loosening for {self.op}: give atol, rtol or ulp")
        object.__setattr__(self, "dtypes", tuple(self.dtypes))

    def applies(self, op: str, dtype: str) -> bool:
        return self.op == op and (not self.dtypes or dtype in self.dtypes)


@dataclass(frozen=True)
class BlobVersionField:
    """Where a backend's blob carries its format version, so the harness can forge older and newer ones."""

    offset: int
    size: int
    current: int
    """The version this runtime reads."""
    byteorder: str = "little"


LATITUDES: Mapping[str, str] = MappingProxyType(
    {
        "tf32": "matmul and convolution float32 inputs rounded to a 10-bit mantissa (round to nearest even) before a "
        "float32 accumulation: the expected output is the reference kernel's on the rounded inputs, within the op's "
        "derived bound",
        "ftz": "subnormal results flushed to a zero of the same sign: both sides flushed before comparing",
        "daz": "subnormal inputs read as a zero of the same sign: the expected output is the reference kernel's on the "
        "flushed inputs",
        "reassociation": "any summation order for the ops that accumulate: the op spec's derived bound (which every op "
        "with a bound grants, declared or not); an op without a bound stays strict",
        "fast-division": "true division (by a tensor or a scalar) as x * (1 / y): within 2 ULP of the correctly "
        "rounded quotient, or equal to x * (1 / y) rounded as the op's compute type rounds it",
        "signed-zero": "the sign of a zero result is not compared",
    }
)
"""The numerical latitudes a backend may declare (``Manifest.latitudes``), each a model the oracle
applies exactly (conformance/latitudes.py; specs/README.md, "Declared latitude"). Without a
declaration the strict semantics hold."""

REFUSAL_KINDS = ("empty", "0-d", "rank N", "mixed dtypes", "broadcasting", "large", "one-tensor list")
_DEVICE = re.compile(r"[a-z][a-z0-9_]*(:\d+)?")
"""A torch device name: its type, and optionally its index (``torch.device``'s string form)."""
_REFUSAL_KIND = re.compile(r"empty|0-d|rank \d+|mixed dtypes|broadcasting|large|one-tensor list")


@dataclass(frozen=True)
class Manifest:
    """What a backend claims.

    ``ops`` maps an ATen overload name to the dtypes claimed (a tuple of names, or
    ``"*"`` for every dtype the spec lists). An op absent from ``ops`` is not
    claimed: refusing it cleanly is NOT_SUPPORTED, accepting it means it is
    checked like a claim. ``not_applicable`` maps a clause ID (or a family prefix
    such as ``"REG-"``) to the reason it cannot be observed for this backend.

    ``refuses`` maps an op (or ``"*"``, every op) to the kinds of call the backend documents
    it refuses (its op-support table): ``"empty"``, ``"0-d"``, ``"rank N"``, ``"mixed dtypes"``,
    ``"broadcasting"``, ``"large"``, ``"one-tensor list"`` (``Call.features``). A claimed op's refusal of such a call is
    clean; any other refusal of a claimed op fails its check.

    ``latitudes`` names the numerical latitudes the backend takes (``LATITUDES``: "tf32", "ftz",
    "daz", "reassociation", "fast-division", "signed-zero"): an output that fails the strict
    comparison is judged by the declared latitudes' model, and the verdict names those taken.
    """

    ops: Mapping[str, tuple[str, ...] | str] = field(default_factory=dict)
    compile_specs: tuple[str, ...] = ()
    tolerances: tuple[ToleranceLoosening, ...] = ()
    not_applicable: Mapping[str, str] = field(default_factory=dict)
    blob_version: BlobVersionField | None = None
    refuses: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    latitudes: tuple[str, ...] = ()

    def __post_init__(self):
        ops = {}
        for op, dtypes in dict(self.ops).items():
            if dtypes == ALL_DTYPES:
                ops[op] = ALL_DTYPES
                continue
            dtypes = tuple(dtypes)
            unknown = [d for d in dtypes if d not in KNOWN_DTYPE_NAMES]
            if unknown:
                raise ValueError(f"manifest: op {op} claims unknown dtype(s) {unknown}; known: {', '.join(KNOWN_DTYPE_NAMES)}")
            ops[op] = dtypes
        object.__setattr__(self, "ops", MappingProxyType(ops))
        object.__setattr__(self, "not_applicable", MappingProxyType(dict(self.not_applicable)))
        object.__setattr__(self, "tolerances", tuple(self.tolerances))
        object.__setattr__(self, "compile_specs", tuple(self.compile_specs))
        refuses = {op: tuple(kinds) for op, kinds in dict(self.refuses).items()}
        for op, kinds in refuses.items():
            unknown = [k for k in kinds if not _REFUSAL_KIND.fullmatch(k)]
            if unknown:
                raise ValueError(f"manifest: refuses[{op!r}] has unknown kind(s) {unknown}; known: {', '.join(REFUSAL_KINDS)}")
        object.__setattr__(self, "refuses", MappingProxyType(refuses))
        if isinstance(self.latitudes, str):
            raise ValueError(f"manifest: latitudes must be a list of names, got the string {self.latitudes!r}")
        latitudes = tuple(dict.fromkeys(self.latitudes))
        unknown = [name for name in latitudes if name not in LATITUDES]
        if unknown:
            raise ValueError(f"manifest: unknown latitude(s) {unknown}; known: {', '.join(LATITUDES)}")
        object.__setattr__(self, "latitudes", latitudes)

    def claims(self, op: str, dtype: str) -> bool:
        """Whether the manifest claims ``op`` in ``dtype``. "*" claims the ten dtypes of the specs'
        "all" (DTYPE_NAMES); the wide unsigned, complex and float8 dtypes are claimed by name, so a
        spec that adds them to an op does not extend an existing manifest's claims."""
        dtypes = self.ops.get(op)
        return dtypes is not None and ((dtypes == ALL_DTYPES and dtype in DTYPE_NAMES) or dtype in dtypes)

    def not_applicable_reason(self, clause: str) -> str | None:
        if clause in self.not_applicable:
            return self.not_applicable[clause]
        for key, reason in self.not_applicable.items():
            if key.endswith("-") and clause.startswith(key):
                return reason
        return None

    def declared_refusal(self, op: str, features: list[str]) -> str | None:
        """The documented refusal (of ``refuses``) that covers a call with ``features``, if any."""
        declared = set(self.refuses.get(op, ())) | set(self.refuses.get("*", ()))
        for feature in features:
            if feature in declared:
                return feature
        return None

    def loosening(self, op: str, dtype: str) -> ToleranceLoosening | None:
        for item in self.tolerances:
            if item.applies(op, dtype):
                return item
        return None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "manifest") -> Manifest:
        known = {"ops", "compile_specs", "tolerances", "not_applicable", "blob_version", "refuses", "latitudes"}
        extra = set(data) - known
        if extra:
            raise ValueError(f"{source}: unknown key(s) {sorted(extra)}; expected {sorted(known)}")
        try:
            tolerances = tuple(ToleranceLoosening(**t) for t in data.get("tolerances", ()))
        except TypeError as exc:
            raise ValueError(f"{source}: bad tolerance entry: {exc}") from None
        try:
            version = BlobVersionField(**data["blob_version"]) if "blob_version" in data else None
        except TypeError as exc:
            raise ValueError(f"{source}: bad blob_version (offset, size, current, byteorder): {exc}") from None
        return cls(
            ops=data.get("ops", {}),
            compile_specs=tuple(data.get("compile_specs", ())),
            tolerances=tolerances,
            not_applicable=data.get("not_applicable", {}),
            blob_version=version,
            refuses=data.get("refuses", {}),
            latitudes=data.get("latitudes", ()),
        )

    @classmethod
    def from_toml(cls, path: str | Path) -> Manifest:
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path}: not valid TOML: {exc}") from None
        return cls.from_dict(data, source=str(path))


@dataclass(frozen=True)
class BackendUnderTest:
    """A backend as the harness certifies it."""

    name: str
    details: Any
    """The ahead-of-time half: a ``BackendDetails`` subclass, or any object with ``preprocess``."""
    runtime: BackendInterface
    """The runtime half."""
    compile_specs: tuple[CompileSpec, ...] = ()
    version: str = "unknown"
    manifest: Manifest = field(default_factory=Manifest)
    description: str = ""
    registry: Callable[[], Any] | None = None
    """Factory of an empty registry of the runtime this backend runs in (REG clauses).
    None: ``conformance.api.BackendRegistry``, the Python runtime's registry."""
    profile: str = "full"
    """The certification profile ``certify`` uses when none is named: the largest one that
    makes sense for this backend (one whose every program costs a compile may name a sample)."""
    family: str = "delegate"
    """Which interface the backend implements: delegate (ExecuTorch-style), torchscript
    (torch._C._jit_to_backend) or lazy (torch.lazy). Clauses name the families they apply to."""
    batch_numerics: bool = False
    """Whether NUM checks may put several calls of one op in one program (``programs.batch_program``):
    for a backend whose preprocess is slow (a compiler), one preprocess for eight edge cases. The
    verdict of a call whose batched outputs differ is its own, run alone."""
    pytest_plugins: tuple[str, ...] = ()
    """Modules of pytest plugins this backend's package ships (hooks of ``conformance.plugin.hookspecs``),
    loaded into certify's otherwise closed run and listed in the report."""
    partial_delegation: bool = False
    """Whether preprocess honours ``PARTIAL_DELEGATION`` (ExecuTorch's partitioner model): given that
    compile spec, a program whose ops the backend does not all take is not refused; the backend
    delegates what it takes, runs the rest on a fallback of its own (ExecuTorch's CPU kernels), and
    its debug_handle_map names exactly the nodes it delegated. The whole-program checks (MOD, QNT)
    ask for it after a refusal and report the delegated fraction, never counting what ran outside
    as the backend's pass; the NUM and contract checks never pass it."""
    device: str = "cpu"
    """The torch device the backend computes on, as ``torch.device`` spells it (``"cpu"``, ``"cuda"``,
    ``"cuda:1"``). Inputs and outputs stay host NumPy arrays at the contract boundary whatever it is;
    the performance checks wait for the device's queued work before each timed region starts and
    before it ends (an accelerator returns from a launch before the work is done), and the report
    says which device the timings are of."""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("BackendUnderTest: name must be a non-empty str")
        if not callable(getattr(self.details, "preprocess", None)):
            raise TypeError(f"BackendUnderTest {self.name!r}: details has no callable preprocess")
        if not isinstance(self.runtime, BackendInterface):
            raise TypeError(
                f"BackendUnderTest {self.name!r}: runtime must be a conformance.api.BackendInterface, "
                f"got {type(self.runtime).__name__}"
            )
        object.__setattr__(self, "compile_specs", tuple(self.compile_specs))
        object.__setattr__(self, "pytest_plugins", tuple(self.pytest_plugins))
        if self.family not in FAMILIES:
            raise ValueError(f"BackendUnderTest {self.name!r}: family must be one of {FAMILIES}, got {self.family!r}")
        if not isinstance(self.device, str) or not _DEVICE.fullmatch(self.device):
            raise ValueError(
                f"BackendUnderTest {self.name!r}: device must be a torch device name such as 'cpu', 'cuda' or 'cuda:1', "
                f"got {self.device!r}"
            )
