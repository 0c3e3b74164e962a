"""Page directives ({{ rec:... }}, {{ recordings:... }}) that cannot be resolved stop the
build with one line naming the page and the directive, never publish verbatim."""
import re

import pytest

from conftest import project_copy as copy_project
from site_build import build


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
    "{{ rec:distributed-03.cpu }}",                       # no dotted path
    "{{ rec:distributed-03.cpu:environment/jax }}",       # a character paths cannot have
    "{{ rec:distributed-03.cpu:environment.jax",          # never closed
    "{{ rce:distributed-03.cpu:environment.jax }}",       # a misspelt directive
    "{{ rec: }}",
    "The runs: {{ recordings:distributed-03 }} inline.",  # a block directive mid-line
])
def test_a_malformed_directive_fails_the_build(project, tmp_path, directive):
    error = failure_with_page(project, tmp_path, directive)
    assert "malformed page directive" in error
    assert directive.split(" }}")[0].split("{{")[1].strip()[:20] in error


def test_a_format_code_that_does_not_fit_the_value_names_its_type(project, tmp_path):
    error = failure_with_page(project, tmp_path, "{{ rec:distributed-03.cpu:environment.jax|.2f }}")
    assert "{{ rec:distributed-03.cpu:environment.jax|.2f }}" in error
    assert "cannot format a str with '|.2f'" in error


def test_a_whole_object_is_not_a_value(project, tmp_path):
    error = failure_with_page(project, tmp_path, "{{ rec:distributed-03.cpu:environment }}")
    assert "is a dict, not one value" in error


@pytest.mark.parametrize("markdown, attribute", [
    ("[the JAX version]({{ rec:distributed-03.cpu:environment.jax }})", "href"),
    ("![chart]({{ rec:distributed-03.cpu:environment.jax }})", "src"),
])
def test_a_recorded_value_cannot_be_a_link_target(project, tmp_path, markdown, attribute):
    error = failure_with_page(project, tmp_path, markdown)
    assert f"a recorded value ended up in a {attribute}= attribute" in error


def test_a_recorded_value_cannot_be_the_page_title(project, tmp_path):
    page = project / "docs" / "index.md"
    page.write_text("# Run on {{ rec:distributed-03.cpu:environment.deviceKind }}\n\n"
                    + page.read_text())
    run = build(project, tmp_path / "site")
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert "index.md: a {{ rec:... }} value is in the page's first heading" in run.stderr
