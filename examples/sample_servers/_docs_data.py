"""The contents of the sample document drive: ~45 documents in folders, one of them a long meeting transcript."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from _common import short_id
from _transcript import MEETING_DATE, TITLE, meeting_transcript
from _vocab import COMPANIES, COMPETITORS, FIRST_NAMES, LAST_NAMES, PRODUCTS, SALES_TEAM, Deal, Rep, pipeline_deals

TRANSCRIPT_ID = "doc_q3r7tx"
"""The id of the Q3 pipeline review transcript (fixed, so benchmarks can name it)."""

MimeType = Literal[
    "application/vnd.google-apps.document",
    "application/vnd.google-apps.spreadsheet",
    "application/vnd.google-apps.presentation",
    "application/pdf",
    "text/markdown",
    "text/plain",
]
Role = Literal["owner", "writer", "commenter", "reader"]
GranteeType = Literal["user", "group", "domain", "anyone"]

GOOGLE_DOC: MimeType = "application/vnd.google-apps.document"
GOOGLE_SHEET: MimeType = "application/vnd.google-apps.spreadsheet"
GOOGLE_SLIDES: MimeType = "application/vnd.google-apps.presentation"
PDF: MimeType = "application/pdf"
MARKDOWN: MimeType = "text/markdown"
PLAIN: MimeType = "text/plain"

_DOMAIN = "northpeak.io"
_TEAM = {rep.name.split()[0]: rep for rep in SALES_TEAM}


@dataclass
class Grant:
    """One entry of a document's sharing list."""

    email: str
    display_name: str
    role: Role
    kind: GranteeType


@dataclass
class Document:
    """One file of the drive, with its full text."""

    id: str
    title: str
    mime_type: MimeType
    folder: str
    owner: Rep
    created: datetime
    modified: datetime
    last_modified_by: Rep
    content: str
    sharing: list[Grant]
    labels: list[str]
    starred: bool = False
    version: int = 1


def _paragraphs(rng: random.Random, sentences: tuple[str, ...], count: int, **slots: str) -> str:
    picked = [rng.choice(sentences).format(**(_slot_values(rng) | slots)) for _ in range(count)]
    return " ".join(picked)


def _slot_values(rng: random.Random) -> dict[str, str]:
    return {
        "person": f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}",
        "product": rng.choice(PRODUCTS),
        "competitor": rng.choice(COMPETITORS),
        "pct": str(rng.randrange(5, 45)),
        "n": str(rng.randrange(2, 40)),
        "company_any": rng.choice(COMPANIES),
    }


_PLAYBOOK = (
    "Open every discovery call by confirming the agenda and the time the customer has.",
    "Qualify the economic buyer before the second meeting; a champion alone is not a buying process.",
    "When {competitor} is in the deal, lead with connectors and admin controls rather than price.",
    "Discounts above {pct} percent need a deal desk form and the approval of finance.",
    "Log every customer conversation in the CRM within one business day, with next steps and a date.",
    "A mutual action plan should name the owner and the date of every step up to signature.",
    "Multi-year terms are preferred over larger first-year discounts; offer a ramp instead.",
    "Security questionnaires go to the solutions engineering queue with the deal's close date.",
    "Do not promise roadmap items in writing; route such requests to product management.",
    "Forecast categories are owned by the account executive and reviewed weekly by sales operations.",
)
_CALL_NOTES = (
    "{person} joined from their side and asked about the {product} roadmap.",
    "They currently use {competitor} and the contract renews in {n} weeks.",
    "Main pain point: reports take {n} hours to refresh and the finance team does not trust them.",
    "We agreed to a technical deep dive next week with their data team.",
    "Budget is approved for this fiscal year; procurement needs three quotes.",
    "They asked for references in their industry; we offered {company_any}.",
    "Next step: send the proposal and a draft mutual action plan by Friday.",
    "Concern raised about data residency; they need hosting in the EU region.",
    "The team has about {n} analysts today and plans to double that next year.",
)
_GENERIC = (
    "This document is maintained by the team and reviewed every quarter.",
    "Comments and suggestions are welcome; please tag the owner instead of editing directly.",
    "The numbers below are estimates as of the last update and will change.",
    "See the linked spreadsheet for the detailed breakdown by region and segment.",
    "Decisions recorded here were agreed in the weekly leadership meeting.",
    "Open questions are marked TODO and tracked in the project board.",
    "Adoption grew {pct} percent quarter over quarter, driven by {product}.",
    "{person} is the point of contact for questions about this section.",
)


def _forecast_sheet(deals: tuple[Deal, ...]) -> str:
    rows = ["Opportunity,Account,Owner,Stage,Amount,Probability,Close Date,Region"]
    rows += [
        f'"{d.name}",{d.company},{d.owner.name},{d.stage},{d.amount},{d.probability}%,{d.close_date},{d.region}'
        for d in deals
    ]
    return "\n".join(rows) + "\n"


def _sharing(rng: random.Random, owner: Rep) -> list[Grant]:
    grants = [Grant(owner.email, owner.name, "owner", "user")]
    for rep in rng.sample([r for r in SALES_TEAM if r != owner], rng.randrange(0, 4)):
        role: Role = rng.choice(("writer", "commenter", "reader"))
        grants.append(Grant(rep.email, rep.name, role, "user"))
    if rng.random() < 0.5:
        grants.append(Grant(f"sales@{_DOMAIN}", "Sales team", "reader", "group"))
    if rng.random() < 0.2:
        grants.append(Grant(_DOMAIN, "Everyone at Northpeak", "reader", "domain"))
    return grants


def build_drive() -> dict[str, Document]:
    """Every document of the drive by id, the same on every call (seeded)."""
    rng = random.Random(20_260_917)
    deals = pipeline_deals()
    base = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    docs: list[Document] = []

    def add(
        title: str, mime: MimeType, folder: str, owner: Rep, content: str, *, doc_id: str = "", starred: bool = False
    ) -> None:
        created = base + timedelta(minutes=rng.randrange(0, 60 * 24 * 240))
        modified = created + timedelta(minutes=rng.randrange(5, 60 * 24 * 30))
        docs.append(
            Document(
                id=doc_id or short_id(rng, "doc_"),
                title=title,
                mime_type=mime,
                folder=folder,
                owner=owner,
                created=created,
                modified=modified,
                last_modified_by=rng.choice(SALES_TEAM),
                content=content,
                sharing=_sharing(rng, owner),
                labels=[],
                starred=starred,
                version=rng.randrange(1, 40),
            )
        )

    ops, chair = _TEAM["David"], _TEAM["Maria"]
    add(
        f"{TITLE} ({MEETING_DATE})",
        GOOGLE_DOC,
        "/Sales/Pipeline Reviews",
        ops,
        meeting_transcript(deals),
        doc_id=TRANSCRIPT_ID,
        starred=True,
    )
    transcript = docs[-1]
    transcript.created = datetime(2026, 9, 17, 19, 42, tzinfo=UTC)
    transcript.modified = datetime(2026, 9, 18, 8, 15, tzinfo=UTC)
    transcript.labels = ["meeting-notes", "forecast", "confidential"]
    add("Q3 Pipeline Review — Forecast Snapshot", GOOGLE_SHEET, "/Sales/Pipeline Reviews", ops, _forecast_sheet(deals))
    add(
        "Q3 Pipeline Review — Slides",
        GOOGLE_SLIDES,
        "/Sales/Pipeline Reviews",
        chair,
        "Slide 1: Q3 forecast overview\nSlide 2: Regional roll-up\nSlide 3: Top 20 deals\nSlide 4: Risks\n"
        "Slide 5: Renewals\nSlide 6: Pipeline generation\n",
    )
    add(
        "Q2 Pipeline Review — Notes",
        GOOGLE_DOC,
        "/Sales/Pipeline Reviews",
        ops,
        "Summary notes only (no recording). " + _paragraphs(rng, _PLAYBOOK, 8),
    )
    add(
        "Pipeline Review — Meeting Template",
        GOOGLE_DOC,
        "/Sales/Templates",
        ops,
        "Agenda: 1. Regional roll-up 2. Deal reviews, largest first 3. Renewals 4. Pipeline generation 5. Actions.\n",
    )
    add("Sales Playbook 2026", GOOGLE_DOC, "/Sales/Enablement", chair, _paragraphs(rng, _PLAYBOOK, 60))
    add("Pricing and Discount Guidelines", PDF, "/Sales/Enablement", _TEAM["Sam"], _paragraphs(rng, _PLAYBOOK, 25))
    add("Discovery Call Checklist", MARKDOWN, "/Sales/Enablement", _TEAM["Lena"], _paragraphs(rng, _PLAYBOOK, 12))
    add(
        "Competitive Battlecard — Zentrix",
        GOOGLE_DOC,
        "/Sales/Enablement",
        _TEAM["Lena"],
        _paragraphs(rng, _PLAYBOOK, 15, competitor="Zentrix"),
    )
    for deal in deals[:12]:
        intro = f"Opportunity: {deal.name}. Target close {deal.close_date}. "
        add(
            f"Account Plan — {deal.company}",
            GOOGLE_DOC,
            f"/Customers/{deal.company}",
            deal.owner,
            intro + _paragraphs(rng, _CALL_NOTES, 20),
        )
    for deal in deals[12:30]:
        day = rng.randrange(1, 29)
        add(
            f"Call Notes — {deal.company} (2026-08-{day:02d})",
            GOOGLE_DOC,
            f"/Customers/{deal.company}",
            deal.owner,
            _paragraphs(rng, _CALL_NOTES, rng.randrange(5, 14)),
        )
    others: tuple[tuple[str, str, MimeType, str], ...] = (
        ("Q4 Campaign Brief", "/Marketing", GOOGLE_DOC, "Emma"),
        ("Webinar Registrations — September", "/Marketing", GOOGLE_SHEET, "Emma"),
        ("Brand Guidelines", "/Marketing", PDF, "Emma"),
        ("FY27 Budget Draft", "/Finance", GOOGLE_SHEET, "Sam"),
        ("Commission Plan FY26", "/Finance", PDF, "Sam"),
        ("Security Questionnaire — Standard Answers", "/Security", GOOGLE_DOC, "Lena"),
        ("Architecture Overview", "/Engineering", MARKDOWN, "Lena"),
        ("Release Notes 4.2", "/Engineering", PLAIN, "Lena"),
        ("Customer Success Playbook", "/Customer Success", GOOGLE_DOC, "Raj"),
        ("Renewals Tracker Q3", "/Customer Success", GOOGLE_SHEET, "Raj"),
        ("New Hire Onboarding — Sales", "/People", GOOGLE_DOC, "Maria"),
        ("Territory Plan 2027 (draft)", "/Sales", GOOGLE_DOC, "David"),
    )
    for title, folder, mime, owner in others:
        add(title, mime, folder, _TEAM[owner], _paragraphs(rng, _GENERIC, rng.randrange(6, 30)))
    return {doc.id: doc for doc in docs}
