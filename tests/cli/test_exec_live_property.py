"""What `tooltree exec` prints on a terminal as a script's output comes, and at the end, never loses any of it: for
any output cut into pieces anywhere (within a character, an escape sequence, a CRLF), what the terminal showed as
it came followed by what the end prints ends with the whole output as a result shows it (cleaned). Where pieces
cleaned apart differ from the whole, the end prints the whole again: a line twice, never one lost.

Before this test, a line not yet ended waited for its newline; the pieces were cut only at line ends.
"""

from __future__ import annotations

import io
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.results import clean_text
from tooltree_cli.exec_live import LiveOutput

TOKENS = [
    b"word ", b"\n", b"\r", b"\r\n", b"\t", "été ".encode(), "✓".encode(), "😀".encode(), b"\xc3", b"\xff",
    b"\x1b[31m", b"\x1b[0m", b"\x1b]0;title\x07", b"\x1b", b"\x9b", "\u202e".encode(), b"\x00", b"[... ",
]  # fmt: skip


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@settings(max_examples=400, deadline=None)
@given(
    tokens=st.lists(st.sampled_from(TOKENS), max_size=60),
    cuts=st.lists(st.integers(min_value=0, max_value=1000), max_size=12),
)
def test_what_was_shown_and_what_the_end_prints_hold_the_whole_output(tokens: list[bytes], cuts: list[int]) -> None:
    data = b"".join(tokens)
    at = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    out = _Terminal()
    live = LiveOutput({"stdout": out})
    for start, end in itertools.pairwise(at):
        live.feed("stdout", data[start:end])
    whole = clean_text(data.decode("utf-8", errors="replace"))
    rest = live.rest("stdout", whole or None)
    final = out.getvalue() + (rest or "")
    assert final.rstrip("\n").endswith(whole.rstrip("\n")), (final, whole)
    if final.rstrip("\n") != whole.rstrip("\n"):  # printed again whole: the pieces were cleaned differently
        assert rest == whole
