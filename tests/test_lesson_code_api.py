"""What every lesson file holds to, read from its syntax tree in one pass over lesson_code/:
JAX's public API only (the next JAX may move anything under `jax._src`), the replication
check never off, and snippet markers that pair, each section once."""
import ast
import re

from conftest import ROOT

MODULES = sorted((ROOT / "lesson_code").rglob("*.py"))


def private_uses(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            names = ["jax._src"] if isinstance(node, ast.Attribute) and node.attr == "_src" else []
        if any(f"{name}.".startswith("jax._src.") for name in names):
            yield node.lineno


def test_the_check_sees_each_way_in():
    code = ("from jax._src import mesh_utils\nimport jax._src.lax\nx = jax._src.config\n"
            "from jax import _src\n")
    assert sorted(set(private_uses(ast.parse(code)))) == [1, 2, 3, 4]
    assert list(private_uses(ast.parse('URL = "jax/_src/mesh_utils.py"'))) == []
    assert marker_problems("x.py", "# --8<-- [start:a]\n# --8<-- [start:b]\n") == [
        "x.py:2: b opens in a or again", "x.py: section b never ends"]


def marker_problems(name, text):
    problems, open_name, seen = [], None, []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not re.search(r"--8<--\s*\[", line):  # prose may name the marker itself
            continue
        marker = re.fullmatch(r"# --8<-- \[(start|end):([\w-]+)\]", line.strip())
        if not marker:
            problems.append(f"{name}:{lineno}: malformed marker {line!r}")
            continue
        kind, section = marker.groups()
        where = f"{name}:{lineno}: {section}"
        if kind == "start" and (open_name is not None or section in seen):
            problems.append(f"{where} opens in {open_name} or again")
        elif kind == "end" and open_name != section:
            problems.append(f"{where} closes {open_name}")
        open_name = section if kind == "start" else None
        seen.append(section)
    return problems + ([f"{name}: section {open_name} never ends"] if open_name else [])


def test_no_lesson_file_reaches_private_jax_or_turns_the_replication_check_off():
    problems = []
    for module in MODULES:
        name, text = module.relative_to(ROOT).as_posix(), module.read_text(encoding="utf-8")
        tree = ast.parse(text)
        uses = sorted(set(private_uses(tree)))
        problems += [f"{name} reaches jax._src on lines {uses}"] if uses else []
        switched_off = [node.lineno for node in ast.walk(tree)
                        if isinstance(node, ast.keyword) and node.arg in ("check_vma", "check_rep")
                        and isinstance(node.value, ast.Constant) and node.value.value is False]
        problems += [f"{name}: check_vma=False on lines {switched_off}"] if switched_off else []
        problems += marker_problems(name, text)
    assert problems == []
