"""`NOT_GIVEN`: the default of every optional stub parameter, so "not sent" and "send null" differ."""

from __future__ import annotations

from typing import Any, final


@final
class NotGiven:
    """The type of `NOT_GIVEN`: an argument the caller left out.

    A stub's optional parameters default to ``NOT_GIVEN`` and `call_tool` drops every argument
    that is ``NOT_GIVEN``, so the server applies its own default. ``None`` is a value: it is sent
    as JSON ``null`` (a stub's types allow it only where the tool's schema allows null).
    """

    __module__ = "tool_tree.runtime"

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NOT_GIVEN"

    def __reduce__(self) -> str:
        return "NOT_GIVEN"  # unpickles (and copies) to the one instance


NOT_GIVEN = NotGiven()


def given(arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` without the top-level entries that are `NOT_GIVEN` (the same dict when there are none)."""
    if not any(isinstance(v, NotGiven) for v in arguments.values()):
        return arguments
    return {k: v for k, v in arguments.items() if not isinstance(v, NotGiven)}
