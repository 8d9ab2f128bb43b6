"""`tooltree sandbox prune`: what it removes is listed first (`plan_prune`, which only reads), then removed one by
one (`apply_prune`); ``--dry-run`` stops after the list.

One owner's leftovers (the `OWNER_LABEL` ``tooltree.owner``, what ``$TOOLTREE_SANDBOX_OWNER`` was for the commands
that made them):

- its containers, but those of a tooltree process still running on this host (`HOST_LABEL`) unless ``live_too``,
  and the other running ones unless ``live_too``: without a `HOST_LABEL` (an older release made them: `OLDER_RUNNING`),
  or made by a process that does not run here (`RUNNING_ELSEWHERE`);
- its volumes that no container left would still mount (the engine keeps a volume in use);
- its derived images (``sandbox.pip_packages``) built on an image its parent's name no longer names
  (`sandbox.image.stale_derived_images`), by their names in the derived repository: the engine keeps the last name
  of one a container left runs.

The sandbox images of other sources than these (an older release's, left by each upgrade: ~170 MB each) are listed
as kept (`PrunePlan.other_sources`) and not removed: another install of tooltree sharing the engine may run them.

What a container left uses is looked up among every container of the engine, whoever made it: the list says what
the engine will keep, so a dry run lists exactly what the prune then removes (unless the engine changes between).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from sandbox._docker import ContainerEntry, DockerEngine, ImageEntry, VolumeEntry, default_engine
from sandbox.errors import EngineError, EngineUnavailableError
from sandbox.hardening import HOST_LABEL, OWNER_LABEL

logger = logging.getLogger(__name__)

Kind = Literal["container", "volume", "image"]
OLDER_RUNNING = (
    "running, made by an older tooltree (it says not which process), whose session it may still be: --all removes it"
)
"""Why a running container without `HOST_LABEL` is kept: releases before it labelled none, and one whose tooltree
was killed ends on its own (its stdin closes), so a running one is likely a live session of an older tooltree still
running (before: removed by a prune without --all, ending that session and what its workspace held unsaved)."""
RUNNING_ELSEWHERE = (
    "running, made by tooltree process {maker}, which is not running on this host (a process of another host sharing "
    "the engine, or of another PID namespace), whose session it may still be: --all removes it"
)
"""Why a running container whose `HOST_LABEL` names no process running here is kept: one whose tooltree was killed
ends on its own, as for `OLDER_RUNNING` (before: removed by a prune without --all, ending a live session of a tooltree
on another host sharing the engine, which the prune cannot see, with what its workspace held unsaved)."""
OTHER_SOURCES = "the sandbox image of other tooltree sources"
"""Why an image of `PrunePlan.other_sources` is kept; `OTHER_SOURCES_NOTE` follows their list."""
OTHER_SOURCES_NOTE = (
    "{count} sandbox image(s) of other tooltree sources than these: an older release's (each upgrade leaves one), or "
    "another install's on this engine, which may still run it; not removed: `docker image rm NAME` removes one once "
    "no tooltree runs it"
)


@dataclass(frozen=True)
class Leftover:
    """One thing a prune removes (or keeps): ``str()`` is how the listing names it."""

    kind: Kind
    name: str
    about: str = ""
    """What the engine says of it cheaply: a container's state and age, a volume's age, an image's size and age."""
    ref: str = ""
    """What the engine removes it by, when not its name (a container's id)."""
    why_kept: str = ""
    """For one the engine keeps: why."""

    def __str__(self) -> str:
        return f"{self.kind} {self.name}" + (f" ({self.about})" if self.about else "")


@dataclass
class PrunePlan:
    """What `apply_prune` removes (``containers``, ``volumes``, ``images``, in that order) and what stays."""

    label: str
    containers: list[Leftover] = field(default_factory=list)
    volumes: list[Leftover] = field(default_factory=list)
    images: list[Leftover] = field(default_factory=list)
    in_use: list[Leftover] = field(default_factory=list)
    """The owner's volumes and image names a container left uses (the engine keeps them), and the containers an older
    tooltree runs (`OLDER_RUNNING`)."""
    other_sources: list[Leftover] = field(default_factory=list)
    """The owner's sandbox images of other sources than these (`OTHER_SOURCES`): kept, said with what removes them."""
    live: list[str] = field(default_factory=list)
    """``HOSTNAME:PID`` of each tooltree process running here whose containers stay."""

    @property
    def removals(self) -> list[Leftover]:
        """Everything to remove, in the order it is removed."""
        return [*self.containers, *self.volumes, *self.images]


def plan_prune(docker: DockerEngine | None = None, *, owner: str = "tooltree", live_too: bool = False) -> PrunePlan:
    """What a prune of ``owner``'s leftovers removes; reads only.

    Raises:
        EngineUnavailableError: no engine answers.
        EngineError: the engine failed a listing.
    """
    from sandbox.image import IMAGE_REPOSITORY, image_name, stale_derived_images

    engine = docker or default_engine()
    plan = PrunePlan(label=f"{OWNER_LABEL}={owner}")
    staying: list[ContainerEntry] = []
    live: set[str] = set()
    for container in engine.container_entries():
        maker = container.labels.get(HOST_LABEL, "")
        if container.labels.get(OWNER_LABEL) != owner:
            staying.append(container)
        elif not live_too and _runs_here(maker):
            staying.append(container)
            live.add(maker)
        elif not live_too and container.running:
            staying.append(container)
            why = RUNNING_ELSEWHERE.format(maker=maker) if maker else OLDER_RUNNING
            plan.in_use.append(_kept(_container(container), why))
        else:
            plan.containers.append(_container(container))
    plan.live = sorted(live)
    mounted = {volume for container in staying for volume in container.volumes}
    for volume in sorted(engine.volume_entries(plan.label), key=lambda v: v.name):
        item = _volume(volume)
        if volume.name in mounted:
            plan.in_use.append(_kept(item, "a container that stays mounts it"))
        else:
            plan.volumes.append(item)
    running = {container.image_id for container in staying}
    for image, names in sorted(stale_derived_images(engine, owner), key=lambda found: found[1]):
        for n, item in enumerate(_image(image, names)):
            # A container's image loses any of its names but the last, which the engine keeps (never by force).
            if image.id in running and n == len(names) - 1 and len(names) == len(set(image.names)):
                plan.in_use.append(_kept(item, "a container that stays runs it"))
            else:
                plan.images.append(item)
    current = image_name()
    for image in sorted(engine.images(plan.label), key=lambda found: sorted(found.names)):
        names = sorted(n for n in image.names if n.startswith(f"{IMAGE_REPOSITORY}:") and n != current)
        plan.other_sources += [_kept(item, OTHER_SOURCES) for item in _image(image, names)]
    return plan


def apply_prune(
    plan: PrunePlan, docker: DockerEngine | None = None, *, removed: Callable[[Leftover], object] = lambda item: None
) -> tuple[list[Leftover], list[Leftover]]:
    """Remove what ``plan`` lists, calling ``removed`` with each as soon as it is gone: what was removed, and what
    the engine kept (in use, or gone already; a failure is logged).

    Raises:
        EngineUnavailableError: no engine answers.
    """
    engine = docker or default_engine()
    done: list[Leftover] = []
    kept: list[Leftover] = []
    for item in plan.removals:
        why = _remove(engine, item)
        if why is None:
            done.append(item)
            removed(item)
        else:
            kept.append(_kept(item, why))
    return done, kept


def _remove(engine: DockerEngine, item: Leftover) -> str | None:
    """Remove ``item``: None when removed, else why not."""
    try:
        if item.kind == "container":
            engine.remove_container(item.ref or item.name)
            return None
        gone = engine.remove_volume(item.name) if item.kind == "volume" else engine.remove_image(item.name)
    except EngineUnavailableError:
        raise
    except EngineError as e:
        logger.warning("could not remove %s: %s", item, e)
        return str(e).splitlines()[0][:200] if str(e) else "the engine refused"
    return None if gone else "in use, or gone already"


def _runs_here(maker: str) -> bool:
    """Whether ``maker`` (``HOSTNAME:PID``) is a process running on this host."""
    from sandbox.host_folders import alive
    from sandbox.sweep import _PID_LIMIT

    host, _, pid = maker.rpartition(":")
    if host != socket.gethostname() or not (pid.isascii() and pid.isdigit()) or not 0 < int(pid) < _PID_LIMIT:
        return False  # no process has it (before: `²` or 20 digits, a ValueError or OverflowError traceback)
    return alive(int(pid))


def _kept(item: Leftover, why: str) -> Leftover:
    return Leftover(item.kind, item.name, item.about, item.ref, why)


def _container(entry: ContainerEntry) -> Leftover:
    state = entry.status.lower()
    if entry.created and not (state.endswith(" ago") or state.startswith("up ")):
        # The engine's words give no age of a container never started (``Created``), the leftover of a killed start.
        state = f"created {age(entry.created)}" if state == "created" else f"{state}, made {age(entry.created)}"
    about = ", ".join(part for part in (entry.id[:12], state) if part)
    return Leftover("container", entry.name or entry.id[:12], about, entry.id)


def _volume(entry: VolumeEntry) -> Leftover:
    made = None
    with contextlib.suppress(ValueError):
        made = datetime.fromisoformat(entry.created.replace("Z", "+00:00")).timestamp() if entry.created else None
    return Leftover("volume", entry.name, f"created {age(made)}" if made is not None else "")


def _image(entry: ImageEntry, names: list[str]) -> list[Leftover]:
    parts = [size(entry.size)] if entry.size else []
    if entry.created:
        parts.append(f"built {age(entry.created)}")
    return [Leftover("image", name, ", ".join(parts)) for name in names]


def age(since: float, now: float | None = None) -> str:
    """How long ago ``since`` (Unix time) was, in the largest whole unit: ``3 hours ago``."""
    seconds = max(0, int((time.time() if now is None else now) - since))
    for unit, length in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= length:
            count = seconds // length
            return f"{count} {unit}{'s' if count > 1 else ''} ago"
    return "just now" if seconds < 2 else f"{seconds} seconds ago"


def size(count: int) -> str:
    """A size in bytes as ``docker`` shows one: ``312MB`` (powers of 1000)."""
    value = float(count)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000:
            return f"{value:.3g}{unit}"
        value /= 1000
    return f"{value:.3g}TB"


# Removal by label alone, without a plan: the cleanup of tests and benchmarks, by their owner.


def _remove_each(names: list[str], remove: Callable[[str], object]) -> int:
    """Remove each of ``names``; how many were removed. Before: how many were listed, so `tooltree sandbox prune`
    counted a volume in use, which the engine keeps, and a container it failed to remove as removed."""
    removed = 0
    for name in names:
        try:
            removed += remove(name) is not False  # `DockerEngine.remove_volume`: False when in use or gone
        except EngineUnavailableError:
            raise
        except EngineError as e:
            logger.warning("could not remove %s: %s", name, e)
    return removed


def remove_containers(docker: DockerEngine | None = None, *, label: str = f"{OWNER_LABEL}=tooltree") -> int:
    """Remove every container carrying ``label`` (``key=value``); returns how many were removed.

    Raises:
        EngineUnavailableError: no engine answers.
    """
    engine = docker or default_engine()
    return _remove_each(engine.containers(label), engine.remove_container)


def prune_containers(
    docker: DockerEngine | None = None, *, label: str = f"{OWNER_LABEL}=tooltree", live_too: bool = False
) -> tuple[int, list[str]]:
    """Remove the containers with ``label`` but those of a tooltree process running on this host (`HOST_LABEL`;
    all with ``live_too``): how many were removed, and the ``HOSTNAME:PID`` of each process whose were kept.

    Raises:
        EngineUnavailableError: no engine answers.
    """
    from sandbox.host_folders import alive

    engine = docker or default_engine()
    here = socket.gethostname()
    removed, kept = [], set()
    for container, labels in engine.container_labels(label).items():
        maker = labels.get(HOST_LABEL, "")
        host, _, pid = maker.rpartition(":")
        if not live_too and host == here and pid.isascii() and pid.isdigit() and int(pid) > 0 and alive(int(pid)):
            kept.add(maker)
        else:
            removed.append(container)
    return _remove_each(removed, engine.remove_container), sorted(kept)


def remove_volumes(docker: DockerEngine | None = None, *, label: str = f"{OWNER_LABEL}=tooltree") -> int:
    """Remove every unused volume carrying ``label``; returns how many were removed (one in use stays).

    Raises:
        EngineUnavailableError: no engine answers.
    """
    engine = docker or default_engine()
    return _remove_each(engine.volumes(label), engine.remove_volume)
