"""The course on the site: the lessons' list (`{{ lessons }}`), unlisted lessons in the nav,
and each lesson page's downloads.
"""
import posixpath

from scripts.chips import accelerators_for
from scripts.pages.recorded_text import read
from scripts.store.hashes import import_closure
from scripts.store.outputs import for_lesson, recording_outputs


def lesson_title(lesson, docs):
    """The first heading of the lesson's page (docs/lessons/<id>.md), else its id."""
    page = docs / "lessons" / f"{lesson.id}.md"
    heading = next((line[2:].strip() for line in page.read_text(encoding="utf-8").splitlines()
                    if line.startswith("# ")), None) if page.is_file() else None
    return heading or lesson.id


def nav_paths(nav):
    for item in nav or []:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            yield from nav_paths(value)
        else:
            yield value


def add_unlisted_lessons(nav, lessons, docs):
    """Put each lesson the nav does not list after the last it does (with its notebook, if
    the nav lists that): a new one needs no nav."""
    if nav is None:
        return  # no nav: mkdocs lists every page itself
    listed = set(nav_paths(nav))
    pages = {page for lesson in lessons.values()
             for page in (f"lessons/{lesson.id}.md", for_lesson(lesson).notebook_page)}
    where = max((number + 1 for number, item in enumerate(nav) if set(nav_paths([item])) & pages),
                default=min(1, len(nav)))
    for lesson in lessons.values():
        page, notebook = f"lessons/{lesson.id}.md", for_lesson(lesson).notebook_page
        if page in listed or not (docs / page).is_file():
            continue  # listed already, or no page yet (the strict build names it)
        title = lesson_title(lesson, docs)
        entries = [{f"Lesson: {title}": page}]
        if notebook not in listed and (docs / notebook).is_file():
            entries.append({f"Notebook: {title}": notebook})
        nav[where:where] = entries
        where += len(entries)


def downloadable_files(lesson):
    """The lesson's program, then the exercise scaffold a learner edits
    (`<lesson module>_exercises`) if there is one, then each of its recordings, relative to
    the repository root."""
    scaffold = lesson.path(f"{lesson.module}_exercises")
    paths = [lesson.path(), scaffold] if scaffold.is_file() else [lesson.path()]
    return [*(path.relative_to(lesson.root).as_posix() for path in paths),
            *(output.path for output in recording_outputs(lesson, lesson.root)
              if (lesson.root / output.path).is_file())]


def downloads(lesson, page_uri, docs):
    """The lesson page's last section: its program, scaffold, notebook and recordings."""
    here = posixpath.dirname(page_uri)

    def link(path):
        return f"[`{posixpath.basename(path)}`]({posixpath.relpath(path, here)}){{ download }}"

    def item(path, what):
        file = lesson.root / path
        # It runs alone when it imports nothing else of this repository.
        how = (f"; it runs on its own (`python {posixpath.basename(path)}`)"
               if import_closure(file, lesson.root) == [file]
               else ", run from a checkout of the repository (it imports other modules)")
        return f"- {link(path)}: {what}{how}"

    program, *files = downloadable_files(lesson)
    scaffold = [path for path in files if path.endswith(".py")]
    lines = ["", "", "## Downloads", "", item(program, "the lesson program")]
    if scaffold:
        lines.append(item(scaffold[0], "the exercise scaffold you fill in")
                     + f"; `python scripts/exercises.py --lesson {lesson.id}` checks it")
    if (docs / for_lesson(lesson).notebook_page).is_file():  # beside its page (site_files.py)
        lines.append(f"- {link(f'notebooks/{lesson.id}/{lesson.id}.ipynb')}: the notebook "
                     f"companion, executed by `scripts/record.py`")
    if recordings := [path for path in files if path.endswith(".json")]:
        lines.append(f"- {', '.join(map(link, recordings))}: the recordings, what each run "
                     f"measured and what each program compiles to")
    return "\n".join(lines) + "\n"


def lesson_list(sources, values, folder):
    """The `{{ lessons }}` directive: one entry per lesson, its links from `folder`, that of
    the page the list is on (below docs/)."""
    def link(path):
        return posixpath.relpath(path, folder or ".")

    items = []
    for lesson in sources.lessons.values():
        program = lesson.path().relative_to(lesson.root).as_posix()
        parts = [f"**[{lesson_title(lesson, sources.docs)}]({link(f'lessons/{lesson.id}.md')})**"
                 f" (`{values.hold(lesson.id)}`, on {lesson.devices} logical CPU devices)"]
        notebook = for_lesson(lesson).notebook_page
        if (sources.docs / notebook).is_file():
            parts.append(f"[notebook companion]({link(notebook)})")
        parts.append(f"[the program]({link(program)}) (`python -m`{{ .nowrap }} "
                     f"`{lesson.module}`)")
        tpu = "recorded there" if read(sources, for_lesson(lesson).stem("tpu")) else \
            "not yet recorded on TPU"
        vms = accelerators_for(lesson.devices)
        parts.append(f"on a TPU VM with {lesson.devices} chips (`{vms[0]}`) it takes "
                     f"`--platform tpu`{{ .nowrap }} ({tpu})" if vms else
                     f"no single-host TPU VM has {lesson.devices} chips")
        items.append("- " + " · ".join(parts))
    return "\n".join(items)
