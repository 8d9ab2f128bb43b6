"""`PreFilter`: before each request, ask the classifier about every tool and grow the admitted set.

The rules it keeps:

- each tool is judged on its own; a tool is admitted when its probability reaches the threshold,
  with its siblings (see ``catalog``);
- the set only grows, in admission order, so the tools array only ever gets tools appended;
- anything that goes wrong (the classifier fails or raises anything at all, answers something that
  is not `Verdicts` of probabilities in [0, 1], times out, has no model; the persisted state is
  corrupt or its load raises anything at all) admits the whole catalog
  and records why: a filter that cannot decide never removes a capability;
- a classifier given up on sends no more requests (`base.Attempt`); the requests it sent count in the
  step, and so do the tokens of an answer that still arrives (in the next step);
- a save that fails (whatever it raises, or its lock busy past `state.LOCK_WAIT`) is skipped and
  recorded, and the run goes on with the set it has;
- tools pinned by the user are offered but never saved as admitted: unpinned, they are gone from the next
  conversation (before: saved as if decided, they stayed offered for good);
- a dry run (`dry_run`) saves nothing, and asks only an offline classifier (``offline = True``, as ``local``); another
  one (``claude``) is not asked and the step says so (before: the dry run sent the classifier's request, and grew
  the state file);
- it asks again whenever the text it judges changes (a new user turn, the model's next step),
  so a change of subject is noticed;
- Ctrl-C while the classifier is asked goes on as it came, carrying the step so far (`INTERRUPTED_STEP`: the requests
  sent, the tokens of their answers, those unanswered), so the run's summary counts them.

Over 400 lines: the decision, its fail-open boundary and the saving of the admitted set belong together.
"""

from __future__ import annotations

import logging
import numbers
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent.defaults import MAX_PREFILTER_TIMEOUT
from agent.prefilter.base import Attempt, CatalogTool, FilterError, ToolFilter, Verdicts, set_current_attempt
from agent.prefilter.catalog import Siblings, sibling_map
from agent.prefilter.state import LOCK_WAIT, AdmittedSet, load_state, update_state
from agent.prefilter.text import MAX_TEXT, called_names, request_text
from agent.summary import TokenUsage

__all__ = ["MAX_TEXT", "FilterStep", "PreFilter", "called_names", "request_text"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
"""Seconds a classifier may take before the request goes out with every tool."""
SHOWN = 20
"""Most probabilities a step records (the highest)."""
INTERRUPTED_STEP = "prefilter_step"
"""The attribute of a ``KeyboardInterrupt`` out of `PreFilter.decide` holding its `FilterStep` so far."""
_ATTEMPT_SO_FAR = "prefilter_attempt"


@dataclass
class FilterStep:
    """One pre-filter decision, before one request (recorded in the transcript)."""

    classifier: str
    asked: bool = False
    """The classifier was asked (not when the text was unchanged or every tool is admitted)."""
    added: list[str] = field(default_factory=list)
    """Keys admitted now (siblings included), in the order they were appended."""
    admitted: int = 0
    catalog: int = 0
    fail_open: str = ""
    """Why every tool was admitted (empty when the classifier decided)."""
    fail_kind: str = ""
    seconds: float = 0.0
    usage: TokenUsage = field(default_factory=TokenUsage)
    requests: int = 0
    top: dict[str, float] = field(default_factory=dict)
    """The highest probabilities (at most `SHOWN`)."""
    above: int = 0
    """Tools at or above the threshold (before siblings were added)."""
    chosen: list[str] = field(default_factory=list)
    """Of `added`, the tools admitted for their own probability, highest first (the rest came as
    siblings). Not in the transcript: `added` lists them all."""
    note: str = ""
    state_error: str = ""
    """Why the admitted set could not be saved to the state file (empty when it was, or need not be)."""
    saved: int | None = None
    """Tools the state file holds after this step (other catalogs' and other runs' included): how big the persisted
    set has grown; None without a state file, or one that could not be read (at the start, or at this save)."""
    unanswered: int = 0
    """Classifier requests of this step no answer came back for (timed out, abandoned): the API may have billed them,
    and their tokens are unknown (not in `usage`; before, they were reported as 0)."""
    dry_run: bool = False
    """Decided in a dry run: nothing was saved, and a classifier that is not offline was not asked (`note` says so)."""

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in vars(self).items() if k not in ("usage", "chosen")}
        out["seconds"] = round(self.seconds, 4)
        out["usage"] = vars(self.usage).copy()
        return out


class PreFilter:
    """Narrows a catalog per request with a `ToolFilter`; grow-only, fail-open.

    Raises:
        ValueError: a threshold outside (0, 1] or a timeout outside (0, `MAX_PREFILTER_TIMEOUT`].

    Args:
        classifier: the `ToolFilter` asked before each request.
        catalog: the tools it decides about (in the order a fail-open admits them).
        threshold: admit tools whose probability is at least this (default: the classifier's).
        siblings: ``named`` (the tools of the same server an admitted tool names or that name it)
            or ``server`` (the whole server).
        timeout: seconds the classifier may take (above 0, at most `MAX_PREFILTER_TIMEOUT`).
        state: a file the admitted set is loaded from at the start of each conversation and
            saved to whenever it grows (None: every conversation starts empty).
    """

    def __init__(
        self,
        classifier: ToolFilter,
        catalog: Sequence[CatalogTool],
        *,
        threshold: float | None = None,
        siblings: Siblings = "named",
        timeout: float = DEFAULT_TIMEOUT,
        state: str | Path | None = None,
    ) -> None:
        self.classifier = classifier
        self.catalog = list(catalog)
        if threshold is not None and not 0.0 < threshold <= 1.0:
            raise ValueError(f"the pre-filter threshold must be in (0, 1], got {threshold}")
        if not 0.0 < timeout <= MAX_PREFILTER_TIMEOUT:  # nan too
            raise ValueError(f"the pre-filter timeout must be above 0 and at most {MAX_PREFILTER_TIMEOUT:g} s, "
                             f"got {timeout}")  # fmt: skip
        self.threshold = threshold
        """The user's threshold; None: the classifier's default (per answer)."""
        self.siblings_mode: Siblings = siblings
        self.siblings = sibling_map(self.catalog, siblings)
        self.timeout = timeout
        self.state_path = Path(state) if state is not None else None
        self.by_key = {t.key: t for t in self.catalog}
        self.by_name = {t.name: t.key for t in self.catalog}
        if len(self.by_key) < len(self.catalog):  # one tool would hide another, even when failing open
            raise ValueError("two tools of the pre-filter's catalog share a key (build it with load_catalog)")
        self.key_of = {(t.server, t.tool): t.key for t in self.catalog}
        """``(server, tool) → key``."""
        self.admitted = AdmittedSet()
        """What the model is offered: decided tools, then everything once the filter failed open."""
        self.decided = AdmittedSet()
        """The tools admitted by decisions (and loaded from the state file): what is persisted."""
        self._pending: FilterStep | None = None
        self._last_text: str | None = None
        self._persist = self.state_path is not None
        self._resumed = False
        self.held: int | None = None
        """`FilterStep.saved`: what the state file holds, as last loaded or saved."""
        self._unknown: list[str] = []
        """Keys of the state file that are not in this catalog: kept in the file, not offered."""
        self._abandoned: list[Attempt] = []
        """Questions given up on whose classifier has not finished: the tokens of an answer that still arrives
        are counted with the next step."""
        self._pin_only: set[str] = set()
        """Keys offered only because they are pinned: never saved (unless a decision admits them too)."""
        self._dry = False

    # ---- conversation -------------------------------------------------------------------

    def start(self) -> None:
        """Begin a conversation: the set is the persisted one (or empty). A state file that
        cannot be read admits every tool (reported by the next `decide`) and is left as it is."""
        self.admitted = AdmittedSet()
        self.decided = AdmittedSet()
        self._last_text = None
        self._pending = None
        self._persist = self.state_path is not None
        self._unknown = []
        self._pin_only = set()
        self.held = None
        self._resumed = False
        """Whether the conversation's earlier calls have been admitted (`decide`, once per conversation)."""
        if self.state_path is None:
            return
        try:
            loaded = load_state(self.state_path)
        except Exception as e:  # the fail-open boundary: a state that cannot be loaded never stops the run
            problem = e if isinstance(e, FilterError) else None
            if problem is None:
                logger.debug("loading the pre-filter state failed", exc_info=True)
                message = f"{self.state_path}: cannot load the pre-filter state ({_short(e)})"
                problem = FilterError(message, kind="corrupt_state")
            self._persist = False  # never overwrite what could not be read
            self._pending = self._fail_open(FilterStep(self.classifier.name, catalog=len(self.catalog)), problem)
            return
        self.decided.grow(k for k in loaded if k in self.by_key)
        self.admitted.grow(self.decided.keys())
        self._unknown = [k for k in loaded if k not in self.by_key]
        self.held = len(loaded)

    def offered(self) -> list[CatalogTool]:
        """The admitted tools, in admission order."""
        return [self.by_key[k] for k in self.admitted]

    def pin(self, keys: Sequence[str]) -> None:
        """Admit ``keys`` (tools the user pinned) before anything is decided. They are not saved as admitted (unless
        a decision admits them too): before, they were, and stayed offered once unpinned."""
        known = [k for k in keys if k in self.by_key]
        self._pin_only.update(k for k in known if k not in self.decided)
        self.decided.grow(known)
        self.admitted.grow(self.decided.keys())

    @contextmanager
    def dry_run(self) -> Iterator[None]:
        """Decide without effects while inside: nothing is saved, and only an offline classifier (one whose
        ``offline`` is True, as ``local``) is asked; any other is not (no request, no cost), the step's `note` says
        so and the set stays what it was (the pinned and saved tools): not narrowed, and not failed open either."""
        self._dry = True
        try:
            yield
        finally:
            self._dry = False

    @property
    def failed_open(self) -> bool:
        """Every tool is admitted because the filter could not decide (not because it chose them all)."""
        return len(self.admitted) > len(self.decided)

    def decide(self, messages: Sequence[dict[str, Any]]) -> FilterStep:
        """Ask about every tool for the request ``messages`` is about to make; grow the set. The step's usage
        includes the tokens of answers that arrived since for questions given up on earlier."""
        late = self._late()
        step = self._decide(messages)
        if late.total:
            step.usage = replace(step.usage)
            step.usage.add(late)
        return step

    def _late(self) -> TokenUsage:
        late = TokenUsage()
        for attempt in list(self._abandoned):
            finished = attempt.done.is_set()  # before taking: whatever it spent before finishing is taken now
            late.add(attempt.late())
            if finished:
                self._abandoned.remove(attempt)
        return late

    def _decide(self, messages: Sequence[dict[str, Any]]) -> FilterStep:
        step = self._pending or FilterStep(self.classifier.name, catalog=len(self.catalog))
        self._pending = None
        resumed: list[str] = []
        if not self._resumed:  # a conversation continued (``history``): the tools it called stay offered
            self._resumed = True
            called = [self.by_name[n] for n in called_names(messages) if n in self.by_name]
            self.decided.grow(called)
            resumed = self.admitted.grow(called)
        text = request_text(messages)
        step.dry_run = self._dry
        if step.fail_open or len(self.admitted) >= len(self.catalog) or text == self._last_text or not text.strip():
            step.added = [*step.added, *resumed]
            step.admitted, step.saved = len(self.admitted), self.held
            return step
        if self._dry and getattr(self.classifier, "offline", False) is not True:
            step.note = (f"not decided in a dry run: the {self.classifier.name} classifier would send a request; "
                         f"these are the {len(self.admitted)} pinned and saved tool(s) it starts from")  # fmt: skip
            step.added = [*step.added, *resumed]
            step.admitted, step.saved = len(self.admitted), self.held
            return step
        self._last_text = text
        step.asked = True
        t0 = time.monotonic()
        try:
            verdicts = self._classify(text)
        except KeyboardInterrupt as e:  # what the classifier sent until then is counted (before: nothing, though sent)
            step.seconds = time.monotonic() - t0
            step.requests, step.usage, step.unanswered = getattr(e, _ATTEMPT_SO_FAR, (0, TokenUsage(), 0))
            step.admitted, step.saved = len(self.admitted), self.held
            setattr(e, INTERRUPTED_STEP, step)
            raise
        except FilterError as e:
            step.seconds = time.monotonic() - t0
            step.usage, step.requests = e.usage, e.requests  # a failed answer's tokens are still paid for
            step.unanswered = e.unanswered
            return self._fail_open(step, e)
        step.seconds = time.monotonic() - t0
        step.usage, step.requests, step.note = verdicts.usage, verdicts.requests, verdicts.note
        probabilities = {k: p for k, p in verdicts.probabilities.items() if k in self.by_key}
        ranked = sorted(probabilities.items(), key=lambda kv: (-kv[1], kv[0]))
        step.top = {k: round(p, 4) for k, p in ranked[:SHOWN]}
        threshold = self.threshold or verdicts.threshold or self.classifier.default_threshold
        wanted: list[str] = []
        above: list[str] = []
        expanded: set[int] = set()  # a list of siblings added (mode server: one per server, shared by its tools)
        for key, p in ranked:
            if p >= threshold:
                above.append(key)
                wanted.append(key)
                siblings = self.siblings.get(key, ())
                if id(siblings) not in expanded:  # each server's whole list once, not once per tool above
                    expanded.add(id(siblings))
                    wanted += siblings
        step.above = len(above)
        self.decided.grow(wanted)
        confirmed = self._pin_only.intersection(wanted)  # pinned, and now decided too: to be saved
        self._pin_only -= confirmed
        step.added = [*resumed, *self.admitted.grow(wanted)]
        added = set(step.added)
        step.chosen = [k for k in above if k in added]
        step.admitted = len(self.admitted)
        self._save(step, confirmed=bool(confirmed))
        step.saved = self.held
        return step

    def _classify(self, text: str) -> Verdicts:
        # A daemon thread, not an executor's: the interpreter joins executor threads at exit, so a classifier that
        # never answers would keep the process alive after the run (it is abandoned here once the timeout passed).
        # The classifier runs under an `Attempt`: past its deadline it may send no more requests, and what it sent
        # before is counted in the step (a model-based classifier reports each request it sends).
        attempt = Attempt(self.timeout)
        outcome: list[Verdicts | BaseException] = []

        def work() -> None:
            set_current_attempt(attempt)  # this thread's context only
            try:
                outcome.append(self.classifier.classify(text, self.catalog))
            except BaseException as e:  # handed to the caller below
                outcome.append(e)
            finally:
                attempt.done.set()

        threading.Thread(target=work, name="tooltree-prefilter", daemon=True).start()
        try:
            answered = attempt.done.wait(max(attempt.left(), 0.0))
        except KeyboardInterrupt as e:  # given up on: its requests and tokens so far, for `_decide`
            requests, usage = attempt.abandon()
            if not attempt.done.is_set():
                self._abandoned.append(attempt)  # an answer that still comes is counted at the next decision
            setattr(e, _ATTEMPT_SO_FAR, (requests, usage, attempt.unanswered()))
            raise
        if not answered:
            requests, usage = attempt.abandon()
            if not attempt.done.is_set():  # (it may have answered just now: then its answer is used)
                self._abandoned.append(attempt)
                message = f"the {self.classifier.name} classifier took longer than {self.timeout:g} s"
                unanswered = attempt.unanswered()
                if unanswered:  # before: "0 tokens", though the API may have billed them
                    message += (f" ({unanswered} request(s) abandoned unanswered: their tokens are unknown, not "
                                "counted; the API may have billed them)")  # fmt: skip
                raise FilterError(message, kind="timeout", usage=usage, requests=requests, unanswered=unanswered)
        (result,) = outcome
        if isinstance(result, FilterError):
            raise result
        if isinstance(result, Exception):  # the fail-open boundary: a classifier's bug never removes a capability
            # The reason goes into the run's summary; the traceback only to a configured log, not the CLI.
            logger.debug("the %s pre-filter failed", self.classifier.name, exc_info=result)
            raise FilterError(f"the {self.classifier.name} classifier failed: {result!r}") from None
        if isinstance(result, BaseException):  # KeyboardInterrupt, SystemExit: not the classifier's to swallow
            raise result
        return self._checked(result)

    def key(self, server: str, tool: str) -> str:
        """The key of a tool (`catalog.tool_keys`: never another tool's, even when their names join to the same
        text); ``<server>.<tool>`` for a tool not in the catalog."""
        return self.key_of.get((server, tool), f"{server}.{tool}")

    def _checked(self, verdicts: object) -> Verdicts:
        """``verdicts`` when it is an answer (probabilities by key, numbers; a threshold in (0, 1] if any).

        Raises:
            FilterError: the classifier answered something else (a third-party one may): deciding on it would
                crash the run or admit (and persist) tools nobody chose.
        """
        what = f"the {self.classifier.name} classifier answered"
        if not isinstance(verdicts, Verdicts):
            raise FilterError(f"{what} {type(verdicts).__name__}, not Verdicts")
        if not isinstance(verdicts.probabilities, Mapping):
            raise FilterError(f"{what} probabilities that are {type(verdicts.probabilities).__name__}, not a mapping")
        bad = [k for k, p in verdicts.probabilities.items() if not _probability(p)]
        if bad:
            raise FilterError(f"{what} a probability for {str(bad[0])[:100]!r} that is not a number from 0 to 1")
        threshold = verdicts.threshold
        if threshold is not None and not (_probability(threshold) and threshold > 0):
            raise FilterError(f"{what} a threshold ({threshold!r}) outside (0, 1]")
        return verdicts

    def _fail_open(self, step: FilterStep, error: FilterError) -> FilterStep:
        step.fail_open, step.fail_kind = str(error), error.kind
        step.added = self.admitted.grow(t.key for t in self.catalog)
        step.admitted, step.saved = len(self.admitted), self.held
        return step  # not persisted: a failure is not a decision

    def _save(self, step: FilterStep, *, confirmed: bool = False) -> None:
        if not (step.added or confirmed) or not self._persist or self.state_path is None or self._dry:
            return
        try:
            keys = [*(k for k in self.decided if k not in self._pin_only), *self._unknown]
            self.held = len(update_state(self.state_path, keys, lock_wait=min(self.timeout, LOCK_WAIT)))
        except FilterError as e:
            step.state_error = str(e)
            if e.kind == "corrupt_state":  # what it holds is not known (before: the count last loaded); left alone
                self.held, self._persist = None, False  # for the rest of the conversation: said once, not per save
        except Exception as e:  # a save that fails is recorded; the run goes on with the set it has
            logger.debug("saving the pre-filter state failed", exc_info=True)
            step.state_error = f"{self.state_path}: cannot save the pre-filter state ({_short(e)})"


def _probability(value: object) -> bool:
    """Whether ``value`` is a real number from 0 to 1 (not a bool, not NaN; numpy's floats count)."""
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and 0.0 <= float(value) <= 1.0


def _short(e: BaseException) -> str:
    """An unexpected error in a few words: its type and the start of its message."""
    message = str(e)
    return f"{type(e).__name__}: {message[:200]}" if message else type(e).__name__
