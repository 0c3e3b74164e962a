"""Digests of the files a derived file is made from. Imports no JAX.

Every derived file records the digests of its inputs (scripts/freshness.py compares them
with today's). Code inputs are import closures: a module plus every module of the same
repository it imports, followed transitively, so a change anywhere a lesson or a renderer
reaches counts, and a change elsewhere does not. A comment edit counts too: the pages show
this code. The pins count by their requirement lines, so reformatting a pin's comment
is no change.
"""
import ast
import hashlib
from pathlib import Path

from scripts import ROOT

# The direct pins and the frozen transitive versions: either can change what runs.
PINS = ("requirements.txt", "constraints.txt")
# Import closures stop at the repository's own packages.
PACKAGES = ("lesson_code", "scripts")


def module_file(name, root=ROOT):
    """The file behind a dotted module name of this repository, or None."""
    base = root / name.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def imported_names(path):
    for node in ast.walk(ast.parse(Path(path).read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def import_closure(path, root=ROOT, packages=PACKAGES):
    """`path` and the files of every repository module it imports, transitively, sorted.

    A file that is missing is kept in the result, so its absence shows as a change.
    """
    seen, todo = set(), [Path(path)]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if not current.exists():
            continue
        for name in imported_names(current):
            if name.split(".")[0] in packages:
                found = module_file(name, root)
                if found is not None:
                    todo.append(found)
    return sorted(seen)


def digest(path):
    """sha256 of a file's bytes; "missing" for a file that is not there."""
    path = Path(path)
    if not path.is_file():
        return "missing"
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pin_digest(path):
    """sha256 of a pin file's requirement lines, comments and blank lines dropped."""
    path = Path(path)
    if not path.is_file():
        return "missing"
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return hashlib.sha256("".join(f"{line}\n" for line in lines if line).encode()).hexdigest()


def file_digests(paths, root=ROOT):
    return {Path(p).relative_to(root).as_posix(): digest(p) for p in paths}


def content_files(module_path, root=ROOT, extra=()):
    """{relative path: digest} of what can change a recording: code closure plus pins."""
    files = {}
    for path in [module_path, *extra]:
        files.update(file_digests(import_closure(path, root), root))
    files.update({name: pin_digest(root / name) for name in PINS})
    return files


def combined_hash(digests):
    text = "".join(f"{name} {value}\n" for name, value in sorted(digests.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def content_hash(module_path, root=ROOT, extra=()):
    return combined_hash(content_files(module_path, root, extra))


def changed_files(recorded, current):
    """Names whose digest differs between two digest maps, for the stale message."""
    names = set(recorded) | set(current)
    return sorted(n for n in names if recorded.get(n) != current.get(n))
