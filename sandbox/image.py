"""Building the sandbox image.

The image is ``tooltree-sandbox:<tag>``, where the tag hashes the Dockerfile and every file
baked in (the supervisor and the stub runtime), so a build is skipped when nothing changed
and a changed runtime can never run against a stale image.

The base is ``python:3.12-slim``. When it cannot be pulled (no registry, as on CI), the
build bootstraps a Debian base instead: ``mmdebstrap`` from the mirror that the host's own
apt sources name (read at run time) writes a root filesystem tarball, which the Engine API
imports (``POST /images/create?fromSrc=-``, what ``docker import`` does). ``--offline-base``
asks for that directly. Users add pip packages with a derived image (`build_derived_image`),
named by its parent's image ID and the package list (a parent rebuilt under its old name gets a
new one, and the old one is removed); `session_image` names the image a session runs for
``sandbox.image`` and ``sandbox.pip_packages``, and `ensure_image` builds it (or says what to run),
so what is built is what a session looks for. Every engine step goes through the Engine API
(`sandbox._docker`); builds use the engine's classic builder, which needs no ``buildx``, and each
build is stopped at `BUILD_DEADLINE`.

Command line: ``python -m sandbox.image build [--offline-base] [--image IMAGE] [--pip PKG ...]``
and ``python -m sandbox.image name``.

(Over 400 lines: one job, building the images a session runs — the sources' image, the offline
base it may stand on, and the derived image with pip packages — and the command that does it.)
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from sandbox._docker import LOG_TAIL_CHARS, DockerEngine, ImageEntry, default_engine
from sandbox.config import PIP_SPEC
from sandbox.errors import EngineError, ImageError, SandboxError
from tool_tree.text import clean

DEFAULT_BASE = "python:3.12-slim"
IMAGE_REPOSITORY = "tooltree-sandbox"
DERIVED_REPOSITORY = "tooltree-sandbox-custom"
OFFLINE_BASE_REPOSITORY = "tooltree-base"
OWNER_LABEL = "tooltree.owner"
DEFAULT_SUITE = "bookworm"
BUILD_DEADLINE = 1800.0
"""Seconds one image build may take in all before it is stopped. The slow case is a derived image:
pip downloads every wheel once, uncached, and the largest common stack (torch with its CUDA
wheels) is about 3 GB, some 20 minutes at 2.5 MB/s; 30 minutes covers that on a modest link,
while a build hung on a dead mirror still ends. ``--timeout`` changes it."""
MAX_BUILD_DEADLINE = 7 * 86400.0
"""The most ``--timeout`` may give a build (a week): more is beyond what a socket's timeout can hold."""
_ONE_WORD = re.compile(r"[^\s-]\S*")
"""A parent a ``FROM`` line can name alone: one word, not an option (`sandbox.config` checks the grammar)."""

_HERE = Path(__file__).parent
_RUNTIME_DIR = _HERE.parent / "tool_tree" / "runtime"
_TOOL_TREE_INIT = b'"""tooltree: the parts that run inside the sandbox (the stub runtime)."""\n'


def context_files() -> dict[str, bytes]:
    """Every file of the build context, by path relative to the context (sorted)."""
    files: dict[str, bytes] = {"Dockerfile": (_HERE / "Dockerfile").read_bytes()}
    for path in sorted((_HERE / "_supervisor").glob("*.py")):
        files[f"lib/tooltree_supervisor/{path.name}"] = path.read_bytes()
    files["lib/tool_tree/__init__.py"] = _TOOL_TREE_INIT
    for path in sorted(_RUNTIME_DIR.glob("*.py")):
        files[f"lib/tool_tree/runtime/{path.name}"] = path.read_bytes()
    return dict(sorted(files.items()))


def image_tag() -> str:
    """The content hash that names the image built from the current sources."""
    digest = hashlib.sha256()
    for name, data in context_files().items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()[:16]


def image_name() -> str:
    """``tooltree-sandbox:<tag>`` for the current sources."""
    return f"{IMAGE_REPOSITORY}:{image_tag()}"


def context_tar(files: Mapping[str, bytes]) -> bytes:
    """A build context as the Engine API takes it: a tar of ``files`` (deterministic: no times, no owners)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _log(message: str) -> None:
    print(f"tooltree image: {message}", file=sys.stderr, flush=True)


# ---- the offline base --------------------------------------------------------------------


def _deb822_entries(text: str) -> list[tuple[list[str], list[str], list[str]]]:
    entries = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes").lower() != "no":
            entries.append(
                (fields.get("uris", "").split(), fields.get("suites", "").split(), fields.get("types", "").split())
            )
    return entries


def _one_line_entries(text: str) -> list[tuple[list[str], list[str], list[str]]]:
    entries = []
    for raw in text.splitlines():
        line = re.sub(r"\[[^\]]*\]", " ", raw.split("#", 1)[0]).split()
        if len(line) >= 3 and line[0] == "deb":
            entries.append(([line[1]], [line[2]], ["deb"]))
    return entries


def apt_mirror(suite: str = DEFAULT_SUITE, sources_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror URI the host's apt sources use for ``suite``.

    Raises:
        ImageError: no apt source names that suite.
    """
    candidates: list[Path] = []
    if (sources_dir / "sources.list").is_file():
        candidates.append(sources_dir / "sources.list")
    listing = sources_dir / "sources.list.d"
    if listing.is_dir():
        candidates += sorted(p for p in listing.iterdir() if p.suffix in (".list", ".sources"))
    for path in candidates:
        text = path.read_text(encoding="utf-8", errors="replace")
        entries = _deb822_entries(text) if path.suffix == ".sources" else _one_line_entries(text)
        for uris, suites, _ in entries:
            if suite in suites and uris:
                return uris[0]
    raise ImageError(
        f"no apt source for Debian {suite} in {sources_dir}: pass --mirror URL (a Debian mirror) to bootstrap a base"
    )


def offline_base_name(suite: str = DEFAULT_SUITE) -> str:
    """The tag of the bootstrapped base image."""
    return f"{OFFLINE_BASE_REPOSITORY}:{suite}-python3"


def bootstrap_base(docker: DockerEngine, *, suite: str = DEFAULT_SUITE, mirror: str | None = None) -> str:
    """Bootstrap a minimal Debian + python3 base with mmdebstrap and import it; returns its name.

    Reuses the image when it already exists.

    Raises:
        ImageError: mmdebstrap is missing or failed.
        EngineError: the import failed.
    """
    name = offline_base_name(suite)
    if docker.image_exists(name):
        return name
    if shutil.which("mmdebstrap") is None:
        raise ImageError("mmdebstrap is needed to bootstrap a base image offline: apt-get install mmdebstrap")
    mirror = mirror or apt_mirror(suite)
    _log(f"bootstrapping a Debian {suite} base with python3 from {mirror} (about 30 s)")
    with tempfile.TemporaryDirectory(prefix="tooltree-base-") as tmp:
        tarball = Path(tmp) / "base.tar"
        argv = [
            "mmdebstrap", "--variant=minbase", "--include=python3", "--quiet",
            '--aptopt=Acquire::Retries "3"',  # a mirror that drops a connection now and then: tried again
            "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/info/*",
            "--dpkgopt=path-exclude=/usr/share/locale/*", "--dpkgopt=path-exclude=/usr/share/doc/*",
            "--dpkgopt=path-include=/usr/share/doc/*/copyright",
            suite, str(tarball), mirror,
        ]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, check=False)
        if proc.returncode != 0:
            tail = proc.stderr.decode("utf-8", errors="replace").strip()[-2000:]
            raise ImageError(f"mmdebstrap failed (exit {proc.returncode}): {tail}")
        changes = [
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            f"LABEL {OWNER_LABEL}=tooltree",
            'CMD ["python3"]',
        ]
        docker.import_image(tarball, name, changes=changes)
    return name


# ---- building ----------------------------------------------------------------------------


def deadline_problem(seconds: float) -> str | None:
    """Why ``seconds`` cannot be a build's ``--timeout`` (one line), or None."""
    if not 0 < seconds <= MAX_BUILD_DEADLINE:  # NaN too
        limit = f"at most {MAX_BUILD_DEADLINE:.0f} (a week)"
        return f"--timeout must be a positive number of seconds, {limit}, not {seconds:g}"
    return None


def _build(
    docker: DockerEngine,
    files: Mapping[str, bytes],
    tag: str,
    build_args: dict[str, str],
    labels: dict[str, str],
    deadline: float = BUILD_DEADLINE,
) -> None:
    try:
        docker.build_image(context_tar(files), tag, build_args=build_args, labels=labels, deadline=deadline)
    except EngineError as e:
        tail = _printable(e.output[-LOG_TAIL_CHARS:])
        raise ImageError(_printable(str(e)) + (f"\nthe end of its log:\n{tail}" if tail else "")) from None


_TERMINAL_SEQUENCE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[ -/]*[0-~])")
"""An escape sequence a terminal acts on (colours, cursor moves, titles, clipboard writes)."""


def _printable(log: str) -> str:
    """A build's log as it may reach a terminal: what its steps (a package's setup script) print is theirs, so its
    escape sequences and control characters go (a carriage return, which could hide a line, becomes a line end)."""
    return clean(_TERMINAL_SEQUENCE.sub("", log))


def _base_available(docker: DockerEngine, base: str) -> bool:
    if docker.image_exists(base):
        return True
    try:
        docker.pull_image(base)
    except EngineError as e:
        _log(f"cannot pull {base} ({str(e).splitlines()[-1][:200]})")
        return False
    return True


def build_image(
    docker: DockerEngine | None = None,
    *,
    base: str = DEFAULT_BASE,
    offline_base: bool = False,
    mirror: str | None = None,
    suite: str = DEFAULT_SUITE,
    force: bool = False,
    deadline: float = BUILD_DEADLINE,
) -> str:
    """Build the sandbox image unless it exists; returns its name.

    With ``offline_base`` — or automatically when ``base`` cannot be pulled — the base is
    bootstrapped with mmdebstrap (see `bootstrap_base`). The build is stopped after ``deadline`` seconds.

    Raises:
        ImageError: the base cannot be had or the build failed.
        EngineUnavailableError: no engine answers.
    """
    docker = docker or default_engine()
    name = image_name()
    if not force and docker.image_exists(name):
        return name
    if offline_base:
        base = bootstrap_base(docker, suite=suite, mirror=mirror)
    elif not _base_available(docker, base):
        _log("falling back to a base bootstrapped from the Debian mirror (--offline-base)")
        base = bootstrap_base(docker, suite=suite, mirror=mirror)
    _log(f"building {name} from {base}")
    labels = {OWNER_LABEL: "tooltree", "tooltree.base": base}
    _build(docker, context_files(), name, {"BASE": base}, labels, deadline)
    return name


def derived_dockerfile(parent: str, packages: Sequence[str], *, ca_bundle: bool = False) -> str:
    """The Dockerfile of an image that adds pip ``packages`` to ``parent``.

    With ``ca_bundle``, pip trusts the ``ca-bundle.crt`` of the build context (for networks
    whose TLS goes through an inspecting proxy).

    Raises:
        ImageError: ``parent`` is not an image name, or a package spec contains characters a requirement cannot.
    """
    if not _ONE_WORD.fullmatch(parent):
        raise ImageError(f"not an image name: {parent!r}")
    for spec in packages:
        if not PIP_SPEC.match(spec):
            raise ImageError(f"not a pip requirement: {spec!r}")
    quoted = " ".join(shlex.quote(p) for p in packages)
    cert = (
        "COPY ca-bundle.crt /etc/tooltree-build-ca.crt\nENV PIP_CERT=/etc/tooltree-build-ca.crt\n" if ca_bundle else ""
    )
    return (
        f"FROM {parent}\n"
        "USER root\n"
        f"{cert}"
        "RUN set -eu; \\\n"
        "    if ! python3 -m pip --version >/dev/null 2>&1; then \\\n"
        "        apt-get update \\\n"
        "        && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-pip \\\n"
        "        && rm -rf /var/lib/apt/lists/*; \\\n"
        "    fi; \\\n"
        f"    python3 -m pip install --no-cache-dir --disable-pip-version-check --break-system-packages {quoted}; \\\n"
        "    find / -xdev -perm /6000 -type f -exec chmod a-s {} +\n"
        "USER 10001:10001\n"
    )


DERIVED_KEY_LABEL = "tooltree.derived-key"
"""On a derived image: `derived_key` of its parent's name and its packages, shared by every build of them."""
PARENT_ID_LABEL = "tooltree.parent-id"
"""On a derived image: the ID of the parent it was built on."""


def derived_key(parent: str, packages: Sequence[str]) -> str:
    """The hash of a parent's name and a package list, which every derived image built for the two shares."""
    return hashlib.sha256("\n".join([parent, *sorted(packages)]).encode()).hexdigest()[:16]


def derived_image_name(parent_id: str, packages: Sequence[str]) -> str:
    """``tooltree-sandbox-custom:<hash of the parent's image ID and the packages>``.

    The parent's ID, not its name: a parent rebuilt under the same name (``myorg/base:latest``) gives
    another derived image, and the one built on the old parent is never run again.
    """
    return f"{DERIVED_REPOSITORY}:{derived_key(parent_id, packages)}"


def parent_id(docker: DockerEngine, parent: str) -> str:
    """The image ID of ``parent``.

    Raises:
        ImageError: there is no image of that name.
        EngineUnavailableError: no engine answers.
    """
    found = docker.image_id(parent)
    if found is None:
        raise ImageError(f"the image {parent} is not there: pull or build it")
    return found


def build_derived_image(
    docker: DockerEngine | None,
    parent: str,
    packages: Sequence[str],
    *,
    ca_bundle: Path | None = None,
    force: bool = False,
    deadline: float = BUILD_DEADLINE,
    owner: str = "tooltree",
) -> str:
    """Build (once per ID of ``parent``, or again with ``force``) an image with extra pip packages on top of
    ``parent``; its name (`derived_image_name`). ``owner``: its `OWNER_LABEL`, which ``tooltree sandbox prune
    --owner`` selects.

    ``ca_bundle`` (default: the file named by ``PIP_CERT``, if any) is the CA bundle pip trusts
    during the build, which is stopped after ``deadline`` seconds. Images built for an earlier
    ``parent`` of the same name and the same packages are removed, unless a container still uses them.

    Raises:
        ImageError: ``parent`` is missing, a bad package spec, or the build failed.
        EngineUnavailableError: no engine answers.
    """
    docker = docker or default_engine()
    if not packages:
        return parent
    return _build_derived(docker, parent, parent_id(docker, parent), packages, ca_bundle, force, deadline, owner)


def _build_derived(
    docker: DockerEngine,
    parent: str,
    parent_id: str,
    packages: Sequence[str],
    ca_bundle: Path | None,
    force: bool,
    deadline: float,
    owner: str,
) -> str:
    name = derived_image_name(parent_id, packages)
    if not force and docker.image_exists(name):
        return name
    _log(f"building {name}: {parent} ({parent_id[:19]}) + {', '.join(packages)}")
    if ca_bundle is None and os.environ.get("PIP_CERT") and Path(os.environ["PIP_CERT"]).is_file():
        ca_bundle = Path(os.environ["PIP_CERT"])
    # FROM the ID, not the name: what is built is what the name says, even if the parent is re-tagged meanwhile.
    dockerfile = derived_dockerfile(parent_id, packages, ca_bundle=ca_bundle is not None)
    files = {"Dockerfile": dockerfile.encode("utf-8")}
    if ca_bundle is not None:
        files["ca-bundle.crt"] = ca_bundle.read_bytes()
    key = derived_key(parent, packages)
    labels = {OWNER_LABEL: owner, DERIVED_KEY_LABEL: key, PARENT_ID_LABEL: parent_id, "tooltree.parent": parent}
    _build(docker, files, name, {}, labels, deadline)
    _remove_stale_derived(docker, key, keep=name)
    return name


def _remove_stale_derived(docker: DockerEngine, key: str, *, keep: str) -> None:
    """Remove the derived images of an earlier parent of the same name (and packages): their names alone, in
    `DERIVED_REPOSITORY`, never by force; the engine keeps one a container uses. Images built on them inherit
    the label but have other names, which are left alone."""
    stale = {f"{DERIVED_REPOSITORY}:{key}"}  # the name the same parent and packages had before names followed IDs
    for entry in docker.images(f"{DERIVED_KEY_LABEL}={key}"):
        stale.update(n for n in entry.names if n.startswith(f"{DERIVED_REPOSITORY}:"))
    for old in sorted(stale - {keep}):
        if _remove_quietly(docker, old):
            _log(f"removed {old}, built on an earlier image of that name")


def _remove_quietly(docker: DockerEngine, name: str) -> bool:
    try:
        return docker.remove_image(name)
    except EngineError as e:
        _log(f"kept {name}: {str(e).splitlines()[0][:200]}")
        return False


def stale_derived_images(docker: DockerEngine, owner: str = "tooltree") -> list[tuple[ImageEntry, list[str]]]:
    """The derived images of ``owner`` (their `OWNER_LABEL`) no session runs any more: those built on an image that
    is no longer (or no longer there as) the image of its parent's name. Each with its names to remove: those in
    `DERIVED_REPOSITORY` (the user's own names for one are not ours to remove), sorted; reads only.

    Raises:
        EngineUnavailableError: no engine answers.
    """
    current: dict[str, str | None] = {}
    stale = []
    for entry in docker.images(f"{OWNER_LABEL}={owner}"):
        parent, built_on = entry.labels.get("tooltree.parent"), entry.labels.get(PARENT_ID_LABEL)
        if DERIVED_KEY_LABEL not in entry.labels or not parent or not built_on:
            continue
        if parent not in current:
            current[parent] = docker.image_id(parent)
        names = sorted(n for n in entry.names if n.startswith(f"{DERIVED_REPOSITORY}:"))
        if current[parent] != built_on and names:
            stale.append((entry, names))
    return stale


def remove_stale_derived_images(docker: DockerEngine | None = None, owner: str = "tooltree") -> list[str]:
    """Remove the `stale_derived_images` of ``owner`` by their names; the engine keeps one a container uses.
    Returns the names removed.

    Raises:
        EngineUnavailableError: no engine answers.
    """
    docker = docker or default_engine()
    removed: list[str] = []
    for _entry, names in stale_derived_images(docker, owner):
        removed.extend(name for name in names if _remove_quietly(docker, name))
    return removed


def session_image(image: str | None, packages: Sequence[str], parent_id: str | None = None) -> tuple[str, str]:
    """The images a session runs for ``sandbox.image`` and ``sandbox.pip_packages``: ``(parent, name)``.

    The parent is ``image``, or the image of the current sources (`image_name`) when it is None.
    Without ``packages`` the session runs the parent itself; with them, `derived_image_name` of the
    parent's ID, ``parent_id``, which must then be given (`ensure_image` looks it up). Building
    (`ensure_image`) and running (`sandbox.docker_backend`) both ask here.

    Raises:
        ValueError: ``packages`` without ``parent_id``.
    """
    parent = image or image_name()
    if not packages:
        return parent, parent
    if parent_id is None:
        raise ValueError("the derived image is named by its parent's ID: pass parent_id")
    return parent, derived_image_name(parent_id, packages)


def ensure_image(
    docker: DockerEngine | None,
    image: str | None,
    packages: Sequence[str],
    *,
    build: bool,
    force: bool = False,
    deadline: float = BUILD_DEADLINE,
    base: str = DEFAULT_BASE,
    offline_base: bool = False,
    mirror: str | None = None,
    suite: str = DEFAULT_SUITE,
    config: str | None = None,
    owner: str = "tooltree",
    setting: str = "sandbox.image",
) -> str:
    """The image a session runs for ``sandbox.image`` and ``packages`` (see `session_image`), there; its name.
    ``config``: the file that lists them, named in the advice when the image is not built; ``owner``: the
    `OWNER_LABEL` of a derived image built here (``sandbox.owner``, which ``tooltree sandbox prune --owner`` selects);
    ``setting``: ``sandbox.image`` with its file and line (`SandboxConfig.where`), named when that image is missing.

    With ``build``, what is missing is built (all of it with ``force``): the sources' image when
    ``image`` is None (``base`` to ``suite`` as in `build_image`), then the derived image with
    ``packages`` on the parent's current ID. A given ``image`` is never built here: it is the user's,
    to pull or build.

    Raises:
        ImageError: an image is missing and not to be built (the message says what to run), or a build failed.
        EngineUnavailableError: no engine answers.
    """
    docker = docker or default_engine()
    parent = image or image_name()
    if image is None and build:
        build_image(docker, base=base, offline_base=offline_base, mirror=mirror, suite=suite, force=force,
                    deadline=deadline)  # fmt: skip
        if not packages:
            return parent
    elif not packages:  # the fast path: the parent alone, looked up by its name
        if not docker.image_exists(parent):
            raise _missing_parent(image, parent, setting)
        return parent
    found = docker.image_id(parent)
    if found is None:
        raise _missing_parent(image, parent, setting)
    name = session_image(image, packages, found)[1]
    if not force and docker.image_exists(name):
        return name
    if not build:
        given = f"--image {shlex.quote(image)} " if image is not None else ""
        listing = shlex.quote(config or "tooltree.yaml")  # before: always tooltree.yaml, whichever file listed them
        raise ImageError(
            f"the sandbox image with {', '.join(packages)} on {parent} as it is now (image {found[:19]}) is not "
            f"built: run `tooltree image build --config {listing}` (the config that lists them), or python -m "
            f"sandbox.image build {given}--pip " + " ".join(shlex.quote(p) for p in packages)
        )
    return _build_derived(docker, parent, found, packages, None, force, deadline, owner)


def _missing_parent(image: str | None, parent: str, setting: str = "sandbox.image") -> ImageError:
    if image is not None and setting != "sandbox.image":  # before: "(sandbox.image)", not saying which file set it
        return ImageError(f"{setting}: the sandbox image {image} is not there: pull or build it")
    if image is not None:
        return ImageError(f"the sandbox image {image} (sandbox.image) is not there: pull or build it")
    return ImageError(
        f"the sandbox image {parent} is not built: run `tooltree image build` (or python -m sandbox.image build)"
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m sandbox.image``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m sandbox.image", description="Build the tooltree sandbox image.")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build the image (skipped when it is current)")
    build.add_argument("--base", default=DEFAULT_BASE, help=f"base image (default {DEFAULT_BASE})")
    build.add_argument("--offline-base", action="store_true", help="bootstrap a Debian base with mmdebstrap")
    build.add_argument(
        "--mirror", dest="debian_mirror", help="Debian mirror for --offline-base (default: the one apt uses)"
    )
    build.add_argument(
        "--suite", default=DEFAULT_SUITE, help=f"Debian suite for --offline-base (default {DEFAULT_SUITE})"
    )
    build.add_argument("--pip", nargs="*", default=[], metavar="PKG", help="also build a derived image with these")
    build.add_argument(
        "--image", default=None, help="add the --pip packages to this image (sandbox.image), not the sources' image"
    )
    build.add_argument("--force", action="store_true", help="rebuild even if the image exists")
    build.add_argument(
        "--timeout", type=float, default=BUILD_DEADLINE, metavar="SECONDS",
        help=f"stop a build that takes longer (default {BUILD_DEADLINE:.0f})",
    )  # fmt: skip
    sub.add_parser("name", help="print the image name for the current sources")
    args = parser.parse_args(argv)
    if args.command == "build" and (problem := deadline_problem(args.timeout)):
        parser.error(problem)
    if args.command == "name":
        print(image_name())
        return 0
    try:
        name = ensure_image(
            None, args.image, args.pip, build=True, force=args.force, deadline=args.timeout, base=args.base,
            offline_base=args.offline_base, mirror=args.debian_mirror, suite=args.suite,
        )  # fmt: skip
    except SandboxError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
