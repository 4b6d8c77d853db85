"""minimal-numpy: the smallest backend that passes the conformance contract. Copy it and make it yours.

preprocess writes the exported program's graph as JSON, one entry per node, refusing operators outside
OPS; init parses that blob into a handle, execute runs it with NumPy, destroy frees it. float32 only."""

import base64
import json
import time

import numpy as np

from conformance.api import BackendDetails, BackendError, BackendInterface, Error, EValue, PreprocessResult
from conformance.api.ops import op_name

NAME = "minimal-numpy"
MAGIC, VERSION = b"MNPY", 1  # blob = MAGIC, one version byte, then the program as UTF-8 JSON


def _add(a, b, alpha=1.0):  # ATen rounds a + alpha * b once; float64, then float32, is within the spec's 1 ULP
    return (np.float64(a) + np.float64(np.float32(alpha)) * np.float64(b)).astype(np.float32)


OPS = {  # operator -> (NumPy function, number of positional arguments, keyword arguments it takes)
    "aten.add.Tensor": (_add, 2, {"alpha"}),
    "aten.sub.Tensor": (lambda a, b, alpha=1.0: _add(a, b, -alpha), 2, {"alpha"}),
    "aten.mul.Tensor": (np.multiply, 2, set()),
    "aten.neg.default": (np.negative, 1, set()),
    "aten.relu.default": (lambda a: np.where(a < 0, np.float32(0), a), 1, set()),  # as ATen: keeps -0.0 and NaN
}


class MinimalBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs) -> PreprocessResult:
        import torch
        from torch.export.graph_signature import InputKind
        def refuse(node, why):  # NotSupported is a clean refusal: the caller runs the node elsewhere
            return BackendError(Error.NotSupported, f"{NAME}: node {node.name!r}: {why}")

        specs = {s.arg.name: s for s in edge_program.graph_signature.input_specs}
        values, slots, handles = [], {}, {}  # slots: node name -> index of its value in values
        for node in edge_program.graph.nodes:
            kind = specs[node.name].kind if node.name in specs else InputKind.USER_INPUT
            name = op_name(node.target) if node.op == "call_function" else f"{node.op} node ({kind.name})"
            if node.op == "output":
                outputs = [slots[a.name] for a in node.args[0]]
            elif node.op == "placeholder" and kind is InputKind.USER_INPUT:
                val = node.meta.get("val")
                if getattr(val, "dtype", None) != torch.float32:
                    raise refuse(node, f"input is {getattr(val, 'dtype', val)!r}; only float32 is supported")
                values.append({"input": [d if isinstance(d, int) else None for d in val.shape]})  # None: dynamic
            elif node.op == "placeholder" and kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                target = specs[node.name].target  # parameters and buffers, or constants torch.export lifted
                tensor = edge_program.state_dict.get(target, edge_program.constants.get(target))
                if tensor is None or tensor.dtype != torch.float32:
                    raise refuse(node, f"constant {target!r} is missing or not float32")
                data = base64.b64encode(tensor.detach().contiguous().numpy().tobytes()).decode()
                values.append({"constant": data, "dtype": "float32", "shape": list(tensor.shape)})
            elif name in OPS:
                _, arity, keywords = OPS[name]
                args_ok = all(isinstance(a, (torch.fx.Node, int, float)) for a in node.args)  # tensors or numbers
                if len(node.args) != arity or set(node.kwargs) - keywords or not args_ok:
                    raise refuse(node, f"{name}{node.args} {dict(node.kwargs)} is not supported")
                args = [slots[a.name] if isinstance(a, torch.fx.Node) else {"scalar": float(a)} for a in node.args]
                values.append({"op": name, "args": args, "kwargs": {k: float(v) for k, v in node.kwargs.items()}})
                handles[len(handles)] = (node.meta["debug_handle"],) if "debug_handle" in node.meta else ()  # step -> node
            else:
                raise refuse(node, f"{name} is not supported; {NAME} runs {', '.join(OPS)}")
            slots[node.name] = len(values) - 1
        text = json.dumps({"values": values, "outputs": outputs}, sort_keys=True, separators=(",", ":"))
        return PreprocessResult(processed_bytes=MAGIC + bytes([VERSION]) + text.encode(), debug_handle_map=handles)


class _Program:  # the handle: a parsed blob (where each input goes, the constants, the steps, the outputs)
    def __init__(self, doc: dict):
        self.values, self.inputs, self.steps, self.live = [None] * len(doc["values"]), [], [], True  # constants set
        for slot, value in enumerate(doc["values"]):
            if "input" in value:
                self.inputs.append((slot, [None if d is None else int(d) for d in value["input"]]))
            elif "constant" in value and value["dtype"] == "float32":
                data = np.frombuffer(base64.b64decode(value["constant"], validate=True), np.float32)
                self.values[slot] = data.reshape([int(d) for d in value["shape"]])
            elif value.get("op") in OPS:
                fn, arity, keywords = OPS[value["op"]]
                args = [a if type(a) is int and 0 <= a < slot else np.float32(a["scalar"]) for a in value["args"]]
                if len(args) != arity or set(value["kwargs"]) - keywords:
                    raise ValueError(f"value {slot}: bad arguments for {value['op']}")
                self.steps.append((slot, value["op"], fn, args, {k: float(v) for k, v in value["kwargs"].items()}))
            else:
                raise ValueError(f"value {slot} is neither an input, a float32 constant nor a known operator")
        self.outputs = doc["outputs"]
        if not all(type(o) is int and 0 <= o < len(self.values) for o in self.outputs):
            raise ValueError("an output refers to no value")


class MinimalRuntime(BackendInterface):
    def is_available(self) -> bool:
        return True

    def init(self, context, processed, compile_specs) -> _Program:
        blob = bytes(processed.data)  # a copy: the runtime may free `processed` once init returns
        if len(blob) <= len(MAGIC) or not blob.startswith(MAGIC):
            raise BackendError(Error.InvalidProgram, f"not a {NAME} blob (it does not start with {MAGIC!r})")
        if blob[len(MAGIC)] != VERSION:
            raise BackendError(Error.DelegateInvalidCompatibility, f"blob version {blob[len(MAGIC)]}, runtime reads {VERSION}")
        try:
            return _Program(json.loads(blob[len(MAGIC) + 1:]))
        except Exception as exc:  # malformed JSON, or JSON that is not a program
            raise BackendError(Error.InvalidProgram, f"malformed {NAME} blob: {type(exc).__name__}: {exc}") from None

    @np.errstate(all="ignore")  # inf and NaN are results here, not errors
    def execute(self, context, handle, args) -> Error:
        if not isinstance(handle, _Program) or not handle.live:
            raise BackendError(Error.DelegateInvalidHandle, f"{handle!r:.60} is not a live {NAME} handle")
        n = len(handle.inputs)
        if len(args) != n + len(handle.outputs):
            raise BackendError(Error.InvalidArgument, f"expected {n} inputs + {len(handle.outputs)} outputs, got {len(args)}")
        values = list(handle.values)  # the constants, and a slot for every other value
        for i, ((slot, shape), arg) in enumerate(zip(handle.inputs, args)):
            x = values[slot] = arg.value if isinstance(arg, EValue) else None  # any strides: NumPy reads through them
            if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim != len(shape) or any(
                    d is not None and d != s for d, s in zip(shape, x.shape)):  # None: a dynamic dimension
                raise BackendError(Error.InvalidArgument, f"input {i} must be a float32 tensor of shape {shape}")
        for step, (slot, op, fn, refs, kwargs) in enumerate(handle.steps):
            start = time.perf_counter_ns()
            try:
                values[slot] = fn(*[values[r] if type(r) is int else r for r in refs], **kwargs)
            except Exception as exc:  # the step is the key of debug_handle_map that leads to the node
                raise BackendError(Error.Internal, f"{op} failed: {exc}", debug_handle=step) from None
            if context.event_tracer is not None:
                context.event_tracer.log_profiling_delegate(None, step, start, time.perf_counter_ns())
        for i, (slot, arg) in enumerate(zip(handle.outputs, args[n:])):
            out, result = arg.value if isinstance(arg, EValue) else None, values[slot]
            if not isinstance(out, np.ndarray) or out.dtype != np.float32 or out.shape != np.shape(result):
                raise BackendError(Error.InvalidArgument, f"output {i} must be a float32 tensor of shape {np.shape(result)}")
            out[...] = result  # outputs come preallocated: write them in place
        return Error.Ok

    def destroy(self, handle) -> None:
        if isinstance(handle, _Program):  # executing it from now on is refused (DelegateInvalidHandle)
            handle.live, handle.values, handle.steps = False, [], []


def backend_under_test():
    """The factory the entry point names (group conformance.backends): the backend and what it claims."""
    from conformance.api import BackendUnderTest, BlobVersionField, Manifest
    manifest = Manifest(ops={op: ("float32",) for op in OPS},
                        refuses={"*": ("mixed dtypes",)},  # float32 only: an int or float64 operand is refused
                        blob_version=BlobVersionField(offset=len(MAGIC), size=1, current=VERSION))  # RT-013 forges others
    return BackendUnderTest(name=NAME, details=MinimalBackend, runtime=MinimalRuntime(), version="0.1.0", manifest=manifest)
