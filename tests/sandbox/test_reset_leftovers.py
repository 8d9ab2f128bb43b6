"""A reset, or a timeout's restart, answers once the processes it killed are gone.

In a container the supervisor kills every process of the sandbox user (kill(-1)). An orphan it killed is the
supervisor's zombie (it is pid 1) until collected, and holds its place under the process limit until then. Before,
only the reaper's next round (every second) collected them, so the next script found them there and had that many
fewer processes (under gVisor, 81 of 128 places right after a reset: its fork bomb stopped at 31 processes, not 121).
"""

from __future__ import annotations

import ast

import pytest

from sandbox import DockerBackend, Sandbox

pytestmark = pytest.mark.docker

ORPHANS = """
import os, time
for _ in range(5):  # each sleeper is pid 1's child once its parent has exited
    if os.fork() == 0:
        if os.fork() == 0:
            time.sleep(600)
        os._exit(0)
    os.wait()
"""

LEFT = """
import os
left = []
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) not in (1, os.getpid()):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        left.append(stat[stat.rfind(")") + 2])
print(sorted(left))
"""
"""The state (``S``, ``Z``…) of every process but the supervisor and this script."""


def assert_a_reset_leaves_nothing_behind(sb: Sandbox) -> None:
    for _ in range(3):
        assert sb.execute(ORPHANS).error is None
        sleepers = ast.literal_eval(sb.execute(LEFT).stdout)
        assert len(sleepers) == 5 and "Z" not in sleepers  # (one may not be asleep yet: R)
        sb.reset()
        assert sb.execute(LEFT).stdout == "[]\n"


def test_a_reset_answers_once_the_processes_it_killed_are_gone(backend: DockerBackend) -> None:
    with Sandbox(backend) as sb:
        assert_a_reset_leaves_nothing_behind(sb)


def test_a_timeout_answers_once_the_processes_it_killed_are_gone(backend: DockerBackend) -> None:
    with Sandbox(backend) as sb:
        for _ in range(3):
            result = sb.execute(ORPHANS + "time.sleep(600)\n", timeout=1)
            assert result.timed_out and result.state_reset
            assert sb.execute(LEFT).stdout == "[]\n"
