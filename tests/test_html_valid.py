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
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from conftest import ROOT
from test_browser import skip_or_fail

pytestmark = pytest.mark.browser  # the Nu checker: the browser tier's tools (Java, vnu)
VNU = ROOT / "node_modules" / "vnu-jar" / "build" / "dist" / "vnu.jar"


def vnu(*arguments):
    """The checker's errors as (file, line, message) for everything it was given."""
    return [(message.get("url", "").rsplit("/", 3)[-3:], message.get("lastLine"),
             message["message"]) for message in vnu_errors(*arguments)]


def vnu_errors(*arguments):
    """The checker's error messages, as it reports them, for everything it was given."""
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
    return [message for message in report["messages"]
            if message["type"] in ("error", "non-document-error")]


def test_every_page_is_valid_html(built_site, reference_site):
    pages = sorted(built_site.rglob("*.html"))
    assert len(pages) >= 4
    # One run of the checker over the bare theme's pages and this site's (each run starts
    # a Java VM, seconds of work), its errors then told apart by the folder of their file.
    found = vnu_errors("--skip-non-html", reference_site, *pages)

    def in_theme(message):
        return Path(unquote(urlparse(message.get("url", "")).path)).is_relative_to(
            reference_site)

    theme_errors = {message["message"] for message in found if in_theme(message)}
    errors = [(message.get("url", "").rsplit("/", 3)[-3:], message.get("lastLine"),
               message["message"]) for message in found
              if not in_theme(message) and message["message"] not in theme_errors]
    assert errors == []


def test_every_figure_is_valid_svg():
    figures = sorted((ROOT / "figures").glob("*.svg"))
    assert figures
    assert vnu("--svg", *figures) == []
