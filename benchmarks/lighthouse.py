"""`make audit`: Lighthouse CI on every lesson page and on a bare theme page as long as it.
A benchmark, run by hand and committed, never a test: scores move between identical runs.

    python benchmarks/lighthouse.py [--site site] [--rounds 24]
    python benchmarks/lighthouse.py --render-only   # the kept runs, read again

`lhci collect` (benchmarks/package.json, benchmarks/lighthouserc.json) serves the built site
compressed, as a host sends it, with the bare mkdocs-material pages (benchmarks/long_pages.py)
under `_bare/`, and audits every page once a round, the order reversed every other round,
so a busy spell falls on both sides. The reading: each lesson page's mean total blocking
time over its bare twin's, with a bootstrap over rounds, against the target of 1.2x; what a
lesson page blocks beyond that is its own. Every run is kept in benchmarks/scores.json.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout's modules, and the bare page

from scripts.cli import OneLineParser, progress, run  # noqa: E402
from scripts.intervals import paired_mean_ratio  # noqa: E402
from scripts.store.lessons import load_lessons  # noqa: E402
from scripts.store.recordings import RecordingError, read_json  # noqa: E402
from scripts.store.staging import write_atomically  # noqa: E402
from benchmarks.long_pages import elements, long_page_path, long_pages  # noqa: E402
from site_reference import build_reference  # noqa: E402

LHCI = HERE / "node_modules" / ".bin" / "lhci"
SCORES = HERE / "scores.json"
BLOCKING_TARGET = 1.2  # a lesson page blocks at most this many times its bare twin (issue 33)
MIN_ROUNDS = 5  # a bootstrap over fewer rounds has too few distinct resamples to mean much


def lesson_pages(root=ROOT):
    return [f"lessons/{lesson_id}/" for lesson_id in load_lessons(root)]


def bare(page):
    return f"_bare/{long_page_path(page)}"


def blocking_ratio(runs, page):
    """Mean blocking of `page` over its bare twin's across the rounds that measured both,
    with a paired bootstrap over those rounds. Means, not a median of ratios: a round where
    a page blocked 0 ms has no ratio, and a reader who opens a page often pays its mean."""
    by_round = {}
    for one in runs:
        by_round.setdefault(one["round"], {})[one["page"]] = \
            one["metrics"]["total-blocking-time"]
    paired = [(got[page], got[bare(page)]) for got in by_round.values()
              if page in got and bare(page) in got]
    if not paired or not any(ms for _, ms in paired):
        return {"verdict": "no ratio", "words": f"{bare(page)} never blocked: no ratio"}
    stat = paired_mean_ratio([[ms] for ms, _ in paired], [[ms] for _, ms in paired])
    verdict = ("inconclusive" if len(paired) < MIN_ROUNDS else
               "meets" if stat["high"] <= BLOCKING_TARGET else
               "misses" if stat["low"] > BLOCKING_TARGET else "inconclusive")
    mean = [sum(side) / len(paired) for side in zip(*paired)]
    said = {"meets": "meets", "misses": "misses", "inconclusive": "cannot tell whether it meets"}
    words = (f"{stat['estimate']:.2f}x its bare twin (mean blocking {mean[0]:.1f} ms against "
             f"{mean[1]:.1f} ms over {len(paired)} rounds; {stat['coverage']:.0%} interval "
             f"{stat['low']:.2f}-{stat['high']:.2f}): {said[verdict]} the target of "
             f"{BLOCKING_TARGET}x")
    return {**stat, "rounds": [list(pair) for pair in paired], "verdict": verdict,
            "words": words}


def audited(site, pages, rounds, scratch):
    """Every page and its bare twin once a round, through `lhci collect`."""
    served = scratch / "served"
    shutil.copytree(site, served)
    lengths = {page: elements((site / page / "index.html").read_text(encoding="utf-8"))
               for page in pages}
    shutil.copytree(build_reference(scratch / "bare", pages=long_pages(lengths)),
                    served / "_bare")
    runs = []
    for number in range(1, rounds + 1):
        order = [*map(bare, pages), *pages][::1 if number % 2 else -1]
        load = os.getloadavg()[0]
        out = scratch / f"round{number}"
        out.mkdir()
        done = subprocess.run([str(LHCI), "collect", f"--config={HERE / 'lighthouserc.json'}",
                               f"--staticDistDir={served}", *(f"--url=/{page}" for page in order)],
                              cwd=out, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            sys.exit(f"audit: lhci collect failed: {(done.stderr or done.stdout)[-500:]}")
        for report in sorted((out / ".lighthouseci").glob("lhr-*.json")):
            result = json.loads(report.read_text(encoding="utf-8"))
            page = result["requestedUrl"].split("/", 3)[3]
            runs.append({"round": number, "page": page, "hostBefore": {"loadAverage1m": load},
                         "metrics": {"total-blocking-time":
                                     result["audits"]["total-blocking-time"]["numericValue"]},
                         "lighthouse": result["lighthouseVersion"]})
        progress("audit", f"round {number} of {rounds} at load {load:.1f}")
    return runs


def derived(kept):
    loads = [one["hostBefore"]["loadAverage1m"] for one in kept["runs"]]
    return {**kept, "loadAverage1m": {"min": min(loads), "max": max(loads)},
            "blockingAgainstBare": {page: blocking_ratio(kept["runs"], page)
                                    for page in kept["pages"]}}


def kept_runs():
    try:
        kept = read_json(SCORES)
        assert kept["pages"] and all(one["metrics"]["total-blocking-time"] >= 0
                                     for one in kept["runs"])
    except (RecordingError, AssertionError, KeyError, TypeError) as error:
        sys.exit(f"audit: {SCORES.name} holds no runs to read again ({error}); run "
                 f"`make audit` to measure afresh")
    return kept


def main(argv=None):
    parser = OneLineParser(prog="benchmarks/lighthouse.py", description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "site")
    parser.add_argument("--rounds", type=int, default=24)
    parser.add_argument("--render-only", action="store_true",
                        help="read the kept runs again (no Lighthouse)")
    args = parser.parse_args(argv)
    if args.render_only:
        result = derived(kept_runs())
    else:
        pages = lesson_pages()
        if not LHCI.exists():
            sys.exit("audit: Lighthouse CI is not installed; run `make audit`")
        with tempfile.TemporaryDirectory(prefix="audit-") as scratch:
            runs = audited(args.site, pages, args.rounds, Path(scratch))
        result = derived({
            "pages": pages, "measuredAt": datetime.now(timezone.utc).isoformat("T", "seconds"),
            "settings": "lhci collect: Lighthouse's default mobile emulation and simulated "
                        "throttling, served compressed; every page once a round, the order "
                        "reversed every other round", "runs": runs})
    write_atomically(SCORES, json.dumps(result, indent=2, allow_nan=False) + "\n")
    for page in result["pages"]:
        progress("audit", f"{page}: {result['blockingAgainstBare'][page]['words']}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
