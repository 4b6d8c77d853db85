"""What ExecuTorch does with corrupted blobs, one forked child per blob (RT-011's detail).

RT-011 runs all its mutations in one worker; the first one that kills the
process ends the check as CRASH and the others are never seen. This tool runs
the same kind of mutation (1-8 random bytes of the runnable contract program's
blob) each in a forked child, so a crash costs one line, and tabulates what
happened: refused by init, refused by execute, accepted, or the signal that
killed the child and the last line the child wrote to stderr.

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
    10: "refused by init (BackendError)",
    11: "init failed without BackendError",
    20: "refused by execute (BackendError)",
    21: "execute failed without BackendError",
}


def run(which: str, count: int = 60, seed: int = 0, out=sys.stdout) -> collections.Counter:
    from backend_adapters import executorch
    from conformance.checks import _support as support
    from conformance.driver import Driver
    from conformance.results import Category, CheckFailure

    backend = getattr(executorch, which)()
    program = support.runnable(backend)
    driver = Driver(backend)
    result, _ = driver.preprocess(program.fresh())
    expected = list(support.expected_for(program.name))
    blob = result.processed_bytes
    print(f"{backend.name}: contract program {program.name}, blob of {len(blob)} bytes, {count} mutations, seed {seed}", file=out)
    rng = np.random.default_rng(seed)
    tally: collections.Counter = collections.Counter()
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
                fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(fd, 2)
                code = 0
                try:
                    loaded = driver.init(result, processed_bytes=bytes(data))
                except CheckFailure as exc:
                    code = 10 if exc.category is Category.INIT_FAIL else 11
                else:
                    try:
                        driver.execute(loaded, program.inputs, expected)
                    except CheckFailure as exc:
                        code = 20 if exc.category is Category.EXECUTE_FAIL else 21
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
    return 1 if any(key.startswith(("killed", "init failed without", "execute failed without")) for key in tally) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
