"""Why a stdio server's process could not be started, in its configuration's terms: the program missing (and the
PATH searched: an MCP client starts tooltree with a shorter PATH than a shell's), a folder, no execute bit, an
interpreter its ``#!`` line names missing, a command line given whole in ``command``, a missing ``cwd``, arguments or
an environment too large for the system."""

from __future__ import annotations

import errno
import os
import shutil

from tool_tree.config import ServerConfig, setting_named


def not_started(e: OSError, server: ServerConfig, source: str | None = None) -> OSError | None:
    """Why a stdio server's process could not be started, in its configuration's terms (``str()`` is the text), the
    setting named with the config file ``source`` when given (``servers.crm.command in tooltree.yaml``, as a timeout
    or a URL is; before: the key alone, of whichever file); None when there is nothing to add to ``e``."""
    assert server.command is not None
    command, missing = server.command, isinstance(e, FileNotFoundError)
    if server.cwd is not None and e.filename == server.cwd and not os.path.isdir(server.cwd):
        # before: a file there was said not to exist
        why = "is a file, not a folder" if os.path.lexists(server.cwd) else "does not exist"
        return type(e)(f"the working folder {server.cwd} {why} ({setting_named(server, 'cwd', source)})")
    if e.errno == errno.E2BIG:  # before: "[Errno 7] Argument list too long", though a variable was too long
        return type(e)(f"{command}: its arguments and environment are too large to start it{too_large(server, source)}")
    if missing and e.filename in (command, None) and any(c.isspace() for c in command.strip()):
        # `command: npx -y some-server`: the whole command line taken for the program's name
        return type(e)(
            f"no program named {command!r}: `command` is the program alone; give its arguments as a list in"
            f" `args` ({setting_named(server, 'args', source)})"
        )
    if missing and e.filename in (command, None) and "/" not in command:
        return type(e)(f"command not found: {command!r} is not on PATH{searched(server, source)}")
    if missing and os.path.isfile(command):  # it exists: what its first line names does not
        return type(e)(f"{command}: the interpreter its #! line names was not found")
    if missing:
        return type(e)(f"{command}: no such file")
    if os.path.isdir(command):
        return type(e)(f"{command} is a folder, not a program")
    if isinstance(e, PermissionError) and os.path.isfile(command) and not os.access(command, os.X_OK):
        return type(e)(f"{command} is not executable (chmod +x it, or run it through its interpreter)")
    if isinstance(e, PermissionError) and "/" not in command:  # the search of PATH met a refusal
        path = server.env.get("PATH") or os.environ.get("PATH") or os.defpath
        for folder in filter(None, path.split(os.pathsep)):
            found = os.path.join(folder, command)
            if os.path.isfile(found) and not os.access(found, os.X_OK):
                return type(e)(f"{command!r} on PATH is {found}, which is not executable (chmod +x it)")
        if shutil.which(command, path=path) is None:
            return type(e)(
                f"command not found: {command!r} is not on PATH (and a folder on PATH cannot be searched)"
                f"{searched(server, source)}"
            )
    return None


PATH_CHARS = 300
"""The most of a PATH a "command not found" shows."""


def searched(server: ServerConfig, source: str | None = None) -> str:
    """What a "command not found" adds: the PATH searched and what to do. An MCP client (Claude Desktop) starts
    tooltree with a shorter PATH than a login shell's, so a program found in a terminal (``uvx``, ``npx`` under
    nvm) is not found there; before, the message did not say which PATH, nor where to give the full path."""
    path = server.env.get("PATH") or os.environ.get("PATH") or os.defpath
    shown = path if len(path) <= PATH_CHARS else path[:PATH_CHARS] + "…"
    setting = setting_named(server, "command", source)
    return f" ({shown}); give its full path in {setting} (`command -v` in a shell finds it)"


MAX_ARG_STRLEN = 128 * 1024
"""Linux's cap on one argument or one ``NAME=value`` of the environment, in bytes with its NUL."""


def too_large(server: ServerConfig, source: str | None = None) -> str:
    """What an E2BIG adds: the longest argument or configured variable, and the limits it may be over."""
    sizes = {setting_named(server, f"args[{i}]", source): len(os.fsencode(a)) + 1 for i, a in enumerate(server.args)}
    sizes |= {
        setting_named(server, f"env.{k}", source): len(os.fsencode(f"{k}={v}")) + 1 for k, v in server.env.items()
    }
    if not sizes:
        return " (the environment tooltree runs in is too large)"
    longest = max(sizes, key=lambda key: sizes[key])
    return (
        f" (the longest is {longest}, {sizes[longest]:,} bytes; Linux takes at most {MAX_ARG_STRLEN:,} bytes for one"
        " argument or variable, and about 2 MiB for all of them: pass a large value in a file instead)"
    )
