"""How long a NUM check spends drawing calls and building their programs (no backend, no oracle).

    python benchmarks/draws_and_programs.py [--every N] [--ops PATTERN,...] [--profile FILE]
                                            [--dump FILE] [--repeat-programs]

For every op x dtype of the full profile (every Nth with ``--every``), draws what a NUM check
draws: the directed plan (conformance/strategies/directed.py) and the hypothesis examples of the
``ci`` profile, seeded as test_numerics.py seeds them, then builds each call's program
(``program_for``). Prints the CPU seconds of each part. ``--dump FILE`` writes one line per call
(its description and a digest of its values and of its program's graph), so two trees can be
compared draw for draw: ``diff`` the dumps of a baseline checkout and this one.
"""

from __future__ import annotations

import argparse
import cProfile
import fnmatch
import hashlib
import sys
import time

import numpy as np


def _digest(call) -> str:
    h = hashlib.sha256()
    for t in call.tensors():
        h.update(str(t.value.dtype).encode() + repr(t.value.shape).encode())
        h.update(np.ascontiguousarray(t.value).view(np.uint8).tobytes() if t.value.size else b"")
    return h.hexdigest()[:16]


def _program_digest(program) -> str:
    import torch

    exported = program.exported
    parts = [str(exported.graph)]
    for node in exported.graph.nodes:
        val = node.meta.get("val")
        for v in val if isinstance(val, (list, tuple)) else [val]:
            if isinstance(v, torch.Tensor):
                parts.append(f"{node.name}:{node.meta.get('debug_handle')}:{type(v).__name__}:{tuple(v.shape)}:{v.dtype}"
                             f":{v.stride()}:{v.storage_offset()}:{v.device}:{v.requires_grad}")
            else:
                parts.append(f"{node.name}:{node.meta.get('debug_handle')}:{v!r}")
    parts.append(str(exported.graph_signature))
    for k, v in exported.state_dict.items():
        raw = v.detach().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes()
        parts.append(k + ":" + hashlib.sha256(raw).hexdigest()[:8])
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--every", type=int, default=1)
    parser.add_argument("--ops", default="")
    parser.add_argument("--profile", default="")
    parser.add_argument("--dump", default="")
    parser.add_argument("--no-programs", action="store_true")
    args = parser.parse_args(argv)

    from hypothesis import HealthCheck, given, reject, seed, settings
    from hypothesis import strategies as st

    from conformance import specs as specs_mod
    from conformance.checks.test_numerics import _seed
    from conformance.programs import program_for
    from conformance.strategies import calls
    from conformance.strategies.directed import draw_directed, plan
    from conformance.strategies.profiles import register

    register()
    specs = specs_mod.load()
    profile = specs.profile("full")
    pairs = []
    for core in profile.ops:
        spec = specs.ops[core]
        for name in spec.names:
            for dtype in profile.dtypes.get(core, ()):
                pairs.append((spec, name, dtype))
    if args.ops:
        pats = args.ops.split(",")
        pairs = [p for p in pairs if any(fnmatch.fnmatch(p[1], pat) for pat in pats)]
    pairs = pairs[:: args.every]

    timings = {"directed draws": 0.0, "hypothesis draws": 0.0, "programs": 0.0}
    lines: list[str] = []
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    current = settings()
    n_calls = 0
    for spec, op, dtype in pairs:
        strategy = calls(spec, dtype, op)
        drawn = []
        t = time.process_time()
        for group in plan(spec, dtype):
            for directive in group:
                call, _ = draw_directed(strategy, directive, op, dtype)
                if call is not None:
                    drawn.append((directive.label, call))
        timings["directed draws"] += time.process_time() - t
        limit = min(current.max_examples, spec.max_examples or current.max_examples)
        examples = []

        @seed(_seed(op, dtype, current.max_examples.__str__()))
        @settings(current, max_examples=limit, derandomize=False, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(data=st.data())
        def example(data):
            call = data.draw(strategy, label="call")
            examples.append(call)
            if len(examples) % 5 == 4:
                reject()  # as a refusing backend makes the engine draw more

        t = time.process_time()
        try:
            example()
        except Exception as exc:  # noqa: BLE001
            print(f"{op} {dtype}: {type(exc).__name__}", file=sys.stderr)
        timings["hypothesis draws"] += time.process_time() - t
        drawn += [(f"example {i}", c) for i, c in enumerate(examples)]
        n_calls += len(drawn)
        for label, call in drawn:
            line = f"{op}|{dtype}|{label}|{call.describe()}|{_digest(call)}"
            if not args.no_programs:
                t = time.process_time()
                try:
                    program = program_for(call, dynamic=spec.dynamic)
                except Exception as exc:  # noqa: BLE001
                    line += f"|program failed: {type(exc).__name__}"
                else:
                    timings["programs"] += time.process_time() - t
                    if args.dump:
                        line += "|" + _program_digest(program)
            lines.append(line)
    if profiler:
        profiler.disable()
        profiler.dump_stats(args.profile)
    print(f"{len(pairs)} op x dtype pairs, {n_calls} calls")
    for k, v in timings.items():
        print(f"{k:18s} {v:8.2f} s CPU")
    if args.dump:
        with open(args.dump, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
