"""`SandboxConfig`: the limits and settings of sandbox sessions, with safe defaults."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sandbox._supervisor.cgroup import UNLIMITED_FROM
from sandbox.errors import SandboxError
from tool_tree.config import Config, Setting
from tool_tree.text import shown

SANDBOX_UID = 10001
"""The unprivileged user (and group) that everything in the container runs as."""

TREE_MOUNT = "/opt/tooltree/tree"
WORKSPACE = "/workspace"

_SIZE = re.compile(r"^(\d+)([kmg]?)$")
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(text: str) -> int:
    """``"64m"`` → bytes (units k, m, g; powers of 1024).

    Raises:
        SandboxError: not a size.
    """
    match = _SIZE.match(text.strip().lower())
    if not match:
        raise SandboxError(f"not a size: {text!r} (use e.g. 512m or 2g)")
    return int(match.group(1)) * _UNITS[match.group(2)]


def _size(value: Any) -> str | None:
    """What is wrong with a size limit (None: nothing). Zero is refused: to the engine it means no limit."""
    if not isinstance(value, str):
        return f"not a size: {value!r} (use e.g. 512m or 2g)"
    try:
        size = parse_size(value)
    except SandboxError as e:
        return str(e)
    return None if size > 0 else f"expected more than 0, got {value!r} (0 would mean no limit)"


MIN_MEMORY = "6m"
"""The least ``memory`` may set: the engine refuses a container under 6 MiB ("Minimum memory limit allowed is
6MB"), which was seen only when a session started, without the file, line or key. (It takes a ``/tmp`` or
workspace tmpfs of any size, rounded up to a page.)"""


MAX_MEMORY_BYTES = UNLIMITED_FROM - 1
"""The most ``memory`` may set (4 EiB less a byte): a cgroup's limit from `UNLIMITED_FROM` on reads as none, so a
sandbox asked for more could never be shown confined. Before, it was refused at its start as "not confined as
required: its cgroup sets no memory limit", naming no setting."""


def _memory(value: Any) -> str | None:
    """What is wrong with a memory limit (None: nothing): not a size, less than `MIN_MEMORY` or more than
    `MAX_MEMORY_BYTES`."""
    if (problem := _size(value)) is not None:
        return problem
    if parse_size(value) < parse_size(MIN_MEMORY):
        # `memory: 512`, meant as 512 MiB, is 512 bytes, as in Docker's --memory (before: said too small alone)
        meant = str(value).strip()
        as_mib = meant.isdigit() and 6 <= int(meant) < 1024**2  # what a MiB count looks like
        bytes_alone = f" (a number alone is bytes: write {meant}m for {meant} MiB)" if as_mib else ""
        return f"expected at least {MIN_MEMORY} (the engine's least memory limit), got {value!r}{bytes_alone}"
    if parse_size(value) > MAX_MEMORY_BYTES:
        return (
            f"expected less than {UNLIMITED_FROM // 1024**3}g (4 EiB: a cgroup's memory limit from there on reads as "
            f"none, so the sandbox could not be shown confined), got {value!r}"
        )
    return None


def _positive(value: Any) -> str | None:
    """What is wrong with a number that must be positive and finite (None: nothing)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        return f"expected a positive number, got {value!r}"
    return None


MAX_TIMEOUT = 7 * 24 * 3600.0
"""The most seconds ``timeout`` and ``start_timeout`` may set (and `Sandbox.execute`'s ``timeout``): a week.

The host waits an execution's timeout plus a grace, and the supervisor arms a timer for it; neither can wait
longer than `threading.TIMEOUT_MAX` (about 292 years on Linux): past it the wait raises OverflowError."""


def _seconds(value: Any) -> str | None:
    """What is wrong with a number of seconds: positive, finite, at most `MAX_TIMEOUT` (None: nothing)."""
    return _positive(value) or _at_most_a_week(value)


def _at_most_a_week(value: Any) -> str | None:
    """What is wrong with a positive number of seconds (None: nothing): more than `MAX_TIMEOUT`."""
    return None if value <= MAX_TIMEOUT else f"expected at most {MAX_TIMEOUT:g} seconds (a week), got {value!r}"


def _count(value: Any) -> str | None:
    """What is wrong with a whole number that must be positive (None: nothing)."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return f"expected a positive whole number, got {value!r}"
    return None


MIN_OUTPUT_CHARS = 100
"""The fewest characters of stdout (and of stderr) ``output_chars`` may set."""


def _output_chars(value: Any) -> str | None:
    """What is wrong with ``output_chars`` (None: nothing)."""
    if _count(value) is not None or value < MIN_OUTPUT_CHARS:
        return f"expected at least {MIN_OUTPUT_CHARS} characters, got {value!r}"
    return None


PIP_SPEC = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-\[\],<>=!~ ]*\Z")
"""A pip requirement ``pip_packages`` may hold: a name with extras and version bounds, never a pip option. It
ends at ``\\Z``, not ``$``, which also matches before a final newline (``"six\\n"`` passed, and broke the
derived image's Dockerfile)."""

MAX_PIP_PACKAGES = 200
"""Requirements ``pip_packages`` may list. The derived image's Dockerfile installs them on one line, which the
engine's parser refuses past 64 KiB ("dockerfile line greater than max allowed size"): 200 of `MAX_PIP_SPEC`
characters, quoted, take 41 KB."""
MAX_PIP_SPEC = 200
"""Characters of one requirement (``pandas[excel,performance]>=2.2,<3`` has 34)."""


def _pip_packages(value: Any) -> str | None:
    """What is wrong with ``pip_packages`` (None: nothing): a string (each of its characters passed for a requirement:
    ``pip_packages="pandas"`` built an image with the packages ``p``, ``a``, ``n``, ``d`` and ``s``), too many, or an
    entry that is not a requirement."""
    if not isinstance(value, list | tuple):
        hint = f" (one requirement is a list of one: [{value!r:.80}])" if isinstance(value, str) else ""
        return f"expected a list of pip requirements, got {type(value).__name__} {value!r:.80}{hint}"
    if len(value) > MAX_PIP_PACKAGES:
        return f"{len(value):,} requirements; at most {MAX_PIP_PACKAGES} (they go on one line of a Dockerfile)"
    for spec in value:
        if not isinstance(spec, str) or not PIP_SPEC.match(spec):
            return f"not a pip requirement: {spec!r} (a name with optional extras and versions, such as pandas==2.2)"
        if len(spec) > MAX_PIP_SPEC:
            return f"a requirement of {len(spec):,} characters; at most {MAX_PIP_SPEC}: {spec[:40]!r}…"
    return None


_IMAGE_NAME = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_HOST = (
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])"
)
IMAGE_REFERENCE = re.compile(
    rf"(?:{_IMAGE_HOST}(?::[0-9]+)?/)?{_IMAGE_NAME}(?:/{_IMAGE_NAME})*"  # [registry[:port]/]path
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"  # :tag
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,})?",  # @digest
    re.ASCII,
)
"""A Docker image reference, ``[registry[:port]/]path[:tag][@digest]``, as the engine's grammar has it
(``distribution/reference``): a path of lowercase components, a tag of at most 128 word characters, dots and
dashes. ``image`` is written into a Dockerfile's ``FROM`` line, so nothing else may pass (before:
``"a\\nRUN id"`` did)."""
MAX_IMAGE_NAME = 255
"""Characters of the path with its registry, as the engine allows."""
MAX_IMAGE_REFERENCE = 512
"""Characters of a whole reference: the name's 255, a tag's 128 and a SHA-512 digest's 135 fit."""


def image_problem(value: Any) -> str | None:
    """What is wrong with ``value`` as an image reference (None: nothing)."""
    if isinstance(value, str) and len(value) > MAX_IMAGE_REFERENCE:  # before the pattern, which backtracks
        return f"an image reference of {len(value):,} characters; at most {MAX_IMAGE_REFERENCE}"
    if not isinstance(value, str) or IMAGE_REFERENCE.fullmatch(value) is None:
        return (
            f"not a Docker image reference: {value!r} (such as python:3.12-slim, "
            "registry.example.com:5000/team/sandbox:1, or name@sha256:<digest>; lowercase)"
        )
    name = value.split("@")[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    if len(name) > MAX_IMAGE_NAME:
        return f"an image name of {len(name):,} characters; at most {MAX_IMAGE_NAME}"
    return None


def _runtime(value: str | None) -> str | None:
    """An empty runtime (``runtime: "${RT:-}"`` with RT unset) would run the engine's default in silence."""
    if value is not None and not value.strip():
        return "an empty runtime: the engine would run its default (leave the key out for that)"
    return None


_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "memory": _memory,
    "cpus": _positive,
    "pids_limit": _count,
    "nofile": _count,
    "tmp_size": _size,
    "workspace_size": _size,
    "timeout": _seconds,
    "output_chars": _output_chars,
    "start_timeout": _seconds,
    "workspace_max_bytes": lambda v: None if v is None else _count(v),
    "pip_packages": _pip_packages,
    "image": lambda v: None if v is None else image_problem(v),
    "runtime": _runtime,
}
"""Each limited field of `SandboxConfig` and what is wrong with a value of it (checked one by one)."""

OWNER_ENV = "TOOLTREE_SANDBOX_OWNER"
"""The variable that sets the owner label of every sandbox tooltree makes (the CLI's and the Python API's alike)."""
DEFAULT_OWNER = "tooltree"


def default_owner() -> str:
    """``$TOOLTREE_SANDBOX_OWNER`` when it is set and not empty, else ``tooltree``: the owner of a `SandboxConfig`
    given none, and the one ``tooltree sandbox prune`` selects by default."""
    return os.environ.get(OWNER_ENV) or DEFAULT_OWNER


SETTINGS: dict[str, Setting] = {
    "image": Setting(str, "the image to run instead of the one built from the sources", check=image_problem),
    "pip_packages": Setting(list, "a list of pip requirements baked into a derived image", check=_pip_packages),
    "memory": Setting(str, "a memory limit such as 512m or 2g", check=_memory),
    "cpus": Setting(float, "a CPU limit; fractions allowed"),
    "pids_limit": Setting(int, "the most processes and threads"),
    "nofile": Setting(int, "the open-file limit"),
    "tmp_size": Setting(str, "the size of /tmp and of /dev/shm, such as 64m", check=_size),
    "workspace_size": Setting(str, "the workspace quota, such as 256m", check=_size),
    "timeout": Setting(float, "seconds one execution may run", check=_at_most_a_week),
    "output_chars": Setting(int, "characters of output returned per execution", check=_output_chars),
    "runtime": Setting(str, "an OCI runtime such as runsc (gVisor)", check=lambda v: _runtime(v)),
}
"""The ``sandbox:`` section of tooltree.yaml: each key is the `SandboxConfig` field of that name."""


@dataclass(frozen=True)
class SandboxConfig:
    """How sandbox containers are confined. Every field has a safe default.

    Attributes:
        image: the image to run; None means the image built from the current sources
            (``tooltree-sandbox:<tag>``, see `sandbox.image`).
        pip_packages: extra pip requirements; sessions then run a derived image
            (``tooltree-sandbox-custom:<hash>``) built once from ``image`` plus these.
        memory: memory limit; swap is set equal, so the container cannot swap.
        cpus: CPU limit (fractions allowed).
        pids_limit: processes and threads, all together.
        nofile: open-file limit.
        tmp_size: size of the ``/tmp`` and ``/dev/shm`` tmpfs (noexec).
        workspace_size: size of the ``/workspace`` tmpfs (the workspace quota).
        timeout: default wall-clock limit of one execution, in seconds (at most a week: `MAX_TIMEOUT`).
        output_chars: characters of stdout (and of stderr) returned in a result; more is
            previewed as head and tail, with the whole text in a workspace file.
        runtime: an OCI runtime such as ``runsc`` (gVisor); None for the engine's default.
        owner: the ``tooltree.owner`` label of every container and volume (``tooltree sandbox prune --owner``
            selects on it); by default ``$TOOLTREE_SANDBOX_OWNER`` when set, else ``tooltree`` (`default_owner`, read
            when the config is made).
        labels: extra labels for every container.
        start_timeout: seconds to wait for a new container's supervisor to report ready (at most a week).
        workspace_max_bytes: most bytes a workspace may hold when saved or restored, counting 4 KiB
            per file or folder; None (default): what fills ``workspace_size`` with the most entries a
            save takes, so whatever fits the container's workspace can be saved (`workspace_bytes`).
    """

    image: str | None = None
    pip_packages: tuple[str, ...] = ()
    memory: str = "512m"
    cpus: float = 1.0
    pids_limit: int = 256
    nofile: int = 1024
    tmp_size: str = "64m"
    workspace_size: str = "256m"
    timeout: float = 30.0
    output_chars: int = 20_000
    runtime: str | None = None
    owner: str = field(default_factory=default_owner)  # before: "tooltree" in the Python API whatever the variable
    labels: dict[str, str] = field(default_factory=dict)
    start_timeout: float = 30.0
    workspace_max_bytes: int | None = None
    source: str | None = field(default=None, compare=False, repr=False)
    """The config file these settings were read from (`from_config`), for messages that tell what to run with it."""
    lines: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)
    """The line of each setting in `source`, for messages that name where it was set (`where`)."""

    def __post_init__(self) -> None:
        """Raises: SandboxError: a limit is out of range (the first one, by name: ``timeout: expected …``)."""
        for name, check in _CHECKS.items():
            if (problem := check(getattr(self, name))) is not None:
                raise SandboxError(f"{name}: {problem}")

    @classmethod
    def from_config(cls, config: Config | None, **overrides: Any) -> SandboxConfig:
        """The settings of the config's ``sandbox:`` section, then ``overrides`` (None values are ignored).

        Raises:
            TypeError: ``config`` is not a `Config` (a path: read it with ``load_config`` first).
            ConfigError: the section has an unknown key or a value of the wrong type or out of range
                (file, line, key).
            SandboxError: an override is out of range (named as in ``__post_init__``).
        """
        given: object = config  # typed, but a caller may hand the path (before: "'str' object has no attribute …")
        if given is not None and not isinstance(given, Config):
            raise TypeError(
                "config: expected a tool_tree.config.Config (load_config(path) reads a tooltree.yaml) or None, "
                f"got {type(given).__name__} {shown(given)}"
            )
        settings: dict[str, Any] = config.section("sandbox").read(SETTINGS) if config is not None else {}
        settings.update({k: v for k, v in overrides.items() if v is not None})
        if config is None:
            return cls(**settings)
        lines = {k: line for k, line in config.section("sandbox").lines.items() if line is not None}
        return cls(**settings, source=config.source, lines=lines)

    def where(self, key: str) -> str:
        """``tooltree.yaml:6: sandbox.image``: the setting ``key`` with the file and line that set it, when known."""
        line, known = self.lines.get(key), self.source not in (None, "<config>")  # "<config>": text, not a file
        return f"{self.source}:{line}: sandbox.{key}" if known and line is not None else f"sandbox.{key}"

    @property
    def workspace_bytes(self) -> int:
        """The bytes a workspace may hold when saved or restored (``workspace_max_bytes``, or derived)."""
        from sandbox._supervisor.transfer import ENTRY_BYTES, MAX_ENTRIES

        if self.workspace_max_bytes is not None:
            return self.workspace_max_bytes
        return parse_size(self.workspace_size) + MAX_ENTRIES * ENTRY_BYTES

    @property
    def workspace_data_bytes(self) -> int:
        """The file data a saved workspace may hold: the ``/workspace`` tmpfs's size, all a restore can write back."""
        return parse_size(self.workspace_size)

    @property
    def memory_bytes(self) -> int:
        return parse_size(self.memory)
