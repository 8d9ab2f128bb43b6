"""Command-line options of the supervisor and the worker, without argparse.

Both start once per sandbox (and the worker again after every timeout), and importing argparse
(with ``re``, ``gettext`` and ``locale`` behind it) is a noticeable part of an interpreter's start.
The options are few and only this package passes them.
"""

from __future__ import annotations


class OptionError(ValueError):
    """The command line is not one this program takes."""


def parse_options(
    argv: list[str], *, values: dict[str, str | None], flags: tuple[str, ...] = (), repeated: tuple[str, ...] = ()
) -> tuple[dict[str, str | None], set[str], dict[str, list[str]]]:
    """``--name VALUE`` options (with defaults in ``values``), ``--flag`` switches and repeatable ``--name VALUE``.

    Returns the values, the flags given and the repeated values.

    Raises:
        OptionError: an unknown option, or a value missing.
    """
    found = dict(values)
    given: set[str] = set()
    lists: dict[str, list[str]] = {name: [] for name in repeated}
    args = iter(argv)
    for arg in args:
        if arg in flags:
            given.add(arg)
        elif arg in values or arg in repeated:
            value = next(args, None)
            if value is None:
                raise OptionError(f"{arg} needs a value")
            if arg in repeated:
                lists[arg].append(value)
            else:
                found[arg] = value
        else:
            raise OptionError(f"unknown option {arg!r}")
    return found, given, lists
