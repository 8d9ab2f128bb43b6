"""Test helpers for the pre-filter: a scripted classifier (a `ToolFilter` implementation, not a
mock of any client) and the sample tree's catalog."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.prefilter import CatalogTool, FilterError, Verdicts, load_catalog
from tool_tree.tree import Manifest

Answer = dict[str, float] | FilterError | threading.Event

HELD = 60.0
"""Seconds a test's other holder keeps the state folder's lock before it lets go (so that a wait without limit
ends): a save that waited for it is told from one that gave up at its limit by far more than a loaded machine adds
(before, 10 s against a bound of 5)."""


class ScriptedFilter:
    """Answers each `classify` with the next scripted answer: probabilities by key, an error to
    raise, or an event to wait on (bounded) before answering nothing (to exceed a timeout)."""

    name = "scripted"
    default_threshold = 0.5
    offline = True  # it sends nothing: a dry run (`Agent.first_request`) asks it

    def __init__(self, answers: Sequence[Answer]) -> None:
        self.answers = list(answers)
        self.texts: list[str] = []

    def classify(self, text: str, catalog: Sequence[CatalogTool]) -> Verdicts:
        self.texts.append(text)
        answer = self.answers.pop(0) if self.answers else {}
        if isinstance(answer, FilterError):
            raise answer
        if isinstance(answer, threading.Event):
            answer.wait(10)
            return Verdicts({})
        return Verdicts(dict(answer))


def catalog(tree: Path) -> list[CatalogTool]:
    return load_catalog(tree, Manifest.load(tree))


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}
