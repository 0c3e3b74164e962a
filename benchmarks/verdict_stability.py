"""Do a page's words survive a re-measure? A benchmark, not a test (it measures).

    python benchmarks/verdict_stability.py --lesson ID --variant cpu-processes [--runs 3]
    python benchmarks/verdict_stability.py --lesson ID --variant sweep --recordings A.json B.json

Measures the variant `--runs` times afresh in a clone of HEAD (`record.py --all`,
`record.py --processes N --all`, or `bench.py`, as the variant asks), or takes the
recordings given; copies each into a clean clone, re-derives there (`record.py
--render-only`: analyses and figures, nothing measured), builds the site, and compares
the text of every page that reads the variant with every number masked. Numbers are
expected to move between runs; a word that moves (a verdict, "busy" for "idle") is the
noise deciding what the page says. Prints, per page, how many verdicts of each word its
tables hold, and a diff where the text differs; exits 1 if any page does.

Run it on a quiet host: a run whose start found other work on the cores says so on the
page, and that sentence differs from a quiet run's by design.
"""
import argparse
import difflib
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.plumbing.interrupts import run_command  # noqa: E402
from scripts.intervals import VERDICTS as INTERVAL_VERDICTS  # noqa: E402
from scripts.store.lessons import RegistryError, chosen_lessons, load_lessons  # noqa: E402
from scripts.store.outputs import for_lesson  # noqa: E402
from scripts.store.recordings import RecordingError, load_recording  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VERDICTS = (*INTERVAL_VERDICTS, "not applicable")
ARTICLE = re.compile(r"<article\b.*?</article>", re.S)


def masked_text(page_html):
    """The article's text, whitespace folded and every number written as N."""
    found = ARTICLE.search(page_html)
    body = found.group(0) if found else page_html
    text = html.unescape(re.sub(r"<[^>]+>", " ", body))
    # A sign is part of its number: "(-3–5)" and "(2–5)" read alike.
    return re.sub(r"[-−]?\d[\d,.]*", "N", re.sub(r"\s+", " ", text)).strip()


def table_verdicts(page_html):
    """The verdicts a page shows in its tables: every cell that is one verdict word."""
    cells = (html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
             for cell in re.findall(r"<td\b[^>]*>(.*?)</td>", page_html, re.S))
    return [cell for cell in cells if cell in VERDICTS]


def pages_reading(root, lesson_id, variant):
    """The built pages (relative to the site) whose source reads `rec:<id>.<variant>`."""
    needle = re.compile(rf"rec:{re.escape(lesson_id)}\.{re.escape(variant)}[.:]")
    pages = []
    for source in sorted((root / "docs").rglob("*.md")):
        if needle.search(source.read_text(encoding="utf-8")):
            relative = source.relative_to(root / "docs").with_suffix("")
            folder = relative.parent if relative.name == "index" else relative
            pages.append((folder / "index.html").as_posix())
    return pages


def measure_command(lesson, variant):
    """The command that measures `variant` afresh, as its fix says."""
    if variant == "sweep":
        return ["scripts/bench.py", "--lesson", lesson.id]
    if variant.endswith("-processes"):
        return ["scripts/record.py", "--processes", "4", "--all", "--lesson", lesson.id]
    return ["scripts/record.py", "--all", "--lesson", lesson.id]


def run(command, cwd):
    env = {key: value for key, value in os.environ.items()
           if key not in ("JAX_PLATFORMS", "JAX_NUM_CPU_DEVICES")}
    env["NO_MKDOCS_2_WARNING"] = "1"
    done = subprocess.run([sys.executable, *command], cwd=cwd, env=env, capture_output=True,
                          text=True)
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
        sys.exit(f"verdict_stability: `{' '.join(command)}` failed in {cwd}: {last[0]}")


def clone(into):
    """A clone of HEAD, with this checkout's node_modules linked: the build typesets its
    formulas with Temml (scripts/pages/typeset.cjs), which a clone does not have."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(into)], check=True)
    if (ROOT / "node_modules").is_dir():
        (into / "node_modules").symlink_to(ROOT / "node_modules")
    return into


def measured(lesson, variant, runs, scratch):
    """`runs` fresh recordings of `variant`, measured one after another in one clone."""
    copy = clone(scratch / "measure")
    name = for_lesson(lesson).recording(variant)
    found = []
    for number in range(runs):
        print(f"verdict_stability: measuring {variant}, run {number + 1} of {runs}",
              file=sys.stderr, flush=True)
        run(measure_command(lesson, variant), copy)
        kept = scratch / f"{variant}.{number + 1}.json"
        shutil.copy(copy / name, kept)
        found.append(kept)
    return found


def page_texts(lesson, variant, recording, pages, scratch, number):
    """Each page's (masked text, table verdicts), built in a clean clone from `recording`."""
    copy = clone(scratch / f"derive{number}")
    shutil.copy(recording, copy / for_lesson(lesson).recording(variant))
    run(["scripts/record.py", "--render-only"], copy)
    run(["-m", "mkdocs", "build", "--strict", "--site-dir", str(copy / "site")], copy)
    built = {page: (copy / "site" / page).read_text(encoding="utf-8") for page in pages}
    return {page: (masked_text(text), table_verdicts(text)) for page, text in built.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lesson", help="a lesson id (default: the registry's first)")
    parser.add_argument("--variant", required=True,
                        help="the recording to re-measure: cpu, cpu-processes or sweep")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--recordings", nargs="+", type=Path,
                        help="compare these recordings instead of measuring afresh")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="copy the measured recordings into DIR (to read them again "
                             "with --recordings after an analysis change)")
    args = parser.parse_args(argv)
    try:
        lesson = chosen_lessons(load_lessons(), args.lesson)[0]
    except RegistryError as error:
        sys.exit(f"verdict_stability: {error}")
    pages = pages_reading(ROOT, lesson.id, args.variant)
    if not pages:
        sys.exit(f"verdict_stability: no page under docs/ reads rec:{lesson.id}."
                 f"{args.variant}; pass a variant a page reads")
    if args.recordings and len(args.recordings) < 2 or not args.recordings and args.runs < 2:
        sys.exit("verdict_stability: comparing needs at least two runs; pass --runs 3")
    for recording in args.recordings or ():  # each read as the build would, before cloning
        try:
            load_recording(recording, fix=None, lesson=lesson)
        except RecordingError as error:
            sys.exit(f"verdict_stability: {error.what}; pass --recordings files that are "
                     f"valid {lesson.id} recordings")
    with tempfile.TemporaryDirectory(prefix="verdict-stability-") as scratch:
        scratch = Path(scratch)
        recordings = args.recordings or measured(lesson, args.variant, args.runs, scratch)
        if args.keep and not args.recordings:
            args.keep.mkdir(parents=True, exist_ok=True)
            for recording in recordings:
                shutil.copy(recording, args.keep / recording.name)
        texts = [page_texts(lesson, args.variant, recording, pages, scratch, number)
                 for number, recording in enumerate(recordings)]
    differing = 0
    for page in pages:
        first, verdicts = texts[0][page]
        same = all(found[page][0] == first for found in texts)
        differing += not same
        counted = ", ".join(f"{verdicts.count(word)} {word}" for word in VERDICTS
                            if word in verdicts)
        print(f"{page}: {len(verdicts)} verdicts in its tables ({counted or 'none'}); "
              f"masked text {'identical' if same else 'DIFFERS'} across {len(texts)} runs")
        for number, found in enumerate(texts[1:], start=2):
            for line in difflib.unified_diff(first.split(". "), found[page][0].split(". "),
                                             "run 1", f"run {number}", lineterm="", n=0):
                print(f"  {line[:300]}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(run_command(main))
