"""Valid HTML and SVG, as the Nu Html Checker (vnu-jar, pinned in package.json) sees it.

Every page of the built site and every figure must check without an error. The checker
also runs over a bare mkdocs-material page with the same palette (tests/site_reference.py):
an error it reports there too, with the same message, comes from the theme's own markup
(today only `autocomplete="off"` on the theme's two checkbox toggles in base.html), not
from anything this project wrote, and is the only kind left out.
"""
import json
import shutil
import subprocess

import pytest

from conftest import ROOT
from test_browser import skip_or_fail

VNU = ROOT / "node_modules" / "vnu-jar" / "build" / "dist" / "vnu.jar"


def vnu(*arguments):
    """The checker's errors as (file, line, message) for everything it was given."""
    java = shutil.which("java")
    for missing, fix in ((java is None, "java is missing: run `make test` as root, or "
                                        "apt-get install default-jre-headless"),
                         (not VNU.exists(), "node_modules/vnu-jar is missing: run "
                                            "`make install`")):
        if missing:
            skip_or_fail(fix, what="the HTML checker")
    run = subprocess.run([java, "-jar", str(VNU), "--errors-only", "--format", "json",
                          *map(str, arguments)], capture_output=True, text=True, timeout=300)
    report = json.loads(run.stderr or run.stdout)
    return [(message.get("url", "").rsplit("/", 3)[-3:], message.get("lastLine"),
             message["message"]) for message in report["messages"]
            if message["type"] in ("error", "non-document-error")]


@pytest.fixture(scope="module")
def theme_errors(reference_site):
    return {message for _, _, message in vnu("--skip-non-html", reference_site)}


def test_every_page_is_valid_html(built_site, theme_errors):
    pages = sorted(built_site.rglob("*.html"))
    assert len(pages) >= 4
    errors = [error for error in vnu("--skip-non-html", *pages)
              if error[2] not in theme_errors]
    assert errors == []


def test_every_figure_is_valid_svg():
    figures = sorted((ROOT / "figures").glob("*.svg"))
    assert figures
    assert vnu("--svg", *figures) == []
