"""Signed reports (issue 28, finding 3): only the holder of the private key makes a report that
verifies against the public key, and a report rebuilt from edited results does not.

Before, the only keyed integrity was an HMAC: whoever could verify could sign; results/ edited
(a failure made a pass) and rebuilt with ``conformance report`` verified VALID, exit 0, without a
key; a made-up signature was VALID with a note, and ``integrity`` took any extra field. Reports
are built as tests/reports/test_verify.py builds them: a results document, then ``report DIR
[--sign KEY]`` in-process; key pairs are PEM files in the format ``openssl genpkey`` writes.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from conformance.cli import EXIT_INVALID, EXIT_OK, EXIT_UNSIGNED, EXIT_USAGE, main
from conformance.report import signing
from conformance.report.model import document_digest, summarize, validate, verdict
from tests.reports.test_html import SPECS, nan_dropped_by_max
from tests.reports.test_verify import _flip_failures, certify, forge, run


def write_keypair(directory: Path) -> tuple[Path, Path]:
    """signing.pem (PKCS#8) and signing.pub.pem (SubjectPublicKeyInfo), as OpenSSL writes them."""
    directory.mkdir(parents=True)
    key = Ed25519PrivateKey.generate()
    private, public = directory / "signing.pem", directory / "signing.pub.pem"
    private.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


@pytest.fixture
def keys(tmp_path) -> tuple[Path, Path]:
    return write_keypair(tmp_path / "publisher")


@pytest.fixture
def signed(tmp_path, keys) -> Path:
    """A genuine, signed report of a backend that is not certified (maximum drops NaN)."""
    certify(tmp_path / "signed", nan_dropped_by_max, key_file=keys[0])
    return tmp_path / "signed"


@pytest.fixture
def unsigned(tmp_path) -> Path:
    certify(tmp_path / "unsigned", nan_dropped_by_max)
    return tmp_path / "unsigned"


def test_sign_and_verify_round_trip(capsys, signed, keys):
    report = json.loads((signed / "report.json").read_text())
    kid = signing.key_id(signing.load_public_key(keys[1]))
    sig = report["signature"]
    assert sig["alg"] == "ed25519" and sig["key_id"] == kid
    assert set(sig["report"]) == set(report) - {"integrity", "signature"}  # every part of the report is covered
    built_from = document_digest(json.loads((signed / "results" / "checks.json").read_text()))
    assert sig["results"] == report["integrity"]["results"] == {"checks": built_from}  # and the results it was built from
    rc, out = run(capsys, "verify", "--public-key", str(keys[1]), str(signed / "report.json"))
    assert rc == EXIT_OK, out
    assert (
        out.startswith("VALID, SIGNED: demo 1.0: not certified for profile smoke")
        and f"note: signature valid (key id {kid})" in out
    ), out


@pytest.mark.slow
def test_a_report_rebuilt_from_edited_results_fails_against_the_public_key(capsys, signed, keys):
    """The forgery of finding 3: MISMATCH made PASS in results/, the report rebuilt with
    ``conformance report``. Everything agrees (hash, summary, verdict recomputed), so only the
    signature can tell: the rebuild is unsigned, and the genuine signature moved onto it names
    what differs from what was signed."""
    path, public = str(signed / "report.json"), str(keys[1])
    genuine = json.loads((signed / "report.json").read_text())
    results = signed / "results" / "checks.json"
    document = json.loads(results.read_text())
    _flip_failures(document)
    results.write_text(json.dumps(document))
    assert main(["report", str(signed)]) == EXIT_OK  # the forger's rebuild, without the private key
    assert json.loads((signed / "report.json").read_text())["verdict"]["certified"]

    rc, out = run(capsys, "verify", path)
    assert rc == EXIT_UNSIGNED and out.startswith("VALID, UNSIGNED: demo 1.0: certified"), out  # consistent, and no more
    rc, out = run(capsys, "verify", "--public-key", public, path)
    assert rc == EXIT_INVALID and "unsigned, but a public key" in out, out

    forge(signed, lambda r: r.update(signature=genuine["signature"]))
    rc, out = run(capsys, "verify", "--public-key", public, path)
    assert rc == EXIT_INVALID, out
    assert "the report does not match what was signed: results, summary, verdict differ" in out, out
    assert (
        f"built from other results than those signed: part 'checks': sha256 {genuine['integrity']['results']['checks'][:16]}"
        in out
    ), out
    assert "results/checks.json (part 'checks'" in out and "is not the results document that was signed" in out, out
    assert "VALID," not in out


def test_an_edited_and_recomputed_report_fails_only_against_the_public_key(capsys, signed, keys):
    """report.json edited by hand, flags, summary, verdict and hash recomputed with this package."""

    def flip_everything(report: dict) -> None:
        _flip_failures(report)
        report["summary"] = summarize(report["results"])
        report["verdict"] = verdict(report["results"], SPECS.profile("smoke"), SPECS)

    forge(signed, flip_everything)
    rc, out = run(capsys, "verify", "--public-key", str(keys[1]), str(signed / "report.json"))
    assert rc == EXIT_INVALID and "the report does not match what was signed: results, summary, verdict differ" in out, out
    rc, out = run(capsys, "verify", str(signed / "report.json"))
    assert rc == EXIT_UNSIGNED and out.startswith("VALID, SIGNATURE NOT CHECKED: demo 1.0: certified"), out
    assert "no --public-key given" in out


def test_an_unsigned_report_exits_with_the_unsigned_code(capsys, unsigned):
    rc, out = run(capsys, "verify", str(unsigned / "report.json"))
    assert rc == EXIT_UNSIGNED == 5, out
    assert (
        out.startswith("VALID, UNSIGNED: demo 1.0: not certified for profile smoke")
        and "note: unsigned: nothing shows who wrote" in out
    ), out


def test_a_made_up_signature_is_not_valid(capsys, unsigned, keys):
    """Anyone can write a signature block: without a public key it is not checked, and says so."""
    kid = signing.key_id(signing.load_public_key(keys[1]))
    fake = {"alg": "ed25519", "key_id": kid, "report": {}, "results": {}, "value": base64.b64encode(bytes(64)).decode()}
    forge(unsigned, lambda r: r.update(signature=fake))
    rc, out = run(capsys, "verify", str(unsigned / "report.json"))
    assert rc == EXIT_UNSIGNED and out.startswith("VALID, SIGNATURE NOT CHECKED:"), out
    rc, out = run(capsys, "verify", "--public-key", str(keys[1]), str(unsigned / "report.json"))
    assert rc == EXIT_INVALID and f"signature invalid: the signature block was not made by key {kid}" in out, out


@pytest.mark.parametrize(("part", "field"), [("integrity", "note"), ("signature", "note")])
def test_an_unknown_field_in_integrity_or_signature_is_rejected(capsys, signed, part, field):
    forge(signed, lambda r: r[part].update({field: "verified by hand"}))
    report = json.loads((signed / "report.json").read_text())
    assert any(
        p.startswith(f"{part}: Additional properties are not allowed ('{field}' was unexpected)") for p in validate(report)
    )
    rc, out = run(capsys, "verify", str(signed / "report.json"))
    assert rc == EXIT_INVALID and f"INVALID: {signed / 'report.json'}: schema: {part}: Additional properties" in out, out


def test_a_wrong_public_key_fails(capsys, signed, keys, tmp_path):
    other_private, other_public = write_keypair(tmp_path / "someone-else")
    kid, other = (signing.key_id(signing.load_public_key(k)) for k in (keys[1], other_public))
    rc, out = run(capsys, "verify", "--public-key", str(other_public), str(signed / "report.json"))
    assert rc == EXIT_INVALID and f"signed with key id {kid}, not with the given public key (key id {other})" in out, out
    # Someone else's key signs what they like, and only their own public key accepts it.
    assert main(["report", str(signed), "--sign", str(other_private)]) == EXIT_OK
    rc, out = run(capsys, "verify", "--public-key", str(keys[1]), str(signed / "report.json"))
    assert rc == EXIT_INVALID and f"signed with key id {other}, not with the given public key (key id {kid})" in out, out
    assert run(capsys, "verify", "--public-key", str(other_public), str(signed / "report.json"))[0] == EXIT_OK


def test_diff_requires_both_reports_signed_by_the_public_key(capsys, signed, unsigned, keys):
    new, old, public = str(signed / "report.json"), str(unsigned / "report.json"), str(keys[1])
    shutil.copyfile(new, signed.parent / "baseline.json")
    rc, out = run(capsys, "diff", str(signed.parent / "baseline.json"), new, "--public-key", public)
    assert rc == EXIT_OK, out
    rc, out = run(capsys, "diff", old, new, "--public-key", public)
    assert rc == EXIT_INVALID and "INVALID: baseline" in out and "unsigned, but a public key" in out, out


def test_key_files_that_cannot_serve_are_usage_errors(capsys, signed, keys, tmp_path):
    path = str(signed / "report.json")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key\n")
    cases = {
        "a private key given as the public key": (["verify", "--public-key", str(keys[0]), path], "is a private key"),
        "an absent public key": (["verify", "--public-key", str(tmp_path / "absent.pem"), path], "absent.pem"),
        "garbage as the public key": (["verify", "--public-key", str(garbage), path], "not a PEM public key"),
        "a public key to sign with": (["report", str(signed), "--sign", str(keys[1])], "not a PEM private key"),
        "certify, before any check runs": (
            ["certify", "reference", "--profile", "smoke", "--output", str(tmp_path / "out"), "--sign", str(garbage)],
            "--sign:",
        ),
    }
    for name, (args, says) in cases.items():
        capsys.readouterr()
        assert main(args) == EXIT_USAGE, name
        assert says in capsys.readouterr().err, name


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_the_documented_openssl_commands_make_a_pair_that_signs(tmp_path, signed):
    subprocess.run(signing.KEYGEN, shell=True, cwd=tmp_path, check=True, capture_output=True)
    private, public = signing.load_private_key(tmp_path / "signing.pem"), signing.load_public_key(tmp_path / "signing.pub.pem")
    assert signing.key_id(private) == signing.key_id(public)
    assert main(["report", str(signed), "--sign", str(tmp_path / "signing.pem")]) == EXIT_OK
    assert main(["verify", "--public-key", str(tmp_path / "signing.pub.pem"), str(signed / "report.json")]) == EXIT_OK
