"""scripts/pages/startup_tasks.py and source_map.py: the theme's components start one per
task, and the built bundle's source map still points where the theme's own did.
tests/test_browser.py watches the components start in a browser."""
import bisect
import json
import shutil
import subprocess
from pathlib import Path

import material
import pytest
from mkdocs.exceptions import PluginError

from scripts.pages.source_map import decoded, encoded, inserted, with_insertions
from scripts.pages.startup_tasks import (CLOSES_THE_TASK, COMPONENTS_END,
                                         COMPONENTS_START, IN_A_TASK_OF_ITS_OWN, LATER,
                                         SET_UP,
                                         STARTED_BY_THE_THEME, TIMER,
                                         one_task_per_component)
from scripts.pages.theme_startup import without_color_scheme_meta

THEME_SCRIPTS = Path(material.__file__).parent / "templates" / "assets" / "javascripts"
[THEME_BUNDLE] = THEME_SCRIPTS.glob("bundle.*.min.js")


def theme_bundle():
    return THEME_BUNDLE.read_bytes().decode()


def test_every_set_up_step_and_component_the_theme_starts_waits_for_a_task_of_its_own():
    bundle = theme_bundle()
    insertions = one_task_per_component(bundle)
    assert len(insertions) == 2 * (len(SET_UP) + len(STARTED_BY_THE_THEME))
    changed = inserted(bundle, insertions)
    start_up = changed[changed.index(COMPONENTS_START):changed.index(COMPONENTS_END)]
    # Each `...me("<component>").map(e=>mount)` became `...map(e=>He(0).pipe(b(()=>mount)))`.
    for component in STARTED_BY_THE_THEME:
        assert f'...me("{component}").map(e=>{IN_A_TASK_OF_ITS_OWN}' in start_up
    assert start_up.count(IN_A_TASK_OF_ITS_OWN) == len(STARTED_BY_THE_THEME)
    assert start_up.count("(") == start_up.count(")")
    # Each set-up statement `f(...);` became `setTimeout(()=>f(...));`, in its place.
    set_up = changed[:changed.index(COMPONENTS_START)]
    for statement in SET_UP:
        assert set_up.count(f"{LATER}{statement[:-1]});") == 1
    # Text is only added, and only these four pieces.
    assert {text for _, text in insertions} == {LATER, ")", IN_A_TASK_OF_ITS_OWN,
                                                CLOSES_THE_TASK}
    assert len(changed) == len(bundle) + sum(len(text) for _, text in insertions)
    # A --dirty build keeps the changed file: changing it again changes nothing.
    assert one_task_per_component(changed) == []


def test_the_set_up_steps_put_off_are_the_themes_own_set_up_calls():
    """What SET_UP names by minified names is, by the theme's source map, the set-up
    section of its bundle.ts: the clipboard, the language selector and the four patches."""
    bundle = theme_bundle()
    theme_map = (THEME_SCRIPTS / (THEME_BUNDLE.name + ".map")).read_text()
    sources = json.loads(theme_map)["sources"]
    called = []
    for statement in SET_UP:
        source, line, _ = mapped(theme_map, bundle, bundle.index(statement))
        assert sources[source].endswith("javascripts/bundle.ts"), sources[source]
        called.append(line + 1)
    # bundle.ts: setupClipboardJS 148, setupAlternate 151, patchEllipsis ... patchScrolllock
    # 211-214 (1-based lines of mkdocs-material 9.8.2).
    assert called == [148, 151, 211, 212, 213, 214]


def test_the_changed_bundle_is_still_javascript(tmp_path):
    assert shutil.which("node"), "node is missing: run `make install` (it needs npm)"
    script = tmp_path / "bundle.js"
    bundle = theme_bundle()
    script.write_text(inserted(bundle, one_task_per_component(bundle)), encoding="utf-8")
    run = subprocess.run(["node", "--check", str(script)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("bundle, said", [
    ("var a=1;", "does not start its components"),                       # another theme
    (COMPONENTS_START + ")" + COMPONENTS_END, "does not define RxJS's timer"),
    (TIMER + COMPONENTS_START + ")" + COMPONENTS_END, "other components"),
    (TIMER + COMPONENTS_START + ".map(e=>f('x'))" + COMPONENTS_END, "cannot read"),
    (theme_bundle().replace(SET_UP[0], SET_UP[0] + SET_UP[0]), "set-up steps"),
])
def test_a_bundle_that_starts_its_components_otherwise_fails_the_build(bundle, said):
    with pytest.raises(PluginError, match=f"{said}.*startup_tasks.py"):
        one_task_per_component(bundle)


def test_a_bundle_changed_for_some_components_only_fails_the_build():
    bundle = theme_bundle()
    last_component = one_task_per_component(bundle)[-2:]
    with pytest.raises(PluginError, match="not others"):
        one_task_per_component(inserted(bundle, last_component))


def test_a_segment_reads_back_as_written():
    # The example of the source map specification: [0, 0, 16, 1] is "AAgBC".
    assert decoded("AAgBC") == [0, 0, 16, 1]
    assert encoded([0, 0, 16, 1]) == "AAgBC"
    assert decoded(encoded([-1, 1023, -1024, 0, 123456789])) == [-1, 1023, -1024, 0,
                                                                   123456789]
    mappings = json.loads((THEME_SCRIPTS / (THEME_BUNDLE.name + ".map")).read_text())
    segments = [segment for line in mappings["mappings"].split(";")
                for segment in line.split(",") if segment]
    assert [encoded(decoded(segment)) for segment in segments] == segments


def test_text_inserted_on_a_line_moves_only_that_lines_later_columns():
    # Two lines; segments at columns 0, 4 and 10 of line 0, each naming source 0 at
    # original line 0, its own original column.
    mappings = ";".join([",".join(encoded(numbers) for numbers in
                                  ([0, 0, 0, 0], [4, 0, 0, 4], [6, 0, 0, 6])),
                         encoded([2, 0, 1, -10])])
    moved = with_insertions(mappings, 0, [(4, 3), (8, 5)])
    line, next_line = moved.split(";")
    columns, column = [], 0
    for segment in line.split(","):
        numbers = decoded(segment)
        column += numbers[0]
        columns.append((column, *numbers[1:]))
    # Column 4 is at the first insertion (moves by 3), column 10 after both (by 8).
    assert columns == [(0, 0, 0, 0), (7, 0, 0, 4), (18, 0, 0, 6)]
    assert next_line == encoded([2, 0, 1, -10])
    assert inserted("abcdefghij", [(8, "XY"), (4, "+")]) == "abcd+efghXYij"


def mapped(source_map, text, index):
    """The original (source, line, column) the map gives for `text`'s character at index."""
    rows, source, line, column = [], 0, 0, 0
    for generated_line in json.loads(source_map)["mappings"].split(";"):
        row, generated = [], 0
        for segment in filter(None, generated_line.split(",")):
            numbers = decoded(segment)
            generated += numbers[0]
            if len(numbers) >= 4:
                source, line, column = (source + numbers[1], line + numbers[2],
                                        column + numbers[3])
                row.append((generated, source, line, column))
        rows.append(row)
    row = rows[text.count("\n", 0, index)]
    at = index - (text.rfind("\n", 0, index) + 1)
    return row[bisect.bisect_right([segment[0] for segment in row], at) - 1][1:]


def test_the_built_source_map_points_where_the_themes_own_does(built_site):
    """Every mount the change moved, and what follows the start-up, map to the original
    line and column they mapped to before."""
    theme = without_color_scheme_meta(theme_bundle())
    theme_map = (THEME_SCRIPTS / (THEME_BUNDLE.name + ".map")).read_text()
    built_bundle = built_site / "assets" / "javascripts" / THEME_BUNDLE.name
    built = built_bundle.read_text()
    built_map = built_bundle.with_name(THEME_BUNDLE.name + ".map").read_text()
    for token in ["window.component$", COMPONENTS_END]:
        assert mapped(built_map, built, built.index(token)) == \
            mapped(theme_map, theme, theme.index(token)), token
    # Each mount, the first character after the inserted text, still maps to itself.
    start = theme.index(COMPONENTS_START)
    for component in dict.fromkeys(STARTED_BY_THE_THEME):
        needle = f'...me("{component}").map(e=>'
        in_theme = theme.index(needle, start) + len(needle)
        in_built = built.index(needle, start) + len(needle) + len(IN_A_TASK_OF_ITS_OWN)
        assert mapped(built_map, built, in_built) == mapped(theme_map, theme, in_theme)
    # Each set-up statement put off still maps to the theme's own call.
    for statement in SET_UP:
        in_built = built.index(LATER + statement[:-1]) + len(LATER)
        assert mapped(built_map, built, in_built) == \
            mapped(theme_map, theme, theme.index(statement)), statement
    # The rest of the map file is the theme's, byte for byte.
    assert json.loads(built_map) | {"mappings": ""} == json.loads(theme_map) | {"mappings": ""}


def test_an_unreadable_source_map_fails_the_build_in_one_line_and_changes_nothing(tmp_path):
    from scripts.pages.theme_startup import rewrite_bundle

    bundle = tmp_path / THEME_BUNDLE.name
    bundle.write_bytes(THEME_BUNDLE.read_bytes())
    source_map = tmp_path / (THEME_BUNDLE.name + ".map")
    source_map.write_text("{not json", encoding="utf-8")
    with pytest.raises(PluginError, match="source map cannot be read"):
        rewrite_bundle(bundle)
    assert bundle.read_bytes() == THEME_BUNDLE.read_bytes()  # neither file written
    assert source_map.read_text(encoding="utf-8") == "{not json"
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        [bundle.name, source_map.name])  # no scratch file left


def test_a_rebuild_moves_neither_file_again(tmp_path):
    from scripts.pages.theme_startup import rewrite_bundle

    bundle = tmp_path / THEME_BUNDLE.name
    source_map = tmp_path / (THEME_BUNDLE.name + ".map")
    bundle.write_bytes(THEME_BUNDLE.read_bytes())
    source_map.write_bytes((THEME_SCRIPTS / source_map.name).read_bytes())
    rewrite_bundle(bundle)
    once = bundle.read_bytes(), source_map.read_bytes()
    assert once[0] != THEME_BUNDLE.read_bytes()
    rewrite_bundle(bundle)  # a --dirty build keeps both changed files
    assert (bundle.read_bytes(), source_map.read_bytes()) == once
