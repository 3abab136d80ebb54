"""Every name ``helpers`` exports resolves, once: a renamed or deleted function fails here, not in a
notebook."""
from __future__ import annotations

import ast
import importlib
from collections import Counter
from pathlib import Path

import pytest

import helpers

EXPORTS = sorted(helpers._EXPORTS.items())


@pytest.mark.parametrize(("name", "module"), EXPORTS, ids=[name for name, _ in EXPORTS])
def test_exported_name_imports(name: str, module: str) -> None:
    value = getattr(importlib.import_module(f"helpers.{module}"), name, None)
    assert value is not None, f'_export("{module}", "{name}") in helpers/__init__.py names nothing'
    assert getattr(helpers, name) is value


def test_no_name_is_exported_twice() -> None:
    tree = ast.parse(Path(helpers.__file__).read_text(encoding="utf-8"))
    names = [arg.value for node in ast.walk(tree)
             if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_export"
             for arg in node.args[1:]]
    assert [n for n, count in Counter(names).items() if count > 1] == []
    assert len(names) == len(helpers._EXPORTS)


def test_an_unknown_name_is_an_attribute_error() -> None:
    assert set(helpers._EXPORTS) <= set(dir(helpers))
    with pytest.raises(AttributeError, match="no attribute"):
        helpers.surely_not_a_helper  # noqa: B018
