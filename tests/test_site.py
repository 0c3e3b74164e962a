"""The docs build: strict, offline, fed only by recordings, and loud about bad ones."""
import html
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from mkdocs.config import load_config
from mkdocs.exceptions import Abort, PluginError

from conftest import (FIRST_LESSON, LESSONS, ROOT, SEED, each_lesson, module_file,
                      project_copy, recording_name, rederive_analyses, run_record)
from scripts.pages.check_links import broken_links
from scripts.pages.recorded_text import human_date
from site_build import build
from site_pages import formulas_in, markdown_source, page_file, site_pages

# The seed lesson's page, for the checks of what that page itself holds.
LESSON_PAGE = Path("lessons") / SEED.id / "index.html"


def lesson_page(lesson):
    return Path("lessons") / lesson.id / "index.html"


@pytest.fixture()
def project(tmp_path):
    return project_copy(tmp_path / "project")


def edit_recording(project, change):
    """Change the CPU recording, then derive its analysis and figures again, as a
    maintainer would (`--render-only`): the build refuses a stale analysis."""
    path = project / recording_name(SEED)
    recording = json.loads(path.read_text())
    change(recording)
    path.write_text(json.dumps(recording, indent=2))
    derived = run_record(project, "--render-only", timeout=120)
    assert derived.returncode == 0, derived.stderr


def one_line_failure(run):
    assert run.returncode != 0
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    errors = [line for line in run.stderr.splitlines() if line.startswith("ERROR")]
    return "\n".join(errors)


def test_strict_build_without_jax_has_no_broken_links(built_site):
    problems, pages = broken_links(built_site)
    assert problems == []
    assert pages >= 3


@each_lesson
def test_page_values_come_from_the_recording(built_site, lesson):
    recording = json.loads((ROOT / recording_name(lesson)).read_text())
    page = (built_site / lesson_page(lesson)).read_text()
    assert f"recorded {human_date(recording['generatedAt'])}" in page  # its provenance line
    assert f"JAX {recording['environment']['jax']}" in page
    # The recorded stdout appears once per recording tab, line by line, escaped.
    for line in recording["stdout"].splitlines():
        assert line.replace("'", "&#x27;") in page or line.replace("'", "&#39;") in page \
            or line in page
    assert "{{" not in page, "an unresolved placeholder reached the page"


def test_the_seed_page_prints_the_words_of_its_analysis(built_site):
    analysis = json.loads((ROOT / "recordings" / "analysis" / f"{SEED.id}.cpu.json")
                          .read_text())
    assert analysis["timing"]["programs"]["all_reduce"]["words"] in \
        (built_site / LESSON_PAGE).read_text()


def code_text(page):
    """The text of the page's highlighted code blocks, tags and entities removed."""
    blocks = re.findall(r'<div class="highlight">(.*?)</div>', page, re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", "\n".join(blocks)))


def snippet_section(module_text, name):
    return module_text.split(f"# --8<-- [start:{name}]\n")[1].split(
        f"# --8<-- [end:{name}]")[0]


@each_lesson
def test_every_snippet_a_lesson_page_includes_is_on_it_verbatim(built_site, lesson):
    source = (ROOT / "docs" / "lessons" / f"{lesson.id}.md").read_text()
    included = re.findall(r'--8<-- "(lesson_code/[\w/]+\.py):(\w+)"', source)
    assert included, f"docs/lessons/{lesson.id}.md includes no section of lesson_code/"
    code = code_text((built_site / lesson_page(lesson)).read_text())
    for module, name in included:
        section = snippet_section((ROOT / module).read_text(), name)
        assert section.strip() in code, f"{module}:{name} is not on the page verbatim"


def test_every_code_block_comes_from_lesson_code(built_site):
    code = code_text((built_site / LESSON_PAGE).read_text())
    lesson = SEED.path().read_text()
    for name in ("configure_devices", "place_data", "local_contribution", "reduce_all",
                 "reduce_scatter", "build_programs", "verify", "measure", "momentum",
                 "make_it_yours", "transfer_budget", "run_lesson"):
        assert snippet_section(lesson, name).strip() in code, \
            f"section {name} is not on the page verbatim"
    assert "check_vma=False" not in code


@each_lesson
def test_a_stale_cpu_recording_fails_the_build(project, tmp_path, lesson):
    module = project / module_file(lesson)
    module.write_text(module.read_text() + "\nA_CHANGE_TO_THE_CODE = 1\n")
    errors = one_line_failure(build(project, tmp_path / "site"))
    assert f"{recording_name(lesson)}: stale" in errors
    assert "python scripts/record.py" in errors


@each_lesson
def test_a_comment_edit_fails_the_build_on_the_notebook_that_shows_it(project, tmp_path,
                                                                      lesson):
    module = project / module_file(lesson)
    text = module.read_text()
    start = text.index("\n", text.index("# --8<-- [start:")) + 1  # in the first section
    module.write_text(text[:start] + "# a comment readers see\n" + text[start:])
    errors = one_line_failure(build(project, tmp_path / "site"))
    assert f"docs/notebooks/{lesson.id}.ipynb: stale, {module_file(lesson)} changed" in errors
    assert recording_name(lesson) not in errors  # the code is the same


@pytest.mark.parametrize("corrupt, expected", [
    (lambda p: p.write_text("{ not json"), "not valid JSON"),
    (lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "schemaVersion": 2})),
     "invalid at schemaVersion"),
    (lambda p: p.write_text(json.dumps({k: v for k, v in json.loads(p.read_text()).items()
                                        if k != "stdout"})), "stdout"),
    # JSON Python cannot hold (issue 37): both were tracebacks.
    (lambda p: p.write_text('{"schemaVersion": ' + "9" * 5000 + "}"),
     "not valid JSON (Exceeds the limit (4300 digits)"),
    (lambda p: p.write_text("[" * 100_000 + "]" * 100_000),
     "not valid JSON (nested deeper than a JSON reader goes)"),
])
@each_lesson
def test_a_broken_recording_fails_with_one_line(project, tmp_path, corrupt, expected, lesson):
    corrupt(project / recording_name(lesson))
    errors = one_line_failure(build(project, tmp_path / "site"))
    assert recording_name(lesson) in errors and expected in errors
    assert len(errors.splitlines()) == 1



# A committed notebook that is not one: the build names it before mkdocs-jupyter or
# nbconvert could read it (they once crashed on each of these with a traceback).
BROKEN_NOTEBOOKS = {
    "truncated": lambda text: text[:len(text) // 2],
    "cells-not-a-list": lambda text: json.dumps({**json.loads(text), "cells": {"0": "x"}}),
    "numeric-source": lambda text: json.dumps({**json.loads(text), "cells": [
        {"cell_type": "code", "metadata": {}, "source": 5, "outputs": []}]}),
}


@pytest.mark.parametrize("shape", BROKEN_NOTEBOOKS)
@each_lesson
def test_a_broken_notebook_fails_the_build_with_one_line(project, tmp_path, shape, lesson):
    notebook = project / "docs" / "notebooks" / f"{lesson.id}.ipynb"
    notebook.write_text(BROKEN_NOTEBOOKS[shape](notebook.read_text()))
    errors = one_line_failure(build(project, tmp_path / "site"))
    assert len(errors.splitlines()) == 1, errors
    assert f"docs/notebooks/{lesson.id}.ipynb" in errors
    assert errors.endswith("`python scripts/record.py`"), errors


# --- nothing a pull request commits reaches outside the checkout (issue 37) ------------

@pytest.mark.parametrize("link, target", [
    ("docs/leak.txt", "/etc/hostname"),  # was published as site/leak.txt, exit 0
    ("docs/assets/g", "../../.git"),  # was the checkout's .git, its config and token too
    ("docs/assets/loop", "."),  # was a traceback
    ("docs", "elsewhere"),  # the pages' folder itself, moved beside it
    (recording_name(SEED, "tpu"), "/dev/zero"),  # was read to the end of memory
    ("lesson_code/leak.py", "/etc/hostname"),  # what a snippet could include
    ("figures/leak.svg", "/etc/hostname"),
])
def test_a_committed_symlink_stops_the_build_in_one_line_naming_it(project, tmp_path, link,
                                                                   target):
    path = project / link
    if path.is_dir():
        path.rename(project / "elsewhere")
    path.symlink_to(target)
    site = tmp_path / "site"
    errors = one_line_failure(build(project, site))
    assert len(errors.splitlines()) == 1, errors
    assert f"{link} is a symbolic link (to {target!r}); " in errors
    assert not (site / "leak.txt").exists() and not (site / "assets" / "g").exists()


def test_a_control_character_in_a_page_stops_the_build_in_one_line(project, tmp_path):
    page = project / "docs" / "index.md"
    page.write_text(page.read_text() + "\nA NUL: \x00, and U+0001: \x01.\n")
    lines = page.read_text().count("\n")
    errors = one_line_failure(build(project, tmp_path / "site"))
    assert errors.endswith(f"docs/index.md: line {lines} holds U+0000, a control character "
                           f"no page can show; remove it"), errors
    assert not (tmp_path / "site" / "index.html").exists()


@pytest.mark.parametrize("include", ['--8<-- "/etc/hostname"', '--8<-- "../../etc/hostname"',
                                     '--8<-- "lesson_code/nothing.py"',
                                     f'--8<-- "{module_file(SEED)}:no_such_section"'])
def test_a_snippet_outside_the_repository_or_missing_is_one_line_not_a_traceback(include):
    import markdown

    from scripts.pages.page_language import PageLanguage
    from scripts.pages.recorded_text import PageError

    page = markdown.Markdown(extensions=["pymdownx.snippets", PageLanguage(root=ROOT)],
                             extension_configs={"pymdownx.snippets": {
                                 "base_path": [str(ROOT)], "check_paths": True}})
    with pytest.raises(PageError) as refused:  # a BuildError: mkdocs says it in one line
        page.convert(f"Text.\n\n{include}\n")
    assert "could not be" in str(refused.value) and "\n" not in str(refused.value)
    assert "a page includes only files inside the repository" in str(refused.value)


def test_a_page_including_a_file_outside_the_repository_stops_the_build_in_one_line(
        project, tmp_path):
    page = project / "docs" / "index.md"
    page.write_text(page.read_text() + '\n--8<-- "/etc/hostname"\n')
    errors = one_line_failure(build(project, tmp_path / "site"))  # was a traceback
    assert "Snippet at path '/etc/hostname' could not be found: a page includes only " \
           "files inside the repository" in errors


def test_the_page_language_keeps_snippets_where_pymdownx_put_it():
    import markdown

    from scripts.pages.page_language import PageLanguage

    alone = markdown.Markdown(extensions=["pymdownx.snippets"])
    both = markdown.Markdown(extensions=["pymdownx.snippets", PageLanguage(root=ROOT)])
    names = [name for name in both.preprocessors._priority if name.name != "page_language"]
    assert names == alone.preprocessors._priority  # the same names at the same priorities


def test_thousands_of_problems_make_a_build_error_line_of_bounded_length(monkeypatch):
    from scripts.pages import sources
    from scripts.pages.recorded_text import PageError

    problems = [f"recordings/lesson-{n}.cpu.json: missing; run `python scripts/record.py "
                f"--lesson lesson-{n}`" for n in range(10_000)]  # 10,000 lessons, none recorded
    monkeypatch.setattr(sources, "load_lessons", lambda root: {})
    monkeypatch.setattr(sources, "load_all", lambda lessons, root: ({}, problems))
    with pytest.raises(PageError) as refused:
        sources.load_sources(ROOT, ROOT / "docs")
    line = str(refused.value)
    assert len(line) < 500 and "\n" not in line, len(line)  # was 950 kB
    assert line.startswith(problems[0]) and "and 9,997 more" in line
    assert line.endswith("`python scripts/record.py --check` lists them all")


@pytest.mark.parametrize("width", [".", "abc", "10%", ""])
def test_a_hand_edited_figure_width_stops_the_build_instead_of_sizing_it_wrong(tmp_path,
                                                                              width):
    from scripts.pages.markup import sized_image, svg_size

    figure = tmp_path / "x.svg"
    figure.write_text(f'<svg width="{width}" height="360pt" viewBox="0 0 460.8 360"></svg>')
    assert svg_size(figure) is None  # the viewBox is not what a browser then draws
    page = SimpleNamespace(url="lessons/x/", file=SimpleNamespace(src_uri="lessons/x.md"))
    files = SimpleNamespace(get_file_from_path=lambda path: SimpleNamespace(
        abs_src_path=figure))
    with pytest.raises(PluginError, match=r"^lessons/x\.md: cannot read the size of "
                       r"\.\./\.\./figures/x\.svg .*; rerun `python scripts/record\.py "
                       r"--render-only`$"):
        sized_image('<img src="../../figures/x.svg" alt="x" />', page, files)
    figure.write_text('<svg height="360pt" viewBox="0 0 460.8 360"></svg>')
    assert svg_size(figure) == (461, 480)  # no width at all: the viewBox's, as drawn


def test_a_page_asking_for_a_missing_value_fails(project, tmp_path):
    page = project / "docs" / "index.md"
    page.write_text(page.read_text() + f"\n{{{{ rec:{FIRST_LESSON.id}.cpu:data.nothing.here }}}}\n")
    errors = one_line_failure(build(project, tmp_path / "site"))
    assert "no value at 'data.nothing.here'" in errors


def test_the_site_is_named_after_the_course(built_site):
    from scripts.store.lessons import load_course

    title = load_course()["title"]
    for page in ("index.html", f"lessons/{next(iter(LESSONS))}/index.html"):
        assert re.search(rf"<title>[^<]*{re.escape(title)}</title>",
                         (built_site / page).read_text()), page


@each_lesson
def test_the_home_page_lists_each_lesson_with_its_notebook(built_site, lesson):
    home = (built_site / "index.html").read_text()
    assert f'href="lessons/{lesson.id}/"' in home
    assert f'href="notebooks/{lesson.id}/"' in home


@each_lesson
def test_each_lesson_page_offers_its_program_scaffold_and_notebook_as_downloads(built_site,
                                                                               lesson):
    from scripts.pages.course import downloadable_files

    page = (built_site / "lessons" / lesson.id / "index.html").read_text()
    downloads = page.split('id="downloads"')[1]
    notebook = f"notebooks/{lesson.id}/{lesson.id}.ipynb"
    for target in (*downloadable_files(lesson), notebook):
        assert re.search(rf'<a (download )?href="../../{re.escape(target)}"( download)?>',
                         downloads), target
        assert (built_site / target).read_bytes() == (
            ROOT / "docs" / "notebooks" / f"{lesson.id}.ipynb" if target == notebook
            else ROOT / target).read_bytes()


@each_lesson
def test_notebook_page_renders_with_download_and_no_math_script(built_site, lesson):
    page = (built_site / "notebooks" / lesson.id / "index.html").read_text()
    # Page-relative: the .ipynb sits beside the page wherever the site is published.
    assert re.search(rf'<a href="{re.escape(lesson.id)}\.ipynb"[^>]*download', page)
    assert f"PASS: {lesson.id}" in page  # outputs recorded by record.py
    scripts = re.findall(r'<script[^>]+src="([^"]+)"', page)
    assert not [s for s in scripts if s.startswith(("http:", "https:", "//"))], scripts
    # The cells are the site's own code blocks: no nbconvert CSS, no MathJax, no clipboard.
    assert "<style" not in page.split("<body")[1]
    assert "mathjax" not in page.lower() and "clipboard-copy" not in page
    code_cells = [c for c in json.loads((ROOT / "docs" / "notebooks" /
                                         f"{lesson.id}.ipynb").read_text())["cells"]
                  if c["cell_type"] == "code"]
    assert page.count('<div class="highlight">') >= len(code_cells)


def test_formulas_are_mathml_and_only_their_pages_carry_math_css(built_site):
    counted = {}
    for page in site_pages(built_site):
        text = page_file(built_site, page).read_text()
        source = markdown_source(page)
        # Every formula of the page's source is MathML: none dropped, none left as TeX.
        counted[page] = formulas_in(source) if source else 0
        assert text.count("<math ") == counted[page], page
        assert "arithmatex" not in text, page
        assert (".math-display" in text.split("</head>")[0]) == (counted[page] > 0), page
    assert counted[f"lessons/{SEED.id}/"] > 0 and counted["going-further/sweep/"] > 0
    assert counted["404.html"] == 0
    assert [counted[f"notebooks/{lesson}/"] for lesson in LESSONS] == [0] * len(LESSONS)
    lesson = (built_site / LESSON_PAGE).read_text()
    assert 'class="math-display"' in lesson
    assert not list(built_site.rglob("*mathjax*")) and not list(built_site.rglob("*katex*"))


def test_figures_are_sized_lazy_and_open_full_size(built_site):
    """Each figure is sized (no layout shift), lazy, and a link to its own SVG; a figure
    with variants is one such link per palette, each a <picture> offering the narrow
    drawing to a phone, sized too (scripts/pages/markup.py)."""
    shown = set()
    figure = re.compile(r'(<a\b[^>]*>)?(<picture><source media="[^"]+" srcset="([^"]+)" '
                        r'width="\d+" height="\d+" />)?(<img\b[^>]*>)')
    for page in site_pages(built_site):
        html = page_file(built_site, page).read_text()
        assert html.count("<picture>") == html.count("</picture></a>"), page
        for link, picture, narrow, image in figure.findall(html):
            assert re.search(r' width="\d+" height="\d+" loading="lazy"', image), image
            # A tap on a figure opens the SVG itself, full size.
            source = re.search(r'src="([^"]+)"', image).group(1)
            assert f'href="{source}"' in link, (page, image)
            shown.add(source.rsplit("/", 1)[-1])
            if picture:
                palette = "dark" if source.endswith("-dark.svg") else "light"
                assert f"figure-link--{palette}" in link, (page, link)
                assert narrow == source.replace(".svg", "-narrow.svg").replace(
                    "-dark-narrow.svg", "-narrow-dark.svg"), (page, narrow)
                shown.add(narrow.rsplit("/", 1)[-1])
    assert shown == {path.name for path in (ROOT / "figures").glob("*.svg")}


def page_texts(site):
    """Each built page's visible text, tags and entities removed, whitespace collapsed."""
    texts = {}
    for path in sorted(Path(site).rglob("*.html")):
        text = html.unescape(re.sub(r"<[^>]+>", " ", path.read_text()))
        texts[path.relative_to(site).as_posix()] = " ".join(text.split())
    return texts


def pages_saying(site, phrase):
    return [name for name, text in page_texts(site).items() if phrase in text]


NOT_YET = "not yet recorded on TPU"
RECORDED_ON_TPU = "takes --platform tpu (recorded there)"


def course_entries(site):
    """Each lesson's entry in the home page's course list, as text: {lesson id: text}."""
    home = (Path(site) / "index.html").read_text()
    return {entry[1]: " ".join(html.unescape(re.sub(r"<[^>]+>", " ", entry[0])).split())
            for entry in re.finditer(r'<li><strong><a href="lessons/([^/"]+)/">.*?</li>',
                                     home, re.DOTALL)}


def test_without_a_tpu_recording_the_site_says_so(built_site):
    # Each lesson's entry in the course list says whether that lesson was recorded on TPU.
    entries = course_entries(built_site)
    assert set(entries) == set(LESSONS)
    for lesson in LESSONS.values():
        recorded = (ROOT / recording_name(lesson, "tpu")).exists()
        assert (RECORDED_ON_TPU in entries[lesson.id]) == recorded, entries[lesson.id]
        assert NOT_YET not in entries[lesson.id] or not recorded, entries[lesson.id]
    if (ROOT / recording_name(SEED, "tpu")).exists():
        return  # the pages then speak of it: test_a_hardware_recording_gets_its_own_tab
    assert NOT_YET in entries[SEED.id]  # four chips: a TPU VM it could run on
    # The TPU page's note; the lesson page makes no TPU claim at all.
    assert pages_saying(built_site, "Not yet recorded on TPU") == \
        ["going-further/tpu/index.html"]
    assert pages_saying(built_site, "The lesson was recorded on") == []
    # Lowered versus compiled, with the CPU recording's answer and the code that reads it.
    [compiled] = pages_saying(built_site, "HLO shows what will run")
    assert "Its reduce-scatter program runs reduce_scatter (one" in \
        page_texts(built_site)[compiled]
    assert "def compiled_collectives(program, *args):" in \
        code_text((built_site / compiled).read_text())


def test_an_if_recorded_without_its_end_fails_the_build(project, tmp_path):
    page = project / "docs" / "index.md"
    page.write_text(page.read_text() + f"\n{{{{ if-recorded:{FIRST_LESSON.id}.tpu }}}} yes\n")
    errors = one_line_failure(build(project, tmp_path / "site"))
    assert "docs/index.md" in errors or "index.md" in errors
    assert "if-recorded" in errors and "{{ end }}" in errors


@pytest.mark.parametrize("stale", [False, True])
def test_a_hardware_recording_gets_its_own_tab(project, tmp_path, stale):
    from fixtures.tpu_recording_fixture import write_tpu_recording

    lesson = project / module_file(SEED)
    write_tpu_recording(project / recording_name(SEED, "tpu"), lesson, project, stale=stale)
    rederive_analyses(project)  # its analysis, as `--render-only` makes it once it lands
    run = build(project, tmp_path / "site")
    assert run.returncode == 0, run.stderr[-2000:]  # CI cannot refresh it: never fatal
    page = (tmp_path / "site" / LESSON_PAGE).read_text()
    labels = re.findall(r'<label for="__tabbed_[^"]+">([^<]+)</label>', page)
    tpu = [label for label in labels if label.startswith("TPU")]
    assert len(tpu) == 1 and "TPU v6 lite" in tpu[0] and "1 January 2000" in tpu[0]
    assert any(label.startswith("CPU") for label in labels)
    assert "Completed TPU median microseconds" in page
    warning = "Stale recording" in page
    assert warning == stale
    # The pages now speak of the recording, no longer in the conditional: the TPU page and
    # the seed's entry in the course list (another lesson's entry speaks of its own).
    site = tmp_path / "site"
    assert pages_saying(site, "Not yet recorded") == []
    entry = course_entries(site)[SEED.id]
    assert RECORDED_ON_TPU in entry and NOT_YET not in entry
    assert pages_saying(site, "The lesson was recorded on 4 × TPU v6 lite on 1 January 2000")
    if stale:
        assert module_file(SEED) in page.split("Stale recording")[1][:2000]


def test_the_downloads_offer_the_exercise_scaffold_a_learner_edits_not_the_checks():
    from scripts.pages.course import downloadable_files, downloads

    program = module_file(SEED)
    scaffold = module_file(SEED, f"{SEED.module}_exercises")
    assert SEED.exercises and downloadable_files(SEED) == [program, scaffold]
    markdown = downloads(SEED, f"lessons/{SEED.id}.md", f"lessons/{SEED.id}/", True,
                         ROOT / "docs")
    name = program.rsplit("/", 1)[1]
    assert f"[`{name}`](../{program}){{ download }}: the lesson program; it runs on its " \
           "own" in markdown
    assert f"[`{scaffold.rsplit('/', 1)[1]}`](../{scaffold}){{ download }}: the exercise " \
           f"scaffold you fill in" in markdown
    assert f"`python scripts/exercises.py --lesson {SEED.id}` checks it" in markdown
    assert module_file(SEED, SEED.exercises) not in markdown  # the checks stay home


def test_a_lesson_without_a_scaffold_offers_its_program_alone():
    from dataclasses import replace

    from scripts.pages.course import downloadable_files

    lesson = replace(SEED, module="lesson_code.ring_checks")  # no ring_checks_exercises.py
    assert not lesson.path(f"{lesson.module}_exercises").exists()
    assert downloadable_files(lesson) == [module_file(lesson)]


def test_the_recordings_table_ends_where_its_paragraph_begins(built_site):
    """The directive's table ends at its last recording: what follows it on the home page
    is not more table rows (turn 3 audit, H1)."""
    home = (built_site / "index.html").read_text()
    table_end = home.index("</table>", home.index('id="recordings-on-this-site"'))
    assert re.match(r"</table></div>\s*(<p>|</article>|<h2)", home[table_end:])
    rows = re.findall(r"<tr>", home[:table_end].split('id="recordings-on-this-site"')[1])
    executed = [path for lesson in LESSONS.values()
                for path in (ROOT / "recordings").glob(f"{lesson.id}.*.json")
                if json.loads(path.read_text()).get("kind") == "executed"]
    assert len(rows) == 1 + len(executed)  # the header row, then one per recording


@each_lesson
def test_labels_are_written_for_people(built_site, lesson):
    page = (built_site / lesson_page(lesson)).read_text()
    devices = f"CPU · {lesson.devices} devices · "
    assert devices + "cpu" not in page and devices in page


def test_dates_are_written_for_people(built_site):
    # The seed page's sentence on where its numbers come from dates its recording.
    page = (built_site / LESSON_PAGE).read_text()
    assert re.search(r"recording made on\s+\d{1,2} [A-Z][a-z]+ \d{4} with JAX", page)
    # No page prints a recording's timestamp as it is stored (2026-12-01T18:58:07+00:00):
    # not a provenance line, not a sentence (the turn 4 audit's D22).
    stamped = {name: re.findall(r"\d{4}-\d\d-\d\dT\d\d:\d\d[^<\s]*", text)
               for name, text in page_texts(built_site).items()}
    assert {name: found for name, found in stamped.items() if found} == {}


def test_names_defined_in_code_are_searchable_and_api_names_link_out(built_site):
    """Code stays out of the search index, so each block that defines something says so
    in a line the index keeps; inline API names link to the JAX reference, code blocks
    and headings never do."""
    index = json.loads((built_site / "search" / "search_index.json").read_text())
    text = " ".join(doc["text"] for doc in index["docs"])
    for name in ("completed_samples", "ring_reduce_scatter", "make_problem"):
        assert name in text, name
    page = (built_site / LESSON_PAGE).read_text()
    assert re.search(r'<a href="https://docs\.jax\.dev/[^"]*psum_scatter\.html" '
                     r'class="api-link"><code>psum_scatter', page)
    for block in re.findall(r"<pre\b.*?</pre>|<h[1-6]\b.*?</h[1-6]>", page, re.S):
        assert "api-link" not in block


def test_every_table_header_has_words(built_site):
    """A header cell holding only a formula is named in words for screen readers (axe's
    empty-table-header counts no MathML as text): the formula hidden, its symbols as text."""
    from scripts.pages.layout import text_of

    named = 0
    for path in site_pages(built_site):
        for cell in re.findall(r"<th\b[^>]*>(.*?)</th>", page_file(built_site, path)
                               .read_text(), re.S):
            visible = re.sub(r"<math\b.*?</math>", "", cell, flags=re.S)
            assert text_of(visible).strip(), (path, cell[:80])
            if "<math" in cell and 'class="sr-only"' in cell:
                assert '<math aria-hidden="true"' in cell
                named += 1
            if '<math aria-hidden="true"' in cell:  # hidden only where words replace it
                assert cell.count('class="sr-only"') == cell.count("<math"), cell
    assert named > 0


def test_the_themes_built_files_are_the_theme_packages_own(built_site):
    """What mkdocs-material ships reaches the site byte for byte: every file under
    assets/javascripts/ and assets/stylesheets/ is the installed package's copy, so a
    theme upgrade is a pin bump. What the site changes, it changes through the theme's
    own doors (docs/overrides/, extra_css, extra_javascript, feature flags)."""
    import material

    theme = Path(material.__file__).parent / "templates" / "assets"
    built = [path for folder in ("javascripts", "stylesheets")
             for path in sorted((built_site / "assets" / folder).rglob("*")) if path.is_file()]
    assert any(path.name.startswith("bundle.") for path in built)
    shipped = {path: theme / path.relative_to(built_site / "assets") for path in built}
    # The site's own scripts and styles sit beside these folders (assets/*.js, *.css).
    differ = [path.relative_to(built_site).as_posix() for path, theirs in shipped.items()
              if not theirs.is_file() or path.read_bytes() != theirs.read_bytes()]
    assert differ == []
    # main.html's head script: the js and js-focus-visible classes are set before any
    # style is computed, so the theme's start-up does not change them again.
    for page in site_pages(built_site):
        head = page_file(built_site, page).read_text().split("</head>")[0]
        assert 'classList.replace("no-js","js")' in head, page
        assert 'classList.add("js-focus-visible")' in head, page
    # A page whose bundle never runs keeps its focus rings only while no stylesheet hides
    # focus under that class.
    for css in built_site.rglob("*.css"):
        assert "js-focus-visible" not in css.read_text(), css


# --- recordings and notebooks with hostile text (tests/site_hostile.py) -------------------

def test_the_tpu_command_from_the_issue_stops_the_build(tmp_path, project):
    """Issue 15: a backtick, an img tag with onerror, a backtick in `command` was
    published; now the build refuses the recording in one line, and so does --check."""
    from fixtures.tpu_recording_fixture import write_tpu_recording

    path = write_tpu_recording(project / recording_name(SEED, "tpu"),
                               project / module_file(SEED), project)
    recording = json.loads(path.read_text())
    recording["command"] = ["python", '`<img src=x onerror="alert(1)">`']
    path.write_text(json.dumps(recording))
    run = build(project, tmp_path / "site")
    errors = [line for line in run.stderr.splitlines() if line.startswith("ERROR")]
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert len(errors) == 1
    assert recording_name(SEED, "tpu") in errors[0] and "command/1" in errors[0]
    assert not (tmp_path / "site" / LESSON_PAGE).exists()
    from scripts.store.freshness import check
    from scripts.store.lessons import load_lessons

    assert any(line.startswith(f"{project}/{recording_name(SEED, 'tpu')}: invalid at "
                               f"command/1") for line in check(load_lessons(project), project))


def site_files(site):
    return [path for path in site.rglob("*") if path.suffix in (".html", ".json", ".xml")]


def test_no_included_file_and_no_leftover_marker_anywhere_in_the_site(hostile_site):
    from site_hostile import CANARY

    for path in site_files(hostile_site):
        text = path.read_text()
        assert CANARY not in text, f"{path.name} published .git/config"
        assert not re.search(r"RECVAL[0-9A-F]{12}N\d+END", text, re.IGNORECASE), path.name


def test_hostile_text_is_escaped_text_not_markup(hostile_site):
    from site_hostile import ID, LESSON, Attributes

    for page in hostile_site.rglob("*.html"):
        parser = Attributes()
        parser.feed(page.read_text())
        for tag, name, value in parser.attributes:
            assert not value.strip().lower().startswith("javascript:"), (page, tag, name)
            assert not (name.startswith("on") and "XSS" in value), (page, tag, name)
            assert not (tag == "img" and name == "src" and value in ("x", "y")), page
        assert not [script for script in parser.scripts if "XSS" in script], page
    lesson = (hostile_site / LESSON).read_text()
    # Shown, as text: the payloads are on the page, escaped, and nothing expanded them.
    assert "&lt;script&gt;console.error(&quot;XSS script&quot;)" in lesson
    assert "[x](javascript:alert(&quot;XSS link&quot;))" in lesson
    assert "{{ rec:" + ID + ".cpu:environment.jax }}" in lesson
    assert "--8&lt;-- &quot;.git/config&quot;" in lesson
    # The notebook's page too: its cells, outputs and traceback, and its formulas' text.
    notebook = (hostile_site / "notebooks" / ID / "index.html").read_text()
    assert "&lt;script&gt;console.error" in notebook and "<mtext>&lt;img" in notebook


def test_recorded_json_stays_inside_its_script_element_as_data(hostile_site):
    """The step-through's trace is recorded data inside <script type="application/json">:
    a `</script>` or `<!--` in it cannot end or bend the element, and JSON.parse (here
    json.loads, the same grammar) gives back exactly what was recorded."""
    from site_hostile import Attributes

    recorded = json.loads((hostile_site.parent / "project" /
                           recording_name(SEED, "simulation")).read_text())["data"]
    parser = Attributes()
    parser.feed((hostile_site / "going-further" / "ring-simulator" / "index.html").read_text())
    trace = [text for text in parser.json_scripts if '"readerNote"' in text]
    assert len(trace) == 1
    assert not set("<>&") & set(trace[0])
    assert json.loads(trace[0]) == recorded
    assert ("script", "id", "ring-trace") in parser.attributes


def test_recorded_text_in_a_heading_a_table_and_the_toc_is_text(hostile_site):
    from site_hostile import ID, LESSON

    lesson = (hostile_site / LESSON).read_text()
    heading = re.search(r'<h2 id="([^"]*)">Scope: (.*?)<a class="headerlink"', lesson, re.DOTALL)
    assert heading and heading[1].startswith("scope-"), "the heading lost its anchor"
    assert re.fullmatch(r"[\w-]+", heading[1])
    assert "&lt;script&gt;" in heading[2] and "<script>" not in heading[2]
    toc = re.search(r'<a href="#' + heading[1] + r'" class="md-nav__link">(.*?)</a>',
                    lesson, re.DOTALL)
    assert toc and "&lt;script&gt;" in toc[1] and "<img" not in toc[1]
    cell = re.search(r"<td>label 1</td>\s*<td>(.*?)</td>", lesson, re.DOTALL)
    assert cell and "&lt;img src=x onerror=" in cell[1]
    code = re.search(r"<td>code</td>\s*<td><code>(.*?)</code></td>", lesson, re.DOTALL)
    assert code and "&lt;svg onload=" in code[1]
    alts = re.findall(r'<img alt="([^"]*)" src="../../figures/' + re.escape(ID) + r'\.svg"',
                      lesson)
    assert "![x](y&quot; onerror=" in alts[-1]


def test_the_stale_tpu_tab_shows_its_hostile_text_as_text(hostile_site):
    from site_hostile import LESSON

    lesson = (hostile_site / LESSON).read_text()
    assert "Stale recording" in lesson
    # The CPU tab, the stale TPU tab and the table cell each show it as text.
    assert lesson.count("&lt;img src=x onerror=alert(&quot;XSS img&quot;)&gt;") >= 3


def test_the_search_index_holds_escaped_text_and_no_included_file(hostile_site):
    from site_hostile import CANARY

    index = (hostile_site / "search" / "search_index.json").read_text()
    text = " ".join(doc["text"] + doc["title"] for doc in json.loads(index)["docs"])
    assert "&lt;script&gt;console.error" in text
    assert "<script>" not in text and "<img src=x" not in text and CANARY not in text


# what the build is handed: SITE_URL, the link checker, sizes, the locale --------------------

@pytest.mark.parametrize("url", ['http://x/"><script>alert(1)</script>',
                                 "javascript:alert(1)//", "http://x/'onmouseover='alert(1)",
                                 "http://x/<b>", "ftp://example.com/", "http://x y/",
                                 "http://x/\n<script>", "//example.com/"])
def test_a_hostile_site_url_stops_the_build_in_one_line(url, monkeypatch):
    from scripts.pages import hooks

    monkeypatch.setenv("SITE_URL", url)
    try:
        config = load_config(str(ROOT / "mkdocs.yml"))
    except Abort:  # mkdocs' own URL check refused it (javascript:, no host): stopped there
        return
    with pytest.raises(PluginError) as refused:
        hooks.on_config(config)
    assert "\n" not in str(refused.value) and "set SITE_URL" in str(refused.value)


@pytest.mark.parametrize("url", ["https://owner.github.io/my_repo.v2/", "http://127.0.0.1:8000/",
                                 "https://Example.org/a%20b/"])
def test_an_ordinary_site_url_passes(url, monkeypatch):
    from scripts.pages import hooks

    monkeypatch.setenv("SITE_URL", url)
    hooks.check_site_url(load_config(str(ROOT / "mkdocs.yml")))


def site_with(tmp_path, body, files=()):
    site = tmp_path / "site"
    (site / "a").mkdir(parents=True)
    (site / "ok.png").write_bytes(b"png")
    (tmp_path / "outside.html").write_text("<p>not part of the site</p>")
    (site / "a" / "index.html").write_text(f"<!doctype html><html><body>{body}</body></html>")
    for name, text in files:
        (site / name).write_text(text)
    from scripts.pages.check_links import broken_links
    return broken_links(site)[0]


@pytest.mark.parametrize("body, words", [
    ('<a href="javascript:alert(1)">x</a>', "runs script"),
    ('<a href="JaVa&#9;ScRiPt:alert(1)">x</a>', "runs script"),
    ('<img src="../ok.png" srcset="../ok.png 1x, https://cdn.example/x.png 2x">',
     "loads https://cdn.example/x.png"),
    ('<picture><source srcset="https://cdn.example/a.webp"></picture>', "loads https://cdn"),
    ('<video src="../ok.png" poster="https://cdn.example/p.jpg"></video>', "loads https://cdn"),
    ('<audio src="https://cdn.example/a.mp3"></audio>', "loads https://cdn"),
    ('<video><track src="https://cdn.example/t.vtt"></video>', "loads https://cdn"),
    ('<svg><image href="https://cdn.example/i.png"/></svg>', "loads https://cdn"),
    ('<svg><use xlink:href="https://cdn.example/s.svg#i"/></svg>', "loads https://cdn"),
    ('<svg><a href="../missing.html">x</a></svg>', "missing file"),
    ('<div style="background:url(https://cdn.example/bg.png)">x</div>', "loads https://cdn"),
    ('<style>@import "https://cdn.example/x.css";</style>', "loads https://cdn"),
    ("<style>p{background:url('//cdn.example/x.png')}</style>", "loads //cdn"),
    ('<meta http-equiv="refresh" content="0; url=https://evil.example/">', "redirects out"),
    ('<meta http-equiv="Refresh" content="0;URL=\'../missing/\'">', "missing file"),
    ('<base href="https://evil.example/">', "moves every relative link"),
    ('<a href="../%2e%2e/outside.html">x</a>', "points outside the site"),
    ('<img src="..%2F..%2Foutside.html">', "points outside the site"),
    ('<iframe src="data:text/html,<script>alert(1)</script>"></iframe>', "data: address"),
    ('<embed src="https://cdn.example/x.swf">', "loads https://cdn"),
    ('<form action="vbscript:x"></form>', "runs script"),
    ('<a href="file:///etc/passwd">x</a>', "scheme (file:)"),
    ('<a href="/ok.png">x</a>', "root-absolute"),  # breaks under a sub-path
])
def test_the_link_checker_sees_every_kind_of_link_and_load(tmp_path, body, words):
    problems = site_with(tmp_path, body)
    assert any(words in line for line in problems), problems


def test_the_link_checker_reads_stylesheets_and_figures(tmp_path):
    problems = site_with(tmp_path, '<img src="../ok.png">', files=[
        ("style.css", "@import url(https://cdn.example/font.css); a{b:url(missing.woff2)}"),
        ("figure.svg", '<svg xmlns="http://www.w3.org/2000/svg"><use href="#nowhere"/>'
                       '<image href="https://cdn.example/x.png"/><path id="p"/>'
                       '<use href="#p"/></svg>')])
    assert sorted(problems) == sorted([
        "style.css: loads https://cdn.example/font.css from outside the site",
        "style.css: css url='missing.woff2' points at a missing file",
        "figure.svg: '#nowhere' has no anchor #nowhere",
        "figure.svg: loads https://cdn.example/x.png from outside the site"])


def test_the_link_checker_still_passes_an_ordinary_page(tmp_path):
    assert site_with(tmp_path, '<a href="../ok.png">x</a>'
                     '<img src="../ok.png" srcset="../ok.png 2x">'
                     '<a href="https://jax.readthedocs.io/">docs</a><a href="mailto:a@b.c">m</a>'
                     '<link rel="canonical" href="https://x.example/a/">'
                     '<div style="mask:url(&quot;data:image/svg+xml,x&quot;)"></div>') == []


@pytest.mark.parametrize("width, height, view_box", [("abc", "5", "0 0 x y"), ("nan", "5", ""),
                                                     ("10%", "5", ""), ("0", "0", ""),
                                                     ("", "", "0 0 1e9 5"), ("", "", "")])
def test_an_svg_whose_size_is_not_a_number_has_no_size(tmp_path, width, height, view_box):
    from scripts.pages.markup import svg_size

    path = tmp_path / "x.svg"
    path.write_text(f'<svg width="{width}" height="{height}" viewBox="{view_box}"></svg>')
    assert svg_size(path) is None  # sized_image then stops the build in one line


def test_the_build_reads_utf_8_in_an_ascii_locale(project, tmp_path):
    run = build(project, tmp_path / "site", environment={
        "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"})
    assert run.returncode == 0 and "codec" not in run.stderr, run.stderr[-2000:]
    assert "·" in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
