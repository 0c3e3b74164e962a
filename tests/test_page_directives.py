"""The page language, a Python-Markdown extension: alone, it shows what was recorded, as
text; a directive it cannot resolve is one line naming it, never published."""
import html
import json
import re
import string

import markdown
import pytest
from hypothesis import example, given, settings, strategies as st
from mkdocs.exceptions import PluginError

from conftest import FIRST_LESSON, FIXTURES, LESSONS, ROOT, recording_name
from harness import raised_in_one_line
from scripts.pages import page_language
from scripts.pages.directives import recorded_value, value_text
from scripts.pages.page_language import PageLanguage
from scripts.pages.recorded_text import PageError, PageValues, formatted
from scripts.pages.sources import Sources
from scripts.store.freshness import Loaded
from scripts.store.outputs import recording_fix


def of_a_lesson(markdown):
    """LESSON stands for the first registered lesson's id: any lesson's recording will do."""
    return markdown.replace("LESSON", FIRST_LESSON.id)


# Each: a page's Markdown, and words of its one line: a directive misspelt, never closed, with
# a `/` or no dotted path, a block inline, a value that cannot be formatted or placed there.
@pytest.mark.parametrize("markdown, words",
                         json.loads((FIXTURES / "unresolvable_directives.json").read_text()))
def test_a_directive_that_cannot_be_resolved_is_one_line_never_published(markdown, words):
    assert of_a_lesson(words) in str(raised_in_one_line(PageError, converted, markdown))


def test_the_extension_alone_reads_the_registry_and_the_recordings_itself(monkeypatch):
    recording = json.loads((ROOT / recording_name(FIRST_LESSON)).read_text())
    page = markdown.markdown(of_a_lesson(
        "JAX {{ rec:LESSON.cpu:environment.jax }}, recorded on "
        "{{ rec:LESSON.cpu:generatedAt|date }}.\n\n"
        "{{ if-recorded:LESSON.cpu }}Recorded.{{ else }}Not yet.{{ end }}\n\n"
        "{{ lessons }}\n"), extensions=["scripts.pages.page_language"])  # as mkdocs.yml
    assert f"JAX {recording['environment']['jax']}, recorded on " in page
    assert re.search(r"recorded on \d{1,2} [A-Z][a-z]+ \d{4}\.", page)
    assert "<p>Recorded.</p>" in page and "Not yet" not in page
    for lesson in LESSONS.values():  # links from the page's folder, the docs folder here
        assert f'href="lessons/{lesson.id}.md"' in page
    assert "RECVAL" not in page and "{{" not in page
    # ...and only for a page that has a directive.
    monkeypatch.setattr(page_language, "loaded_once", lambda *args: pytest.fail("loaded"))
    assert markdown.markdown("# Plain\n\ntext", extensions=[page_language.PageLanguage()]) \
        == "<h1>Plain</h1>\n<p>text</p>"


def hostile_sources(text, data=None):
    """The first lesson with one CPU recording whose every string is `text`."""
    env = {"jax": text, "backend": "cpu", "deviceCount": 4, "numpy": "2", "deviceKind": "cpu"}
    recording = {"kind": "executed", "lessonId": FIRST_LESSON.id, "provenance": text,
                 "generatedAt": "2026-12-01T18:58:07+00:00", "environment": env,
                 "stdout": f"{text}\n```\nPASS", "command": [text],
                 "data": data or {"words": text, "rows": [{"name": text, "share": 0.5}],
                                  "byName": {text: {"name": text}}}}
    stem = f"{FIRST_LESSON.id}.cpu"
    return Sources(LESSONS, {stem: Loaded(recording, stem, recording_name(FIRST_LESSON))},
                   ROOT / "docs")


@pytest.mark.parametrize("text", ['<script>alert("x")</script>', '[x](javascript:alert(1))',
                                  '--8<-- "README.md"', "**bold** `code` _x_ <!-- c -->",
                                  "| a | b |"])
def test_recorded_text_is_text_after_every_extension(text):
    page = markdown.markdown(of_a_lesson(
        "## Ran {{ rec:LESSON.cpu:data.words }}\n\nSaid {{ rec:LESSON.cpu:data.words }}.\n\n"
        "{{ recordings:LESSON }}\n\n{{ recordings-table:LESSON }}\n"),
        extensions=["toc", "tables", "pymdownx.superfences", "pymdownx.tabbed",
                    "pymdownx.snippets", PageLanguage(sources=hostile_sources(text))])
    escaped = html.escape(text)
    assert f"<p>Said {escaped}.</p>" in page
    assert page.count(escaped) >= 6  # heading, sentence, tab label, provenance, table...
    assert "<script>" not in page and "javascript:" not in page.replace(escaped, "")
    assert "<strong>" not in page and "README" not in page.replace(escaped, "")
    assert "recorded 1 December 2026" in page and "T18:58" not in page
    heading = re.search(r'<h2 id="([^"]+)">Ran (.*?)</h2>', page)
    assert heading and re.fullmatch(r"ran(-[\w-]+)?", heading[1]) and heading[2] == escaped


def table_rows(page):
    body = re.search(r"<tbody>(.*?)</tbody>", page, re.DOTALL)[1]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)
            for row in re.findall(r"<tr>(.*?)</tr>", body, re.DOTALL)]


def converted(text, sources=None):
    language = PageLanguage(sources=sources) if sources else PageLanguage()
    return markdown.markdown(of_a_lesson(text), extensions=["tables", language])


def test_a_table_directive_writes_one_row_per_recorded_element():
    budget = json.loads((ROOT / recording_name(FIRST_LESSON)).read_text())["data"]["budget"]
    page = converted("| p | bytes | storage |\n|--:|--:|---|\n{{ rec-table:LESSON.cpu:data.budget "
                     "| {ranks|d}\n   | {all_reduce_bytes|,d} | {shard_storage_bytes|,d} B (row "
                     "{*}) }}\n\nAfter the table.\n")
    assert table_rows(page) == [
        [str(row["ranks"]), f"{row['all_reduce_bytes']:,d}",
         f"{row['shard_storage_bytes']:,d} B (row {index})"] for index, row in enumerate(budget)]
    assert "<p>After the table.</p>" in page and "RECVAL" not in page


def test_a_dict_table_follows_its_list_of_keys_reads_from_the_top_and_holds_text():
    data = {"ranks": [8, 2, 4], "labels": {"2": "two", "4": "four", "8": "eight"},
            "steps": {"2": {"us": 10.26}, "4": {"us": 20.5}, "8": {"us": 40.0}}}
    page = converted("| p | name | µs | backend |\n|--:|---|--:|---|\n"
                     "{{ rec-table:LESSON.cpu:data.steps@data.ranks | {*} | {/data.labels.*}\n"
                     "   | {us|.1f} | {/environment.backend} }}\n", hostile_sources("x", data))
    assert table_rows(page) == [["8", "eight", "40.0", "cpu"], ["2", "two", "10.3", "cpu"],
                                ["4", "four", "20.5", "cpu"]]
    text = '<script>alert(1)</script> | [x](javascript:alert(1)) **b** {{ rec:a:b }}'
    page = converted("| key | name | share |\n|---|---|---|\n"
                     "{{ rec-table:LESSON.cpu:data.rows | {*} | {name} | {share|.0%} }}\n"
                     "{{ rec-table:LESSON.cpu:data.byName | {*} | {name} | {/data.words} }}\n",
                     hostile_sources(text))
    escaped = html.escape(text)
    assert table_rows(page) == [["0", escaped, "50%"], [escaped, escaped, escaped]]
    assert "<script>" not in page and "<strong>" not in page and "<a " not in page


VALUES = st.integers(-10**12, 10**12) | st.floats(allow_nan=False, allow_infinity=False) \
    | st.text(string.ascii_letters + " µ·", max_size=8)  # text, never a timestamp
SPECS = st.text(st.characters(codec="ascii", exclude_categories=["Cc"]), max_size=12) \
    | st.from_regex(r"(.?[<>=^])?[+\- ]?z?#?0?\d{0,12}[,_]?(\.\d{0,12})?[bcdeEfFgGnosxX%]?",
                    fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(value=VALUES, spec=SPECS)
@example(value=-1, spec="c")  # OverflowError in format(), found by Hypothesis
def test_any_format_code_formats_as_python_does_within_bounds_or_is_one_line(value, spec):
    """A width past 40 or a precision past 20 would build a gigabyte page: one line."""
    try:
        text = value_text(value, spec, f"{{{{ rec:lesson.cpu:data.value|{spec} }}}}")
    except PageError as refused:
        message = str(refused)
        assert "\n" not in message and len(message) < 400 and "change the format code" in message
        return
    assert text == (format(value, spec) if spec else str(value))
    # Every run of digits (a one-character fill is at most 9), and each after a point.
    assert all(int(width) <= 40 for width in re.findall(r"(?<![.\d])\d+", spec))
    assert all(int(precision) <= 20 for precision in re.findall(r"\.(\d+)", spec))


for _spec in (">1000000000", ".100000000f", "x^41", ".21f", "041d", "{}", "%Y", ".5q",
              "1000000000000000000000000"):  # what once built a gigabyte, or a traceback
    test_any_format_code_formats_as_python_does_within_bounds_or_is_one_line = example(
        value=1.5, spec=_spec)(
        test_any_format_code_formats_as_python_does_within_bounds_or_is_one_line)


def test_the_format_codes_pages_use_still_work():
    for value, spec in [(1234.5, ",.0f"), (0.25, ".0%"), (7, "d"), (1.5, ">40.20f"), ("cpu", "^9")]:
        assert formatted(value, spec) == format(value, spec), spec


def test_a_missing_hardware_recording_names_the_command_that_makes_it():
    assert "tpu_job.py" in recording_fix(LESSONS, f"{FIRST_LESSON.id}.tpu")
    assert recording_fix(LESSONS, f"{FIRST_LESSON.id}.cpu") == (
        "python scripts/record.py" if len(LESSONS) == 1 else
        f"python scripts/record.py --lesson {FIRST_LESSON.id}")
    assert recording_fix(LESSONS, f"{FIRST_LESSON.id}.weird") == \
        f"git rm {recording_name(FIRST_LESSON, 'weird')}"
    assert recording_fix(LESSONS, "nobody.cpu") is None
    assert "run `python scripts/tpu_job.py" in str(raised_in_one_line(
        PluginError, recorded_value, f"{FIRST_LESSON.id}.tpu", "environment.jax", None,
        Sources(LESSONS, {}, ROOT / "docs"), PageValues(), directive="{{ rec: }}"))
