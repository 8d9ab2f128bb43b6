"""Helpers shared by subcommands: finding the config, sandbox settings from it, argument types and
checks of the paths options name (made before any work starts, so a mistake costs nothing)."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.config import SandboxConfig
    from tool_tree.config import Config, Setting

DEFAULT_CONFIG = "tooltree.yaml"
CONFIG_FILES = (
    "tooltree.yaml, or a client's own file (`mcpServers` JSON, VS Code's `servers`, Zed's `context_servers`, Codex's "
    "config.toml; default: ./tooltree.yaml"
)
"""What the help of every command's ``--config`` says of the file it takes (before: ``exec``, ``agent`` and ``serve``
said "tooltree.yaml with the servers", though each reads a client's file as `generate-tree` does), without the
closing parenthesis, which each command's help ends after what it adds."""
EXIT_UNEXPECTED = 70
"""Every command's exit status for an unexpected error (an exception no command handled: a bug), sysexits.h's
EX_SOFTWARE, which no command uses for anything else. Before: 1, which each command gives a meaning of its own
(``generate-tree --check``: drift; ``exec``: the script failed; ``agent``: a limit ended the run)."""
UNEXPECTED_HELP = f"{EXIT_UNEXPECTED} for an unexpected error (a bug: run with --debug and report the traceback)"
"""What the help of a command that lists its exit statuses says of `EXIT_UNEXPECTED`."""


def config_sections() -> dict[str, dict[str, Setting]]:
    """Every section tooltree.yaml may have besides ``servers``, with the package that owns its keys."""
    from agent.defaults import SETTINGS as AGENT
    from agent.serve.settings import SETTINGS as SERVE
    from sandbox.config import SETTINGS as SANDBOX
    from tool_tree.starts import SECTION as POOL_SECTION
    from tool_tree.starts import SETTINGS as POOL

    return {"sandbox": SANDBOX, "agent": AGENT, "serve": SERVE, POOL_SECTION: POOL}


def load(path: str | Path, using: Collection[str] | None = None) -> Config:
    """The config at ``path``, every section checked (an unknown section or key is an error). ``using``: the servers
    the command will use, when it names them (`tool_tree.config.parse_config`: another's unset variable waits).

    Raises:
        ConfigError: the file is invalid or missing (then saying what to do on a command line: the library's
            error does not name an option).
    """
    from tool_tree.config import ConfigError, load_config

    try:
        return load_config(path, sections=config_sections(), using=using)
    except ConfigError as e:
        if isinstance(e.__cause__, FileNotFoundError):
            raise ConfigError(f"{e.message} (create one, or pass --config PATH)", file=e.file) from None
        if isinstance(e.__cause__, IsADirectoryError):
            raise ConfigError(f"{e.message}; --config names the configuration file", file=e.file) from None
        raise


def recorded_default(tree: Path, *, missing_ok: bool = False) -> str | None:
    """The configuration a command given no ``--config`` reads for ``tree``: the file the tree's manifest records
    (`tool_tree.regenerate.recorded_config`: it was generated from it), said on stderr when it is not ./tooltree.yaml;
    None when the tree records none (no tree yet, one of an earlier release): ./tooltree.yaml then. Before, a command
    run from another folder (``generate-tree --check --out ~/proj/tree``) read ./tooltree.yaml, another project's or
    none. A file of another user is not read (a manifest from elsewhere names no file to run), unless it is
    ./tooltree.yaml, which a run given no manifest reads too (a shared project's folder).

    Raises:
        ConfigError: the recorded file is not there (moved, removed: unless ``missing_ok``, then None), or is another
            user's.
    """
    import os
    import sys

    from tool_tree.config import ConfigError
    from tool_tree.regenerate import recorded_config, shell_word
    from tool_tree.tree import MANIFEST_FILE
    from tooltree_cli.output import terminal_text

    if (recorded := recorded_config(tree)) is None:
        return None
    manifest = str(tree / MANIFEST_FILE)
    try:
        owner = os.stat(recorded).st_uid
    except OSError as e:
        if missing_ok:
            return None
        problem = f"the tree was generated from {shell_word(recorded)}, which cannot be read ({e.strerror or e}): "
        raise ConfigError(problem + "pass --config PATH", file=manifest) from None
    if Path(DEFAULT_CONFIG).exists() and os.path.samefile(DEFAULT_CONFIG, recorded):
        return recorded  # the file read without a manifest too: nothing to say, whoever owns it (a shared project)
    if hasattr(os, "getuid") and owner not in (os.getuid(), 0):
        problem = f"the tree was generated from {shell_word(recorded)}, another user's file, read only when named: "
        raise ConfigError(problem + "pass --config PATH", file=manifest)
    said = f"reading {shell_word(recorded)}, the configuration {shell_word(manifest)} records (--config names another)"
    print(f"tooltree: {terminal_text(said)}", file=sys.stderr, flush=True)
    return recorded


def load_optional_config(
    path: str | None, using: Collection[str] | None = None, *, tree: Path | None = None, missing_ok: bool = True
) -> Config | None:
    """The config at ``path``; with no path, the file ``tree``'s manifest records (`recorded_default`: said on stderr
    when it is not ./tooltree.yaml, another user's not read), else ./tooltree.yaml when it exists, else None. ``using``:
    as for `load` (``()`` for a command that starts no server: no server's variable need be set). ``tree``: the tree
    the command uses (``exec``, ``agent``, ``serve``: before, run from another folder, they read ./tooltree.yaml or
    none, where ``generate-tree`` read the tree's own). ``missing_ok``: a recorded file that is gone is taken as none
    recorded (a command that does not write the tree from it), else an error.

    Raises:
        ConfigError: the file is invalid (or ``path`` does not exist), or the file ``tree`` records is another user's
            (or gone, unless ``missing_ok``).
    """
    if path is None and tree is not None:
        path = recorded_default(tree, missing_ok=missing_ok)
    if path is not None:
        return load(path, using)
    if Path(DEFAULT_CONFIG).exists():
        return load(DEFAULT_CONFIG, using)
    return None


def warn_unset(config: Config | None, command: str, *, refreshed: Path | None = None) -> None:
    """A warning for each server ``command`` offers whose variable is not set (`tool_tree.config.ServerConfig
    .unresolved`; the config was loaded with ``using=()``): its calls fail with that error, the others work; the tree
    ``refreshed`` from the servers (serve's) does not get its tools. Before, one server's unset token stopped
    ``serve`` and ``agent`` (and every ``exec``) at start."""
    import sys

    from tooltree_cli.output import terminal_text

    for s in config.offered_servers if config is not None else ():
        if s.unresolved is not None:
            kept = f", and {refreshed} does not get its tools" if refreshed is not None else ""
            said = f"server {s.name!r} cannot start until this is set: {s.unresolved}; its tool calls fail{kept}"
            print(f"tooltree {command}: warning: {terminal_text(said)}", file=sys.stderr, flush=True)


def search_setting_problem() -> str | None:
    """Why ``TOOLTREE_SEARCH_EMBEDDINGS`` cannot be used (a value other than 1, 0 or auto), or None: asked before
    `agent` or `serve` starts, as every search of its model or clients would fail on it (before: each did, after
    the run was paid for or the client connected)."""
    from tool_tree.search import SearchError, embeddings_mode

    try:
        embeddings_mode()
    except SearchError as e:
        return str(e)
    return None


def sandbox_config(config: Config | None, **overrides: object) -> SandboxConfig:
    """`SandboxConfig` from the config's ``sandbox:`` section, with command-line overrides.

    ``$TOOLTREE_SANDBOX_OWNER`` sets the owner label of containers and volumes (what
    ``tooltree sandbox prune --owner`` selects), so a test run can clean up only its own (`SandboxConfig` reads it).
    """
    from sandbox.config import SandboxConfig

    return SandboxConfig.from_config(config, **overrides)


def config_path(text: str) -> str:
    """An argparse type: the path of a configuration file, not empty (before: ``--config "$CONFIG"`` with the variable
    unset read ./tooltree.yaml in generate-tree, and was "`.`: is a folder" in the other commands)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected the configuration file's path, got an empty one")
    return text


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    return _bounded_int(text, 1)


def count(text: str) -> int:
    """An argparse type: a whole number of at least 0."""
    return _bounded_int(text, 0)


def _bounded_int(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected at least {low}, got {value}")
    return value


def probability(text: str) -> float:
    """An argparse type: a number in (0, 1]."""
    return _float_in(text, lambda v: 0 < v <= 1, "a probability above 0 and at most 1")


def positive_seconds(text: str) -> float:
    """An argparse type: a positive, finite number of seconds (``nan``, ``inf``, 0 and less are refused)."""
    return _float_in(text, lambda v: 0 < v < math.inf, "a positive number of seconds")


def sandbox_seconds(text: str) -> float:
    """An argparse type: a positive number of seconds, at most what a sandbox takes (a week); else refused
    naming the option (not later, as ``timeout: …``)."""
    from sandbox.config import MAX_TIMEOUT

    value = positive_seconds(text)
    if value > MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_TIMEOUT:g} seconds (a week), got {text!r}")
    return value


def _float_in(text: str, ok: Callable[[float], bool], expected: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan  # refused below with the text as given
    if not ok(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def workspace_problem(workspace: str, tree: str) -> str | None:
    """Why ``--workspace`` cannot be a session's workspace on ``tree`` (it holds the tree or lies inside it:
    `sandbox.session_args.tree_in_workspace`), as one line; None when it can."""
    from sandbox.session_args import tree_in_workspace

    problem = tree_in_workspace(workspace, tree)
    return None if problem is None else f"--workspace: {workspace} {problem}"


def audit_problem(audit: str, *, tree: str, workspace: str | None, config: str | None) -> str | None:
    """Why the ``--audit`` log cannot be at ``audit``, or None: inside the ``tree`` (its lines would go into a stub or
    the manifest: before, ``--audit tree/manifest.json`` broke every later command on the tree), inside the
    ``workspace`` (a script could rewrite it, and the saved workspace put its copy in place), or the ``config`` file
    (when it exists; None: the one read without ``--config``, the file the tree records when it is there, else
    ./tooltree.yaml: before, ``--audit ~/proj/tooltree.yaml --tree ~/proj/tree`` run elsewhere appended to it)."""
    if config is None:
        from tool_tree.regenerate import recorded_config

        recorded = recorded_config(tree)
        config = recorded if recorded is not None and os.path.isfile(recorded) else DEFAULT_CONFIG
    real = Path(os.path.realpath(audit))
    if real.is_relative_to(os.path.realpath(tree)):
        return (
            f"--audit: {audit} is inside the tree {tree}: its lines would go into the tree's file of that name (its "
            "manifest, a stub) or add one to the tree; keep it outside"
        )
    if workspace is not None and real.is_relative_to(os.path.realpath(workspace)):
        return (
            f"--audit: {audit} is inside the workspace {workspace}: a script could rewrite the audit log, and the "
            "workspace saved back would put its copy in place; keep it outside"
        )
    if config is not None and Path(config).is_file() and real == Path(os.path.realpath(config)):
        return (
            f"--audit: {audit} is the config file: its lines would be appended to it; give the audit log a path of its "
            "own"
        )
    return None


def file_problem(option: str, path: str | Path, *, makes_folders: bool = False) -> str | None:
    """Why ``path`` cannot be written as the file ``option`` names, or None; checked before any work starts.

    ``makes_folders``: the writer creates the missing folders above the file (else they must exist).
    """
    if not str(path):
        return f"{option}: the path is empty"
    p = Path(path)
    try:
        if p.is_dir():
            return f"{option}: {p} is a folder, not a file"
        if p.exists():
            return None if os.access(p, os.W_OK) else f"{option}: {p} is not writable"
        if makes_folders:
            return folder_problem(option, p.parent)
        if not p.parent.exists():
            return f"{option}: the folder {p.parent} does not exist"
    except OSError as e:  # a parent that may not be searched
        return f"{option}: cannot reach {p}: {e.strerror or e}"
    return folder_problem(option, p.parent)


def folder_problem(option: str, path: str | Path, *, writable: bool = True, home: bool = False) -> str | None:
    """Why ``path`` cannot be used (or created) as the folder ``option`` names, or None; checked before any
    work starts. ``writable``: files will be written into it. ``home``: a leading ``~`` of the path as given is
    refused when no folder is named so (the shell left it; a caller that expands ``~`` itself leaves this off)."""
    if not str(path):  # Path("") is ".": `--out "$UNSET"` would write into the working folder
        return f"{option}: the path is empty"
    if home:
        from generator.generate_args import unexpanded_home

        if (tilde := unexpanded_home(str(path), name=option, shell=True)) is not None:
            return tilde  # before: `--workspace '~/x'` made a folder named `~` in the working folder
    p = Path(path)
    try:
        existing = next((q for q in (p, *p.parents) if q.exists()), None)
    except OSError as e:  # a parent that may not be searched
        return f"{option}: cannot reach {p}: {e.strerror or e}"
    if existing is None:  # not even '.': the working folder was deleted
        return f"{option}: cannot create {p}: the working folder no longer exists"
    if not existing.is_dir():
        what = _kind_of(existing)
        if existing == p:
            return f"{option}: {p} is {what}, not a folder"
        return f"{option}: cannot create {p}: {existing} is {what}, not a folder"
    if writable and not os.access(existing, os.W_OK | os.X_OK):
        return f"{option}: the folder {existing} is not writable"
    return None


def _kind_of(path: Path) -> str:
    """What ``path``, which is no folder, is (a link followed): "a file", or the special file it is. Before: a named
    pipe or a socket given as `--workspace` was called "a file", which a user who lists it sees it is not."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError:
        return "a file"  # a dangling link, or gone meanwhile: as before
    for test, what in (
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return what
    return "a file"


def located(e: Exception, config: Config | None, *, given: Sequence[str] = ()) -> Exception:
    """``e`` as a `ConfigError` at its setting's file, line and key when it is about a config value (an
    `AgentSetupError` with a ``setting``) that came from ``config``, not from an option (``given``: the
    settings the command line set); else ``e``."""
    from tool_tree.config import ConfigError

    setting = getattr(e, "setting", None)
    if not isinstance(setting, str) or config is None or setting in given:
        return e
    name, _, key = setting.partition(".")
    section = config.section(name)
    if key not in section.values:
        return e
    return ConfigError(str(e), file=section.source, line=section.lines.get(key), key=setting)


class HttpOption(argparse.Action):
    """Stores the value and notes in ``http_options`` that the option was given: `tooltree serve` refuses it without
    --http rather than ignoring it."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        namespace.http_options = (*namespace.http_options, option_string or self.dest)
