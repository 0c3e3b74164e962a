"""Lighthouse on the built page of the registry's first lesson: a benchmark (`make audit`),
not a test.

    python scripts/audit/lighthouse.py [--site site] [--runs 5]

Serves the built site the way `python -m http.server` does (no compression), runs
Lighthouse 12.2.3 (scripts/audit/package.json) with Debian's chromium through CHROME_PATH,
default mobile emulation and simulated throttling, and writes every run and the median of
each score to scripts/audit/scores.json. Scores move between identical runs on a busy
machine, which is why this is a benchmark to run by hand and commit, never a test.
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
LIGHTHOUSE = HERE / "node_modules" / ".bin" / "lighthouse"
CHROMIUM = "/usr/bin/chromium"
SCORES = HERE / "scores.json"


def first_lesson_page(root=ROOT):
    """The page of the registry's first lesson (lesson_code/lessons.toml): the one audited."""
    import tomllib

    registry = (root / "lesson_code" / "lessons.toml").read_text(encoding="utf-8")
    lessons = tomllib.loads(registry)["lesson"]
    return f"lessons/{lessons[0]['id']}/"


PAGE = first_lesson_page()
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "site")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    if not (args.site / PAGE / "index.html").exists():
        sys.exit(f"audit: {args.site}/{PAGE}index.html not found; run `make build` first")
    if not LIGHTHOUSE.exists():
        sys.exit("audit: Lighthouse is not installed; run `make audit` (it installs "
                 "scripts/audit/node_modules)")
    if not Path(CHROMIUM).exists():
        sys.exit(f"audit: {CHROMIUM} is missing; run `make browser` as root")
    server = serve(args.site)
    try:
        url = f"http://127.0.0.1:{server.server_port}/{PAGE}"
        runs = []
        for number in range(args.runs):
            runs.append(one_run(url))
            print(f"audit: run {number + 1}: {runs[-1]['scores']}", file=sys.stderr)
    finally:
        server.shutdown()
    median = {name: statistics.median(run["scores"][name] for run in runs)
              for name in CATEGORIES}
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    result = {"page": PAGE, "measuredAt": now,
              "settings": "Lighthouse default mobile emulation, simulated throttling, "
                          "served uncompressed by Python's http.server",
              "lighthouse": runs[0]["lighthouse"], "chromium": runs[0]["chromium"],
              "medianScores": median, "runs": runs}
    scratch = SCORES.with_suffix(".json.tmp")
    scratch.write_text(json.dumps(result, indent=2) + "\n")
    scratch.replace(SCORES)  # a failed run never leaves half a file behind
    print(f"audit: median {median}; wrote {SCORES.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
