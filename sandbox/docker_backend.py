"""`DockerBackend`: sandboxes as hardened Docker containers, driven through the Docker Engine API.

Starting one sandbox (every step an API call through docker-py, see `sandbox._docker`)::

    create (hardening settings of sandbox.hardening, AutoRemove) → inspect → check_hardening:
        refuse (and remove) unless every setting is in effect
    attach (stdin, stdout, stderr: the channel) → watch for its death in the engine's events → start
    supervisor's ready report → check_process_status, and check_in_force (its cgroup's limits, seccomp filter,
        network and mounts, as it sees them)

A process's first start also removes, on a thread of its own, the containers its owner's tooltree processes left
when they were killed on this host (`sandbox.sweep`).

Nothing on the host is mounted. The tree goes in through a named volume
``tooltree-tree-<hash of the owner and the content>``, filled once per distinct tree and owner by a throwaway
container that reads a tar from its stdin, and mounted read-only; the workspace travels over the channel. So
the same code works with a local engine, Docker Desktop or a remote ``DOCKER_HOST``. A volume is its owner's alone
(`OWNER_LABEL`): `tooltree sandbox prune --owner A` never removes the copy an idle tooltree of owner B would use
next (before, owners shared it under its first maker's label, and B copied the tree again after A's prune).
The copies of trees a backend took before its current one (`DockerBackend.refresh_tree`) are removed once no
container mounts them; a start that finds its copy removed meanwhile, by that or by a prune, copies the tree again
(`sandbox.session.open_channel`). Each container says which generation of the tree its copy holds (the version of the
manifest file read with the copy: `DockerConnection.tree_manifest`), so that a runtime can start another when it is
not the one its calls are checked against (`sandbox.host.Runtime`).

Over 400 lines: a container's whole life on the engine (start, checks, channel, removal, tree volumes).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sandbox import hardening
from sandbox._attach import AttachSocket
from sandbox._docker import OOM_KEY, DockerEngine, default_engine, engine_address
from sandbox.backend import Connection, SandboxBackend
from sandbox.config import SandboxConfig
from sandbox.errors import EngineError, EngineUnavailableError, HardeningError, IncompleteTreeError, SandboxError
from sandbox.hardening import HOST_LABEL, OWNER_LABEL, check_hardening, check_process_status, container_spec
from sandbox.image import ensure_image, session_image
from sandbox.in_force import check_in_force, tree_incomplete
from sandbox.stored_definitions import manifest_version
from sandbox.sweep import sweep_once
from sandbox.tree_pack import pack_tree, tree_fingerprint
from tool_tree.regenerate import regenerate_command
from tool_tree.tree import tree_lock

logger = logging.getLogger(__name__)

TREE_VOLUME_PREFIX = "tooltree-tree-"
FILL_VERSION = b"3\n"
"""Part of a tree volume's name: volumes filled before copies took turns, or before a copy whose tooltree was
killed midway stopped being marked complete, may be marked complete with files missing, so they are not used
again (`tooltree sandbox prune` removes them)."""
TREE_KNOWN_PREFIX = "tooltree-treestat-"
"""An empty volume whose `TREE_VOLUME_LABEL` names the filled volume of one unchanged tree (`tree_fingerprint`)."""
TREE_VOLUME_LABEL = "tooltree.tree-volume"
_POPULATE_TIMEOUT = 300.0
POPULATE_MEMORY = 1 << 30
"""The memory of the container that copies a tree into its volume, which compiles every module: a tree from
elsewhere may hold a module costly to compile (8 MB of ``a`` lines take 5 GiB and 20 s), and before, the container
had no limit. The generator's largest modules (a server's ``__init__`` of 20,000 long names, 3.5 MB) take 80 MiB."""
POPULATE_PIDS = 64
"""The processes and threads of that container (one Python process)."""
_EXIT_REPORT_WAIT = 2.0
"""Seconds the end of a container's output waits for the engine to report why it ended."""


class DockerConnection:
    """A started container: its attach socket is the channel.

    The engine's events report the container's death (`on_death`): the socket is then shut at
    once, so a reader waiting on it learns why instead of waiting for the stream to drain.
    """

    def __init__(
        self, engine: DockerEngine, container_id: str, name: str, attached: AttachSocket, *, gvisor: bool = False,
        on_removed: Callable[[], None] | None = None,
    ) -> None:  # fmt: skip
        self.engine = engine
        self.on_removed = on_removed
        """Called once the container is removed (`DockerBackend` then removes the tree volumes it no longer uses)."""
        self.gvisor = gvisor
        """Whether the container runs under gVisor: a kill (status 137) then most likely means its memory limit."""
        self.container_id = container_id
        self.name = name
        self.attached = attached
        self.stdin = attached.stdin
        self.stdout = _ExitReportingStdout(self)
        self.stderr = attached.stderr
        self.exited = threading.Event()
        """The engine reported the container dead."""
        self.ended = threading.Event()
        """The container is dead, or its output ended (whichever is known first)."""
        self.exit_status: str | None = None
        """The container's exit status as the engine reported it (None while it runs)."""
        self.tree_manifest: tuple[int, ...] | None = None
        """The version of the manifest file (`sandbox.stored_definitions.manifest_version`) of the tree whose copy the
        container mounts, as `DockerBackend` read it with the copy; None: no tree, or not known."""
        self.out_of_memory = False
        """Whether the engine reported the container out of memory before it died."""
        self._removed = False
        self._removing = threading.Lock()
        """Held while removing: a second remover (a kill, the reader) waits, so it never returns with it running."""

    def on_death(self, event: Mapping[str, Any]) -> None:
        """The engine reported the container dead (called on the events thread)."""
        attributes = (event.get("Actor") or {}).get("Attributes") or {}
        self.exit_status = str(attributes.get("exitCode", "unknown"))[:20]
        self.out_of_memory = event.get(OOM_KEY) is True
        self.exited.set()
        self.ended.set()
        self.attached.abort(closed_channel(self.exit_status, gvisor=self.gvisor, oom=self.out_of_memory))

    def _remove(self) -> None:
        with self._removing:
            if self._removed:
                return
            self._removed = True
            removed = self._remove_now()
        if removed and self.on_removed is not None:
            self.on_removed()

    def _remove_now(self) -> bool:
        self.engine.unwatch(self.container_id)
        self.attached.close()  # first: the engine must never be left writing to a socket nobody reads
        problem: EngineError | None = None
        for _attempt in range(2):  # a busy engine may not answer in time once: ask again before leaving it
            try:
                self.engine.remove_container(self.container_id)
                return True
            except EngineUnavailableError as e:
                problem = e
                break
            except EngineError as e:
                problem = e
        logger.warning("could not remove sandbox container %s (%s); `tooltree sandbox prune` removes it",
                       self.name, problem)  # fmt: skip
        return False

    def close(self, timeout: float = 5.0) -> None:
        """Close the supervisor's stdin (it exits, and the container with it), then make sure."""
        self.stdin.close()
        self.ended.wait(timeout)
        self._remove()

    def kill(self) -> None:
        """Shut the channel and remove the container at once."""
        self.attached.abort("the sandbox was killed")
        self._remove()


def closed_channel(status: str | None, *, gvisor: bool = False, oom: bool = False) -> str:
    """Why a session ended when its container did: its exit status, and for 137 (killed) the likeliest cause under
    its runtime (``gvisor``: `DockerBackend.gvisor`), or the memory limit when the engine said so (``oom``)."""
    reason = f"the sandbox closed its channel: its container exited with status {status}"
    if status != "137":
        return reason
    if oom and not gvisor:
        # Under runc the limit ends the script's interpreter, not the sandbox, unless the sandbox's own processes do
        # not fit: a `memory` of a few MB. Before: this too was put down to `docker kill`.
        return reason + (
            " (killed: out of memory, as the engine reported; under runc the memory limit, sandbox.memory, ends only a "
            "script's interpreter unless the sandbox's own processes do not fit in it (under about 20m): raise "
            "sandbox.memory)"
        )
    # Under runc the kernel kills the interpreter alone and the supervisor says so; under gVisor the host's OOM
    # killer ends the sandbox's kernel, the Sentry, which also holds about 6 MB of host memory per process. A kill
    # from outside (`docker kill`, `docker rm -f`, the host) ends either with the same status. Before: both
    # runtimes' causes were given whichever ran, and under gVisor nothing said processes count against memory; nor,
    # later, that the entries of /tmp and /dev/shm do (a script making empty folders there was told of processes).
    if gvisor:
        return reason + (
            " (killed: under gVisor most likely past its memory limit, sandbox.memory, which ends the whole sandbox, "
            "with the workspace not saved and the last moment of output lost; each process costs gVisor about 6 MB and "
            "each file or folder in /tmp or /dev/shm some of it too (the cap of 16,384 on their number holds under "
            "runc only), so a script starting many processes, such as a fork bomb, or making many files reaches that "
            "limit first: raise sandbox.memory, or start fewer processes or make fewer files)"
        )
    return reason + (
        " (killed: under runc, where the memory limit ends only the script, most likely stopped from outside: "
        "`docker kill`, `docker rm -f`)"
    )


class _ExitReportingStdout:
    """The container's stdout; at its end, the container's exit status (from the engine's events) as the reason."""

    def __init__(self, connection: DockerConnection) -> None:
        self._connection = connection

    def read(self, size: int = -1) -> bytes:
        data = self._connection.attached.stdout.read(size)
        if not data:
            self._connection.ended.set()
        # After we closed its stdin, the end is the one we asked for: no reason to wait for.
        if not data and not self._connection.stdin.closed and self._connection.exited.wait(_EXIT_REPORT_WAIT):
            connection = self._connection
            raise ConnectionAbortedError(
                closed_channel(connection.exit_status, gvisor=connection.gvisor, oom=connection.out_of_memory)
            )
        return data

    def close(self) -> None:
        self._connection.attached.stdout.close()


class DockerBackend(SandboxBackend):
    """Runs each sandbox session in its own hardened container.

    Args:
        config: limits and settings; defaults are the safe ones.
        tree: the generated tree to mount read-only at ``/workspace/servers``; None for none.
        docker: the engine to use; default the process's engine from the environment (``DOCKER_HOST``).
        build: build the image (and the derived image with ``config.pip_packages``) when it is
            missing, instead of failing.

    Raises:
        TypeError: ``config`` is not a `SandboxConfig` or None, ``tree`` not a path or None.
        ValueError: ``tree`` is an empty path (it would be the working folder).
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        tree: Path | str | None = None,
        docker: DockerEngine | None = None,
        build: bool = False,
    ) -> None:
        if config is not None and not isinstance(config, SandboxConfig):  # before: an AttributeError further on
            raise TypeError(f"config: expected a SandboxConfig or None, got {type(config).__name__}")
        if tree is not None and not isinstance(tree, str | os.PathLike):
            raise TypeError(f"tree: expected the tree's folder as a str or a path, or None, got {type(tree).__name__}")
        if tree is not None and os.fspath(tree) in ("", b""):  # before: Path("") is the working folder
            raise ValueError(
                'tree is an empty path; name the tree\'s folder ("tree", as generate-tree writes it) or pass None'
            )
        self.config = config or SandboxConfig()
        self.tree = Path(tree) if tree is not None else None
        self.docker = docker or default_engine()
        self.build = build
        self.image = session_image(self.config.image, ())[0]
        """The image sessions run: its parent until `prepare` finds the derived image of ``config.pip_packages``
        (named by the parent's ID, which takes the engine)."""
        self.tree_volume: str | None = None
        self.gvisor = False
        """Whether the engine runs ``config.runtime`` under gVisor (`engine_runs_gvisor`), found by `prepare`."""
        self._prepared = False
        self._tree_record: str | None = None
        """The record of the tree's volume (`TREE_KNOWN_PREFIX`), forgotten when a session finds the copy unfinished."""
        self._tree_unfinished = False
        """A session found the tree volume without a whole copy: the next start copies the tree again."""
        self._lock = threading.Lock()
        self._superseded: dict[str, None] = {}
        """The volumes (and records) of trees this backend took before the one it takes now (`refresh_tree`), removed
        once no container uses them (`_remove_superseded`)."""
        self._starting: list[str | None] = []
        """The tree volume of each start under way until its container is made (`launch`): not removed meanwhile."""
        self._tree_manifests: dict[str, tuple[int, ...]] = {}
        """The version of the tree's manifest file each tree volume holds, read under the tree's lock with its copy
        (`_ensure_tree_volume`): a sandbox says which tree it mounts (`DockerConnection.tree_manifest`)."""
        self._superseded_lock = threading.Lock()
        """Guards ``_superseded`` and ``_starting``; never held across an engine call (``_lock`` is, for as long as a
        tree's copy)."""

    def prepare(self) -> None:
        """Check the engine (that it can confine a sandbox, and whether its runtime is gVisor), the image and the tree
        volume (once).

        Raises:
            EngineUnavailableError: no engine answers.
            EngineError: the engine cannot confine a sandbox as required (`hardening.engine_problem`: Podman, or
                limits it does not apply).
            ImageError: the image is missing (build it: ``tooltree image build``).
            SandboxError: the tree cannot be packed or copied, or the engine failed otherwise.
        """
        with self._lock:
            if self._prepared:
                return
            version, info = self.docker.version(), self.docker.info()
            # Fail closed on an engine that cannot apply every setting, before anything is made on it.
            problem = hardening.engine_problem(version, info)
            if problem is not None:
                raise EngineError(f"the engine at {engine_address()} cannot run a sandbox: {problem}")
            # By the engine's registration, not the name alone; a name it lacks fails at the create (`sandbox.host`).
            self.gvisor = hardening.engine_runs_gvisor(info, self.config.runtime)
            self.image = ensure_image(
                self.docker, self.config.image, self.config.pip_packages, build=self.build,
                config=self.config.source, owner=self.config.owner, setting=self.config.where("image"),
            )  # fmt: skip
            if self.tree is not None:
                self.tree_volume = self._ensure_tree_volume(self.tree)
            self._prepared = True

    def refresh_tree(self) -> bool:
        """Copy the tree into a volume again if it changed since `prepare` (``tooltree serve`` regenerated it while
        serving); containers launched from now on mount that volume, those running keep theirs. Whether it changed.
        Before the first `prepare` nothing is done, the engine not asked (that `prepare` reads the tree as it is).

        Raises:
            SandboxError: the tree cannot be packed or copied (containers keep mounting the old volume).
        """
        if self.tree is None:
            return False
        with self._lock:  # held by a `prepare` under way: this waits for it
            if not self._prepared:
                return False
            before = (self._tree_record, self.tree_volume)
            volume = self._ensure_tree_volume(self.tree)
            changed, self.tree_volume = volume != self.tree_volume, volume
            self._supersede(before)
        self._remove_superseded()
        return changed

    def _supersede(self, names: tuple[str | None, ...]) -> None:
        """Note ``names``, the tree volume and record this backend used before it took the current ones, for
        `_remove_superseded` (the current ones are kept: a regeneration back to an earlier tree takes its volume)."""
        with self._superseded_lock:
            self._superseded.update(dict.fromkeys(name for name in names if name is not None))
            for name in (self._tree_record, self.tree_volume):
                self._superseded.pop(name or "", None)

    def _remove_superseded(self) -> None:
        """Remove the volumes and records of the trees this backend used before the current one, but those a
        container (of any process) still mounts, which the engine keeps, or a start of this backend is about to
        mount: tried again as each container of this backend is removed. Before: each regeneration that changed the
        tree (``tooltree serve`` following its servers) left two volumes until a `tooltree sandbox prune`.

        A copy is named by its content and owner, so another tooltree process of this owner may be about to start on
        one removed here: its start then finds it gone, or empty (the engine makes one for the create), and copies the
        tree again (`sandbox.session.open_channel`), as after a prune."""
        with self._superseded_lock:
            current = (self._tree_record, self.tree_volume, *self._starting)
            names = [name for name in self._superseded if name not in current]
        for name in names:  # the record first (`_supersede` keeps the order): no start finds the volume through it
            try:
                gone = self.docker.remove_volume(name) or not self.docker.volume_exists(name)
            except EngineError as e:  # tried again as the next container is removed
                logger.debug("could not remove the tree volume %s, no longer used: %s", name, e)
                continue
            if gone:
                with self._superseded_lock:
                    self._superseded.pop(name, None)

    def _ensure_tree_volume(self, tree: Path) -> str:
        """The volume holding ``tree``, copied into one first unless a volume already holds this very tree.

        A volume is named by the hash of the tree's content, which costs packing the whole tree (3 s for
        20,000 stubs) and a container to copy it (that finds it complete). So each filled volume is also
        recorded under the tree's `tree_fingerprint` (its files' identities and times, no content read):
        a tree unchanged since finds its volume with two lookups.
        """
        # `generate-tree` may be rewriting the tree: wait for it, and read one whole generation.
        with tree_lock(tree, shared=True):
            # Named with FILL_VERSION too: a record made before it changed names a volume that is not used again.
            manifest = manifest_version(tree)  # of the generation copied, or found copied
            owned = self._owned(tree_fingerprint(tree).encode())[:24]
            known = self._tree_record = f"{TREE_KNOWN_PREFIX}{FILL_VERSION.decode().strip()}-{owned}"
            labels = self.docker.volume_labels(known)
            name = (labels or {}).get(TREE_VOLUME_LABEL, "")
            if name.startswith(TREE_VOLUME_PREFIX) and self.docker.volume_exists(name):
                self._tree_manifests[name] = manifest
                return name
            if labels is not None:
                # Its volume is gone (removed alone): a copy into a new volume of that name that is cut short must
                # not be found through it. Before, the next session of this tree mounted such a copy, half a tree.
                self.docker.remove_volume(known)
            data = pack_tree(tree)
        name = self._fill_tree_volume(data, tree)
        self.docker.create_volume(known, {OWNER_LABEL: self.config.owner, TREE_VOLUME_LABEL: name})
        self._tree_manifests[name] = manifest
        return name

    def _owned(self, data: bytes) -> str:
        """The hash (hex) of ``data`` that names a volume of this backend's owner (and of `FILL_VERSION`)."""
        digest = hashlib.sha256(FILL_VERSION + self.config.owner.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(data)
        return digest.hexdigest()

    def _fill_tree_volume(self, data: bytes, tree: Path) -> str:
        """A new volume holding the packed tree ``data`` (of the folder ``tree``): its name."""
        name = TREE_VOLUME_PREFIX + self._owned(data)[:20]
        self.docker.create_volume(name, {OWNER_LABEL: self.config.owner})
        spec = {
            "image": self.image,
            "command": ["python3", "-I", "-m", "tooltree_supervisor.populate", "/dst"],
            "user": "0:0",
            "entrypoint": [""],
            "stdin_open": True,
            # The maker, as a session's: `tooltree sandbox prune` removed a running process's copy (its session failed).
            "labels": {OWNER_LABEL: self.config.owner, HOST_LABEL: hardening.host_label()},
            "use_config_proxy": False,
            "host_config": {
                "NetworkMode": "none",
                "ReadonlyRootfs": True,
                "CapDrop": ["ALL"],
                "SecurityOpt": ["no-new-privileges"],
                "LogConfig": {"Type": "none", "Config": {}},
                # As a session's mount: a volume the engine makes for it (``name`` removed since) is the owner's.
                "Mounts": [
                    {
                        "Type": "volume",
                        "Source": name,
                        "Target": "/dst",
                        "VolumeOptions": {"Labels": {OWNER_LABEL: self.config.owner}},
                    }
                ],
                "Memory": POPULATE_MEMORY,
                "MemorySwap": POPULATE_MEMORY,
                "PidsLimit": POPULATE_PIDS,
                "NanoCpus": 1_000_000_000,
            },
        }
        status, stderr = run_with_input(self.docker, spec, data, timeout=_POPULATE_TIMEOUT)
        if status == 137:  # SIGKILL: the engine's OOM killer (the memory limit), or a kill from outside
            raise SandboxError(
                f"could not copy the tree into volume {name}: the copy was killed (out of its {POPULATE_MEMORY >> 20} "
                "MiB compiling the tree's modules? a module no generator writes may cost gigabytes to compile; "
                f"regenerate the tree with {regenerate_command(tree)})"
            )
        if status != 0:
            raise SandboxError(f"could not copy the tree into volume {name} (exit status {status}): {stderr[-1000:]}")
        return name

    def launch(self, session_id: str) -> DockerConnection:
        """Create, verify, attach to and start one container.

        However this fails or is interrupted (Ctrl-C) from the create on, the container is removed: by
        its name when the create's reply never arrived (the engine may have made it all the same).

        Raises:
            HardeningError: the created container lacks a required setting (it was removed).
            EngineError: the engine failed.
        """
        self.prepare()
        # The containers of this owner's tooltree processes killed on this host, off this start's path (once).
        sweep_once(self.docker, self.config.owner)
        self._recopy_gone_tree()
        # Read once, and never removed as superseded (`refresh_tree` meanwhile) before the container mounts it. Before,
        # a refresh during a start failed it: the container mounted the old tree's volume (removed and made again
        # empty for it) and was checked against the new one's, 'unexpected mount at /opt/tooltree/tree'.
        with self._superseded_lock:
            volume = self.tree_volume
            self._starting.append(volume)
        try:
            connection = self._launch(session_id, volume)
            connection.tree_manifest = self._tree_manifests.get(volume) if volume is not None else None
            return connection
        finally:
            with self._superseded_lock:
                self._starting.remove(volume)

    def _launch(self, session_id: str, volume: str | None) -> DockerConnection:
        name = f"tooltree-{uuid.uuid4().hex[:16]}"
        spec = container_spec(
            self.config, name=name, session_id=session_id, image=self.image, tree_volume=volume, gvisor=self.gvisor
        )
        container_id: str | None = None
        attached: AttachSocket | None = None
        try:
            container_id = self.docker.create_container(spec)
            inspected = self.docker.inspect_container(container_id)
            violations = check_hardening(inspected, self.config, tree_volume=volume, gvisor=self.gvisor)
            if violations:
                raise HardeningError(name, violations)
            attached = self.docker.attach(container_id)
            connection = DockerConnection(
                self.docker, container_id, name, attached, gvisor=self.gvisor, on_removed=self._remove_superseded
            )
            self.docker.watch_death(container_id, connection.on_death)
            self.docker.start(container_id)
            return connection
        except BaseException as e:
            if container_id is None and _refused(e):
                raise  # the engine answered the create with an error: it made nothing
            if container_id is not None:
                self.docker.unwatch(container_id)
            if attached is not None:
                attached.close()
            with contextlib.suppress(EngineError):
                self.docker.remove_container(container_id or name)
            raise

    def _recopy_gone_tree(self) -> None:
        """Copy the tree again when its volume is gone since `prepare` (`tooltree sandbox prune` removes it while no
        container mounts it), or a session found the copy in it unfinished. Before: the engine made an empty volume
        of that name for the next session, which saw no /workspace/servers, and prune never removed that unlabelled
        volume."""
        if self.tree is None or self.tree_volume is None:
            return
        if not self._tree_unfinished and self.docker.volume_exists(self.tree_volume):
            return
        with self._lock:
            before = (self._tree_record, self.tree_volume)
            self.tree_volume = self._ensure_tree_volume(self.tree)
            self._tree_unfinished = False
            self._supersede(before)  # the tree changed since: its unfinished copy is no longer used

    def _forget_unfinished_tree(self) -> None:
        """A session found no whole copy in the tree volume: its record goes, so that no start finds the volume
        through it, and this backend's next start copies the tree into it again (`populate` redoes a copy cut short,
        and waits for one still being made)."""
        with self._lock:
            self._tree_unfinished = True
            record = self._tree_record
        if record is not None:
            with contextlib.suppress(EngineError):
                self.docker.remove_volume(record)

    def verify_ready(self, connection: Connection, status: Mapping[str, Any]) -> None:
        """Refuse a sandbox whose supervisor reports it confined otherwise than required, or its tree unfinished.

        Raises:
            HardeningError: the supervisor reports privileges it must not have, or limits not applied.
            IncompleteTreeError: the tree volume it mounts holds no whole copy of the tree (the next start copies it
                again).
        """
        violations = check_process_status(status, gvisor=self.gvisor)
        violations += check_in_force(status, self.config, gvisor=self.gvisor, tree=self.tree_volume is not None)
        if violations:
            connection.kill()
            raise HardeningError(connection.name, violations)
        if self.tree_volume is not None and (why := tree_incomplete(status)) is not None:
            connection.kill()
            self._forget_unfinished_tree()
            raise IncompleteTreeError(f"sandbox {connection.name} did not start: {why}")


def _refused(error: BaseException) -> bool:
    """Whether ``error`` is the engine's answer to a call (an HTTP error status), not a call cut short."""
    return isinstance(error, EngineError) and error.returncode is not None


def run_with_input(engine: DockerEngine, spec: Mapping[str, Any], data: bytes, *, timeout: float) -> tuple[int, str]:
    """Run a throwaway container with ``data`` on its stdin; its exit status and the end of its output.

    The container is named ``spec["name"]``, or ``tooltree-run-<random>``, so that it is removed
    however this ends, even when interrupted before the create's reply arrived.

    Raises:
        EngineError: the engine failed, or the container did not finish within ``timeout`` seconds.
    """
    name = str(spec.get("name") or f"tooltree-run-{uuid.uuid4().hex[:16]}")
    container_id: str | None = None
    attached: AttachSocket | None = None
    deadline: threading.Timer | None = None
    refused = False  # the engine answered the create with an error: it made nothing
    try:
        try:
            container_id = engine.create_container({**spec, "name": name})
        except EngineError as e:
            refused = _refused(e)
            raise
        attached = engine.attach(container_id)
        deadline = threading.Timer(timeout, attached.abort, args=(f"the container ran longer than {timeout:g} s",))
        deadline.daemon = True
        deadline.start()
        engine.start(container_id)
        # Written from a thread while this one reads, so neither side can block the other.
        feeder = threading.Thread(target=_feed, args=(attached, data), name="docker-stdin", daemon=True)
        feeder.start()
        output = bytearray()
        with contextlib.suppress(OSError, SandboxError):  # a broken stream: the exit status says what happened
            while chunk := attached.stdout.read(1 << 16):
                output = (output + chunk)[-4096:]
        feeder.join()
        status = engine.wait(container_id, timeout)
        text = (bytes(output) + attached.stderr.read()).decode("utf-8", errors="replace")
        return status, text
    finally:
        if deadline is not None:
            deadline.cancel()
        if attached is not None:
            attached.close()
        if not refused:
            with contextlib.suppress(EngineError):
                engine.remove_container(container_id or name)


def _feed(attached: AttachSocket, data: bytes) -> None:
    with contextlib.suppress(OSError, ValueError):
        attached.stdin.write(data)
    attached.stdin.close()
