"""The codebase's own rule: no product module over ~400 lines without a reason written at its top."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "generator", "sandbox", "tool_tree", "tooltree_cli")
LIMIT = 400


def test_every_long_module_says_at_its_top_why_it_is_long() -> None:
    unexplained = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if text.count("\n") <= LIMIT:
                continue
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "Over 400 lines" not in doc:
                unexplained.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    assert not unexplained, "modules over 400 lines with no reason in their docstring: " + ", ".join(unexplained)
