"""How much host CPU one sandbox may make the host spend on its requests: a burst, then a small steady share.

Every request a container makes — a tool call or a search, served or refused — costs the host the CPU
its channel reader spends reading, counting, parsing and routing the frame, plus what follows on the host
(the session's checks, the bridge's, the audit line, the answer), estimated at `DOWNSTREAM_SECONDS` a
request and `REREAD_SHARE` of the reader's CPU for its arguments. Each is bounded on its own (frame cap, value
budget, per-call limits), but a script can repeat them: 53,000 refused calls in 25 s cost the host 6.4 CPU-s,
150 calls of 120,000 values 21 CPU-s.

A `RequestBudget` lets a sandbox spend ``burst`` seconds of that at once, then ``rate`` seconds per
second (a token bucket). Past it, the channel's reader waits before it reads the next frame: the
container's writes block and the script slows down, and no request is refused for it. So an execution
costs the host at most about ``burst + rate × its duration`` seconds of request work: 3.5 s for a 30 s
timeout with the defaults, while 2,000 honest calls (the bridge's default budget per execution) are
charged about 1.2 s of the burst. Answers are not charged: relaying tool results is bounded by the bridge's
budget of result bytes per execution (`sandbox.mcp_bridge.Budgets`), not slowed to this rate.

A session's tool searches have a budget of their own (`SEARCH_BURST_SECONDS`, `SEARCH_RATE`), charged the
CPU each search took on the host (`sandbox.calls`): a hybrid query embeds the query and its clauses, up to
about 0.5 s of CPU for a hostile 1,000-character query, where the reader's share of it is under a millisecond.
So are the validations of a session's tool arguments (`sandbox.mcp_bridge`). Each is also charged to the sandbox's
request budget, the one account of what its requests cost the host (`ACCOUNT`), and waits or is refused while
either is spent: before, the three were apart, and one 30 s execution mixing searches, arguments costly to validate
and refused calls cost the host 5.65–6.05 CPU-s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar

from tool_tree.budget import SharedBucket

BURST_SECONDS = 2.0
RATE = 0.05
"""Seconds of host CPU per second of wall time a sandbox may keep asking for once its burst is spent."""
DOWNSTREAM_SECONDS = 0.0005
"""What one request costs the host after its reader is done with it (measured on the shared 2-core machine:
~0.45 ms for a call the bridge refuses, audit line included; a call it serves costs more, the tool's own work),
besides what grows with the request (`REREAD_SHARE`)."""
REREAD_SHARE = 2.0
"""What the host spends on a request's arguments after its reader, as a share of the reader's CPU for it: the bridge
encodes them again for their digest and the pool for the server (measured on the shared 2-core machine, 7 MiB
arguments: 27–44 ms read, parsed and measured, 59 ms more in the bridge and the pool; before, that was charged
0.5 ms: 94 such calls cost the host 8.8 CPU-s in 30 s)."""
SEARCH_BURST_SECONDS = 1.0
SEARCH_RATE = 0.01
"""A session's budget for the host CPU its tool searches take: 1 s at once (about 50 ordinary queries of
10–25 ms, or two of the longest), then 1% of a core; 1.3 s over a 30 s execution, plus the one search that
overdraws it."""


class RequestBudget(SharedBucket):
    """A token bucket of host CPU seconds (`tool_tree.budget.SharedBucket`, whose arithmetic it shares with the
    budgets of MCP servers' messages), ``burst`` and ``rate`` by default a sandbox's. Thread-safe: a channel's reader
    and a session's searches charge it. `charge` spends seconds of host CPU and says how long to wait before serving
    more (0 while within the budget)."""

    def __init__(
        self, *, burst: float = BURST_SECONDS, rate: float = RATE, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(burst, rate, clock)


ACCOUNT: ContextVar[RequestBudget | None] = ContextVar("sandbox_request_budget", default=None)
"""The request budget of the sandbox whose request is being served (None: a host caller's work), set by its session
for each call and search (`sandbox.calls.CallServer`), and carried with the call into the worker thread that
validates its arguments: what a search or a validation takes is charged to it too, so the reader waits for it."""
