"""Every display formula of every lesson page as the site draws it, beside the same TeX
drawn by KaTeX, at twice the pixels of a CSS pixel: what a reader sees against what the
usual web renderer of TeX would show (issue 20). A benchmark's picture, run by hand
(`make audit` installs KaTeX beside Lighthouse) and committed with the bytes each costs.

    python scripts/audit/math_side_by_side.py [--site site] [--out scripts/audit/math]

The site's formulas are MathML that the browser lays out with the site's own subset font
(docs/assets/fonts/lesson-math.woff, made by scripts/pages/math_font.py). The TeX for
KaTeX is the formula's own annotation, the text the build set from. Both are drawn by
the same Chromium at the same width, light palette. Writes one PNG per formula
(<lesson>-<n>.png: the site on the left, KaTeX on the right) and bytes.json, what each
side fetches to draw the page's formulas.
"""
import argparse
import base64
import gzip
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the repository's modules come first

from scripts import display  # noqa: E402
from scripts.audit.lighthouse import CHROMIUM, lesson_pages, serve  # noqa: E402
from scripts.recordings import RecordingError, Staging  # noqa: E402
from scripts.scratch import scratch_folder  # noqa: E402

KATEX = HERE / "node_modules" / "katex" / "dist"
OUT = HERE / "math"
SCALE = 2  # device pixels per CSS pixel: a phone's or a laptop's high-density screen
WIDTH = 720  # CSS pixels: the lesson column of a laptop
# KaTeX alone on a page; each formula is drawn at the font size the site's is drawn at
# (KaTeX's own default is 1.21 times the text around it).
KATEX_PAGE = """<!doctype html><meta charset="utf-8">
<link rel="stylesheet" href="katex/katex.min.css"><script src="katex/katex.min.js"></script>
<style>body{margin:0;background:#fff;color:rgba(0,0,0,.87)}
#f{display:inline-block;padding:4px 8px}
#f .katex{font-size:1em}</style><div id="f"></div>"""
SIDE_BY_SIDE = """<!doctype html><meta charset="utf-8"><style>
body{margin:0;font:14px/1.4 sans-serif;background:#fff}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:6px 10px;vertical-align:middle;text-align:left}
th{font-weight:600;background:#f4f4f4;white-space:nowrap}code{font-size:12px}</style>
<table><tr><th>this site: MathML, lesson-math.woff</th><th>KaTeX %(version)s</th></tr>
<tr><td><img src="%(site)s" width="%(site_width)d"></td>
<td><img src="%(katex)s" width="%(katex_width)d"></td></tr>
<tr><td colspan="2"><code>%(tex)s</code></td></tr></table>"""


def data_url(png):
    return "data:image/png;base64," + base64.b64encode(png).decode()


def fetched(page):
    """The responses `page` receives from now on; read their bodies (sizes()) while the
    page is still open."""
    responses = []
    page.on("response", lambda response: responses.append(response))
    return responses


def sizes(responses):
    """By file name, in order of name (fonts come in whichever order they were asked):
    the bytes served (uncompressed, as `make serve` and the audit serve them) and gzip's
    at its best, what a host that compresses would send (a WOFF is compressed already)."""
    return dict(sorted((response.url.rsplit("/", 1)[-1],
                        {"served": len(body), "gzip": len(gzip.compress(body, 9))})
                       for response in responses for body in [response.body()]))


def side_by_side(browser, site_url, katex_url, version):
    """[(tex, png)] for every display formula of the page at `site_url`."""
    context = browser.new_context(viewport={"width": WIDTH, "height": 900},
                                  device_scale_factor=SCALE)
    site, katex, shown = context.new_page(), context.new_page(), context.new_page()
    site.goto(site_url)
    site.evaluate("document.fonts.ready")
    katex.goto(katex_url)
    pictures = []
    for formula in site.locator(".math-display math").all():
        tex = formula.locator("annotation").text_content()
        drawn = formula.screenshot()
        size = formula.evaluate("math => getComputedStyle(math).fontSize")
        katex.evaluate("""([tex, size]) => { const box = document.getElementById('f');
            box.style.fontSize = size;
            katex.render(tex, box, {displayMode: true, throwOnError: true}); }""",
                       [tex, size])
        katex.evaluate("document.fonts.ready")
        drawn_by_katex = katex.locator("#f .katex")
        by_katex = drawn_by_katex.screenshot()
        widths = [formula.bounding_box()["width"],
                  drawn_by_katex.bounding_box()["width"]]
        shown.set_content(SIDE_BY_SIDE % {
            "version": version, "site": data_url(drawn), "katex": data_url(by_katex),
            "site_width": round(widths[0]), "katex_width": round(widths[1]),
            "tex": tex.replace("&", "&amp;").replace("<", "&lt;")})
        pictures.append((tex, shown.locator("table").screenshot()))
    context.close()
    return pictures


def math_bytes(browser, site_url, katex_url, formulas):
    """What each side fetches to draw `formulas`: the site its math font (its MathML is
    in the page, its rules in lesson.css), KaTeX its script, stylesheet and fonts."""
    context = browser.new_context()
    page = context.new_page()
    responses = fetched(page)
    page.goto(site_url)
    page.evaluate("document.fonts.ready")
    site = sizes(responses)
    page = context.new_page()
    responses = fetched(page)
    page.goto(katex_url)
    page.evaluate("""formulas => { for (const tex of formulas) {
        const box = document.createElement('div'); document.body.append(box);
        katex.render(tex, box, {displayMode: true}); } }""", formulas)
    # The fonts a formula needs are asked for once it is laid out; wait until they came.
    page.evaluate("document.fonts.ready.then(() => document.fonts.size)")
    page.wait_for_load_state("networkidle")
    katex = sizes(responses)
    context.close()
    return {"site": {name: size for name, size in site.items() if name.endswith(".woff")},
            "katex": {name: size for name, size in katex.items()
                      if name.startswith("katex") or name.startswith("KaTeX_")}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "site")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    pages = lesson_pages()
    for page in pages:
        if not (args.site / page / "index.html").exists():
            sys.exit(f"math: {args.site}/{page}index.html not found; run `make build` first")
    if not KATEX.exists():
        sys.exit("math: KaTeX is not installed; run `make audit` (it installs "
                 "scripts/audit/node_modules)")
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    version = json.loads((KATEX.parent / "package.json").read_text())["version"]
    # KaTeX's page is written in a scratch folder beside a link to KaTeX (its stylesheet
    # finds its fonts beside itself), so nothing is written into node_modules.
    with scratch_folder("math-side-by-side") as scratch:
        (scratch / "katex").symlink_to(KATEX, target_is_directory=True)
        (scratch / "index.html").write_text(KATEX_PAGE, encoding="utf-8")
        site_server, katex_server = serve(args.site), serve(scratch)
        names, costs = [], {}
        try:  # every picture and bytes.json, or (on an error) none of them
            with sync_playwright() as playwright, Staging() as staging:
                browser = playwright.chromium.launch(executable_path=CHROMIUM)
                katex_url = f"http://127.0.0.1:{katex_server.server_port}/index.html"
                for page in pages:
                    site_url = f"http://127.0.0.1:{site_server.server_port}/{page}"
                    pictures = side_by_side(browser, site_url, katex_url, version)
                    lesson = page.strip("/").split("/")[-1]
                    for number, (_, png) in enumerate(pictures, start=1):
                        staging.add(args.out / f"{lesson}-{number}.png", png)
                        names.append((lesson, number))
                    costs[page] = math_bytes(browser, site_url, katex_url,
                                             [tex for tex, _ in pictures])
                browser.close()
                staging.add(args.out / "bytes.json",
                            json.dumps({"katex": version, "pages": costs}, indent=2) + "\n")
                staging.commit()
            for stale in set(args.out.glob("*.png")) - {args.out / f"{lesson}-{number}.png"
                                                        for lesson, number in names}:
                stale.unlink()  # a formula no page has any more
        except RecordingError as error:
            sys.exit(f"math: {error}")
        except PlaywrightError as error:  # a formula KaTeX cannot read, a browser that fails
            sys.exit(f"math: {str(error).strip().splitlines()[0]}; nothing was written")
        finally:
            site_server.shutdown()
            katex_server.shutdown()
    for page, cost in costs.items():
        site, katex = ({way: sum(size[way] for size in cost[side].values())
                        for way in ("served", "gzip")} for side in ("site", "katex"))
        print(f"math: {page}: the site fetches {site['served']:,} B for its formulas "
              f"({site['gzip']:,} B gzipped), KaTeX {katex['served']:,} B "
              f"({katex['gzip']:,} B gzipped)", file=sys.stderr)
    print(f"math: wrote {len(names)} pictures and bytes.json in {display(args.out)}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
