"""A sample MCP server: a company document drive (like Google Drive), with one very long meeting transcript.

Run: ``python examples/sample_servers/docs.py`` (stdio) or ``... docs.py --http --port 8765`` (Streamable HTTP).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import date, datetime
from typing import Annotated, Literal

from _common import serve
from _docs_data import TRANSCRIPT_ID, Document, GranteeType, MimeType, Role, build_drive
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

server = MCPServer(
    "docs",
    title="Northpeak Drive",
    description="The company document drive: meeting transcripts, account plans, playbooks, spreadsheets.",
    instructions=f"Find documents with search_documents, then read them with get_document. "
    f"The Q3 pipeline review transcript is {TRANSCRIPT_ID}.",
    version="4.2.0",
    log_level="WARNING",
)
DRIVE = build_drive()


class Person(BaseModel):
    """A user of the drive."""

    display_name: str = Field(description="Full name as shown in the drive.")
    email: str = Field(description="Primary email address.")


class Permission(BaseModel):
    """One entry of a document's sharing list."""

    type: GranteeType = Field(description="Who the permission is granted to.")
    role: Role = Field(description="What the grantee may do.")
    email_address: str | None = Field(default=None, description="Email of the user or group; absent for domain.")
    domain: str | None = Field(default=None, description="The domain, for type 'domain'.")
    display_name: str


class DocumentMetadata(BaseModel):
    """Everything about a document except its content."""

    id: str
    title: str
    mime_type: MimeType
    folder: str = Field(description="Folder path, e.g. '/Sales/Pipeline Reviews'.")
    owner: Person
    last_modifying_user: Person
    created_time: datetime
    modified_time: datetime
    size_bytes: int = Field(description="Size of the exported plain text, in bytes (UTF-8).")
    word_count: int
    version: int = Field(description="Revision number; increases on every edit.")
    starred: bool
    labels: list[str]
    sharing: list[Permission]
    web_view_link: str


class SearchFilters(BaseModel):
    """Optional restrictions for a search; all given filters must match."""

    mime_types: list[MimeType] | None = Field(default=None, description="Only these file types.")
    folder: str | None = Field(default=None, description="Only this folder and its subfolders.")
    owner_email: str | None = Field(default=None, description="Only documents owned by this user.")
    modified_after: date | None = Field(default=None, description="Only documents modified on or after this date.")


def _find(document_id: str) -> Document:
    doc = DRIVE.get(document_id)
    if doc is None:
        raise ToolError(f"Document {document_id!r} not found. Use search_documents or list_documents to find ids.")
    return doc


def _summary(doc: Document) -> dict[str, object]:
    return {
        "id": doc.id,
        "title": doc.title,
        "mime_type": doc.mime_type,
        "folder": doc.folder,
        "owner": doc.owner.email,
        "modified_time": doc.modified.isoformat(),
        "size_bytes": len(doc.content.encode()),
    }


def _in_folder(doc: Document, folder: str, recursive: bool = True) -> bool:
    folder = "/" + folder.strip("/")
    if folder == "/":
        return True
    return doc.folder == folder or (recursive and doc.folder.startswith(folder + "/"))


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode()


def _decode_cursor(cursor: str) -> int:
    try:
        offset = json.loads(base64.urlsafe_b64decode(cursor.encode()))["offset"]
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise ToolError("Invalid cursor: pass the next_cursor value from the previous page unchanged.") from exc
    if not isinstance(offset, int) or offset < 0:
        raise ToolError("Invalid cursor: pass the next_cursor value from the previous page unchanged.")
    return offset


@server.tool(structured_output=False)
async def list_documents(
    folder: Annotated[
        str | None, Field(description="Folder path such as '/Sales' or '/Customers/Acme Logistics'. Default: all.")
    ] = None,
    mime_type: Annotated[MimeType | None, Field(description="Only files of this type.")] = None,
    include_subfolders: bool = True,
    order_by: Literal["modified_desc", "created_desc", "title"] = "modified_desc",
    page_size: Annotated[int, Field(ge=1, le=100, description="Documents per page.")] = 20,
    cursor: Annotated[str | None, Field(description="next_cursor from the previous page; omit for page 1.")] = None,
) -> str:
    """List the documents in the drive, optionally only those in one folder or of one file type.

    Results are paged: when more documents match, the response has a `next_cursor`; pass it back
    as `cursor` to get the next page. Each entry is a summary (id, title, type, folder, owner,
    modification time, size); use get_document for the content or get_document_metadata for
    sharing and revision details.
    """
    docs = [
        d
        for d in DRIVE.values()
        if (folder is None or _in_folder(d, folder, include_subfolders))
        and (mime_type is None or d.mime_type == mime_type)
    ]
    if order_by == "title":
        docs.sort(key=lambda d: d.title.lower())
    else:
        docs.sort(key=lambda d: d.modified if order_by == "modified_desc" else d.created, reverse=True)
    start = _decode_cursor(cursor) if cursor else 0
    page = docs[start : start + page_size]
    more = start + page_size < len(docs)
    return json.dumps(
        {
            "documents": [_summary(d) for d in page],
            "total": len(docs),
            "next_cursor": _encode_cursor(start + page_size) if more else None,
        },
        ensure_ascii=False,
    )


def _score(doc: Document, terms: list[str]) -> float:
    title, body = doc.title.lower(), doc.content.lower()
    score = 0.0
    for term in terms:
        in_title, in_body = title.count(term), body.count(term)
        if not in_title and not in_body:
            return 0.0
        score += 5.0 * in_title + min(in_body, 50) * 0.1
    return score


def _snippet(doc: Document, terms: list[str]) -> str:
    text = doc.content
    pos = min((i for t in terms if (i := text.lower().find(t)) >= 0), default=0)
    start = max(0, pos - 60)
    return ("…" if start else "") + text[start : pos + 140].replace("\n", " ").strip() + "…"


@server.tool(structured_output=False)
async def search_documents(
    query: Annotated[str, Field(min_length=1, description="Words to look for in titles and text, e.g. 'pipeline'.")],
    limit: Annotated[int, Field(ge=1, le=50, description="Maximum number of results.")] = 10,
    filters: SearchFilters | None = None,
) -> str:
    """Full-text search over document titles and contents.

    Every word of the query must appear in the title or the text (case-insensitive). Results are
    ranked with title matches first and include a short snippet around the first match, so you
    can tell meeting notes from transcripts without opening them. Returns JSON with a `results`
    array of {id, title, mime_type, folder, modified_time, score, snippet}.
    """
    terms = re.findall(r"\w+", query.lower())
    if not terms:
        raise ToolError("The query has no searchable words.")
    hits: list[tuple[float, Document]] = []
    for doc in DRIVE.values():
        if filters is not None and not _matches(doc, filters):
            continue
        score = _score(doc, terms)
        if score > 0:
            hits.append((score, doc))
    hits.sort(key=lambda hit: (-hit[0], hit[1].title))
    results = [
        _summary(doc) | {"score": round(score, 2), "snippet": _snippet(doc, terms)} for score, doc in hits[:limit]
    ]
    return json.dumps({"query": query, "total_matches": len(hits), "results": results}, ensure_ascii=False)


def _matches(doc: Document, filters: SearchFilters) -> bool:
    return (
        (filters.mime_types is None or doc.mime_type in filters.mime_types)
        and (filters.folder is None or _in_folder(doc, filters.folder))
        and (filters.owner_email is None or doc.owner.email.lower() == filters.owner_email.lower())
        and (filters.modified_after is None or doc.modified.date() >= filters.modified_after)
    )


@server.tool(structured_output=False)
async def get_document(
    document_id: Annotated[str, Field(description="The document id, e.g. 'doc_k3x9qa'.")],
    format: Annotated[
        Literal["plain_text", "markdown"], Field(description="'markdown' adds the title as a heading.")
    ] = "plain_text",
) -> str:
    """Export the full content of a document as text.

    Documents, slides and PDFs are exported as plain text, spreadsheets as CSV. The whole document
    is returned in one piece, however long: a meeting transcript can be hundreds of kilobytes, so
    prefer reading it inside a script and keeping only what you need.
    """
    doc = _find(document_id)
    if format == "markdown":
        return f"# {doc.title}\n\n{doc.content}"
    return doc.content


@server.tool()
async def get_document_metadata(
    document_id: Annotated[str, Field(description="The document id, e.g. 'doc_k3x9qa'.")],
) -> DocumentMetadata:
    """Get a document's metadata: owner, creation and modification times, size, labels and sharing list.

    The sharing list shows every user, group or domain that can open the document and with which
    role. The content itself is not included; use get_document for that.
    """
    doc = _find(document_id)
    return DocumentMetadata(
        id=doc.id,
        title=doc.title,
        mime_type=doc.mime_type,
        folder=doc.folder,
        owner=Person(display_name=doc.owner.name, email=doc.owner.email),
        last_modifying_user=Person(display_name=doc.last_modified_by.name, email=doc.last_modified_by.email),
        created_time=doc.created,
        modified_time=doc.modified,
        size_bytes=len(doc.content.encode()),
        word_count=len(doc.content.split()),
        version=doc.version,
        starred=doc.starred,
        labels=doc.labels,
        sharing=[
            Permission(
                type=g.kind,
                role=g.role,
                email_address=None if g.kind == "domain" else g.email,
                domain=g.email if g.kind == "domain" else None,
                display_name=g.display_name,
            )
            for g in doc.sharing
        ],
        web_view_link=f"https://drive.northpeak.io/d/{doc.id}/view",
    )


if __name__ == "__main__":
    serve(server)
