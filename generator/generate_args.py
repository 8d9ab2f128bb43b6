"""The checks of `generator.generate.generate`'s arguments: each wrong one refused by name, before any server
starts or any file is written (before, the Python API had none of the CLI's guards: a tree was written into ``/``,
a ``~/tree`` made a folder named ``~``, and a wrong type failed later as an ``AttributeError``)."""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from tool_tree.config import Config
from tool_tree.text import shown
from tool_tree.tree import TreeError


def risky_out(out: str | os.PathLike[str], *, name: str = "out", shell: bool = False) -> str | None:
    """Why ``out`` is refused as the folder of a tree, or None.

    It is the root of the file system (``--out "$UNSET/"``); or it starts with a ``~`` nothing expanded (the shell
    left it, quoted or in ``--out=~/t``; Python never expands it), so it would make a folder named ``~`` in the
    working folder, which ``rm -rf ~`` then meant to remove. A ``~…`` folder that exists is taken as it is.
    ``name`` is what the message calls ``out``; ``shell``: it came from a command line (the message says so).
    """
    text = os.fspath(out)
    if text and os.path.realpath(text) == "/":
        return f"{name}: {text} is the root of the file system; give the tree a folder of its own"
    return unexpanded_home(text, name=name, shell=shell)


def unexpanded_home(text: str, *, name: str, shell: bool = False) -> str | None:
    """Why ``text``, a folder that does not exist, is refused for starting with a ``~`` nothing expanded (it would
    make a folder named ``~`` in the working folder, which ``rm -rf ~`` then meant to remove), or None.
    ``name`` is what the message calls it; ``shell``: it came from a command line (the message says so)."""
    if not text.startswith("~") or Path(text).exists():
        return None
    folder = text.split("/")[0]
    if shell:
        return (
            f"{name}: {text} starts with `~`, which the shell did not expand (it was quoted, or written after `=`), "
            f"so it would make a folder named {folder!r} here; give the full path (e.g. $HOME/…)"
        )
    return (
        f"{name}: {text} starts with `~`, which a path does not expand, so it would make a folder named {folder!r} "
        f"here; expand it first (Path({text!r}).expanduser()) or give the full path"
    )


def checked_args(
    config: object, out: object, only: object, *, jobs: object = None, snapshots: object = None
) -> tuple[Path, Path | None]:
    """``out`` and ``snapshots`` as paths, once every argument is known to be what `generate` takes.

    Raises:
        TypeError: ``config`` is not a `Config` or None; ``only`` is a string (not a sequence of names); ``out`` is
            not a str or a path, ``snapshots`` neither one nor None; ``jobs`` not a whole number or None.
        ValueError: ``jobs`` is less than 1.
        TreeError: ``out`` is empty, the root of the file system, or starts with an unexpanded ``~``; ``snapshots``
            is empty.
        RuntimeError: without ``snapshots``, an event loop runs on this thread (`refuse_in_event_loop`).
    """
    check_config(config)
    check_only(only)
    check_jobs(jobs)
    folder = snapshots_folder(snapshots)
    if folder is None:
        refuse_in_event_loop()
    return checked_out(out), folder


def checked_out(out: object) -> Path:
    """``out`` (a str or a path) as a `Path`, once it is known to be a folder a tree may go to.

    Raises:
        TypeError: ``out`` is not a str or a path.
        TreeError: ``out`` is empty, the root of the file system, or starts with an unexpanded ``~`` (`risky_out`).
    """
    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"out: expected a path (str or Path), got {type(out).__name__} {shown(out)}")
    text = os.fspath(out)
    if not isinstance(text, str):  # a bytes path-like
        raise TypeError(f"out: expected a path (str or Path), got {type(out).__name__} {shown(out)}")
    if not text:  # Path("") is ".": a `$UNSET` would write the tree into the working folder
        raise TreeError("out: the path is empty; name the tree's folder")
    if (problem := risky_out(text)) is not None:
        raise TreeError(problem)
    return Path(text)


def check_config(config: object) -> None:
    """Raises: TypeError: ``config`` is neither a `Config` nor None (a path: load it with ``load_config``)."""
    if config is not None and not isinstance(config, Config):
        raise TypeError(
            f"config: expected a Config or None (load_config(path) reads a tooltree.yaml), got "
            f"{type(config).__name__} {shown(config)}"
        )


def check_only(only: object) -> None:
    """Raises: TypeError: ``only`` is a single string (its characters would be taken as names) or holds a
    name that is not a string."""
    if isinstance(only, (str, bytes)):
        raise TypeError(f"only: expected a sequence of server names, got the string {shown(only)}: write [{only!r}]")
    if not isinstance(only, Collection) or not all(isinstance(name, str) for name in only):
        raise TypeError(f"only: expected a sequence of server names (str), got {type(only).__name__} {shown(only)}")


def check_jobs(jobs: object) -> None:
    """Raises: TypeError: ``jobs`` is neither a whole number nor None (``"2"`` failed later, comparing str with int);
    ValueError: it is less than 1."""
    if jobs is None:
        return
    if isinstance(jobs, bool) or not isinstance(jobs, int):
        raise TypeError(f"jobs: expected a whole number of servers starting at once, or None, got {shown(jobs)}")
    if jobs < 1:
        raise ValueError(f"jobs: expected at least 1, got {jobs}")


def snapshots_folder(snapshots: object) -> Path | None:
    """``snapshots`` (a str or a path, or None) as a `Path`.

    Raises:
        TypeError: it is not a str, a path or None (a str failed later as an ``AttributeError``).
        TreeError: it is empty (it would be the working folder).
    """
    if snapshots is None:
        return None
    text = os.fspath(snapshots) if isinstance(snapshots, (str, os.PathLike)) else None
    if not isinstance(text, str):
        raise TypeError(f"snapshots: expected a path (str or Path) or None, got {type(snapshots).__name__} "
                        f"{shown(snapshots)}")  # fmt: skip
    if not text:
        raise TreeError("snapshots: the path is empty; name the folder of the snapshots (the tree's snapshots/)")
    return Path(text)


def refuse_in_event_loop() -> None:
    """Raises: RuntimeError: an event loop runs on this thread, where `generate` cannot run its own to list the
    servers (it was anyio's "Already running asyncio in this thread", naming neither the cause nor what to do)."""
    import asyncio  # here: a run from snapshots, and its no-op rerun, need no event loop (importing it costs ~15 ms)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(
        "generate() runs its own event loop to list the servers, and one is running on this thread already: from "
        "async code, run it in a worker thread (await asyncio.to_thread(generate, config, out, ...))"
    )
