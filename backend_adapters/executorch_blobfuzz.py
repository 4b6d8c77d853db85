"""What ExecuTorch does with corrupted blobs, one forked child per blob (RT-011's detail).

RT-011 runs all its mutations in one worker; the first one that kills the
process ends the check as CRASH and the others are never seen. This tool runs
the same kind of mutation (1-8 random bytes of the blob preprocess made for a
numerics case: a convolution, else an addmm, else an add, whichever the backend
takes first) each in a forked child, so a crash costs one line, and tabulates
what happened: refused by init, refused by execute, accepted (with outputs that
match the reference or not), or the signal that killed the child and the last
line the child wrote to stderr. Each child runs the case through the case core
(conformance.case.run) with the mutated blob in place of preprocess's.

    python -m backend_adapters.executorch_blobfuzz xnnpack [N] [SEED]
    python -m backend_adapters.executorch_blobfuzz portable [N] [SEED]

POSIX only (os.fork). Needs executorch.
"""

from __future__ import annotations

import collections
import os
import signal
import sys
import tempfile

import numpy as np

OUTCOMES = {
    0: "accepted, executed",
    1: "accepted, executed, outputs differ from the reference",
    10: "refused by init (BackendError)",
    11: "init failed without BackendError",
    20: "refused by execute (BackendError)",
    21: "execute failed without BackendError",
    30: "destroy failed",
}


def _exit_code(outcome) -> int:
    """The child's exit code for the core's outcome (OUTCOMES)."""
    from conformance.results import Category

    if outcome.category is Category.PASS:
        return 0
    if outcome.category is Category.MISMATCH:
        return 1
    if outcome.stage == "init":
        return 10 if outcome.category is Category.INIT_FAIL else 11
    if outcome.stage == "execute":
        return 20 if outcome.category is Category.EXECUTE_FAIL else 21
    if outcome.stage == "destroy":
        return 30
    return 99


def cases():
    """The candidate calls, in the order tried: the first the backend preprocesses is fuzzed."""
    from conformance.call import Call, Tensor

    rng = np.random.default_rng(0)

    def values(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    conv = Call(
        "aten.convolution.default",
        (Tensor(values(1, 3, 8, 8)), Tensor(values(4, 3, 3, 3), "parameter"), Tensor(values(4), "parameter"),
         [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
    )  # fmt: skip
    addmm = Call("aten.addmm.default", (Tensor(values(4), "parameter"), Tensor(values(2, 8)), Tensor(values(8, 4), "parameter")))
    add = Call("aten.add.Tensor", (Tensor(values(2, 3)), Tensor(values(2, 3))))
    return [conv, addmm, add]


def run(which: str, count: int = 60, seed: int = 0, out=sys.stdout) -> collections.Counter:
    from backend_adapters import executorch
    from conformance import case
    from conformance import specs as spec_module
    from conformance.results import Category

    backend = getattr(executorch, which)()
    specs = spec_module.load()
    tally: collections.Counter = collections.Counter()
    for call in cases():
        spec = specs.op(call.op)
        first = case.run(backend, spec, call)
        if first.category is not Category.NOT_SUPPORTED:
            break
    if first.preprocessed is None:
        print(f"{backend.name}: no case to fuzz: {first.category.value}: {first.message}", file=out)
        return tally
    blob = first.preprocessed.processed_bytes
    print(
        f"{backend.name}: {call.describe()} ({first.category.value} unmutated), blob of {len(blob)} bytes, {count} mutations, seed {seed}",
        file=out,
    )
    rng = np.random.default_rng(seed)
    examples: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(count):
            k = int(rng.integers(1, 9))
            positions, values = rng.integers(0, len(blob), k), rng.integers(0, 256, k)
            data = bytearray(blob)
            for p, v in zip(positions, values):
                data[p] = int(v) if data[p] != v else int(v) ^ 0xFF
            err = os.path.join(tmp, f"{i}.err")
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # child: its stderr goes to a file, its exit code says what happened
                code = 98
                try:
                    fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                    os.dup2(fd, 2)
                    outcome = case.run(
                        backend, spec, call,
                        expected=first.expected, program=first.program, preprocessed=first.preprocessed, blob=bytes(data),
                    )  # fmt: skip
                    code = _exit_code(outcome)
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            if os.WIFSIGNALED(status):
                with open(err, errors="replace") as f:
                    lines = [line.strip() for line in f if line.strip()]
                last = next((line for line in reversed(lines) if "Error" in line or "what()" in line), lines[-1] if lines else "")
                if "UnicodeDecodeError" in last:  # pybind11's stderr redirect met a non-UTF-8 log message
                    last = "terminate: pybind11::error_already_set UnicodeDecodeError (a logged blob byte)"
                key = f"killed by {signal.Signals(os.WTERMSIG(status)).name}: {last[:160]}"
            else:
                key = OUTCOMES.get(os.WEXITSTATUS(status), f"exit {os.WEXITSTATUS(status)}")
            tally[key] += 1
            examples.setdefault(key, sorted({int(p) for p in positions}))
    for key, n in tally.most_common():
        print(f"{n:4d}  {key}  (first: bytes {examples[key]} changed)", file=out)
    return tally


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("xnnpack", "portable"):
        print(__doc__)
        return 2
    count = int(argv[1]) if len(argv) > 1 else 60
    seed = int(argv[2]) if len(argv) > 2 else 0
    tally = run(argv[0], count, seed)
    return 1 if any(key.startswith(("killed", "init failed without", "execute failed without", "destroy failed", "exit ")) for key in tally) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
