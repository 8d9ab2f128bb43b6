"""`tooltree image build|name`: the sandbox image."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tooltree_cli.common import config_path, load_optional_config
from tooltree_cli.output import error

EXIT_OK, EXIT_CONFIG, EXIT_ENGINE = 0, 2, 4  # as `tooltree exec`: 2 a usage or config error, 4 the sandbox failed


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("image", help="build the sandbox image", description="Build the sandbox image.")
    sub = p.add_subparsers(dest="image_command", required=True, metavar="ACTION")
    build = sub.add_parser(
        "build",
        help="build the image (skipped when it is current)",
        description="Build the sandbox image: from python:3.12-slim when a registry answers, else from a Debian base "
        "bootstrapped with mmdebstrap; skipped when the image the sources make exists (--force rebuilds it).",
    )
    build.add_argument(
        "--offline-base",
        action="store_true",
        help="bootstrap the Debian base with mmdebstrap instead of pulling python:3.12-slim "
        "(automatic when the base cannot be pulled)",
    )
    build.add_argument(
        "--mirror", dest="debian_mirror", help="Debian mirror for --offline-base (default: the one apt uses)"
    )
    build.add_argument("--force", action="store_true", help="rebuild even if the image exists")
    build.add_argument(
        "--config",
        "-c",
        type=config_path,
        default=None,
        help="build the image the config's sandbox runs: its sandbox.pip_packages on top of its sandbox.image "
        "(when set, that image must be there) or of the sources' image",
    )
    build.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop a build that takes longer (default 1800: a large pip install on a modest link)",
    )
    build.set_defaults(handler=run_build)
    name = sub.add_parser(
        "name",
        help="print the image name for the current sources",
        description="Print the name of the sandbox image the current sources make: the image `tooltree image build` "
        "builds and `tooltree exec` runs when the config names no other (sandbox.image, sandbox.pip_packages).",
    )
    name.set_defaults(handler=run_name)


def run_build(args: argparse.Namespace) -> int:
    from sandbox.config import SandboxConfig
    from sandbox.errors import SandboxError
    from sandbox.image import BUILD_DEADLINE, deadline_problem, ensure_image
    from tool_tree.config import ConfigError

    if args.timeout is not None and (problem := deadline_problem(args.timeout)):
        error(problem)
        return EXIT_CONFIG
    try:
        # its sandbox section alone: a server's unset token is no error here (before: it refused the build)
        config = load_optional_config(args.config, using=())
        sandbox = SandboxConfig.from_config(config)
    except ConfigError as e:  # before a build of minutes, not after it
        error(str(e))
        return EXIT_CONFIG
    try:
        # Before: a build with nothing to do printed the name alone, as a build does: nothing said it was skipped.
        current = None if args.force else _current(sandbox.image, sandbox.pip_packages)
        if current is not None:
            print(f"tooltree image: {current} is current: nothing to build (--force rebuilds it)", file=sys.stderr)
            print(current)
            return EXIT_OK
        name = ensure_image(
            None, sandbox.image, sandbox.pip_packages, build=True, force=args.force,
            deadline=args.timeout or BUILD_DEADLINE, offline_base=args.offline_base, mirror=args.debian_mirror,
            setting=sandbox.where("image"),
        )  # fmt: skip
    except SandboxError as e:
        error(str(e))
        return EXIT_ENGINE
    print(name)
    return EXIT_OK


def _current(image: str | None, packages: Sequence[str]) -> str | None:
    """The image sessions would run (`ensure_image`), when it is built already; else None.

    Raises:
        EngineUnavailableError: no engine answers.
    """
    from sandbox.errors import ImageError
    from sandbox.image import ensure_image

    try:
        return ensure_image(None, image, packages, build=False)
    except ImageError:  # missing: the build says what it builds, or why it cannot
        return None


def run_name(args: argparse.Namespace) -> int:
    from sandbox.image import image_name

    print(image_name())
    return 0
