"""The in-memory state of the sample CRM: accounts, contacts, opportunities, 10,000 leads, tasks and activities.

Generated once at start from a seeded random generator, then changed by the write tools.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal

from _common import salesforce_id
from _vocab import (
    COMPANIES,
    FIRST_NAMES,
    INDUSTRIES,
    JOB_TITLES,
    LAST_NAMES,
    REGIONS,
    SALES_TEAM,
    STAGES,
    Rep,
    pipeline_deals,
)

ObjectType = Literal["lead", "contact", "account", "opportunity"]
LeadStatus = Literal["new", "working", "nurturing", "qualified", "unqualified", "converted"]
Region = Literal["NA-East", "NA-West", "EMEA", "APAC", "LATAM"]

KEY_PREFIX: dict[ObjectType, str] = {"lead": "00Q", "contact": "003", "account": "001", "opportunity": "006"}
LEAD_COUNT = 10_000
MAX_TEXT = 500_000
"""Long text fields (description, notes) hold up to this many characters."""

NORTHWIND_ACCOUNT_ID = "0015e000003NWTR"
NORTHWIND_OPPORTUNITY_ID = "0065e000009Q3PR"
"""Fixed ids of the Northwind Traders account and its Q3 opportunity, which the pipeline review discusses."""

_LEAD_STATUSES: tuple[LeadStatus, ...] = ("new", "working", "nurturing", "qualified", "unqualified", "converted")
_LEAD_SOURCES = ("Web", "Webinar", "Trade Show", "Partner Referral", "Cold Call", "Paid Search", "Content Download")
_NOW = datetime(2026, 9, 18, 9, 0, tzinfo=UTC)
_PREFIX_WORDS = (
    "Blue", "Bright", "Cedar", "Clear", "Crimson", "Delta", "Eagle", "Echo", "Falcon", "Golden", "Granite", "Harbor",
    "Iron", "Jade", "Keystone", "Lake", "Maple", "North", "Oak", "Pacific", "Peak", "Pine", "Prairie", "Quartz",
    "Red", "River", "Silver", "Stone", "Summit", "Sun", "True", "Union", "Valley", "West", "Willow", "Zenith",
)  # fmt: skip
_SUFFIX_WORDS = (
    "Analytics", "Logistics", "Health", "Foods", "Systems", "Labs", "Capital", "Energy", "Media", "Robotics",
    "Outfitters", "Dental", "Legal", "Freight", "Software", "Pharma", "Hotels", "Motors", "Textiles", "Networks",
)  # fmt: skip
_COMPANY_FORMS = ("Inc.", "LLC", "Ltd", "GmbH", "S.A.", "Co.", "Group", "")


class CRMError(Exception):
    """A request the CRM refuses; the message is written for the caller."""


@dataclass
class Record:
    """One CRM record: its fields plus system information, tasks and activities."""

    id: str
    object_type: ObjectType
    fields: dict[str, Any]
    created: datetime
    modified: datetime
    modified_by: Rep
    version: int = 1
    tasks: list[dict[str, Any]] = field(default_factory=list)
    activities: list[dict[str, Any]] = field(default_factory=list)


def _text(limit: int = MAX_TEXT) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            raise CRMError("expected a string or null")
        if value is not None and len(value) > limit:
            raise CRMError(f"text is {len(value)} characters, the limit is {limit}")
        return value

    return check


def _integer(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CRMError("expected an integer")
    if value < 0:
        raise CRMError("expected a non-negative integer")
    return value


def _choice(options: tuple[str, ...]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value not in options:
            raise CRMError(f"expected one of {list(options)}")
        return value

    return check


def _iso_date(value: Any) -> Any:
    try:
        return date.fromisoformat(value).isoformat()
    except (TypeError, ValueError) as exc:
        raise CRMError("expected a date as YYYY-MM-DD") from exc


def _owner(value: Any) -> Any:
    if not any(value in (rep.name, rep.user_id, rep.email) for rep in SALES_TEAM):
        raise CRMError(f"unknown user; use one of {[rep.name for rep in SALES_TEAM]}")
    return next(rep.name for rep in SALES_TEAM if value in (rep.name, rep.user_id, rep.email))


_SHORT = _text(255)
WRITABLE: dict[ObjectType, dict[str, Callable[[Any], Any]]] = {
    "lead": {
        "first_name": _SHORT, "last_name": _SHORT, "company": _SHORT, "email": _SHORT, "phone": _SHORT,
        "title": _SHORT, "status": _choice(_LEAD_STATUSES), "estimated_value": _integer, "owner": _owner,
        "region": _choice(REGIONS), "source": _choice(_LEAD_SOURCES), "description": _text(), "notes": _text(),
    },
    "contact": {
        "first_name": _SHORT, "last_name": _SHORT, "title": _SHORT, "email": _SHORT, "phone": _SHORT,
        "owner": _owner, "description": _text(), "notes": _text(),
    },
    "account": {
        "name": _SHORT, "industry": _choice(INDUSTRIES), "website": _SHORT, "phone": _SHORT, "owner": _owner,
        "annual_revenue": _integer, "employees": _integer, "type": _choice(("Prospect", "Customer", "Partner")),
        "description": _text(), "notes": _text(),
    },
    "opportunity": {
        "name": _SHORT, "amount": _integer, "stage": _choice(STAGES), "close_date": _iso_date, "owner": _owner,
        "next_step": _SHORT, "forecast_category": _choice(("Pipeline", "Best Case", "Commit", "Closed", "Omitted")),
        "probability": _integer, "description": _text(), "notes": _text(),
    },
}  # fmt: skip
"""The fields update_record may change, per object type, with their validators."""


def _domain(company: str) -> str:
    return "".join(ch for ch in company.lower() if ch.isalnum())[:24] + ".com"


def _phone(rng: random.Random) -> str:
    return f"+1-{rng.randrange(200, 999)}-{rng.randrange(200, 999)}-{rng.randrange(1000, 9999)}"


class CRMStore:
    """All records by id, plus the lookups the tools need."""

    def __init__(self) -> None:
        self.records: dict[str, Record] = {}
        self._rng = random.Random(7_001)
        self._build()

    def _add(self, object_type: ObjectType, fields: dict[str, Any], record_id: str = "") -> Record:
        rng = self._rng
        record_id = record_id or salesforce_id(rng, KEY_PREFIX[object_type])
        created = _NOW - timedelta(minutes=rng.randrange(60, 60 * 24 * 700))
        modified = created + timedelta(minutes=int((_NOW - created).total_seconds() / 60 * rng.random()))
        record = Record(record_id, object_type, {"id": record_id, **fields}, created, modified, rng.choice(SALES_TEAM))
        self.records[record_id] = record
        return record

    def _build(self) -> None:
        rng = self._rng
        accounts: dict[str, Record] = {}
        for company in COMPANIES:
            owner = rng.choice(SALES_TEAM)
            fixed = NORTHWIND_ACCOUNT_ID if company == "Northwind Traders" else ""
            accounts[company] = self._add(
                "account",
                {
                    "name": company,
                    "type": rng.choice(("Prospect", "Customer", "Customer", "Partner")),
                    "industry": rng.choice(INDUSTRIES),
                    "website": f"https://www.{_domain(company)}",
                    "phone": _phone(rng),
                    "annual_revenue": rng.randrange(5, 5000) * 1_000_000,
                    "employees": rng.randrange(40, 60_000),
                    "owner": owner.name,
                    "region": owner.region,
                    "billing_address": {
                        "street": f"{rng.randrange(1, 9999)} {rng.choice(_PREFIX_WORDS)} Street",
                        "city": rng.choice(("Boston", "Austin", "Seattle", "London", "Berlin", "Tokyo", "São Paulo")),
                        "postal_code": f"{rng.randrange(10000, 99999)}",
                        "country": rng.choice(("US", "US", "GB", "DE", "JP", "BR")),
                    },
                    "description": "",
                    "notes": "",
                },
                fixed,
            )
            for _ in range(rng.randrange(3, 9)):
                first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
                self._add(
                    "contact",
                    {
                        "first_name": first,
                        "last_name": last,
                        "name": f"{first} {last}",
                        "title": rng.choice(JOB_TITLES),
                        "email": f"{first}.{last}@{_domain(company)}".lower().replace("'", ""),
                        "phone": _phone(rng),
                        "account_id": accounts[company].id,
                        "account_name": company,
                        "owner": owner.name,
                        "description": "",
                        "notes": "",
                    },
                )
        for deal in pipeline_deals():
            fixed = NORTHWIND_OPPORTUNITY_ID if deal.company == "Northwind Traders" else ""
            self._add(
                "opportunity",
                {
                    "name": deal.name,
                    "account_id": accounts[deal.company].id,
                    "account_name": deal.company,
                    "amount": deal.amount,
                    "stage": deal.stage,
                    "probability": deal.probability,
                    "close_date": deal.close_date,
                    "owner": deal.owner.name,
                    "forecast_category": "Closed" if deal.stage.startswith("Closed") else "Pipeline",
                    "next_step": "",
                    "primary_product": deal.product,
                    "main_competitor": deal.competitor,
                    "region": deal.region,
                    "description": "",
                    "notes": "",
                },
                fixed,
            )
        self._build_leads()

    def _build_leads(self) -> None:
        rng = self._rng
        owners = [rep.name for rep in SALES_TEAM]
        for _ in range(LEAD_COUNT):
            first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
            company = f"{rng.choice(_PREFIX_WORDS)} {rng.choice(_SUFFIX_WORDS)} {rng.choice(_COMPANY_FORMS)}".strip()
            record_id = salesforce_id(rng, "00Q")
            created = _NOW - timedelta(days=rng.randrange(1, 720))
            self.records[record_id] = Record(
                record_id,
                "lead",
                {
                    "id": record_id,
                    "name": f"{first} {last}",
                    "first_name": first,
                    "last_name": last,
                    "company": company,
                    "email": f"{first[0]}{last}@{_domain(company)}".lower().replace("'", ""),
                    "phone": _phone(rng),
                    "title": rng.choice(JOB_TITLES),
                    "status": rng.choices(_LEAD_STATUSES, weights=(30, 25, 15, 12, 10, 8))[0],
                    "estimated_value": int(rng.lognormvariate(10.2, 0.9)) // 100 * 100,
                    "owner": rng.choice(owners),
                    "created": created.date().isoformat(),
                    "region": rng.choice(REGIONS),
                    "source": rng.choice(_LEAD_SOURCES),
                    "rating": rng.choice(("Hot", "Warm", "Cold")),
                    "description": "",
                    "notes": "",
                },
                created,
                created,
                SALES_TEAM[0],
            )

    def get(self, object_type: ObjectType, record_id: str) -> Record:
        """The record with this id and type.

        Raises:
            CRMError: no record has this id, or it is of another type; the message says what to do.
        """
        record = self.records.get(record_id)
        if record is None:
            raise CRMError(f"No {object_type} with id {record_id!r}. Use search_records to find the right id.")
        if record.object_type != object_type:
            raise CRMError(f"Record {record_id!r} has object type {record.object_type!r}, not {object_type!r}.")
        return record

    def of_type(self, object_type: ObjectType) -> list[Record]:
        """Every record of one type, in creation order."""
        return [r for r in self.records.values() if r.object_type == object_type]

    def update(self, record: Record, changes: dict[str, Any], *, append: bool, dry_run: bool) -> list[str]:
        """Validate ``changes`` against the writable fields and apply them unless ``dry_run``.

        Raises:
            CRMError: an unknown or read-only field, or a value of the wrong type.
        """
        allowed = WRITABLE[record.object_type]
        if not changes:
            raise CRMError("No fields to update.")
        clean: dict[str, Any] = {}
        for name, value in changes.items():
            if name not in allowed:
                raise CRMError(
                    f"Field {name!r} does not exist or is read-only on {record.object_type}. "
                    f"Writable fields: {', '.join(sorted(allowed))}."
                )
            try:
                clean[name] = allowed[name](value)
            except CRMError as exc:
                raise CRMError(f"Invalid value for {record.object_type}.{name}: {exc}") from None
            if append and isinstance(clean[name], str) and name in ("description", "notes") and record.fields[name]:
                clean[name] = record.fields[name] + "\n\n" + clean[name]
                if len(clean[name]) > MAX_TEXT:
                    raise CRMError(f"Appending would make {name} longer than {MAX_TEXT} characters.")
        if not dry_run:
            record.fields.update(clean)
            if "first_name" in clean or "last_name" in clean:
                record.fields["name"] = f"{record.fields['first_name']} {record.fields['last_name']}"
            record.version += 1
            record.modified = datetime.now(UTC).replace(microsecond=0)
        return sorted(clean)

    def new_id(self, key_prefix: str) -> str:
        """A fresh id for a task (00T) or an activity (00U)."""
        return salesforce_id(self._rng, key_prefix)
