"""A sample MCP server: a CRM in the style of Salesforce, with leads, contacts, accounts and opportunities.

Run: ``python examples/sample_servers/crm.py`` (stdio) or ``... crm.py --http --port 8765`` (Streamable HTTP).
"""

from __future__ import annotations

import json
import zoneinfo
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal

from _common import serve, wire_names
from _crm_data import (
    KEY_PREFIX,
    LEAD_COUNT,
    MAX_TEXT,
    NORTHWIND_OPPORTUNITY_ID,
    CRMError,
    CRMStore,
    LeadStatus,
    ObjectType,
    Record,
    Region,
)
from _vocab import SALES_TEAM
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

server = MCPServer(
    "crm",
    title="Northpeak CRM",
    description="Customer relationship management: leads, contacts, accounts, opportunities, tasks and activities.",
    instructions="Search first (search_records), then read or change one record by id. "
    f"Record ids are 15 characters; the key prefix tells the type ({', '.join(KEY_PREFIX.values())}). "
    f"The Northwind Traders Q3 opportunity is {NORTHWIND_OPPORTUNITY_ID}.",
    version="58.0",
    log_level="WARNING",
)
STORE = CRMStore()
_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


class TaskSummary(BaseModel):
    """An open task attached to a record."""

    id: str
    subject: str
    due_date: date
    priority: Literal["low", "normal", "high"]
    assignee: str


class ActivitySummary(BaseModel):
    """A logged call, email, meeting or note."""

    id: str
    type: Literal["call", "email", "meeting", "note"]
    subject: str
    occurred_at: datetime


class CRMRecord(BaseModel):
    """A CRM record with system information."""

    id: str = Field(description="15-character record id.")
    object_type: ObjectType
    fields: dict[str, Any] = Field(description="Field name to value. Long text fields may be very large.")
    created_date: datetime
    last_modified_date: datetime
    last_modified_by: str
    version: int = Field(
        description="Increases by one on every update; pass it as options.if_version to avoid lost updates."
    )
    open_tasks: list[TaskSummary]
    recent_activities: list[ActivitySummary]


class UpdateOptions(BaseModel):
    """How update_record applies the changes."""

    if_version: int | None = Field(
        default=None, description="Only update if the record's version is still this number (optimistic locking)."
    )
    text_mode: Literal["replace", "append"] = Field(
        default="replace", description="'append' adds to the end of long text fields (description, notes)."
    )
    validate_only: bool = Field(default=False, description="Check the changes without saving them.")


class RecordRef(BaseModel):
    """A pointer to the record a task or activity belongs to."""

    object_type: ObjectType
    id: str = Field(description="Record id, e.g. '0065e000009Q3PR'.")


class DueDate(BaseModel):
    """When a task is due."""

    date: date
    time: Annotated[str | None, Field(pattern=r"^([01]\d|2[0-3]):[0-5]\d$", description="HH:MM, 24-hour.")] = None
    time_zone: str = Field(default="UTC", description="IANA time zone name, e.g. 'America/New_York'.")


class Assignee(BaseModel):
    """The user who should do a task; give user_id or email."""

    user_id: str | None = Field(default=None, description="User id (prefix 005).")
    email: str | None = None


class Reminder(BaseModel):
    """A reminder before a task is due."""

    minutes_before: int = Field(ge=0, le=10_080)
    channel: Literal["email", "push", "sms"] = "email"


class Attendee(BaseModel):
    """A participant of a logged meeting."""

    name: str
    email: str | None = None
    response: Literal["accepted", "declined", "tentative", "needs_action"] = "needs_action"


def _get(object_type: ObjectType, record_id: str) -> Record:
    try:
        return STORE.get(object_type, record_id)
    except CRMError as exc:
        raise ToolError(str(exc)) from None


def _label(record: Record) -> str:
    return str(record.fields.get("name") or record.fields.get("company") or record.id)


_SUMMARY_FIELDS: dict[ObjectType, tuple[str, ...]] = {
    "lead": ("company", "email", "status", "owner"),
    "contact": ("account_name", "title", "email"),
    "account": ("industry", "type", "owner", "region"),
    "opportunity": ("account_name", "amount", "stage", "close_date", "owner"),
}


@server.tool(annotations=_READ_ONLY, structured_output=False)
async def search_records(
    object_type: Annotated[ObjectType, Field(description="Which kind of record to search.")],
    query: Annotated[str, Field(min_length=2, description="Text to find in names, companies and email addresses.")],
    limit: Annotated[int, Field(ge=1, le=200)] = 10,
) -> str:
    """Search one type of CRM record by name, company or email (case-insensitive substring match).

    Returns JSON: `{"total": n, "records": [{"id", "name", ...key fields}]}`, best matches (exact
    name matches) first. Use get_record with an id from the results to read all fields.
    """
    needle = query.lower()
    hits: list[tuple[int, Record]] = []
    for record in STORE.of_type(object_type):
        f = record.fields
        haystack = " ".join(str(f.get(k, "")) for k in ("name", "company", "email", "account_name")).lower()
        if needle in haystack:
            hits.append((0 if str(f.get("name", "")).lower() == needle else 1, record))
    hits.sort(key=lambda hit: hit[0])
    rows = [
        {"id": r.id, "name": _label(r)} | {k: r.fields.get(k) for k in _SUMMARY_FIELDS[object_type]}
        for _, r in hits[:limit]
    ]
    return json.dumps({"total": len(hits), "records": rows}, ensure_ascii=False)


@server.tool(annotations=_READ_ONLY)
async def get_record(
    object_type: ObjectType,
    record_id: Annotated[str, Field(description="15-character record id.")],
) -> CRMRecord:
    """Read one CRM record with all its fields, open tasks and recent activities.

    Fails with a clear error when the id does not exist or belongs to another object type.
    """
    record = _get(object_type, record_id)
    return CRMRecord(
        id=record.id,
        object_type=record.object_type,
        fields=record.fields,
        created_date=record.created,
        last_modified_date=record.modified,
        last_modified_by=record.modified_by.name,
        version=record.version,
        open_tasks=[TaskSummary.model_validate(t) for t in record.tasks],
        recent_activities=[ActivitySummary.model_validate(a) for a in record.activities[-20:]],
    )


@server.tool(annotations=_WRITE, structured_output=False)
async def update_record(
    object_type: ObjectType,
    record_id: Annotated[str, Field(description="15-character record id.")],
    fields: Annotated[
        dict[str, Any],
        Field(
            description=f"Field name to new value. Long text fields (description, notes) take up to {MAX_TEXT} "
            "characters; system fields (id, created, name of a person) are read-only."
        ),
    ],
    options: UpdateOptions | None = None,
) -> str:
    """Update fields of one CRM record.

    Only the given fields change. Values are validated per field (picklists, integers, dates, text
    length); an unknown or read-only field fails the whole update and the error lists the writable
    fields. Returns JSON with the new `version` and the list of `updated_fields`.
    """
    record = _get(object_type, record_id)
    opts = options or UpdateOptions()
    if opts.if_version is not None and opts.if_version != record.version:
        raise ToolError(
            f"Version conflict: {record_id} is at version {record.version}, not {opts.if_version}. Re-read and retry."
        )
    try:
        changed = STORE.update(record, fields, append=opts.text_mode == "append", dry_run=opts.validate_only)
    except CRMError as exc:
        raise ToolError(str(exc)) from None
    return json.dumps(
        {
            "id": record.id,
            "success": True,
            "validate_only": opts.validate_only,
            "version": record.version,
            "updated_fields": changed,
        },
    )


@server.tool(annotations=_READ_ONLY, structured_output=False)
async def list_leads(
    status: LeadStatus | None = None,
    owner: Annotated[str | None, Field(description="Owner's full name, email or user id.")] = None,
    region: Region | None = None,
    created_after: Annotated[date | None, Field(description="Only leads created on or after this date.")] = None,
    limit: Annotated[int, Field(ge=1, le=LEAD_COUNT, description="Maximum rows to return.")] = LEAD_COUNT,
    offset: Annotated[int, Field(ge=0)] = 0,
) -> str:
    """Export leads as JSON rows, optionally filtered by status, owner, region and creation date.

    Without filters this returns every lead — about 10,000 rows, several megabytes of JSON — so
    filter and aggregate inside a script rather than reading the result directly. Each row has
    id, name, company, email, phone, title, status, estimated_value (USD), owner, created, region,
    source and rating. Returns `{"total": n, "offset": k, "leads": [...]}`.
    """
    rep = next((r for r in SALES_TEAM if owner in (r.name, r.email, r.user_id)), None) if owner else None
    if owner and rep is None:
        raise ToolError(f"Unknown owner {owner!r}. Owners: {', '.join(r.name for r in SALES_TEAM)}.")
    after = created_after.isoformat() if created_after else ""
    rows = [
        {k: v for k, v in r.fields.items() if k not in ("first_name", "last_name", "description", "notes")}
        for r in STORE.of_type("lead")
        if (status is None or r.fields["status"] == status)
        and (rep is None or r.fields["owner"] == rep.name)
        and (region is None or r.fields["region"] == region)
        and r.fields["created"] >= after
    ]
    return json.dumps(
        {"total": len(rows), "offset": offset, "leads": rows[offset : offset + limit]}, ensure_ascii=False
    )


@server.tool(annotations=_WRITE, structured_output=False)
async def create_task(
    subject: Annotated[str, Field(min_length=1, max_length=255)],
    related_to: RecordRef,
    due: DueDate,
    assignee: Annotated[Assignee | None, Field(description="Who does it; default: the record's owner.")] = None,
    priority: Literal["low", "normal", "high"] = "normal",
    description: str | None = None,
    reminders: Annotated[list[Reminder], Field(max_length=5)] = [],  # noqa: B006 (pydantic copies defaults)
) -> str:
    """Create a follow-up task on a lead, contact, account or opportunity.

    The task is assigned to the given user (by user id or email) or, by default, to the owner of
    the related record, and shows up in that record's open tasks. Returns JSON with the new task id.
    """
    record = _get(related_to.object_type, related_to.id)
    try:
        zoneinfo.ZoneInfo(due.time_zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"Unknown time zone {due.time_zone!r}; use an IANA name such as 'Europe/Berlin'.") from None
    if assignee is None:
        user = next((r for r in SALES_TEAM if r.name == record.fields.get("owner")), SALES_TEAM[0])
    else:
        found = next((r for r in SALES_TEAM if assignee.user_id == r.user_id or assignee.email == r.email), None)
        if found is None:
            raise ToolError("Assignee not found: give the user_id (prefix 005) or email of an active user.")
        user = found
    task = {
        "id": STORE.new_id("00T"),
        "subject": subject,
        "due_date": due.date.isoformat(),
        "priority": priority,
        "assignee": user.name,
    }
    record.tasks.append(task)
    return json.dumps(
        task
        | {
            "status": "Not Started",
            "related_to": related_to.id,
            "due_time": due.time,
            "time_zone": due.time_zone,
            "reminders": [r.model_dump() for r in reminders],
            "description": description,
        },
        ensure_ascii=False,
    )


@server.tool(annotations=_WRITE, structured_output=False)
@wire_names(sender="from", reply_to="reply-to")
async def log_activity(
    type: Literal["call", "email", "meeting", "note"],
    related_to: RecordRef,
    subject: Annotated[str, Field(min_length=1, max_length=255)],
    body: Annotated[str, Field(description="Full text: call notes, email body or meeting minutes.")] = "",
    sender: Annotated[str | None, Field(description="Sender address, for emails.")] = None,
    to: list[str] = [],  # noqa: B006 (pydantic copies defaults)
    reply_to: Annotated[str | None, Field(description="Reply-To address, for emails.")] = None,
    occurred_at: Annotated[datetime | None, Field(description="When it happened (ISO 8601); default now.")] = None,
    duration_minutes: Annotated[int | None, Field(ge=0, le=1440)] = None,
    attendees: list[Attendee] = [],  # noqa: B006 (pydantic copies defaults)
) -> str:
    """Log a completed call, email, meeting or note against a CRM record.

    Activities appear in the record's history (get_record shows the most recent ones). For an email
    give `from`, `to` and optionally `reply-to`; for a meeting, the attendees and duration.
    """
    record = _get(related_to.object_type, related_to.id)
    if type == "email" and not sender:
        raise ToolError("An email activity needs a 'from' address.")
    when = (occurred_at or datetime.now(UTC)).replace(microsecond=0)
    activity = {"id": STORE.new_id("00U"), "type": type, "subject": subject, "occurred_at": when.isoformat()}
    record.activities.append(activity)
    detail = {
        "body_chars": len(body),
        "from": sender,
        "to": to,
        "reply-to": reply_to,
        "duration_minutes": duration_minutes,
        "attendees": [a.model_dump() for a in attendees],
    }
    return json.dumps(activity | {"related_to": related_to.id} | detail, ensure_ascii=False)


if __name__ == "__main__":
    serve(server)
