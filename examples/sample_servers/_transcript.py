"""The long document of the drive: a Q3 pipeline review meeting, transcribed with speakers and timestamps.

Generated from varied sentence templates with a seeded random generator, so it reads like a
real two-and-a-half-hour forecast call (about 200 KB, ~50k tokens) and is the same every run.
"""

from __future__ import annotations

import random

from _vocab import COMPETITORS, FIRST_NAMES, JOB_TITLES, LAST_NAMES, PRODUCTS, REGIONS, SALES_TEAM, Deal, Rep

TITLE = "Q3 Pipeline Review — Meeting Transcript"
MEETING_DATE = "2026-09-17"
_TEAM = {rep.name.split()[0]: rep for rep in SALES_TEAM}
_CHAIR, _OPS, _FINANCE, _SE, _CS, _DEMAND = (
    _TEAM[n] for n in ("Maria", "David", "Sam", "Lena", "Raj", "Emma")
)  # fmt: skip
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
_MONTHS = {"08": "August", "09": "September", "10": "October"}
_FILLERS = ("", "", "", "So, ", "Yeah, ", "Okay, ", "Right, ", "Um, ", "Honestly, ", "Look, ", "And ")
# Sentence openings that can follow a filler in lower case (names and "I" never can).
_LOWERABLE = frozenset((
    "The", "We", "They", "It's", "Let's", "What", "Is", "How", "Do", "Did", "Have", "Where", "Who", "Anything",
    "Legal", "Procurement", "Their", "From", "Just", "Payment", "Good", "Commit", "Best", "Noted", "Got", "Updated",
    "Signature", "If", "Short", "There", "Security", "Cost", "Inbound", "Win", "Marketing", "Next",
))  # fmt: skip

_OPENERS = (
    "Next up is {company}. {first}, where are we?",
    "Let's move to {company}. {first}, give us the short version.",
    "{company} is next on my list. {first}, what changed since last week?",
    "Okay, {company}. This one is {amount} so I want a real update, {first}.",
    "{first}, you have {company} next. Walk us through it.",
    "Let's do {company}. I see it at {stage} in the CRM, {first}, is that still right?",
    "Moving on to {company}, {amount}, owned by {first}.",
    "{company}, please. {first}, I've been waiting for this one.",
)
_STATUS = (
    "We're in {stage} at {amount}, close date {close}. {detail}",
    "It's sitting at {stage}, {amount}, and I still have {close} as the close date. {detail}",
    "We're at {stage}, {amount}. {detail} I think {close} is realistic but it's tight.",
    "So {company} is {amount} on {product}. Stage is {stage}. {detail}",
    "Short version: {stage}, {amount}, targeting {close}. {detail}",
    "We moved it to {stage} on {weekday}. Amount is {amount}. {detail}",
)
_DETAILS = (
    "The champion is {contact}, their {title}, and she's been great about pulling in procurement early.",
    "{contact} from their side confirmed budget on the call {weekday}, so that box is finally checked.",
    "Legal has our paper and came back with {n} redlines, mostly on liability caps and data residency.",
    "They want a {pct} percent discount for a three-year commitment, which I told them I'd take to Sam.",
    "Security review is the long pole; their questionnaire has {n} open items and two of them are on SSO.",
    "We did the technical deep dive with {contact} and their team of {seats} analysts last {weekday}.",
    "{competitor} is in the deal and they came in about {pct} percent under us on list price.",
    "The economic buyer is the {title}, {contact}, and I have a meeting with him on the {day}.",
    "They asked to expand from {seats} to {seats2} seats, which is why the amount went up.",
    "Procurement wants to split it into two purchase orders, one for {product} and one for services.",
    "The proof of concept met all but one of the {n} success criteria, and the last one is a data question.",
    "Their fiscal year ends in {month}, so there's budget pressure working in our favour.",
    "There was a reorg and {contact} is now reporting to the {title}, which slowed things down by two weeks.",
    "{contact} signed the mutual action plan, and every step through signature has a date on it now.",
    "We lost a week because their IT team was dealing with an outage, but momentum is back.",
    "They're comparing us against {competitor}, mostly on the connectors and on admin controls.",
)
_QUESTIONS = (
    "What's the paper process at {company}, and who actually signs?",
    "Do we have the economic buyer at {company}, or are we still talking to {contact} only?",
    "Is {competitor} still in there, or did they drop out after the bake-off?",
    "What happens if it slips to Q4? Does the budget go away?",
    "How confident are you in {close}? Give me a number.",
    "Have we multi-threaded this, or is it all running through {contact}?",
    "What did they say about the price increase on {product}?",
    "Where is the security questionnaire for {company} right now?",
    "{first}, is there anything you need from me or from the exec team to get {company} over the line?",
    "What's the downside case? If they buy only {product}, what's the number?",
    "Did their legal team ever come back on the data processing addendum we sent on {weekday}?",
    "Who else is on the buying committee besides {contact}?",
)
_ANSWERS = (
    "Signature goes through the {title}, and {contact} already walked it through their approval chain once.",
    "I'd put it at {pct} percent. The risk is procurement, not the business case.",
    "If it slips, the budget rolls into their next fiscal year in {month}, so we'd keep it but lose the quarter.",
    "We're multi-threaded now: {contact}, the {title}, and two people from their data team.",
    "{competitor} is still there, but they failed the SSO requirement in the bake-off, so I feel good.",
    "The downside is roughly {amount2}, just {product} with no services attached.",
    "Legal came back on {weekday} and we're down to {n} open points, none of them deal breakers.",
    "The questionnaire is with Lena's team; we answered {n2} of the questions and {n} are with our security folks.",
    "An exec-to-exec call would help. Their {title} asked specifically to hear from you, Maria.",
    "They pushed back on price, but they accepted the ramp: {pct} percent off in year one, list after that.",
    "Honestly, I don't know yet. I'll have a clearer read after the call with {contact} on the {day}.",
    "The buying committee is {contact}, their {title}, and someone from finance I haven't met yet.",
)
_SE_NOTES = (
    "From the technical side, the integration with their warehouse is done and tested against {seats} tables.",
    "We still need to show them row-level security, that's the one thing their architect keeps asking about.",
    "The sandbox they're using has about {seats} users on it now, and usage has been up every week.",
    "I flagged a performance question on their largest dataset; engineering thinks it's a config issue.",
    "Their admin wants SCIM provisioning, which we support, I just need to send them the setup guide.",
    "I'm doing a workshop with their data team on the {day}, about {n} people signed up.",
)
_FINANCE_NOTES = (
    "I can live with {pct} percent if it's a three-year term with annual payments up front.",
    "Anything over {pct} percent needs CFO approval, so please get me the deal desk form by {weekday}.",
    "Payment terms of net {days} are fine; net 90 is not, I want that pushed back.",
    "Just note that the services piece is recognised over time, so it won't all land in Q3.",
    "If they want the multi-year price lock, we need a price escalator of at least {n} percent.",
    "The ramp makes the first-year number look small, but the total contract value is {amount2}.",
)
_DECISIONS = (
    "Okay, I'm calling that commit. {first}, don't make me regret it.",
    "Let's keep it in best case until the paper is signed, {first}.",
    "I'm moving this to pipeline for Q4. It's not a Q3 deal, and that's fine.",
    "Commit, but I want a daily update on {company} from now until it closes.",
    "Best case for now. If legal closes out by {weekday}, we upgrade it.",
    "Let's leave {company} where it is and revisit it on {weekday}.",
    "Good. {company} stays in commit at {amount}.",
    "I'd call that at-risk. Let's put together a save plan before {weekday}.",
)
_OPS_NOTES = (
    "Noted. I'll update the forecast category in the CRM and move the close date to {close}.",
    "Got it, I'm changing the next step field to the legal review and the probability to {pct} percent.",
    "I'll log that, and I'll ping you, {first}, if the stage and the forecast category disagree again.",
    "Updated. That takes the {region} commit to {amount2}.",
    "Okay, I've added a task for you to send the mutual action plan by {weekday}.",
)
_REGION_LINES = (
    "{region} is at {amount} in commit and {amount2} in best case, against a target of {amount3}.",
    "For {region}, we're {pct} percent to plan with three weeks left, which is behind where we were in Q2.",
    "The biggest swing in {region} is still {company}; without it we're at {amount}.",
    "{region} pipeline coverage is {cover}x for Q4, which is healthy, but Q3 is thin.",
    "In {region} we closed {n} deals last week for a total of {amount}.",
    "Win rate in {region} is {pct} percent this quarter, up from {pct2} percent last quarter.",
)
_MARKETING_LINES = (
    "Marketing sourced {n} new opportunities this month, worth about {amount} in pipeline.",
    "The webinar series brought in {n2} registrations and {n} of them converted to meetings.",
    "Cost per qualified lead is down {pct} percent since we changed the paid search mix.",
    "We have the field event in {month}, and {n} of our top accounts already registered.",
    "Inbound demo requests are up {pct} percent quarter over quarter, mostly from {region}.",
    "I'd like the AEs to follow up on the {n2} leads from the trade show before they go cold.",
)
_RENEWAL_LINES = (
    "{company} renews on {close} at {amount}, and I'd rate the churn risk as {risk}.",
    "{company} usage dropped {pct} percent after their champion left, so that renewal is {risk} risk.",
    "{company} wants to add {product} at renewal, which would take it to {amount2}.",
    "The executive sponsor at {company} is new; I've set up a business review for the {day}.",
    "{company} asked for a {pct} percent price decrease at renewal, and I pushed back.",
)
_ACTIONS = (
    "{owner} to send the updated order form for {company} by {weekday}.",
    "{owner} to set up the exec-to-exec call with the {title} at {company}.",
    "{owner} to get the deal desk form for {company} to Sam, {pct} percent discount, by {weekday}.",
    "{owner} to confirm the {close} close date for {company} with {contact} in writing.",
    "{owner} and Lena to finish the security questionnaire for {company}, {n} items left.",
    "{owner} to update the next steps and the forecast category for {company} in the CRM today.",
)
_BACKCHANNEL = (
    "Yeah.", "Okay.", "Mm-hm.", "Got it.", "Makes sense.", "Sure.", "Right.", "Fair enough.", "Understood.",
    "Thanks, that's helpful.", "Okay, keep going.", "Sorry, you cut out for a second, can you repeat the last part?",
)  # fmt: skip


def _ordinal(day: int) -> str:
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _money(value: int) -> str:
    if value >= 1_000_000:
        return f"${value / 1_000_000:.1f} million"
    return f"${round(value / 1000)}K"


class _Writer:
    """Accumulates transcript lines and advances the meeting clock with the length of what is said."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines: list[str] = []
        self.seconds = 4.0
        self.size = 0

    def say(self, speaker: Rep, text: str) -> None:
        first_word = text.split(" ", 1)[0]
        if first_word in _LOWERABLE and self.rng.random() < 0.35:
            filler = self.rng.choice(_FILLERS)
            text = filler + text[0].lower() + text[1:] if filler else text
        s = int(self.seconds)
        line = f"[{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}] {speaker.name}: {text}"
        self.lines.append(line)
        self.size += len(line) + 1
        self.seconds += len(text) / 30 + self.rng.uniform(0.3, 2.0)

    def slots(self, deal: Deal | None = None) -> dict[str, str]:
        rng = self.rng
        # The customer's people stay the same throughout one deal's discussion.
        people = random.Random(deal.company) if deal is not None else rng
        contact = f"{people.choice(FIRST_NAMES)} {people.choice(LAST_NAMES)}"
        title = people.choice(JOB_TITLES)
        seats = rng.randrange(12, 900)
        values = {
            "contact": contact,
            "title": title,
            "weekday": rng.choice(_WEEKDAYS),
            "day": _ordinal(rng.randrange(4, 29)),
            "month": rng.choice(tuple(_MONTHS.values())),
            "n": str(rng.randrange(2, 19)),
            "n2": str(rng.randrange(20, 140)),
            "pct": str(rng.randrange(5, 40)),
            "pct2": str(rng.randrange(5, 40)),
            "days": str(rng.choice((30, 45, 60))),
            "seats": str(seats),
            "seats2": str(seats + rng.randrange(50, 400)),
            "amount": _money(rng.randrange(40, 900) * 1000),
            "amount2": _money(rng.randrange(60, 2400) * 1000),
            "amount3": _money(rng.randrange(900, 4000) * 1000),
            "product": rng.choice(PRODUCTS),
            "competitor": rng.choice(COMPETITORS),
            "region": rng.choice(REGIONS),
            "cover": f"{rng.uniform(1.4, 4.2):.1f}",
            "risk": rng.choice(("low", "medium", "high")),
            "close": f"{rng.choice(tuple(_MONTHS.values()))} {rng.randrange(1, 29)}",
            "company": "Globex",
            "stage": "Proposal",
            "first": "Tom",
        }
        if deal is not None:
            month, day = deal.close_date[5:7], int(deal.close_date[8:])
            values |= {
                "company": deal.company,
                "amount": _money(deal.amount),
                "stage": deal.stage.lower(),
                "close": f"{_MONTHS[month]} {day}",
                "first": deal.owner.name.split()[0],
                "product": deal.product,
                "competitor": deal.competitor,
                "region": deal.region,
            }
        return values

    def line(self, speaker: Rep, templates: tuple[str, ...], deal: Deal | None = None) -> None:
        self.say(speaker, self.rng.choice(templates).format(**self.slots(deal)))


def _deal_review(w: _Writer, deal: Deal) -> None:
    rng = w.rng
    owner = deal.owner
    w.line(_CHAIR, _OPENERS, deal)
    status = rng.choice(_STATUS).replace("{detail}", rng.choice(_DETAILS))
    w.say(owner, status.format(**w.slots(deal)))
    if rng.random() < 0.5:
        w.line(owner, _DETAILS, deal)
    for _ in range(rng.randrange(1, 4)):
        asker = rng.choice((_CHAIR, _CHAIR, _FINANCE, _OPS, _SE))
        w.line(asker, _QUESTIONS, deal)
        w.line(owner, _ANSWERS, deal)
        if rng.random() < 0.25:
            w.say(asker, rng.choice(_BACKCHANNEL))
    if rng.random() < 0.45:
        w.line(_SE, _SE_NOTES, deal)
    if rng.random() < 0.4:
        w.line(_FINANCE, _FINANCE_NOTES, deal)
    w.line(_CHAIR, _DECISIONS, deal)
    w.line(_OPS, _OPS_NOTES, deal)


def _section(w: _Writer, heading: str) -> None:
    w.lines.append("")
    w.lines.append(f"--- {heading} ---")
    w.size += len(heading) + 9


def meeting_transcript(deals: tuple[Deal, ...], target_chars: int = 200_000) -> str:
    """The full transcript: agenda, regional roll-up, deal-by-deal review until ``target_chars``, renewals, actions."""
    rng = random.Random(917)
    w = _Writer(rng)
    _section(w, "Opening and agenda")
    w.say(_CHAIR, "Morning, everyone. Let's get started, we have a lot of pipeline to cover and I want to end on time.")
    w.say(_CHAIR, "Agenda: regional roll-up first, then deal by deal from the largest down, renewals, marketing.")
    w.say(_OPS, "The forecast snapshot is from last night. If your numbers changed this morning, say so on the call.")
    w.say(_FINANCE, "And please be precise on close dates. Finance is building the Q3 landing off this call.")
    _section(w, "Regional roll-up")
    for region in REGIONS:
        speaker = next((r for r in SALES_TEAM if r.region == region and "Account Executive" in r.title), _OPS)
        first = speaker.name.split()[0]
        w.say(_CHAIR, f"{region} first. {first}, numbers please." if region == REGIONS[0] else f"{region}, {first}?")
        for template in rng.sample(_REGION_LINES, rng.randrange(3, 6)):
            slots = w.slots() | {"region": region, "company": rng.choice(deals).company}
            w.say(speaker, template.format(**slots))
        w.line(_FINANCE, _FINANCE_NOTES)
    _section(w, "Deal reviews")
    won = [deal for deal in deals if deal.stage == "Closed Won"]
    if won:
        wins = ", ".join(f"{d.company} at {_money(d.amount)}" for d in won)
        w.say(_CHAIR, f"Quick wins first: {wins}. Great work, everyone.")
    open_deals = [deal for deal in deals if not deal.stage.startswith("Closed")]
    reviewed = 0
    while w.size < target_chars * 0.9:
        deal = open_deals[reviewed % len(open_deals)]
        if reviewed == len(open_deals):
            w.say(_CHAIR, "That's the whole list. Let's do a second pass on anything that moved during the call.")
        _deal_review(w, deal)
        reviewed += 1
    _section(w, "Renewals and churn risk")
    w.say(_CHAIR, "Raj, renewals. Anything I should be worried about?")
    while w.size < target_chars * 0.95:
        w.say(_CS, rng.choice(_RENEWAL_LINES).format(**(w.slots() | {"company": rng.choice(deals).company})))
        if rng.random() < 0.4:
            w.line(_CHAIR, _QUESTIONS, rng.choice(deals))
            w.line(_CS, _ANSWERS)
    _section(w, "Marketing and pipeline generation")
    while w.size < target_chars * 0.98:
        w.line(_DEMAND, _MARKETING_LINES)
        if rng.random() < 0.3:
            w.say(_CHAIR, rng.choice(_BACKCHANNEL))
    _section(w, "Action items")
    w.say(_CHAIR, "Let's recap the action items. David, read them back.")
    while w.size < target_chars:
        deal = rng.choice(deals)
        w.say(_OPS, rng.choice(_ACTIONS).format(**w.slots(deal), owner=deal.owner.name))
    w.say(_CHAIR, "Thanks, everyone. Same time next week, and please keep the CRM current before the call.")
    minutes = 10 * 60 + int(w.seconds) // 60
    header = [
        TITLE,
        f"Date: {MEETING_DATE}, 10:00–{minutes // 60}:{minutes % 60:02d} PT · Video call, recorded with the consent "
        "of all participants",
        "Attendees: " + ", ".join(f"{rep.name} ({rep.title})" for rep in SALES_TEAM),
        "Transcribed automatically; speaker labels reviewed by David Okafor. Timestamps are from the recording.",
    ]
    return "\n".join(header + w.lines) + "\n"
