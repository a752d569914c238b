"""Edges you can see (issue 34): imports inside functions and uses of the name `Any`, per package and per file.

Read from the sources with ast (nothing is executed). An import inside a function is an `import` or
`from ... import` statement anywhere under a `def`, `async def` or `lambda`; one statement counts once,
whatever it names. `Any` counts every use of the name `Any` (`Any` or `typing.Any`) in the code and its
annotations, string annotations included; the import of the name itself does not count.

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


def _is_any(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (
        isinstance(node, ast.Attribute) and node.attr == "Any" and isinstance(node.value, ast.Name)
        and node.value.id == "typing")


def _string_annotation_anys(text: str) -> int:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return 0
    return sum(1 for node in ast.walk(tree) if _is_any(node))


def count(path: Path) -> dict[str, list[int]]:
    """{"imports": [line of each import inside a function], "any": [line of each use of Any]}."""
    tree = ast.parse(path.read_text(), str(path))
    imports: list[int] = []
    anys: list[int] = []

    def visit(node: ast.AST, in_function: bool, in_annotation: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            in_function = True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if in_function:
                imports.append(node.lineno)
            return  # `from typing import Any` is not a use
        if _is_any(node):
            anys.append(node.lineno)  # type: ignore[attr-defined]
            return
        if in_annotation and isinstance(node, ast.Constant) and isinstance(node.value, str):
            anys.extend([node.lineno] * _string_annotation_anys(node.value))
        for field, value in ast.iter_fields(node):
            annotation = in_annotation or field in ("annotation", "returns")
            children = value if isinstance(value, list) else [value]
            for child in children:
                if isinstance(child, ast.AST):
                    visit(child, in_function, annotation)

    visit(tree, False, False)
    return {"imports": imports, "any": anys}


def survey(root: Path) -> dict[str, dict[str, dict[str, int]]]:
    """{package: {file (relative to root): {"imports": n, "any": n}}}, files with neither left out."""
    found: dict[str, dict[str, dict[str, int]]] = {}
    for package in PACKAGES:
        files: dict[str, dict[str, int]] = {}
        for path in sorted((root / package).rglob("*.py")):
            counted = count(path)
            if counted["imports"] or counted["any"]:
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
    totals = {package: {kind: sum(f[kind] for f in files.values()) for kind in ("imports", "any")}
              for package, files in found.items()}
    print(f"{'package':<16}{'imports in functions':>22}{'Any':>8}")
    for package, total in totals.items():
        print(f"{package:<16}{total['imports']:>22}{total['any']:>8}")
    print(f"{'all':<16}{sum(t['imports'] for t in totals.values()):>22}{sum(t['any'] for t in totals.values()):>8}")
    every = {name: counts for files in found.values() for name, counts in files.items()}
    for kind, title in (("imports", "imports inside functions"), ("any", "uses of Any")):
        ranked = sorted(((c[kind], name) for name, c in every.items() if c[kind]), key=lambda p: (-p[0], p[1]))
        print(f"\nfiles by {title}:")
        for number, name in ranked[: args.top or None]:
            print(f"  {number:>4}  {name}")


if __name__ == "__main__":
    sys.exit(main())
