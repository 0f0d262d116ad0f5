"""Migrations are frozen: a migration file imports nothing of the project, only the standard library
and yoyo, so changing live code never changes what an old migration does. Work that needs live code
(filling ``body_key``, building the keyword index) is recorded as due by the migration and run by
``store_service.data_steps`` when the store migrates a database."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

MIGRATIONS = Path(__file__).resolve().parent.parent / "store_service" / "migrations"
ALLOWED = set(sys.stdlib_module_names) | {"yoyo"}


def _imported(path: Path) -> list[str]:
    """The top-level packages a Python file imports, anywhere in it (inside functions too)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append("." if node.level else (node.module or "").split(".")[0])
    return names


PYTHON_MIGRATIONS = sorted(MIGRATIONS.rglob("*.py"))


def test_there_are_python_migrations_to_check():
    assert {p.name for p in PYTHON_MIGRATIONS} >= {
        "0004_lexical_postings.py",
        "0009_pins_capture.py",
        "0012_lexical_blocks.py",
    }


@pytest.mark.parametrize("path", PYTHON_MIGRATIONS, ids=lambda p: p.name)
def test_a_migration_imports_only_the_standard_library_and_yoyo(path):
    assert [name for name in _imported(path) if name not in ALLOWED] == []
