"""`SandboxPool` given the wrong arguments, as the Python API allows: a clear `TypeError` when it is made.

Before, a `SandboxConfig` passed first (where the backend goes) was taken as the backend and ``start`` failed with
``AttributeError: 'SandboxConfig' object has no attribute 'prepare'``; a size given as a string failed with
``TypeError: '<' not supported between instances of 'str' and 'int'``.
"""

from __future__ import annotations

import pytest

from sandbox import SandboxConfig, SandboxPool
from sandbox.errors import SandboxError


def test_a_sandbox_config_given_as_the_backend_is_a_type_error_saying_to_pass_it_as_config() -> None:
    with pytest.raises(TypeError, match=r"not a SandboxConfig: pass it as config=…"):
        SandboxPool(SandboxConfig(owner="test"))  # type: ignore[arg-type]


@pytest.mark.parametrize("size", ["2", 2.0, True, None])
def test_a_size_that_is_not_a_whole_number_is_a_type_error_naming_size(size: object) -> None:
    said = rf"size: expected a whole number of sandboxes \(an int\), got {type(size).__name__} "
    with pytest.raises(TypeError, match=said):
        SandboxPool(size=size)  # type: ignore[arg-type]


def test_a_size_below_one_is_still_refused_as_before() -> None:
    with pytest.raises(SandboxError, match="a pool needs a size of at least 1"):
        SandboxPool(size=0)


def test_a_sandbox_given_its_config_where_the_backend_goes_says_to_pass_it_by_keyword() -> None:
    from sandbox import Sandbox

    with pytest.raises(TypeError, match=r"Sandbox's first argument is the backend, not a SandboxConfig"):
        Sandbox(SandboxConfig(owner="test"))  # type: ignore[arg-type]
