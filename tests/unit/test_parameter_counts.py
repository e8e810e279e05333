"""No function or method in the product code takes more than ``MAX_PARAMETERS`` parameters.

Parameters that travel together belong in one settings or request object (issue 28). The
count leaves out ``self``/``cls`` and counts ``*args`` and ``**kwargs`` as one each. Skipped:
generated gRPC stubs (``*_pb2.py``, ``*_pb2_grpc.py``) and CLI command functions (a Typer or
Click command's parameters are its options: a decorator ``….command``/``….callback``, a
registration ``app.command(…)(fn)``, or a parameter declared with ``typer.``/``click.``).

``ALLOWED`` is a ratchet: functions that still exceed the limit, with their count today. It
may only shrink: the test fails when a listed function grows, when one not listed exceeds the
limit, and when a listed one is gone or at the limit (so the list is trimmed with the fix).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("evoharness", "evoharness_app", "workflows", "services", "harness_registry")
MAX_PARAMETERS = 8
GENERATED_SUFFIXES = ("_pb2.py", "_pb2_grpc.py")
CLI_MARKERS = ("typer.", "click.")

#: ``"path::qualified name"`` → parameter count today; may only shrink (module docstring).
ALLOWED: dict[str, int] = {}


def parameter_count(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Parameters of ``fn`` without a leading ``self``/``cls``; ``*args``/``**kwargs`` one each."""
    a = fn.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    n = len(names) - (1 if names and names[0] in ("self", "cls") else 0)
    return n + (a.vararg is not None) + (a.kwarg is not None)


def _registered_commands(tree: ast.Module) -> set[str]:
    """Names passed to ``X.command(...)(name)`` or ``X.callback(...)(name)`` in the module."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Call)
            and isinstance(node.func.func, ast.Attribute)
            and node.func.func.attr in ("command", "callback")
        ):
            names.update(a.id for a in node.args if isinstance(a, ast.Name))
    return names


def _is_cli_command(fn: ast.FunctionDef | ast.AsyncFunctionDef, registered: set[str]) -> bool:
    """Whether ``fn`` is a Typer/Click command (module docstring)."""
    if fn.name in registered:
        return True
    for deco in fn.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if isinstance(target, ast.Attribute) and target.attr in ("command", "callback"):
            return True
    a = fn.args
    parts = [p.annotation for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    parts += [*a.defaults, *a.kw_defaults]
    return any(p is not None and any(m in ast.unparse(p) for m in CLI_MARKERS) for p in parts)


def offenders(source: str, path: str) -> dict[str, tuple[int, int]]:
    """``"path::qualname"`` → (line, count) for every non-CLI function of ``source`` with more
    than ``MAX_PARAMETERS`` parameters. Raises ``SyntaxError`` (naming ``path``) on bad code."""
    tree = ast.parse(source, filename=path)
    registered = _registered_commands(tree)
    found: dict[str, tuple[int, int]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                n = parameter_count(child)
                if n > MAX_PARAMETERS and not _is_cli_command(child, registered):
                    found[f"{path}::{prefix}{child.name}"] = (child.lineno, n)
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def tree_offenders() -> dict[str, tuple[int, int]]:
    """``offenders`` over every product ``.py`` under ``PACKAGES`` (generated stubs skipped)."""
    found: dict[str, tuple[int, int]] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path.name.endswith(GENERATED_SUFFIXES):
                continue
            rel = path.relative_to(ROOT).as_posix()
            found.update(offenders(path.read_text(encoding="utf-8"), rel))
    return found


def test_no_function_takes_more_than_eight_parameters() -> None:
    found = tree_offenders()
    problems = []
    for key, (line, n) in sorted(found.items()):
        path, name = key.split("::")
        if key not in ALLOWED:
            problems.append(f"{path}:{line}:{name} takes {n} parameters (> {MAX_PARAMETERS})")
        elif n > ALLOWED[key]:
            problems.append(f"{path}:{line}:{name} grew to {n} parameters (allowed {ALLOWED[key]})")
    for key in sorted(set(ALLOWED) - set(found)):
        problems.append(f"{key} is at or under the limit now: remove it from ALLOWED")
    for key in sorted(k for k in ALLOWED if k in found and found[k][1] < ALLOWED[k]):
        problems.append(f"{key} shrank to {found[key][1]}: lower its ALLOWED count")
    assert not problems, "group parameters that travel together:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f(a, b, c, d, e, f, g, h): pass", {}),
        ("def f(a, b, c, d, e, f, g, h, i): pass", {"m.py::f": (1, 9)}),
        ("class C:\n def m(self, a, b, c, d, e, f, g, h): pass", {}),
        ("class C:\n def m(self, a, b, c, d, e, f, g, *x, **y): pass", {"m.py::C.m": (2, 9)}),
        ("async def f(*, a, b, c, d, e, f, g, h, i): pass", {"m.py::f": (1, 9)}),
        (
            "def outer():\n def inner(a, b, c, d, e, f, g, h, i): pass",
            {"m.py::outer.inner": (2, 9)},
        ),
        ("@app.command('x')\ndef f(a, b, c, d, e, f, g, h, i): pass", {}),
        ("def f(a, b, c, d, e, f, g, h, i): pass\napp.command('x')(f)", {}),
        ("def f(a: A = typer.Option(1), b=0, c=0, d=0, e=0, f=0, g=0, h=0, i=0): pass", {}),
    ],
)
def test_the_count_sees_what_it_should(source: str, expected: dict[str, tuple[int, int]]) -> None:
    assert offenders(source, "m.py") == expected
