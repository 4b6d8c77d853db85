"""The files a run writes: a backend's name as a path component, and writes that land whole."""

from __future__ import annotations

import glob
import hashlib
import os
import re
from pathlib import Path
from typing import Any

from conformance.run import transport

SAFE_NAME_BYTES = 96


def safe_name(name: str) -> str:
    """A backend name (or any backend-provided string) as one path component: only word characters,
    dots and dashes, no leading or trailing dots (so never "." or ".."), and at most SAFE_NAME_BYTES
    bytes (a long one keeps a prefix and a hash of the whole, so two names stay two directories)."""
    text = re.sub(r"[^\w.-]", "_", name).strip(".") or "_"
    if len(text.encode()) > SAFE_NAME_BYTES:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        text = text.encode()[: SAFE_NAME_BYTES - 17].decode("utf-8", "ignore") + "-" + digest
    return text


def write_json_atomic(path: Path, document: Any) -> None:
    """``document`` as strict JSON (NaN and infinities as strings, text cleaned; see
    conformance.run.transport), written whole or not at all."""
    write_text_atomic(path, transport.dumps_document(document))


def write_text_atomic(path: Path, text: str) -> None:
    """``text`` at ``path``, whole or not at all (a temporary file beside it, then a rename). The
    temporary file goes when the write fails or is interrupted (Ctrl-C, SIGTERM); one that a killed
    writer left (its process is gone) goes with the next write of the same file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for orphan in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        pid = orphan.name[len(path.name) + 2 : -len(".tmp")]
        if pid.isdigit() and not _process_alive(int(pid)):
            orphan.unlink(missing_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
