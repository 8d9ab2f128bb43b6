"""Errors of tool search.

::

    SearchError          a query or an index the search cannot use (bad limit, bad regex,
                         missing or corrupt index, unreadable tree); the message says what to do
"""

from __future__ import annotations


class SearchError(Exception):
    """A search cannot run: bad arguments, or a missing or corrupt index."""
