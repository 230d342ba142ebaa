"""SQuAD v1.1 and 2.0 samples (articles about invented towns, machines, clubs and rivers), and SWAG's
(contexts with four endings)."""

from __future__ import annotations

import json
import random
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from samples.common import Files, Sizes, cap, person, pick, split, unique
from samples.mrpc import CITIES, DAYS, MONTHS, _num

# ---------------------------------------------------------------------------------------------------------
# SQuAD v1.1: articles about invented towns, machines, clubs and rivers. Contexts are rendered from
# sentence templates while recording where each fact lands, so every answer_start is exact by construction
# (and checked again below). Dev questions carry three answers, as the official dev file does.
# ---------------------------------------------------------------------------------------------------------

SQUAD_TOWNS = ["Harrowgate", "Ellsmere", "Quenby", "Tannick", "Oakhollow", "Sandrel", "Wyncombe", "Brindle",
               "Carrowmore", "Fennick", "Ostley", "Pellworth", "Marlow Cross", "Hessleby", "Dunmere",
               "Grindle", "Auchterby", "Lowther Bridge", "Saltcote", "Kirkwell", "Penmarrow", "Heddon Vale",
               "Caistor Mill", "Wrenfield", "Ambleside Cross", "Thornby", "Easterholt", "Gillam", "Rookhaven",
               "Sallowby", "Merrow", "Tibbenham", "Yarrowford", "Cresswick", "Blackwater Quay", "Dunstone",
               "Elvermoor", "Hanbury Wick", "Ivelford", "Longmere"]
SQUAD_REGIONS = ["the Varnholm Highlands", "the county of Keldshire", "the Amber Coast", "the Tarrow Valley",
                 "the Selden Downs", "the Norrmark Fens"]
SQUAD_RIVERS = ["Meddle", "Orrin", "Tarrow", "Selden", "Harrow", "Bracken", "Wendle", "Loam", "Ashby",
                "Calder Water"]
SQUAD_INDUSTRIES = [("wool", "the last wool mill"), ("glassmaking", "the glassworks"),
                    ("shipbuilding", "the shipyard"), ("paper milling", "the paper mill"),
                    ("clockmaking", "the clock factory"), ("salt making", "the salt pans")]
SQUAD_NICKNAMES = {"wool": "the Fleece Town", "glassmaking": "the Glass Town", "shipbuilding": "the Slipway",
                   "paper milling": "Paper Town", "clockmaking": "the Clock Town", "salt making": "the Salt Town"}
SQUAD_LANDMARKS = ["Bell Tower", "Corn Exchange", "Market Cross", "Town Hall", "Water Tower", "Assembly Rooms"]
SQUAD_FESTIVALS = ["Lantern Fair", "Mill Race", "Kite Day", "Apple Wake", "River Regatta", "Harvest Fair"]
SQUAD_COLLECTIONS = ["old clocks and watches", "local pottery", "maps of the county", "Roman coins",
                     "ship models", "handmade lace"]
SQUAD_JOBS = ["a clockmaker", "a schoolteacher", "a ship's carpenter", "a blacksmith", "a printer",
              "a mining engineer"]
SQUAD_DEVICES = [
    ("loom", "weave patterned cloth without a second worker", "weavers in the northern mill towns"),
    ("lamp", "light coal mines without setting fire to the gas", "mining companies"),
    ("pump", "lift water out of flooded mines", "mine owners"),
    ("press", "print maps in several colours at once", "map publishers"),
    ("seed drill", "sow seeds in straight, evenly spaced rows", "farmers on the larger estates"),
    ("kiln", "fire bricks with half the usual fuel", "brickworks"),
]
SQUAD_MATERIALS = ["brass and oak", "cast iron", "copper and glass", "beech wood and leather", "wrought iron"]
SQUAD_IMPROVEMENTS = ["added a second cylinder", "replaced the wooden gears with brass ones",
                      "fitted a governor to control the speed", "added a foot pedal", "enclosed the flame in "
                      "wire gauze"]
SQUAD_COLOURS = ["green and white", "red and black", "blue and gold", "amber and black", "white and navy"]
SQUAD_CLUB_NICKNAMES = ["the Millers", "the Herons", "the Bargemen", "the Lamplighters", "the Foxes",
                        "the Weavers"]
SQUAD_LEAGUES = ["the Northern League", "the County Premier Division", "the Coastal League"]
SQUAD_MOUNTAINS = ["Greyfell", "Mount Ardle", "Kestrel Pike", "High Varn", "Amber Knott"]
SQUAD_FISH = ["salmon and brown trout", "grayling and eels", "trout and pike", "sea trout and minnows"]
SQUAD_NUMBER_WORDS = ["two", "three", "four", "five", "six", "seven", "eight", "nine"]


@dataclass(frozen=True)
class Said:
    """One sentence of a paragraph and the questions it answers: (question templates, answer fact)."""

    text: str
    asks: Sequence[tuple[Sequence[str], str]] = ()


def _town_facts(r: random.Random, name: str) -> dict[str, str]:
    industry, site = r.choice(SQUAD_INDUSTRIES)
    founded = r.randint(1080, 1500)
    landmark = f"the {name} {r.choice(SQUAD_LANDMARKS)}"
    others = [t for t in SQUAD_TOWNS if t != name]
    return {
        "name": name, "region": r.choice(SQUAD_REGIONS), "river": f"the River {r.choice(SQUAD_RIVERS)}",
        "census": str(r.choice([2001, 2011, 2021])), "population": _num(r, 3000, 60000, 10),
        "nickname": SQUAD_NICKNAMES[industry], "industry": industry, "site": site, "Site": cap(site),
        "market_day": r.choice(DAYS + ["Saturday"]), "founded": str(founded), "founder": person(r),
        "century": r.choice(["eighteenth", "nineteenth"]), "peak_year": str(r.randint(1820, 1890)),
        "workers": _num(r, 400, 5000, 50), "railway": str(r.randint(1840, 1875)),
        "city": r.choice(CITIES), "closed": str(r.randint(1955, 1995)), "landmark": landmark,
        "Landmark": cap(landmark), "landmark_year": str(r.randint(1700, 1910)), "architect": person(r),
        "height": str(r.randint(18, 60)), "viewpoint": r.choice(["the hills to the north", "the coast road",
                                                                  "three neighbouring parishes"]),
        "fest_month": r.choice(MONTHS), "festival": f"the {r.choice(SQUAD_FESTIVALS)}",
        "club": f"{name} {r.choice(['Athletic', 'Town', 'Rovers', 'United'])}",
        "club_year": str(r.randint(1870, 1920)), "ground": f"{r.choice(['Mill', 'Station', 'Church'])} Lane",
        "twin": r.choice(others), "twin_year": str(r.randint(1960, 2005)),
        "museum_building": r.choice(["the old grammar school", "a former chapel", "the old toll house"]),
        "collection": r.choice(SQUAD_COLLECTIONS),
    }


TOWN_PARAGRAPHS = [
    [
        Said("{name} is a market town in {region}, on the banks of {river}.",
             [(["In which region is {name}?", "Where is the town of {name}?"], "region"),
              (["On which river does {name} stand?", "Which river flows through {name}?"], "river")]),
        Said("At the {census} census it had a population of {population}.",
             [(["What was the population of {name} at the {census} census?",
                "How many people lived in {name} in {census}?"], "population")]),
        Said("The town is known locally as {nickname}, a name it owes to its long history of {industry}.",
             [(["What is {name}'s local nickname?", "What is {name} known as locally?"], "nickname"),
              (["Which trade gave {name} its nickname?"], "industry")]),
        Said("A market has been held in the square every {market_day} since the Middle Ages.",
             [(["On which day of the week is the market held in {name}?"], "market_day")]),
    ],
    [
        Said("The first recorded settlement at {name} dates from {founded}, when {founder} built a mill "
             "beside the river.",
             [(["When was the first recorded settlement at {name}?", "In what year is a settlement at {name} "
                "first recorded?"], "founded"),
              (["Who built the first mill at {name}?"], "founder")]),
        Said("During the {century} century the town grew rich from {industry}, and by {peak_year} more than "
             "{workers} people worked in the trade.",
             [(["How many people worked in {industry} in {name} by {peak_year}?"], "workers"),
              (["In which century did {name} grow rich from {industry}?"], "century")]),
        Said("The railway reached {name} in {railway}, linking the town to {city}.",
             [(["When did the railway reach {name}?", "In what year did {name} get a railway?"], "railway"),
              (["Which city did the railway connect {name} to?"], "city")]),
        Said("{Site} closed in {closed}, and the buildings were later turned into flats.",
             [(["When did {site} in {name} close?"], "closed")]),
    ],
    [
        Said("The best-known building in the town is {landmark}, completed in {landmark_year} to a design by "
             "the architect {architect}.",
             [(["What is the best-known building in {name}?"], "landmark"),
              (["Who designed {landmark}?", "Which architect designed {landmark}?"], "architect"),
              (["When was {landmark} completed?"], "landmark_year")]),
        Said("Its clock tower is {height} metres tall and can be seen from {viewpoint}.",
             [(["How tall is the clock tower of {landmark}, in metres?"], "height")]),
        Said("Every {fest_month} the town holds {festival}, which draws visitors from across {region}.",
             [(["In which month is {festival} held in {name}?"], "fest_month"),
              (["What festival does {name} hold every {fest_month}?"], "festival")]),
    ],
    [
        Said("The local football club, {club}, was founded in {club_year} and plays its home games at "
             "{ground}.",
             [(["Where does {club} play its home games?", "What is the home ground of {club}?"], "ground"),
              (["When was {club} founded?"], "club_year")]),
        Said("{name} has been twinned with {twin} since {twin_year}.",
             [(["Which town is {name} twinned with?"], "twin"),
              (["Since when has {name} been twinned with {twin}?"], "twin_year")]),
        Said("The town museum, housed in {museum_building}, is best known for its collection of "
             "{collection}.",
             [(["Where is the {name} town museum housed?"], "museum_building"),
              (["What is the town museum in {name} best known for?"], "collection")]),
    ],
]


def _device_facts(r: random.Random, name: str) -> dict[str, str]:
    kind, purpose, buyers = r.choice(SQUAD_DEVICES)
    inventor = person(r)
    device = f"the {inventor.split()[-1]} {kind}"
    year = r.randint(1760, 1880)
    return {
        "device": device, "Device": cap(device), "kind": kind, "purpose": purpose, "buyers": buyers,
        "inventor": inventor, "job": r.choice(SQUAD_JOBS), "town": name, "year": str(year),
        "material": r.choice(SQUAD_MATERIALS), "patent_year": str(year + r.randint(1, 4)),
        "sales_year": str(year + r.randint(10, 25)), "sold": _num(r, 300, 9000, 50),
        "speed": r.choice(["two times", "three times", "four times", "almost ten times"]),
        "improved_year": str(year + r.randint(20, 40)), "improver": person(r),
        "improvement": r.choice(SQUAD_IMPROVEMENTS),
        "museum": f"the Museum of Industry in {r.choice(CITIES)}",
        "demo": f"the first {r.choice(DAYS + ['Saturday', 'Sunday'])} of each month",
        "workshop": r.choice(["a rented barn", "the back room of a bakery", "a shed behind the family home"]),
        "width": str(r.randint(40, 180)),
    }


DEVICE_PARAGRAPHS = [
    [
        Said("{Device} was a machine designed to {purpose}.",
             [(["What was {device} designed to do?", "What was the purpose of {device}?"], "purpose")]),
        Said("It was invented in {year} by {inventor}, {job} from {town}, who built the first model in "
             "{workshop}.",
             [(["Who invented {device}?"], "inventor"), (["In what year was {device} invented?"], "year"),
              (["What was the trade of the man who invented {device}?", "What was {inventor}'s trade?"],
               "job"),
              (["Where did {inventor} build the first model?"], "workshop")]),
        Said("The first model was made of {material} and was only {width} centimetres wide.",
             [(["What was the first model of {device} made of?"], "material"),
              (["How wide was the first model, in centimetres?"], "width")]),
    ],
    [
        Said("{inventor} was granted a patent for the design in {patent_year}, after two earlier "
             "applications had been refused.",
             [(["When was {inventor} granted a patent for {device}?"], "patent_year")]),
        Said("By {sales_year} more than {sold} had been sold, most of them to {buyers}.",
             [(["How many had been sold by {sales_year}?"], "sold"),
              (["Who bought most of the machines?", "To whom were most of the machines sold?"], "buyers")]),
        Said("Users claimed it worked {speed} faster than the method it replaced.",
             [(["How much faster than the old method was {device} said to be?"], "speed")]),
    ],
    [
        Said("In {improved_year} the engineer {improver} {improvement}, which made the machine far more "
             "reliable.",
             [(["Who improved {device} in {improved_year}?"], "improver"),
              (["What change did {improver} make to the machine?"], "improvement")]),
        Said("The last working example is kept at {museum}, where it is demonstrated on {demo}.",
             [(["Where is the last working example of {device} kept?"], "museum"),
              (["When is the machine demonstrated to visitors?"], "demo")]),
    ],
]


def _club_facts(r: random.Random, name: str) -> dict[str, str]:
    founded = r.randint(1870, 1925)
    club = f"{name} {r.choice(['Rovers', 'Athletic', 'Albion', 'Wanderers'])}"
    rival_town = r.choice([t for t in SQUAD_TOWNS if t != name])
    return {
        "club": club, "Club": club, "town": name, "founded": str(founded),
        "founders": r.choice(["workers from the town glassworks", "members of a rowing club",
                              "pupils of the grammar school", "railway workers"]),
        "ground": f"the {r.choice(['Brindle Road', 'Mill Meadow', 'Quayside', 'Station Park'])} Stadium",
        "capacity": _num(r, 2000, 18000, 100), "colours": r.choice(SQUAD_COLOURS),
        "nickname": r.choice(SQUAD_CLUB_NICKNAMES), "titles": r.choice(SQUAD_NUMBER_WORDS),
        "league": r.choice(SQUAD_LEAGUES), "scorer": person(r), "goals": str(r.randint(120, 260)),
        "rival": f"{rival_town} {r.choice(['Town', 'City', 'United'])}", "derby": r.choice(
            ["the River Derby", "the Valley Derby", "the Old Road Derby"]), "manager": person(r),
        "appointed": str(r.randint(2010, 2022)), "moved": str(founded + r.randint(10, 50)),
        "first_ground": r.choice(["a field behind the Red Lion inn", "the cricket ground", "Church Meadow"]),
    }


CLUB_PARAGRAPHS = [
    [
        Said("{Club} is a professional football club based in {town}, known to supporters as {nickname}.",
             [(["What nickname do supporters use for {club}?", "What is {club} known as?"], "nickname")]),
        Said("The club was formed in {founded} by {founders}.",
             [(["When was {club} formed?", "In what year was {club} founded?"], "founded"),
              (["Who formed {club}?"], "founders")]),
        Said("It first played on {first_ground} before moving to {ground} in {moved}.",
             [(["Where did {club} first play?"], "first_ground"), (["When did the club move to {ground}?"],
                                                                    "moved")]),
        Said("The stadium holds {capacity} spectators, and the team plays in {colours} shirts.",
             [(["How many spectators does the {club} stadium hold?"], "capacity"),
              (["What colours are {club}'s shirts?", "In which colours does {club} play?"], "colours")]),
    ],
    [
        Said("{Club} has won {league} {titles} times.",
             [(["Which league has {club} won?"], "league"),
              (["How many times has {club} won {league}?"], "titles")]),
        Said("Its record goalscorer is {scorer}, who scored {goals} goals for the club.",
             [(["Who is {club}'s record goalscorer?"], "scorer"),
              (["How many goals did {scorer} score for {club}?"], "goals")]),
        Said("Matches against {rival} are known as {derby} and are usually played in front of a full "
             "stadium.",
             [(["Who are {club}'s main rivals?", "Against which club does {club} play {derby}?"], "rival"),
              (["What are matches between {club} and {rival} called?"], "derby")]),
        Said("The current manager, {manager}, was appointed in {appointed}.",
             [(["Who is the manager of {club}?"], "manager"),
              (["When was {manager} appointed?"], "appointed")]),
    ],
]


def _river_facts(r: random.Random, name: str) -> dict[str, str]:
    river = r.choice(SQUAD_RIVERS)
    towns = pick(r, [t for t in SQUAD_TOWNS if t != name], 2)
    return {
        "river": f"the River {river}", "River": f"The River {river}", "short": river,
        "source": f"the slopes of {r.choice(SQUAD_MOUNTAINS)}", "length": str(r.randint(30, 240)),
        "mouth": name, "estuary": r.choice(["a wide estuary", "a narrow tidal creek", "a shingle bar"]),
        "tribs": f'{r.choice(["the Linnet", "the Cray", "Foss Beck", "the Yarrow"])} and '
                 f'{r.choice(["the Dove", "Mill Burn", "the Skell", "the Wyre"])}',
        "town1": towns[0], "town2": towns[1], "bridge": f"the {towns[0]} Bridge",
        "bridge_year": str(r.randint(1400, 1800)), "arches": r.choice(SQUAD_NUMBER_WORDS),
        "fish": r.choice(SQUAD_FISH), "flood": str(r.randint(1890, 2015)), "homes": _num(r, 100, 3000, 10),
        "barges": r.choice(["coal and lime", "timber and grain", "wool and salt"]),
        "canal_year": str(r.randint(1760, 1830)),
    }


RIVER_PARAGRAPHS = [
    [
        Said("{River} rises on {source} and flows for {length} kilometres before it reaches the sea at "
             "{mouth} through {estuary}.",
             [(["Where does {river} rise?", "What is the source of {river}?"], "source"),
              (["How long is {river} in kilometres?", "How many kilometres does {river} flow?"], "length"),
              (["At which town does {river} reach the sea?"], "mouth")]),
        Said("Its main tributaries are {tribs}, which join it above {town1}.",
             [(["What are the main tributaries of {river}?"], "tribs"),
              (["Above which town do the tributaries join {river}?"], "town1")]),
        Said("The river is known for its {fish}.", [(["Which fish is {river} known for?"], "fish")]),
    ],
    [
        Said("The oldest crossing is {bridge}, a stone bridge of {arches} arches built in {bridge_year}.",
             [(["What is the oldest crossing of {river}?"], "bridge"),
              (["How many arches does {bridge} have?"], "arches"),
              (["When was {bridge} built?"], "bridge_year")]),
        Said("In {canal_year} the lower river was made navigable as far as {town2}, and barges carried "
             "{barges} downstream for almost a century.",
             [(["When was the lower river made navigable?"], "canal_year"),
              (["How far upstream was {river} made navigable?"], "town2"),
              (["What did barges carry down {river}?"], "barges")]),
        Said("The worst recorded flood came in {flood}, when {homes} homes were damaged.",
             [(["When was the worst recorded flood on {river}?"], "flood"),
              (["How many homes were damaged in the {flood} flood?"], "homes")]),
    ],
]

SQUAD_KINDS = [
    (_town_facts, TOWN_PARAGRAPHS, lambda f: f["name"]),
    (_device_facts, DEVICE_PARAGRAPHS, lambda f: f["device"][4:].capitalize()),
    (_club_facts, CLUB_PARAGRAPHS, lambda f: f["club"] + " F.C."),
    (_river_facts, RIVER_PARAGRAPHS, lambda f: f["river"][4:]),
]


def render(template: str, facts: Mapping[str, str]) -> tuple[str, dict[str, int]]:
    """Fill ``template`` and return the text with the offset of each fact's first use in it."""
    out, where, pos = [], {}, 0
    for literal, field, _, _ in string.Formatter().parse(template):
        out.append(literal)
        pos += len(literal)
        if field is not None:
            where.setdefault(field, pos)
            out.append(facts[field])
            pos += len(facts[field])
    return "".join(out), where


_ANSWER_PREFIXES = ("the ", "a ", "an ", "about ", "almost ")


def _variants(text: str, start: int) -> list[tuple[str, int]]:
    """Shorter spans a second annotator might have marked, as in the official dev file."""
    for prefix in _ANSWER_PREFIXES:
        if text.lower().startswith(prefix) and len(text) > len(prefix) + 2:
            return [(text[len(prefix):], start + len(prefix))]
    first = text.split()[0]
    if " " in text and first.replace(",", "").isdigit():
        return [(first, start)]
    return []


def _new_id(rng: random.Random, used: set[str]) -> str:
    while True:
        qid = f"{rng.getrandbits(96):024x}"
        if qid not in used:
            used.add(qid)
            return qid


def _squad_article(rng: random.Random, kind: int, name: str, dev: bool, ids: set[str],
                   titles: set[str]) -> dict:
    make_facts, paragraphs, make_title = SQUAD_KINDS[kind]
    while True:  # one article per title
        facts = make_facts(rng, name)
        title = make_title(facts).replace(" ", "_")
        if title not in titles:
            titles.add(title)
            break
    blocks = [list(p) for p in paragraphs]
    if rng.random() < 0.6 and len(blocks) > 1:
        # Some longer contexts (600-1,200 characters) so QA windows and doc_stride get exercised.
        i = rng.randrange(len(blocks) - 1)
        width = rng.choice([2, 3]) if len(blocks) > 2 else 2
        blocks[i:i + width] = [[said for block in blocks[i:i + width] for said in block]]
    out = []
    for block in blocks:
        context, qas = "", []
        for said in block:
            text, where = render(said.text, facts)
            offset = len(context) + (1 if context else 0)
            context = f"{context} {text}" if context else text
            for questions, answer in said.asks:
                if rng.random() < 0.75:
                    start = offset + where[answer]
                    value = facts[answer]
                    answers = [(value, start)]
                    if dev:
                        variants = _variants(value, start)
                        answers += [rng.choice(variants + [(value, start)]), (value, start)]
                    qas.append({
                        "answers": [{"answer_start": s, "text": t} for t, s in answers],
                        "question": rng.choice(questions).format(**facts),
                        "id": _new_id(rng, ids),
                    })
        if qas:
            out.append({"context": context, "qas": qas})
    return {"title": title, "paragraphs": out}


def _squad_split(rng: random.Random, n_questions: int, names: list[str], dev: bool, ids: set[str],
                 titles: set[str]) -> dict:
    data, total = [], 0
    for i, name in enumerate(names):
        if total >= n_questions:
            break
        article = _squad_article(rng, i % len(SQUAD_KINDS), name, dev, ids, titles)
        for paragraph in article["paragraphs"]:
            paragraph["qas"] = paragraph["qas"][: n_questions - total]
            total += len(paragraph["qas"])
        article["paragraphs"] = [p for p in article["paragraphs"] if p["qas"]]
        data.append(article)
    if total < n_questions:
        raise RuntimeError(f"SQuAD: only {total} questions from {len(names)} articles; add names")
    for article in data:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                for a in qa["answers"]:
                    found = paragraph["context"][a["answer_start"]:a["answer_start"] + len(a["text"])]
                    assert found == a["text"], (found, a)
    return {"version": "1.1", "data": data}


def build_squad(rng: random.Random, sizes: Sizes) -> Files:
    n_train, n_dev = sizes.squad
    names = rng.sample(SQUAD_TOWNS, len(SQUAD_TOWNS))
    # Each town name heads at most one article (as a town, the home of a club, a machine or a river mouth).
    n_dev_articles = max(2, len(names) // 4)
    ids: set[str] = set()
    titles: set[str] = set()
    train = _squad_split(rng, n_train, names[n_dev_articles:], dev=False, ids=ids, titles=titles)
    dev = _squad_split(rng, n_dev, names[:n_dev_articles], dev=True, ids=ids, titles=titles)
    return {"squad_v1.1/train.json": json.dumps(train, ensure_ascii=False) + "\n",
            "squad_v1.1/dev.json": json.dumps(dev, ensure_ascii=False) + "\n"}


SWAG_SCENES = [
    ("picks up a knife and a loaf of bread.", ["slices the bread on the board.", "cuts a thick piece of bread."]),
    ("walks onto the stage holding a violin.", ["starts to play a slow tune.", "bows to the audience."]),
    ("pulls on a pair of running shoes.", ["jogs down the street.", "ties the laces tightly."]),
    ("opens the hood of the car.", ["checks the oil level.", "looks at the engine."]),
    ("fills a bucket with soapy water.", ["washes the windows.", "scrubs the kitchen floor."]),
    ("climbs up the ladder with a brush.", ["paints the top of the wall.", "reaches the roof."]),
    ("sits down at the piano.", ["plays a few chords.", "opens the book of music."]),
    ("kneels in the garden with a trowel.", ["digs a small hole.", "plants the seedlings."]),
    ("steps onto the diving board.", ["jumps into the pool.", "dives into the water."]),
    ("takes a camera out of the bag.", ["photographs the mountains.", "adjusts the lens."]),
]


def _swag_row(rng: random.Random) -> tuple[str, str, list[str], int]:
    scene = rng.randrange(len(SWAG_SCENES))
    start, good = SWAG_SCENES[scene]
    who = rng.choice(["Someone", "The man", "The woman", "A boy", "A girl", person(rng)])
    wrong = [rng.choice(SWAG_SCENES[j][1]) for j in pick(rng, [j for j in range(len(SWAG_SCENES)) if j != scene], 3)]
    label = rng.randrange(4)
    endings = wrong[:label] + [rng.choice(good)] + wrong[label:]
    pronoun = "They" if who not in ("The man", "A boy") else "He"
    return f"{who} {start}", rng.choice([pronoun, who]), endings, label


def build_swag(rng: random.Random, sizes: Sizes) -> Files:
    """SWAG's CSV: an unnamed row index, video-id, fold-ind, startphrase (sent1 + sent2), sent1, sent2,
    gold-source, ending0-3, label."""
    rows = unique(rng, lambda: _swag_row(rng), sum(sizes.swag), key=lambda e: e[0] + e[1] + "|".join(e[2]))
    header = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", "ending0", "ending1",
              "ending2", "ending3", "label"]
    out = {}
    for name, part in zip(("train", "val"), split(rows, sizes.swag), strict=True):
        lines = [",".join(header)]
        for i, (sent1, sent2, endings, label) in enumerate(part):
            cells = [str(i), f"lsmdc_bertlab_{i // 5:04d}", str(1000 + i), f"{sent1} {sent2}", sent1, sent2, "gold",
                     *endings, str(label)]
            lines.append(",".join(f'"{c}"' if "," in c or '"' in c else c for c in cells))
        out[f"swag/{name}.csv"] = "\n".join(lines) + "\n"
    return out


def build_squad_v2(rng: random.Random, sizes: Sizes) -> Files:
    """SQuAD 2.0 layout: the v1.1 generator's articles, plus unanswerable questions (answers [], is_impossible
    true) that are relevant but have no answer in the passage: a question of another paragraph of the same
    article whose answer is not in this one, else (small files) one of another article. The dev files get
    more of them (SQuAD 2.0's dev set is about half unanswerable)."""
    files = {name: json.loads(text) for name, text in build_squad(rng, sizes).items()}
    used_ids = {qa["id"] for squad in files.values() for a in squad["data"] for p in a["paragraphs"]
                for qa in p["qas"]}
    pool = [(a["title"], qa) for squad in files.values() for a in squad["data"] for p in a["paragraphs"]
            for qa in p["qas"]]
    out = {}
    for name, squad in files.items():
        for article in squad["data"]:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    qa["is_impossible"] = False
        for article in squad["data"]:
            for paragraph in article["paragraphs"]:
                context = paragraph["context"]
                fits = [qa for title, qa in pool if qa["answers"] and qa["answers"][0]["text"] not in context
                        and qa["question"] not in {q["question"] for q in paragraph["qas"]}]
                same = [qa for title, qa in pool if title == article["title"] and qa in fits]
                others = [qa for qa in fits if qa not in same]
                n = rng.choice([2, 3, 4] if "dev" in name else [0, 1, 1, 2])
                chosen = pick(rng, same, min(n, len(same)))
                chosen += pick(rng, others, min(n - len(chosen), len(others)))
                for qa in chosen:
                    paragraph["qas"].append({"answers": [], "question": qa["question"],
                                             "id": _new_id(rng, used_ids), "is_impossible": True})
        squad["version"] = "v2.0"
        out[name.replace("squad_v1.1/", "squad_v2/")] = json.dumps(squad, ensure_ascii=False) + "\n"
    return out
