"""Which files make a recording or a figure, and their hashes. Imports no JAX.

A recording is current while its contentHash equals content_hash(...) of the code that
would produce it today. The hash covers the lesson's own module, every lesson_code/
module it imports (transitively), and the pinned versions (requirements.txt and
constraints.txt). A comment
edit counts: the pages show this code, so what readers see has changed.
"""
import ast
import hashlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "lesson_code"
# The direct pins and the frozen transitive versions: either can change what runs.
PINS = ("requirements.txt", "constraints.txt")
LESSON_ID_LINE = re.compile(r'^LESSON_ID\s*=\s*["\']([\w.-]+)["\']\s*$', re.MULTILINE)


def discover_lessons(root=ROOT):
    """{lesson id: module path} for every lesson_code/ module that declares LESSON_ID.

    Read as text, not imported: importing a lesson would start JAX.
    """
    lessons = {}
    for path in sorted((root / PACKAGE).glob("*.py")):
        match = LESSON_ID_LINE.search(path.read_text())
        # A module that imports LESSON_ID (a runner, a scaffold) is not the lesson itself.
        if match and not path.stem.endswith(("_rank", "_exercises")):
            lessons[match.group(1)] = path
    return lessons


def local_imports(path, root=ROOT):
    """lesson_code modules that `path` imports, followed transitively, `path` included."""
    seen, todo = set(), [Path(path).resolve()]
    while todo:
        current = todo.pop()
        if current in seen or not current.exists():
            continue
        seen.add(current)
        for node in ast.walk(ast.parse(current.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                if name.split(".")[0] == PACKAGE:
                    candidate = root / (name.replace(".", "/") + ".py")
                    todo.append(candidate.resolve())
    return sorted(seen)


def pinned_versions(root=ROOT):
    """The requirement lines without comments: reformatting the comments is no change."""
    lines = (line.split("#")[0].strip() for name in PINS if (root / name).exists()
             for line in (root / name).read_text().splitlines())
    return sorted(line for line in lines if line)


def file_digests(paths, root=ROOT):
    return {Path(p).resolve().relative_to(root).as_posix():
            hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths}


def combined_hash(digests, extra_lines=()):
    text = "".join(f"{name} {digest}\n" for name, digest in sorted(digests.items()))
    text += "".join(f"{line}\n" for line in extra_lines)
    return hashlib.sha256(text.encode()).hexdigest()


def content_files(module_path, root=ROOT):
    """{relative path: sha256} of the code that can change a recording's output."""
    return file_digests(local_imports(module_path, root), root)


def content_hash(module_path, root=ROOT):
    return combined_hash(content_files(module_path, root), pinned_versions(root))


def renderer_hash(renderer_paths, root=ROOT):
    return combined_hash(file_digests(renderer_paths, root))


def changed_files(recorded, current):
    """Paths whose digest differs between two content_files() maps, for stale notices."""
    names = set(recorded) | set(current)
    return sorted(n for n in names if recorded.get(n) != current.get(n))
