"""How many values a composed YAML node stands for once its aliases are expanded, known before any is built.

`tool_tree.config_read.Reader.to_node` expands aliases as it reads, and stops past ``MAX_VALUES``; counting the values
as it builds them let a few lines of nested aliases (a "billion laughs") cost seconds of CPU before they were refused.
`Expansion` counts them as `Reader.to_node` does but each node once (an alias is the node its anchor names, counted
once and looked up after), so such a file is refused in as many steps as it has nodes, naming the value at which the
count passes the bound, as the reader would. An alias used inside its own anchor's value (``&a [*a]``, ``&a {<<: *a}``)
stands for values without end: refused (a merge of itself was a RecursionError).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

MERGE_TAG = "tag:yaml.org,2002:merge"


class EndlessAlias(Exception):
    """An alias used inside the value of its own anchor, at ``line`` (1-based)."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


def children(yn: Any, key: str | None, depth: int) -> Iterator[tuple[Any, str | None, int]]:
    """The nodes `Reader.to_node` reads within ``yn`` (at ``key`` and ``depth``), in its order, each with its key and
    depth: a mapping's keys and values (a merge key's mappings in its place, a level down), a list's items."""
    import yaml

    if isinstance(yn, yaml.MappingNode):
        for k, v in yn.value:
            if k.tag == MERGE_TAG:
                for source in v.value if isinstance(v, yaml.SequenceNode) else [v]:
                    yield source, key, depth + 1
                continue
            yield k, key, depth + 1
            name = k.value if isinstance(k, yaml.ScalarNode) else "?"
            yield v, f"{key}.{name}" if key else name, depth + 1
    elif isinstance(yn, yaml.SequenceNode):
        for i, v in enumerate(yn.value):
            yield v, f"{key}[{i}]" if key else f"[{i}]", depth + 1


ENDLESS = "an alias (*name) is used inside the value its anchor (&name) names, which would nest without end"


class Expansion:
    """The values nodes stand for, their aliases expanded, each counted as `Reader.to_node` counts it (one for itself;
    past ``most_depth`` levels, where the reader stops, one)."""

    def __init__(self, most_depth: int) -> None:
        self.most_depth = most_depth
        self._sizes: dict[Any, int] = {}  # by node (kept alive here: no id is reused)
        self._open: set[Any] = set()

    def over(self, yn: Any, key: str | None, depth: int, count: int, most: int) -> tuple[int, str | None, str] | None:
        """Where reading ``yn`` (at ``key`` and ``depth``; ``count`` values read, ``yn`` counted) would pass ``most``
        values or nest without end: the line, key and (for the latter) `ENDLESS`, "" for the former; None: it would
        not."""
        try:
            if count - 1 + self.size(yn, depth) <= most:
                return None
        except EndlessAlias:
            return (*self.endless_at(yn, key, depth), ENDLESS)
        return (*self.past(yn, key, depth, count, most), "")

    def size(self, yn: Any, depth: int) -> int:
        """The values ``yn`` stands for at ``depth``.

        Raises:
            EndlessAlias: an alias within ``yn`` is used inside its own anchor's value.
        """
        if yn.id == "scalar":  # PyYAML's kind of node
            return 1
        if yn in self._open:
            raise EndlessAlias(yn.start_mark.line + 1)
        if depth > self.most_depth:
            return 1
        if (known := self._sizes.get(yn)) is not None:
            return known
        self._open.add(yn)
        try:
            total = 1 + sum(self.size(child, at) for child, _, at in children(yn, None, depth))
        finally:
            self._open.discard(yn)
        self._sizes[yn] = total
        return total

    def past(self, yn: Any, key: str | None, depth: int, count: int, most: int) -> tuple[int, str | None]:
        """The line and key of the value within ``yn`` at which the reader's count, ``count`` with ``yn`` counted,
        passes ``most``; ``yn``'s own when none does (the caller knew it would)."""
        while True:
            for child, child_key, at in children(yn, key, depth):
                size = self.size(child, at)
                if count + size <= most:
                    count += size
                    continue
                count += 1
                if count > most:
                    return child.start_mark.line + 1, child_key
                yn, key, depth = child, child_key, at
                break
            else:
                return yn.start_mark.line + 1, key

    def endless_at(self, yn: Any, key: str | None, depth: int) -> tuple[int, str | None]:
        """The line (its anchor's) and key (where it is used) of an alias within ``yn`` that is used inside its own
        anchor's value (`size` raised `EndlessAlias` for ``yn``)."""
        path = {yn}
        while True:
            for child, child_key, at in children(yn, key, depth):
                if child in path:
                    return child.start_mark.line + 1, child_key
                try:
                    self.size(child, at)
                except EndlessAlias:
                    path.add(child)
                    yn, key, depth = child, child_key, at
                    break
            else:
                return yn.start_mark.line + 1, key
