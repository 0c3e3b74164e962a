"""Lesson code reaches JAX through its public API only.

A reader copies these modules into their own programs, and the next JAX release may move
anything under `jax._src` without notice. So no module under lesson_code/ imports from it
or reaches it as an attribute. A citation of JAX's source file in a string is a pointer for
the reader, not a use, so the check reads the code (its syntax tree), not its text.
"""
import ast

import pytest

from conftest import ROOT

MODULES = sorted((ROOT / "lesson_code").rglob("*.py"))


def private_uses(tree):
    """Each `jax._src` the code imports or names, as its line number and text."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jax._src"):
            yield node.lineno, f"from {node.module} import ..."
        elif isinstance(node, ast.ImportFrom) and node.module == "jax" and \
                any(alias.name == "_src" for alias in node.names):
            yield node.lineno, "from jax import _src"
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, f"import {alias.name}") for alias in node.names
                        if alias.name.startswith("jax._src"))
        elif isinstance(node, ast.Attribute) and node.attr == "_src":
            yield node.lineno, f"{ast.unparse(node)}"


def test_the_check_sees_each_way_in():
    code = ("from jax._src import mesh_utils\nimport jax._src.lax\nx = jax._src.config\n"
            "from jax import _src\n")
    assert sorted(line for line, _ in private_uses(ast.parse(code))) == [1, 2, 3, 4]
    assert list(private_uses(ast.parse('URL = "jax/_src/mesh_utils.py"'))) == []


@pytest.mark.parametrize("module", MODULES, ids=lambda path: path.name)
def test_lesson_code_uses_no_private_jax(module):
    uses = list(private_uses(ast.parse(module.read_text(encoding="utf-8"))))
    assert uses == [], f"{module.relative_to(ROOT)} reaches jax._src: {uses}"
