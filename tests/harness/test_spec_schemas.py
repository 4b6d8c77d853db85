"""The JSON Schemas of the spec files (conformance/specs/schemas/): valid schemas, shipped with the
package, naming the vocabulary conformance.specs defines; and a broken file refused through them
with the file, the table path, what is wrong and what is accepted."""

from __future__ import annotations

import fnmatch
import shutil
import tomllib
from pathlib import Path

import jsonschema
import pytest

from conformance import specs
from conformance.api import certification
from conformance.api.scalar_type import KNOWN_DTYPE_NAMES
from conformance.specs import validation

ROOT = Path(__file__).resolve().parents[2]


def test_every_schema_is_a_valid_json_schema_and_ships_as_package_data():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setuptools = pyproject["tool"]["setuptools"]
    assert {"conformance.specs", "conformance.oracle"} <= set(setuptools["packages"])
    shipped = setuptools["package-data"]["conformance"]
    files = sorted(validation.SCHEMAS.glob("*.json"))
    assert {f.name for f in files} == {f"{kind}.schema.json" for kind in validation.KINDS} | {"common.schema.json"}
    for f in files:
        jsonschema.Draft202012Validator.check_schema(validation.schema(f.name.removesuffix(".schema.json")))
        assert any(fnmatch.fnmatch(f"specs/schemas/{f.name}", pattern) for pattern in shipped), f.name


def test_the_schemas_name_the_vocabulary_of_conformance_specs():
    common = validation.schema("common")["$defs"]
    ops = validation.schema("ops")["$defs"]
    op = ops["op"]["properties"]
    clauses = validation.schema("clauses")["properties"]["clause"]
    assert common["dtype"]["enum"] == list(KNOWN_DTYPE_NAMES)
    assert common["dtype_set"]["enum"] == list(specs.DTYPE_SETS)
    assert op["domain"]["enum"] == list(specs.DOMAINS)
    assert op["values"]["enum"] == list(specs.VALUE_MODES)
    assert list(op["skip_edges"]["properties"]) == list(specs.EDGE_KINDS)
    assert list(op["latitudes"]["properties"]) == list(specs.OP_LATITUDES)
    assert ops["bound"]["properties"]["kind"]["enum"] == list(specs.BOUND_KINDS)
    lengths = ops["bound"]["properties"]["length"]["anyOf"]
    assert lengths[0]["enum"] + ["numel:"] == list(specs.BOUND_LENGTHS) and lengths[1]["pattern"].startswith("^numel:")
    assert clauses["propertyNames"]["pattern"] == f"^({'|'.join(specs.FAMILIES)})-[0-9]{{3}}$"
    applies_to = clauses["additionalProperties"]["properties"]["applies_to"]["items"]["enum"]
    assert applies_to == list(certification.FAMILIES)


def _broken(tmp_path: Path, file: str, old: str, new: str) -> str:
    """The message of the SpecError that loading a copy of the spec with ``old`` replaced by ``new`` in
    ``file`` gives, with the copy's root spelled specs/."""
    root = tmp_path / "specs"
    shutil.copytree(specs.specs_root(), root, ignore=shutil.ignore_patterns("__pycache__"))
    text = (root / file).read_text()
    assert old in text, (file, old)
    (root / file).write_text(text.replace(old, new, 1))
    with pytest.raises(specs.SpecError) as caught:
        specs.load(root)
    return str(caught.value).replace(str(root), "specs")


ADD = 'name = "aten.add.Tensor"\nexact = true\nsignature = "binary"'
GELU = "tolerance.float32 = { atol = 5e-7, rtol = 1.3e-6, ulp = 1,"


@pytest.mark.parametrize(
    ("file", "old", "new", "message"),
    [
        ("ops/activation.toml", GELU, 'tolerance.float32 = { atol = 5e-7, rtol = "1.3e-6", ulp = 1,',
         'specs/ops/activation.toml: [aten.gelu.default].tolerance.float32.rtol must be a number, got "1.3e-6"'),
        ("ops/activation.toml", GELU, "tolerance.float32 = { atol = 5e-7, rtol = 1.3e-6, ulp = 1.0,",
         "specs/ops/activation.toml: [aten.gelu.default].tolerance.float32.ulp must be an integer, got 1.0"),
        ("ops/binary.toml", ADD, ADD + "\ndynamic = 1",
         "specs/ops/binary.toml: [aten.add.Tensor].dynamic must be true or false, got 1"),
        ("interface.toml", '[clause.PRE-003]\n', '[clause.PRE-003]\napplies_to = "delegate"\n',
         'specs/interface.toml: [clause.PRE-003].applies_to must be a list, got "delegate"'),
        ("models.toml", "inputs = [{ low = -3.0, high = 3.0 }]", "inputs = 3",
         "specs/models.toml: [model.mlp].inputs must be a list of ranges { low = ..., high = ... }, one per input in order, got 3"),
    ],
    ids=["number", "integer", "boolean", "list", "table list"],
)
def test_a_field_of_the_wrong_type_is_refused_with_its_table_path(tmp_path, file, old, new, message):
    assert _broken(tmp_path, file, old, new) == message


@pytest.mark.parametrize(
    ("file", "old", "new", "message"),
    [
        ("ops/binary.toml", ADD, ADD + "\nexcat = true",
         "specs/ops/binary.toml: [aten.add.Tensor]: unknown field(s) ['excat'] (did you mean exact?); allowed: ['accumulates', "
         "'attrs', 'bound', 'core', 'defined_outputs', 'domain', 'dtypes', 'dynamic', 'edge', 'exact', 'family', 'latitudes', "
         "'max_examples', 'name', 'notes', 'params', 'signature', 'signed_zero', 'skip_edges', 'tolerance', 'values', 'weights']"),
        ("ops/activation.toml", GELU, "tolerance.float32 = { atol = 5e-7, rtoll = 1.3e-6, ulp = 1,",
         "specs/ops/activation.toml: [aten.gelu.default].tolerance.float32: unknown field(s) ['rtoll'] (did you mean rtol?); "
         "allowed: ['atol', 'reason', 'rtol', 'ulp'] (+1 more problem)"),
        ("ops/binary.toml", ADD, ADD + '\nskip_edges = { larg = "measured" }',
         "specs/ops/binary.toml: [aten.add.Tensor].skip_edges: unknown field(s) ['larg'] (did you mean large?); allowed: "
         "['attr', 'broadcast', 'dim', 'empty', 'large', 'large_finite', 'model', 'pairwise', 'scalar', 'spread', 'values', "
         "'weights']"),
        ("profiles.toml", "[profile.smoke]\n", '[profile.smoke]\nextend = "interface"\n',
         "specs/profiles.toml: [profile.smoke]: unknown field(s) ['extend'] (did you mean extends?); allowed: ['clauses', "
         "'description', 'dtypes', 'extends', 'models', 'ops', 'quantized']"),
        ("scope.toml", "[[out_of_scope]]", "version = 2\n[[out_of_scope]]",
         "specs/scope.toml: unknown field(s) ['version']; allowed: ['out_of_scope']"),
    ],
    ids=["op field", "tolerance field", "edge kind", "profile field", "top level"],
)
def test_an_unknown_key_is_refused_with_a_suggestion_and_the_allowed_keys(tmp_path, file, old, new, message):
    assert _broken(tmp_path, file, old, new) == message


@pytest.mark.parametrize(
    ("file", "old", "new", "message"),
    [
        ("ops/binary.toml", ADD, 'name = "aten.add.Tensor"\nexact = true',
         "specs/ops/binary.toml: [aten.add.Tensor]: missing field 'signature'"),
        ("interface.toml", '[clause.PRE-001]\ntitle = "preprocess returns a well-typed PreprocessResult"\n', "[clause.PRE-001]\n",
         "specs/interface.toml: [clause.PRE-001]: missing field 'title'"),
        ("quantized.toml", "inputs = [{ low = -3.0, high = 3.0 }]", "inputs = [{ high = 3.0 }]",
         "specs/quantized.toml: [program.linear].inputs[0]: missing field 'low'"),
        ("models.toml", "examples = 4\n", "", "specs/models.toml: [defaults]: missing field 'examples'"),
    ],
    ids=["op signature", "clause title", "range low", "defaults examples"],
)
def test_a_missing_required_field_is_refused_naming_it(tmp_path, file, old, new, message):
    assert _broken(tmp_path, file, old, new) == message


@pytest.mark.parametrize(
    ("file", "old", "new", "message"),
    [
        ("ops/binary.toml", ADD, ADD + '\nvalues = "uniforn"',
         'specs/ops/binary.toml: [aten.add.Tensor].values must be one of "reference", "undefined", "prefix", "uniform", "normal", '
         '"permutation", "dropout" (conformance.specs.VALUE_MODES says what each checks), got "uniforn" (did you mean "uniform"?)'),
        ("profiles.toml", 'ops = "core"', 'ops = "cores"',
         'specs/profiles.toml: [profile.core-fp32].ops must be "all", "core", "family:NAME" or a list of op names, got "cores"'),
        ("ops/binary.toml", 'dtypes = ["all", "complex"]', 'dtypes = ["all", "complx"]',
         'specs/ops/binary.toml: [aten.add.Tensor].dtypes[1] must be a dtype name or a dtype set name '
         '(conformance.specs.DTYPE_SETS), got "complx" (did you mean "complex"?); accepted: '
         + ", ".join([*KNOWN_DTYPE_NAMES, *specs.DTYPE_SETS])),
        ("ops/binary.toml", ADD, ADD + '\nbound = { kind = "sum", reason = " " }',
         'specs/ops/binary.toml: [aten.add.Tensor].bound.reason must be a string that gives the derivation, got " "'),
        ("interface.toml", "[clause.PRE-001]", "[clause.PRE-01]",
         "specs/interface.toml: [clause.PRE-01]: the name must be a clause ID: a family (PRE, RT, REG, DBG, NUM, MOD, QNT, PERF, "
         "LAZY), a dash and three digits, e.g. PRE-001"),
    ],
    ids=["enum", "one of two forms", "dtype in a list", "blank reason", "clause ID"],
)
def test_a_value_outside_the_accepted_ones_says_what_is_accepted(tmp_path, file, old, new, message):
    assert _broken(tmp_path, file, old, new) == message


def test_what_a_schema_cannot_say_is_still_checked_after_it(tmp_path):
    """References between entries stay in Python: a tolerance for a dtype the op does not take."""
    message = _broken(tmp_path, "ops/binary.toml", ADD, ADD + '\ntolerance.int4 = { atol = 0, rtol = 0, reason = "r" }')
    assert message == "specs/ops/binary.toml: [aten.add.Tensor].tolerance.int4: int4 is not among the op's dtypes (nor the parts of a complex one)"


def test_a_profile_definition_is_checked_by_its_schema():
    loaded = specs.load()
    definition = specs.profile_definition(loaded.profile("smoke"))
    assert specs.profile_from_definition(definition, loaded) == loaded.profile("smoke")
    with pytest.raises(specs.SpecError) as caught:
        specs.profile_from_definition({**definition, "ops": {"aten.add.Tensor": "float32"}}, loaded)
    assert str(caught.value) == "profile definition 'smoke': ops.\"aten.add.Tensor\" must be a list, got \"float32\""
    with pytest.raises(specs.SpecError, match=r"^profile definition: must be a table, got \[\]$"):
        specs.profile_from_definition([], loaded)
