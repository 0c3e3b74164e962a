"""A copy of the project whose recordings and notebook carry hostile text (a recording may
come from a VM, a pull request or a hand edit): script, Markdown link, image, snippet and
template payloads in every free text, built into a site that must show all of it as text
(tests/test_site.py reads its HTML, tests/test_browser.py runs it in chromium)."""
import json
from html.parser import HTMLParser

from conftest import FIXTURES, SEED, module_file, recording_name, rederive_analyses
from harness import git, passed, project as project_copy

# The hostile recordings are the seed lesson's: its panels carry the labels, its ring trace
# the note, its TPU recording (tests/fixtures/tpu_recording.fixture.json) the stale tab.
ID = SEED.id
MODULE = module_file(SEED)
LESSON = f"lessons/{ID}/index.html"
CANARY = "CANARY-TOKEN-5be1c0d3"  # stands in for the checkout token in .git/config
# Each payload is one line (LESSON: the seed's id); stdout and the prose fields carry all of
# them, line by line. For the notebook also raw HTML, markup in a formula's text and attribute
# lists; not \href, which Temml refuses there, stopping the build in one line (test_math.py).
HOSTILE = json.loads((FIXTURES / "hostile_payloads.json").read_text().replace("LESSON", ID))
PAYLOADS = HOSTILE["payloads"]
HOSTILE_TEXT = "\n".join(PAYLOADS)
NOTEBOOK_PAYLOADS = [payload for payload in PAYLOADS if "\\href" not in payload] + \
    HOSTILE["notebookOnly"]


def hostile_project(destination):
    """The project, every payload in each recording's free text, a stale TPU recording, and
    a page putting recorded text in a heading, a table cell, an image's alt text and code."""
    from fixtures.tpu_recording_fixture import write_tpu_recording

    # The seed's pages show recorded text, as every lesson's do.
    project = project_copy(destination, keep=[SEED.id])
    git(project, "init", "-q")  # a checkout's repository, its token in .git/config
    with (project / ".git" / "config").open("a") as config:
        config.write(f'[remote "origin"]\n\turl = https://x-access-token:{CANARY}@github.com/x/y\n')
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
    compiled = project / recording_name(SEED, "tpu-compiled")  # compiled from older code
    recording = json.loads(compiled.read_text())
    sweep = next(name for name in recording["contentFiles"] if name.endswith("_tpu_sweep.py"))
    recording["contentFiles"][sweep] = "0" * 64
    compiled.write_text(json.dumps(recording, indent=2))
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


def hostile_notebook(path):
    """Every payload in a Markdown cell, a code cell's source, its output and a traceback."""
    notebook = json.loads(path.read_text())
    notebook["cells"][1:1] = [
        {"cell_type": "markdown", "metadata": {}, "source": "\n\n".join(NOTEBOOK_PAYLOADS)},
        {"cell_type": "code", "metadata": {}, "execution_count": 1, "source": HOSTILE_TEXT,
         "outputs": [{"output_type": "stream", "name": "stdout", "text": HOSTILE_TEXT},
                     {"output_type": "error", "ename": "E", "evalue": "XSS",
                      "traceback": PAYLOADS}]}]
    path.write_text(json.dumps(notebook))


def build_hostile_site(folder):
    """The hostile project at folder/project, built strictly into folder/site."""
    from site_build import build

    passed(build(hostile_project(folder / "project"), folder / "site"))
    return folder / "site"


class Attributes(HTMLParser):
    """Every (tag, attribute, value) and the text of every script element in a page."""

    def __init__(self, page):
        super().__init__()
        self.attributes, self.scripts, self.json_scripts = [], [], []
        self.in_script = None  # None, "code" or "json": which script element we are in
        self.feed(page)

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
