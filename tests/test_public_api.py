"""Every name ``helpers`` exports resolves, once, and type checkers see the same names: a renamed or deleted
function fails here, not in a notebook; ``import helpers`` stays free of heavy imports."""
from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import helpers

EXPORTS = sorted(helpers._EXPORTS.items())
INIT = ast.parse(Path(helpers.__file__).read_text(encoding="utf-8"))


@pytest.mark.parametrize(("name", "module"), EXPORTS, ids=[name for name, _ in EXPORTS])
def test_exported_name_imports(name: str, module: str) -> None:
    value = getattr(importlib.import_module(f"helpers.{module}"), name, None)
    assert value is not None, f'"{name}": "{module}" in helpers/__init__.py _EXPORTS names nothing'
    assert getattr(helpers, name) is value


def _type_checking_imports() -> list[tuple[str, str, str]]:
    block = next(node for node in INIT.body if isinstance(node, ast.If)
                 and getattr(node.test, "id", None) == "TYPE_CHECKING")
    return [(node.module or "", alias.name, alias.asname or "") for node in block.body
            if isinstance(node, ast.ImportFrom) for alias in node.names]


def test_type_checkers_see_exactly_the_exported_names() -> None:
    seen = _type_checking_imports()
    assert [(name, asname) for _, name, asname in seen if name != asname] == [], "re-export as `X as X`"
    typed = {(name, module.removeprefix("helpers.")) for module, name, _ in seen}
    assert typed == set(EXPORTS), (f"only in the TYPE_CHECKING block: {sorted(typed - set(EXPORTS))}; "
                                   f"only in _EXPORTS: {sorted(set(EXPORTS) - typed)}")


def test_no_name_is_exported_twice() -> None:
    table = next(node.value for node in INIT.body if isinstance(node, ast.AnnAssign)
                 and getattr(node.target, "id", None) == "_EXPORTS")
    assert isinstance(table, ast.Dict)
    names = [key.value for key in table.keys if isinstance(key, ast.Constant)]
    assert [n for n, count in Counter(names).items() if count > 1] == []
    assert [n for n, count in Counter(n for _, n, _ in _type_checking_imports()).items() if count > 1] == []
    assert len(names) == len(helpers._EXPORTS) == len(helpers.__all__)


def test_an_unknown_name_is_an_attribute_error() -> None:
    assert set(helpers._EXPORTS) <= set(dir(helpers))
    with pytest.raises(AttributeError, match="no attribute"):
        helpers.surely_not_a_helper  # noqa: B018


def test_import_helpers_loads_no_submodule_and_no_heavy_package() -> None:
    probe = ("import sys, helpers; print(sorted(m for m in sys.modules if m.startswith('helpers.') or "
             "m.split('.')[0] in ('numpy', 'pandas', 'matplotlib', 'openai', 'httpx', 'fastapi')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          check=True)
    assert done.stdout.strip() == "[]", f"import helpers imported {done.stdout.strip()}: keep it lazy"
    from_import = subprocess.run([sys.executable, "-c", "from helpers import kv_bytes_per_token; import sys; "
                                  "print('matplotlib' in sys.modules, 'helpers.kvcache' in sys.modules)"],
                                 capture_output=True, text=True, timeout=60, check=True)
    assert from_import.stdout.split() == ["False", "True"]
