"""Under every figure on a page, one line: links to its CSV and JSON, then what its
recording's header says (platform, devices, day, JAX, commit), or "modelled, not
measured". The line stays out of the search index, which every reader downloads.
"""
import html
import posixpath

from scripts.pages.recorded_text import human_date, read
from scripts.pages.recording_views import machine_label
from scripts.store.outputs import figure_data_outputs

DIGEST_CHARS = 8


def figure_data(lessons):
    """{figure's static SVG path: (its CSV output, its JSON output)} of every lesson."""
    found = {}
    for lesson in lessons.values():
        for output in figure_data_outputs(lesson):
            found.setdefault(output.figure, []).append(output)
    return {figure: tuple(outputs) for figure, outputs in found.items()}


def served_files(lessons, root):
    """Every file a data line links to that exists, relative to the repository root."""
    paths = {path for pair in figure_data(lessons).values() for output in pair
             for path in (output.path, output.recording or output.source, output.overlay) if path}
    return sorted(path for path in paths if (root / path).is_file())


def recorded(recording):
    """What the header says, in the words of the recordings' tabs (pages/recording_views)."""
    env = recording["environment"]
    what = ("simulated with NumPy, not measured, on" if recording["kind"] == "simulation"
            else "recorded on")
    commit = recording.get("commit")
    source = (f"commit {commit['sha'][:DIGEST_CHARS]}"
              + ("" if commit["clean"] else " and local changes")) if commit else \
        f"code digest {recording['contentHash'][:DIGEST_CHARS]} (no commit recorded)"
    return (f"{what} {machine_label(recording)} · {human_date(recording['generatedAt'])} · "
            f"JAX {env['jax']} · {source}")


def data_line(figure, base, sources):
    """The line's HTML for the figure at `figure` (its static SVG), or "" for no figure's;
    its links start at `base`, as the finished page's do (pages/page_location.py)."""
    outputs = figure_data(sources.lessons).get(figure)
    if outputs is None:
        return ""

    def recording(path):  # recordings/<stem>.json, or None: not made (yet)
        return path and read(sources, posixpath.basename(path).removesuffix(".json"))

    def link(path, text):
        href = html.escape(posixpath.relpath(path, base or "."))
        return f'<a href="{href}">{text}</a>'

    def file_link(path):
        return link(path, f"<code>{html.escape(posixpath.basename(path))}</code>")

    csv, data = outputs
    line = f"Data: {link(csv.path, 'CSV')}, {link(data.path, 'JSON')}, from "
    if data.recording is None:
        line += f"{file_link(data.source)}: modelled, not measured"
    else:
        through = " (through its analysis)" if data.source != data.recording else ""
        line += (f"{file_link(data.recording)}{through}, "
                 f"{html.escape(recorded(recording(data.recording).recording))}")
    if overlay := recording(data.overlay):  # a hardware run drawn over the model
        line += (f"; its markers from {file_link(data.overlay)}, "
                 f"{html.escape(recorded(overlay.recording))}")
    return f'<span class="figure-data" data-search-exclude>{line}</span>'
