"""Every formula of the built site as each converter's MathML draws it, beside KaTeX's own
drawing of the same TeX (issue 36): a benchmark's picture, run by `make audit` (which
installs KaTeX beside Lighthouse) and committed with what it counts.

    python scripts/audit/math_side_by_side.py [--site site] [--before OLD_SITE] [--out DIR]

Each formula (each TeX, inline or display, once: on the first page that has it) is drawn
by the same Chromium at twice the pixels of a CSS pixel, light palette, at the font size
the site sets it in:
- "before": with `--before`, as another build of the site draws it (e.g. `mkdocs build -d`
  from a checkout of the commit before a change);
- "this site": its MathML (Temml's), in its page, in the site's math font;
- "KaTeX MathML": KaTeX's `output: "mathml"`, put in the formula's place in the same page,
  so the same font and CSS draw it;
- "KaTeX": KaTeX's HTML rendering, the reference.

A drawing "differs visibly" from KaTeX's when, after the two are centred on each other and
then moved by up to SHIFT device pixels either way to fit best, more than THRESHOLD of all
their ink (pixels darker than mid-grey) lies farther than REACH device pixels (one CSS
pixel) from the other's ink. Writes <page>.png (a sheet of the formulas first met on that
page, each drawing's share of unmatched ink under it, red where it differs),
differences.json (every score, and the counts per column) and bytes.json (what each side
fetches to draw a lesson page's formulas).
"""
import argparse
import base64
import gzip
import html
import io
import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image
from scipy.ndimage import binary_dilation

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the repository's modules come first

from scripts import display  # noqa: E402
from scripts.audit.lighthouse import CHROMIUM, lesson_pages, serve  # noqa: E402
from scripts.proc.interrupts import run_command  # noqa: E402
from scripts.store.staging import Staging, StagingError  # noqa: E402
from scripts.proc.scratch import scratch_folder  # noqa: E402

KATEX = HERE / "node_modules" / "katex" / "dist"
OUT = HERE / "math"
SCALE = 2  # device pixels per CSS pixel: a phone's or a laptop's high-density screen
WIDTH = 720  # CSS pixels: the lesson column of a laptop
SHIFT = 6  # device pixels: how far two drawings may move to fit
REACH = 2  # device pixels: ink this close to the other's ink is matched
THRESHOLD = 0.10  # of all ink unmatched: a drawing that differs visibly
COLUMNS = ("before", "site", "katex_mathml")
HEADINGS = {"before": "before", "site": "this site", "katex_mathml": "KaTeX MathML",
            "katex": "KaTeX %s (reference)"}
KATEX_PAGE = """<!doctype html><meta charset="utf-8">
<link rel="stylesheet" href="katex/katex.min.css"><script src="katex/katex.min.js"></script>
<style>body{margin:0;background:#fff;color:rgba(0,0,0,.87)}
#f{display:inline-block;padding:4px 8px}
#f .katex{font-size:1em}</style><div id="f"></div>"""
SHEET = """<!doctype html><meta charset="utf-8"><style>
body{margin:0;font:13px/1.3 sans-serif;background:#fff}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:middle;text-align:left}
th{font-weight:600;background:#f4f4f4;white-space:nowrap}code{font-size:11px}
small{display:block;color:#555}.differs{color:#c00;font-weight:600}</style>
<table><tr>%s</tr>%s</table>"""
# Each formula of the page: its TeX, whether it is displayed, its font size.
FORMULAS = """() => [...document.querySelectorAll('.md-typeset math')].map(math => [
    math.querySelector('annotation[encoding="application/x-tex"]').textContent,
    math.getAttribute('display') === 'block', getComputedStyle(math).fontSize])"""
# Every formula in view: answers open, every tab's panel shown.
REVEAL = """() => { document.querySelectorAll('details').forEach(details => details.open = true);
    const style = document.createElement('style');
    style.textContent = '.tabbed-block { display: block !important }';
    document.head.append(style); }"""
# Formula `index` of the page as KaTeX's MathML, in place of the site's; returns the site's.
SWAP_IN_KATEX = """([index, tex, display]) => {
    const math = document.querySelectorAll('.md-typeset math')[index], old = math.outerHTML;
    const box = document.createElement('div');
    box.innerHTML = katex.renderToString(tex, {displayMode: display, output: 'mathml',
                                               throwOnError: true});
    const katexMath = box.querySelector('math');
    katexMath.setAttribute('data-katex', '');
    math.replaceWith(katexMath);
    return old; }"""
SWAP_BACK = """(old) => { const box = document.createElement('div'); box.innerHTML = old;
    document.querySelector('math[data-katex]').replaceWith(box.firstChild); }"""


def ink(png):
    """The dark pixels of a drawing, cropped to where they are."""
    dark = np.asarray(Image.open(io.BytesIO(png)).convert("L")) < 128
    rows, columns = np.nonzero(dark)
    if not len(rows):
        return np.zeros((1, 1), bool)
    return dark[rows.min():rows.max() + 1, columns.min():columns.max() + 1]


def unmatched_ink(png, reference):
    """The share of both drawings' ink farther than REACH from the other's, at the best
    fit (see the module's docstring)."""
    a, b = ink(png), ink(reference)
    height = max(a.shape[0], b.shape[0]) + 2 * SHIFT + 2
    width = max(a.shape[1], b.shape[1]) + 2 * SHIFT + 2

    def centred(drawing):
        canvas = np.zeros((height, width), bool)
        top, left = (height - drawing.shape[0]) // 2, (width - drawing.shape[1]) // 2
        canvas[top:top + drawing.shape[0], left:left + drawing.shape[1]] = drawing
        return canvas

    a, b = centred(a), centred(b)
    near = np.ones((2 * REACH + 1, 2 * REACH + 1), bool)
    near_a, near_b = binary_dilation(a, near), binary_dilation(b, near)
    total = a.sum() + b.sum()
    best = 1.0
    for dy in range(-SHIFT, SHIFT + 1):
        for dx in range(-SHIFT, SHIFT + 1):
            moved, near_moved = (np.roll(array, (dy, dx), (0, 1)) for array in (b, near_b))
            best = min(best, ((a & ~near_moved).sum() + (moved & ~near_a).sum()) / total)
    return float(best)


def data_url(png):
    return "data:image/png;base64," + base64.b64encode(png).decode()


def site_drawings(browser, url, pages, with_katex):
    """{(tex, display): {"page", "size", "site" and, with_katex, "katex_mathml": png}}
    for each formula of `pages` of the site at `url`, first occurrence only."""
    context = browser.new_context(viewport={"width": WIDTH, "height": 900},
                                  device_scale_factor=SCALE)
    page, drawings = context.new_page(), {}
    for path in pages:
        page.goto(url + path)
        page.evaluate(REVEAL)
        page.evaluate("document.fonts.ready")
        if with_katex:
            page.add_script_tag(path=str(KATEX / "katex.min.js"))
        formulas = page.evaluate(FORMULAS)
        for index, (tex, shown, size) in enumerate(formulas):
            if (tex, shown) in drawings:
                continue
            math = page.locator(".md-typeset math").nth(index)
            drawn = {"page": path, "size": size, "site": math.screenshot()}
            if with_katex:
                old = page.evaluate(SWAP_IN_KATEX, [index, tex, shown])
                drawn["katex_mathml"] = page.locator("math[data-katex]").screenshot()
                page.evaluate(SWAP_BACK, old)
            drawings[(tex, shown)] = drawn
    context.close()
    return drawings


def katex_drawings(browser, url, formulas):
    """KaTeX's HTML drawing of each (tex, display) at its font size."""
    context = browser.new_context(viewport={"width": WIDTH, "height": 900},
                                  device_scale_factor=SCALE)
    page, drawings = context.new_page(), {}
    page.goto(url)
    for (tex, shown), size in formulas.items():
        page.evaluate("""([tex, display, size]) => { const box = document.getElementById('f');
            box.style.fontSize = size;
            katex.render(tex, box, {displayMode: display, throwOnError: true}); }""",
                      [tex, shown, size])
        page.evaluate("document.fonts.ready")
        # The box around KaTeX's: a .katex span's own box can cut a fraction's descender.
        drawings[(tex, shown)] = page.locator("#f").screenshot()
    context.close()
    return drawings


def sheet(browser, rows, version, columns):
    """One picture of `rows` [(tex, display, {column: png}, {column: score})]."""
    headings = "".join(f"<th>{HEADINGS[column]}</th>" for column in columns) + \
        f"<th>{HEADINGS['katex'] % version}</th><th>TeX</th>"
    cells = []
    for tex, shown, pngs, scores in rows:
        row = []
        for column in columns + ("katex",):
            png = pngs.get(column)
            if png is None:
                row.append("<td>–</td>")
                continue
            width = Image.open(io.BytesIO(png)).width / SCALE
            note = "" if column == "katex" else (
                f'<small class="{"differs" if scores[column] > THRESHOLD else ""}">'
                f"{scores[column]:.0%} unmatched</small>")
            row.append(f'<td><img src="{data_url(png)}" width="{width:.0f}">{note}</td>')
        kind = "display" if shown else "inline"
        cells.append(f"<tr>{''.join(row)}<td><code>{html.escape(tex)}</code> "
                     f"<small>{kind}</small></td></tr>")
    page = browser.new_page(device_scale_factor=SCALE, viewport={"width": 1400, "height": 900})
    page.set_content(SHEET % (headings, "".join(cells)))
    picture = Image.open(io.BytesIO(page.locator("table").screenshot()))
    page.close()
    # 32 shades are plenty for black text, grey rules and red notes: a fifth of the bytes.
    small = io.BytesIO()
    picture.convert("RGB").quantize(32).save(small, "PNG", optimize=True)
    return small.getvalue()


def fetched(page):
    """The responses `page` receives from now on; read their bodies (sizes()) while the
    page is still open."""
    responses = []
    page.on("response", lambda response: responses.append(response))
    return responses


def sizes(responses):
    """By file name: the bytes served (uncompressed, as `make serve` and the audit serve
    them) and gzip's at its best, what a host that compresses would send."""
    return dict(sorted((response.url.rsplit("/", 1)[-1],
                        {"served": len(body), "gzip": len(gzip.compress(body, 9))})
                       for response in responses for body in [response.body()]))


def math_bytes(browser, site_url, katex_url, formulas):
    """What each side fetches to draw `formulas`: the site its math font (its MathML is
    in the page), KaTeX its script, stylesheet and fonts."""
    context = browser.new_context()
    page = context.new_page()
    responses = fetched(page)
    page.goto(site_url)
    page.evaluate("document.fonts.ready")
    site = sizes(responses)
    page = context.new_page()
    responses = fetched(page)
    page.goto(katex_url)
    page.evaluate("""formulas => { for (const [tex, display] of formulas) {
        const box = document.createElement('div'); document.body.append(box);
        katex.render(tex, box, {displayMode: display}); } }""", formulas)
    # The fonts a formula needs are asked for once it is laid out; wait until they came.
    page.evaluate("document.fonts.ready.then(() => document.fonts.size)")
    page.wait_for_load_state("networkidle")
    katex = sizes(responses)
    context.close()
    return {"site": {name: size for name, size in site.items() if name.endswith(".woff")},
            "katex": {name: size for name, size in katex.items()
                      if name.startswith("katex") or name.startswith("KaTeX_")}}


def pages_with_math(site):
    """Every built page with a formula, as a path below the site's root."""
    return sorted(path.parent.relative_to(site).as_posix().removeprefix(".") + "/"
                  for path in site.rglob("index.html") if "<math" in path.read_text())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "site")
    parser.add_argument("--before", type=Path, help="another build of the site to compare")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    for site in filter(None, (args.site, args.before)):
        if not (site / "index.html").exists():
            sys.exit(f"math: {site}/index.html not found; run `make build` first")
    if not KATEX.exists():
        sys.exit("math: KaTeX is not installed; run `make audit` (it installs "
                 "scripts/audit/node_modules)")
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    version = json.loads((KATEX.parent / "package.json").read_text())["version"]
    columns = COLUMNS if args.before else COLUMNS[1:]
    # KaTeX's page is written in a scratch folder beside a link to KaTeX (its stylesheet
    # finds its fonts beside itself), so nothing is written into node_modules.
    with scratch_folder("math-side-by-side") as scratch:
        (scratch / "katex").symlink_to(KATEX, target_is_directory=True)
        (scratch / "index.html").write_text(KATEX_PAGE, encoding="utf-8")
        servers = {name: serve(folder) for name, folder in
                   (("site", args.site), ("katex", scratch), ("before", args.before)) if folder}
        url = {name: f"http://127.0.0.1:{server.server_port}/" for name, server in servers.items()}
        try:  # every picture and both files, or (on an error) none of them
            with sync_playwright() as playwright, Staging() as staging:
                browser = playwright.chromium.launch(executable_path=CHROMIUM)
                pages = pages_with_math(args.site)
                drawings = site_drawings(browser, url["site"], pages, with_katex=True)
                before = site_drawings(browser, url["before"], pages_with_math(args.before),
                                       with_katex=False) if args.before else {}
                references = katex_drawings(browser, url["katex"] + "index.html",
                                            {key: drawn["size"] for key, drawn in drawings.items()})
                rows, found = {}, []
                for key, drawn in drawings.items():
                    pngs = {"site": drawn["site"], "katex_mathml": drawn["katex_mathml"],
                            "katex": references[key]}
                    if key in before:
                        pngs["before"] = before[key]["site"]
                    scores = {column: unmatched_ink(pngs[column], references[key])
                              for column in columns if column in pngs}
                    rows.setdefault(drawn["page"], []).append((*key, pngs, scores))
                    found.append({"tex": key[0], "display": key[1], "page": drawn["page"],
                                  **{column: round(score, 3) for column, score in scores.items()}})
                names = []
                for page, page_rows in rows.items():
                    name = (page.strip("/").replace("/", "-") or "home") + ".png"
                    staging.add(args.out / name, sheet(browser, page_rows, version, columns))
                    names.append(name)
                counts = {column: {"differ": sum(row[column] > THRESHOLD for row in found
                                                 if column in row),
                                   "of": sum(column in row for row in found)}
                          for column in columns}
                staging.add(args.out / "differences.json", json.dumps({
                    "katex": version, "rule": {"shift": SHIFT, "reach": REACH,
                                               "threshold": THRESHOLD, "scale": SCALE},
                    "counts": counts, "formulas": found}, indent=1, ensure_ascii=False) + "\n")
                costs = {page: math_bytes(browser, url["site"] + page, url["katex"] + "index.html",
                                          [list(key) for key, drawn in drawings.items()
                                           if drawn["page"] == page])
                         for page in lesson_pages() if page in rows}
                staging.add(args.out / "bytes.json",
                            json.dumps({"katex": version, "pages": costs}, indent=2) + "\n")
                browser.close()
                staging.commit()
            for stale in set(args.out.glob("*.png")) - {args.out / name for name in names}:
                stale.unlink()  # a page that has no formula of its own any more
        except StagingError as error:
            sys.exit(f"math: {error}")
        except PlaywrightError as error:  # a formula KaTeX cannot read, a browser that fails
            sys.exit(f"math: {str(error).strip().splitlines()[0]}; nothing was written")
        finally:
            for server in servers.values():
                server.shutdown()
    for column, count in counts.items():
        print(f"math: {HEADINGS[column]}: {count['differ']} of {count['of']} formulas differ "
              f"visibly from KaTeX's drawing", file=sys.stderr)
    print(f"math: wrote {len(names)} sheets, differences.json and bytes.json in "
          f"{display(args.out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
