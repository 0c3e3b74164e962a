"""Page directives ({{ rec:... }}, {{ recordings:... }}) that cannot be resolved stop the
build with one line naming the page and the directive, never publish verbatim."""
import re

import pytest

from conftest import FIRST_LESSON
from conftest import project_copy as copy_project
from site_build import build


def of_a_lesson(markdown):
    """`markdown` with LESSON standing for a registered lesson's id (the registry's first:
    any lesson's CPU recording will do)."""
    return markdown.replace("LESSON", FIRST_LESSON.id)


@pytest.fixture()
def project(tmp_path):
    return copy_project(tmp_path / "project")


def failure_with_page(project, tmp_path, markdown):
    """Append `markdown` to the home page, build, and return the one ERROR line."""
    page = project / "docs" / "index.md"
    page.write_text(page.read_text() + "\n" + markdown + "\n")
    run = build(project, tmp_path / "site")
    assert run.returncode != 0, "the build published a broken directive"
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    # mkdocs puts its own "Error reading page 'index.md':" before the hook's line.
    errors = [line for line in run.stderr.splitlines() if line.startswith("ERROR")
              and not re.search(r"Error \w+ page '[^']+':$", line)]
    assert len(errors) == 1, run.stderr[-2000:]
    assert "index.md" in errors[0]
    return errors[0]


@pytest.mark.parametrize("directive", [
    of_a_lesson("{{ rec:LESSON.cpu }}"),                    # no dotted path
    of_a_lesson("{{ rec:LESSON.cpu:environment/jax }}"),    # a character paths cannot have
    of_a_lesson("{{ rec:LESSON.cpu:environment.jax"),       # never closed
    of_a_lesson("{{ rce:LESSON.cpu:environment.jax }}"),    # a misspelt directive
    "{{ rec: }}",
    of_a_lesson("The runs: {{ recordings:LESSON }} inline."),  # a block directive mid-line
])
def test_a_malformed_directive_fails_the_build(project, tmp_path, directive):
    error = failure_with_page(project, tmp_path, directive)
    assert "malformed page directive" in error
    assert directive.split(" }}")[0].split("{{")[1].strip()[:20] in error


def test_a_format_code_that_does_not_fit_the_value_names_its_type(project, tmp_path):
    directive = of_a_lesson("{{ rec:LESSON.cpu:environment.jax|.2f }}")
    error = failure_with_page(project, tmp_path, directive)
    assert directive in error
    assert "cannot format a str with '|.2f'" in error


def test_a_whole_object_is_not_a_value(project, tmp_path):
    error = failure_with_page(project, tmp_path,
                              of_a_lesson("{{ rec:LESSON.cpu:environment }}"))
    assert "is a dict, not one value" in error


@pytest.mark.parametrize("markdown, attribute", [
    (of_a_lesson("[the JAX version]({{ rec:LESSON.cpu:environment.jax }})"), "href"),
    (of_a_lesson("![chart]({{ rec:LESSON.cpu:environment.jax }})"), "src"),
])
def test_a_recorded_value_cannot_be_a_link_target(project, tmp_path, markdown, attribute):
    error = failure_with_page(project, tmp_path, markdown)
    assert f"a recorded value ended up in a {attribute}= attribute" in error


def test_a_recorded_value_cannot_be_the_page_title(project, tmp_path):
    page = project / "docs" / "index.md"
    page.write_text(of_a_lesson("# Run on {{ rec:LESSON.cpu:environment.deviceKind }}\n\n")
                    + page.read_text())
    run = build(project, tmp_path / "site")
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert "index.md: a {{ rec:... }} value is in the page's first heading" in run.stderr
