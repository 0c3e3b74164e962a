"""Every page and figure valid to the Nu Html Checker (vnu-jar, package.json), but for the
errors the bare theme page (tests/site_reference.py) shows too: the theme's own markup."""
import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from conftest import ROOT
from harness import skip_or_fail

pytestmark = pytest.mark.browser  # the Nu checker: the browser tier's tools (Java, vnu)
VNU = ROOT / "node_modules" / "vnu-jar" / "build" / "dist" / "vnu.jar"


def test_every_page_and_figure_is_valid(built_site, reference_site):
    pages, figures = sorted(built_site.rglob("*.html")), sorted((ROOT / "figures").glob("*.svg"))
    assert len(pages) >= 4 and figures
    java = shutil.which("java")
    for missing, fix in ((java is None, "java is missing: run `make test` as root, or "
                                        "apt-get install default-jre-headless"),
                         (not VNU.exists(), "node_modules/vnu-jar is missing: run `make install`")):
        if missing:
            skip_or_fail(fix, what="the HTML checker")
    # One run (each starts a Java VM, seconds of work); errors told apart by their folder.
    run = subprocess.run([java, "-jar", str(VNU), "--errors-only", "--format", "json",
                          "--skip-non-html", "--also-check-svg", str(reference_site),
                          *map(str, pages + figures)], capture_output=True, text=True,
                         timeout=300)
    found = [message for message in json.loads(run.stderr or run.stdout)["messages"]
             if message["type"] in ("error", "non-document-error")]
    in_theme = [Path(unquote(urlparse(message.get("url", "")).path)).is_relative_to(
        reference_site) for message in found]
    theme_errors = {message["message"] for message, own in zip(found, in_theme) if own}
    errors = [(message.get("url", "").rsplit("/", 3)[-3:], message.get("lastLine"),
               message["message"]) for message, own in zip(found, in_theme)
              if not own and message["message"] not in theme_errors]
    assert errors == []
