"""The supervisor's and worker's command lines are parsed strictly, without argparse."""

from __future__ import annotations

import pytest

from sandbox._supervisor.options import OptionError, parse_options


def test_values_flags_and_repeated_options_are_read() -> None:
    values, flags, repeated = parse_options(
        ["--tree", "/t", "--kill", "--root", "/a", "--root", "/b"],
        values={"--tree": None, "--workspace": "/workspace"},
        flags=("--kill",),
        repeated=("--root",),
    )
    assert values == {"--tree": "/t", "--workspace": "/workspace"}
    assert flags == {"--kill"} and repeated == {"--root": ["/a", "/b"]}


@pytest.mark.parametrize(("argv", "reason"), [(["--nope"], "unknown option"), (["--tree"], "needs a value")])
def test_an_unknown_option_or_a_missing_value_is_refused(argv: list[str], reason: str) -> None:
    with pytest.raises(OptionError, match=reason):
        parse_options(argv, values={"--tree": None})
