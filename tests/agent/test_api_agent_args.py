"""`Agent` and `Agent.run` given what a developer gets wrong: refused by name before a server starts or a request
is sent (a wrong task used to reach the API, a wrong ``on_event`` to fail at the first reply, its tokens spent)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from agent import Agent
from agent.testing import FakeMessagesAPI, reply
from tests.agent.conftest import Project


def test_a_task_that_is_not_a_non_empty_string_is_refused_before_anything_starts(project: Project) -> None:
    # Before: run(None), run(5) and run("") each started the servers and sent the task to the API (None as the
    # text of the user's turn); a history that was a string was an AttributeError.
    before = set(threading.enumerate())
    with FakeMessagesAPI([reply("Done.")]) as api:
        agent = Agent(project.config, tree=project.tree, mode="direct", client=api.client())
        wrong: list[tuple[type[Exception], str, Any]] = [
            (TypeError, r"^task: expected the task as a string, got NoneType None$", lambda: agent.run(None)),
            (TypeError, r"^task: expected the task as a string, got int 5$", lambda: agent.run(5)),
            (ValueError, r"^task: the task is empty$", lambda: agent.run(" \n")),
            (
                TypeError,
                r"^history: expected the messages of the previous RunResult",
                lambda: agent.run("hi", history="x"),
            ),
            (TypeError, r"^history: .*a list of dicts$", lambda: agent.run("hi", history=["x"])),
        ]
        for error, message, mistake in wrong:
            with pytest.raises(error, match=message):
                mistake()
        assert api.requests == []
        assert [t for t in set(threading.enumerate()) - before if t.is_alive() and "pool" in t.name] == []
        assert agent.run("hi").answer == "Done."  # the same agent still runs


def test_an_on_event_that_cannot_be_called_and_an_empty_workspace_are_refused_when_the_agent_is_made(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: on_event=5 was taken and the run failed at its first reply ("'int' object is not callable"), and
    # workspace="" was the working folder, restored into the sandbox and saved back into.
    with pytest.raises(TypeError, match=r"^on_event: expected a function of one event \(or None\), got int$"):
        Agent(project.config, tree=project.tree, on_event=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^workspace is an empty path; name a folder"):
        Agent(project.config, tree=project.tree, workspace="")
    monkeypatch.chdir(tmp_path)
    assert Agent(project.config, tree=project.tree, workspace=".").workspace == "."  # said, so taken


def test_an_async_on_event_is_refused_when_the_agent_is_made(project: Project) -> None:
    # Before: taken, and each event made a coroutine nobody awaited ("never awaited"): the handler never ran.
    async def on_event(event: object) -> None:
        pass

    with pytest.raises(TypeError, match=r"^on_event: expected a plain function, got the async function on_event: "):
        Agent(project.config, tree=project.tree, mode="direct", on_event=on_event)
    Agent(project.config, tree=project.tree, mode="direct", on_event=lambda event: None)  # a plain one is taken


@pytest.mark.parametrize(
    ("argument", "value", "message"),
    [
        ("model", 3, r"^model: expected a model's name \(str\), got int$"),
        ("client", "x", r"^client: expected an anthropic client \(anthropic.Anthropic\(\)\), got str$"),
        ("transcript", 3, r"^transcript: expected a path \(str or os.PathLike\), got int$"),
        ("workspace", 3.5, r"^workspace: expected a path \(str or os.PathLike\), got float$"),
    ],
)
def test_a_model_client_transcript_or_workspace_of_another_kind_is_named_when_the_agent_is_made(
    project: Project, argument: str, value: Any, message: str
) -> None:
    # Before: model=3 and client="x" were taken and failed at the first request; transcript=3 and workspace=3.5 with
    # os.fspath's error, naming no argument.
    with pytest.raises(TypeError, match=message):
        Agent(project.config, tree=project.tree, mode="direct", **{argument: value})


@pytest.mark.parametrize(
    ("argument", "value", "message"),
    [
        ("pinned", b"crm.get_record", r"^pinned: expected a list of server.tool names \(str\), got bytes$"),
        ("pinned", [b"crm.get_record"], r"^pinned: expected a list of server.tool names \(str\), got list$"),
        ("prefilter", 3, r"^prefilter: expected 'local', 'claude', 'off' or a ToolFilter \(or None\), got int$"),
        ("prefilter", ["local"], r"^prefilter: expected .* got list$"),
        ("prefilter_options", 0.5, r"^prefilter_options: expected a PrefilterOptions \(or None\), got float$"),
        ("sandbox_config", {"memory": "1g"}, r"^sandbox_config: expected a SandboxConfig \(or None\), got dict$"),
    ],
)
@pytest.mark.parametrize("mode", ["code", "filtered"])
def test_a_pinned_prefilter_or_sandbox_config_of_another_kind_is_named_when_the_agent_is_made(
    project: Project, mode: str, argument: str, value: Any, message: str
) -> None:
    # Before: each was taken; the run failed (pinned=b"…": "'int' object has no attribute 'replace'", prefilter=3:
    # "'int' object has no attribute 'name'", prefilter_options in filtered mode: "… has no attribute 'build'",
    # sandbox_config as the runtime's TypeError) or, in code mode, prefilter_options=0.5 was ignored without a word.
    with pytest.raises(TypeError, match=message):
        Agent(project.config, tree=project.tree, mode=mode, **{argument: value})


@pytest.mark.parametrize(
    ("argument", "value", "message"),
    [
        ("model", "", r"^model is empty \(''\); name a model or pass None for the default$"),
        ("model", "  ", r"^model is empty \('  '\); name a model or pass None for the default$"),
        ("transcript", "", r"^transcript is an empty path; name a file or pass None \(no transcript\)$"),
    ],
)
def test_an_empty_model_or_transcript_is_refused_when_the_agent_is_made(
    project: Project, argument: str, value: str, message: str
) -> None:
    # Before: model="" was sent, and the API refused it after the servers and the sandbox had started; transcript=""
    # was the working folder, found at the run's start ("cannot write the transcript .: Is a directory").
    with pytest.raises(ValueError, match=message):
        Agent(project.config, tree=project.tree, mode="direct", **{argument: value})
