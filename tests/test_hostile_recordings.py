"""Recordings are untrusted input: hostile ones are refused, or shown as inert text.

A recording can come from a VM, a pull request or a hand edit. Fields with a format
(command, device kind, versions, file names, dates) refuse anything outside it, in one
line naming the file and the field. Free text (stdout, the figure data's labels) is built into
a site here carrying script, Markdown link, image, snippet and template payloads; the
HTML, the search index and chromium must show it as text: no script runs, no
`javascript:` URL exists, and no file is pulled into the page.
"""
import json
import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from scripts.recordings import RecordingError, load_recording
from conftest import ROOT, SEED, module_file, recording_name, rederive_analyses
from conftest import project_copy as copy_project
from site_build import build
import test_browser

# The hostile recordings are the seed lesson's: its panels carry the labels, its ring trace
# the note, its TPU recording (tests/fixtures/tpu_recording.fixture.json) the stale tab.
ID = SEED.id
MODULE = module_file(SEED)
CANARY = "CANARY-TOKEN-5be1c0d3"  # stands in for the checkout token in .git/config
# Each payload is one line; stdout and the prose fields carry all of them, line by line.
PAYLOADS = [
    '<script>console.error("XSS script"); alert("XSS script")</script>',
    '<img src=x onerror=alert("XSS img")>',
    '<svg onload=alert("XSS svg")></svg>',
    '"><script>alert("XSS attribute")</script>',
    '[x](javascript:alert("XSS link"))',
    '<a href="javascript:alert(\'XSS anchor\')">click</a>',
    '![x](y" onerror="alert(\'XSS image\'))',
    '] (javascript:alert("XSS bracket")) [',
    '` <img src=x onerror=alert("XSS code")> `',
    '\\(\\href{javascript:alert("XSS tex")}{x}\\)',
    '--8<-- ".git/config"',
    '{{ rec:' + ID + '.cpu:environment.jax }}',
    '{{ recordings:' + ID + ' }}',
    '{% include ".git/config" %}',
    'RECVAL0N0END',
]
HOSTILE_TEXT = "\n".join(PAYLOADS)
LESSON = f"lessons/{ID}/index.html"


# --------------------------------------------------------- refused by the schema --

def write(tmp_path, recording):
    path = tmp_path / f"{ID}.tpu.json"
    path.write_text(json.dumps(recording))
    return path


def tpu_recording():
    return json.loads((ROOT / "tests" / "fixtures" / "tpu_recording.fixture.json").read_text())


def set_field(recording, field, value):
    *parents, last = [int(part) if part.isdigit() else part for part in field.split("/")]
    for part in parents:
        recording = recording[part]
    recording[last] = value


FORMATTED_FIELDS = ["command/1", "environment/deviceKind", "environment/jax",
                    "environment/numpy", "environment/python", "environment/platform",
                    "generatedAt", "provenance", "lessonId"]


@pytest.mark.parametrize("field", FORMATTED_FIELDS)
# The forged marker is a valid device kind or command word; it is shown as text below.
@pytest.mark.parametrize("payload", [p for p in PAYLOADS if not p.startswith("RECVAL")]
                         + ["ok\n", "x" * 300])
def test_a_formatted_field_refuses_hostile_text(tmp_path, field, payload):
    recording = tpu_recording()
    set_field(recording, field, payload)
    with pytest.raises(RecordingError) as refused:
        load_recording(write(tmp_path, recording))
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(str(tmp_path / f"{ID}.tpu.json"))
    assert f"invalid at {field}" in message


@pytest.mark.parametrize("name", ["../.git/config", "/etc/passwd", "lesson_code/../../x.py",
                                  "./lesson_code/x.py", "lesson_code\\x.py",
                                  "`<img src=x onerror=alert(1)>`",
                                  "[x](javascript:alert(1)).py", "lesson_code/x.py\n"])
def test_a_content_file_name_must_be_a_plain_relative_path(tmp_path, name):
    recording = tpu_recording()
    recording["contentFiles"] = {name: "0" * 64}
    with pytest.raises(RecordingError, match=r"invalid at contentFiles: .* does not match"):
        load_recording(write(tmp_path, recording))


def test_the_formatted_fields_still_take_real_values(tmp_path):
    recording = tpu_recording()
    recording["environment"].update(deviceKind="NVIDIA H100 80GB HBM3",
                                    platform="macOS-14.5-arm64-arm-64bit",
                                    jax="0.10.2.dev20261101+cuda")
    recording["command"] = ["python", "scripts/tpu_job.py", "--zone=us-east5-b",
                            "--name", "tpu-1"]
    recording["contentFiles"] = {MODULE: "0" * 64,
                                 "constraints.txt": "1" * 64}
    assert load_recording(write(tmp_path, recording))["command"][2] == "--zone=us-east5-b"


def test_the_tpu_command_from_the_issue_stops_the_build(tmp_path):
    """Issue 15: a backtick, an img tag with onerror, a backtick in `command` was
    published; now the build refuses the recording in one line."""
    from fixtures.tpu_recording_fixture import write_tpu_recording

    project = copy_project(tmp_path / "project")
    path = write_tpu_recording(project / recording_name(SEED, "tpu"), project / MODULE,
                               project)
    recording = json.loads(path.read_text())
    recording["command"] = ["python", '`<img src=x onerror="alert(1)">`']
    path.write_text(json.dumps(recording))
    run = build(project, tmp_path / "site")
    errors = [line for line in run.stderr.splitlines() if line.startswith("ERROR")]
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert len(errors) == 1
    assert recording_name(SEED, "tpu") in errors[0] and "command/1" in errors[0]
    assert not (tmp_path / "site" / LESSON).exists()
    check = subprocess.run([sys.executable, "scripts/record.py", "--check"], cwd=project,
                           capture_output=True, text=True, timeout=300)
    assert check.returncode != 0 and "Traceback" not in check.stderr
    assert re.search(re.escape(recording_name(SEED, "tpu")) + ": invalid at command/1",
                     check.stdout + check.stderr)


# ------------------------------------------------ free text, built into a site --

def hostile_project(destination):
    """A copy of the project whose recordings carry every payload in every free-text
    field, a stale TPU recording beside the CPU one, and a page that puts recorded text
    in a heading, a table cell, an image's alt text and code."""
    from fixtures.tpu_recording_fixture import write_tpu_recording

    project = copy_project(destination)
    (project / ".git").mkdir()
    (project / ".git" / "config").write_text(
        f'[remote "origin"]\n\turl = https://x-access-token:{CANARY}@github.com/x/y\n')
    cpu = project / recording_name(SEED)
    tpu = write_tpu_recording(project / recording_name(SEED, "tpu"), project / MODULE, project,
                              stale=True, environment={"deviceKind": "TPU v6 lite (x+y)"})
    for path in (cpu, tpu):
        recording = json.loads(path.read_text())
        recording["stdout"] = HOSTILE_TEXT + "\n" + recording["stdout"]
        panel = recording["data"]["panels"][0]  # the bar chart's labels: free text
        panel["labels"] = list(PAYLOADS)
        panel["ylabel"], panel["series"][0]["label"] = PAYLOADS[0], PAYLOADS[6]
        path.write_text(json.dumps(recording, indent=2))
    # The ring step-through's trace reaches its page as JSON in a script element.
    simulation = project / recording_name(SEED, "simulation")
    recording = json.loads(simulation.read_text())
    recording["data"]["readerNote"] = [*PAYLOADS, HOSTILE_TEXT, "</SCRIPT >", "<!--"]
    simulation.write_text(json.dumps(recording, indent=2))
    hostile_notebook(project / "docs" / "notebooks" / f"{ID}.ipynb")
    rederive_analyses(project)  # the build refuses an analysis older than its recording
    page = project / "docs" / "lessons" / f"{ID}.md"
    cells = "".join(f"| label {i} | {{{{ rec:{ID}.cpu:data.panels.0.labels.{i} }}}} |\n"
                    for i in range(len(PAYLOADS)))
    page.write_text(page.read_text()
                    + f"\n\n## Scope: {{{{ rec:{ID}.cpu:data.panels.0.ylabel }}}}\n\n"
                    + "| field | recorded |\n|---|---|\n" + cells
                    + f"| code | `{{{{ rec:{ID}.tpu:data.panels.0.labels.2 }}}}` |\n\n"
                    + f"![{{{{ rec:{ID}.tpu:data.panels.0.series.0.label }}}}]"
                    + f"(../figures/{ID}.svg)\n")
    return project


# A notebook can be changed by the same pull request that updates its lock entry, so the
# build treats it as it treats a recording. Beside the payloads above: raw HTML blocks,
# markup in a formula's text, and attribute lists. A formula with \href is not among them:
# in a notebook it is a formula, which Temml refuses, stopping the build in one line
# (tests/test_math.py); in recorded prose it stays text.
NOTEBOOK_PAYLOADS = [payload for payload in PAYLOADS if "\\href" not in payload] + [
    '<div onclick="alert(\'XSS div\')">\n\nraw block\n\n</div>',
    '$\\text{<img src=x onerror=alert("XSS mtext")>}$',
    'styled {: onclick="alert(\'XSS attr\')" }',
    '<iframe src="javascript:alert(\'XSS iframe\')"></iframe>',
]


def hostile_notebook(path):
    """The executed notebook with every payload in a Markdown cell, a code cell's source,
    its printed output and an error's traceback."""
    notebook = json.loads(path.read_text())
    notebook["cells"][1:1] = [
        {"cell_type": "markdown", "metadata": {}, "source": "\n\n".join(NOTEBOOK_PAYLOADS)},
        {"cell_type": "code", "metadata": {}, "execution_count": 1, "source": HOSTILE_TEXT,
         "outputs": [{"output_type": "stream", "name": "stdout", "text": HOSTILE_TEXT},
                     {"output_type": "error", "ename": "E", "evalue": "XSS",
                      "traceback": PAYLOADS}]}]
    path.write_text(json.dumps(notebook))


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    project = hostile_project(base / "project")
    run = build(project, base / "site")
    assert run.returncode == 0, run.stderr[-3000:]
    return base / "site"


class Attributes(HTMLParser):
    """Every (tag, attribute, value) and the text of every script element in a page."""

    def __init__(self):
        super().__init__()
        self.attributes, self.scripts, self.json_scripts = [], [], []
        self.in_script = None  # None, "code" or "json": which script element we are in

    def handle_starttag(self, tag, attrs):
        self.attributes += [(tag, name, value or "") for name, value in attrs]
        if tag == "script":
            self.in_script = "json" if ("type", "application/json") in attrs else "code"
            (self.json_scripts if self.in_script == "json" else self.scripts).append("")

    def handle_endtag(self, tag):
        self.in_script = None

    def handle_data(self, data):
        if self.in_script:
            (self.json_scripts if self.in_script == "json" else self.scripts)[-1] += data


def site_files(site):
    return [path for path in site.rglob("*") if path.suffix in (".html", ".json", ".xml")]


def test_no_included_file_and_no_leftover_marker_anywhere_in_the_site(hostile_site):
    for path in site_files(hostile_site):
        text = path.read_text()
        assert CANARY not in text, f"{path.name} published .git/config"
        assert not re.search(r"RECVAL[0-9A-F]{12}N\d+END", text, re.IGNORECASE), path.name


def test_hostile_text_is_escaped_text_not_markup(hostile_site):
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


def test_recorded_json_stays_inside_its_script_element_as_data(hostile_site):
    """The step-through's trace is recorded data inside <script type="application/json">:
    a `</script>` or `<!--` in it cannot end or bend the element, and JSON.parse (here
    json.loads, the same grammar) gives back exactly what was recorded."""
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
    lesson = (hostile_site / LESSON).read_text()
    assert "Stale recording" in lesson
    # The CPU tab, the stale TPU tab and the table cell each show it as text.
    assert lesson.count("&lt;img src=x onerror=alert(&quot;XSS img&quot;)&gt;") >= 3


def test_the_search_index_holds_escaped_text_and_no_included_file(hostile_site):
    index = (hostile_site / "search" / "search_index.json").read_text()
    text = " ".join(doc["text"] + doc["title"] for doc in json.loads(index)["docs"])
    assert "&lt;script&gt;console.error" in text
    assert "<script>" not in text and "<img src=x" not in text and CANARY not in text


# ----------------------------------------------------------------- in chromium --

# test_browser.py's chromium and its quiet static server, as this module's fixtures.
playwright, browser, serve = test_browser.playwright, test_browser.browser, test_browser.serve


@pytest.fixture(scope="module")
def served(hostile_site, serve):
    return serve(hostile_site)


def watch_for_execution(page, problems):
    """Anything a payload would do if it ran: a dialog, a console line, a request."""
    def on_dialog(dialog):
        problems.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("console", lambda m: "XSS" in m.text and problems.append(f"console: {m.text}"))
    page.on("request", lambda r: (r.url.lower().startswith("javascript:")
                                  or re.search(r"/(x|y)(\?|$)", r.url))
            and problems.append(f"request: {r.url}"))


LIVE_MARKUP = """() => [...document.querySelectorAll('*')].flatMap(el => [...el.attributes]
    .filter(a => /^\\s*javascript:/i.test(a.value)
                 || (a.name.startsWith('on') && /XSS/.test(a.value)))
    .map(a => `${el.tagName} ${a.name}=${a.value}`))"""


def test_the_hostile_notebook_page_is_text(hostile_site):
    notebook = (hostile_site / "notebooks" / ID / "index.html").read_text()
    assert CANARY not in notebook
    assert "&lt;script&gt;console.error" in notebook and "<mtext>&lt;img" in notebook
    parser = Attributes()
    parser.feed(notebook)
    assert not [(tag, name) for tag, name, value in parser.attributes
                if name.startswith("on") or value.strip().lower().startswith("javascript:")]
    assert not [script for script in parser.scripts if "XSS" in script]


@pytest.mark.parametrize("site_url", ['https://x.example/"><script>alert("XSS url")</script>/',
                                      "https://x.example/'onload='alert(1)'/"])
def test_a_hostile_site_url_stops_the_build_and_writes_no_page(tmp_path, site_url):
    run = build(ROOT, tmp_path / "site", environment={"SITE_URL": site_url})
    errors = [line for line in run.stderr.splitlines() if line.startswith("ERROR")]
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert len(errors) == 1 and "set SITE_URL" in errors[0]
    assert not list((tmp_path / "site").rglob("*.html"))


def test_the_hostile_notebook_stays_inert_in_chromium(browser, served):
    problems = []
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    watch_for_execution(page, problems)
    page.goto(f"{served}/notebooks/{ID}/", wait_until="networkidle")
    page.wait_for_timeout(500)
    assert page.evaluate(LIVE_MARKUP) == []
    shown = page.inner_text("article")
    assert '<script>console.error("XSS script"); alert("XSS script")</script>' in shown
    assert '--8<-- ".git/config"' in shown and CANARY not in shown
    assert page.locator("article iframe, article script").count() == 0
    assert problems == []
    page.close()


def test_hostile_pages_stay_inert_in_chromium(browser, served):
    problems = []
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    watch_for_execution(page, problems)
    page.goto(f"{served}/lessons/{ID}/", wait_until="networkidle")
    # The formulas are MathML from the build: nothing typesets the page (or the TeX
    # payload) in the browser, so there is nothing to wait for.
    assert page.locator("article math").count() > 0
    assert page.evaluate("typeof window.MathJax") == "undefined"
    for label in page.locator(".tabbed-labels label").all():  # every recording's tab
        label.click()
    page.wait_for_timeout(500)
    assert page.evaluate(LIVE_MARKUP) == []
    shown = page.inner_text("article")
    assert '<script>console.error("XSS script"); alert("XSS script")</script>' in shown
    assert '--8<-- ".git/config"' in shown and CANARY not in shown
    # The search box renders results from the index: they must stay text too.
    search = page.locator("input.md-search__input")
    search.click()
    page.keyboard.type("onerror")  # Material searches on key presses, not on fill()
    page.wait_for_selector(".md-search-result__item", state="attached", timeout=20000)
    page.wait_for_timeout(500)
    assert "XSS" in page.inner_text(".md-search-result")
    assert page.evaluate(LIVE_MARKUP) == []
    # The ring step-through parses the hostile trace as data and draws its steps.
    page.goto(f"{served}/going-further/ring-simulator/", wait_until="networkidle")
    assert page.locator(".ring-stepper__rank").count() == 4
    assert page.evaluate("JSON.parse(document.getElementById('ring-trace').textContent)"
                         ".readerNote.includes('</SCRIPT >')")
    assert page.evaluate(LIVE_MARKUP) == []
    # The home page's table of recordings, the stale TPU one among them.
    page.goto(f"{served}/", wait_until="networkidle")
    article = page.inner_text("article")
    assert "stale: " in article and MODULE in article
    assert page.evaluate(LIVE_MARKUP) == []
    assert problems == []
    page.close()
