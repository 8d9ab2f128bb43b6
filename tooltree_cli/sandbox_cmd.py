"""`tooltree sandbox prune`: remove leftover sandbox containers and volumes by label (and stale derived images),
listing each as it goes; ``--dry-run`` lists them and removes nothing."""

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
        "unused tree volumes, and the images with pip packages built on an image its name no longer names, "
        "of one owner; each is listed as it goes",
        description="Remove the tooltree sandbox containers no running tooltree process uses (a serve's live sessions "
        "stay), the tree volumes none of them uses, and the images with pip packages built on an image its name no "
        "longer names, of one owner, listing each as it goes (--dry-run: what it would remove and keep). Exit 0 when "
        "done, 4 when no Docker engine answers or it refuses, 70 for an unexpected error (a bug: run with --debug and "
        "report the traceback).",
    )
    prune.add_argument(
        "--owner",
        help="the tooltree.owner label to select (containers, volumes and images): what $TOOLTREE_SANDBOX_OWNER "
        "was for the commands that made them (default: $TOOLTREE_SANDBOX_OWNER when set, else tooltree)",
    )
    prune.add_argument(
        "--all",
        action="store_true",
        help="also remove the containers still running: those of tooltree processes running on this host, of an "
        "older release, or of a tooltree on another host sharing the engine (their sessions end)",
    )
    prune.add_argument(
        "--dry-run",
        action="store_true",
        help="list what would be removed (with sizes and ages) and what the engine would keep; remove nothing",
    )
    prune.set_defaults(handler=run_prune)


def run_prune(args: argparse.Namespace) -> int:
    from sandbox.config import default_owner
    from sandbox.errors import SandboxError
    from sandbox.prune import OTHER_SOURCES_NOTE, Leftover, apply_prune, plan_prune

    def said(item: Leftover) -> None:
        print(f"removed {item}", flush=True)

    try:
        # As the commands that made them chose it (before: tooltree, whatever the variable said, so the leftovers of
        # a user who set it were never listed without --owner).
        owner = args.owner or default_owner()
        plan = plan_prune(owner=owner, live_too=args.all)
        if args.dry_run:
            removed, kept = plan.removals, plan.in_use
        else:
            removed, refused = apply_prune(plan, removed=said)  # containers first, which may use the rest
            kept = [*plan.in_use, *refused]
    except SandboxError as e:  # no engine answers, or it refused
        error(str(e))
        return EXIT_ENGINE
    would = "would " if args.dry_run else ""
    if args.dry_run:
        for item in removed:
            print(f"would remove {item}")
    counts = {kind: sum(item.kind == kind for item in removed) for kind in ("container", "volume", "image")}
    images = [item.name for item in removed if item.kind == "image"]
    print(f"{would}{'remove' if would else 'removed'} {counts['container']} container(s) and {counts['volume']} "
          f"volume(s) labelled {plan.label}", end="")  # fmt: skip
    print(f", and {len(images)} stale image(s) with pip packages: {', '.join(images)}" if images else "", end="")
    print(" (dry run: nothing was removed)" if args.dry_run else "")
    for item in [*kept, *plan.other_sources]:
        print(f"{would}{'keep' if would else 'kept'} {item}: {item.why_kept}")
    if plan.live:
        print(f"{would}{'keep' if would else 'kept'} the containers of tooltree processes still running here "
              f"({', '.join(plan.live)}); --all removes them too, ending their sessions")  # fmt: skip
    if plan.other_sources:
        print(OTHER_SOURCES_NOTE.format(count=len(plan.other_sources)))
    return 0
