"""The reference backend's processed blob: a versioned, bounds-checked binary format.

Everything is little-endian. Nothing in it is executable: ops are names looked up
in the kernel table, arguments are plain data, and there is no pickle anywhere.

Layout (format version 1)::

    header, 32 bytes
      0  magic         4s   b"NPRB"
      4  version       u16  FORMAT_VERSION
      6  flags         u16  0 (reserved)
      8  header_size   u32  32
      12 payload_size  u32  bytes after the header
      16 payload_crc   u32  zlib.crc32 of the payload
      20 num_sections  u32
      24 reserved      u64  0
    payload
      section directory: num_sections x (kind u32, offset u32, length u32),
      offsets relative to the payload start; then the sections.

Sections, each exactly once:
    STRINGS       u32 n; n x (u32 len, utf-8 bytes)
    SYMBOLS       u32 n; n x (i64 min, i64 max)            dynamic dimensions; max -1 = unbounded
    VALUES        u32 n; n x value                          SSA slots: tensors and scalars
                  value = u8 kind (1 tensor, 2 int, 3 float, 4 bool)
                          tensor: u8 ScalarType, u8 rank, rank x (u8 dim kind, i64 v)
                          dim kind: 0 static (v = size), 1 symbol (v = symbol id), 2 computed at run time
    INPUTS        u32 n; n x u32 value id
    OUTPUTS       u32 n; n x u32 value id
    CONSTANTS     u32 n; n x (u32 value id, u32 string id of the NamedDataMap key)
    INSTRUCTIONS  u32 n; n x instruction
                  instruction = u32 op name string id, u32 debug id,
                                u16 nargs, nargs x arg, u16 nkwargs, nkwargs x (u32 name string id, arg),
                                u16 nout, nout x u32 value id
                  arg = u8 tag, then: NONE -; BOOL u8; INT i64; FLOAT f64; STR u32 string id;
                        VALUE u32 value id; LIST u32 n, n x arg (depth <= 4); DTYPE u8 ScalarType

A ScalarType byte is ExecuTorch's code (``conformance.api.ScalarType``): the ten dtypes of the
specs' "all" and ComplexFloat 9, ComplexDouble 10, Float8_e5m2 23, Float8_e4m3fn 24, UInt16 27,
UInt32 28, UInt64 29. The codes were added without a version change: the layout is the same, and
a runtime that predates a code refuses a blob holding it as InvalidProgram ("unknown ScalarType
code"), which it is for that runtime. Scalar arguments stay int64, double and bool (a complex
op's Python scalars are real: ExecuTorch's EValue has no complex scalar either).

The header's version sits outside the checksum so that a runtime can say
"wrong version" rather than "corrupt" when only the version differs.
Readers refuse a blob with ``BackendError``: ``DelegateInvalidCompatibility``
for a version this runtime does not read, ``InvalidProgram`` for anything else.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from conformance.api import BackendError, Error, ScalarType

MAGIC = b"NPRB"
FORMAT_VERSION = 1
HEADER = struct.Struct("<4sHHIIIIQ")
HEADER_SIZE = HEADER.size  # 32
VERSION_OFFSET = 4
VERSION_SIZE = 2
MAX_LIST_DEPTH = 4
MAX_RANK = 16
# Bounds that keep a hostile blob from making the reader allocate or loop without end.
MAX_COUNT = 1 << 20
MAX_DIM = 1 << 40


class Section(IntEnum):
    STRINGS = 1
    SYMBOLS = 2
    VALUES = 3
    INPUTS = 4
    OUTPUTS = 5
    CONSTANTS = 6
    INSTRUCTIONS = 7


class ValueKind(IntEnum):
    TENSOR = 1
    INT = 2
    FLOAT = 3
    BOOL = 4


class DimKind(IntEnum):
    STATIC = 0
    SYMBOL = 1
    COMPUTED = 2


class ArgTag(IntEnum):
    NONE = 0
    BOOL = 1
    INT = 2
    FLOAT = 3
    STR = 4
    VALUE = 5
    LIST = 6
    DTYPE = 7


# ---------------------------------------------------------------------------------------------
# The decoded program


@dataclass(frozen=True)
class Ref:
    """An argument that names a value slot."""

    id: int


@dataclass(frozen=True)
class Dtype:
    """An argument that names an element type."""

    code: ScalarType


Arg = None | bool | int | float | str | Ref | Dtype | tuple


@dataclass(frozen=True)
class Dim:
    kind: DimKind
    value: int  # size, symbol id, or 0 when computed


@dataclass(frozen=True)
class ValueInfo:
    kind: ValueKind
    dtype: ScalarType | None = None
    dims: tuple[Dim, ...] = ()


@dataclass(frozen=True)
class Instruction:
    op: str
    debug_id: int
    args: tuple[Arg, ...]
    kwargs: tuple[tuple[str, Arg], ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class Program:
    symbols: tuple[tuple[int, int], ...]
    values: tuple[ValueInfo, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    constants: tuple[tuple[int, str], ...]
    instructions: tuple[Instruction, ...]
    version: int = FORMAT_VERSION


NO_VALUE = 0xFFFFFFFF
"""An instruction output slot that is discarded (the op returns None there)."""


# ---------------------------------------------------------------------------------------------
# Writer


@dataclass
class _Writer:
    strings: dict[str, int] = field(default_factory=dict)

    def string(self, text: str) -> int:
        if text not in self.strings:
            self.strings[text] = len(self.strings)
        return self.strings[text]

    def arg(self, out: bytearray, value: Arg, depth: int = 0) -> None:
        if value is None:
            out += struct.pack("<B", ArgTag.NONE)
        elif isinstance(value, bool):
            out += struct.pack("<BB", ArgTag.BOOL, value)
        elif isinstance(value, int):
            out += struct.pack("<Bq", ArgTag.INT, value)
        elif isinstance(value, float):
            out += struct.pack("<Bd", ArgTag.FLOAT, value)
        elif isinstance(value, str):
            out += struct.pack("<BI", ArgTag.STR, self.string(value))
        elif isinstance(value, Ref):
            out += struct.pack("<BI", ArgTag.VALUE, value.id)
        elif isinstance(value, Dtype):
            out += struct.pack("<BB", ArgTag.DTYPE, value.code)
        elif isinstance(value, tuple):
            if depth >= MAX_LIST_DEPTH:
                raise ValueError(f"argument lists nest deeper than {MAX_LIST_DEPTH}")
            out += struct.pack("<BI", ArgTag.LIST, len(value))
            for item in value:
                self.arg(out, item, depth + 1)
        else:
            raise TypeError(f"cannot encode argument {value!r} of type {type(value).__name__}")


def write(program: Program) -> bytes:
    """Serialize ``program``; the same program always gives the same bytes."""
    w = _Writer()
    instructions = bytearray(struct.pack("<I", len(program.instructions)))
    for ins in program.instructions:
        instructions += struct.pack("<II", w.string(ins.op), ins.debug_id)
        instructions += struct.pack("<H", len(ins.args))
        for a in ins.args:
            w.arg(instructions, a)
        instructions += struct.pack("<H", len(ins.kwargs))
        for name, a in ins.kwargs:
            instructions += struct.pack("<I", w.string(name))
            w.arg(instructions, a)
        instructions += struct.pack("<H", len(ins.outputs))
        instructions += b"".join(struct.pack("<I", o) for o in ins.outputs)

    constants = bytearray(struct.pack("<I", len(program.constants)))
    for value_id, key in program.constants:
        constants += struct.pack("<II", value_id, w.string(key))

    values = bytearray(struct.pack("<I", len(program.values)))
    for v in program.values:
        values += struct.pack("<B", v.kind)
        if v.kind is ValueKind.TENSOR:
            values += struct.pack("<BB", v.dtype, len(v.dims))
            for d in v.dims:
                values += struct.pack("<Bq", d.kind, d.value)

    symbols = bytearray(struct.pack("<I", len(program.symbols)))
    for lo, hi in program.symbols:
        symbols += struct.pack("<qq", lo, hi)

    def id_list(ids) -> bytes:
        return struct.pack("<I", len(ids)) + b"".join(struct.pack("<I", i) for i in ids)

    strings = bytearray(struct.pack("<I", len(w.strings)))
    for text in w.strings:  # dicts keep insertion order, so ids are stable
        raw = text.encode("utf-8")
        strings += struct.pack("<I", len(raw)) + raw

    sections = [
        (Section.STRINGS, bytes(strings)),
        (Section.SYMBOLS, bytes(symbols)),
        (Section.VALUES, bytes(values)),
        (Section.INPUTS, id_list(program.inputs)),
        (Section.OUTPUTS, id_list(program.outputs)),
        (Section.CONSTANTS, bytes(constants)),
        (Section.INSTRUCTIONS, bytes(instructions)),
    ]
    directory = bytearray()
    body = bytearray()
    offset = 12 * len(sections)
    for kind, data in sections:
        directory += struct.pack("<III", kind, offset + len(body), len(data))
        body += data
    payload = bytes(directory + body)
    header = HEADER.pack(MAGIC, program.version, 0, HEADER_SIZE, len(payload), zlib.crc32(payload), len(sections), 0)
    return header + payload


# ---------------------------------------------------------------------------------------------
# Reader


def _invalid(message: str) -> BackendError:
    return BackendError(Error.InvalidProgram, f"reference blob: {message}")


class _Cursor:
    """Reads little-endian fields from one section, refusing to step outside it."""

    def __init__(self, data: memoryview, name: str):
        self.data = data
        self.pos = 0
        self.name = name

    def take(self, fmt: struct.Struct) -> tuple:
        end = self.pos + fmt.size
        if end > len(self.data):
            raise _invalid(f"section {self.name} is truncated at byte {self.pos}")
        out = fmt.unpack_from(self.data, self.pos)
        self.pos = end
        return out

    def u8(self) -> int:
        return self.take(_U8)[0]

    def u16(self) -> int:
        return self.take(_U16)[0]

    def u32(self) -> int:
        return self.take(_U32)[0]

    def i64(self) -> int:
        return self.take(_I64)[0]

    def f64(self) -> float:
        return self.take(_F64)[0]

    def count(self, min_entry_size: int, what: str) -> int:
        n = self.u32()
        if n > MAX_COUNT or n * min_entry_size > len(self.data) - self.pos:
            raise _invalid(f"section {self.name} claims {n} {what}, more than its {len(self.data)} bytes can hold")
        return n

    def bytes(self, n: int) -> bytes:
        if n > len(self.data) - self.pos:
            raise _invalid(f"section {self.name} is truncated at byte {self.pos}")
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def done(self) -> None:
        if self.pos != len(self.data):
            raise _invalid(f"section {self.name} has {len(self.data) - self.pos} trailing bytes")


_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_DIR_ENTRY = struct.Struct("<III")
_SCALAR_CODES = {int(c) for c in ScalarType}


def read_header(blob: bytes | memoryview) -> tuple[int, int]:
    """Validate the header; return (version, payload_size). Raises BackendError."""
    if len(blob) < HEADER_SIZE:
        raise _invalid(f"{len(blob)} bytes is shorter than the {HEADER_SIZE}-byte header")
    magic, version, flags, header_size, payload_size, _crc, _n, reserved = HEADER.unpack_from(blob, 0)
    if magic != MAGIC:
        raise _invalid(f"bad magic {bytes(magic)!r}, expected {MAGIC!r}: not a reference backend blob")
    if version != FORMAT_VERSION:
        raise BackendError(
            Error.DelegateInvalidCompatibility,
            f"reference blob format version {version}; this runtime reads version {FORMAT_VERSION}. "
            "Re-run preprocess with a matching reference_backend.",
        )
    if flags != 0 or reserved != 0 or header_size != HEADER_SIZE:
        raise _invalid("reserved header fields are not zero")
    if HEADER_SIZE + payload_size != len(blob):
        raise _invalid(f"header says {HEADER_SIZE + payload_size} bytes, blob has {len(blob)} (truncated or padded)")
    return version, payload_size


def read(blob: bytes | memoryview) -> Program:
    """Decode and validate a blob completely. Raises BackendError, never anything else."""
    blob = memoryview(blob).cast("B") if not isinstance(blob, bytes) else memoryview(blob)
    version, _ = read_header(blob)
    _, _, _, _, _, crc, num_sections, _ = HEADER.unpack_from(blob, 0)
    payload = blob[HEADER_SIZE:]
    if zlib.crc32(payload) != crc:
        raise _invalid("checksum mismatch: the blob is corrupted")
    if num_sections != len(Section):
        raise _invalid(f"{num_sections} sections, expected {len(Section)}")
    directory = _Cursor(payload, "directory")
    spans: dict[Section, memoryview] = {}
    for _ in range(num_sections):
        kind, offset, length = directory.take(_DIR_ENTRY)
        try:
            kind = Section(kind)
        except ValueError:
            raise _invalid(f"unknown section kind {kind}") from None
        if kind in spans:
            raise _invalid(f"section {kind.name} appears twice")
        if offset < 12 * num_sections or offset + length > len(payload):
            raise _invalid(f"section {kind.name} [{offset}, {offset + length}) lies outside the payload")
        spans[kind] = payload[offset : offset + length]

    strings = _read_strings(_Cursor(spans[Section.STRINGS], "STRINGS"))
    symbols = _read_symbols(_Cursor(spans[Section.SYMBOLS], "SYMBOLS"))
    values = _read_values(_Cursor(spans[Section.VALUES], "VALUES"), len(symbols))
    inputs = _read_ids(_Cursor(spans[Section.INPUTS], "INPUTS"), len(values))
    outputs = _read_ids(_Cursor(spans[Section.OUTPUTS], "OUTPUTS"), len(values))
    constants = _read_constants(_Cursor(spans[Section.CONSTANTS], "CONSTANTS"), strings, len(values))
    instructions = _read_instructions(_Cursor(spans[Section.INSTRUCTIONS], "INSTRUCTIONS"), strings, len(values))
    program = Program(symbols, values, inputs, outputs, constants, instructions, version)
    _check_dataflow(program)
    return program


def _read_strings(c: _Cursor) -> tuple[str, ...]:
    out = []
    for _ in range(c.count(4, "strings")):
        raw = c.bytes(c.u32())
        try:
            out.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise _invalid("a string is not valid UTF-8") from None
    c.done()
    return tuple(out)


def _read_symbols(c: _Cursor) -> tuple[tuple[int, int], ...]:
    out = []
    for _ in range(c.count(16, "symbols")):
        lo, hi = c.i64(), c.i64()
        if lo < 0 or (hi != -1 and hi < lo):
            raise _invalid(f"symbol range [{lo}, {hi}] is empty or negative")
        out.append((lo, hi))
    c.done()
    return tuple(out)


def _read_values(c: _Cursor, num_symbols: int) -> tuple[ValueInfo, ...]:
    out = []
    for _ in range(c.count(1, "values")):
        try:
            kind = ValueKind(c.u8())
        except ValueError:
            raise _invalid("unknown value kind") from None
        if kind is not ValueKind.TENSOR:
            out.append(ValueInfo(kind))
            continue
        code, rank = c.u8(), c.u8()
        if code not in _SCALAR_CODES:
            raise _invalid(f"unknown ScalarType code {code}")
        if rank > MAX_RANK:
            raise _invalid(f"tensor rank {rank} exceeds {MAX_RANK}")
        dims = []
        for _ in range(rank):
            try:
                dkind = DimKind(c.u8())
            except ValueError:
                raise _invalid("unknown dimension kind") from None
            v = c.i64()
            if dkind is DimKind.STATIC and not 0 <= v <= MAX_DIM:
                raise _invalid(f"dimension size {v} out of range")
            if dkind is DimKind.SYMBOL and not 0 <= v < num_symbols:
                raise _invalid(f"dimension names symbol {v}, but there are {num_symbols}")
            dims.append(Dim(dkind, v))
        out.append(ValueInfo(kind, ScalarType(code), tuple(dims)))
    c.done()
    return tuple(out)


def _read_ids(c: _Cursor, num_values: int) -> tuple[int, ...]:
    ids = tuple(c.u32() for _ in range(c.count(4, "ids")))
    c.done()
    for i in ids:
        if i >= num_values:
            raise _invalid(f"section {c.name} names value {i}, but there are {num_values}")
    return ids


def _read_constants(c: _Cursor, strings, num_values: int) -> tuple[tuple[int, str], ...]:
    out = []
    for _ in range(c.count(8, "constants")):
        value_id, key = c.u32(), c.u32()
        if value_id >= num_values or key >= len(strings):
            raise _invalid("a constant names a value or key that does not exist")
        out.append((value_id, strings[key]))
    c.done()
    return tuple(out)


def _read_arg(c: _Cursor, strings, num_values: int, depth: int = 0) -> Arg:
    tag = c.u8()
    if tag == ArgTag.NONE:
        return None
    if tag == ArgTag.BOOL:
        v = c.u8()
        if v > 1:
            raise _invalid(f"bool argument holds {v}")
        return bool(v)
    if tag == ArgTag.INT:
        return c.i64()
    if tag == ArgTag.FLOAT:
        return c.f64()
    if tag == ArgTag.STR:
        i = c.u32()
        if i >= len(strings):
            raise _invalid(f"string id {i} out of range")
        return strings[i]
    if tag == ArgTag.VALUE:
        i = c.u32()
        if i >= num_values:
            raise _invalid(f"value id {i} out of range")
        return Ref(i)
    if tag == ArgTag.DTYPE:
        code = c.u8()
        if code not in _SCALAR_CODES:
            raise _invalid(f"unknown ScalarType code {code}")
        return Dtype(ScalarType(code))
    if tag == ArgTag.LIST:
        if depth >= MAX_LIST_DEPTH:
            raise _invalid(f"argument lists nest deeper than {MAX_LIST_DEPTH}")
        n = c.count(1, "list items")
        return tuple(_read_arg(c, strings, num_values, depth + 1) for _ in range(n))
    raise _invalid(f"unknown argument tag {tag}")


def _read_instructions(c: _Cursor, strings, num_values: int) -> tuple[Instruction, ...]:
    out = []
    for _ in range(c.count(14, "instructions")):
        op_id, debug_id = c.u32(), c.u32()
        if op_id >= len(strings):
            raise _invalid(f"op name id {op_id} out of range")
        args = tuple(_read_arg(c, strings, num_values) for _ in range(c.u16()))
        kwargs = []
        for _ in range(c.u16()):
            name = c.u32()
            if name >= len(strings):
                raise _invalid(f"keyword name id {name} out of range")
            kwargs.append((strings[name], _read_arg(c, strings, num_values)))
        outputs = tuple(c.u32() for _ in range(c.u16()))
        if any(o >= num_values and o != NO_VALUE for o in outputs):
            raise _invalid("an instruction writes a value that does not exist")
        out.append(Instruction(strings[op_id], debug_id, args, tuple(kwargs), outputs))
    c.done()
    return tuple(out)


def _refs(arg: Any):
    if isinstance(arg, Ref):
        yield arg.id
    elif isinstance(arg, tuple):
        for a in arg:
            yield from _refs(a)


def _check_dataflow(p: Program) -> None:
    """Every value is defined once (input, constant or instruction) before it is read."""
    defined = [False] * len(p.values)

    def define(i: int, by: str) -> None:
        if defined[i]:
            raise _invalid(f"value {i} is defined twice ({by})")
        defined[i] = True

    for i in p.inputs:
        if p.values[i].kind is not ValueKind.TENSOR:
            raise _invalid(f"input value {i} is not a tensor")
        define(i, "input")
    for i, _ in p.constants:
        if p.values[i].kind is not ValueKind.TENSOR or any(d.kind is not DimKind.STATIC for d in p.values[i].dims):
            raise _invalid(f"constant value {i} is not a statically shaped tensor")
        define(i, "constant")
    for n, ins in enumerate(p.instructions):
        for a in (*ins.args, *(v for _, v in ins.kwargs)):
            for i in _refs(a):
                if not defined[i]:
                    raise _invalid(f"instruction {n} ({ins.op}) reads value {i} before it is defined")
        for o in ins.outputs:
            if o != NO_VALUE:
                define(o, f"instruction {n}")
    for i in p.outputs:
        if not defined[i]:
            raise _invalid(f"output value {i} is never defined")
