"""Names shared by the sample servers, so the drive and the CRM talk about the same people and companies."""

from __future__ import annotations

import random
from typing import NamedTuple


def _split(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(";"))


class Rep(NamedTuple):
    """A member of the sales organisation: CRM record owner and meeting speaker."""

    user_id: str
    name: str
    title: str
    email: str
    region: str


SALES_TEAM: tuple[Rep, ...] = (
    Rep("0055e000001MCHN", "Maria Chen", "VP Sales", "maria.chen@northpeak.io", "NA-West"),
    Rep("0055e000001DOKF", "David Okafor", "Director, Sales Operations", "david.okafor@northpeak.io", "NA-East"),
    Rep("0055e000001PRMN", "Priya Raman", "Enterprise Account Executive", "priya.raman@northpeak.io", "NA-West"),
    Rep("0055e000001TBCK", "Tom Becker", "Mid-Market Account Executive", "tom.becker@northpeak.io", "NA-East"),
    Rep("0055e000001LFSH", "Lena Fischer", "Solutions Engineer", "lena.fischer@northpeak.io", "EMEA"),
    Rep("0055e000001SWHT", "Sam Whitaker", "Finance Business Partner", "sam.whitaker@northpeak.io", "NA-East"),
    Rep("0055e000001AMRN", "Ana Moreno", "Account Executive, LATAM", "ana.moreno@northpeak.io", "LATAM"),
    Rep("0055e000001KTNK", "Kenji Tanaka", "Account Executive, APAC", "kenji.tanaka@northpeak.io", "APAC"),
    Rep("0055e000001JOBR", "Julia O'Brien", "Enterprise Account Executive", "julia.obrien@northpeak.io", "EMEA"),
    Rep("0055e000001RSNG", "Raj Singh", "Customer Success Manager", "raj.singh@northpeak.io", "NA-West"),
    Rep("0055e000001EDVS", "Emma Davies", "Demand Generation Lead", "emma.davies@northpeak.io", "EMEA"),
    Rep(
        "0055e000001MKWL", "Marcus Kowalski", "Account Executive, Commercial", "marcus.kowalski@northpeak.io", "NA-East"
    ),
)

REGIONS = _split("NA-East; NA-West; EMEA; APAC; LATAM")

COMPANIES = _split(
    "Northwind Traders; Acme Logistics; Globex Manufacturing; Initech Software; Umbrella Health; "
    "Stark Industrial; Wayne Biotech; Hooli Cloud; Vandelay Imports; Soylent Foods; Cyberdyne Robotics; "
    "Tyrell Genetics; Wonka Confectionery; Gringotts Financial; Oceanic Airlines; Massive Dynamic; "
    "Blue Sun Energy; Aperture Labs; Monarch Freight; Pied Piper Data; Bluth Properties; Dunder Paper; "
    "Prestige Worldwide; Sterling Cooper Media; Duff Beverages; Krusty Restaurants; Los Pollos Distribution; "
    "Virtucon Holdings; Kerbal Aerospace; Black Mesa Research; Nakatomi Trading; Ollivander Instruments; "
    "Rekall Travel; Spacely Sprockets; Cogswell Cogs; Gekko Partners; Contoso Retail; Fabrikam Textiles; "
    "Tailspin Toys; Woodgrove Bank; Litware Analytics; Proseware Learning; Adatum Security; "
    "Lucerne Publishing; Margie's Travel; Wingtip Sports; Alpine Ski House; Coho Winery; Fourth Coffee; "
    "Trey Research; Humongous Insurance; Relecloud Media; Graphic Design Institute; Southridge Video; "
    "VanArsdel Foods; Bellows College; Consolidated Messenger; Datum Logistics; Blue Yonder Airlines; "
    "City Power & Light; Lamna Healthcare; Munson's Pickles; Nod Publishers; Wide World Importers; "
    "School of Fine Art; Olympic Steel Works; Harbor Freightways; Redwood Credit Union; Summit Outdoor Gear; "
    "Keystone Pharma; Brightline Telecom; Cascade Water Utility; Ironclad Construction; Lighthouse Insurance; "
    "Meridian Hotels; Pinnacle Semiconductors; Quantum Dental Group; Riverbend Hospital; Sapphire Cosmetics; "
    "Titan Mining; Evergreen Agritech; Falcon Aviation Services; Granite State Energy; "
    "Horizon Charter Schools; Juniper Apparel; Kestrel Security; Lumen Optics; Maple Leaf Grocers; "
    "Nimbus Weather Systems; Orion Satellite"
)

FIRST_NAMES = _split(
    "James; Mary; Robert; Patricia; John; Jennifer; Michael; Linda; William; Elizabeth; David; Barbara; "
    "Richard; Susan; Joseph; Jessica; Thomas; Sarah; Carlos; Karen; Wei; Aisha; Mohammed; Fatima; Hiroshi; "
    "Yuki; Olga; Ivan; Sofia; Lucas; Chloe; Noah; Amara; Tariq; Ingrid; Lars; Priscila; Mateo; Zanele; Arjun; "
    "Mei; Oluwaseun; Hannah; Felix; Giulia; Pierre; Nadia; Omar; Leila; Tobias"
)

LAST_NAMES = _split(
    "Smith; Johnson; Williams; Brown; Jones; Garcia; Miller; Davis; Rodriguez; Martinez; Hernandez; Lopez; "
    "Gonzalez; Wilson; Anderson; Thomas; Taylor; Moore; Jackson; Martin; Lee; Nguyen; Kim; Patel; Shah; Sato; "
    "Suzuki; Ivanova; Novak; Müller; Schmidt; Rossi; Dubois; Haddad; Mensah; Okonkwo; Larsen; Johansson; "
    "Silva; Costa; Wang; Li; Zhang; Chen; Kaur; Gupta; Ahmed; Cohen; O'Neill; MacLeod"
)

JOB_TITLES = _split(
    "VP of Operations; Director of IT; Chief Information Officer; Head of Procurement; IT Manager; "
    "Data Platform Lead; Chief Financial Officer; Controller; Security Architect; Head of Engineering; "
    "Operations Manager; Director of Finance; CTO; Systems Administrator; Business Analyst; "
    "Head of Customer Experience; Director of Supply Chain; Revenue Operations Manager"
)

PRODUCTS = _split(
    "Platform Enterprise; Platform Team; Analytics add-on; Data Connectors pack; Premier Support; "
    "Governance module; Workflow Automation; SSO and audit bundle"
)

COMPETITORS = _split("Zentrix; Corvana; Helix Suite; the incumbent in-house tool; DataSpring")

INDUSTRIES = _split(
    "Logistics; Manufacturing; Software; Healthcare; Financial Services; Retail; Energy; Education; Media; "
    "Hospitality; Telecommunications; Construction; Biotech; Food & Beverage"
)

STAGES = _split("Prospecting; Qualification; Needs Analysis; Proposal; Negotiation; Closed Won; Closed Lost")

DEAL_KINDS = _split(
    "Platform Expansion; New Logo; Analytics Rollout; Renewal and Upsell; Data Connectors; Multi-Year Renewal; "
    "Governance Upgrade; Workflow Automation Pilot; Enterprise Migration; Department Rollout"
)


class Deal(NamedTuple):
    """An open or recently closed opportunity: a CRM record and a topic of the Q3 pipeline review."""

    company: str
    name: str
    amount: int
    stage: str
    probability: int
    close_date: str
    owner: Rep
    product: str
    competitor: str
    region: str


_AES = tuple(rep for rep in SALES_TEAM if "Account Executive" in rep.title)
_PROBABILITY = {
    "Prospecting": 10, "Qualification": 20, "Needs Analysis": 35, "Proposal": 55, "Negotiation": 75,
    "Closed Won": 100, "Closed Lost": 0,
}  # fmt: skip


def pipeline_deals(count: int = 64) -> tuple[Deal, ...]:
    """The Q3 opportunities, the same every time (seeded), one per company, largest first."""
    rng = random.Random(3_2026)
    deals: list[Deal] = []
    # Northwind Traders is always in the pipeline: the CRM gives it fixed ids that benchmarks can name.
    for company in (COMPANIES[0], *rng.sample(COMPANIES[1:], count - 1)):
        owner = rng.choice(_AES)
        stage = rng.choices(STAGES, weights=(1, 3, 4, 5, 5, 2, 1))[0]
        amount = rng.randrange(24, 960) * 500
        close = f"2026-{rng.choice(('08', '09', '09', '10'))}-{rng.randrange(1, 29):02d}"
        deals.append(
            Deal(
                company=company,
                name=f"{company} — {rng.choice(DEAL_KINDS)}",
                amount=amount,
                stage=stage,
                probability=_PROBABILITY[stage],
                close_date=close,
                owner=owner,
                product=rng.choice(PRODUCTS),
                competitor=rng.choice(COMPETITORS),
                region=owner.region,
            )
        )
    return tuple(sorted(deals, key=lambda d: -d.amount))
