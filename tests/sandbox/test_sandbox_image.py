"""The sandbox image: content-addressed name, offline base from the host's apt mirror, no setuid."""

from __future__ import annotations

import io
import tarfile
import time
import uuid
from pathlib import Path

import pytest
import urllib3.exceptions

from sandbox import DockerBackend, SandboxConfig
from sandbox._docker import LOG_TAIL_CHARS, LogTail, translated
from sandbox.errors import EngineError, ImageError
from sandbox.image import (
    _build,
    apt_mirror,
    context_files,
    context_tar,
    derived_dockerfile,
    derived_image_name,
    ensure_image,
    image_name,
    image_tag,
    session_image,
)
from tests.docker_cli import EngineWithCLI
from tests.support import TEST_OWNER


def test_the_context_bakes_in_the_supervisor_and_the_runtime() -> None:
    files = context_files()
    assert "Dockerfile" in files
    assert "lib/tooltree_supervisor/supervisor.py" in files and "lib/tooltree_supervisor/worker.py" in files
    assert "lib/tool_tree/runtime/_call.py" in files and "lib/tool_tree/__init__.py" in files
    assert "lib/tool_tree/runtime/_sendable.py" in files  # the rule the supervisor shares with the host's check
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
            context_tar(files), f"tooltree-failing-probe:{TEST_OWNER}", build_args={}, labels={}, deadline=300
        )
    assert "returned a non-zero code: 3" in str(info.value) and "about to fail" in info.value.output


def test_a_session_runs_the_derived_image_of_the_configured_image() -> None:
    # Before: `tooltree image build --config` put the packages on the sources' image whatever sandbox.image said,
    # while a session looked for them on sandbox.image. Both now ask `session_image`.
    pid = "sha256:" + "1" * 64
    assert session_image("rt/sandbox:1", ["six"], pid) == ("rt/sandbox:1", derived_image_name(pid, ["six"]))
    assert session_image(None, ["six"], pid) == (image_name(), derived_image_name(pid, ["six"]))
    assert session_image("rt/sandbox:1", []) == ("rt/sandbox:1", "rt/sandbox:1")
    with pytest.raises(ValueError, match="parent_id"):
        session_image("rt/sandbox:1", ["six"])
    config = SandboxConfig(image="rt/sandbox:1", pip_packages=("six",))
    assert DockerBackend(config).image == "rt/sandbox:1"  # until `prepare` asks the engine for the parent's ID


@pytest.mark.parametrize("parent", ["x\nRUN id", "img:1 AS evil", "", "-x"])
def test_a_derived_image_refuses_a_parent_that_is_not_an_image_name(parent: str) -> None:
    with pytest.raises(ImageError, match="not an image name"):
        derived_dockerfile(parent, ["six"])


@pytest.mark.docker
def test_a_missing_derived_image_names_the_command_that_builds_it_on_the_configured_image(
    docker_engine: EngineWithCLI,
) -> None:
    packages = [f"tooltree-never-built-{TEST_OWNER}"]
    with pytest.raises(ImageError) as info:
        ensure_image(docker_engine, image_name(), packages, build=False)
    assert f"python -m sandbox.image build --image {image_name()} --pip {packages[0]}" in str(info.value)
    assert "tooltree image build --config" in str(info.value)


@pytest.mark.docker
def test_exec_names_the_config_that_lists_packages_not_yet_built(
    docker_engine: EngineWithCLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "run `tooltree image build --config tooltree.yaml`" whatever file listed them.
    from tests.support import sample_project
    from tooltree_cli.main import main

    monkeypatch.setenv("TOOLTREE_SANDBOX_OWNER", TEST_OWNER)
    plain, tree = sample_project(tmp_path, "media", pip_packages=f"[tooltree-never-built-{TEST_OWNER}]")
    config = plain.rename(tmp_path / "with packages.yaml")
    assert main(["exec", "-c", "print(1)", "--config", str(config), "--tree", str(tree)]) == 4
    assert f"run `tooltree image build --config '{config}'` (the config that lists them)" in capsys.readouterr().err


@pytest.mark.docker
def test_a_given_image_that_is_missing_is_never_built_over(docker_engine: EngineWithCLI) -> None:
    with pytest.raises(ImageError, match=r"sandbox\.image\) is not there: pull or build it"):
        ensure_image(docker_engine, f"tooltree-test-missing:{TEST_OWNER}", ["six"], build=True)


def test_the_log_tail_keeps_the_last_characters_and_no_more() -> None:
    tail = LogTail(100)
    pieces = [f"line {i}\n" for i in range(10_000)] + ["x" * 250, "end\n"]
    for piece in pieces:
        tail.append(piece)
        assert sum(len(p) for p in tail._parts) < 2 * 100
    assert tail.text() == "".join(pieces)[-100:]


def test_a_read_timeout_of_a_stream_is_the_engines_clear_error() -> None:
    # Before: urllib3's ReadTimeoutError, raised while a build's stream is read, went through as itself.
    with pytest.raises(EngineError, match=r"image build t: the Docker engine at .* did not answer in time"):  # noqa: SIM117
        with translated("image build t"):
            raise urllib3.exceptions.ReadTimeoutError(None, "/build", "Read timed out.")  # type: ignore[arg-type]


@pytest.mark.docker
def test_a_build_keeps_only_the_end_of_its_log(docker_engine: EngineWithCLI) -> None:
    # Before: the whole log was kept (a 600 MB log took 1.18 GB of the host's memory); now its last 3,000 characters.
    run = "seq 1 2000000; echo the last line"  # 15 MB of log
    files = {"Dockerfile": f"FROM {image_name()}\nRUN {run} # {uuid.uuid4().hex}\n".encode()}
    tag = f"tooltree-log-probe:{TEST_OWNER}"
    try:
        log = docker_engine.build_image(context_tar(files), tag, build_args={}, labels={}, deadline=300)
    finally:
        docker_engine.run(["rmi", "--force", tag], check=False)
    assert len(log) <= LOG_TAIL_CHARS and "\n1999999\n2000000\nthe last line\n" in log


def _build_containers(docker: EngineWithCLI, marker: str) -> list[str]:
    lines = docker.text(["ps", "--all", "--no-trunc", "--format", "{{.ID}} {{.Command}}"]).splitlines()
    return [line for line in lines if marker in line]


@pytest.mark.docker
@pytest.mark.parametrize(
    "run", ["echo before the silence; sleep 120", "for i in $(seq 1200); do echo before the silence; sleep 0.1; done"]
)
def test_a_build_past_its_deadline_is_stopped_with_the_end_of_its_log(docker_engine: EngineWithCLI, run: str) -> None:
    # Before: the limit was a per-read socket timeout: a chatty build ran on past it, a silent one raised urllib3's
    # ReadTimeoutError with no log, and the engine went on building either way.
    marker = uuid.uuid4().hex
    files = {"Dockerfile": f"FROM {image_name()}\nRUN {run} # {marker}\n".encode()}
    tag = f"tooltree-deadline-probe:{TEST_OWNER}"
    with pytest.raises(ImageError) as info:
        _build(docker_engine, files, tag, {}, {}, deadline=3)
    message = str(info.value)
    assert message.startswith(f"image build {tag} did not finish within 3 s and was stopped\nthe end of its log:\n")
    assert "before the silence" in message
    gone_by = time.monotonic() + 30
    while _build_containers(docker_engine, marker) and time.monotonic() < gone_by:  # the engine kills the step
        time.sleep(0.1)
    assert _build_containers(docker_engine, marker) == []
    assert not docker_engine.image_exists(tag)
