"""`SandboxConfig`: every limit checked on its own, and named with file, line and key when it comes from a config; its
owner, `$TOOLTREE_SANDBOX_OWNER` unless given."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sandbox.config import MAX_PIP_PACKAGES, MAX_PIP_SPEC, OWNER_ENV, SandboxConfig, image_problem
from sandbox.errors import SandboxError
from tests.docker_cli import EngineWithCLI
from tool_tree.config import ConfigError, parse_config
from tooltree_cli.common import config_sections


def section_error(body: str) -> str:
    """The error of a config whose ``sandbox:`` section is ``body`` (its first key on line 3)."""
    with pytest.raises(ConfigError) as info:
        parse_config(f"servers: {{}}\nsandbox:\n{body}", source="tooltree.yaml", environ={}, sections=config_sections())
    return str(info.value)


POSITIVE = "expected a positive number"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("  memory: lots\n", "tooltree.yaml:3: sandbox.memory: not a size: 'lots' (use e.g. 512m or 2g)"),
        ("  memory: 0\n", "tooltree.yaml:3: sandbox.memory: expected more than 0, got '0' (0 would mean no limit)"),
        (
            "  timeout: 60\n  tmp_size: 1 gig\n",
            "tooltree.yaml:4: sandbox.tmp_size: not a size: '1 gig' (use e.g. 512m or 2g)",
        ),
        (
            "  workspace_size: 0m\n",
            "tooltree.yaml:3: sandbox.workspace_size: expected more than 0, got '0m' (0 would mean no limit)",
        ),
        ("  output_chars: 10\n", "tooltree.yaml:3: sandbox.output_chars: expected at least 100 characters, got 10"),
        ("  timeout: .nan\n", f"tooltree.yaml:3: sandbox.timeout: {POSITIVE} (seconds one execution may run), got nan"),
        ("  timeout: .inf\n", f"tooltree.yaml:3: sandbox.timeout: {POSITIVE} (seconds one execution may run), got inf"),
        ("  timeout:\n", f"tooltree.yaml:3: sandbox.timeout: {POSITIVE} (seconds one execution may run), got nothing"),
        ("  cpus: .inf\n", f"tooltree.yaml:3: sandbox.cpus: {POSITIVE} (a CPU limit; fractions allowed), got inf"),
        (  # before: accepted here, refused only by `image build` (exit 4, no line)
            "  pip_packages: [pandas, --index-url=http://mirror.example/simple]\n",
            "tooltree.yaml:3: sandbox.pip_packages: not a pip requirement: '--index-url=http://mirror.example/simple'"
            " (a name with optional extras and versions, such as pandas==2.2)",
        ),
        (  # before: accepted (`$` matches before a final newline); the build failed parsing the Dockerfile
            '  pip_packages: ["six\\n"]\n',
            "tooltree.yaml:3: sandbox.pip_packages: not a pip requirement: 'six\\n'"
            " (a name with optional extras and versions, such as pandas==2.2)",
        ),
        (  # before: "expected a list of …, got a list"
            "  pip_packages: [six, null]\n",
            "tooltree.yaml:3: sandbox.pip_packages: expected a list of pip requirements baked into a derived image;"
            " item 1 is null, not a string",
        ),
        (  # before: accepted; the engine refused the Dockerfile ("dockerfile line greater than max allowed size")
            f"  pip_packages: [{', '.join(f'p{i}' for i in range(MAX_PIP_PACKAGES + 1))}]\n",
            "tooltree.yaml:3: sandbox.pip_packages: 201 requirements; at most 200"
            " (they go on one line of a Dockerfile)",
        ),
        (
            f"  pip_packages: [{'p' * (MAX_PIP_SPEC + 1)}]\n",
            "tooltree.yaml:3: sandbox.pip_packages: a requirement of 201 characters; at most 200: 'pppppppppppppppppppp"
            "pppppppppppppppppppp'…",
        ),
        (  # before: accepted, and written into the derived image's `FROM` line
            '  memory: 1g\n  image: "python:3.12\\nRUN id"\n',
            "tooltree.yaml:4: sandbox.image: not a Docker image reference: 'python:3.12\\nRUN id' (such as "
            "python:3.12-slim, registry.example.com:5000/team/sandbox:1, or name@sha256:<digest>; lowercase)",
        ),
        (
            "  image: Python:3.12\n",
            "tooltree.yaml:3: sandbox.image: not a Docker image reference: 'Python:3.12' (such as "
            "python:3.12-slim, registry.example.com:5000/team/sandbox:1, or name@sha256:<digest>; lowercase)",
        ),
    ],
)
def test_each_bad_sandbox_setting_is_named_with_file_line_and_key(body: str, expected: str) -> None:
    assert section_error(body) == expected


def test_a_section_read_after_loading_is_checked_the_same_way() -> None:
    config = parse_config("servers: {}\nsandbox:\n  memory: ${MEM}\n", source="tooltree.yaml", environ={"MEM": "lots"})
    with pytest.raises(ConfigError) as info:
        SandboxConfig.from_config(config)
    assert str(info.value) == "tooltree.yaml:3: sandbox.memory: not a size: 'lots' (use e.g. 512m or 2g)"
    config = parse_config("servers: {}\nsandbox:\n  memory: ${MEM}\n", environ={"MEM": "2g"})
    assert SandboxConfig.from_config(config).memory_bytes == 2 * 1024**3


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("timeout", math.nan, "timeout: expected a positive number, got nan"),
        ("timeout", math.inf, "timeout: expected a positive number, got inf"),
        ("timeout", 0, "timeout: expected a positive number, got 0"),
        ("cpus", -1.0, "cpus: expected a positive number, got -1.0"),
        ("start_timeout", math.nan, "start_timeout: expected a positive number, got nan"),
        ("pids_limit", 0, "pids_limit: expected a positive whole number, got 0"),
        ("nofile", 1.5, "nofile: expected a positive whole number, got 1.5"),
        ("output_chars", 10, "output_chars: expected at least 100 characters, got 10"),
        ("memory", "lots", "memory: not a size: 'lots' (use e.g. 512m or 2g)"),
        ("tmp_size", "0", "tmp_size: expected more than 0, got '0' (0 would mean no limit)"),
        (
            "pip_packages",
            ("requests; os_name=='posix'",),
            "pip_packages: not a pip requirement: \"requests; os_name=='posix'\""
            " (a name with optional extras and versions, such as pandas==2.2)",
        ),
        (  # before: taken, each character a requirement: an image built with the packages p, a, n, d and s
            "pip_packages",
            "pandas",
            "pip_packages: expected a list of pip requirements, got str 'pandas' "
            "(one requirement is a list of one: ['pandas'])",
        ),
        ("pip_packages", {"pandas"}, "pip_packages: expected a list of pip requirements, got set {'pandas'}"),
    ],
)
def test_each_out_of_range_field_is_named_on_its_own(field: str, value: object, expected: str) -> None:
    with pytest.raises(SandboxError) as info:
        SandboxConfig(**{field: value})  # type: ignore[arg-type]
    assert str(info.value) == expected


def test_an_out_of_range_override_names_the_field_not_another() -> None:
    config = parse_config("servers: {}\nsandbox:\n  output_chars: 500\n", environ={})
    with pytest.raises(SandboxError) as info:
        SandboxConfig.from_config(config, timeout=math.nan)
    assert str(info.value) == "timeout: expected a positive number, got nan"
    assert SandboxConfig.from_config(config, timeout=5.0).timeout == 5.0


def test_pip_requirements_with_extras_and_versions_are_accepted() -> None:
    config = parse_config(
        "servers: {}\nsandbox:\n  pip_packages: [pandas==2.2.3, 'httpx[http2]>=0.27,<1', numpy]\n", environ={}
    )
    assert SandboxConfig.from_config(config).pip_packages == ("pandas==2.2.3", "httpx[http2]>=0.27,<1", "numpy")


@pytest.mark.parametrize(
    "image",
    [
        "python:3.12-slim",
        "tooltree-sandbox:0123abcd",
        "registry.example.com:5000/team/sand_box:v1.2-rc",
        "[::1]:5000/sandbox",
        "docker.io/library/debian@sha256:" + "0a" * 32,
        "debian:bookworm@sha256:" + "0a" * 32,
    ],
)
def test_an_image_reference_of_the_engines_grammar_is_accepted(image: str) -> None:
    config = parse_config(f"servers: {{}}\nsandbox:\n  image: '{image}'\n", environ={}, sections=config_sections())
    assert SandboxConfig.from_config(config).image == image


@pytest.mark.parametrize(
    "image", ["a b", "name:", "-name", "a//b", "a___b", "name:" + "t" * 129, "a@sha256:short", "x" * 600]
)
def test_an_image_reference_outside_the_grammar_is_refused_also_when_passed_directly(image: str) -> None:
    assert image_problem(image) is not None
    with pytest.raises(SandboxError) as info:
        SandboxConfig(image=image)
    assert str(info.value).startswith("image: ")


def test_the_owner_is_tooltree_sandbox_owner_when_set_unless_one_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: the CLI read the variable, the Python API did not: its sandboxes were labelled tooltree, so a user who
    # set it found them with no `tooltree sandbox prune --owner` they would think of.
    monkeypatch.setenv(OWNER_ENV, "team-a")
    assert SandboxConfig().owner == "team-a"
    assert SandboxConfig.from_config(parse_config("servers: {}\n", environ={})).owner == "team-a"
    assert SandboxConfig(owner="mine").owner == "mine"
    assert SandboxConfig.from_config(None, owner="mine").owner == "mine"
    monkeypatch.setenv(OWNER_ENV, "")
    assert SandboxConfig().owner == "tooltree"
    monkeypatch.delenv(OWNER_ENV)
    assert SandboxConfig().owner == "tooltree"


@pytest.mark.docker
def test_a_sandbox_made_with_no_config_carries_the_owner_the_variable_names(
    monkeypatch: pytest.MonkeyPatch, docker_engine: EngineWithCLI, owner: str
) -> None:
    from sandbox import DockerBackend, Sandbox

    monkeypatch.setenv(OWNER_ENV, owner)
    with Sandbox(DockerBackend(docker=docker_engine)) as sb:
        assert sb.execute("print(1)").stdout == "1\n"
        assert len(docker_engine.owned(owner)) == 1  # what `tooltree sandbox prune` selects by default


def test_a_setting_is_named_with_the_file_and_line_that_set_it(tmp_path: Path) -> None:
    # `tooltree exec`, `agent` and `image build` name a missing `sandbox.image` so (before: "(sandbox.image)" alone).
    from tool_tree.config import load_config

    path = tmp_path / "tooltree.yaml"
    path.write_text("servers:\n  s: {command: x}\nsandbox:\n  timeout: 9\n  image: team/sandbox:1\n", encoding="utf-8")
    settings = SandboxConfig.from_config(load_config(path))
    assert settings.where("image") == f"{path}:5: sandbox.image"
    assert settings.where("memory") == "sandbox.memory"  # not set there: the key alone
    assert SandboxConfig().where("image") == "sandbox.image"
    assert (
        SandboxConfig.from_config(parse_config("servers: {}\nsandbox: {image: x}\n")).where("image") == "sandbox.image"
    )
