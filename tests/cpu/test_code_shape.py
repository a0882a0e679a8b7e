"""The training drivers stay thin: no function body (its statements, after the docstring) over
80 lines in the training modules, and ``train`` itself under 60 — the shape issue 27 gave them,
kept by a test so that the next feature does not grow a hub again."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dgboost

PACKAGE = Path(dgboost.__file__).parent
_THIN_MODULES = ["training.py", "_training_job.py", "grower.py", "dask/training.py", "callback.py", "cv.py"]


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the end of the function."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            body = body[1:]
    return 0 if not body else node.end_lineno - body[0].lineno + 1


def _functions(path: Path) -> dict[str, int]:
    tree = ast.parse(path.read_text())
    return {
        f"{node.name}@{node.lineno}": _body_lines(node)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


@pytest.mark.parametrize("module", _THIN_MODULES)
def test_no_function_body_in_a_training_module_is_over_80_lines(module):
    long = {name: n for name, n in _functions(PACKAGE / module).items() if n > 80}
    assert long == {}, f"{module}: functions over 80 lines: {long}"


def test_train_itself_is_under_60_lines():
    (train,) = [n for name, n in _functions(PACKAGE / "training.py").items() if name.startswith("train@")]
    assert train < 60


def test_the_line_count_sees_a_long_function():
    source = "def f():\n    '''doc'''\n" + "    x = 1\n" * 81
    (node,) = ast.parse(source).body
    assert _body_lines(node) == 81
