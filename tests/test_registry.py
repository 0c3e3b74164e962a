"""The lesson registry (lesson_code/lessons.toml, scripts/store/lessons.py) is untrusted input: a
malformed entry, an id or a module that climbs out of lesson_code/, is refused in one line
naming the file, the field and the fix, before anything runs."""
import re

import pytest

from conftest import ROOT


GOOD_ENTRY = 'id = "my-lesson"\nmodule = "lesson_code.my_lesson"\n'


def registry_root(tmp_path, text):
    """A checkout with a registry holding `text`, the schema, and one lesson module."""
    root = tmp_path / "checkout"
    (root / "lesson_code").mkdir(parents=True)
    (root / "recordings").mkdir()
    (root / "recordings" / "schema.json").write_bytes(
        (ROOT / "recordings" / "schema.json").read_bytes())
    (root / "lesson_code" / "my_lesson.py").write_text("print('PASS: my-lesson')\n")
    registry = root / "lesson_code" / "lessons.toml"
    registry.write_bytes(text if isinstance(text, bytes) else text.encode())
    return root


def refusal(tmp_path, text):
    from scripts.store.lessons import RegistryError, load_lessons

    with pytest.raises(RegistryError) as refused:
        load_lessons(registry_root(tmp_path, text))
    message = str(refused.value)
    assert "\n" not in message and message.startswith("lesson_code/lessons.toml: ")
    return message


def test_a_good_registry_loads(tmp_path):
    from scripts.store.lessons import load_lessons

    lessons = load_lessons(registry_root(tmp_path, f"[[lesson]]\n{GOOD_ENTRY}devices = 2\n"))
    assert list(lessons) == ["my-lesson"] and lessons["my-lesson"].devices == 2


@pytest.mark.parametrize("value", ['"../../outside"', '"a/b"', '"Upper"', '"a..b"', '""',
                                   '"x-"', f'"{"a" * 65}"', "3", '["a"]', '"a\\nb"'])
def test_an_id_outside_the_schema_s_pattern_is_refused(tmp_path, value):
    message = refusal(tmp_path, f'[[lesson]]\nid = {value}\nmodule = "lesson_code.my_lesson"\n')
    assert "field 'id'" in message
    # ...and it shows an id the rule accepts.
    from scripts.store.lessons import check_id

    example = re.search(r'such as "([^"]+)"', message)
    assert example and check_id(example[1], ROOT) is None, message


@pytest.mark.parametrize("field", ["module", "rank_module", "simulation", "sweep"])
@pytest.mark.parametrize("value", ['"..evil"', '"lesson_code..x"', '"os"', '"tests.conftest"',
                                   '"lesson_code.missing"', '"lesson_code"',
                                   '"lesson_code.figures"',
                                   '"lesson_code/my_lesson"', '1', '"lesson_code.linked"'])
def test_a_module_resolves_only_inside_lesson_code(tmp_path, field, value):
    entry = 'id = "my-lesson"\nmodule = "lesson_code.my_lesson"\n'
    entry = (entry.replace('"lesson_code.my_lesson"', value) if field == "module"
             else entry + f"{field} = {value}\n")
    root_text = f"[[lesson]]\n{entry}"
    outside = tmp_path / "outside.py"
    outside.write_text("raise SystemExit('ran code outside lesson_code/')\n")
    root = registry_root(tmp_path, root_text)
    (root / "lesson_code" / "linked.py").symlink_to(outside)  # resolves out of lesson_code/
    from scripts.store.lessons import RegistryError, load_lessons
    with pytest.raises(RegistryError) as refused:
        load_lessons(root)
    assert f"field {field!r}" in str(refused.value) and "lesson_code" in str(refused.value)


@pytest.mark.parametrize("value", ['"recordings/schema.json"', '"lesson_code/../x.schema.json"',
                                   '"lesson_code/missing.schema.json"',
                                   '"lesson_code/my_lesson.py"', '"lesson_code/linked.schema.json"',
                                   '"/etc/x.schema.json"', "1"])
def test_a_data_schema_is_a_schema_file_inside_lesson_code(tmp_path, value):
    root = registry_root(tmp_path, f"[[lesson]]\n{GOOD_ENTRY}data_schema = {value}\n")
    (tmp_path / "x.schema.json").write_text("{}")
    (root / "lesson_code" / "linked.schema.json").symlink_to(tmp_path / "x.schema.json")
    from scripts.store.lessons import RegistryError, load_lessons
    with pytest.raises(RegistryError) as refused:
        load_lessons(root)
    assert "field 'data_schema'" in str(refused.value) and "\n" not in str(refused.value)
    (root / "lesson_code" / "my_lesson.schema.json").write_text("{}")  # the good one loads
    registry = root / "lesson_code" / "lessons.toml"
    registry.write_text(f'[[lesson]]\n{GOOD_ENTRY}data_schema = '
                        f'"lesson_code/my_lesson.schema.json"\n')
    assert load_lessons(root)["my-lesson"].data_schema == "lesson_code/my_lesson.schema.json"


@pytest.mark.parametrize("value", ["true", "false", '"4"', "0", "-1", "2.5", "1000000", "257",
                                   "[4]", "4.0"])
def test_devices_is_a_whole_number_in_range(tmp_path, value):
    message = refusal(tmp_path, f"[[lesson]]\n{GOOD_ENTRY}devices = {value}\n")
    assert "field 'devices'" in message and "from 1 to 256" in message


@pytest.mark.parametrize("value", ['"panels"', '["nope"]', '["panels", "panels"]', "[1]"])
def test_figures_are_known_kinds(tmp_path, value):
    assert "field 'figures'" in refusal(tmp_path, f"[[lesson]]\n{GOOD_ENTRY}figures = {value}\n")


@pytest.mark.parametrize("text, words", [
    ("", "no [[lesson]] entry"),
    ("# nothing registered\n", "no [[lesson]] entry"),
    ("lesson = 3\n", "[[lesson]] tables"),
    (f"[[lesson]]\n{GOOD_ENTRY}[[lesson]]\n{GOOD_ENTRY}", "registered twice"),
    (f"[[lesson]]\n{GOOD_ENTRY}colour = 'red'\n", "unknown field 'colour'"),
    ('[[lesson]]\nid = "my-lesson"\n', "has no 'module'"),
    ('[[lesson]]\nmodule = "lesson_code.my_lesson"\n', "has no 'id'"),
    ("[[lesson]\n", "not valid TOML"),
    (b'[[lesson]]\nid = "caf\xe9"\n', "not UTF-8"),
    ("\ufeff[[lesson]]\n" + GOOD_ENTRY, "not valid TOML"),
])
def test_a_malformed_registry_is_one_line(tmp_path, text, words):
    assert words in refusal(tmp_path, text)


def test_record_refuses_a_bad_registry_before_running_anything(tmp_path, monkeypatch, capsys):
    """`record.py --render-only` with an id that climbs out: exit 2, one line, nothing
    written (record.main in-process, reading the registry of a checkout at tmp_path)."""
    from scripts import record
    from scripts.store.lessons import load_lessons

    root = registry_root(tmp_path, '[[lesson]]\nid = "../../escaped"\n'
                                   'module = "lesson_code.my_lesson"\n')
    before = sorted(tmp_path.rglob("*"))
    monkeypatch.setattr(record, "load_lessons", lambda: load_lessons(root))
    assert record.main(["--render-only"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "field 'id'" in err
    assert sorted(tmp_path.rglob("*")) == before
