"""The plan of ``helpers/`` holds: import-linter's contracts (pyproject.toml), no import cycle between any two
modules, and a top level that holds only the pure layers and the packages (DESIGN.md, "helpers/: layers")."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PURE_TOP_LEVEL = {"__init__.py", "__main__.py", "hardware.py", "roofline.py", "cost.py",
                  "vllm_version.py"}  # the one pinned vLLM version: a constant every layer may cite
PACKAGES = {"bench", "cli", "client", "engine", "exercises", "kvcache", "lessons", "models", "plots",
            "server", "text", "toy", "widgets", "vllm_local"}


def test_import_linter_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (f"an import breaks a layer rule (pyproject.toml [tool.importlinter]):\n"
                                  f"{done.stdout}{done.stderr}")
    assert "0 broken" in done.stdout, done.stdout


def _cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(imports.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_two_modules_import_each_other() -> None:
    """Module by module (a package's ``__init__`` and its submodules too, which import-linter's sibling
    contract does not compare), counting imports inside functions and under TYPE_CHECKING. The facade
    ``helpers/__init__.py`` is left out: it imports nothing at run time."""
    graph = grimp.build_graph("helpers", cache_dir=None)
    imports = {module: set(graph.find_modules_directly_imported_by(module)) - {"helpers"}
               for module in graph.modules if module != "helpers"}
    assert _cycles(imports) == []


def test_the_top_level_holds_only_pure_layers_and_packages() -> None:
    top = ROOT / "helpers"
    files = {p.name for p in top.glob("*.py")}
    dirs = {p.name for p in top.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert files == PURE_TOP_LEVEL, f"lesson glue goes to helpers/lessons/, a new layer to a package: {files}"
    assert dirs <= PACKAGES, f"a new package: add it to the import-linter contracts first: {dirs - PACKAGES}"
