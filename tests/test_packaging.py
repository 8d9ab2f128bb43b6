"""The package as a user installs it: the build backend pyproject.toml asks for, and the wheel it builds."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]

LICENSE_EXPRESSION = Version("77")
"""The first setuptools that reads ``project.license`` as an SPDX expression (PEP 639); older ones refuse the
string ('`project.license` must be valid exactly by one definition') and build nothing."""


def _floor(requirement: Requirement) -> Version | None:
    floors = [Version(spec.version) for spec in requirement.specifier if spec.operator in (">=", "==", "~=")]
    return max(floors, default=None)


def test_the_lowest_setuptools_the_build_admits_reads_the_projects_license() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert isinstance(pyproject["project"]["license"], str)  # an SPDX expression, as PEP 639 writes it
    (setuptools,) = [Requirement(r) for r in pyproject["build-system"]["requires"] if r.startswith("setuptools")]
    floor = _floor(setuptools)
    assert floor is not None and floor >= LICENSE_EXPRESSION, setuptools
