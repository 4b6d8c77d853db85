"""An ExportedProgram as a TorchScript module, for the to_backend family.

``torch._C._jit_to_backend`` lowers a *scripted* module, and TorchScript compiles
only source it can read with ``inspect.getsource``: the module must live in a
real ``.py`` file. ``generate`` writes one statement per FX node of the
harness's core-ATen program into a file under the harness cache
(``<cache>/torchscript-sources/program_<digest>.py``, named by a hash of its
text, so every process and every worker produces the same file, the same
TorchScript qualified name and the same lowered blob), imports it and records,
for every source line, the FX node that line computes. That line table is how
the adapter maps what TorchScript reports (a node's source range, the source
line a backend cites when it refuses a node) back to the program's nodes and
their ``node.meta["debug_handle"]``.

Every ATen call is spelled ``torch.ops.<ns>.<op>(...)`` (TorchScript cannot name
an overload) and ``verify`` checks, after scripting, that TorchScript resolved
each call to exactly the overload of the FX node; a program it cannot express
faithfully raises ``Unexpressible``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import operator
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.api.ops import op_name

FORMAT = 1
"""Bump when the generated source changes shape (part of every file's digest)."""

_SOURCE_RE = re.compile(r'File "([^"]+)", line (\d+)')
_SCHEMA_LIST_TYPES = {
    "int": "int",
    "SymInt": "int",
    "float": "float",
    "bool": "bool",
    "Tensor": "Tensor",
    "Tensor?": "Optional[Tensor]",
    "Scalar": "number",
}
_SYM_BINARY = {
    operator.add: "+",
    operator.sub: "-",
    operator.mul: "*",
    operator.floordiv: "//",
    operator.mod: "%",
}


class Unexpressible(Exception):
    """The program cannot be written as TorchScript faithfully (the message says which node and why)."""


@dataclass
class Generated:
    """A generated TorchScript source module for one program structure."""

    digest: str
    path: Path
    module_name: str
    source: str
    input_names: tuple[str, ...]
    n_outputs: int
    line_nodes: dict[int, tuple[str, int | None, str]] = field(default_factory=dict)
    """Source line -> (FX node name, its debug handle, its op name)."""
    scalar_operands: frozenset[int] = frozenset()
    """Lines whose ATen call passes a Python number for a Tensor argument (a wrapped number)."""
    attributes: dict[str, str] = field(default_factory=dict)
    """Attribute name on the module -> the program's state_dict / constants key."""

    def node_at(self, path: str, line: int) -> tuple[str, int | None, str] | None:
        if os.path.realpath(path) != os.path.realpath(self.path):
            return None
        return self.line_nodes.get(line)


def source_line(source_range: str) -> tuple[str, int] | None:
    """(file, line) of a TorchScript source range string or an error message citing one."""
    match = _SOURCE_RE.search(source_range or "")
    return (match.group(1), int(match.group(2))) if match else None


def sources_dir() -> Path:
    from conformance.programs import cache_dir

    return cache_dir() / "torchscript-sources"


# ---------------------------------------------------------------------------------------------
# Source generation


class _Writer:
    def __init__(self, exported):
        self.exported = exported
        self.names: dict[str, str] = {}  # FX node name -> expression
        self.lines: list[tuple[str, Any]] = []  # (statement, fx node or None)
        self.attributes: dict[str, str] = {}
        self.inputs: list[str] = []
        self.scalar_lines: set[str] = set()  # FX nodes passing a number where the schema wants a Tensor

    def value(self, v: Any, type_str: str | None = None) -> str:
        import torch

        if isinstance(v, torch.fx.Node):
            if v.name not in self.names:
                raise Unexpressible(f"node {v.name} is used before it is defined")
            return self.names[v.name]
        if v is None:
            return "None"
        if isinstance(v, bool):
            return "True" if v else "False"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            if math.isnan(v):
                return 'float("nan")'
            if math.isinf(v):
                return 'float("inf")' if v > 0 else 'float("-inf")'
            return repr(v)
        if isinstance(v, str):
            return repr(v)
        if isinstance(v, torch.dtype):
            return str(v)  # "torch.float32": TorchScript reads dtype constants
        if isinstance(v, torch.device):
            return f'torch.device("{v}")'
        if isinstance(v, (torch.layout, torch.memory_format)):
            return str(v)
        if isinstance(v, (list, tuple)):
            element = _list_element_type(type_str)
            items = ", ".join(self.value(x, _element_schema(type_str)) for x in v)
            if element is not None and element != "number":
                return f"annotate(List[{element}], [{items}])"
            return f"[{items}]"
        raise Unexpressible(f"argument {v!r} ({type(v).__name__}) has no TorchScript spelling")

    def call(self, node) -> str:
        import torch

        target = node.target
        if isinstance(target, torch._ops.OpOverload):
            schema = target._schema
            namespace, _, name = schema.name.partition("::")
            types = [str(a.type) for a in schema.arguments]
            by_name = {a.name: str(a.type) for a in schema.arguments}
            if any(t == "Tensor" and isinstance(a, (int, float)) and not isinstance(a, bool) for t, a in zip(types, node.args)):
                self.scalar_lines.add(node.name)
            args = [self.value(a, types[i] if i < len(types) else None) for i, a in enumerate(node.args)]
            args += [f"{k}={self.value(v, by_name.get(k))}" for k, v in node.kwargs.items()]
            return f"torch.ops.{namespace}.{name}({', '.join(args)})"
        if target is operator.getitem:
            source, index = node.args
            return f"{self.value(source)}[{self.value(index)}]"
        if target in _SYM_BINARY and not node.kwargs:
            a, b = node.args
            return f"({self.value(a)} {_SYM_BINARY[target]} {self.value(b)})"
        if target is operator.neg:
            return f"(-{self.value(node.args[0])})"
        raise Unexpressible(f"node {node.name} calls {op_name(target)}, which the adapter cannot write as TorchScript")

    def write(self) -> None:
        from torch.export.graph_signature import InputKind, OutputKind

        sig = self.exported.graph_signature
        placeholders = [n for n in self.exported.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(sig.input_specs):
            raise Unexpressible(f"{len(placeholders)} placeholders for {len(sig.input_specs)} input specs")
        # By position: torch.export orders placeholders as input_specs, and a deep copy of the
        # program may rename a placeholder (input -> input_1) without renaming its spec.
        kinds = dict(zip((n.name for n in placeholders), sig.input_specs))
        for node in self.exported.graph.nodes:
            if node.op == "placeholder":
                spec = kinds[node.name]
                if spec.kind is InputKind.USER_INPUT:
                    val = node.meta.get("val")
                    import torch

                    if not isinstance(val, torch.Tensor):
                        raise Unexpressible(f"user input {node.name} is a {type(val).__name__}, not a tensor")
                    name = f"x_{node.name}"
                    self.inputs.append(name)
                    self.names[node.name] = name
                elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                    attr = f"t{len(self.attributes)}"
                    self.attributes[attr] = spec.target
                    self.names[node.name] = f"self.{attr}"
                else:
                    raise Unexpressible(f"input {node.name} of kind {spec.kind.name} cannot be a TorchScript module input")
            elif node.op == "call_function":
                name = f"v_{node.name}"
                self.lines.append((f"{name} = {self.call(node)}", node))
                self.names[node.name] = name
            elif node.op == "output":
                outputs = list(node.args[0]) if isinstance(node.args[0], (list, tuple)) else [node.args[0]]
                if any(spec.kind is not OutputKind.USER_OUTPUT for spec in sig.output_specs):
                    raise Unexpressible("the program mutates buffers or inputs, which a scripted forward cannot return")
                if not outputs:
                    raise Unexpressible("the program has no outputs")
                rendered = [self.value(o) for o in outputs]
                self.outputs = len(rendered)
                self.lines.append((f"return {rendered[0]}" if len(rendered) == 1 else f"return ({', '.join(rendered)})", None))
            else:
                raise Unexpressible(f"node {node.name} ({node.op}) has no TorchScript spelling")


def _list_element_type(type_str: str | None) -> str | None:
    if not type_str:
        return None
    base = type_str.rstrip("?")
    match = re.fullmatch(r"(.+?)\[\d*\]", base)
    if not match:
        return None
    return _SCHEMA_LIST_TYPES.get(match.group(1))


def _element_schema(type_str: str | None) -> str | None:
    if not type_str:
        return None
    match = re.fullmatch(r"(.+?)\[\d*\]", type_str.rstrip("?"))
    return match.group(1) if match else None


_HEADER = '''"""Generated by backend_adapters.torchscript_codegen (format {format}) from an ExportedProgram.

One statement per FX node, so TorchScript source ranges point at program nodes. Do not edit:
the file name is a hash of this text.
"""

from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor


class Program(torch.nn.Module):
    def __init__(self, tensors: Dict[str, Tensor]):
        super().__init__()
        for name, value in tensors.items():
            self.register_buffer(name, value)

    def forward(self{params}):
'''


def render(exported) -> tuple[str, dict[int, tuple[str, int | None, str]], _Writer]:
    """The module source and its line table (line -> FX node name, debug handle, op)."""
    writer = _Writer(exported)
    writer.write()
    params = "".join(f", {name}: Tensor" for name in writer.inputs)
    header = _HEADER.format(format=FORMAT, params=params)
    first = header.count("\n") + 1
    body, table = [], {}
    writer.scalar_line_numbers = set()
    for offset, (statement, node) in enumerate(writer.lines):
        body.append(f"        {statement}\n")
        if node is not None:
            table[first + offset] = (node.name, node.meta.get("debug_handle"), op_name(node.target))
            if node.name in writer.scalar_lines:
                writer.scalar_line_numbers.add(first + offset)
    return header + "".join(body), table, writer


# ---------------------------------------------------------------------------------------------
# Files and modules

_LOCK = threading.Lock()
_MODULES: dict[str, Any] = {}


def generate(exported) -> Generated:
    """Write (once) and import the TorchScript module source of ``exported``."""
    source, table, writer = render(exported)
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    module_name = f"conformance_ts_program_{digest}"
    path = sources_dir() / f"{module_name}.py"
    with _LOCK:
        if module_name not in _MODULES:
            if not path.exists() or path.read_text() != source:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
                tmp.write_text(source)
                os.replace(tmp, path)  # atomic: workers sharing the cache never read half a file
            spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module  # TorchScript resolves the class through sys.modules
            spec.loader.exec_module(module)
            _MODULES[module_name] = module
    return Generated(
        digest=digest,
        path=path,
        module_name=module_name,
        source=source,
        input_names=tuple(writer.inputs),
        n_outputs=writer.outputs,
        line_nodes=table,
        attributes=dict(writer.attributes),
        scalar_operands=frozenset(writer.scalar_line_numbers),
    )


def instantiate(generated: Generated, exported):
    """An nn.Module instance of the generated class holding the program's weights and constants."""
    import torch

    tensors = {}
    for attr, key in generated.attributes.items():
        if key in exported.state_dict:
            value = exported.state_dict[key]
        elif key in exported.constants:
            value = exported.constants[key]
        else:
            raise Unexpressible(f"the program has no state or constant named {key}")
        if not isinstance(value, torch.Tensor):
            raise Unexpressible(f"{key} is a {type(value).__name__}, not a tensor")
        tensors[attr] = value.detach().clone()  # preprocess must not alias (or mutate) the program
    return _MODULES[generated.module_name].Program(tensors).eval()


def _scalar_twin(op: str) -> str | None:
    """aten.mul.Tensor -> aten.mul.Scalar: ATen computes X.Scalar as X.Tensor on a wrapped-number
    tensor (BinaryOps.cpp: ``mul(self, wrapped_scalar_tensor(other))``), so when the FX call passes a
    Python number as ``other``, TorchScript's choice of the Scalar overload computes the same thing."""
    namespace, name, overload = op.split(".")
    return f"{namespace}.{name}.Scalar" if overload == "Tensor" else None


def schema_op(node) -> str | None:
    """``aten.add.Tensor`` for a TorchScript node with an operator schema, else None."""
    try:
        text = node.schema()
    except RuntimeError:
        return None
    if not text or text == "(no schema)" or "::" not in text:
        return None
    qualified = text.split("(", 1)[0]
    namespace, _, rest = qualified.partition("::")
    name, _, overload = rest.partition(".")
    return f"{namespace}.{name}.{overload or 'default'}"


def verify(generated: Generated, scripted) -> None:
    """Every FX op line holds exactly one TorchScript call of exactly that overload."""
    found: dict[int, list[str]] = {}
    for node in scripted.forward.graph.nodes():
        where = source_line(node.sourceRange())
        op = schema_op(node)
        if where is None or op is None:
            continue
        hit = generated.node_at(*where)
        if hit is not None:
            found.setdefault(where[1], []).append(op)
    for line, (name, _, fx_op) in generated.line_nodes.items():
        if fx_op == "getitem" or fx_op.startswith("sym."):
            continue
        ops = found.get(line, [])
        if ops != [fx_op] and not (ops == [_scalar_twin(fx_op)] and line in generated.scalar_operands):
            raise Unexpressible(
                f"TorchScript compiled node {name} ({fx_op}) as {ops or 'nothing'}: its overload resolution "
                "cannot express this call exactly"
            )
