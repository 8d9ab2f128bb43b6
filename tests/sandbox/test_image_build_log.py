"""A failed build's log reaches the user's terminal without the escape sequences its steps printed."""

from __future__ import annotations

import pytest

from sandbox.errors import ImageError
from sandbox.image import _build, _printable, image_name
from tests.docker_cli import EngineWithCLI
from tests.support import TEST_OWNER


def test_escape_sequences_and_control_characters_leave_a_build_log_and_its_lines_stay() -> None:
    log = "a\x1b[91mred\x1b[0m\rhidden\x1b]52;c;ZXZpbA==\x07x\x1b]0;title\x1b\\y\x1bcz\x00\tq\nend"
    assert _printable(log) == "ared\nhiddenxyz    q\nend"


@pytest.mark.docker
def test_a_failed_build_shows_what_its_step_printed_without_its_escape_sequences(docker_engine: EngineWithCLI) -> None:
    # Before: the log's tail went to the terminal as it came: a package's setup script could set the window title,
    # write the clipboard (OSC 52) or hide lines with carriage returns; the engine's own colours showed as well.
    run = r"printf 'one\033]52;c;ZXZpbA==\007two\rthree\n'; echo oops >&2; exit 3"
    files = {"Dockerfile": f"FROM {image_name()}\nRUN {run}\n".encode()}
    with pytest.raises(ImageError) as info:
        _build(docker_engine, files, f"tooltree-escape-probe:{TEST_OWNER}", {}, {}, deadline=300)
    message = str(info.value)
    assert "returned a non-zero code: 3" in message and "onetwo\nthree\n" in message and "oops" in message
    assert all(c.isprintable() or c == "\n" for c in message)
