"""`Agent`: one Anthropic Messages loop over the tools of a mode.

::

    agent = Agent(load_config("tooltree.yaml"), tree="tree", mode="code")
    result = agent.run("Copy the Q3 pipeline review transcript into the Northwind opportunity")
    print(result.answer, result.summary.usage.total)

Each turn sends the same system prompt and tools array (with cache breakpoints) plus the
conversation (with a pre-filter, the tools array may grow before a request — tools appended,
never reordered — and is byte-identical after the last growth), runs the ``tool_use`` blocks of
the reply (at the same time when all of them are independent: MCP tools, reads of the tree; at most
`agent.calls.MAX_TOOL_USES`, their results sharing the caps of one result) and sends the results
back, until the model ends its turn, a reply stops for another reason (``max_tokens``, ``refusal``),
the turn limit or token budget is reached, or a reply cannot be read (``unreadable_reply``: the SDK could
not parse a tool call's input; `ModelAPIError`). A request's images are kept within the API's limits
(`agent.images`). Requests stream (so large ``max_tokens`` work); the loop retries rate limits, overloads, server
errors and timeouts with back-off as the SDK would (`agent.request.retry_wait`), each attempt recorded and counted
(``api_retries``), the same errors when they arrive inside a stream (an ``error`` event after the 200), and a stream
that ends before its message does — its body ends early, its connection is reset, no data comes for the client's
read timeout — (``api_error`` once retries are spent: a cut reply is never taken as the answer). A `ModelAPIError`
says what failed, and its ``advice`` what to do. Ctrl-C ends the
transcript with a ``run_end`` whose stop reason is ``interrupted``, and the ``KeyboardInterrupt`` goes on carrying
the run so far (`agent.errors.interrupted_result`), the pre-filter's requests until then counted in it.

Over 400 lines: one run's loop with its bookkeeping, and the paths by which Ctrl-C and failures end it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.calls import INTERRUPTED_RESULTS, answers_at_stop, run_tool_uses, used_ids
from agent.conversation import NewSandboxNote, check_sandbox_args, check_task, sandbox_packages
from agent.defaults import (
    BATCH_MODES,
    DEFAULT_BATCH_MAX,
    DEFAULT_MAX_TOKENS,
    DEFAULT_MAX_TURNS,
    DEFAULT_MODEL,
    DEFAULT_RETRIES,
    MODES,
    PREFILTER_KEYS,
    SETTINGS,
    agent_settings,
    check_arguments,
    check_kinds,
    default_client,
)
from agent.errors import INTERRUPTED_RESULT, AgentSetupError, EventHandlerError
from agent.events import EventHandler, ModelReplied, RunFinished, ToolFinished
from agent.images import within_image_limits
from agent.prefilter.gate import INTERRUPTED_STEP, FilterStep
from agent.prefilter.options import PrefilterOptions
from agent.request import (
    answer_text,
    block_param,
    cached_system,
    cached_tools,
    next_user_turn,
    send,
    user_text,
    with_last_breakpoint,
)
from agent.summary import PrefilterSummary, RunResult, RunSummary, TokenUsage
from agent.toolsets import make_toolset
from agent.transcript import Transcript, check_paths, fingerprint
from tool_tree.config import Config
from tool_tree.listeners import refuse_async

if TYPE_CHECKING:
    import anthropic

    from agent.prefilter.base import ToolFilter
    from sandbox.config import SandboxConfig
    from sandbox.host import Runtime


class Agent:
    """Runs tasks with Claude over the tools of a generated tree.

    Args:
        config: how to start the servers of the tree; its ``agent:`` section gives the defaults of
            the arguments below that are left out (``mode``, ``model``, ``max_turns``, ``token_budget``,
            ``max_tokens``, ``pinned``).
        tree: the generated tree.
        mode: ``code`` (browse stubs, run scripts in the sandbox), ``direct`` (every MCP tool as
            a native tool), ``tool-search`` (every MCP tool deferred behind the API's BM25 tool search)
            or ``filtered`` (native tools narrowed per request by the pre-filter).
        model: the model id.
        max_turns: most requests per run.
        token_budget: stop before the next request once input (all kinds) plus output tokens reach this,
            the ``claude`` pre-filter's requests counted too (`RunSummary.spent`).
        max_tokens: ``max_tokens`` of each request.
        client: an ``anthropic.Anthropic`` client; default one made from the environment
            (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``) with ``max_retries`` retries. ``prefilter="claude"`` asks
            through it too (before, it always made its own from the environment: a client given for a fake API or
            another key was not used for it).
        pinned: tools to keep at hand: their signatures go into the code-mode prompt; in
            tool-search mode they are not deferred.
        sandbox_config: limits of the sandbox session (default: the config's ``sandbox:`` section); not with
            ``runtime`` (give it to that `Runtime`).
        workspace: a host folder restored into ``/workspace`` and saved back after the run; not with ``runtime``.
        transcript: write the JSONL transcript here: the agent's first run empties the file, its later runs append
            to it (`agent.transcript`).
        runtime: a running `Runtime` to use (and leave open) instead of one per run. Without it each run makes
            its own and closes it at its end, so a run that goes on from ``history`` scripts in a new sandbox:
            the variables and imports of the earlier runs are gone, and their files too unless ``workspace``
            restores them. The model is told so in front of the run's first ``execute_python`` result
            (`agent.conversation`). To keep them for a conversation, pass one (``with Runtime(config, tree) as rt``).
        on_event: called with `ModelReplied`, `ToolFinished` and `RunFinished` as the run goes; an exception it raises
            ends the run (`EventHandlerError`, stop reason ``on_event_error``).
        prefilter: ``local``, ``claude``, ``off`` or a `ToolFilter`; narrows ``filtered`` mode (default
            ``local``) and in ``code`` mode inlines the admitted tools' signatures (default ``off``).
        prefilter_options: threshold, siblings, timeout, state file and model of the pre-filter
            (`PrefilterOptions`; default: the config's ``prefilter_*`` settings).
        batch: offer ``batch_tool`` in ``direct``, ``tool-search`` and ``filtered`` modes (default on).

    Raises:
        TypeError: ``config`` is not a `Config` (a path: load it with ``load_config``), a number
            (``max_turns``, ``token_budget``, ``max_tokens``, ``max_retries``) is not a whole number,
            ``pinned`` is a string (or bytes) rather than a list of them, ``on_event`` is not callable (or is an
            ``async def`` function, which would never run), ``runtime`` is not a `Runtime`, ``prefilter`` neither a
            str nor a `ToolFilter`, ``prefilter_options`` not a `PrefilterOptions`, ``sandbox_config`` not a
            `SandboxConfig`, or ``batch`` not a bool.
        ValueError: ``workspace`` or ``transcript`` is an empty string (it is not taken as the working folder), or
            ``model`` is empty or only white space (the API refuses it, after the sandbox had started).
        AgentSetupError: an unknown mode, a number out of range (``max_retries`` may be 0, the others
            must be at least 1, as on the command line), a tree without manifest, an unknown pinned
            tool, a workspace that is a file, ``workspace`` or ``sandbox_config`` with ``runtime``, a pre-filter
            setting that cannot be used, a transcript that is the pre-filter state or the config file, a pre-filter
            state that is the config file, or a transcript or pre-filter state inside ``workspace``, or a transcript
            inside the tree; a ``runtime`` of another tree.
    """

    def __init__(
        self,
        config: Config,
        *,
        tree: str | os.PathLike[str] = "tree",
        mode: str | None = None,
        model: str | None = None,
        max_turns: int | None = None,
        token_budget: int | None = None,
        max_tokens: int | None = None,
        client: anthropic.Anthropic | None = None,
        max_retries: int = DEFAULT_RETRIES,
        pinned: Sequence[str] | None = None,
        sandbox_config: SandboxConfig | None = None,
        workspace: str | Path | None = None,
        transcript: str | Path | None = None,
        runtime: Runtime | None = None,
        on_event: EventHandler | None = None,
        prefilter: str | ToolFilter | None = None,
        prefilter_options: PrefilterOptions | None = None,
        batch: bool | None = None,
    ) -> None:
        check_arguments(
            config, max_turns=max_turns, token_budget=token_budget, max_tokens=max_tokens, max_retries=max_retries
        )
        check_kinds(
            model=model,
            client=client,
            transcript=transcript,
            workspace=workspace,
            pinned=pinned,
            prefilter=prefilter,
            prefilter_options=prefilter_options,
            sandbox_config=sandbox_config,
        )
        # An argument left out takes the config's `agent:` setting, then the default.
        given = {"mode": mode, "model": model, "max_turns": max_turns, "token_budget": token_budget,
                 "max_tokens": max_tokens, "pinned": pinned, "prefilter": prefilter, "batch": batch}  # fmt: skip
        taken = {k for k, v in given.items() if v is not None} | (PREFILTER_KEYS if prefilter_options else set())
        settings = agent_settings(config, used=[k for k in SETTINGS if k not in taken])  # an argument wins
        mode = mode if mode is not None else str(settings.get("mode", "code"))
        max_turns = max_turns if max_turns is not None else int(settings.get("max_turns", DEFAULT_MAX_TURNS))
        if mode not in MODES:
            raise AgentSetupError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
        if not isinstance(tree, str | os.PathLike):  # before: os.fspath's error, naming no argument
            raise TypeError(f"tree: expected the path (str or os.PathLike) of a tree, got {type(tree).__name__}")
        self.config = config
        self.tree = Path(tree)
        self.mode = mode
        self.model = model if model is not None else str(settings.get("model", DEFAULT_MODEL))
        self.max_turns = max_turns
        self.token_budget = token_budget if token_budget is not None else settings.get("token_budget")
        self.max_tokens = max_tokens if max_tokens is not None else int(settings.get("max_tokens", DEFAULT_MAX_TOKENS))
        if isinstance(pinned, str):  # iterated, it was one "tool" per character: "pinned tool 'c' is not in the tree"
            raise TypeError(f"pinned: expected a list of server.tool names, got the string {pinned!r:.80}")
        pinned = pinned if pinned is not None else tuple(settings.get("pinned", ()))
        if on_event is not None and not callable(on_event):  # else found at the first reply, its tokens spent
            raise TypeError(f"on_event: expected a function of one event (or None), got {type(on_event).__name__}")
        refuse_async(on_event, "on_event")
        check_sandbox_args(runtime, workspace=workspace, sandbox_config=sandbox_config, batch=batch, tree=tree)
        if workspace is not None and os.fspath(workspace) == "":  # Path("") is the working folder: saved into
            raise ValueError('workspace is an empty path; name a folder ("." for the working folder) or pass None')
        if transcript is not None and os.fspath(transcript) == "":  # before: "cannot write the transcript ." at run
            raise ValueError("transcript is an empty path; name a file or pass None (no transcript)")
        if model is not None and not model.strip():  # as the config's agent.model: before, sent, and refused then
            raise ValueError(f"model is empty ({model!r}); name a model or pass None for the default")
        if workspace is not None and os.path.exists(workspace) and not os.path.isdir(workspace):
            raise AgentSetupError(f"the workspace {workspace} is a file, not a folder")  # else found after a script ran
        self.client = client
        self.max_retries = max_retries
        self.sandbox_config = sandbox_config
        self.workspace = workspace
        self.transcript = Path(transcript) if transcript is not None else None
        self._transcript_begun = False
        """Whether a run of this agent has opened the transcript (its next runs append to it)."""
        self.first_request_note = ""
        """Why `first_request`'s tools may not be what a run would send (a pre-filter not asked in a dry run)."""
        self.runtime = runtime
        self.on_event = on_event
        chosen = (
            prefilter if prefilter is not None else settings.get("prefilter", "local" if mode == "filtered" else "off")
        )
        options = prefilter_options or PrefilterOptions.from_settings(settings, config)
        self.prefilter = (
            None if chosen == "off" else options.build(self.tree, chosen, client=client, max_retries=max_retries)
        )
        state = self.prefilter.state_path if self.prefilter is not None else None
        check_paths(self.transcript, state=state, config=Path(config.source), workspace=workspace, tree=self.tree)
        batch = batch if batch is not None else bool(settings.get("batch", True))
        batch_max = int(settings.get("batch_max", DEFAULT_BATCH_MAX)) if batch and mode in BATCH_MODES else None
        packages = sandbox_packages(config, sandbox_config, runtime) if mode == "code" else ()  # its prompt says them
        self.toolset = make_toolset(mode, self.tree, pinned=pinned, prefilter=self.prefilter, batch_max=batch_max,
                                    config=config.file, packages=packages)  # fmt: skip
        self.system = self.toolset.system_prompt()
        self.tools = self.toolset.tools()

    # ---- requests ---------------------------------------------------------------------------

    def request(self, messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The parameters of one request: fixed system and tools with breakpoints, then ``messages``. No ``tools``
        when there are none to offer (``filtered`` mode without ``batch_tool`` before its pre-filter admits a tool):
        before, ``tools: []`` was sent, a parameter the SDK leaves out rather than sends empty."""
        tools = {"tools": cached_tools(self.tools)} if self.tools else {}
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": cached_system(self.system),
            **tools,
            "messages": with_last_breakpoint(within_image_limits(messages)),
        }

    def first_request(self, task: str) -> dict[str, Any]:
        """The first request of a run of ``task``, for a dry run: nothing is started, sent or written. An offline
        pre-filter (``local``) decides on ``task`` in memory, saving nothing; another (``claude``) is not asked, and
        `first_request_note` says the tools are the pinned and saved ones it would start from.

        Before, the ``claude`` classifier's request was sent (without a key it failed open silently: the whole
        catalog shown as "filtered"), and a decision was saved to the state file, which only grows."""
        messages = [user_text(task)]
        self.first_request_note = ""
        self.toolset.start_conversation()
        with self.prefilter.dry_run() if self.prefilter is not None else nullcontext():
            step = self.toolset.before_request(messages)
        if step is not None:
            self.system, self.tools = self.toolset.system_prompt(), self.toolset.tools()
            self.first_request_note = step.note if step.dry_run and not step.asked else ""
        return self.request(messages)

    def _client(self) -> anthropic.Anthropic:
        if self.client is None:
            self.client = default_client(self.max_retries)
        return self.client

    def _emit(self, event: ModelReplied | ToolFinished | RunFinished) -> None:
        """Raises: EventHandlerError: ``on_event`` raised (its exception the cause; `run` adds the run so far)."""
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception as e:  # the caller's code: whatever it raises ends the run, said as such
            raise EventHandlerError(f"on_event raised on {type(event).__name__}: {type(e).__name__}: {e}") from e

    # ---- the loop ---------------------------------------------------------------------------

    def run(self, task: str, *, history: Sequence[dict[str, Any]] | None = None) -> RunResult:
        """Run ``task`` to the end.

        With ``history`` (the ``messages`` of the previous `RunResult`), ``task`` is the next user turn of that
        conversation: a pre-filter's admitted set carries on growing (and keeps the tools it called); an agent without
        ``runtime`` scripts in a new sandbox, which the model is told (see `Agent`); the run's transcript records
        hold the history it went on from. Without it a new conversation starts. The calls of the last reply run even
        when the turn limit or token budget then stops the run: their results end ``messages`` (and the transcript's
        ``tool_results`` record), so ``history`` goes on from them. A transcript that cannot be written on (a full disk)
        stops there and the run goes on (``summary.transcript_error`` says why).

        Raises:
            TypeError: ``task`` is not a string, or ``history`` not a list of messages (nothing started).
            ValueError: ``task`` is empty or only white space, which the API refuses (nothing started).
            AgentSetupError: the transcript cannot be opened, or another run is writing it (nothing started).
            ModelAPIError: the Messages API failed after retries, or its reply could not be read
                (``.result`` has the run so far, its ``stop_reason`` ``api_error`` or ``unreadable_reply``).
            SandboxError: the sandbox could not be started (no engine, no image, limits it cannot start under); it
                carries the run so far (`agent.errors.failed_run`: ``stop_reason`` ``sandbox_error``, its turns and
                tokens, its ``messages`` answering every tool call of the last reply, as for ``EventHandlerError``).
                In code mode a run given no ``runtime`` starts its sandbox before the first request, so one
                that cannot start ends the run with no request sent (a given ``runtime``'s starts at its first use).
            PoolError: the server pool could not start; it carries the run so far too.
            EventHandlerError: ``on_event`` raised (its exception the cause); ``.result`` has the run so far (stop
                reason ``on_event_error``, in the transcript's ``run_end`` too), its ``messages`` answering every tool
                call of the last reply (with its result, or as not run), so that they can go on as ``history``.
            KeyboardInterrupt: Ctrl-C stopped the run; it goes on as it came, carrying the run so far
                (`agent.errors.interrupted_result`: ``stop_reason`` ``interrupted``, its turns and tokens).
        """
        from sandbox.errors import SandboxError
        from sandbox.host import Runtime
        from tool_tree.pool import PoolError

        check_task(task, history)
        client = self._client()
        own = self.runtime is None
        runtime = self.runtime or Runtime(
            self.config, self.tree, sandbox_config=self.sandbox_config, workspace=self.workspace
        )
        new_sandbox = NewSandboxNote(history, fresh=own, workspace=self.workspace is not None)
        if history is None:
            self.toolset.start_conversation()
            self.system, self.tools = self.toolset.system_prompt(), self.toolset.tools()
        summary = RunSummary(mode=self.mode, model=self.model)
        if self.prefilter is not None:
            summary.prefilter = PrefilterSummary(self.prefilter.classifier.name, catalog=len(self.prefilter.catalog))
        messages: list[dict[str, Any]] = [*(history or ()), next_user_turn(task, history or ())]
        started = time.monotonic()
        # Before the runtime starts: a path that cannot be written stops nothing. The agent's later runs append.
        log = Transcript(self.transcript, append=self._transcript_begun)
        self._transcript_begun = True
        log.write("run_start", mode=self.mode, model=self.model, task=task, system=self.system, tools=self.tools,
                  history=len(history or ()))  # fmt: skip
        sent = 0  # the first request record holds the history too: the run's records are complete on their own
        prints: tuple[str, str] | None = None
        unanswered = 0
        try:
            with runtime if own else nullcontext(runtime):
                if own and self.toolset.needs_sandbox:  # before any request (the pre-filter's too): `_start_sandbox`
                    _start_sandbox(runtime)
                while True:
                    if summary.turns >= self.max_turns:
                        summary.stop_reason = "max_turns"
                    elif self.token_budget is not None and summary.spent >= self.token_budget:
                        summary.stop_reason = "token_budget"
                    if summary.stop_reason:  # the last reply's results are in no request record: here they are
                        if summary.turns and len(messages) > sent and messages[-1].get("role") == "user":
                            log.write("tool_results", turn=summary.turns, results=messages[-1]["content"])
                        break
                    turn = summary.turns + 1
                    unanswered += self._prefilter(messages, turn, summary, log)
                    if self.token_budget is not None and summary.spent >= self.token_budget:
                        continue  # the pre-filter's tokens reached the budget: no request goes out (stopped above)
                    summary.turns = turn  # a request goes out (before: counted first, a Ctrl-C in the pre-filter too)
                    params = self.request(messages)
                    tools_print, system_print = fingerprint(params.get("tools", [])), fingerprint(params["system"])
                    summary.cache_invalidations += prints is not None and prints != (tools_print, system_print)
                    prints = (tools_print, system_print)
                    log.write(
                        "request",
                        turn=turn,
                        model=self.model,
                        max_tokens=self.max_tokens,
                        tools_sha256=tools_print,
                        system_sha256=system_print,
                        messages=messages[sent:],
                    )
                    sent = len(messages)
                    message, seconds = send(client, params, model=self.model, log=log, summary=summary,
                                            so_far=lambda: self._so_far(summary, messages, started))  # fmt: skip
                    usage = TokenUsage.from_api(message.usage)
                    summary.usage.add(usage)
                    content = [block_param(b) for b in message.content]
                    earlier = used_ids(messages)  # before the reply joins them: an id it repeats is renamed, not run
                    stop = str(message.stop_reason or "end_turn")
                    log.write(
                        "response",
                        turn=turn,
                        seconds=round(seconds, 3),
                        message=message.model_dump(mode="json", warnings=False),
                    )
                    if content:  # the API refuses an empty message anywhere but last: the next turn would fail
                        messages.append({"role": "assistant", "content": content})
                    summary.answer = answer_text(content) or summary.answer
                    self._emit(ModelReplied(turn, stop, usage, replace(summary.usage), seconds))  # the reply kept
                    if stop == "pause_turn":  # a server tool paused the turn: send it back to continue
                        continue
                    if stop != "tool_use":
                        summary.stop_reason = stop
                        break
                    results = run_tool_uses(self.toolset, content, runtime, turn, summary, log, self._emit, earlier)
                    if not results:  # "tool_use" without a tool_use block: nothing to answer
                        summary.stop_reason = "end_turn"
                        break
                    new_sandbox.add(content, results)
                    messages.append({"role": "user", "content": results})
        except KeyboardInterrupt as e:  # Ctrl-C (or the CLI's SIGTERM): the transcript's run_end says so
            unanswered += getattr(getattr(e, INTERRUPTED_STEP, None), "unanswered", 0)
            if isinstance(answered := getattr(e, INTERRUPTED_RESULTS, None), list):  # the stopped reply's calls
                messages.append({"role": "user", "content": answered})
            summary.stop_reason = summary.stop_reason or "interrupted"
            so_far = RunResult(summary.answer, summary.stop_reason, summary, messages, self.transcript)
            setattr(e, INTERRUPTED_RESULT, so_far)  # for `interrupted_result`: the interrupt itself goes on
            raise
        except EventHandlerError as e:  # the caller's callback raised: the run ends, its transcript saying why
            summary.stop_reason = "on_event_error"
            _answer_last_reply(e, messages, new_sandbox, log, summary.turns)
            e.result = RunResult(summary.answer, summary.stop_reason, summary, messages, self.transcript)
            raise
        except (SandboxError, PoolError) as e:  # the sandbox or the servers could not start: the run so far with it
            summary.stop_reason = summary.stop_reason or "sandbox_error"  # `agent.errors.failed_run` gives it back
            _answer_last_reply(e, messages, new_sandbox, log, summary.turns)
            setattr(e, "result", RunResult(summary.answer, summary.stop_reason, summary, messages, self.transcript))  # noqa: B010
            raise
        finally:
            summary.duration_s = time.monotonic() - started
            # Pre-filter requests given up on unanswered: their tokens are unknown, not 0 (before: not said).
            unknown = {"prefilter_unanswered": unanswered} if unanswered else {}
            log.write("run_end", summary=summary.to_json(), **unknown)
            log.close()
            summary.transcript_error = log.error
        result = RunResult(summary.answer, summary.stop_reason, summary, messages, self.transcript)
        try:
            self._emit(RunFinished(summary))
        except EventHandlerError as e:  # the run had ended, its reason its own
            e.result = result
            raise
        return result

    def _so_far(self, summary: RunSummary, messages: list[dict[str, Any]], started: float) -> RunResult:
        """The run so far, for the error that ends it."""
        summary.duration_s = time.monotonic() - started
        return RunResult(summary.answer, summary.stop_reason, summary, messages, self.transcript)

    def _prefilter(self, messages: list[dict[str, Any]], turn: int, summary: RunSummary, log: Transcript) -> int:
        """Let the toolset's pre-filter decide before this request; log and count what it did. Returns how many of
        its requests got no answer (`FilterStep.unanswered`)."""
        try:
            step = self.toolset.before_request(messages)
        except KeyboardInterrupt as e:  # the classifier's requests until then count (before: 0, though sent)
            if (stopped := getattr(e, INTERRUPTED_STEP, None)) is not None and summary.prefilter is not None:
                _counted(summary.prefilter, stopped)
                log.write("prefilter", turn=turn, **stopped.to_json())
            raise
        if step is None or summary.prefilter is None:
            return 0
        p = summary.prefilter
        _counted(p, step)
        if step.fail_open:
            p.fail_open.append(f"{step.fail_kind}: {step.fail_open}")
        if step.state_error:
            p.state_errors.append(step.state_error)
        log.write("prefilter", turn=turn, **step.to_json())
        if step.added:
            before = {t.get("name") for t in self.tools}
            system, self.system, self.tools = self.system, self.toolset.system_prompt(), self.toolset.tools()
            appended = [t for t in self.tools if t.get("name") not in before]
            changed = self.system if self.system != system else None
            if appended or changed is not None:  # not when every tool was offered already (a filter failed open)
                p.growths += 1
                log.write("tools_grew", turn=turn, tools=appended, system=changed)
        return step.unanswered


def _answer_last_reply(
    e: BaseException, messages: list[dict[str, Any]], new_sandbox: NewSandboxNote, log: Transcript, turn: int
) -> None:
    """Answer the ``tool_use`` blocks of the last reply of ``messages`` that ``e`` (``on_event`` raised, the sandbox
    could not start) left unanswered (`agent.calls.answers_at_stop`), in a ``tool_results`` record too: the messages
    can go on as the ``history`` of the next run."""
    if (answered := answers_at_stop(e, messages)) is not None:
        new_sandbox.add(messages[-1]["content"], answered)
        messages.append({"role": "user", "content": answered})
        log.write("tool_results", turn=turn, results=answered)


def _start_sandbox(runtime: Runtime) -> None:
    """Start the sandbox of the ``runtime`` a code-mode run made, before its first request.

    Before, it started at the first ``execute_python``: a sandbox that could not start (its ``memory`` too small for
    its own processes, a ``cpus`` past the machine's, an unknown ``runtime``) ended the run only then, after the turns
    spent browsing had been paid for. Not started beside the first request: a request sent while a start fails is paid
    for all the same. A run that scripts takes as long as before (the start only comes earlier, ~0.3 s); one that
    never scripts pays a start. A runtime the caller gives is left to start at its first use: the caller may share it
    between runs, start its sandbox when it chooses (``runtime.sandbox``), or browse without an engine.

    Raises:
        SandboxError: the sandbox could not start (its error names the setting's file and line where it can).
    """
    runtime.sandbox  # noqa: B018 -- the property starts it


def _counted(p: PrefilterSummary, step: FilterStep) -> None:
    """Add what the pre-filter's ``step`` asked and cost to the run's ``p``."""
    p.asked += step.asked
    p.requests += step.requests
    p.seconds += step.seconds
    p.usage.add(step.usage)
    # A save that found the file unreadable makes what it holds unknown (before: the count last loaded stayed).
    p.admitted, p.saved = step.admitted, step.saved
