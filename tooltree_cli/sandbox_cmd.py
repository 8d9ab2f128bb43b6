"""`tooltree sandbox prune`: remove leftover sandbox containers and volumes by label."""

from __future__ import annotations

import argparse

from tooltree_cli.output import error

EXIT_ENGINE = 4  # as `tooltree exec`: the sandbox (its engine) failed


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("sandbox", help="manage sandbox containers", description="Manage sandbox containers.")
    sub = p.add_subparsers(dest="sandbox_command", required=True, metavar="ACTION")
    prune = sub.add_parser(
        "prune",
        help="remove the tooltree containers no running tooltree process uses (a serve's live sessions stay), "
        "unused tree volumes, and the images with pip packages built on an image its name no longer names",
    )
    prune.add_argument(
        "--owner",
        default="tooltree",
        help="the tooltree.owner label to select: what $TOOLTREE_SANDBOX_OWNER was for the commands that made them "
        "(default: tooltree)",
    )
    prune.add_argument(
        "--all",
        action="store_true",
        help="also remove the containers of tooltree processes still running on this host (their sessions end)",
    )
    prune.set_defaults(handler=run_prune)


def run_prune(args: argparse.Namespace) -> int:
    from sandbox.docker_backend import prune_containers, remove_volumes
    from sandbox.errors import SandboxError
    from sandbox.image import remove_stale_derived_images

    label = f"tooltree.owner={args.owner}"
    try:
        containers, kept = prune_containers(label=label, live_too=args.all)
        volumes = remove_volumes(label=label)
        images = remove_stale_derived_images()  # after the containers, which may have used them
    except SandboxError as e:  # no engine answers, or it refused
        error(str(e))
        return EXIT_ENGINE
    print(f"removed {containers} container(s) and {volumes} volume(s) labelled {label}", end="")
    print(f", and {len(images)} stale image(s) with pip packages: {', '.join(images)}" if images else "")
    if kept:
        print(f"kept the containers of tooltree processes still running here ({', '.join(kept)}); --all removes "
              "them too, ending their sessions")  # fmt: skip
    return 0
