"""Edges you can see (issue 34): imports inside functions and uses of the name `Any`, per package and per file.

Read from the sources with ast (nothing is executed). An import inside a function is an `import` or
`from ... import` statement anywhere under a `def`, `async def` or `lambda`; one statement counts once,
whatever it names. `Any` counts every use of the name `Any` (`Any` or `typing.Any`) in the code and its
annotations, string annotations included; the import of the name itself does not count. `JSONObject` counts the
uses of memory_shared/jsontypes.py's alias for JSON from outside (a `dict[str, Any]` by another name), so a
change that trades one for the other shows.

    python bench/edges.py                 # per-package totals, then the files with any, most first
    python bench/edges.py --root /tmp/ga-before --top 15
    python bench/edges.py --json
"""
from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["cli", "configs", "memory_shared", "orchestrator", "skilltree", "worker"]


KINDS = ("imports", "any", "json")


def _named(node: ast.AST, name: str, module: str) -> bool:
    return (isinstance(node, ast.Name) and node.id == name) or (
        isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.value, ast.Name)
        and node.value.id == module)


def _is_any(node: ast.AST) -> bool:
    return _named(node, "Any", "typing")


def _is_json(node: ast.AST) -> bool:
    return _named(node, "JSONObject", "jsontypes")


def _string_annotation_uses(text: str) -> tuple[int, int]:
    """(uses of Any, uses of JSONObject) in a string annotation."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return 0, 0
    nodes = list(ast.walk(tree))
    return sum(map(_is_any, nodes)), sum(map(_is_json, nodes))


def count(path: Path) -> dict[str, list[int]]:
    """{"imports": [line of each import inside a function], "any": [line of each use of Any], "json": [line of
    each use of JSONObject]}. The alias's definition counts its one Any, not itself."""
    tree = ast.parse(path.read_text(), str(path))
    imports: list[int] = []
    anys: list[int] = []
    jsons: list[int] = []

    def visit(node: ast.AST, in_function: bool, in_annotation: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            in_function = True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if in_function:
                imports.append(node.lineno)
            return  # `from typing import Any` is not a use
        if isinstance(node, ast.AnnAssign) and _is_json(node.target) and node.value:  # the alias's definition
            visit(node.value, in_function, False)
            return
        if _is_any(node) or _is_json(node):
            (anys if _is_any(node) else jsons).append(node.lineno)  # type: ignore[attr-defined]
            return
        if in_annotation and isinstance(node, ast.Constant) and isinstance(node.value, str):
            any_uses, json_uses = _string_annotation_uses(node.value)
            anys.extend([node.lineno] * any_uses)
            jsons.extend([node.lineno] * json_uses)
        for field, value in ast.iter_fields(node):
            annotation = in_annotation or field in ("annotation", "returns")
            children = value if isinstance(value, list) else [value]
            for child in children:
                if isinstance(child, ast.AST):
                    visit(child, in_function, annotation)

    visit(tree, False, False)
    return {"imports": imports, "any": anys, "json": jsons}


def survey(root: Path) -> dict[str, dict[str, dict[str, int]]]:
    """{package: {file (relative to root): {"imports": n, "any": n, "json": n}}}, files with none left out."""
    found: dict[str, dict[str, dict[str, int]]] = {}
    for package in PACKAGES:
        files: dict[str, dict[str, int]] = {}
        for path in sorted((root / package).rglob("*.py")):
            counted = count(path)
            if any(counted.values()):
                files[str(path.relative_to(root))] = {kind: len(lines) for kind, lines in counted.items()}
        found[package] = files
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the tree to read (default: this one)")
    parser.add_argument("--top", type=int, default=0, help="list only the N files with most of each (0: all)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    found = survey(args.root)
    if args.json:
        print(json.dumps(found, indent=1))
        return
    totals = {package: {kind: sum(f[kind] for f in files.values()) for kind in KINDS}
              for package, files in found.items()}
    totals["all"] = {kind: sum(t[kind] for t in totals.values()) for kind in KINDS}
    print(f"{'package':<16}{'imports in functions':>22}{'Any':>8}{'JSONObject':>12}")
    for package, total in totals.items():
        print(f"{package:<16}{total['imports']:>22}{total['any']:>8}{total['json']:>12}")
    every = {name: counts for files in found.values() for name, counts in files.items()}
    for kind, title in (("imports", "imports inside functions"), ("any", "uses of Any"), ("json", "uses of JSONObject")):
        ranked = sorted(((c[kind], name) for name, c in every.items() if c[kind]), key=lambda p: (-p[0], p[1]))
        print(f"\nfiles by {title}:")
        for number, name in ranked[: args.top or None]:
            print(f"  {number:>4}  {name}")


if __name__ == "__main__":
    sys.exit(main())
