"""What `tooltree serve` tells a client session whose sandbox started before the tree was regenerated, which keeps
the tree it started with (`agent.serve.sessions`): that it does (`STALE_TREE`), and, after a script whose import of
what the regeneration added failed or a call the bridge refused as the regeneration's (a tool it changed or removed:
`sandbox.tool_changes.StaleSessionRefused`), that the next call renews the session on the regenerated tree
(`RENEWING`, `RENEWING_CHANGED`, `RENEWING_PASSTHROUGH`; then `RENEWED`), with the files saved into serve's workspace
folder, or, without one, none of them (`restored`); and what the session that replaces one whose sandbox ended or was
stopped meanwhile says (`FOLLOWED`), or one that had no sandbox yet (`INSTRUCTIONS_BEFORE`).
"""

from __future__ import annotations

from pathlib import Path

STALE_TREE = (
    "the tree was regenerated from the servers since this session's sandbox started: search_tools and read_file "
    "show the regenerated tree, while this session's scripts keep the tree they started with (a tool added since "
    "cannot be imported here, and a call of one changed or removed since is refused; after a script or call that "
    "meets either, the next call starts a new sandbox session on the regenerated tree, with {restored})"
)
"""Said once to a session whose sandbox started before the tree was regenerated (``restored``: `restored`); serve
renews such a session itself (`RENEWING`, `RENEWING_CHANGED`). Before, it said to reconnect the client, which a model
cannot do, and without a workspace folder it was."""
RENEWING = (
    "[this session's sandbox started before the tree was regenerated, so a server or tool added since cannot be "
    "imported in it: the next call starts a new sandbox session on the regenerated tree, with {restored} and "
    "variables and imports empty; run the script again there]"
)
"""Said after the output of such a session's script that failed to import from ``servers`` (before: only the one
note, at its next call, whatever it was; the import error itself said nothing of why): the next call renews the
session. Before, without a workspace folder, it said to reconnect the client, and the session kept failing until its
client did."""
RENEWING_CHANGED = (
    "[this session's sandbox started before the tree was regenerated, so a tool the regeneration changed or removed "
    "was refused in it: the next call starts a new sandbox session on the regenerated tree, with {restored} and "
    "variables and imports empty; read the stubs of the tools it refused again (their parameters may have changed) "
    "and run the script again there]"
)
"""Said after a script of such a session that had a call refused as the regeneration's (`tool_changed`, saying the
tree was regenerated since the session began): the next call renews the session, as after a failed import
(`RENEWING`). Before, each call of such a tool was refused, saying to reconnect the client, until the client did."""
RENEWING_PASSTHROUGH = (
    "[this session started before the tree was regenerated, which changed or removed this tool: the next call starts "
    "a new session on the regenerated tree (its sandbox with {restored}, variables and imports empty), where this "
    "tool's arguments are checked against its regenerated definition (tools/list shows it now, and its stub {stub})]"
)
"""Said after a passthrough call refused as `RENEWING_CHANGED` says, so the model is told where the definition its next
call is checked against is (before, the client's tool list kept the definitions of serve's start: the stub alone
had it)."""


def restored(folder: Path | None) -> str:
    """What the sandbox of a session renewed on the regenerated tree starts with, in the words of the texts above:
    without a workspace folder, nothing of this one's files (serve saves none), which the model is told before."""
    if folder is not None:
        return f"the files saved into {folder} restored"
    return "an empty /workspace (serve runs without --workspace: this session's files are not kept)"


RENEWS = "tooltree serve starts this client a new session on the regenerated tree at its next call"
"""What a call refused as the regeneration's says to do (before: "reconnect the client", which a model cannot do)."""
RENEWED = (
    "a new sandbox session on the regenerated tree: variables and imports are gone, {files}; the index and signatures "
    "of the instructions this client got when it connected are of the tree before: read a tool's stub for its "
    "parameters now"
)
"""The note of the session that renewed one (`RENEWING`; ``files``: what it kept, `agent.serve.sessions`). Before, it
did not say that the instructions (given once, at the client's handshake) were of the tree before, and a model that
called a tool as they showed it was refused on the regenerated tree's parameters."""
FOLLOWED = (
    "a new sandbox session on the regenerated tree: this session's sandbox {gone}, and its replacement runs the tree "
    "as regenerated, which its tool calls are checked against; variables and imports are gone, {files}; the index and "
    "signatures of the instructions this client got when it connected are of the tree before: read a tool's stub for "
    "its parameters now"
)
"""The note of the session that replaces one opened before the tree was regenerated whose sandbox ended (``docker
kill``, an engine restart) or was stopped when idle (`agent.serve.sessions.SessionRegistry.use`). Before, such a
session started its next sandbox itself: the warm pool's, on the regenerated tree (its stubs: a tool's new parameters,
the tools added), while its bridge checked calls against the manifest of the tree before, refusing a changed tool as
changed since and an added one as not in the manifest, and telling the session it kept the tree it started with."""
INSTRUCTIONS_BEFORE = (
    "this session runs on the tree as regenerated since this client connected: the index and signatures of the "
    "instructions it got when it connected are of the tree before (a tool they name may be gone or take other "
    "parameters): read servers/INDEX.md and a tool's stub for what is there now"
)
"""The note of the session that replaces one opened before the tree was regenerated that had started no sandbox
(`agent.serve.sessions.SessionRegistry.use`), and of one that opened on the regenerated tree before serve refreshed
(`agent.serve.sessions.SessionRegistry._keep_tree`). Before, its first result said nothing: a model that called a tool
as the instructions of its handshake named it (one the regeneration removed, or with the parameters of before) had the
import or the call fail with no word of why."""
