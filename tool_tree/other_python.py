"""A stdio server started as ``python`` that failed to start because ``python`` on PATH is another interpreter.

The sample configs, and many a user's, start their servers with ``command: python``: the first ``python`` on PATH,
which outside the virtualenv tooltree runs in is often another Python, without the server's packages (``No module
named 'mcp'``) or too old for its syntax (Python 3.8 on a ``match`` statement). Before, the server's failure said
"the server exited during start-up, with exit status 1" and the last lines of its stderr, which named neither
interpreter.

Its version is asked of it (``--version``, at most `_VERSION_SECONDS`) in a worker thread: before, on the event loop
of the failed start (a server pool's, or generate-tree's), which stopped for up to 2 s every other server's start,
call and notice on it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import anyio

from tool_tree.config import ServerConfig

_PYTHON = re.compile(r"python[\d.]*(?:\.exe)?", re.IGNORECASE)
_FAILED_AS_PYTHON = ("ModuleNotFoundError", "ImportError", "SyntaxError")
"""Words of a stderr that says the interpreter lacked a package, or could not read the server's code."""
_VERSION_SECONDS = 2.0


def _version(program: str) -> str:
    """``Python 3.8.10`` as ``program --version`` says it; "" when it does not say within `_VERSION_SECONDS`."""
    try:
        done = subprocess.run(
            [program, "--version"], capture_output=True, timeout=_VERSION_SECONDS, check=False, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    said = (done.stdout or done.stderr).decode("utf-8", errors="replace").strip()
    return said if re.fullmatch(r"Python [\w.+]+", said) else ""


async def other_python(server: ServerConfig, stderr_tail: str) -> str:
    """For a server whose command is a Python that failed as one lacking its packages or syntax and that is not in
    tooltree's own environment: ``; `python` is /usr/bin/python (Python 3.8.10), not the Python tooltree runs on
    (/home/me/tooltree/.venv/bin/python, Python 3.11.7): give the interpreter that has the server's packages as its
    command``; else ""."""
    command = server.command
    if command is None or not _PYTHON.fullmatch(os.path.basename(command)):
        return ""
    if not any(word in stderr_tail for word in _FAILED_AS_PYTHON):
        return ""
    path = server.env.get("PATH") or os.environ.get("PATH") or os.defpath
    found = command if os.sep in command else shutil.which(command, path=path)
    own = os.path.abspath(sys.executable)
    if found is None or os.path.dirname(os.path.abspath(found)) == os.path.dirname(own):
        return ""  # the same environment's Python (python, python3): the server's own failure
    version = await anyio.to_thread.run_sync(_version, found)  # never on the loop: up to 2 s
    mine = f"Python {sys.version.split()[0]}"
    return (
        f"; `{command}` is {found}{f' ({version})' if version else ''}, not the Python tooltree runs on ({own}, "
        f"{mine}): give the interpreter that has the server's packages as its command"
    )
