"""core/ik keeps one home per job: no solver module imports another solver module (issue 31).

The solvers of the SOLVERS table share what they need through base.py, least_squares.py and
arc.py; a solver reaching into another (FABRIK's start, DLS's finish) is what this test refuses.
"""

from __future__ import annotations

import ast
import sys

from tests.conftest import ROOT


def _relative_imports(path) -> set[str]:
    """The sibling modules a module imports (``from .x import ...`` and ``from . import x``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                names.add(node.module.split(".")[0])
            else:
                names.update(alias.name for alias in node.names)
    return names


def test_no_ik_solver_imports_another_solver():
    sys.path.insert(0, str(ROOT))
    from core.ik import SOLVERS

    solver_modules = {cls.__module__.rsplit(".", 1)[1] for cls in SOLVERS.values()}
    assert solver_modules == {"ccd", "fabrik", "dls"}
    for name in solver_modules:
        others = _relative_imports(ROOT / "core" / "ik" / f"{name}.py") & (solver_modules - {name})
        assert not others, f"core/ik/{name}.py imports the solver module(s) {sorted(others)}"
