"""The tasks of the agent benchmarks, each with a scripted trajectory per mode and a check of the outcome.

Used by ``agent_replication.py`` (scripted trajectories against the fake Messages API) and
``eval_live.py`` (the same tasks against the real API). A trajectory is what a model would do in
that mode, written as replies of `agent.testing.FakeMessagesAPI`; replies that depend on what the
tools returned are functions of the request the loop sent (e.g. ``direct`` mode has to repeat the
whole transcript it received as the input of ``crm__update_record``).

- ``drive_to_crm``: copy the ~200 KB Q3 pipeline review transcript (``doc_q3r7tx``) into the
  description of opportunity ``0065e000009Q3PR`` (Anthropic's Drive → Salesforce example).
- ``leads``: among the 10,000 leads, the five hot qualified EMEA leads worth most, and the total.

``filtered`` runs the direct trajectory with only the tools the ``local`` pre-filter admits, and
``code+prefilter`` the ``code+pinned`` one with what the pre-filter admits in the prompt instead of
pinned signatures (no tool named by hand): the prompt shows some admitted tools as a signature and
others as one line or a name only, so that trajectory first reads the stub of each tool its script
calls whose signature the prompt does not show (`after_reading_missing_stubs`). Each task also has
``+pinned`` variants: the same task for a user who keeps the task's tools pinned
(``Agent(pinned=...)``), so ``code`` mode has their signatures in the prompt and ``tool-search``
does not defer them. ``direct`` loads every
tool anyway and has no such variant. ``code+search`` (Drive → CRM) finds the two signatures with
``search_tools`` instead of reading the stubs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import ROOT

from agent.testing import Reply, reply, server_tool_use, tool_search_result, tool_use
from sandbox.host import Runtime

SEARCH = "tool_search_tool_bm25"
DOC_ID = "doc_q3r7tx"
OPPORTUNITY = "0065e000009Q3PR"
SERVERS = ("docs", "crm", "media")


def sample_config(folder: Path) -> Path:
    """A config starting the sample servers with this interpreter (as examples/tooltree.yaml, absolute paths)."""
    lines = ["servers:"]
    for name in SERVERS:
        script = ROOT / "examples" / "sample_servers" / f"{name}.py"
        lines += [f"  {name}:", f"    command: {json.dumps(sys.executable)}", f"    args: [{json.dumps(str(script))}]"]
    lines += ["    exclude: [fail, rendezvous]", "sandbox:", "  timeout: 60"]
    path = folder / "tooltree.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _with_root_on_path() -> dict[str, str]:
    """The environment with the checkout first on ``PYTHONPATH`` (``-m tooltree_cli.main`` from another folder)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def generate(config: Path | None, out: Path, *, snapshots: Path | None = None, embeddings: str = "auto") -> Path:
    """Run ``generate-tree`` (from live servers, or offline from snapshot files) into ``out``."""
    source = ["--from-snapshot", str(snapshots)] if snapshots is not None else ["--config", str(config)]
    argv = [sys.executable, "-m", "tooltree_cli.main", "generate-tree", *source, "--out", str(out)]
    argv += ["--embeddings", embeddings]
    # From an empty folder: a ./tooltree.yaml (a user's in the checkout) would narrow --from-snapshot to its servers.
    with tempfile.TemporaryDirectory(prefix="tooltree-bench-cwd-") as cwd:
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, check=False, env=_with_root_on_path())
    if proc.returncode != 0:
        sys.exit(f"generate-tree failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return out


def last_tool_text(body: dict[str, Any]) -> str:
    """The text of the last tool result in a request (what the model just read)."""
    for block in reversed(body["messages"][-1]["content"]):
        if block.get("type") == "tool_result":
            content = block["content"]
            return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    raise ValueError("the request has no tool result")


def _system_text(body: dict[str, Any]) -> str:
    system = body.get("system") or ""
    return system if isinstance(system, str) else "".join(b.get("text", "") for b in system)


def _last_tools_called(body: dict[str, Any]) -> list[str]:
    """The names of the tools the model called in its last reply (what the tool results answer)."""
    replies = [m for m in body["messages"] if m["role"] == "assistant"]
    content = replies[-1]["content"] if replies else []
    return [b["name"] for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]


def after_reading_missing_stubs(
    script: str, stubs: dict[str, str], answer: Callable[[dict[str, Any]], dict[str, Any]]
) -> list[Reply]:
    """A trajectory that runs ``script`` as soon as the system prompt shows the signature of every
    tool it calls (``stubs``: function name → stub path), and otherwise first reads the stubs of
    those shown without one (as a line or a name, or not at all), as a model would."""

    def first(body: dict[str, Any]) -> dict[str, Any]:
        system = _system_text(body)
        missing = [path for function, path in stubs.items() if f"def {function}(" not in system]
        if not missing:
            return reply(tool_use("execute_python", {"code": script}))
        return reply(
            "The prompt shows no signature for these tools; I'll read their stubs.",
            *(tool_use("read_file", {"path": path}) for path in missing),
        )

    def second(body: dict[str, Any]) -> dict[str, Any]:
        if "execute_python" in _last_tools_called(body):
            return answer(body)
        return reply(tool_use("execute_python", {"code": script}))

    return [first, second, answer]  # the last is left over when the script ran first


PINNED = "+pinned"
"""Suffix of a variant run with the task's ``pinned`` tools (``code+pinned``, ``tool-search+pinned``)."""
SEARCHED = "+search"
"""Suffix of a variant whose model finds the signatures with ``search_tools`` instead of reading stubs."""
PREFILTERED = "+prefilter"
"""Suffix of a code-mode variant run with the ``local`` pre-filter: the signatures it admits are in the prompt."""


def split_variant(variant: str) -> tuple[str, bool]:
    """``"code+pinned"`` → ``("code", True)``; ``"direct"``, ``"code+search"`` → ``(mode, False)``."""
    mode, plus, rest = variant.partition("+")
    if plus and plus + rest not in (PINNED, SEARCHED, PREFILTERED):
        raise ValueError(
            f"unknown variant {variant!r}: a mode, optionally followed by {PINNED!r}, {SEARCHED!r} or {PREFILTERED!r}"
        )
    return mode, plus + rest == PINNED


def prefilter_of(variant: str) -> str | None:
    """The pre-filter a variant runs with: ``local`` for ``filtered`` and ``+prefilter`` variants."""
    return "local" if variant == "filtered" or variant.endswith(PREFILTERED) else None


@dataclass(frozen=True)
class Task:
    name: str
    prompt: str
    trajectories: dict[str, list[Reply]]
    """Scripted replies per variant: a mode, or a mode + ``PINNED``."""
    check: Callable[[Runtime, str], str | None]
    """``(runtime, answer) -> None`` when the task was done, else what is wrong."""
    pinned: tuple[str, ...] = ()
    """The tools a user who does this task routinely keeps pinned (their signatures are in the prompt)."""

    def pins(self, variant: str) -> tuple[str, ...]:
        """The pinned tools of a variant's run."""
        return self.pinned if split_variant(variant)[1] else ()


# ---- drive_to_crm ----------------------------------------------------------------------------------------------------

COPY_SCRIPT = f"""\
from servers.docs import get_document
from servers.crm import update_record
text = get_document(document_id="{DOC_ID}").text
done = update_record(object_type="opportunity", record_id="{OPPORTUNITY}", fields={{"description": text}})
print(len(text), "characters copied;", done.json())
"""


def _write_description(body: dict[str, Any]) -> dict[str, Any]:
    fields = {"description": last_tool_text(body)}
    return tool_use("crm__update_record", {"object_type": "opportunity", "record_id": OPPORTUNITY, "fields": fields})


def _drive_to_crm_done(body: dict[str, Any]) -> dict[str, Any]:
    return reply(f"Done: the Q3 pipeline review transcript is now the description of opportunity {OPPORTUNITY}.")


def _check_drive_to_crm(runtime: Runtime, answer: str) -> str | None:
    doc = runtime.call_tool("docs", "get_document", {"document_id": DOC_ID})
    record = runtime.call_tool("crm", "get_record", {"object_type": "opportunity", "record_id": OPPORTUNITY})
    transcript = "".join(b.get("text", "") for b in doc["content"])
    description = record.get("structuredContent", {}).get("fields", {}).get("description")
    if description != transcript:
        return f"the description holds {len(description or '')} characters, not the {len(transcript)} of the transcript"
    return None


DRIVE_TO_CRM = Task(
    name="drive_to_crm",
    prompt=(
        f"Copy the full text of the Q3 pipeline review meeting transcript (document {DOC_ID} in the drive) into the "
        f"description field of the CRM opportunity {OPPORTUNITY}."
    ),
    trajectories={
        "code": [
            reply(
                "I'll read the two stubs I need.",
                tool_use("read_file", {"path": "servers/docs/get_document.py"}),
                tool_use("read_file", {"path": "servers/crm/update_record.py"}),
            ),
            reply(tool_use("execute_python", {"code": COPY_SCRIPT})),
            _drive_to_crm_done,
        ],
        "code+search": [  # the signatures from search_tools (detail "summary") instead of the stubs
            reply(
                tool_use("search_tools", {"query": "export a document as text", "limit": 2}),
                tool_use("search_tools", {"query": "update fields of a CRM record", "limit": 2}),
            ),
            reply(tool_use("execute_python", {"code": COPY_SCRIPT})),
            _drive_to_crm_done,
        ],
        "code+pinned": [  # the signatures are in the prompt: straight to the script
            reply(tool_use("execute_python", {"code": COPY_SCRIPT})),
            _drive_to_crm_done,
        ],
        "code+prefilter": after_reading_missing_stubs(  # straight to the script when both signatures are shown
            COPY_SCRIPT,
            {"get_document": "servers/docs/get_document.py", "update_record": "servers/crm/update_record.py"},
            _drive_to_crm_done,
        ),
        "direct": [
            reply(tool_use("docs__get_document", {"document_id": DOC_ID})),
            lambda body: reply(_write_description(body)),
            _drive_to_crm_done,
        ],
        "tool-search": [
            reply(
                server_tool_use(SEARCH, {"query": "get document content from the drive"}),
                tool_search_result(["docs__get_document"]),
                tool_use("docs__get_document", {"document_id": DOC_ID}),
            ),
            lambda body: reply(
                server_tool_use(SEARCH, {"query": "update fields of a CRM opportunity record"}),
                tool_search_result(["crm__update_record"]),
                _write_description(body),
            ),
            _drive_to_crm_done,
        ],
        "tool-search+pinned": [  # pinned tools are not deferred: no search needed
            reply(tool_use("docs__get_document", {"document_id": DOC_ID})),
            lambda body: reply(_write_description(body)),
            _drive_to_crm_done,
        ],
        "filtered": [  # the admitted tools are loaded: the same calls as direct
            reply(tool_use("docs__get_document", {"document_id": DOC_ID})),
            lambda body: reply(_write_description(body)),
            _drive_to_crm_done,
        ],
    },
    check=_check_drive_to_crm,
    pinned=("docs.get_document", "crm.update_record"),
)

# ---- leads -----------------------------------------------------------------------------------------------------------

LEADS_SCRIPT = """\
from servers.crm import list_leads
leads = list_leads().json()["leads"]
hot = [r for r in leads if r["status"] == "qualified" and r["region"] == "EMEA" and r["rating"] == "Hot"]
hot.sort(key=lambda r: r["estimated_value"], reverse=True)
for r in hot[:5]:
    print(r["company"], r["estimated_value"])
print("total", sum(r["estimated_value"] for r in hot), "over", len(hot), "hot leads, from", len(leads), "leads")
"""


def top_hot_leads(rows: list[dict[str, Any]]) -> tuple[list[tuple[str, int]], int]:
    """The five hot qualified EMEA leads worth most, and the total value of all of them."""
    hot = [r for r in rows if r["status"] == "qualified" and r["region"] == "EMEA" and r["rating"] == "Hot"]
    hot.sort(key=lambda r: r["estimated_value"], reverse=True)
    return [(r["company"], r["estimated_value"]) for r in hot[:5]], sum(r["estimated_value"] for r in hot)


def _leads_answer(top: list[tuple[str, int]], total: int) -> dict[str, Any]:
    lines = "\n".join(f"{n}. {company} — ${value:,}" for n, (company, value) in enumerate(top, 1))
    return reply(f"The five hot qualified EMEA leads worth most:\n{lines}\nTotal of all of them: ${total:,}.")


def _answer_from_rows(body: dict[str, Any]) -> dict[str, Any]:
    return _leads_answer(*top_hot_leads(json.loads(last_tool_text(body))["leads"]))


def _answer_from_printout(body: dict[str, Any]) -> dict[str, Any]:
    lines = last_tool_text(body).splitlines()
    top = [(line.rsplit(" ", 1)[0], int(line.rsplit(" ", 1)[1])) for line in lines[:5]]
    return _leads_answer(top, int(lines[5].split()[1]))


def _check_leads(runtime: Runtime, answer: str) -> str | None:
    rows = json.loads(runtime.call_tool("crm", "list_leads", {})["content"][0]["text"])["leads"]
    top, total = top_hot_leads(rows)
    missing = [company for company, _ in top if company not in answer]
    if missing or f"{total:,}" not in answer:
        return f"the answer misses {missing or 'the total'}"
    return None


LEADS_FILTER = {"status": "qualified", "region": "EMEA"}
LEADS = Task(
    name="leads",
    prompt=(
        "Among our leads, find the five Hot-rated qualified leads in the EMEA region with the highest estimated "
        "value. List company and value for each, and give the total estimated value of all Hot qualified EMEA leads."
    ),
    trajectories={
        "code": [
            reply(tool_use("read_file", {"path": "servers/crm/list_leads.py"})),
            reply(tool_use("execute_python", {"code": LEADS_SCRIPT})),
            _answer_from_printout,
        ],
        "code+pinned": [
            reply(tool_use("execute_python", {"code": LEADS_SCRIPT})),
            _answer_from_printout,
        ],
        "code+prefilter": after_reading_missing_stubs(
            LEADS_SCRIPT, {"list_leads": "servers/crm/list_leads.py"}, _answer_from_printout
        ),
        "direct": [
            reply(tool_use("crm__list_leads", LEADS_FILTER)),
            _answer_from_rows,
        ],
        "tool-search": [
            reply(
                server_tool_use(SEARCH, {"query": "list leads filtered by status and region"}),
                tool_search_result(["crm__list_leads"]),
                tool_use("crm__list_leads", LEADS_FILTER),
            ),
            _answer_from_rows,
        ],
        "tool-search+pinned": [
            reply(tool_use("crm__list_leads", LEADS_FILTER)),
            _answer_from_rows,
        ],
        "filtered": [
            reply(tool_use("crm__list_leads", LEADS_FILTER)),
            _answer_from_rows,
        ],
    },
    check=_check_leads,
    pinned=("crm.list_leads",),
)

TASKS = {t.name: t for t in (DRIVE_TO_CRM, LEADS)}
