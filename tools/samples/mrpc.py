"""MRPC samples: news sentence pairs, 1 = paraphrase (and the news word lists the other sets reuse)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from samples.common import Files, Sizes, cap, person, pick, ptb, split, tsv, unique

# ---------------------------------------------------------------------------------------------------------
# MRPC: news sentence pairs, 1 = paraphrase. Positives realise one set of facts twice; negatives change a
# fact, leave the key fact out, or talk about another event of the same company or person.
# ---------------------------------------------------------------------------------------------------------

COMPANIES = [
    "Halvorsen Foods", "Brightwater Energy", "Corvane Systems", "Nordhill Bank", "Pellam Airlines",
    "Tessaro Pharmaceuticals", "Kestrel Networks", "Ambrose Steel", "Larkfield Media", "Quillon Motors",
    "Ostra Telecom", "Redfern Insurance", "Marlowe Retail", "Fenwick Chemicals", "Saltmarsh Shipping",
    "Caddell Software", "Gravenor Mining", "Whitlock Brewing", "Aldane Semiconductor", "Pinecrest Health",
]
CITIES = ["Port Anselm", "Carrick Bay", "Elmsford", "Westmoor", "Lyle Harbor", "Dunhaven", "Ashcombe",
          "Millbrook", "Stonebridge", "Keldwick", "Orrin Falls", "Brackenridge", "Fairholt", "New Carvel"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
QUARTERS = ["first", "second", "third", "fourth"]
TEAMS = ["the Carrick Bay Herons", "the Elmsford Foxes", "the Westmoor Millers", "the Dunhaven Gulls",
         "the Ashcombe Rangers", "the Keldwick Comets", "the Orrin Falls Otters", "the Fairholt Wolves"]
UNIVERSITIES = ["Elmsford University", "the University of Westmoor", "Dunhaven College",
                "the Carrick Institute of Technology", "Ashcombe University"]
JOURNALS = ["Clinical Reports", "the Journal of Applied Ecology Studies", "Field Science Letters",
            "the Northern Medical Review"]
FINDINGS = [
    "people who walk every day sleep better", "children who read aloud learn new words faster",
    "regular tea drinkers have fewer headaches", "city trees lower summer temperatures on nearby streets",
    "short naps improve memory in older adults", "bees avoid flowers near busy roads",
    "students who cycle to school concentrate longer", "noise from traffic disturbs the songs of city birds",
]
THINGS = ["parking ordinance", "school budget", "library levy", "noise law", "transit plan",
          "water rate increase", "recycling program", "zoning rule"]
CRIMES = ["fraud", "tax evasion", "bribery", "insider trading", "embezzlement", "perjury"]
AIRLINES = ["Pellam Airlines", "Corvane Air", "Northstar Airways", "Gullwing Express"]
PRODUCTS = ["Nimbus tablet", "Roamer phone", "Skylark laptop", "Vista camera", "Orbit speaker",
            "Pulse smartwatch", "Aero drone", "Lumen e-reader"]


def _num(rng: random.Random, lo: int, hi: int, step: int = 1) -> str:
    return f"{rng.randrange(lo, hi, step):,}"


def _dec(rng: random.Random, lo: float, hi: float) -> str:
    return f"{rng.uniform(lo, hi):.1f}"


@dataclass(frozen=True)
class Frame:
    """One kind of news event: how to draw its facts and the sentences that state them."""

    name: str
    facts: Callable[[random.Random], dict[str, str]]
    says: Sequence[str]  # sentences stating all the facts (any two are paraphrases)
    vague: Sequence[str]  # sentences that leave the key fact out
    mutable: Sequence[str]  # facts a non-paraphrase may change


MRPC_FRAMES = [
    Frame(
        "earnings",
        lambda r: {"co": r.choice(COMPANIES), "day": r.choice(DAYS), "q": r.choice(QUARTERS),
                   "pct": str(r.randint(3, 40)), "amt": _dec(r, 10, 900)},
        ["{co} said on {day} its {q}-quarter profit rose {pct} percent to ${amt} million.",
         "{co}'s {q}-quarter profit climbed {pct} percent to ${amt} million, the company said {day}.",
         "On {day}, {co} reported a {pct} percent rise in {q}-quarter profit, to ${amt} million.",
         "Profit at {co} rose {pct} percent to ${amt} million in the {q} quarter, the company reported on "
         "{day}."],
        ["{co} reported its {q}-quarter results on {day}.",
         "{co} said on {day} that it expects a stronger {q} quarter."],
        ["pct", "amt", "q"],
    ),
    Frame(
        "ceo",
        lambda r: {"co": r.choice(COMPANIES), "p1": person(r), "p2": person(r), "day": r.choice(DAYS)},
        ["{co} named {p1} its new chief executive on {day}, replacing {p2}, who is retiring.",
         "{p1} will succeed the retiring {p2} as chief executive of {co}, the company said {day}.",
         "The board of {co} picked {p1} on {day} to replace {p2} as chief executive."],
        ["{co} said on {day} that it had begun looking for a new chief executive.",
         "{p2} said on {day} that {co} was not looking for a new chief executive."],
        ["p1", "p2"],
    ),
    Frame(
        "acquisition",
        lambda r: dict(zip(("co", "co2"), pick(r, COMPANIES, 2), strict=True))
        | {"amt": str(r.randrange(120, 990, 5)), "day": r.choice(DAYS)},
        ["{co} agreed on {day} to buy {co2} for about ${amt} million in cash.",
         "{co2} will be sold to {co} for roughly ${amt} million in cash, the companies said {day}.",
         "In a cash deal worth about ${amt} million, {co} will acquire {co2}, the companies announced on "
         "{day}."],
        ["{co} and {co2} said on {day} they were in talks about a possible deal.",
         "{co} has held early talks with {co2}, people familiar with the matter said {day}."],
        ["amt", "co2"],
    ),
    Frame(
        "verdict",
        lambda r: {"p1": person(r), "city": r.choice(CITIES), "crime": r.choice(CRIMES),
                   "day": r.choice(DAYS)},
        ["A {city} jury found {p1} guilty of {crime} on {day}.",
         "{p1} was convicted of {crime} by a jury in {city} on {day}.",
         "Jurors in {city} on {day} convicted {p1} of {crime}."],
        ["The trial of {p1} on {crime} charges opened in {city} on {day}.",
         "Lawyers for {p1} asked a {city} judge on {day} to delay the trial."],
        ["crime", "city", "p1"],
    ),
    Frame(
        "storm",
        lambda r: {"n": _num(r, 2000, 90000, 500), "city": r.choice(CITIES), "day": r.choice(DAYS)},
        ["The storm left about {n} homes and businesses in {city} without power on {day}.",
         "About {n} customers in {city} lost power when the storm hit on {day}, officials said.",
         "Officials said roughly {n} homes and businesses in {city} were without electricity after {day}'s "
         "storm."],
        ["Forecasters warned on {day} that a strong storm was heading toward {city}.",
         "Crews in {city} worked through the night on {day} to clear fallen trees."],
        ["n", "city"],
    ),
    Frame(
        "shares",
        lambda r: {"co": r.choice(COMPANIES), "cents": str(r.randint(5, 95)), "pct": _dec(r, 0.5, 9.5),
                   "price": _dec(r, 4, 80), "day": r.choice(DAYS)},
        ["Shares of {co} fell {cents} cents, or {pct} percent, to ${price} on {day}.",
         "{co} stock dropped {cents} cents, or {pct}%, to close at ${price} on {day}.",
         "On {day}, {co} shares lost {cents} cents, or {pct} percent, ending at ${price}."],
        ["Shares of {co} were little changed in early trading on {day}.",
         "Analysts said on {day} that {co} shares could stay under pressure."],
        ["cents", "price", "pct"],
    ),
    Frame(
        "council",
        lambda r: {"city": r.choice(CITIES), "v1": str(r.randint(5, 9)), "v2": str(r.randint(1, 4)),
                   "thing": r.choice(THINGS), "day": r.choice(DAYS)},
        ["The {city} city council voted {v1}-{v2} on {day} to approve a new {thing}.",
         "By a vote of {v1} to {v2}, the {city} council approved a new {thing} on {day}.",
         "{city} council members on {day} approved the new {thing} in a {v1}-{v2} vote."],
        ["The {city} city council began debating a new {thing} on {day}.",
         "Residents of {city} spoke for and against the {thing} at a hearing on {day}."],
        ["thing", "v1"],
    ),
    Frame(
        "study",
        lambda r: {"univ": r.choice(UNIVERSITIES), "journal": r.choice(JOURNALS),
                   "finding": r.choice(FINDINGS), "day": r.choice(DAYS)},
        ["Researchers at {univ} said {finding}, in a study published {day} in {journal}.",
         "A study by researchers at {univ}, published {day} in {journal}, found that {finding}.",
         "According to researchers at {univ}, whose study appeared in {journal} on {day}, {finding}."],
        ["Researchers at {univ} said on {day} they would publish new results in {journal}.",
         "{univ} said on {day} it had received a grant to study daily habits."],
        ["finding", "univ"],
    ),
    Frame(
        "launch",
        lambda r: {"co": r.choice(COMPANIES), "product": r.choice(PRODUCTS), "month": r.choice(MONTHS),
                   "price": _num(r, 99, 1499, 50)},
        ["{co} will start selling its {product} in {month} for ${price}.",
         "The {product} from {co} goes on sale in {month}, priced at ${price}.",
         "{co} said its {product} will be available in {month} at a price of ${price}."],
        ["{co} showed an early version of its {product} to reporters.",
         "{co} declined to say when its {product} would go on sale."],
        ["month", "price", "product"],
    ),
    Frame(
        "game",
        lambda r: dict(zip(("team", "team2"), pick(r, TEAMS, 2), strict=True))
        | {"s1": str(r.randint(3, 9)), "s2": str(r.randint(0, 2)), "day": r.choice(DAYS)},
        ["{Team} beat {team2} {s1}-{s2} on {day} night.",
         "{Team} defeated {team2} {s1}-{s2} on {day}.",
         "On {day} night, {team} won {s1}-{s2} over {team2}."],
        ["{Team} will play {team2} again on {day}.",
         "{Team} lost their best player to injury before {day}'s game against {team2}."],
        ["s1", "team2"],
    ),
    Frame(
        "strike",
        lambda r: {"co": r.choice(AIRLINES),
                   "n": str(r.randint(40, 400)), "day": r.choice(DAYS), "city": r.choice(CITIES)},
        ["{co} cancelled {n} flights out of {city} on {day} because of a strike by baggage handlers.",
         "A strike by baggage handlers forced {co} to cancel {n} flights from {city} on {day}.",
         "On {day}, {n} {co} flights from {city} were cancelled as baggage handlers went on strike."],
        ["Baggage handlers at {city} airport threatened on {day} to go on strike.",
         "{co} said on {day} that talks with its baggage handlers would continue."],
        ["n", "city"],
    ),
    Frame(
        "layoffs",
        lambda r: {"co": r.choice(COMPANIES), "n": _num(r, 200, 6000, 50), "pct": str(r.randint(2, 25)),
                   "day": r.choice(DAYS)},
        ["{co} said on {day} it would cut {n} jobs, or about {pct} percent of its workforce.",
         "{co} plans to eliminate {n} jobs, about {pct} percent of its staff, the company said {day}.",
         "About {pct} percent of {co}'s workforce, or {n} jobs, will be cut, the company announced {day}."],
        ["{co} said on {day} it was reviewing its costs.",
         "{co} told employees on {day} that more changes were coming."],
        ["n", "pct"],
    ),
]


def _mutate(rng: random.Random, frame: Frame, facts: dict[str, str]) -> dict[str, str]:
    changed = dict(facts)
    for key in pick(rng, frame.mutable, rng.randint(1, min(2, len(frame.mutable)))):
        for _ in range(50):
            changed[key] = frame.facts(rng)[key]
            if changed[key] != facts[key] and changed.get("co") != changed.get("co2") \
                    and changed.get("team") != changed.get("team2") and changed.get("p1") != changed.get("p2"):
                break
    return changed


def _say(template: str, facts: Mapping[str, str]) -> str:
    extra = {"Team": cap(facts["team"])} if "team" in facts else {}
    return ptb(template.format(**facts, **extra))


def _shares_subject(a: Frame, b: Frame, rng: random.Random) -> bool:
    keys = {"co", "p1", "city"} - ({"co"} if "strike" in (a.name, b.name) else set())
    return bool(keys & a.facts(rng).keys() & b.facts(rng).keys())


def _mrpc_pair(rng: random.Random) -> tuple[int, str, str]:
    frame = rng.choice(MRPC_FRAMES)
    facts = frame.facts(rng)
    first, second = pick(rng, frame.says, 2)
    if rng.random() < 0.6:
        return 1, _say(first, facts), _say(second, facts)
    kind = rng.random()
    if kind < 0.5:
        return 0, _say(first, facts), _say(second, _mutate(rng, frame, facts))
    if kind < 0.75:
        return 0, _say(first, facts), _say(rng.choice(frame.vague), facts)
    # Another event about the same company, person or city.
    others = [f for f in MRPC_FRAMES if f is not frame and _shares_subject(f, frame, rng)]
    if not others:
        return 0, _say(first, facts), _say(rng.choice(frame.vague), facts)
    other = rng.choice(others)
    other_facts = other.facts(rng)
    for key in ("co", "p1", "city", "day", "team"):
        if key == "co" and other.name == "strike":
            continue  # only airlines cancel flights
        if key in facts and key in other_facts and other_facts.get("co2") != facts[key]:
            other_facts[key] = facts[key]
    return 0, _say(first, facts), _say(rng.choice(other.says), other_facts)


def build_mrpc(rng: random.Random, sizes: Sizes) -> Files:
    n_train, n_dev = sizes.mrpc
    pairs = unique(rng, lambda: _mrpc_pair(rng), n_train + n_dev, key=lambda e: e[1] + "\t" + e[2])
    used: set[int] = set()
    rows = []
    for label, s1, s2 in pairs:
        while True:
            id1 = rng.randint(100_000, 3_400_000)
            id2 = id1 + rng.randint(-300, 300)
            if id1 not in used and id2 not in used and id1 != id2:
                break
        used.update((id1, id2))
        rows.append((label, id1, id2, s1, s2))
    train, dev = split(rows, sizes.mrpc)
    # GLUE's MRPC files start with a UTF-8 byte-order mark; these keep its header names without one.
    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    return {"mrpc/train.tsv": tsv(header, train), "mrpc/dev.tsv": tsv(header, dev)}
