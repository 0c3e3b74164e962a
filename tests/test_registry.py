"""The lesson registry is untrusted input: a value outside lessons.schema.json, or a module
or schema that is no file inside lesson_code/, is one line naming the field and the fix."""
import json
import re
import tomllib

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st
from referencing import Registry, Resource

from conftest import ROOT, run_record
from harness import project as project_copy, raised_in_one_line, refused
from scripts import record
from scripts.figures import KINDS
from scripts.store.lessons import RegistryError, load_course, load_lessons
from site_build import build

GOOD_ENTRY = 'id = "my-lesson"\nmodule = "lesson_code.my_lesson"\n'
SCHEMA = json.loads((ROOT / "lesson_code" / "lessons.schema.json").read_text())
FIELDS = SCHEMA["$defs"]["lesson"]["properties"]
SHARED = json.loads((ROOT / "recordings" / "schema.json").read_text())
REFERENCE = jsonschema.Draft202012Validator(SCHEMA, registry=Registry().with_resource(
    "recordings/schema.json", Resource.from_contents(SHARED)))


def registry_root(tmp_path, text):
    root = tmp_path / "checkout"
    for name in ("recordings/schema.json", "lesson_code/lessons.schema.json"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes((ROOT / name).read_bytes())
    (root / "lesson_code" / "my_lesson.py").write_text("print('PASS: my-lesson')\n")
    registry = root / "lesson_code" / "lessons.toml"
    registry.write_bytes(text if isinstance(text, bytes) else text.encode())
    return root


def refusal(tmp_path, text=None, root=None):
    """load_lessons' one line on the registry `text` (or the checkout at `root`)."""
    message = str(raised_in_one_line(RegistryError, load_lessons,
                                     root or registry_root(tmp_path, text)))
    assert message.startswith("lesson_code/lessons.toml: ")
    return message


def rule(field):
    found = FIELDS[field]
    return found.get("description") or SCHEMA["$defs"][found["$ref"].split("/")[-1]]["description"]


def test_a_good_registry_loads_with_its_course_and_4_0_devices_are_4(tmp_path):
    schema = "lesson_code/my_lesson.schema.json"
    root = registry_root(tmp_path, f'[course]\ntitle = "T"\ndescription = "D"\n[[lesson]]\n'
                                   f'{GOOD_ENTRY}devices = 4.0\ndata_schema = "{schema}"\n')
    (root / schema).write_text("{}")
    lessons = load_lessons(root)
    assert list(lessons) == ["my-lesson"] and lessons["my-lesson"].data_schema == schema
    assert type(lessons["my-lesson"].devices) is int and lessons["my-lesson"].devices == 4
    assert load_course(root) == {"title": "T", "description": "D"}
    with pytest.raises(RegistryError, match=r"^lesson_code/lessons.toml: needs a \[course\] "
                                            r"table with a title and a description"):
        load_course(registry_root(tmp_path, f"[[lesson]]\n{GOOD_ENTRY}"))


@pytest.mark.parametrize("field", FIELDS)
def test_each_field_s_example_fits_its_own_rule(field):
    """A refusal's "such as" example is a value that would be accepted."""
    example = re.search(r"such as (.+)$", rule(field))
    if example is None:
        assert field == "figures"  # its kinds are listed by scripts/figures/__init__.py
        return
    entry = {"id": "my-lesson", "module": "lesson_code.my_lesson", "analysis": "lesson_code.x",
             field: json.loads(example[1])}
    assert REFERENCE.is_valid({"lesson": [entry]}), (field, example[1])


def toml(value):
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml(key)} = {toml(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(map(toml, value)) + "]"
    return json.dumps(value, ensure_ascii=False)


# What a hand could write: the near misses, then anything TOML holds.
NEAR_MISSES = ["../../outside", "a/b", "Upper", "a..b", "", "x-", "a" * 65, "a\nb", "..evil",
               "lesson_code..x", "os", "tests.conftest", "lesson_code", "lesson_code/my_lesson",
               "recordings/schema.json", "lesson_code/../x.schema.json", "/etc/x.schema.json",
               "lesson_code/my_lesson.py", 0, -1, 257, 2.5, 1_000_000, "4", True, False, [4],
               ["Panels"], ["panels", "panels"], [1], ["cpu", "cpu"], ["CPU"], ["a" * 40]]
TEXT = st.text(st.characters(exclude_characters="\x7f", exclude_categories=["Cs"]),
               max_size=30)  # TOML has no raw DEL; a file holds no lone surrogate
SCALARS = TEXT | st.booleans() | st.integers(-2**63, 2**63 - 1) \
    | st.floats(allow_nan=False, allow_infinity=False)
VALUES = st.sampled_from(NEAR_MISSES) | SCALARS | st.lists(SCALARS, max_size=3) \
    | st.dictionaries(TEXT, SCALARS, max_size=2)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                   HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(list(FIELDS)), value=VALUES)
def test_any_value_outside_the_schema_is_one_line_naming_the_field(tmp_path, field, value):
    entry = {"id": "my-lesson", "module": "lesson_code.my_lesson",
             "analysis": "lesson_code.my_lesson", field: value}
    assume(not REFERENCE.is_valid({"lesson": [entry]}))
    text = "[[lesson]]\n" + "".join(f"{key} = {toml(item)}\n" for key, item in entry.items())
    assert tomllib.loads(text)["lesson"][0] == entry  # written as meant
    message = refusal(tmp_path, text)
    assert f"field {field!r} = " in message and message.endswith(f": must be {rule(field)}")


@pytest.mark.parametrize("field, value", [
    *((field, value) for field in ("module", "rank_module", "simulation", "sweep")
      for value in ("lesson_code.missing", "lesson_code.figures", "lesson_code.linked")),
    ("data_schema", "lesson_code/missing.schema.json"),
    ("data_schema", "lesson_code/linked.schema.json")])
def test_a_module_or_data_schema_is_a_file_inside_lesson_code(tmp_path, field, value):
    entry = (GOOD_ENTRY.replace("lesson_code.my_lesson", value) if field == "module"
             else GOOD_ENTRY + f'{field} = "{value}"\n')
    root = registry_root(tmp_path, f"[[lesson]]\n{entry}")
    (tmp_path / "outside.py").write_text("raise SystemExit('ran code outside lesson_code/')\n")
    (tmp_path / "x.schema.json").write_text("{}")
    (root / "lesson_code" / "figures").mkdir()
    (root / "lesson_code" / "linked.py").symlink_to(tmp_path / "outside.py")
    (root / "lesson_code" / "linked.schema.json").symlink_to(tmp_path / "x.schema.json")
    message = refusal(tmp_path, root=root)
    assert f"field {field!r}" in message
    assert field == "data_schema" or "must be an existing module file; " in message


@pytest.mark.parametrize("text, words", [
    ("", "no [[lesson]] entry"), ("lesson = []\n", "no [[lesson]] entry"),
    ("lesson = 3\n", "[[lesson]] tables"), ("lesson = [1]\n", "[[lesson]] tables"),
    (f"[[lesson]]\n{GOOD_ENTRY}[[lesson]]\n{GOOD_ENTRY}", "registered twice"),
    (f"[[lesson]]\n{GOOD_ENTRY}colour = 'red'\n", "unknown field 'colour'"),
    ('[[lesson]]\nid = "my-lesson"\n', "has no 'module'"),
    ('[[lesson]]\nmodule = "lesson_code.my_lesson"\n', "lesson 'entry 1' has no 'id'"),
    (f'[[lesson]]\n{GOOD_ENTRY}analyses = ["cpu"]\n', "lists analyses but names no `analysis`"),
    ("[[lesson]\n", "not valid TOML"), ("\ufeff[[lesson]]\n" + GOOD_ENTRY, "not valid TOML"),
    (f"x = {'[' * 600}{']' * 600}\n", "nested too deeply"),
    (b'[[lesson]]\nid = "caf\xe9"\n', "not UTF-8"),
    (f'[[lesson]]\n{GOOD_ENTRY}figures = ["panels", "nope"]\n',
     f"'nope' is none of {', '.join(KINDS)}"),
    (f'[course]\ntitle = ""\n[[lesson]]\n{GOOD_ENTRY}', "needs a [course] table with a title"),
    (f'[[lesson]]\n{GOOD_ENTRY}device_counts = [2, 8]\n', "field 'device_counts' = [2, 8]: "
     "must be the only device counts it runs on: distinct whole numbers from 1 to 256, its "
     "`devices` among them")])
def test_a_malformed_registry_is_one_line(tmp_path, text, words):
    assert words in refusal(tmp_path, text)


def test_record_refuses_a_bad_registry_before_running_anything(tmp_path, monkeypatch, capsys):
    """`record.py --render-only` with an id that climbs out: exit 2, nothing written."""
    root = registry_root(tmp_path, '[[lesson]]\nid = "../../escaped"\n'
                                   'module = "lesson_code.my_lesson"\n')
    before = sorted(tmp_path.rglob("*"))
    monkeypatch.setattr(record, "load_lessons", lambda: load_lessons(root))
    assert "field 'id'" in refused(record.main, ["--render-only"], capsys)
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.slow
def test_a_registry_that_is_not_utf8_is_one_line_in_the_check_and_the_build(tmp_path):
    project = project_copy(tmp_path / "project")
    registry = project / "lesson_code" / "lessons.toml"
    registry.write_bytes(registry.read_bytes().replace(b"Distributed", b"Distribut\xe9d"))
    line = "lesson_code/lessons.toml: not UTF-8 (byte "
    check = run_record(project, "--check", timeout=120)
    assert check.returncode == 2 and check.stderr.count("\n") == 1 and line in check.stderr
    built = build(project, tmp_path / "site")
    assert built.returncode != 0 and "Traceback" not in built.stderr, built.stderr[-2000:]
    errors = [text for text in built.stderr.splitlines() if text.startswith(("ERROR", "error: "))]
    assert len(errors) == 1 and line in errors[0], built.stderr[-2000:]
