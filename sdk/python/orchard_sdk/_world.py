"""Which WIT world ``sdk/python/build.sh`` builds a plugin for, read from its ``app.py`` without
running it:

- ``orchard:actuator/shortcut-actuator-plugin`` when ``app.py`` binds the name ``Shortcuts``
  at its top level (exported as ``orchard:shortcuts/shortcuts``, made by
  :func:`orchard_sdk.export_shortcuts`); that world exports ``conversion`` too, so ``app.py``
  MUST bind ``Conversion`` as well (an error otherwise, naming the fix);
- ``orchard:actuator/versioned-actuator-plugin`` when ``app.py`` binds the name ``Conversion``
  at its top level (what componentize-py exports as ``orchard:actuator/conversion``, made by
  :func:`orchard_sdk.export_conversion`);
- ``orchard:actuator/actuator-plugin`` otherwise: a plugin with one version builds exactly as
  before WIT 0.1.2.

build.sh runs this file as a script (``python -I``, so that the modules next to it, e.g.
``types.py``, do not shadow the standard library's): standard library only, no package import.
"""

from __future__ import annotations

import ast
import sys
from typing import Iterable, Iterator

PLAIN = "orchard:actuator/actuator-plugin"
VERSIONED = "orchard:actuator/versioned-actuator-plugin"
SHORTCUT = "orchard:actuator/shortcut-actuator-plugin"
EXPORT = "Conversion"
SHORTCUTS = "Shortcuts"


def _targets(node: ast.AST) -> Iterator[str]:
    """The names an assignment target binds (``a``, ``a, b``, ``[a, *b]``)."""
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, (ast.Tuple, ast.List)):
        for elt in node.elts:
            yield from _targets(elt)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)


def _bound(body: Iterable[ast.stmt]) -> Iterator[str]:
    """The names a module's top level binds, including inside ``if``/``try``/``with`` blocks
    (a guarded import), never inside a function or class body."""
    for stmt in body:
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                yield from _targets(t)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            yield from _targets(stmt.target)
        elif isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            yield stmt.name
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                yield alias.asname or alias.name.split(".")[0]
        elif isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
            for block in ("body", "orelse", "finalbody"):
                yield from _bound(getattr(stmt, block, []))
            for handler in getattr(stmt, "handlers", []):
                yield from _bound(handler.body)


def world_of(source: str, filename: str = "app.py") -> str:
    """The world for an ``app.py`` of this text; ``ValueError`` for a ``Shortcuts`` without a
    ``Conversion``."""
    bound = set(_bound(ast.parse(source, filename).body))
    if SHORTCUTS in bound:
        if EXPORT not in bound:
            raise ValueError(
                f"{filename} binds `Shortcuts` but not `Conversion`: world shortcut-actuator-plugin "
                "exports both; add `Conversion = export_conversion(<your actuator>)` (a kind with "
                "one version lists none)"
            )
        return SHORTCUT
    return VERSIONED if EXPORT in bound else PLAIN


def main(argv: list) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} <plugin>/app.py", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        try:
            print(world_of(f.read(), argv[1]))
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
