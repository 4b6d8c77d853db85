"""The adapters' claims files (backend_adapters/claims/*.toml) and their loader.

Needs neither torch nor ExecuTorch: the files are read and checked against the spec only.
"""

from __future__ import annotations

import re
import shutil
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from backend_adapters import _claims
from backend_adapters._claims import ClaimsError
from conformance import specs as spec_module

ROOT = Path(__file__).resolve().parents[2]


def _real_backends() -> set[str]:
    return {ep.name for ep in entry_points(group="conformance.backends") if ep.value.startswith("backend_adapters.")}


def test_every_adapter_backend_has_a_claims_file():
    assert set(_claims.backends()) == _real_backends()


def test_claims_ship_as_package_data():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "claims/*.toml" in pyproject["tool"]["setuptools"]["package-data"]["backend_adapters"]
    assert _claims.claims_dir() == ROOT / "backend_adapters" / "claims"


@pytest.mark.parametrize("name", _claims.backends())
def test_claims_name_what_the_spec_knows(name):
    specs = spec_module.load()
    claims = _claims.load(name)
    spec_module.check_claims(specs, claims.listed_ops(), whose=claims.source)
    for key in claims.not_applicable:
        if key.endswith("-"):
            assert any(c.startswith(key) for c in specs.clauses), f"{claims.source}: prefix {key} names no clause"
        else:
            assert key in specs.clauses, f"{claims.source}: not_applicable names unknown clause {key}"
    assert all(reason.strip() for reason in claims.not_applicable.values())
    if claims.ops_from is not None and claims.ops_from.adapter is None:
        assert claims.manifest().ops  # a profile or the spec resolves to ops


def test_the_torchscript_backends_share_the_family_reasons():
    demo = _claims.load("torchscript-backend-with-compiler-demo")
    test_backend = _claims.load("torchscript-test-backend")
    assert demo.not_applicable == test_backend.not_applicable and "REG-" in demo.not_applicable
    assert demo.manifest().ops == {"aten.add.Tensor": ("float32",), "aten.sub.Tensor": ("float32",)}
    assert dict(test_backend.manifest().ops) == {}


def test_xnnpack_literals():
    manifest = _claims.load("executorch-xnnpack").manifest()
    assert set(manifest.ops.values()) == {("float16", "float32")} and len(manifest.ops) == 25
    assert manifest.refuses == {"*": ("empty", "0-d", "mixed dtypes"), "aten.cat.default": ("one-tensor list",)}
    assert (manifest.blob_version.offset, manifest.blob_version.current) == (32 + 4 + 3, ord("1"))
    assert manifest.not_applicable_reason("REG-003") and not manifest.not_applicable_reason("REG-006")


def test_portable_ops_are_computed_by_the_adapter():
    claims = _claims.load("executorch-portable")
    assert claims.ops_from.adapter and not claims.ops
    with pytest.raises(ClaimsError, match=r"executorch-portable\.toml: ops_from: the ops are computed by the adapter"):
        claims.manifest()
    manifest = claims.manifest({"aten.add.Tensor": "*"})
    assert dict(manifest.ops) == {"aten.add.Tensor": "*"}
    assert manifest.blob_version.byteorder == "big" and manifest.blob_version.current == int.from_bytes(b"12", "big")


def test_lazy_ops_follow_the_profile(tmp_path):
    """The lazy claims name the "lazy" profile: change the profile, and the claims change with it."""
    root = tmp_path / "specs"
    shutil.copytree(spec_module.specs_root(), root)
    profiles = (root / "profiles.toml").read_text()
    start = profiles.index("[profile.lazy]")
    head, section = profiles[:start], profiles[start:]
    section = re.sub(r"\nops = \[.*?\n\]\n", '\nops = ["aten.add.Tensor", "aten.cos.default"]\n', section, count=1, flags=re.S)
    (root / "profiles.toml").write_text(head + section)
    specs = spec_module.load(root)
    manifest = _claims.load("torch-lazy-ts").manifest(specs=specs)
    assert dict(manifest.ops) == {"aten.add.Tensor": "*", "aten.cos.default": "*"}
    assert set(_claims.load("torch-lazy-ts").manifest().ops) == set(spec_module.load().profile("lazy").ops)


def test_aoti_claims_the_whole_spec():
    specs = spec_module.load()
    assert set(_claims.load("torch-aoti").manifest().ops) == set(specs.ops)


# ---------------------------------------------------------------------------------------------
# Errors name the file and the entry


def _load(tmp_path, text, name="demo"):
    (tmp_path / f"{name}.toml").write_text(text)
    return _claims.load(name, tmp_path)


@pytest.mark.parametrize(
    "text, message",
    [
        ('backend = "other"\n', r"demo\.toml: backend = 'other', but the file is named for 'demo'"),
        ("[[ops]]\nnames = []\ndtypes = '*'\n", r"demo\.toml: missing field 'backend'"),
        ('backend = "demo"\n[[ops]]\nnames = ["aten.add.Tensor"]\ndtypes = ["float33"]\n', r"demo\.toml: .*unknown dtype.*float33"),
        ('backend = "demo"\n[[ops]]\nnames = ["aten.add.Tensor"]\ndtypes = "all"\n', r"demo\.toml: ops\[0\]: dtypes must be"),
        ('backend = "demo"\n[[not_applicable]]\nclauses = ["RT-006"]\nreason = " "\n', r"demo\.toml: not_applicable\[0\]: reason is empty"),
        ('backend = "demo"\n[[not_applicable]]\nclauses = ["RT-006"]\n', r"demo\.toml: not_applicable\[0\]: missing field 'reason'"),
        ('backend = "demo"\n[[tolerances]]\nop = "aten.exp.default"\nreason = "x"\n', r"demo\.toml: tolerances\[0\]: .*give atol, rtol or ulp"),
        ('backend = "demo"\n[refuses]\n"*" = ["sideways"]\n', r"demo\.toml: .*refuses\['\*'\] has unknown kind"),
        ('backend = "demo"\n[ops_from]\nprofile = "lazy"\nspec = true\n', r"demo\.toml: ops_from: give exactly one of"),
        ('backend = "demo"\nwhatever = 1\n', r"demo\.toml: unknown field\(s\) \['whatever'\]"),
        ('backend = "demo"\nextends = "_missing"\n', r"_missing\.toml: missing"),
        ('backend = "demo"\n[blob_version]\noffset = 1\n', r"demo\.toml: blob_version"),
        ("backend = ", r"demo\.toml: not valid TOML"),
    ],
)
def test_errors_name_the_file_and_the_entry(tmp_path, text, message):
    with pytest.raises(ClaimsError, match=message):
        _load(tmp_path, text)


def test_unknown_profile_is_named(tmp_path):
    claims = _load(tmp_path, 'backend = "demo"\n[ops_from]\nprofile = "lazzy"\n')
    with pytest.raises(ClaimsError, match=r"demo\.toml: ops_from: profile: unknown profile 'lazzy'"):
        claims.manifest()


def test_extends_merges_the_shared_file_under_the_backend(tmp_path):
    (tmp_path / "_family.toml").write_text(
        '[[not_applicable]]\nclauses = ["RT-006", "RT-007"]\nreason = "family"\n[refuses]\n"*" = ["empty"]\n'
    )
    claims = _load(tmp_path, 'backend = "demo"\nextends = "_family"\n[[not_applicable]]\nclauses = ["RT-007"]\nreason = "own"\n')
    assert dict(claims.not_applicable) == {"RT-006": "family", "RT-007": "own"}
    assert dict(claims.refuses) == {"*": ("empty",)}
    assert "_family.toml" in claims.source
    with pytest.raises(ClaimsError, match="only shared files"):
        (tmp_path / "other.toml").write_text('backend = "other"\n')
        _load(tmp_path, 'backend = "demo2"\nextends = "other"\n', name="demo2")
