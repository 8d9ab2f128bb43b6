"""`tooltree sandbox prune`: remove leftover sandbox containers and volumes by label."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("sandbox", help="manage sandbox containers", description="Manage sandbox containers.")
    sub = p.add_subparsers(dest="sandbox_command", required=True, metavar="ACTION")
    prune = sub.add_parser("prune", help="remove every tooltree container and unused tree volume")
    prune.add_argument("--owner", default="tooltree", help="the tooltree.owner label to select (default: tooltree)")
    prune.set_defaults(handler=run_prune)


def run_prune(args: argparse.Namespace) -> int:
    from sandbox.docker_backend import remove_containers, remove_volumes

    label = f"tooltree.owner={args.owner}"
    containers = remove_containers(label=label)
    volumes = remove_volumes(label=label)
    print(f"removed {containers} container(s) and {volumes} volume(s) labelled {label}")
    return 0
