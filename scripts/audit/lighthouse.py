"""Lighthouse on every lesson's page and on the bare theme on a page as long, interleaved:
a benchmark (`make audit`), not a test.

    python scripts/audit/lighthouse.py [--site site] [--runs 24]
    python scripts/audit/lighthouse.py --render-only   # the kept runs, read again

Serves the built site and the bare reference (scripts/audit/reference.py: the theme with
the project's palette and features, nothing of the project's, on a page as long as a
lesson page) the way `python -m http.server` does (no compression), and runs Lighthouse
12.2.3 (scripts/audit/package.json) with Debian's chromium through CHROME_PATH, default
mobile emulation and simulated throttling. Each round audits every page once, the bare
page first in odd rounds and last in even ones, with the load average read before each
run, so a busy spell falls on both sides. What it reports is each lesson page's mean total
blocking time over the bare page's, with a bootstrap interval that draws whole rounds
(the same round's conditions on both sides; scripts/intervals.py), against the target of
at most 1.2 times the theme's: what a lesson page blocks beyond that is its own scripts,
styles and markup. Every run is kept in scripts/audit/scores.json. Scores move between
identical runs on a busy machine, which is why this is a benchmark to run by hand and
commit, never a test.
"""
import argparse
import functools
import http.server
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the repository's modules come first

from scripts.audit.reference import (ReferenceBuildFailed, build_reference,  # noqa: E402
                                     elements, long_page_path)
from scripts import display  # noqa: E402
from scripts.host import host_load  # noqa: E402
from scripts.proc.interrupts import run_command  # noqa: E402
from scripts.intervals import paired_mean_ratio  # noqa: E402
from scripts.store.lessons import load_lessons  # noqa: E402
from scripts.store.recordings import RecordingError, non_finite, read_json  # noqa: E402
from scripts.store.staging import StagingError, write_atomically  # noqa: E402
LIGHTHOUSE = HERE / "node_modules" / ".bin" / "lighthouse"
CHROMIUM = "/usr/bin/chromium"
SCORES = HERE / "scores.json"


def lesson_pages(root=ROOT):
    """Every lesson's page, in the registry's order (lesson_code/lessons.toml)."""
    return [f"lessons/{lesson_id}/" for lesson_id in load_lessons(root)]


# A lesson page may block the main thread at most this many times as long as the bare
# theme does on a page as long, in the same round (issue 33).
BLOCKING_TARGET = 1.2
def bare(page):
    """What the kept runs call the bare page held against lesson page `page`."""
    return f"bare mkdocs-material page as long as {page}"



# Fewer rounds than this decide nothing: a bootstrap that draws from four rounds or
# fewer has too few distinct resamples for its percentiles to mean anything.
MIN_ROUNDS = 5
ROUNDS = 24
# What each verdict says of the target, as the end of a sentence.
VERDICT_WORDS = {"meets": "meets", "misses": "misses",
                 "inconclusive": "cannot tell whether it meets"}
CATEGORIES = ("performance", "accessibility", "best-practices", "seo")
METRICS = ("first-contentful-paint", "largest-contentful-paint", "total-blocking-time",
           "cumulative-layout-shift", "speed-index", "total-byte-weight", "dom-size")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(site):
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def one_run(url):
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        run = subprocess.run(
            [str(LIGHTHOUSE), url, "--output=json", f"--output-path={report}", "--quiet",
             "--chrome-flags=--headless=new --no-sandbox --disable-gpu "
             "--disable-background-networking --disable-component-update --no-first-run"],
            env={**os.environ, "CHROME_PATH": CHROMIUM}, capture_output=True, text=True,
            timeout=300)
        if run.returncode != 0 or not report.exists():
            sys.exit(f"audit: lighthouse failed on {url}: {run.stderr.strip()[-500:]}")
        result = json.loads(report.read_text(encoding="utf-8"))
    if result.get("runtimeError"):
        sys.exit(f"audit: lighthouse could not load {url}: {result['runtimeError']}")
    return {"scores": {name: round(result["categories"][name]["score"] * 100)
                       for name in CATEGORIES},
            "metrics": {name: result["audits"][name]["numericValue"] for name in METRICS},
            "lighthouse": result["lighthouseVersion"],
            "chromium": result["environment"]["hostUserAgent"]}


def blocking_ratio(runs, page):
    """`page`'s total blocking time over the bare page's across the run: the ratio of
    their means over every round that measured both (each round puts both under the same
    conditions), with a paired percentile bootstrap over those rounds, and whether the
    whole interval meets the target, misses it, or straddles it.

    Means, not the median of round-by-round ratios: a page that blocks for 0 ms in a
    round makes that round's ratio undefined, and blocking time adds up (a reader who
    opens a page many times pays its mean)."""
    by_round = {}
    for run in runs:
        by_round.setdefault(run["round"], {})[run["page"]] = \
            run["metrics"]["total-blocking-time"]
    paired = [(found[page], found[bare(page)]) for found in by_round.values()
              if page in found and bare(page) in found]
    mean_ms = {"page": statistics.fmean(ms for ms, _ in paired) if paired else 0.0,
               "reference": statistics.fmean(ms for _, ms in paired) if paired else 0.0}
    kept = {"rounds": [list(pair) for pair in paired], "meanBlockingTimeMs": mean_ms}
    if not mean_ms["reference"]:
        return {**kept, "verdict": "no ratio",
                "words": f"the {bare(page)} blocked for 0 ms in every round measured: "
                         f"no ratio"}
    stat = paired_mean_ratio([[ms] for ms, _ in paired], [[ms] for _, ms in paired])
    verdict = ("inconclusive" if len(paired) < MIN_ROUNDS else
               "meets" if stat["high"] <= BLOCKING_TARGET else
               "misses" if stat["low"] > BLOCKING_TARGET else "inconclusive")
    words = (f"{stat['estimate']:.2f}x the {bare(page)} (mean blocking {mean_ms['page']:.1f} ms "
             f"against {mean_ms['reference']:.1f} ms over {len(paired)} rounds; "
             f"{stat['coverage']:.0%} interval {stat['low']:.2f}-{stat['high']:.2f}): "
             f"{VERDICT_WORDS[verdict]} the target of {BLOCKING_TARGET}x")
    return {**stat, **kept, "verdict": verdict, "words": words}


def derived(runs, pages):
    """What scores.json says of its runs, from the runs alone: a change to how they are
    read or said (the target, a sentence) is redone with --render-only, never by running
    Lighthouse again."""
    loads = [run["hostBefore"]["loadAverage1m"] for run in runs]
    return {"loadAverage1m": {"min": min(loads), "max": max(loads)},
            "blockingAgainstBare": {page: blocking_ratio(runs, page) for page in pages}}


def measured(site, rounds, pages):
    """Every page audited once a round, the order reversed every other round."""
    with tempfile.TemporaryDirectory(prefix="audit-reference-") as scratch:
        try:
            lengths = {page: elements((site / page / "index.html").read_text(
                encoding="utf-8")) for page in pages}
            bare_site = build_reference(Path(scratch), lengths=lengths)
        except ReferenceBuildFailed as error:
            sys.exit(f"audit: the bare reference page did not build: "
                     f"{str(error).strip().splitlines()[-1]}")
        served, bare_served = serve(site), serve(bare_site)
        try:
            urls = {page: f"http://127.0.0.1:{served.server_port}/{page}" for page in pages}
            urls.update({bare(page): f"http://127.0.0.1:{bare_served.server_port}/"
                                     f"{long_page_path(page)}" for page in pages})
            runs = []
            for number in range(rounds):
                order = [*map(bare, pages), *pages]
                order = order if number % 2 == 0 else order[::-1]
                for page in order:
                    host = host_load()
                    runs.append({"round": number + 1, "page": page, "hostBefore": host,
                                 **one_run(urls[page])})
                    tbt = runs[-1]["metrics"]["total-blocking-time"]
                    print(f"audit: round {number + 1}, {page}: {runs[-1]['scores']}, "
                          f"blocking {tbt:.0f} ms, load {host['loadAverage1m']:.1f} on "
                          f"{host['cores']} cores", file=sys.stderr)
        finally:
            served.shutdown()
            bare_served.shutdown()
    return runs


def report(result, path):
    for page in result["pages"]:
        print(f"audit: {page}: {result['blockingAgainstBare'][page]['words']}",
              file=sys.stderr)
    loads = result["loadAverage1m"]
    print(f"audit: load average {loads['min']:.1f}-{loads['max']:.1f}; wrote "
          f"{display(path)}", file=sys.stderr)


def write_scores(result, path):
    try:  # a failed write never leaves half a file behind
        write_atomically(path, json.dumps(result, indent=2, allow_nan=False) + "\n")
    except StagingError as error:
        sys.exit(f"audit: {error}")


# What derived() reads of the kept runs; anything else (a round that is text, a metric
# missing, negative or NaN) is refused before it is read.
KEPT_RUNS = {
    "type": "object", "required": ["pages", "runs"],
    "properties": {
        "pages": {"type": "array", "items": {"type": "string"}},
        "runs": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["round", "page", "hostBefore", "metrics"],
            "properties": {
                "round": {"type": "integer", "minimum": 1},
                "page": {"type": "string"},
                "hostBefore": {"type": "object", "required": ["loadAverage1m"],
                               "properties": {"loadAverage1m": {"type": "number",
                                                                "minimum": 0}}},
                "metrics": {"type": "object", "required": ["total-blocking-time"],
                            "properties": {"total-blocking-time": {"type": "number",
                                                                   "minimum": 0}}}}}}}}


def kept_runs(path):
    """What an earlier audit wrote, checked for what derived() reads: finite numbers in
    runs of the shape above, of every page it names and of the bare page."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    fix = "run `make audit` to measure afresh"
    try:
        kept = read_json(path)
    except RecordingError as error:
        sys.exit(f"audit: {error.what}; {fix}")
    error = best_match(Draft202012Validator(KEPT_RUNS).iter_errors(kept))
    bad_number = non_finite(kept)
    if error is not None or bad_number is not None:
        where = "/".join(map(str, error.absolute_path if error else bad_number))
        why = error.message[:120] if error else "not a finite number"
        sys.exit(f"audit: {display(path)} holds no runs to read again (at "
                 f"{where or '(top level)'}: {why}); {fix}")
    missing = sorted({*kept["pages"], *map(bare, kept["pages"])}
                     - {run["page"] for run in kept["runs"]})
    if missing:
        sys.exit(f"audit: {display(path)} holds no runs of {missing[0]!r} to read again; "
                 f"{fix}")
    return kept


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "site")
    parser.add_argument("--runs", type=int, default=ROUNDS,
                        help=f"rounds (each audits every page; {ROUNDS} by default)")
    parser.add_argument("--render-only", action="store_true",
                        help="derive the statistics and words again from the runs "
                             "scores.json keeps (no Lighthouse, no --site, no --runs)")
    args = parser.parse_args(argv)
    if args.render_only:
        kept = kept_runs(SCORES)
        result = {**kept, **derived(kept["runs"], kept["pages"])}
        write_scores(result, SCORES)
        report(result, SCORES)
        return 0
    pages = lesson_pages()
    for page in pages:
        if not (args.site / page / "index.html").exists():
            sys.exit(f"audit: {args.site}/{page}index.html not found; run `make build` first")
    if not LIGHTHOUSE.exists():
        sys.exit("audit: Lighthouse is not installed; run `make audit` (it installs "
                 "scripts/audit/node_modules)")
    if not Path(CHROMIUM).exists():
        sys.exit(f"audit: {CHROMIUM} is missing; run `make browser` as root")
    runs = measured(args.site, args.runs, pages)
    result = {"pages": pages, "reference": [bare(page) for page in pages],
              "measuredAt": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "settings": "Lighthouse default mobile emulation, simulated throttling, "
                          "served uncompressed by Python's http.server; every page once a "
                          "round, the bare page first in odd rounds and last in even ones",
              "lighthouse": runs[0]["lighthouse"], "chromium": runs[0]["chromium"],
              **derived(runs, pages), "runs": runs}
    write_scores(result, SCORES)
    report(result, SCORES)
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
