"""A script's globals are the module ``__main__``, so what it defines can be found by name there; its ``sys.argv`` is
its name alone, as ``python`` gives a script run with no arguments; a leading byte order mark is skipped, as
``python`` skips a file's.

Before, ``sys.modules["__main__"]`` was the worker's own module: ``pickle.dumps`` of an instance of a class the script
defined, and ``multiprocessing.Pool().map`` of a function it defined, failed with "attribute lookup ... on __main__
failed", under runc and gVisor alike.
"""

from __future__ import annotations

import pytest

from sandbox import DockerBackend, Sandbox

pytestmark = pytest.mark.docker

DEFINES = """
import dataclasses, multiprocessing, pickle

@dataclasses.dataclass
class Point:
    x: int
    y: int

def square(n):
    return n * n
"""

USES = """
import sys
print(pickle.loads(pickle.dumps(Point(1, 2))))
with multiprocessing.Pool(2) as pool:
    print(pool.map(square, [1, 2, 3]))
print(sys.modules["__main__"].square is square, __name__)
"""


def test_what_a_script_defines_can_be_pickled_and_given_to_a_process_pool(backend: DockerBackend) -> None:
    with Sandbox(backend) as sb:
        defined = sb.execute(DEFINES)
        assert defined.error is None, defined.traceback
        result = sb.execute(USES, timeout=60)
        assert result.error is None, result.traceback
        assert result.stdout == "Point(x=1, y=2)\n[1, 4, 9]\nTrue __main__\n"


ARGPARSE = """
import argparse, sys
parser = argparse.ArgumentParser(description="top leads")
parser.add_argument("--limit", type=int, default=5)
print(parser.parse_args().limit, sys.argv)
sys.argv.append("--limit=9")
"""


def test_a_script_sees_its_name_alone_in_sys_argv_so_its_argparse_takes_the_defaults(backend: DockerBackend) -> None:
    # Before: sys.argv was the worker's own command line; `parse_args()` exited 2 ("worker.py: error: unrecognized
    # arguments: --workspace /workspace --user-root …"), so a script written for `python top.py` failed in exec.
    with Sandbox(backend) as sb:
        named = sb.execute(ARGPARSE, filename="top.py")
        assert (named.error, named.stdout) == (None, "5 ['top.py']\n"), named.stderr
        # Each script starts with its own: not what the one before it left.
        given = [sb.execute(ARGPARSE, filename=name).stdout for name in ("<string>", "<stdin>")]
        assert given == ["5 ['-c']\n", "5 ['-']\n"]
        unnamed = sb.execute("import sys; print(sys.argv)")
        assert unnamed.stdout == "['']\n"  # as the interactive interpreter's


def test_a_script_that_begins_with_a_byte_order_mark_runs_as_python_runs_such_a_file(backend: DockerBackend) -> None:
    # Before: a script pasted from a file saved with a BOM failed "invalid non-printable character U+FEFF" (1, 1).
    with Sandbox(backend) as sb:
        result = sb.execute("\ufeffprint('ran')\nraise ValueError('line 2')\n", filename="bom.py")
        assert result.stdout == "ran\n", result.traceback
        assert result.traceback is not None and 'File "bom.py", line 2' in result.traceback
        assert "raise ValueError('line 2')" in result.traceback  # the line shown is the script's own
