"""How long `mkdocs serve` takes to show a one-sentence edit to a page: a benchmark.

    python benchmarks/serve_edit.py [--root PATH] [--rounds 5]

Serves the project at --root (default: this checkout), appends a sentence to its first
lesson's page, and prints the median seconds from an edit until the served page shows it:
the server noticing the edit (it polls every 0.5 s), the rebuild, and the reply. The page
is put back as it was.
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.runners.processes import free_port  # noqa: E402
from scripts.store.lessons import load_lessons  # noqa: E402


def fetched(url):
    with urllib.request.urlopen(url, timeout=120) as answer:  # held while a rebuild runs
        return answer.read().decode("utf-8")


def wait_for(condition, what, timeout):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"mkdocs serve: no {what} within {timeout} s")
        time.sleep(0.05)


def edit_to_rebuild_seconds(root, rounds=3, timeout=300):
    """Start `mkdocs serve` in the project at `root` on a free port, append a sentence to
    its first lesson's page `rounds` times (a new one each time), and return the median of
    the seconds from an edit until the served page shows it. The server's first build is
    not timed; the page is put back as it was."""
    root = Path(root)
    lesson = next(iter(load_lessons(root)))
    page = root / "docs" / "lessons" / f"{lesson}.md"
    port = free_port()
    url = f"http://127.0.0.1:{port}/lessons/{lesson}/"
    original = page.read_bytes()
    with tempfile.TemporaryFile("w+") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "mkdocs", "serve", "--dev-addr", f"127.0.0.1:{port}"],
            cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
        try:
            wait_for(lambda: log.seek(0) or "Serving on" in log.read() or server.poll(),
                     "first build", timeout)
            if server.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"mkdocs serve ended: {log.read()[-2000:]}")
            seconds = []
            for number in range(rounds):
                sentence = f"A sentence added by the benchmark, number {number} of {time.time()}."
                page.write_bytes(original + f"\n{sentence}\n".encode())
                start = time.perf_counter()
                wait_for(lambda: sentence in fetched(url), "rebuilt page", timeout)
                seconds.append(time.perf_counter() - start)
            return statistics.median(seconds)
        finally:
            page.write_bytes(original)
            try:  # the server's whole group: what it started must not outlive it
                os.killpg(server.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            server.wait(timeout=60)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    seconds = edit_to_rebuild_seconds(args.root, args.rounds)
    print(f"edit to rebuilt page: median {seconds:.2f} s of {args.rounds} edits "
          f"(load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
