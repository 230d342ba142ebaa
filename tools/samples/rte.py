"""RTE samples: a short text and a hypothesis, entailment or not_entailment."""

from __future__ import annotations

import random
from collections.abc import Sequence

from samples.common import Files, Sizes, a_an, cap, person, pick, split, tsv, unique
from samples.mrpc import CITIES, COMPANIES, DAYS, PRODUCTS, TEAMS, UNIVERSITIES, _num

# ---------------------------------------------------------------------------------------------------------
# RTE: a short text and a hypothesis; entailment when the text states it, not_entailment when the
# hypothesis changes a fact, swaps roles, or claims something the text does not say.
# ---------------------------------------------------------------------------------------------------------

INDUSTRIES = ["food", "software", "shipping", "mining", "insurance", "steel", "media", "chemicals"]
ANIMALS = [("frog", "Hyla"), ("beetle", "Carabus"), ("orchid", "Dendra"), ("gecko", "Lygod"),
           ("moth", "Noctua"), ("snail", "Helica")]
REGIONS = ["the Varnholm Highlands", "the Keldmark coast", "the Ostrian lowlands", "the Tarrow Valley",
           "the Selden Hills", "the Amber Marshes"]
PRIZES = ["Harrowgate Prize", "Northern Book Award", "Lantern Prize for Fiction", "Keldmark Literary Medal"]
BOOK_TITLES = ["The Salt Orchard", "A Winter in Carrick", "Lanterns on the Water", "The Quiet Ferry",
               "Nine Letters Home", "The Cartographer's Daughter", "Under the Mill Bridge", "Glass Harvest"]
FESTIVALS = ["Lantern Festival", "Harbour Music Week", "Apple Fair", "Kite Festival", "Folk Night Market"]
SEASONS = ["spring", "summer", "autumn", "winter"]
RIVERS = ["Meddle", "Orrin", "Tarrow", "Selden", "Harrow", "Bracken"]
MOUNTAINS = ["Greyfell Mountains", "Amber Hills", "Kestrel Range", "Varnholm Plateau"]
ORGS_RTE = ["Northern Rowing Federation", "Keldmark Chamber of Commerce", "National Library Trust",
            "Carrick Bay Port Authority", "Ostrian Red Cross"]
PARTS = ["battery", "charger", "power cable", "heating element"]


def _other(rng: random.Random, items: Sequence[str], not_this: str) -> str:
    return rng.choice([x for x in items if x != not_this])


def _rte_bio(r: random.Random) -> tuple[str, list[str], list[str]]:
    p, city, org = person(r), r.choice(CITIES), r.choice(ORGS_RTE)
    born, led = r.randint(1931, 1975), r.randint(1990, 2015)
    text = r.choice([
        f"{p}, who was born in {city} in {born}, became the youngest person to lead the {org} in {led}.",
        f"Born in {city} in {born}, {p} worked as a teacher for many years before being elected head "
        f"of the {org} in {led}.",
    ])
    yes = [f"{p} was born in {city}.", f"{p} led the {org}.", f"{p} was born in {born}."]
    no = [f"{p} was born in {_other(r, CITIES, city)}.", f"{p} founded the {org}.",
          f"{p} was born in {born + r.randint(2, 9)}.", f"{p} left the {org} in {led}."]
    return text, yes, no


def _rte_factory(r: random.Random) -> tuple[str, list[str], list[str]]:
    co, industry = r.choice(COMPANIES), r.choice(INDUSTRIES)
    city, city2 = pick(r, CITIES, 2)
    n = _num(r, 100, 2000, 50)
    text = r.choice([
        f"{co}, a {industry} company based in {city}, announced on {r.choice(DAYS)} that it will open a new "
        f"factory in {city2}, creating about {n} jobs.",
        f"The new {co} factory in {city2} will employ about {n} people, the company said. {co} has been "
        f"based in {city} since it was founded.",
    ])
    yes = [f"{co} is based in {city}.", f"{co} will open a factory in {city2}.",
           f"A new factory will create jobs in {city2}."]
    no = [f"{co} is based in {city2}.", f"{co} will close a factory in {city2}.",
          f"{co} will cut {n} jobs.", f"{co} will open a factory in {_other(r, CITIES, city2)}."]
    return text, yes, no


def _rte_takeover(r: random.Random) -> tuple[str, list[str], list[str]]:
    co, co2 = pick(r, COMPANIES, 2)
    amt = r.randrange(120, 990, 10)
    text = r.choice([
        f"{co} has agreed to buy {co2} for ${amt} million, the two companies said on {r.choice(DAYS)}.",
        f"Shareholders of {co2} approved the sale of the company to {co} for ${amt} million, ending months "
        "of talks.",
    ])
    yes = [f"{co} will acquire {co2}.", f"{co2} is being sold to {co}.", f"{co} will pay ${amt} million."]
    no = [f"{co2} will acquire {co}.", f"{co} will sell {co2}.", f"{co} will pay ${amt + 100} million.",
          f"{co} and {co2} ended their talks without a deal."]
    return text, yes, no


def _rte_species(r: random.Random) -> tuple[str, list[str], list[str]]:
    (animal, genus), region = r.choice(ANIMALS), r.choice(REGIONS)
    size, univ = r.randint(2, 30), r.choice(UNIVERSITIES)
    latin = f"{genus} {r.choice(['selda', 'varnica', 'keldi', 'orrina', 'ambra'])}"
    text = (f"Scientists from {univ} have described a new species of {animal} found in {region}. "
            f"The {animal}, named {latin}, is about {size} centimetres long.")
    yes = [f"A new species of {animal} was found in {region}.", f"{latin} is {a_an(animal)}.",
           f"Scientists from {univ} described a new {animal}."]
    no = [f"The new {animal} was found in {_other(r, REGIONS, region)}.", f"{latin} is about a metre long.",
          f"The new {animal} is extinct.", f"{latin} is a species of bird."]
    return text, yes, no


def _rte_river(r: random.Random) -> tuple[str, list[str], list[str]]:
    river, mountains = r.choice(RIVERS), r.choice(MOUNTAINS)
    town, town2 = pick(r, CITIES, 2)
    km = r.randint(40, 400)
    text = (f"The {river} River rises in the {mountains} and flows for {km} kilometres, passing {town2}, "
            f"before reaching the sea at {town}.")
    yes = [f"The {river} River reaches the sea at {town}.", f"The {river} River flows past {town2}.",
           f"The {river} River begins in the {mountains}."]
    no = [f"The {river} River rises near {town}.", f"The {river} River is {km + 100} kilometres long.",
          f"The {river} River reaches the sea at {town2}.", f"The {river} River flows into a lake."]
    return text, yes, no


def _rte_prize(r: random.Random) -> tuple[str, list[str], list[str]]:
    p, book, prize = person(r), r.choice(BOOK_TITLES), r.choice(PRIZES)
    text = r.choice([
        f"{p}'s novel \"{book}\" won the {prize} on {r.choice(DAYS)}, beating five other finalists.",
        f"The {prize} went to \"{book}\", the second novel by {p}, the judges announced.",
    ])
    yes = [f"\"{book}\" was written by {p}.", f"{p} won the {prize}.", f"\"{book}\" is a novel."]
    no = [f"{p} won the {_other(r, PRIZES, prize)}.", f"\"{book}\" is {p}'s first novel.",
          f"{p} was one of the judges of the {prize}.", f"\"{book}\" was written by {person(r)}."]
    return text, yes, no


def _rte_election(r: random.Random) -> tuple[str, list[str], list[str]]:
    p, p2, city = person(r), person(r), r.choice(CITIES)
    votes = r.randint(50, 900)
    text = r.choice([
        f"{p} was elected mayor of {city} on {r.choice(DAYS)}, defeating the incumbent, {p2}, by fewer "
        f"than {votes} votes.",
        f"After a close count, {p2} conceded the race for mayor of {city} to {p}, who won by {votes} votes.",
    ])
    yes = [f"{p} is the new mayor of {city}.", f"{p2} lost the election for mayor of {city}.",
           f"The mayoral election in {city} was close."]
    no = [f"{p2} was re-elected mayor of {city}.", f"{p} lost the election in {city}.",
          f"{p} was elected mayor of {_other(r, CITIES, city)}.", f"{p2} won by {votes} votes."]
    return text, yes, no


def _rte_festival(r: random.Random) -> tuple[str, list[str], list[str]]:
    town, season = r.choice(CITIES), r.choice(SEASONS)
    fest = f"{town} {r.choice(FESTIVALS)}"
    year, n = r.randint(1950, 2005), _num(r, 5000, 90000, 500)
    text = f"The {fest}, held every {season} in {town} since {year}, attracted more than {n} visitors this year."
    yes = [f"The {fest} takes place in {town}.", f"The {fest} is held every year.",
           f"More than {n} people visited the {fest} this year."]
    no = [f"The {fest} was first held in {year + r.randint(3, 20)}.", f"The {fest} takes place in "
          f"{_other(r, CITIES, town)}.", f"The {fest} was cancelled this year.",
          f"The {fest} is held every {_other(r, SEASONS, season)}."]
    return text, yes, no


def _rte_transfer(r: random.Random) -> tuple[str, list[str], list[str]]:
    p = person(r)
    team, team2 = pick(r, TEAMS, 2)
    years = r.choice(["two", "three", "four"])
    text = r.choice([
        f"{p} signed a {years}-year contract with {team} on {r.choice(DAYS)} after six seasons with {team2}.",
        f"After six seasons with {team2}, {p} has moved to {team} on a {years}-year contract.",
    ])
    yes = [f"{p} now plays for {team}.", f"{p} used to play for {team2}.", f"{p} signed a contract."]
    no = [f"{p} joined {team2}.", f"{p} retired from playing.", f"{p} played one season for {team2}.",
          f"{p} now plays for {_other(r, TEAMS, team)}."]
    return text, yes, no


def _rte_recall(r: random.Random) -> tuple[str, list[str], list[str]]:
    co, product, part = r.choice(COMPANIES), r.choice(PRODUCTS), r.choice(PARTS)
    n = _num(r, 1000, 80000, 500)
    text = (f"{co} is recalling about {n} of its {product}s because a faulty {part} can overheat, the "
            "company said, adding that no injuries had been reported.")
    yes = [f"{co} is recalling {product}s.", f"A faulty {part} can overheat.",
           f"No injuries were reported from the {product}."]
    no = [f"Several people were injured by the {product}.", f"{co} is recalling its "
          f"{_other(r, PRODUCTS, product)}s.", f"{co} will stop making the {product}.",
          f"The faulty {part} was made by {_other(r, COMPANIES, co)}."]
    return text, yes, no


RTE_FRAMES = [_rte_bio, _rte_factory, _rte_takeover, _rte_species, _rte_river, _rte_prize, _rte_election,
              _rte_festival, _rte_transfer, _rte_recall]


def _rte_pair(rng: random.Random) -> tuple[str, str, str]:
    text, yes, no = rng.choice(RTE_FRAMES)(rng)
    if rng.random() < 0.5:
        return text, cap(rng.choice(yes)), "entailment"
    return text, cap(rng.choice(no)), "not_entailment"


def build_rte(rng: random.Random, sizes: Sizes) -> Files:
    n_train, n_dev = sizes.rte
    pairs = unique(rng, lambda: _rte_pair(rng), n_train + n_dev, key=lambda e: e[0] + "\t" + e[1])
    train, dev = split(pairs, sizes.rte)
    header = ["index", "sentence1", "sentence2", "label"]
    return {
        "rte/train.tsv": tsv(header, [(i, *row) for i, row in enumerate(train)]),
        "rte/dev.tsv": tsv(header, [(i, *row) for i, row in enumerate(dev)]),
    }
