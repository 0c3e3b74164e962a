"""Zensical, Material for MkDocs' successor, builds the same site from the same mkdocs.yml (issue
49; MAINTAINING.md, "Zensical"): one build, compared with the MkDocs one file by file and page by
page. What Zensical does differently on purpose is named here; any other difference fails."""
import difflib
import posixpath
import re
import shutil

import pytest

from conftest import FIRST_LESSON, module_file
from harness import passed, project as project_copy
from scripts.pages.check_links import broken_links
from site_build import build, build_with_zensical
from site_pages import page_file, site_pages

# Each generator's theme bundle, search index and sitemap: Zensical's search is its own.
THEIRS = re.compile(r"assets/(javascripts|stylesheets)/|search/search_index\.json|search\.json"
                    r"|sitemap\.xml")
ARTICLE = re.compile(r'<article class="md-content__inner md-typeset">(.*?)</article>', re.S)
# In a page: the target of Zensical's skip link; the hints its search reads, and drops.
ZENSICAL_ONLY = re.compile(r'<a id="__skip" tabindex="-1"></a>| data-search-exclude(="\w+")?')
RELATIVE = re.compile(r'\b(href|src|srcset)="(?![a-z]+:|#|/)([^"#]*)')


def files(site):
    return {path.relative_to(site).as_posix(): path.read_bytes() for path in site.rglob("*")
            if path.is_file() and not THEIRS.match(path.relative_to(site).as_posix())}


def shown(site, page):
    """Whether the page's head asks for the math font, and its article as lines, each
    relative address resolved: the generators write different paths to the same file."""
    text = page_file(site, page).read_text()
    base = page.rstrip("/") if page.endswith("/") else posixpath.dirname(page)
    article = RELATIVE.sub(lambda m: f'{m[1]}="/{posixpath.normpath(posixpath.join(base, m[2]))}',
                           ZENSICAL_ONLY.sub("", ARTICLE.search(text)[1]))
    lines = [line.strip() for line in re.sub(r">\s*<", ">\n<", article).splitlines()]
    return "lesson-math.woff" in text.split("</head>")[0], [line for line in lines if line]


@pytest.fixture
def project(tmp_path):
    """One lesson's course (every lesson's pages are made alike, and the test must not cost
    the course), to build four times: a slow test, by this fixture (tests/conftest.py)."""
    return project_copy(tmp_path / "project", keep=[FIRST_LESSON.id])


def test_zensical_builds_every_page_mkdocs_builds_the_same(project, tmp_path):
    for copies in ("figures", "lesson_code", "recordings"):  # docs/ as a fresh clone has it:
        shutil.rmtree(project / "docs" / copies)  # Zensical's own command copies them in
    passed(build_with_zensical(project))
    built_site = tmp_path / "mkdocs"
    passed(build(project, built_site))
    ours, theirs = files(built_site), files(project / "site")
    assert sorted(ours) == sorted(theirs)  # pages, figures, downloads, data, notebook, font
    assert [path for path in ours if path.startswith("partials/")] == []  # inlined, never served
    assert [path for path in ours if ours[path] != theirs[path] and path[-5:] != ".html"] == []
    for page in site_pages(built_site):
        expected, found = shown(built_site, page), shown(project / "site", page)
        assert expected == found, "\n".join(difflib.unified_diff(expected[1], found[1], page,
                                                                 lineterm="", n=1))
    assert broken_links(project / "site")[0] == []
    # A stale recording stops both in the same line. Zensical prints its traceback around it
    # and leaves in site/ what it wrote before it (make stops there).
    program = project / module_file(FIRST_LESSON)
    program.write_text(program.read_text() + "\nA_CHANGE = 1\n")
    mkdocs, zensical = build(project, tmp_path / "stale"), build_with_zensical(project)
    line = next(line for line in mkdocs.stderr.splitlines() if line.startswith("ERROR"))
    message = line.split("-  ", 1)[1]
    assert mkdocs.returncode != 0 and "stale" in message, mkdocs.stderr[-2000:]
    assert zensical.returncode != 0 and any(
        found.endswith(message) for found in zensical.stderr.splitlines()), zensical.stderr
