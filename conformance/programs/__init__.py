"""ExportedPrograms for the checks: one op per program, or a small model.

A single-op program is *built*, not exported (``build_program``): the graph, signature,
module call graph and node metadata torch.export would produce for a module making the
call, in a few milliseconds instead of the 50-300 ms of torch.export plus
run_decompositions, so every drawn example gets its own static program
(tests/harness/test_programs.py proves the two equal for every op). torch.export remains
for the contract's small models and for ``program_for(..., export=True)``: exported once
per *structure* (``Call.structure``: op, dtypes, ranks, attributes, parameter shapes) with
dynamic, size-oblivious input dimensions, ``run_decompositions`` only when the graph holds
something other than core ATen and never on the op under test (as an ExecuTorch
partitioner keeps the ops its backend takes), and persisted in a disk cache keyed by a
content hash (``cache_dir``).

Every call_function node gets ``node.meta["debug_handle"]`` (1, 2, ... in graph
order), as ExecuTorch's to_edge does; plain torch.export leaves none.

The modules, each importing only those below it (``.importlinter``):

- ``quantize``: the int8 programs of the QNT clauses (PT2E quantization);
- ``models``: the model zoo of the MOD clauses;
- ``batch``: several calls of one operator in one program; ``modules``: whole nn.Modules
  exported once (contract programs, models);
- ``calls``: the program of one call with its inputs (``program_for``);
- ``build``: a call's ExportedProgram, built directly or exported; ``eager``: eager's result
  of a call;
- ``cache``: the program cache, in memory and on disk; ``fake``: the FakeTensor values of an
  op's outputs;
- ``export``: torch.export of modules;
- ``graphs``: assembling, copying and reading ExportedPrograms;
- ``operators``: operators by name and what their schemas say.
"""

from conformance.programs.batch import batch_program, split_outputs
from conformance.programs.build import build_program
from conformance.programs.cache import ProgramCache, cache_dir, use_cache_dir
from conformance.programs.calls import WEIGHT_ROLES, Program, meta_program, program_for, shapes_disagree, with_weights
from conformance.programs.eager import EAGER_LAYS_OUT_AS_META, EagerOutputs, eager, eager_describes_outputs, eager_outputs
from conformance.programs.export import export_module
from conformance.programs.graphs import assemble, assign_debug_handles, copy_program, node_depths, output_capacities
from conformance.programs.modules import ModuleProgram, module_program
from conformance.programs.operators import HarnessError, core_aten, mutated_arguments, scalar_returns

__all__ = [
    "EAGER_LAYS_OUT_AS_META",
    "WEIGHT_ROLES",
    "EagerOutputs",
    "HarnessError",
    "ModuleProgram",
    "Program",
    "ProgramCache",
    "assemble",
    "assign_debug_handles",
    "batch_program",
    "build_program",
    "cache_dir",
    "copy_program",
    "core_aten",
    "eager",
    "eager_describes_outputs",
    "eager_outputs",
    "export_module",
    "meta_program",
    "module_program",
    "mutated_arguments",
    "node_depths",
    "output_capacities",
    "program_for",
    "scalar_returns",
    "shapes_disagree",
    "split_outputs",
    "use_cache_dir",
    "with_weights",
]
