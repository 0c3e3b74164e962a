"""A lesson's executed recordings on a page: one tab each, or one table row each. Every
recorded string goes in through values.hold, never read as Markdown.
"""
from scripts.pages.recorded_text import PageError, human_date, read
from scripts.store.outputs import RECORD as FIX
from scripts.store.outputs import recording_fix


def machine_label(recording):
    """"CPU · 4 devices", "CPU · 4 processes"; a sweep names the counts its rows hold."""
    env = recording["environment"]
    if recording["kind"] == "compiled":  # nothing ran (scripts/hardware/compile.py)
        return f"compiled for {env['backend'].upper()}, on a CPU host"
    processes = env.get("processCount", 1)
    ranks = sorted({row["ranks"] for row in recording.get("rows", [])})
    units = f"{processes} processes" if processes > 1 else f"{env['deviceCount']} devices" \
        if "deviceCount" in env else f"{count_words(ranks)} devices" if ranks else None
    label = env["backend"].upper() + (f" · {units}" if units else "")  # a simulation: "CPU"
    kind = env.get("deviceKind", env["backend"])
    # "CPU · 4 devices · cpu" says cpu twice; a TPU's kind ("TPU v5 lite") says more.
    return label if kind.lower() == env["backend"].lower() else f"{label} · {kind}"


def count_words(numbers):
    """[2, 4, 8] -> "2, 4 and 8"."""
    words = [str(number) for number in numbers]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def executed_recordings(lesson_id, sources, every_kind=False):
    """The executed recordings of a lesson (of every lesson when `lesson_id` is None), or
    its recordings of every kind (an analysis has none), as freshness.Loaded values."""
    ids = list(sources.lessons) if lesson_id is None else [lesson_id]
    chosen = [loaded for name in ids for loaded in read(sources, f"{name}.*").values()
              if loaded.recording.get("kind") == "executed"
              or every_kind and "kind" in loaded.recording]
    # Lesson by lesson in the registry's order, the CPU recording first: every reader can
    # reproduce it.
    order = {name: number for number, name in enumerate(ids)}
    chosen.sort(key=lambda loaded: (order.get(loaded.recording["lessonId"], len(order)),
                                    loaded.recording["environment"]["backend"] != "cpu",
                                    loaded.recording["environment"].get("processCount", 1),
                                    loaded.stem))
    if not chosen:
        raise PageError(f"no recording of {lesson_id}; run `{FIX}`")
    return chosen


def recording_table(lesson_id, sources, values):
    rows = ["| recording | provenance | ran on | recorded | JAX | status |",
            "|---|---|---|---|---|---|"]
    for loaded in executed_recordings(lesson_id, sources, every_kind=True):
        recording, env = loaded.recording, loaded.recording["environment"]
        # How many inputs changed, not their names (the recording's tab names them): two
        # file names kept the table wider than a 1280 px page.
        count = len(loaded.stale)
        status = f"stale: {count} input{'s' * (count > 1)} changed" if count else "current"
        cells = [*(f"`{values.hold(code)}`" for code in (loaded.path, recording["provenance"])),
                 *map(values.hold, (machine_label(recording), human_date(recording["generatedAt"]),
                                    env["jax"])), status]
        rows.append(f"| {' | '.join(cells)} |")
    return "\n".join(rows) + "\n"  # a table ends at a blank line, whatever follows


def recording_tabs(lesson_id, sources, values):
    blocks = []
    for loaded in executed_recordings(lesson_id, sources):
        recording, env = loaded.recording, loaded.recording["environment"]
        date = human_date(recording["generatedAt"])
        label = f"{machine_label(recording)} · {date} · JAX {env['jax']}"
        lines = [f'=== "{values.hold(label)}"', "", *stale_warning(loaded, sources, values, "    ")]
        lines += [f"    *Provenance:* `{values.hold(recording['provenance'])}` · recorded "
                  f"{values.hold(date)} · {values.hold(env['deviceCount'])} × "
                  f"{values.hold(env.get('deviceKind', '?'))} · "
                  f"NumPy {values.hold(env['numpy'])} · "
                  f"`{values.hold(' '.join(recording.get('command', [])))}`", "",
                  # A fence around a marker: the recorded text arrives after Markdown.
                  "    ```text", "    " + values.hold(recording["stdout"].rstrip("\n")),
                  "    ```", ""]
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def stale_warning(loaded, sources, values, indent=""):
    """The lines that say a recording was made from code that changed since (none while
    it is current): what a page prints from it is what that older code gave."""
    if loaded is None or not loaded.stale:
        return []
    changed = ", ".join(f"`{values.hold(name)}`" for name in loaded.stale)
    fix = recording_fix(sources.lessons, loaded.stem)
    return [f'{indent}!!! warning "Stale recording"',
            f"{indent}    Made from older code: {changed} changed since. What is printed "
            f"from `{values.hold(loaded.path)}` is what that older code gave; run "
            f"`{values.hold(fix)}` to refresh it.", ""]
