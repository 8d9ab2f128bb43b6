"""A tool call that fails for the developer's setup (the sandbox cannot start: no engine, no image, a hardening
check failed) ends the run with that error, as before tool calls that raise became error results: the model
cannot fix the setup, and the developer must see why (a run that "completed" hid it, and showed the model the
engine's words about the host)."""

from __future__ import annotations

import pytest

from agent import Agent
from agent.calls import NO_RESULT_SANDBOX
from agent.errors import failed_run
from agent.testing import FakeMessagesAPI, reply, tool_use
from sandbox import SandboxConfig
from sandbox.errors import ImageError, SandboxError
from sandbox.host import Runtime
from tests.agent.conftest import Project
from tests.support import TEST_OWNER

MISSING = "tooltree-test-no-such-image:never-built"


@pytest.mark.docker
def test_a_sandbox_whose_image_is_missing_ends_the_run_with_the_image_error(
    project: Project, docker_engine: object
) -> None:
    settings = SandboxConfig(owner=TEST_OWNER, timeout=20.0, image=MISSING)
    script = [reply(tool_use("execute_python", {"code": "print(1)"})), reply("Done.")]
    with Runtime(project.config, project.tree, sandbox_config=settings) as runtime, FakeMessagesAPI(script) as api:
        agent = Agent(project.config, tree=project.tree, mode="code", client=api.client(), runtime=runtime)
        with pytest.raises(ImageError, match="tooltree-test-no-such-image"):
            agent.run("Print 1")
    assert len(api.requests) == 1  # the model was not told, and not asked again


@pytest.mark.docker
def test_an_agent_given_no_runtime_starts_its_sandbox_before_its_first_request(
    project: Project, docker_engine: object
) -> None:
    # Before: as with a given runtime, the sandbox started at the first execute_python, after a paid request.
    settings = SandboxConfig(owner=TEST_OWNER, timeout=20.0, image=MISSING)
    script = [reply(tool_use("list_files", {"path": "servers"})), reply(tool_use("execute_python", {"code": "1"}))]
    with FakeMessagesAPI(script) as api:
        agent = Agent(project.config, tree=project.tree, mode="code", client=api.client(), sandbox_config=settings)
        with pytest.raises(ImageError, match="tooltree-test-no-such-image") as caught:
            agent.run("Print 1")
    assert api.requests == []
    so_far = failed_run(caught.value)
    assert so_far is not None and (so_far.stop_reason, so_far.summary.turns) == ("sandbox_error", 0)


@pytest.mark.parametrize("batched", [False, True], ids=["alone", "in-a-batch"])
def test_a_call_on_a_closed_runtime_ends_the_run_alone_or_in_a_batch(project: Project, batched: bool) -> None:
    # Before, in a batch: each invocation's "[1] crm__list_leads: error" went to the model, and the run went on.
    calls = [{"name": "crm__list_leads", "arguments": {}}, {"name": "docs__list_documents", "arguments": {}}]
    used = tool_use("batch_tool", {"invocations": calls}) if batched else tool_use("crm__list_leads", {})
    runtime = Runtime(project.config, project.tree).open()
    runtime.close()
    with FakeMessagesAPI([reply(used), reply("Done.")]) as api:
        agent = Agent(project.config, tree=project.tree, mode="direct", client=api.client(), runtime=runtime)
        with pytest.raises(SandboxError, match="the runtime is closed"):
            agent.run("List the leads and the documents")
    assert len(api.requests) == 1


def test_a_run_a_closed_runtime_ends_leaves_every_call_of_the_reply_answered(project: Project) -> None:
    # Before: result.messages ended with the reply's tool_use blocks unanswered (the API refused them as they were),
    # and a run going on from them told the model that the call which had run (the unknown tool) had not.
    runtime = Runtime(project.config, project.tree).open()
    runtime.close()
    # An unknown tool first: the calls run one after another, and it is answered before the closed runtime is met.
    with FakeMessagesAPI([reply(tool_use("crm__nope"), tool_use("crm__list_leads", {}))]) as api:
        agent = Agent(project.config, tree=project.tree, mode="direct", client=api.client(), runtime=runtime)
        with pytest.raises(SandboxError, match="the runtime is closed") as caught:
            agent.run("List the leads")
        so_far = failed_run(caught.value)
        assert so_far is not None and [m["role"] for m in so_far.messages] == ["user", "assistant", "user"]
        unknown, lost = so_far.messages[-1]["content"]
        assert unknown["content"][0]["text"].startswith("unknown tool 'crm__nope'")
        assert lost["content"] == [{"type": "text", "text": NO_RESULT_SANDBOX}] and lost["is_error"]
        api.add(reply("Fine."))  # the fake API refuses a tool_use left without its tool_result, as the real one does
        turn = {"role": "user", "content": [{"type": "text", "text": "Go on."}]}
        answer = api.client().messages.create(**{**agent.request([*so_far.messages, turn]), "max_tokens": 64})
        assert answer.content[0].type == "text"
