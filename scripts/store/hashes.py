"""Digests of the files a derived file is made from: import closures within this repository,
a recording keyed on its code as executed (the syntax tree less comments and docstrings),
the notebook on the text itself, and the requirement lines that can change a recording.
"""
import ast
import hashlib
import re
from functools import lru_cache
from pathlib import Path

from scripts import ROOT, display

PINS = ("requirements.txt", "constraints.txt")
# Read only to know which packages are tools: the tests' and linter's, the benchmarks'.
TOOL_PINS = ("requirements-test.txt", "benchmarks/requirements.txt")
# The sections of requirements.txt whose packages run while a recording is made.
RECORDING_SECTIONS = ("lesson runtime", "recording and notebook companion")
SECTION = re.compile(r"#\s*---\s*(.*?)\s*-*\s*$")
PACKAGES = ("lesson_code", "scripts")  # where import closures stop


class ClosureError(ValueError):
    """A module of an import closure cannot be read as Python; str() is one line."""


def without_docstrings(tree):
    """`tree` less every docstring (the parser already dropped the comments)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and ast.get_docstring(node, clean=False) is not None:
            node.body = node.body[1:] or [ast.Pass()]
    return tree


def module_facts(path, root=ROOT):
    """(digest of the code as executed, [imported names]); ClosureError if it does not parse."""
    try:
        return facts_of_source(Path(path).read_bytes())
    except UnicodeDecodeError as error:
        raise ClosureError(f"{display(path, root)}: not UTF-8 (byte {error.start}); save it "
                           f"as UTF-8") from None
    except (SyntaxError, ValueError) as error:
        line = getattr(error, "lineno", None)
        raise ClosureError(f"{display(path, root)}: not valid Python"
                           f"{f' (line {line}: {error.msg})' if line else ''}; fix that "
                           f"file") from None


@lru_cache(maxsize=None)
def facts_of_source(data):
    """module_facts of a file's bytes, once per process: every figure reaches the same helpers."""
    tree = ast.parse(data.decode("utf-8"))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return digest_bytes(ast.dump(without_docstrings(tree))), tuple(names)


def code_digest(path):
    """sha256 of a module's code as executed (module_facts); "missing" when not there."""
    return module_facts(path)[0] if Path(path).is_file() else "missing"


def import_closure(path, root=ROOT):
    """`path` and every repository module it imports, transitively; a missing one is kept."""
    seen, todo = set(), [Path(path)]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if not current.exists():
            continue
        for name in module_facts(current, root)[1]:
            if name.split(".")[0] in PACKAGES:
                base = root / name.replace(".", "/")
                for found in (base.with_suffix(".py"), base / "__init__.py"):  # module, package
                    if found.exists():
                        todo.append(found)
                        break
    return sorted(seen)


def digest_bytes(data):
    """sha256 hex digest of bytes, or of text as UTF-8: the one digest every output uses."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def digest(path):
    return digest_bytes(Path(path).read_bytes()) if Path(path).is_file() else "missing"


def package_name(line):
    """`mkdocs-material==9.8.2` -> `mkdocs-material`, normalised as pip compares names."""
    name = re.split(r"[\s<>=!~;\[@]", line, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_sections(path):
    """{section title: [requirement lines]} of a pin file (`# --- title ---` rules), or {}."""
    sections, current = {}, ""
    for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
        if heading := SECTION.match(line.strip()):
            current = heading.group(1)
        elif requirement := line.split("#")[0].strip():
            sections.setdefault(current, []).append(requirement)
    return sections


def pin_digests(root=ROOT):
    """{pin file: sha256 of the lines that can change a recording, or "missing"}: those of
    requirements.txt's recording sections, and every transitive version but the site's,
    tests' and lint's packages (a needless re-record beats a stale one shown as current)."""
    requirements, constraints = (requirement_sections(root / name) for name in PINS)
    others = [requirements, *(requirement_sections(root / name) for name in TOOL_PINS)]
    tools = {package_name(line) for sections in others for title, pinned in sections.items()
             if title not in RECORDING_SECTIONS for line in pinned}
    lines = {PINS[0]: [line for title in RECORDING_SECTIONS
                       for line in requirements.get(title, [])],
             PINS[1]: [line for pinned in constraints.values() for line in pinned
                       if package_name(line) not in tools]}
    return {name: digest_bytes("".join(f"{line}\n" for line in lines[name]))
            if (root / name).is_file() else "missing" for name in PINS}


def file_digests(paths, root=ROOT):
    return {Path(p).relative_to(root).as_posix(): digest(p) for p in paths}


def content_files(module_path, root=ROOT, extra=()):
    """{relative path: digest} of what can change a recording: the module's code closure,
    the closures of `extra` (code whose results the recording stores), each keyed on its
    code as executed, and the pins."""
    return {**{Path(p).relative_to(root).as_posix(): code_digest(p)
               for path in [module_path, *extra] for p in import_closure(path, root)},
            **pin_digests(root)}


def combined_hash(digests):
    return digest_bytes("".join(f"{name} {value}\n" for name, value in sorted(digests.items())))


def changed_files(recorded, current):
    """Names whose digest differs between two digest maps, for the stale message."""
    return sorted(n for n in set(recorded) | set(current) if recorded.get(n) != current.get(n))
