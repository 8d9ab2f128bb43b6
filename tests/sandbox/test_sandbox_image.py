"""The sandbox image: content-addressed name, offline base from the host's apt mirror, no setuid."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from sandbox.errors import EngineError, ImageError
from sandbox.image import (
    apt_mirror,
    context_files,
    context_tar,
    derived_dockerfile,
    derived_image_name,
    image_name,
    image_tag,
)
from tests.docker_cli import EngineWithCLI
from tests.support import TEST_OWNER


def test_the_context_bakes_in_the_supervisor_and_the_runtime() -> None:
    files = context_files()
    assert "Dockerfile" in files
    assert "lib/tooltree_supervisor/supervisor.py" in files and "lib/tooltree_supervisor/worker.py" in files
    assert "lib/tool_tree/runtime/_call.py" in files and "lib/tool_tree/__init__.py" in files
    assert not any(name.startswith("lib/tool_tree/") and "tree.py" in name for name in files)


def test_the_image_name_is_a_stable_content_hash() -> None:
    assert image_tag() == image_tag() and len(image_tag()) == 16
    assert image_name() == f"tooltree-sandbox:{image_tag()}"


def test_the_mirror_is_read_from_deb822_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n# a comment\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n\nTypes: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n",
        encoding="utf-8",
    )
    assert apt_mirror("bookworm", tmp_path) == "http://mirror.example/debian"


def test_the_mirror_is_read_from_one_line_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list").write_text(
        "# deb http://old.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://m.example/debian bookworm main\n",
        encoding="utf-8",
    )
    assert apt_mirror("bookworm", tmp_path) == "http://m.example/debian"


def test_no_mirror_for_the_suite_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "sources.list").write_text("deb http://m.example/ubuntu jammy main\n", encoding="utf-8")
    with pytest.raises(ImageError, match="--mirror"):
        apt_mirror("bookworm", tmp_path)


def test_a_derived_image_adds_pip_packages_and_drops_back_to_the_sandbox_user() -> None:
    text = derived_dockerfile("tooltree-sandbox:abc", ["pandas==2.2.2", "requests[socks]"])
    assert text.startswith("FROM tooltree-sandbox:abc\nUSER root\n")
    assert (
        "pip install --no-cache-dir --disable-pip-version-check --break-system-packages pandas==2.2.2 'requests[socks]'"
        in text
    )
    assert "chmod a-s" in text and text.endswith("USER 10001:10001\n")
    assert derived_image_name("p", ["b", "a"]) == derived_image_name("p", ["a", "b"])


def test_a_derived_image_can_trust_a_given_ca_bundle_for_pip() -> None:
    text = derived_dockerfile("p", ["six"], ca_bundle=True)
    assert "COPY ca-bundle.crt /etc/tooltree-build-ca.crt\nENV PIP_CERT=/etc/tooltree-build-ca.crt\nRUN" in text
    assert "ca-bundle" not in derived_dockerfile("p", ["six"])


@pytest.mark.parametrize("spec", ["x; rm -rf /", "$(id)", "-e git+https://x", "a\nb", "`id`"])
def test_a_derived_image_refuses_what_is_not_a_requirement(spec: str) -> None:
    with pytest.raises(ImageError, match="not a pip requirement"):
        derived_dockerfile("p", [spec])


@pytest.mark.docker
def test_the_image_runs_as_the_sandbox_user_without_setuid_files(docker_engine: EngineWithCLI) -> None:
    out = docker_engine.text(
        [
            "run", "--rm", "--network", "none", "--label", f"tooltree.owner={TEST_OWNER}", image_name(),
            "sh", "-c", "id -u; find / -xdev -perm /6000 -type f | wc -l",
        ]
    )  # fmt: skip
    assert out.split() == ["10001", "0"]


def test_the_build_context_is_a_deterministic_tar_of_the_files() -> None:
    files = {"b.txt": b"b", "Dockerfile": b"FROM x\n", "lib/a.py": b"a"}
    first = context_tar(files)
    assert first == context_tar(dict(reversed(list(files.items()))))
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        assert tar.getnames() == ["Dockerfile", "b.txt", "lib/a.py"]
        assert all(m.mtime == 0 and m.uid == 0 for m in tar.getmembers())


@pytest.mark.docker
def test_a_root_filesystem_tarball_is_imported_with_its_changes(docker_engine: EngineWithCLI, tmp_path: Path) -> None:
    tarball = tmp_path / "rootfs.tar"
    with tarfile.open(tarball, "w") as tar:
        info = tarfile.TarInfo("etc/marker")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"ok"))
    name = f"tooltree-import-probe:{TEST_OWNER}"
    docker_engine.import_image(tarball, name, changes=['CMD ["python3"]', f"LABEL tooltree.owner={TEST_OWNER}"])
    try:
        config = docker_engine.json(["image", "inspect", name])[0]["Config"]
        assert config["Cmd"] == ["python3"] and config["Labels"] == {"tooltree.owner": TEST_OWNER}
    finally:
        docker_engine.run(["rmi", name])


@pytest.mark.docker
def test_a_failing_build_says_why_with_the_end_of_its_log(docker_engine: EngineWithCLI) -> None:
    files = {"Dockerfile": f"FROM {image_name()}\nRUN echo about to fail && exit 3\n".encode()}
    with pytest.raises(EngineError) as info:
        docker_engine.build_image(
            context_tar(files), f"tooltree-failing-probe:{TEST_OWNER}", build_args={}, labels={}, timeout=300
        )
    assert "returned a non-zero code: 3" in str(info.value) and "about to fail" in info.value.output
