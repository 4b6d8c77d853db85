"""Ed25519 signatures of reports: who published a report.json, and what it was built from.

A key pair is made once, with OpenSSL (PEM files, as every Ed25519 tool reads them)::

    openssl genpkey -algorithm ed25519 -out signing.pem         # private: a CI secret
    openssl pkey -in signing.pem -pubout -out signing.pub.pem   # public: commit it, publish it

``certify --sign signing.pem`` (``report`` and ``merge`` too) signs; ``verify --public-key
signing.pub.pem`` (``diff`` too) checks. The ``signature`` of report.json signs a *statement*:
the algorithm, the key id, the sha256 of each top-level part of the report (canonical JSON,
``model.part_digests``: every part but ``integrity`` and ``signature``) and the sha256 of
each results document the report was built from (``integrity.results``, by part). So a
report edited, or rebuilt from edited results/ with ``conformance report``, fails against
the public key, and the message names the parts that differ from what was signed: neither
the unkeyed integrity hash nor a recomputed verdict can tell such a rebuild from a genuine run.

HMAC-SHA256 (the earlier ``signature``) is gone: whoever can verify an HMAC can also sign,
so a report verified by its readers proved nothing to them; the one use it had, CI signing
and checking its own reports with one secret, Ed25519 serves as well (the private key is the
secret, the public key is committed beside the baseline).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from conformance.report.model import part_digests

ALG = "ed25519"
CONTEXT = b"torch-backend-conformance/report-signature/1\n"
"""Prefixed to the signed statement: a signature made for anything else never verifies here."""
KEYGEN = "openssl genpkey -algorithm ed25519 -out signing.pem && openssl pkey -in signing.pem -pubout -out signing.pub.pem"
_SHOWN = 8  # differing parts named in one problem


class KeyFileError(ValueError):
    """A key file that cannot be read, or holds no Ed25519 key of the kind asked for."""


def load_private_key(path: str | Path) -> Ed25519PrivateKey:
    """The Ed25519 private key of a PEM file (PKCS#8, as ``openssl genpkey`` writes it)."""
    key = _load(path, serialization.load_pem_private_key, "private")
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path}: a {type(key).__name__.removeprefix('_')}, not an Ed25519 private key (make one: {KEYGEN})")
    return key


def load_public_key(path: str | Path) -> Ed25519PublicKey:
    """The Ed25519 public key of a PEM file (SubjectPublicKeyInfo, as ``openssl pkey -pubout`` writes it)."""
    key = _load(path, serialization.load_pem_public_key, "public")
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{path}: a {type(key).__name__.removeprefix('_')}, not an Ed25519 public key")
    return key


def _load(path: str | Path, loader, kind: str):
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise KeyFileError(f"key file {path}: {exc.strerror or exc}") from None
    if kind == "public" and b"PRIVATE KEY" in data:
        raise KeyFileError(f"{path} is a private key: give the public key (openssl pkey -in {path} -pubout)")
    try:
        return loader(data) if kind == "public" else loader(data, password=None)
    except TypeError:  # an encrypted private key
        raise KeyFileError(f"{path} is encrypted: give an unencrypted PEM key (keep the file itself secret)") from None
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise KeyFileError(f"{path}: not a PEM {kind} key ({str(exc).splitlines()[0]}); make a pair with: {KEYGEN}") from None


def key_id(key: Ed25519PublicKey | Ed25519PrivateKey) -> str:
    """Names a key pair: the first 16 hex digits of the sha256 of the raw public key."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def statement(report: Mapping[str, Any], key: Ed25519PublicKey | Ed25519PrivateKey) -> dict[str, Any]:
    """What a signature by ``key`` of ``report`` asserts: its parts' and its results' digests."""
    return {
        "alg": ALG,
        "key_id": key_id(key),
        "report": part_digests(report),
        "results": dict((report.get("integrity") or {}).get("results") or {}),
    }


def _message(signed: Mapping[str, Any]) -> bytes:
    body = {k: v for k, v in signed.items() if k != "value"}
    return CONTEXT + json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sign(report: dict[str, Any], key: Ed25519PrivateKey | None) -> dict[str, Any]:
    """Sign ``report`` in place with ``key``; without a key, leave it unsigned."""
    report.pop("signature", None)
    if key is not None:
        signed = statement(report, key)
        signed["value"] = base64.b64encode(key.sign(_message(signed))).decode()
        report["signature"] = signed
    return report


def authenticate(signed: Mapping[str, Any], key: Ed25519PublicKey) -> list[str]:
    """Why the ``signature`` block ``signed`` was not made by ``key`` (empty when it was)."""
    if signed["key_id"] != key_id(key):
        return [f"signed with key id {signed['key_id']}, not with the given public key (key id {key_id(key)})"]
    try:
        key.verify(base64.b64decode(signed["value"], validate=True), _message(signed))
    except (InvalidSignature, ValueError):
        return [f"signature invalid: the signature block was not made by key {key_id(key)} (forged, or edited after signing)"]
    return []


def differences(report: Mapping[str, Any]) -> list[str]:
    """How ``report`` differs from what its (authentic) signature block says was signed."""
    signed = report["signature"]
    problems = []
    now = part_digests(report)
    changed = sorted(k for k in set(now) | set(signed["report"]) if now.get(k) != signed["report"].get(k))
    if changed:
        problems.append(
            f"the report does not match what was signed: {_names(changed)} differ (edited, or rebuilt from other results, after signing)"
        )
    named = (report.get("integrity") or {}).get("results") or {}
    problems += [
        f"built from other results than those signed: {p}"
        for p in results_differences(signed["results"], named, "this report names")
    ]
    return problems


def results_differences(signed: Mapping[str, str], found: Mapping[str, str], what: str) -> list[str]:
    """Per part, how the results digests ``found`` differ from ``signed`` (or recorded)."""
    out = []
    for part in sorted(set(signed) | set(found)):
        a, b = signed.get(part), found.get(part)
        if a == b:
            continue
        if a is None:
            out.append(f"part {part!r} is not among them ({what} it)")
        elif b is None:
            out.append(f"part {part!r} (sha256 {a[:16]}) is missing ({what} no such part)")
        else:
            out.append(f"part {part!r}: sha256 {a[:16]} expected, {what} {b[:16]}")
    return out


def _names(items: list[str]) -> str:
    return ", ".join(items[:_SHOWN]) + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")
