"""The package's public surface is deliberate and importable."""

from __future__ import annotations

import sandbox


def test_every_exported_name_resolves_and_all_lists_exactly_them() -> None:
    assert sorted(sandbox.__all__) == sandbox.__all__
    assert set(sandbox.__all__) == set(sandbox._EXPORTS)
    for name in sandbox.__all__:
        assert getattr(sandbox, name) is not None


def test_every_exception_derives_from_the_package_base() -> None:
    for name in ("EngineError", "EngineUnavailableError", "HardeningError", "ImageError", "ProtocolError",
                 "SessionError", "WorkspaceError", "ToolCallRefused"):  # fmt: skip
        assert issubclass(getattr(sandbox, name), sandbox.SandboxError)
