"""Check every link, anchor and resource in a built site; exit 1 listing what is broken.

    python scripts/pages/check_links.py site

Internal links must reach a file (and an element with the anchor's id) and be relative:
a root-absolute `/path` breaks when the site is published under a sub-path (a GitHub Pages
project site). Anything the browser would *load* (images, scripts, styles, fonts) must come
from the site itself: links out to documentation are fine, a resource from a CDN is not.
"""
import os
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

LOADED = {("img", "src"), ("script", "src"), ("link", "href"), ("source", "src"),
          ("iframe", "src"), ("object", "data")}
FOLLOWED = {("a", "href")}
# Served for any missing address at any depth, so mkdocs writes its links from site_url's
# path (root-absolute on purpose); it is the one page allowed them.
NOT_FOUND_PAGE = "404.html"


class PageLinks(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        for attr in ("href", "src", "data"):
            value = attrs.get(attr)
            if value and ((tag, attr) in LOADED or (tag, attr) in FOLLOWED):
                rel = attrs.get("rel", "")
                self.links.append((tag, attr, value, rel))


def parse(path):
    parser = PageLinks()
    parser.feed(path.read_text(errors="replace"))
    return parser


def target_file(site, page, url, base_path="/"):
    """The file a site-relative URL points at, as mkdocs lays pages out."""
    page_url = base_path + page.relative_to(site).as_posix()
    path = unquote(urlparse(urljoin(page_url, url)).path).removeprefix(base_path.rstrip("/"))
    candidate = site / path.lstrip("/")
    if path.endswith("/") or candidate.is_dir():
        candidate = candidate / "index.html"
    return candidate


def broken_links(site, base_path="/"):
    """Problems in the built `site`, published at `base_path` (site_url's path)."""
    site = Path(site)
    pages = sorted(site.rglob("*.html"))
    parsed = {page: parse(page) for page in pages}
    problems = []
    for page, links in parsed.items():
        where = page.relative_to(site).as_posix()
        for tag, attr, url, rel in links.links:
            scheme = urlparse(url).scheme
            if scheme in ("mailto", "data", "javascript"):
                continue
            if scheme in ("http", "https") or url.startswith("//"):
                if (tag, attr) in LOADED and "canonical" not in rel:
                    problems.append(f"{where}: loads {url} from outside the site")
                continue
            if url.startswith("/") and where != NOT_FOUND_PAGE:
                problems.append(f"{where}: {tag} {attr}={url!r} is root-absolute; make it "
                                f"relative to the page so the site works under a sub-path")
                continue
            target = target_file(site, page, url, base_path)
            if not target.exists():
                problems.append(f"{where}: {tag} {attr}={url!r} points at a missing file")
                continue
            fragment = urlparse(url).fragment
            if fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else parse(target).ids
                if unquote(fragment) not in ids:
                    problems.append(f"{where}: {url!r} has no anchor #{fragment}")
    return problems, len(pages)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    site = Path(argv[0] if argv else "site")
    if not (site / "index.html").exists():
        print(f"error: {site}/index.html not found; run `make build` first", file=sys.stderr)
        return 2
    # The same SITE_URL the build read (mkdocs.yml): the 404 page's links start with its path.
    base_path = urlparse(os.environ.get("SITE_URL", "")).path or "/"
    problems, count = broken_links(site, base_path.rstrip("/") + "/")
    for line in problems:
        print(line)
    print(f"check_links: {count} pages, {len(problems)} broken", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
