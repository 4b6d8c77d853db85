"""torch.export of modules: the module making one call, and the export of any module to core ATen."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conformance.api.ops import op_name
from conformance.api.tensors import to_torch
from conformance.call import Call, Tensor
from conformance.compat import torch as compat_torch
from conformance.programs.graphs import assign_debug_handles
from conformance.programs.operators import dtypes_as_torch, mutated_values, program_results, resolve_op


class OpModule:
    """Factory for an nn.Module whose forward makes exactly one ``Call``."""

    @staticmethod
    def build(call: Call):
        import torch

        op = resolve_op(call.op)
        params: dict[str, Any] = {}
        counter = iter(range(10**6))

        def template(a):
            if isinstance(a, Tensor):
                if a.role == "parameter":
                    name = f"p{len(params)}"
                    params[name] = to_torch(a.value)
                    return ("param", name)
                return ("input", next(counter))
            if isinstance(a, (list, tuple)):
                return type(a)(template(x) for x in a)
            return a

        args = template(call.args)
        kwargs = {k: template(v) for k, v in call.kwargs.items()}
        kwargs = dtypes_as_torch(kwargs)

        class Single(torch.nn.Module):
            VARARGS = True

            def __init__(self):
                super().__init__()
                for name, value in params.items():
                    self.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))

            def forward(self, *inputs):
                def fill(a):
                    if isinstance(a, tuple) and len(a) == 2 and a[0] == "param" and isinstance(a[1], str):
                        return getattr(self, a[1])
                    if isinstance(a, tuple) and len(a) == 2 and a[0] == "input" and isinstance(a[1], int):
                        return inputs[a[1]]
                    if isinstance(a, (list, tuple)):
                        return type(a)(fill(x) for x in a)
                    return a

                called_args, called_kwargs = fill(args), {k: fill(v) for k, v in kwargs.items()}
                returned = op(*called_args, **called_kwargs)
                return program_results(returned, mutated_values(op, called_args, called_kwargs))

        Single.__name__ = f"Op_{call.op.replace('.', '_')}"
        return Single()


def _is_core(target, keep: set[str]) -> bool:
    import torch

    if not isinstance(target, torch._ops.OpOverload):
        return True  # getitem and symbolic-size arithmetic
    return torch.Tag.core in target.tags or op_name(target) in keep


def export_module(module, example_inputs: Sequence[Any], *, dynamic: bool, keep: Sequence[str] = ()):
    """torch.export + (only if needed) run_decompositions, keeping ``keep`` undecomposed."""
    import torch
    from torch.export import Dim

    dynamic_shapes = None
    if dynamic:
        dynamic_shapes = tuple({i: Dim.AUTO for i in range(t.dim())} for t in example_inputs)
        if getattr(module, "VARARGS", False):
            dynamic_shapes = (dynamic_shapes,)  # forward(*inputs) binds all inputs to one parameter
    # Size-oblivious: sizes 0 and 1 do not specialize, so one program serves every size.
    with compat_torch.size_oblivious(dynamic):
        program = torch.export.export(module, tuple(example_inputs), dynamic_shapes=dynamic_shapes, strict=False)
    keep_set = set(keep)
    if not all(_is_core(n.target, keep_set) for n in program.graph.nodes if n.op == "call_function"):
        table = torch.export.default_decompositions()
        for name in keep_set:
            overload = resolve_op(name)
            if overload in table:
                del table[overload]
        program = program.run_decompositions(table)
    assign_debug_handles(program)
    return program
