"""Check every link, anchor and resource in a built site; exit 1 listing what is broken.

    python scripts/pages/check_links.py site

Internal links must reach a file (and anchor) in the site and be relative; whatever a
browser would load must come from the site itself; no page may run a `javascript:`
address, redirect out of the site, or carry a `<base>`.
"""
import os
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

# (tag, attribute) pairs whose address the browser fetches by itself.
LOADED = {("img", "src"), ("img", "srcset"), ("script", "src"), ("link", "href"),
          ("source", "src"), ("source", "srcset"), ("iframe", "src"), ("frame", "src"),
          ("object", "data"), ("embed", "src"), ("video", "src"), ("video", "poster"),
          ("audio", "src"), ("track", "src"), ("input", "src"), ("image", "href"),
          ("image", "xlink:href"), ("use", "href"), ("use", "xlink:href"),
          ("feimage", "href"), ("feimage", "xlink:href"), ("script", "href"),
          ("script", "xlink:href")}
# ...and those it goes to when a reader follows them.
FOLLOWED = {("a", "href"), ("a", "xlink:href"), ("area", "href"), ("form", "action"),
            ("button", "formaction"), ("input", "formaction")}
# Served at any depth, so its links are root-absolute on purpose: the one page allowed them.
NOT_FOUND_PAGE = "404.html"
CSS_URL = re.compile(r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)'"\s]*))\s*\)"""
                     r"""|@import\s+(?:"([^"]*)"|'([^']*)')""", re.I)
REFRESH_URL = re.compile(r"""^\s*\d*\s*[;,]?\s*(?:url\s*=\s*)?['"]?([^'"]*)""", re.I)
# A browser ignores these inside an address: `java\tscript:` is `javascript:`.
IGNORED_IN_ADDRESS = re.compile(r"[\x00-\x20\x7f]")


def css_urls(text):
    return [next(group for group in match.groups() if group is not None)
            for match in CSS_URL.finditer(text)]


class PageLinks(HTMLParser):
    """The ids of a page and every (tag, attribute, address, rel) it links or loads."""

    def __init__(self):
        super().__init__()
        self.ids, self.links, self.in_style = set(), [], False

    def handle_starttag(self, tag, attrs):
        attrs = {name: value or "" for name, value in attrs}
        self.ids |= {attrs[key] for key in ("id", "name") if attrs.get(key)}
        rel = attrs.get("rel", "")
        for attr, value in attrs.items():
            if (tag, attr) in LOADED or (tag, attr) in FOLLOWED:
                urls = [candidate.split()[0] for candidate in value.split(",")
                        if candidate.split()] if attr == "srcset" else [value]
                self.links += [(tag, attr, url, rel) for url in urls if url]
        if attrs.get("style"):
            self.links += [(tag, "style", url, "") for url in css_urls(attrs["style"])]
        if tag == "meta" and attrs.get("http-equiv", "").lower() == "refresh":
            target = REFRESH_URL.match(attrs.get("content", ""))[1].strip()
            self.links.append(("meta", "refresh", target or ".", ""))
        if tag == "base":
            self.links.append(("base", "href", attrs.get("href", ""), ""))
        self.in_style = tag == "style"

    def handle_endtag(self, tag):
        self.in_style = False

    def handle_data(self, data):
        if self.in_style:
            self.links += [("style", "url", url, "") for url in css_urls(data)]


def parse(path):
    parser = PageLinks()
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".css":
        parser.links = [("css", "url", url, "") for url in css_urls(text)]
    else:
        parser.feed(text)
    return parser


def target_file(site, page, url, base_path="/"):
    """The file a URL points at, as mkdocs lays pages out; None outside the site."""
    page_url = base_path + page.relative_to(site).as_posix()
    path = unquote(urlparse(urljoin(page_url, url)).path).removeprefix(base_path.rstrip("/"))
    candidate = site / path.lstrip("/")
    if path.endswith("/") or candidate.is_dir():
        candidate = candidate / "index.html"
    inside = site.resolve()
    if candidate.resolve() != inside and inside not in candidate.resolve().parents:
        return None
    return candidate


def problem(site, page, where, parsed, link, base_path):
    """What is wrong with one link of `page`, or None."""
    tag, attr, url, rel = link
    shown = f"{tag} {attr}={url!r}"
    if tag == "base":
        return f"{where}: has {shown}, which moves every relative link; remove it"
    scheme = urlparse(IGNORED_IN_ADDRESS.sub("", url)).scheme.lower()
    if scheme in ("javascript", "vbscript"):
        return f"{where}: {shown} runs script; link to a page or a file instead"
    if scheme == "data":
        loaded_image = tag in ("img", "source", "image") or attr in ("poster", "style", "url")
        return None if loaded_image else f"{where}: {shown} is a data: address; link a file"
    if scheme == "mailto" and (tag, attr) in FOLLOWED:
        return None
    if scheme in ("http", "https") or url.startswith("//"):  # outside the site
        if tag == "meta":
            return f"{where}: {shown} redirects out of the site; link to it instead"
        loaded = (tag, attr) in LOADED or attr in ("style", "url")  # CSS: always loaded
        return f"{where}: loads {url} from outside the site" if loaded \
            and "canonical" not in rel else None
    if scheme:
        return f"{where}: {shown} has a scheme ({scheme}:) the site does not use"
    if url.startswith("/") and where != NOT_FOUND_PAGE:
        return (f"{where}: {shown} is root-absolute; make it relative to the page so the "
                f"site works under a sub-path")
    target = page if url.startswith("#") else target_file(site, page, url, base_path)
    if target is None:
        return f"{where}: {shown} points outside the site"
    if not target.exists():
        return f"{where}: {shown} points at a missing file"
    fragment = urlparse(url).fragment
    if fragment and target.suffix in (".html", ".svg"):
        ids = parsed[target].ids if target in parsed else parse(target).ids
        if unquote(fragment) not in ids:
            return f"{where}: {url!r} has no anchor #{fragment}"
    return None


def broken_links(site, base_path="/"):
    """Problems in the built `site`, published at `base_path` (site_url's path)."""
    site = Path(site)
    pages = sorted(site.rglob("*.html"))
    others = sorted([*site.rglob("*.svg"), *site.rglob("*.css")])
    parsed = {page: parse(page) for page in pages + others}
    problems = []
    for page, links in parsed.items():
        where = page.relative_to(site).as_posix()
        problems += filter(None, (problem(site, page, where, parsed, link, base_path)
                                  for link in links.links))
    return problems, len(pages)


def main():
    site = Path(sys.argv[1] if len(sys.argv) > 1 else "site")
    if not (site / "index.html").exists():
        print(f"error: {site}/index.html not found; run `make build` first", file=sys.stderr)
        return 2
    # The 404 page's links start with SITE_URL's path, as the build read it.
    base_path = urlparse(os.environ.get("SITE_URL", "")).path or "/"
    problems, count = broken_links(site, base_path.rstrip("/") + "/")
    for line in problems:
        print(line)
    print(f"check_links: {count} pages, {len(problems)} broken", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    # As interrupts.run_command, which this file, importing nothing, cannot use.
    try:
        status = main()
        sys.stdout.flush()  # a line still buffered meets the closed pipe here, not at exit
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 141
    sys.exit(status)
