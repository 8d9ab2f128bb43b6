"""SECURITY.md names, for each case, the test that proves it: every test it names exists.

A reference is ``path/test_file.py::test_name`` (the path below ``tests/``, or a file's name alone where a section says
which folder), or ``…::test_name`` for a test of a file named just before. A parametrised test's ids in brackets and
an ellipsis that stands for several are not checked, only the test's name.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
REFERENCE = re.compile(r"`([\w/.…-]*\.py|…)::(test_\w+)")


@cache
def _defined(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return frozenset(n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))


def _test_files() -> dict[str, list[Path]]:
    files: dict[str, list[Path]] = {}
    for path in TESTS.rglob("test_*.py"):
        files.setdefault(path.name, []).append(path)
    return files


def test_every_test_security_md_names_exists() -> None:
    text = (ROOT / "SECURITY.md").read_text(encoding="utf-8")
    by_name = _test_files()
    everywhere = frozenset().union(*(_defined(p) for paths in by_name.values() for p in paths))
    references = REFERENCE.findall(text)
    missing = []
    for file, test in references:
        if file == "…":  # a file named before it in the row or the section
            found = test in everywhere
        else:
            candidates = [TESTS / file] if (TESTS / file).is_file() else by_name.get(Path(file).name, [])
            found = any(test in _defined(p) for p in candidates)
        if not found:
            missing.append(f"{file}::{test}")
    assert len(references) > 250  # the pattern still finds SECURITY.md's references
    assert missing == [], f"SECURITY.md names tests that do not exist: {missing}"
