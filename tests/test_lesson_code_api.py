"""Lesson code reaches JAX through its public API only: the next JAX may move anything under
`jax._src`. A citation in a string is not a use: the check reads the syntax tree."""
import ast

import pytest

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


@pytest.mark.parametrize("module", MODULES, ids=lambda path: path.name)
def test_lesson_code_uses_no_private_jax(module):
    uses = sorted(set(private_uses(ast.parse(module.read_text(encoding="utf-8")))))
    assert uses == [], f"{module.relative_to(ROOT)} reaches jax._src on lines {uses}"
