"""The import graph of ga's packages, read from the sources (ast, nothing is executed): circles and arrows.

Prints (1) the import circles among modules, counting only imports that run when a module is loaded (top
level, `if`/`try` included; imports inside functions and under `if TYPE_CHECKING:` do not run then), (2) the
circles once imports inside functions count too (a function-level import that only dodges a circle at load
time still ties the two modules together), (3) the circles once `if TYPE_CHECKING:` imports count as well (a
module that names another's class in its annotations while that one imports it), and (4) every
import, top level or inside a function, that points against the layering of docs/design.md §2:
cli → orchestrator/skilltree → worker → configs → memory_shared (configs is usable by all but memory_shared, and
imports only memory_shared, whose YAML loader it reads its files with). orchestrator ↔ skilltree arrows are listed
as sideways, not counted as wrong. Then (5) each package's import floors (issue 34: no package deeper than 8): the
longest chain of load-time imports among the package's own modules, a module that imports none of them being
floor 1, with the chain itself, deepest module first. Floors are measured, not checked: they never fail the run.

    python bench/import_graph.py            # this tree; exit status 1 on a circle of (1), (2) or (3), or a wrong arrow
    python bench/import_graph.py --json     # the same as one JSON object
"""
from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["cli", "configs", "memory_shared", "worker", "orchestrator", "skilltree"]
LAYER = {"cli": 4, "orchestrator": 3, "skilltree": 3, "worker": 2, "configs": 1, "memory_shared": 0}
FLOORS_GOAL = 8  # issue 34: no package deeper than 8 import floors


def modules(root: Path) -> dict[str, Path]:
    found = {"cli": root / "cli.py"} if (root / "cli.py").is_file() else {}  # a tree from before cli/ (--root)
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int, str]]:
    """(imported module, line, when: "load", "function" or "types") for every import of one of `known` in the
    module `name`."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int, str]] = []

    def target(base: str, member: str | None) -> str | None:
        if member and f"{base}.{member}" in known:
            return f"{base}.{member}"
        while base and base not in known:
            base = base.rpartition(".")[0]
        return base or None

    def visit(node: ast.AST, when: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and when == "load":
            when = "function"
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, "types")
            for child in node.orelse:
                visit(child, when)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (hit := target(alias.name, None)) is not None:
                    found.append((hit, node.lineno, when))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                if (hit := target(base, alias.name)) is not None:
                    found.append((hit, node.lineno, when))
        for child in ast.iter_child_nodes(node):
            visit(child, when)

    visit(ast.parse(path.read_text(), str(path)), "load")
    return [(other, line, when) for other, line, when in found if other != name]


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(edges):
        if node not in index:
            connect(node)
    return sorted(found, key=lambda c: (-len(c), c))


def floors(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """{package: its longest chain of imports among its own modules, the importing end first}; the chain's length is
    the package's floors. An import that would close a circle is not followed (circles are reported apart)."""
    chains: dict[str, list[str]] = {}
    on_path: set[str] = set()

    def chain(module: str) -> list[str]:
        if module not in chains:
            on_path.add(module)
            package = module.split(".")[0]
            below = [chain(other) for other in sorted(edges.get(module, ()))
                     if other.split(".")[0] == package and other not in on_path]
            on_path.discard(module)
            chains[module] = [module, *max(below, key=len, default=[])]
        return chains[module]

    deepest: dict[str, list[str]] = {}
    for module in sorted(edges):
        found = chain(module)
        package = module.split(".")[0]
        if len(found) > len(deepest.get(package, [])):
            deepest[package] = found
    return dict(sorted(deepest.items()))


def arrow(source: str, target: str) -> str | None:
    """'wrong' or 'sideways' for an import from package `source` of package `target`; None when it is fine."""
    if source == target:
        return None
    if LAYER[source] == LAYER[target]:
        return "sideways"
    return "wrong" if LAYER[source] < LAYER[target] else None


def graph(root: Path) -> dict:
    known = modules(root)
    edges: dict[str, dict[str, set[str]]] = {when: {name: set() for name in known}
                                             for when in ("load", "function", "types")}
    arrows: dict[str, set[str]] = {"wrong": set(), "sideways": set()}
    for name, path in known.items():
        for other, line, when in imports(name, path, known):
            edges[when][name].add(other)
            kind = arrow(name.split(".")[0], other.split(".")[0])
            if kind:
                where = {"load": "", "function": " (in a function)", "types": " (types only)"}[when]
                arrows[kind].add(f"{path.relative_to(root)}:{line} {name} → {other}{where}")
    at_load = edges["load"]
    running = {name: at_load[name] | edges["function"][name] for name in known}
    typed = {name: running[name] | edges["types"][name] for name in known}
    return {"modules": len(known), "imports_at_load": sum(map(len, at_load.values())),
            "imports_in_functions": sum(map(len, running.values())) - sum(map(len, at_load.values())),
            "circles": circles(at_load), "circles_with_function_imports": circles(running),
            "circles_with_type_imports": circles(typed),
            "floors": {package: {"floors": len(chain), "chain": chain} for package, chain in floors(at_load).items()},
            **{kind: sorted(lines, key=_by_place) for kind, lines in arrows.items()}}


def _by_place(line: str) -> tuple[str, int]:
    place = line.split(" ", 1)[0]
    path, _, number = place.rpartition(":")
    return path, int(number)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the tree to read (default: this one)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    found = graph(args.root)
    if args.json:
        print(json.dumps(found, indent=1, ensure_ascii=False))
    else:
        print(f"{found['modules']} modules; imports between them: {found['imports_at_load']} at load, "
              f"{found['imports_in_functions']} more only inside functions")
        for key, title in (("circles", "circles among modules, imports at load"),
                           ("circles_with_function_imports", "circles among modules, imports inside functions too"),
                           ("circles_with_type_imports", "circles among modules, TYPE_CHECKING imports too")):
            print(f"{title}: {len(found[key])}")
            for circle in found[key]:
                print(f"  {len(circle)}: " + ", ".join(circle))
        for kind in ("wrong", "sideways"):
            print(f"{kind} arrows between packages: {len(found[kind])}")
            for line in found[kind]:
                print(f"  {line}")
        print(f"import floors per package, imports at load (goal <= {FLOORS_GOAL}; measured, not checked):")
        for package, deepest in found["floors"].items():
            mark = "" if deepest["floors"] <= FLOORS_GOAL else f"  (over {FLOORS_GOAL})"
            print(f"  {package}: {deepest['floors']}{mark}: " + " → ".join(deepest["chain"]))
    circled = found["circles"] or found["circles_with_function_imports"] or found["circles_with_type_imports"]
    return 1 if circled or found["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
