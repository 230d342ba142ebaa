"""Generate bertlab's bundled sample datasets and the unit-test fixtures.

Every sentence, name, paragraph and article in these files is invented: this script builds them from
templates and word lists written for bertlab, seeded so that a rerun reproduces the files byte for byte.
Each dataset copies the file format of the public benchmark it stands in for (SST-2, MRPC and RTE in GLUE
TSV form, CoNLL-2003, WNUT-17, SQuAD v1.1, WikiText-2), so the same readers work on both.

    python tools/make_samples.py                  # writes src/bertlab/samples/ and tests/fixtures/data/
    python tools/make_samples.py --only fixtures  # just the test fixtures
    python tools/make_samples.py --check          # exit 1 if the committed files differ from a fresh run

The samples are for smoke runs and demos, not for reporting results.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import string
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES_DIR = REPO_ROOT / "src" / "bertlab" / "samples"
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures" / "data"
SEED = 20240611


@dataclass(frozen=True)
class Sizes:
    """How many examples each split gets (sentences for CoNLL/WNUT, questions for SQuAD, articles for
    WikiText)."""

    sst2: tuple[int, int, int]
    mrpc: tuple[int, int]
    rte: tuple[int, int]
    conll: tuple[int, int]
    wnut: tuple[int, int]
    squad: tuple[int, int]
    wiki: tuple[int, int]
    wiki_paragraphs: tuple[int, int]  # paragraphs per section, min and max
    cola: tuple[int, int] = (0, 0)
    stsb: tuple[int, int] = (0, 0)
    qqp: tuple[int, int] = (0, 0)
    mnli: tuple[int, int] = (0, 0)  # train, and each of dev_matched / dev_mismatched
    qnli: tuple[int, int] = (0, 0)
    wnli: tuple[int, int] = (0, 0)
    swag: tuple[int, int] = (0, 0)


SAMPLE_SIZES = Sizes(
    sst2=(400, 100, 40), mrpc=(300, 80), rte=(200, 60), conll=(400, 100), wnut=(200, 60),
    squad=(300, 80), wiki=(15, 4), wiki_paragraphs=(1, 3),
    cola=(240, 80), stsb=(240, 80), qqp=(240, 80), mnli=(240, 60), qnli=(240, 80), wnli=(120, 40),
    swag=(240, 60),
)
FIXTURE_SIZES = Sizes(
    sst2=(40, 16, 8), mrpc=(40, 16), rte=(40, 16), conll=(40, 16), wnut=(40, 16),
    squad=(24, 10), wiki=(3, 2), wiki_paragraphs=(1, 1),
    cola=(40, 16), stsb=(40, 16), qqp=(40, 16), mnli=(40, 16), qnli=(40, 16), wnli=(40, 16),
    swag=(40, 16),
)

Files = dict[str, str]  # relative path -> file text


# ---------------------------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------------------------


def pick(rng: random.Random, items: Sequence[str], k: int) -> list[str]:
    """k distinct items in random order."""
    return rng.sample(list(items), k)


def unique(rng: random.Random, make: Callable[[], tuple], n: int, key: Callable[[tuple], str],
           max_tries: int = 200_000) -> list[tuple]:
    """Draw ``make()`` until ``n`` examples with distinct ``key`` exist (keeps the splits disjoint)."""
    seen: set[str] = set()
    out: list[tuple] = []
    for _ in range(max_tries):
        if len(out) == n:
            return out
        example = make()
        k = key(example)
        if k not in seen:
            seen.add(k)
            out.append(example)
    raise RuntimeError(f"only {len(out)} distinct examples after {max_tries} tries; add templates or words")


def split(items: list, sizes: Sequence[int]) -> list[list]:
    out, start = [], 0
    for size in sizes:
        out.append(items[start:start + size])
        start += size
    return out


def tsv(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["\t".join(header)] + ["\t".join(str(c) for c in row) for row in rows]
    for line in lines:
        assert line.count("\t") == len(header) - 1, line
    return "\n".join(lines) + "\n"


def ptb(text: str) -> str:
    """Tokenize the way the GLUE TSVs of SST-2 and MRPC are: punctuation and clitics split off by spaces."""
    text = re.sub(r"([,.;:!?()\"])", r" \1 ", text)
    text = re.sub(r"(\w)'s\b", r"\1 's", text)
    text = re.sub(r"(\w)n't\b", r"\1 n't", text)
    text = text.replace("$", "$ ").replace("%", " %")
    text = re.sub(r"(\d) , (\d{3})", r"\1,\2", text)  # keep thousands separators: 12,000
    text = re.sub(r"(\d) \. (\d)", r"\1.\2", text)  # and decimals: 2.5
    return " ".join(text.split())


def a_an(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def cap(text: str) -> str:
    return text[:1].upper() + text[1:]


FIRST_NAMES = [
    "Anna", "Marta", "Teodor", "Lena", "Oskar", "Priya", "Tomas", "Ines", "Rafael", "Greta", "Jonah", "Mira",
    "Dmitri", "Helena", "Kofi", "Yuki", "Carlos", "Elin", "Samir", "Nadia", "Victor", "Ruth", "Felix",
    "Amara", "Hugo", "Leona", "Pavel", "Sofia", "Bram", "Ada", "Walter", "Imke", "Daniel", "Rosa", "Emil",
]
LAST_NAMES = [
    "Kovell", "Brannock", "Valbrecht", "Osterhal", "Pellam", "Marchetti", "Whitcombe", "Oyelaran", "Santhal",
    "Dervish", "Ambrose", "Tarrant", "Halvorsen", "Quist", "Renfield", "Lindqvar", "Castellane", "Mbeki",
    "Norrland", "Fairweather", "Ilves", "Corrigan", "Tessaro", "Vantongeren", "Hallam", "Okonjo", "Strand",
    "Bellweather", "Dunmore", "Achterberg", "Farrow", "Kestner", "Moravec", "Galloway", "Szabo", "Ferreira",
]


FEMALE_FIRST_NAMES = ["Anna", "Marta", "Lena", "Priya", "Ines", "Greta", "Mira", "Helena", "Nadia", "Ruth",
                      "Amara", "Leona", "Sofia", "Ada", "Imke", "Rosa", "Elin", "Yuki"]


def person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"


# ---------------------------------------------------------------------------------------------------------
# SST-2: single sentences, 1 = positive, 0 = negative (lower-cased, tokenized, trailing space as in GLUE)
# ---------------------------------------------------------------------------------------------------------

POS_ADJ = [
    "charming", "moving", "funny", "gorgeous", "delightful", "smart", "heartfelt", "thrilling", "warm",
    "witty", "inventive", "tender", "gripping", "luminous", "hilarious", "affecting", "rewarding", "graceful",
    "clever", "lovely", "engaging", "exhilarating", "sweet", "touching", "assured", "riveting", "playful",
    "radiant", "wonderful", "terrific", "beautiful", "intelligent", "fresh", "lively", "uplifting",
    "poignant", "stirring", "brilliant", "enchanting", "absorbing",
]
NEG_ADJ = [
    "dull", "tedious", "clumsy", "lifeless", "boring", "predictable", "shallow", "messy", "flat", "tiresome",
    "incoherent", "bland", "sloppy", "pointless", "forgettable", "laborious", "stale", "overlong", "lazy",
    "grating", "muddled", "hollow", "awkward", "dreary", "joyless", "sluggish", "contrived", "empty",
    "charmless", "dreadful", "painful", "listless", "mediocre", "uninspired", "confused", "cheap", "numbing",
    "witless", "heavy-handed", "unbearable",
]
POS_ADV = ["beautifully", "wonderfully", "deftly", "gracefully", "cleverly", "warmly", "superbly", "lovingly",
           "vividly", "smartly"]
NEG_ADV = ["badly", "clumsily", "lazily", "awkwardly", "woefully", "poorly", "sloppily", "tediously"]
INTENS = ["very", "truly", "consistently", "often", "remarkably", "thoroughly", "genuinely", "utterly",
          "quite", "surprisingly", "rather", "endlessly"]
FILM_NOUNS = ["film", "movie", "picture", "comedy", "drama", "thriller", "documentary", "romance", "debut",
              "sequel", "melodrama", "story", "adventure", "satire", "western", "fable", "musical", "mystery"]
ASPECTS = ["script", "screenplay", "direction", "cast", "ending", "dialogue", "score", "camera work",
           "pacing", "plot", "lead performance", "editing", "premise", "humor", "climax", "supporting cast",
           "photography", "soundtrack", "final act", "opening scene"]
POS_VP = ["kept me smiling", "earns every laugh", "stays with you long after the credits",
          "rewards your patience", "never loses its nerve", "finds real grace in small moments",
          "lifts the spirits", "holds your attention from the first scene", "makes you care about its people",
          "trusts its audience", "feels alive", "hits all the right notes", "left me grinning",
          "is worth every minute"]
NEG_VP = ["wastes a talented cast", "goes nowhere", "drags on and on", "never finds its footing",
          "falls apart in the last half hour", "wears out its welcome", "feels like a long homework assignment",
          "forgets to be funny", "mistakes noise for excitement", "collapses under its own weight",
          "tests your patience", "runs out of ideas early", "left me checking my watch",
          "is a waste of two hours"]
POS_NP = ["a triumph", "a small gem", "a real pleasure", "a joy to watch", "a crowd-pleaser", "a rare treat",
          "a genuine delight", "a minor miracle", "a winner", "a treasure"]
NEG_NP = ["a mess", "a chore", "a misfire", "a disappointment", "a slog", "a waste of time", "a dud",
          "a missed opportunity", "a bore", "a letdown"]
AUDIENCES = ["kids", "fans of the genre", "mystery lovers", "adults", "the whole family",
             "teenagers", "older viewers", "first-time viewers"]

# Each template is (label, text); {p} positive adjective, {n} negative adjective, {f} film noun, {a} aspect.
SST2_TEMPLATES: list[tuple[int, str]] = [
    (1, "{i} {p} and {p2}"),
    (1, "a {p} , {p2} {f} ."),
    (1, "the {a} is {p} , and the {a2} is even better ."),
    (1, "it 's a {p} {f} that never feels {n} ."),
    (1, "{pnp} -- {p} , {p2} and {p3} ."),
    (1, "one of the most {p} {fs} of the year ."),
    (1, "the {f} {pvp} ."),
    (1, "{padv} acted and {padv2} shot , this is a {f} worth seeing ."),
    (1, "you wo n't find a more {p} {f} this year ."),
    (1, "never {n} and often {p} ."),
    (1, "far from {n} , the {a} is {i} {p} ."),
    (1, "i was n't expecting much , but this {f} is {p} ."),
    (1, "{p} , {p2} entertainment for {aud} ."),
    (1, "the {f} is n't perfect , but it is {p} and {p2} ."),
    (1, "{padv} made and {i} {p}"),
    (1, "{pnp} , with a {p} {a} and a {p2} {a2}"),
    (1, "the {a} alone makes this {f} {pnp} ."),
    (1, "a {i} {p} {f} that {pvp}"),
    (1, "it 's hard not to love a {f} this {p} ."),
    (1, "not a single {n} moment in this {p} {f} ."),
    (0, "{i} {n} and {n2}"),
    (0, "a {n} , {n2} {f} ."),
    (0, "the {a} is {n} , and the {a2} is even worse ."),
    (0, "it 's a {f} that is never as {p} as it wants to be ."),
    (0, "{nnp} from start to finish ."),
    (0, "one of the most {n} {fs} of the year ."),
    (0, "the {f} {nvp} ."),
    (0, "{nadv} acted and {nadv2} written , this {f} is best avoided ."),
    (0, "i have rarely seen a {f} so {n} ."),
    (0, "not {p} , not {p2} , just {n} ."),
    (0, "the {a} is n't {p} at all ; it 's {n} ."),
    (0, "i wanted to like this {f} , but it is {n} ."),
    (0, "{n} , {n2} fare that even {aud} will find {n3} ."),
    (0, "the {f} does n't work : the {a} is {n} ."),
    (0, "even a {p} {a} can not save this {n} {f} ."),
    (0, "{nadv} paced and {i} {n}"),
    (0, "{nnp} , with a {n} {a} and a {n2} {a2}"),
    (0, "a {i} {n} {f} that {nvp}"),
    (0, "there is nothing {p} about this {n} {f} ."),
    (0, "it 's hard to care about a {f} this {n} ."),
]


def _sst2_sentence(rng: random.Random) -> tuple[str, int]:
    label, template = rng.choice(SST2_TEMPLATES)
    p, n, a = pick(rng, POS_ADJ, 3), pick(rng, NEG_ADJ, 3), pick(rng, ASPECTS, 2)
    padv, nadv = pick(rng, POS_ADV, 2), pick(rng, NEG_ADV, 2)
    film = rng.choice(FILM_NOUNS)
    film_plural = film[:-1] + "ies" if film.endswith("y") else film + "s"
    text = template.format(
        p=p[0], p2=p[1], p3=p[2], n=n[0], n2=n[1], n3=n[2], a=a[0], a2=a[1], f=film,
        i=rng.choice(INTENS), pvp=rng.choice(POS_VP), nvp=rng.choice(NEG_VP), pnp=rng.choice(POS_NP),
        nnp=rng.choice(NEG_NP), padv=padv[0], padv2=padv[1], nadv=nadv[0], nadv2=nadv[1],
        aud=rng.choice(AUDIENCES), fs=film_plural,
    )
    return re.sub(r"\ba (?=[aeiou])", "an ", text), label


def build_sst2(rng: random.Random, sizes: Sizes) -> Files:
    n_train, n_dev, n_test = sizes.sst2
    examples = unique(rng, lambda: _sst2_sentence(rng), n_train + n_dev + n_test, key=lambda e: e[0])
    train, dev, test = split(examples, sizes.sst2)
    # GLUE's SST-2 train/dev rows keep a space before the tab; test.tsv has an index and no label.
    return {
        "sst2/train.tsv": tsv(["sentence", "label"], [(s + " ", y) for s, y in train]),
        "sst2/dev.tsv": tsv(["sentence", "label"], [(s + " ", y) for s, y in dev]),
        "sst2/test.tsv": tsv(["index", "sentence"], [(i, s) for i, (s, _) in enumerate(test)]),
    }


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


# ---------------------------------------------------------------------------------------------------------
# CoNLL-2003: `word POS chunk NER`, chunk and NER tags in IOB1 (B- only where a chunk or entity directly
# follows another of the same type), -DOCSTART- lines between documents, a blank line after each sentence.
# A template is a list of chunks "TYPE words" joined by " | "; a word takes its POS tag from CONLL_POS
# unless written word/TAG; {SLOT}s are filled per document so every name keeps one type throughout.
# ---------------------------------------------------------------------------------------------------------

CONLL_COUNTRIES = [("Ostria", "Ostrian"), ("Keldmark", "Keldish"), ("Varnholm", "Varnese"),
                   ("Tarrovia", "Tarrovian"), ("Amberland", "Amberlandic"), ("Seldovia", "Seldovan"),
                   ("Carvelia", "Carvelian"), ("Norrmark", "Norrish")]
CONLL_CITIES = ["Dunhaven", "Keldwick", "Port Anselm", "Brackenridge", "Elmsford", "Orrin Falls",
                "Marrowgate", "Saint Orla", "Vennick", "Harlow Bay", "Tessby", "Lindau Cross"]
CONLL_COMPANIES = ["Reinhart Motors", "Corvane Airlines", "Keldmark Mining", "Gravenor Steel",
                   "Tarrow Grain", "Ambrose Textiles", "Halvane Energy", "Pellam Shipping", "Quist Electric",
                   "Osterhal Paper"]
CONLL_PARTIES = ["Harbour Party", "Liberal Union", "Farmers League", "Green Alliance", "People 's Front"]
CONLL_TEAMS = ["Dunhaven United", "Keldwick Athletic", "Port Anselm Rovers", "Brackenridge City",
               "Elmsford Wanderers", "Vennick Albion", "Marrowgate Town", "Harlow Bay Rangers"]
CONLL_EVENTS = ["Northern Cup", "Harbour Games", "Amber Open", "Keldmark Grand Prix", "Coastal Classic",
                "Winter Trophy"]
CONLL_AGENCIES = ["Tarrow Press", "Ostrian News Service", "Keldpress", "Norrmark Wire"]
CONLL_BANKS = ["Central Bank", "National Bank", "Reserve Bank"]
CONLL_BODIES = ["National Assembly", "Supreme Court", "Senate", "Trade Ministry"]

CONLL_POS = dict(item.split("=") for item in """
the=DT The=DT a=DT an=DT its=PRP$ their=PRP$ his=PRP$ her=PRP$ this=DT that=IN who=WP which=WDT
said=VBD told=VBD won=VBD beat=VBD arrived=VBD met=VBD voted=VBD marched=VBD called=VBD leads=VBZ
rose=VBD fell=VBD closed=VBD agreed=VBD left=VBD expected=VBD scored=VBD joined=VBD hit=VBD retained=VBD
reported=VBD remained=VBD signed=VBD released=VBN approved=VBD rejected=VBD denied=VBD opened=VBD
would=MD will=MD could=MD not=RB resume=VB change=VB approve=VB buy=VB open=VB make=VB grow=VB
protest=VB play=VB meet=VB visit=VB discuss=VB raise=VB cut=VB face=VB
to=TO on=IN in=IN at=IN for=IN with=IN of=IN from=IN through=IN against=IN after=IN before=IN by=IN
between=IN over=IN and=CC or=CC but=CC
talks=NNS minister=NN president=NN government=NN policy=NN imports=NNS exports=NNS seats=NNS
parliament=NN results=NNS reporters=NNS budget=NN spokesman=NN opposition=NN elections=NNS
thousands=NNS people=NNS tax=NN delegation=NN days=NNS officials=NNS agency=NN news=NN border=NN
profit=NN percent=NN million=CD crowns=NNS shares=NNS cents=NNS exchange=NN stock=NN chief=JJ
executive=NN company=NN plant=NN stake=NN rates=NNS interest=NN ministry=NN trade=NN analysts=NNS
deal=NN producer=NN sales=NNS steel=NN half=NN goal=NN goals=NNS side=NN title=NN win=NN post=NN
coach=NN champion=NN matches=NNS league=NN minutes=NNS season=NN match=NN final=NN semi-final=NN
penalty=NN striker=NN captain=NN race=NN stage=NN lead=NN points=NNS victory=NN defeat=NN
first=JJ second=JJ new=JJ foreign=JJ official=JJ early=JJ central=JJ largest=JJS net=JJ first-half=JJ
unchanged=JJ higher=RBR lower=RBR twice=RB strongly=RB also=RB again=RB late=JJ overall=JJ
two=CD three=CD four=CD last=JJ next=JJ year=NN week=NN month=NN cabinet=NN prime=JJ mayor=NN
.=. ,=, -=: :=: (=( )=) 's=POS "="
""".split())

CONLL_HEADLINES = {
    "politics": [
        "NP {NAT1} minister | VP says | NP talks | PP with | NP {LOC2} | VP will resume",
        "NP {PER1} | VP wins | NP vote | PP in | NP {LOC1} parliament",
        "NP {BODY1} | VP rejects | NP {NAT2} call | PP for | NP new talks",
        "NP {PARTY1} | VP calls | PP for | NP early elections | PP in | NP {LOC1}",
    ],
    "business": [
        "NP {CO1} | VP says | NP profit | VP rose | NP {NUM1} percent",
        "NP {NAT1} exports | PP to | NP {LOC2} | VP fall | PP in | NP {MONTH}",
        "NP {CO1} | VP to buy | NP stake | PP in | NP {CO2}",
        "NP {BANK1} | VP leaves | NP rates | ADJP unchanged",
    ],
    "football": [
        "NP {SPORT} | O - | NP {TEAM1} | VP BEAT | NP {TEAM2} | PP IN | NP {EVENT1}",
        "NP {SPORT} | O - | NP {TEAM2} | VP LOSE/VBP | PP TO | NP {TEAM1}",
        "NP {SPORT} | O - | NP {NAT1} LEAGUE/NN RESULTS/NNS",
    ],
    "tennis": [
        "NP {SPORT} | O - | NP {PER1} | VP WINS | NP {EVENT1} TITLE/NN",
        "NP {SPORT} | O - | NP {NAT2} CHAMPION/NN | VP BEATEN/VBN | PP IN | NP {CITY1}",
        "NP {SPORT} | O - | NP {PERL1} | VP BEATS/VBZ | NP {PERL2} | PP IN | NP {CITY1}",
    ],
    "cycling": [
        "NP {SPORT} | O - | NP {PERL1} | VP WINS | NP STAGE/NN {NUM1}",
        "NP {SPORT} | O - | NP {PER1} | VP TAKES/VBZ | NP {EVENT1} LEAD/NN",
    ],
}
CONLL_BODY = {
    "politics": [
        "NP {PER1} | O , | NP the {NAT1} foreign minister | O , | VP said | PP on | NP {DAY} | SBAR that | "
        "NP talks | PP with | NP {LOC2} | VP would resume | PP in | NP {MONTH} | O .",
        "NP The {PARTY1} | VP won | NP {NUM1} seats | PP in | NP the parliament | PP of | NP {LOC1} | O , | "
        "VP according/VBG | PP to | NP official results | VP released | PP in | NP {CITY1} | O .",
        "NP {PERL1} | VP told | NP reporters | PP in | NP {CITY1} | SBAR that | NP the government | "
        "VP would not change | NP its policy | PP on | NP {NAT2} imports | O .",
        "NP The {BODY1} | VP voted | PP on | NP {DAY} | VP to approve | NP the budget | O , | "
        "NP a spokesman | PP for | NP {PER2} | VP said | O .",
        "NP {PER2} | O , | NP who | VP leads | NP the opposition {PARTY1} | O , | VP called | PP for | "
        "NP early elections | O .",
        "NP Thousands | PP of | NP people | VP marched | PP through | NP central {CITY1} | PP on | NP {DAY} | "
        "VP to protest | PP against | NP the new tax | O .",
        "NP The {NAT1} delegation | VP arrived | PP in | NP {CITY2} | PP for | NP two days | PP of | NP talks "
        "| PP with | NP {NAT2} officials | O .",
        "NP {PER1} | VP met | NP {PER2} | PP in | NP {CITY2} | PP on | NP {DAY} | O , | "
        "NP the {NAT1} news agency | NP {AGENCY} | VP reported | O .",
        "NP The {NAT1} {NAT2} talks | VP opened | PP in | NP {CITY2} | PP on | NP {DAY} | O .",
        "NP {PERL2} | VP denied | SBAR that | NP the {PARTY1} | VP would leave | NP the cabinet | O .",
        "NP The prime minister | VP will visit | NP {LOC2} | CONJP and | NP {LOC3} | NP next month | O , | "
        "NP {AGENCY} | VP said | O .",
        "NP The {BODY1} | VP rejected | NP the {PARTY1} call | PP for | NP a new vote | PP on | NP {DAY} | O .",
        "NP Officials | PP in | NP {CITY1} | VP said | NP the border | PP with | NP {LOC2} | VP remained/VBD | "
        "ADJP open/JJ | O .",
    ],
    "business": [
        "NP {CO1} | VP said | PP on | NP {DAY} | SBAR that | NP its first-half net profit | VP rose | "
        "NP {NUM1} percent | PP to | NP {NUM2} million crowns | O .",
        "NP Shares | PP in | NP {CO1} | VP closed | NP {NUM1} cents | ADVP higher | PP at | NP {NUM2} crowns "
        "| PP on | NP the {CITY1} stock exchange | O .",
        "NP {PER1} | O , | NP chief executive | PP of | NP {CO1} | O , | VP told | NP reporters | "
        "SBAR that | NP the company | VP would open | NP a new plant | PP in | NP {LOC1} | O .",
        "NP {CO1} | VP agreed | VP to buy | NP a stake | PP in | NP {CO2} | PP for | NP {NUM1} million crowns "
        "| O .",
        "NP The {NAT1} {BANK1} | VP left | NP interest rates | ADJP unchanged | PP at | NP {NUM3} percent | "
        "PP on | NP {DAY} | O .",
        "NP {NAT1} exports | PP to | NP {LOC2} | VP fell | NP {NUM3} percent | PP in | NP {MONTH} | O , | "
        "NP the trade ministry | VP said | O .",
        "NP Analysts | PP in | NP {CITY1} | VP said | NP the deal | VP would make | NP {CO1} | "
        "NP the largest {NAT1} steel producer | O .",
        "NP {PERL1} | VP said | NP the company | VP expected | NP sales | VP to grow | ADVP strongly | PP in | "
        "NP {LOC1} and {LOC2} | O .",
        "NP {CO2} | VP reported | NP a net loss | PP of | NP {NUM2} million crowns | PP for | NP the first half "
        "| O .",
        "NP {PER2} | O , | NP an analyst | PP at | NP {CO2} | O , | VP said | NP the results | VP were/VBD | "
        "ADJP better/JJR | PP than | NP expected/VBN | O .",
        "NP The {NAT1} {NAT2} trade talks | VP will resume | PP in | NP {CITY1} | NP next week | O .",
    ],
    "football": [
        "NP {TEAM1} | VP beat | NP {TEAM2} | NP {SCORE} | PP in | NP the {EVENT1} | PP on | NP {DAY} | O .",
        "NP {PER1} | VP scored | ADVP twice | PP for | NP {TEAM1} | PP in | NP the first half | O .",
        "NP {PERL1} | O , | NP who | VP joined | NP {TEAM1} | PP from | NP {TEAM2} | PP in | NP {MONTH} | "
        "O , | VP hit | NP the post | ADVP twice | O .",
        "NP {TEAM2} coach {PER2} | VP said | NP the side | VP would play | ADVP again | PP on | NP {DAY} | O .",
        "NP {PERL2} | VP took | NP the lead | PP after | NP {NUM1} minutes | PP for | NP {TEAM2} | O .",
        "NP {TEAM1} | VP are/VBP | ADVP now | NP {NUM1} points | ADVP clear/RB | PP at | NP the top | PP of | "
        "NP the {NAT1} league | O .",
        "NP The {TEAM1} {TEAM2} match | VP was/VBD postponed/VBN | PP after | NP heavy/JJ rain/NN | O .",
        "NP {PER2} | VP equalised/VBD | PP for | NP {TEAM2} | PP before | NP half-time/NN | O , | CONJP but | "
        "NP {PERL1} | VP scored | NP the winner | O .",
    ],
    "tennis": [
        "NP {PER1} | PP of | NP {LOC1} | VP won | NP the {EVENT1} | PP in | NP {CITY1} | PP on | NP {DAY} | "
        "O .",
        "NP {NAT2} champion {PER2} | VP lost | NP the title | PP to | NP {PER1} | O .",
        "NP {PER1} | O ( | NP {LOC1} | O ) | VP beat | NP {PER2} | O ( | NP {LOC2} | O ) | NP {SET} {SET2} | O .",
        "NP {PERL2} | O , | NP the {NAT2} number one | O , | VP withdrew/VBD | PP with | NP a knee injury | O .",
        "NP {PERL1} | VP will meet | NP {PER3} | PP of | NP {LOC3} | PP in | NP the final | PP on | NP {DAY} | "
        "O .",
    ],
    "cycling": [
        "NP {PER1} | PP of | NP {LOC1} | VP won | NP the {EVENT1} | PP in | NP {CITY1} | PP on | NP {DAY} | "
        "O .",
        "NP {PER1} | VP won | NP the second stage | PP of | NP the {EVENT1} | PP in | NP {CITY2} | O .",
        "NP {PERL1} | VP leads | NP the overall standings | PP by | NP {NUM1} seconds | PP from | NP {PERL2} | "
        "O .",
        "NP {PERL2} | O , | NP the {NAT2} champion | O , | VP withdrew/VBD | PP with | NP a knee injury | O .",
        "NP {PER3} | PP of | NP {LOC3} | VP finished/VBD | ADVP third/RB | O , | NP {NUM1} seconds | "
        "ADVP behind/RB | O .",
    ],
}
CONLL_POS.update({"says": "VBZ", "wins": "VBZ", "rejects": "VBZ", "calls": "VBZ", "fall": "VBP",
                  "leaves": "VBZ", "vote": "NN", "call": "NN", "BEAT": "VBD", "IN": "IN", "WINS": "VBZ",
                  "loss": "NN", "analyst": "NN", "than": "IN", "took": "VBD", "leave": "VB", "Officials": "NNS",
                  "Thousands": "NNS", "Shares": "NNS", "Analysts": "NNS", "Results": "NNS",
                  "TO": "TO", "now": "RB", "top": "NN", "winner": "NN", "lost": "VBD", "standings": "NNS",
                  "seconds": "NNS", "TAKES": "VBZ", "STAGE": "NN", "LEAD": "NN", "number": "NN", "one": "CD", "knee": "NN", "injury": "NN"})


def _conll_entities(rng: random.Random) -> dict[str, tuple[str, str]]:
    """Slot -> (text, NER type) for one document."""
    (land1, nat1), (land2, nat2), (land3, _) = rng.sample(CONLL_COUNTRIES, 3)
    p1, p2, p3 = (f"{first} {last}" for first, last in
                  zip(pick(rng, FIRST_NAMES, 3), pick(rng, LAST_NAMES, 3), strict=True))
    co1, co2 = pick(rng, CONLL_COMPANIES, 2)
    team1, team2 = pick(rng, CONLL_TEAMS, 2)
    city1, city2 = pick(rng, CONLL_CITIES, 2)
    return {
        "PER1": (p1, "PER"), "PER2": (p2, "PER"), "PER3": (p3, "PER"), "PERL1": (p1.split()[-1], "PER"),
        "PERL2": (p2.split()[-1], "PER"), "LOC1": (land1, "LOC"), "LOC2": (land2, "LOC"),
        "LOC3": (land3, "LOC"), "NAT1": (nat1, "MISC"), "NAT2": (nat2, "MISC"), "CITY1": (city1, "LOC"),
        "CITY2": (city2, "LOC"), "CO1": (co1, "ORG"), "CO2": (co2, "ORG"), "TEAM1": (team1, "ORG"),
        "TEAM2": (team2, "ORG"), "PARTY1": (rng.choice(CONLL_PARTIES), "ORG"),
        "BODY1": (rng.choice(CONLL_BODIES), "ORG"), "BANK1": (rng.choice(CONLL_BANKS), "ORG"),
        "AGENCY": (rng.choice(CONLL_AGENCIES), "ORG"), "EVENT1": (rng.choice(CONLL_EVENTS), "MISC"),
        "DAY": (rng.choice(DAYS), ""), "MONTH": (rng.choice(MONTHS), ""),
    } | _conll_numbers(rng)


def _conll_numbers(rng: random.Random) -> dict[str, tuple[str, str]]:
    """Fresh numbers for each sentence (names stay fixed for the whole document)."""
    sets = ["6-4", "6-3", "7-5", "6-2", "7-6", "6-1"]
    return {
        "NUM1": (str(rng.randint(2, 40)), ""), "NUM2": (str(rng.randint(61, 900)), ""),
        "NUM3": (f"{rng.randint(1, 9)}.{rng.randint(0, 9)}", ""),
        "SCORE": (f"{rng.randint(2, 5)}-{rng.randint(0, 1)}", ""),
        "SET": (rng.choice(sets), ""), "SET2": (rng.choice(sets), ""),
    }


Token = tuple[str, str, str, str]  # word, POS, chunk, NER


def _slot_pos(slot: str, word: str) -> str:
    if slot.startswith("NAT"):
        return "JJ"
    if slot.startswith(("NUM", "SCORE", "SET", "DATE")):
        return "CD"
    if word == "'s":
        return "POS"
    return "NNP"


def conll_sentence(template: str, ents: Mapping[str, tuple[str, str]], upper: bool = False) -> list[Token]:
    """Expand a chunk template into tagged tokens (IOB1 chunks and entities)."""
    tokens: list[Token] = []
    prev_chunk, prev_entity = "O", ("", -1)  # (type, id) of the entity the previous token belongs to
    for n_entity, segment in enumerate(template.split(" | ")):
        chunk_type, *words = segment.split()
        first_in_chunk = True
        for w_index, item in enumerate(words):
            slot = item[1:-1] if item.startswith("{") else ""
            if slot:
                text, ner = ents[slot]
                parts = [(w, _slot_pos(slot, w)) for w in text.split()]
            else:
                word, _, tag = item.partition("/")
                parts, ner = [(word, tag or CONLL_POS.get(word) or CONLL_POS[word.lower()])], ""
            for p_index, (word, pos) in enumerate(parts):
                if chunk_type == "O":
                    chunk = "O"
                else:
                    starts = first_in_chunk and prev_chunk == chunk_type
                    chunk = ("B-" if starts else "I-") + chunk_type
                entity_id = (ner, n_entity * 100 + w_index)
                if ner:
                    starts = p_index == 0 and prev_entity[0] == ner and prev_entity != entity_id
                    tag = ("B-" if starts else "I-") + ner
                else:
                    tag = "O"
                tokens.append((word.upper() if upper else word, pos, chunk, tag))
                prev_entity = entity_id if ner else ("", -1)
                first_in_chunk = False
        prev_chunk = chunk_type
    return tokens


def _conll_document(rng: random.Random) -> list[list[Token]]:
    ents = dict(_conll_entities(rng))
    domain = rng.choice(["politics", "business", "football", "football", "tennis", "cycling"])
    sport = {"football": rng.choice(["SOCCER", "RUGBY"]), "tennis": "TENNIS", "cycling": "CYCLING"}
    ents["SPORT"] = (sport.get(domain, ""), "")
    ents["CITYU"] = (rng.choice(CONLL_CITIES).upper(), "LOC")
    ents["DATE"] = (f"19{rng.randint(90, 99)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}", "")
    sentences = [conll_sentence(rng.choice(CONLL_HEADLINES[domain]) + " | O .", ents, upper=domain in sport),
                 conll_sentence("NP {CITYU} {DATE}", ents)]
    if domain == "football" and rng.random() < 0.5:
        # A results table, as agency sports reports print them.
        sentences.append(conll_sentence("NP Results | PP of | NP {NAT1} league matches | PP on | NP {DAY} | "
                                        "O :", ents))
        teams = rng.sample(CONLL_TEAMS, 2 * rng.randint(2, 4))
        for home, away in zip(teams[::2], teams[1::2], strict=True):
            row = dict(ents, H=(home, "ORG"), A=(away, "ORG"), G1=(str(rng.randint(0, 4)), ""),
                       G2=(str(rng.randint(0, 4)), ""))
            sentences.append(conll_sentence("NP {H} {G1} {A} {G2}", row))
        return sentences
    for template in pick(rng, CONLL_BODY[domain], rng.randint(2, min(5, len(CONLL_BODY[domain])))):
        sentences.append(conll_sentence(template, ents | _conll_numbers(rng)))
    return sentences


def _conll_text(documents: list[list[list[Token]]]) -> str:
    lines = []
    for document in documents:
        lines += ["-DOCSTART- -X- O O", ""]
        for sentence in document:
            lines += [" ".join(token) for token in sentence] + [""]
    return "\n".join(lines) + "\n"


def _take_sentences(rng: random.Random, n: int) -> list[list[list[Token]]]:
    documents, total = [], 0
    while total < n:
        document = _conll_document(rng)[: n - total]
        documents.append(document)
        total += len(document)
    return documents


def build_conll(rng: random.Random, sizes: Sizes) -> Files:
    n_train, n_dev = sizes.conll
    return {"conll2003/eng.train": _conll_text(_take_sentences(rng, n_train)),
            "conll2003/eng.testa": _conll_text(_take_sentences(rng, n_dev))}


# ---------------------------------------------------------------------------------------------------------
# WNUT-17: tweets, `token<TAB>tag` in IOB2 over six types. The real train file separates sentences with
# tab-only lines for most of the file and empty lines near its end; the dev file uses empty lines.
# ---------------------------------------------------------------------------------------------------------

WNUT_ENTITIES = {
    "person": ["Jessa Marlow", "Tobin Reyes", "Kit Halloran", "Mina Okafor", "Dex Calloway", "Priya Vance",
               "Rory Ashdown", "Lulu Santee", "Benji Okoro", "Saoirse Lamb", "Ivo Marchal", "Juno Park"],
    "location": ["Port Selden", "Marrow Street", "Lake Ivel", "Brackley Park", "East Hollis", "Dunmore",
                 "Kingsferry", "Ashgrove Beach", "Fenlow", "Cedar Point Pier", "North Tarrant"],
    "corporation": ["Zentotek", "Brightline Air", "Hollow Pine Coffee", "Quickcart", "Netmoor",
                    "Solvane Bank", "Glimmer Studios", "Parcelbee", "Velo Mobile"],
    "product": ["Zento X3", "Pixelmate 7", "Brewmax 200", "Skyline Buds", "Roamer 5", "Netmoor Go",
                "Glowpad Mini", "Parcelbee Box"],
    "creative-work": ["The Glass Orchard", "Midnight in Selden", "Paper Hearts", "Season of Kites",
                      "Lantern Road", "Salt and Static", "Ninth Harbour", "Sleepwalk City"],
    "group": ["The Paper Lanterns", "Selden Rovers", "Echo Vale Choir", "Velvet Static", "Night Owls FC",
              "Harbour Kids", "The Ashdown Five", "Fenlow Falcons"],
}

# {type} slots take an entity; @, # and url slots make tweet noise that is always O.
WNUT_TEMPLATES = [
    "just watched {creative-work} with {person} and i ca n't stop crying lol",
    "{person} live at {location} tonight !!! who 's coming",
    "my {product} died again ... thanks {corporation} #fail",
    "RT {at} : {group} are playing {location} on saturday {url}",
    "anyone know if {corporation} is hiring in {location} ?",
    "can't believe {person} just left {group} omg",
    "stuck at {location} for 2 hours , {corporation} please fix your trains",
    "{creative-work} is the best album of the year , fight me",
    "new {product} arrived today and it 's so fast {hash}",
    "shoutout to {person} for the amazing set at {location} {hash}",
    "{group} won again !! {location} is going crazy right now",
    "listening to {creative-work} on repeat while it rains in {location}",
    "{corporation} customer service is the worst , been on hold 40 mins",
    "{at} did you see {person} on tv last night ? lmao",
    "going to {location} this weekend with {person} :)",
    "who else is watching {creative-work} tonight ? no spoilers pls",
    "{corporation} just raised prices again smh",
    "finally got tickets for {group} at {location} !!!",
    "is the {product} worth it or should i wait ?",
    "{person} and {person} in the same movie ?? yes please",
    "{at} {at} meet us outside {location} at 8",
    "i miss {location} so much , take me back {hash}",
    "reading {creative-work} by {person} , chapter 3 already",
    "{group} fans where you at {hash}",
    "my mom just bought a {product} lol welcome to 2017",
    "traffic on {location} is insane today",
    "so proud of {person} for finishing the {location} marathon",
    "{corporation} app keeps crashing on my {product}",
    "happy birthday {person} !! hope {location} treats you well",
    "{group} new song is fire {url}",
    "anyone else think {creative-work} was overrated ?",
    "free coffee at {corporation} today if you bring a cup {hash}",
    "lost my keys somewhere near {location} again ...",
    "{person} : the real star of {creative-work}",
    "the {group} game got delayed because of the storm",
    "waiting for my {product} from {corporation} like",
    "bored at home , thinking about {location}",
    "nothing beats a sunday walk by {location}",
    "ugh monday again",
    "can someone explain why {corporation} thinks this is ok {url}",
]
WNUT_HANDLES = ["@selden_daily", "@kitkat_runs", "@minaokay", "@the_real_dex", "@harbourfm", "@junebugz",
                "@fenlow_news", "@coffeeandrain"]
WNUT_HASHTAGS = ["#blessed", "#nofilter", "#weekendvibes", "#ugh", "#latergram", "#love", "#tbt",
                 "#mondaymood"]


def _wnut_tweet(rng: random.Random) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    used: set[str] = set()

    def draw(items: Sequence[str]) -> str:
        choice = rng.choice([x for x in items if x not in used])
        used.add(choice)
        return choice

    for item in rng.choice(WNUT_TEMPLATES).split():
        slot = item[1:-1] if item.startswith("{") else ""
        if slot in WNUT_ENTITIES:
            name = draw(WNUT_ENTITIES[slot])
            if slot in ("person", "location") and rng.random() < 0.15:
                name = name.lower()  # tweets often skip capitals; the tag stays
            tokens += [(w, ("B-" if i == 0 else "I-") + slot) for i, w in enumerate(name.split())]
        elif slot == "at":
            tokens.append((draw(WNUT_HANDLES), "O"))
        elif slot == "hash":
            tokens.append((rng.choice(WNUT_HASHTAGS), "O"))
        elif slot == "url":
            tokens.append(("http://t.co/" + "".join(rng.choices(string.ascii_letters + string.digits, k=8)),
                           "O"))
        else:
            tokens.append((item, "O"))
    return tokens


def build_wnut(rng: random.Random, sizes: Sizes) -> Files:
    n_train, n_dev = sizes.wnut
    tweets = unique(rng, lambda: tuple(_wnut_tweet(rng)), n_train + n_dev, key=lambda t: repr(t))
    train, dev = split(tweets, sizes.wnut)

    def lines(tweets: list[tuple], separator: Callable[[int], str]) -> str:
        out = []
        for i, tweet in enumerate(tweets):
            out += [f"{word}\t{tag}" for word, tag in tweet] + [separator(i)]
        return "\n".join(out) + "\n"

    tab_until = int(len(train) * 0.7)
    return {
        "wnut17/wnut17train.conll": lines(train, lambda i: "\t" if i < tab_until else ""),
        "wnut17/emerging.dev.conll": lines(dev, lambda i: ""),
    }


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


# ---------------------------------------------------------------------------------------------------------
# WikiText-2: invented encyclopedia articles, tokenized the WikiText way (spaces around punctuation,
# @-@ / @,@ / @.@ inside hyphenated words and numbers, <unk> for some rare words). Every line starts with
# a space; ` = Title = ` opens an article, ` = = Section = = ` a section, and lines holding one space sit
# around headings.
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    heading: str
    sentences: Sequence[str]  # in reading order; an article keeps a subset, in this order
    subsections: Sequence[Section] = ()


def _village_facts(r: random.Random) -> dict[str, str]:
    name = r.choice(SQUAD_TOWNS)
    return {
        "title": name, "name": name, "region": r.choice(SQUAD_REGIONS), "river": r.choice(SQUAD_RIVERS),
        "county_town": r.choice(CITIES), "km": str(r.randint(6, 40)), "pop": _num(r, 300, 9000, 1),
        "census": str(r.choice([2001, 2011])), "old_name": name[:3] + r.choice(["ebi", "ingas", "tun", "wic"]),
        "meaning": r.choice(["farm by the ford", "settlement of the people of the hill", "wet meadow",
                             "clearing in the oak wood"]),
        "book_year": str(r.randint(1080, 1090)), "lord": person(r), "charter": str(r.randint(1200, 1350)),
        "industry": r.choice(["wool", "lace", "brick", "malt", "rope", "leather"]),
        "church": f"St {r.choice(['Orla', 'Aidan', 'Bride', 'Cuthbert', 'Wenna', 'Petroc'])}",
        "church_century": r.choice(["twelfth", "thirteenth", "fourteenth"]),
        "railway": str(r.randint(1845, 1880)), "rail_closed": str(r.randint(1952, 1968)),
        "school": str(r.randint(1850, 1900)), "pub": f"The {r.choice(['Plough', 'Black Swan', 'Wheatsheaf', 'Ferry Boat', 'Bell'])}",
        "fair": r.choice(["Plough Monday fair", "midsummer fair", "Michaelmas fair", "sheep fair"]),
        "height": str(r.randint(20, 320)), "hill": f"{r.choice(['Hob', 'Crane', 'Beacon', 'Raven'])} Hill",
        "mp": person(r), "flood": str(r.randint(1947, 2012)), "houses": str(r.randint(20, 400)),
    }


VILLAGE_SECTIONS = [
    Section("", [
        "{name} is a village and civil parish in {region}, about {km} kilometres from {county_town}.",
        "It lies on the north bank of the River {river}, below the slopes of {hill}.",
        "At the {census} census the parish had a population of {pop}.",
        "The village is known for its {church_century}-century church and for the {fair}, which has been held "
        "there for more than six hundred years.",
    ]),
    Section("History", [], [
        Section("Early history", [
            "Flint tools found on {hill} show that the area was settled long before the village itself "
            "existed.",
            "The name {name} comes from the Old English {old_name}, usually taken to mean \" {meaning} \".",
            "In {book_year} the manor was recorded as belonging to {lord}, who held land for twelve "
            "ploughs and a mill.",
            "A royal charter of {charter} granted the lord of the manor the right to hold a weekly market and "
            "an annual fair.",
            "The market was never large, but the fair attracted traders from across the county and was still "
            "being held in the 1800s.",
        ]),
        Section("Modern history", [
            "During the eighteenth and nineteenth centuries the village grew around the {industry} trade, "
            "and by 1851 nearly half of the working population was employed in it.",
            "The railway reached {name} in {railway}, when a small station was opened on the line to "
            "{county_town}.",
            "The station was closed to passengers in {rail_closed}, and the track was lifted a few years later.",
            "A National School was opened in {school}; it is still in use as the village primary school.",
            "In {flood} the River {river} burst its banks and {houses} houses were flooded, which led to the "
            "building of a new flood wall along the north bank.",
            "The population fell for most of the twentieth century, but new housing built since the 1990s has "
            "brought it back to its nineteenth-century level.",
        ]),
    ]),
    Section("Geography", [
        "The parish covers a strip of land running from the river meadows up to the top of {hill}, which "
        "rises to {height} metres.",
        "The older part of the village is built on a low gravel terrace, safe from all but the worst floods.",
        "Most of the land is farmed, with pasture near the river and arable fields on the higher ground.",
        "A public footpath follows the river from {name} to {county_town}, and is popular with walkers in "
        "summer.",
        "The soil on the higher ground is thin and chalky, while the meadows by the river are heavy clay.",
    ]),
    Section("Landmarks", [
        "The parish church of {church} dates from the {church_century} century, although the tower was "
        "rebuilt in 1768 after it was struck by lightning.",
        "Inside the church are a carved oak screen and a series of memorials to the families who held the "
        "manor.",
        "{pub}, on the main street, is a timber-framed building of the sixteenth century and one of the "
        "oldest houses in the village.",
        "The former {industry} warehouse by the old station has been converted into flats.",
        "Near the river is a stone bridge of three arches, first mentioned in a document of 1402.",
    ]),
    Section("Governance", [
        "{name} has a parish council of nine members, which meets once a month in the village hall.",
        "For elections to the district council the village forms part of the {river} Valley ward.",
        "The parish has been part of the same parliamentary constituency since 1885; its member of "
        "parliament is {mp}.",
        "Until 1894 the village was governed by the vestry of the parish church, which looked after the "
        "roads and the poor.",
        "The parish council owns the village green, the allotments and a small wood on the lower slopes of "
        "{hill}.",
    ]),
    Section("Transport", [
        "The main road from {county_town} passes through the village, and a bus runs to the town every hour "
        "during the day.",
        "The nearest railway station is now in {county_town}, {km} kilometres away.",
        "The old railway line has been turned into a cycle path, which follows the river for most of its "
        "length.",
        "Before the railway came, goods were carried on the river in flat-bottomed boats as far as the mill "
        "weir below the village.",
    ]),
    Section("Culture and community", [
        "The {fair} is still held each year, although it is now mostly a funfair with a few craft stalls.",
        "The village has a cricket club, founded in 1877, which plays on a ground beside the church.",
        "A local history society was formed in 1974 and has published several books about the parish.",
        "Morris dancers from the village perform on the green on the morning of the fair.",
        "The village hall, built in 1921 as a memorial to the men of the parish killed in the First World "
        "War, is used for meetings, concerts and a weekly market.",
    ]),
]


SHIPPING_LINES = ["Saltmarsh Shipping", "the Tarrow Steam Packet Company", "the Northern Coast Line",
                  "the Orrin Navigation Company"]


def _ship_facts(r: random.Random) -> dict[str, str]:
    name = r.choice(["Kestrel", "Margery Ann", "Northern Star", "Resolute", "Tarrow Belle", "Swiftsure",
                     "Heron", "Lady Alvane", "Pioneer", "Selden Queen"])
    kind = r.choice(["paddle steamer", "three-masted barque", "screw steamer", "coastal schooner"])
    built = r.randint(1840, 1905)
    return {
        "title": f"SS {name}" if "steamer" in kind else name, "name": name, "kind": kind,
        "yard": f"{r.choice(LAST_NAMES)} & Sons", "port": r.choice(CITIES), "built": str(built),
        "launched": f"{r.randint(1, 28)} {r.choice(MONTHS)} {built}", "owner": r.choice(SHIPPING_LINES),
        "length": f"{r.randint(40, 95)}.{r.randint(0, 9)}", "tons": _num(r, 300, 2600, 1),
        "crew": str(r.randint(12, 60)), "passengers": str(r.randint(80, 600)), "captain": person(r),
        "route": f"{r.choice(CITIES)} and {r.choice(SQUAD_TOWNS)}", "speed": str(r.randint(8, 16)),
        "wreck_year": str(built + r.randint(12, 40)), "rock": f"the {r.choice(['Mare', 'Gannet', 'Skerry', 'Black'])} Rocks",
        "saved": str(r.randint(10, 90)), "cargo": r.choice(["coal", "timber", "grain", "china clay", "slate"]),
        "sister": r.choice(["Curlew", "Osprey", "Merlin", "Fulmar"]),
    }


SHIP_SECTIONS = [
    Section("", [
        "{title} was a {kind} built in {built} by {yard} of {port} for {owner}.",
        "She spent most of her career carrying passengers and {cargo} between {route}.",
        "She was one of the fastest ships on the route, and was remembered fondly by those who sailed in "
        "her.",
        "She was wrecked on {rock} in {wreck_year}; {saved} people were rescued.",
    ]),
    Section("Design and construction", [
        "{name} was ordered in {built} as a larger version of her sister ship {sister}.",
        "She was {length} metres long and measured {tons} gross register tons.",
        "Her hull was built of iron, with five watertight bulkheads, which was unusual for a ship of her size "
        "at the time.",
        "She was launched on {launched}, and was named by the wife of the chairman of {owner}.",
        "Her engines gave her a speed of {speed} knots, about two knots faster than {sister}.",
        "She had accommodation for {passengers} passengers and a crew of {crew}.",
    ]),
    Section("Service history", [], [
        Section("Early career", [
            "{name} entered service in the spring after her launch, under the command of Captain {captain}.",
            "On her first voyage she made the crossing in under six hours, a record that stood for many "
            "years.",
            "In her early years she carried {cargo} on the outward voyage and passengers on the return.",
            "A fire in the engine room in her third season put her out of service for four months.",
        ]),
        Section("Later career", [
            "As larger ships came into service, {name} was moved to the winter timetable and to cargo work.",
            "In 1898 she was sold to a smaller company, which kept her on the same route.",
            "Her engines were replaced during a refit that lasted most of a year, and her funnel was "
            "lengthened.",
            "By the end of her career she was one of the oldest ships still working on the coast.",
        ]),
    ]),
    Section("Loss", [
        "On the night of the wreck {name} was sailing in thick fog with a cargo of {cargo}.",
        "She struck {rock} shortly after midnight and began to take on water.",
        "The crew launched the boats, and {saved} passengers and crew were taken off by a lifeboat from "
        "the nearest harbour.",
        "An inquiry found that the captain had kept too close to the shore in poor visibility.",
        "The wreck lies in shallow water and is often visited by divers.",
    ]),
    Section("Investigation of the wreck site", [
        "The wreck was first surveyed by divers from a local club in the 1970s.",
        "They found the boilers, the lower part of the hull and one of the paddle shafts still in place.",
        "Part of the cargo of {cargo} can still be seen among the rocks at low tide.",
        "In 2004 the site was given legal protection, and divers now need a licence to remove anything "
        "from it.",
        "A later survey showed that the hull had broken into three pieces, probably during a storm in the "
        "winter after the wreck.",
    ]),
    Section("Legacy", [
        "A model of {name} is displayed in the museum at {port}.",
        "Her bell was recovered from the wreck and now hangs in a church near {rock}.",
        "A song about the wreck, written soon after, is still sung in the area.",
        "The lifeboat crew who rescued the passengers were given silver medals for their bravery.",
        "The loss of {name} led the harbour board to build a lighthouse on the headland above {rock}.",
    ]),
]


def _album_facts(r: random.Random) -> dict[str, str]:
    band = r.choice(WNUT_ENTITIES["group"])
    title = r.choice(["Paper Weather", "The Long Field", "Harbour Lights", "Glasshouse", "Northbound",
                      "Static and Salt", "Low Tide Songs", "The Quiet Year"])
    year = r.randint(1968, 2012)
    return {
        "title": f"{title} (album)", "album": title, "band": band, "year": str(year),
        "number": r.choice(["second", "third", "fourth", "fifth"]), "label": r.choice(["Orchard Records",
                                                                                         "Low Bridge", "Kestrel Sound", "Tin Roof Records"]),
        "producer": person(r), "studio": f"{r.choice(['Mill House', 'Seaview', 'Old Chapel', 'Ironworks'])} "
                                          "Studios", "city": r.choice(CITIES), "weeks": str(r.randint(3, 10)),
        "single": r.choice(["Carry the Light", "Northern Line", "Salt in the Wound", "Open Water",
                            "Second Hand Summer", "Weathervane"]),
        "chart": str(r.randint(2, 40)), "singer": person(r), "sales": _num(r, 50000, 900000, 1000),
        "minutes": f"{r.randint(34, 58)}", "tracks": str(r.randint(9, 14)),
    }


ALBUM_SECTIONS = [
    Section("", [
        "{album} is the {number} studio album by {band}, released in {year} on {label}.",
        "It was produced by {producer} and recorded at {studio} in {city}.",
        "The album reached number {chart} on the national chart and has sold more than {sales} copies.",
        "Its lead single, \" {single} \", became the band's best-known song.",
    ]),
    Section("Background", [
        "After the tour for their previous album, the members of {band} took a year off.",
        "Singer {singer} spent much of that year writing at home, and later said that most of the songs came "
        "from long walks along the coast.",
        "The band wanted a warmer, less polished sound than on their earlier records.",
        "They chose {producer} after hearing a record the producer had made with a folk group in {city}.",
    ]),
    Section("Recording", [
        "Recording began at {studio} and took {weeks} weeks.",
        "Most of the songs were recorded live, with the whole band playing in one room.",
        "The string parts were added later by a quartet from the local music college.",
        "{producer} encouraged the band to keep mistakes in the takes if the feeling was right.",
        "A storm cut the power to the studio for two days, and the band used the time to write the closing "
        "track.",
    ]),
    Section("Composition", [
        "The album has {tracks} tracks and lasts about {minutes} minutes.",
        "The songs move between quiet acoustic pieces and louder, guitar-led rock songs.",
        "Many of the lyrics deal with leaving home, the sea and the changing seasons.",
        "\" {single} \" is built around a piano figure that {singer} wrote as a teenager.",
    ]),
    Section("Release and reception", [
        "{album} was released in {year} and entered the chart at number {chart}.",
        "Critics praised the album's warmth and the strength of its songwriting.",
        "One reviewer called it \" the sound of a band finding its voice \", while another found the slower "
        "songs too long.",
        "The album has since been reissued twice, with demos and live recordings added.",
        "In a poll of readers of a national music magazine it was voted one of the best albums of the decade.",
    ]),
    Section("Touring", [
        "{band} toured for most of the following year to support the album.",
        "The tour began with a run of small club dates and ended with two nights at a large hall in {city}.",
        "Several of the quieter songs were rearranged for the stage, with the whole band playing on "
        "acoustic instruments.",
        "A recording of one of the {city} concerts was later released as a live album.",
        "The band played \" {single} \" at the end of every show, and it has stayed in their set lists since.",
    ]),
    Section("Legacy", [
        "{album} is often named as the band's best record, and many later groups have named it as an "
        "influence.",
        "For the twentieth anniversary of its release the band played the whole album in order on a short "
        "tour.",
        "{singer} has said that the record \" still sounds like a room full of friends \".",
        "\" {single} \" has been covered by many artists and is often played on the radio.",
    ]),
]


def _bird_facts(r: random.Random) -> dict[str, str]:
    common = r.choice(["Varnholm warbler", "marsh lark", "amber-throated finch", "Selden rail",
                       "grey-capped bunting", "coastal pipit", "Keld bush-robin"])
    return {
        "title": common.capitalize(), "common": common, "Common": common.capitalize(),
        "latin": f"{r.choice(['Sylvara', 'Alaudina', 'Fringa', 'Rallina', 'Emberiza'])} "
                 f"{r.choice(['selda', 'varnica', 'keldi', 'ambrina', 'orrina'])}",
        "describer": person(r), "described": str(r.randint(1780, 1890)), "length": str(r.randint(11, 28)),
        "weight": str(r.randint(9, 60)), "range": r.choice(SQUAD_REGIONS),
        "habitat": r.choice(["reed beds", "open heath", "wet meadows", "the edges of broadleaf woodland"]),
        "eggs": r.choice(["three to five", "four to six", "two or three"]), "days": str(r.randint(11, 16)),
        "food": r.choice(["insects and spiders", "seeds and small snails", "beetles and their larvae"]),
        "pairs": _num(r, 800, 40000, 100), "colour": r.choice(["olive-brown", "grey", "sandy brown"]),
    }


BIRD_SECTIONS = [
    Section("", [
        "The {common} ({latin}) is a small songbird found in {range}.",
        "It is about {length} centimetres long and has {colour} upperparts with paler, streaked underparts.",
        "It breeds in {habitat} and feeds mainly on {food}.",
        "The species is not thought to be threatened, although its numbers have fallen in places where its "
        "habitat has been drained.",
    ]),
    Section("Taxonomy", [
        "The {common} was first described by the naturalist {describer} in {described}.",
        "{describer} placed it in a genus of its own, but later authors moved it to its present genus.",
        "No subspecies are recognised, although birds from the coast are slightly larger than those inland.",
        "The common name refers to its range, while the specific name honours the region where the first "
        "specimen was collected.",
    ]),
    Section("Description", [
        "Adults weigh between {weight} and {weight2} grams.",
        "The sexes look alike, but males are slightly brighter in the breeding season.",
        "Young birds are duller than adults and have a buff wash on the breast.",
        "The song is a fast, rising series of clear notes, often given from the top of a bush.",
        "It is most easily told from similar species by its pale eye-ring and short tail.",
        "The call is a short, dry ticking, given when the bird is alarmed.",
        "In flight it shows a pale patch on the rump.",
    ]),
    Section("Distribution and habitat", [
        "The {common} is found throughout {range}, from sea level up to about 900 metres.",
        "Its preferred habitat is {habitat}, but it also nests in overgrown gardens.",
        "Birds from the higher parts of the range move downhill in winter.",
        "The total population is estimated at about {pairs} breeding pairs.",
    ]),
    Section("Behaviour", [], [
        Section("Breeding", [
            "The nest is a neat cup of grass and moss, built low in thick vegetation.",
            "The female lays {eggs} eggs, which she incubates for about {days} days.",
            "Both parents feed the chicks, which leave the nest about two weeks after hatching.",
            "Pairs often raise a second brood in good years.",
        ]),
        Section("Feeding", [
            "The {common} feeds mainly on {food}, which it finds by searching through leaves and bark.",
            "In winter it also takes small berries and seeds.",
            "It usually feeds alone or in pairs, but small flocks form in cold weather.",
            "Young birds are fed almost entirely on caterpillars.",
        ]),
        Section("Predators and parasites", [
            "Eggs and chicks are taken by crows, weasels and domestic cats.",
            "Adults are hunted by sparrowhawks, especially in winter when cover is thin.",
            "The species is sometimes used as a host by the common cuckoo.",
        ]),
    ]),
    Section("Status and conservation", [
        "The {common} is listed as a species of least concern, as its range is large and its population is "
        "stable overall.",
        "Locally, however, it has declined where {habitat} have been drained or ploughed.",
        "A survey in 2010 found {pairs} pairs, about a fifth fewer than a similar survey twenty years "
        "earlier.",
        "Nature reserves in {range} protect some of the most important breeding sites.",
        "Farmers in parts of its range are paid to leave field margins uncut until the young birds have "
        "left the nest.",
    ]),
    Section("In culture", [
        "The {common} appears in several local folk songs, in which its song is a sign that spring has come.",
        "In parts of {range} it was once believed that hearing the bird before breakfast brought good luck.",
        "It has appeared on a postage stamp and is the emblem of a regional birdwatching society.",
    ]),
]


def _painter_facts(r: random.Random) -> dict[str, str]:
    name = f"{r.choice(FEMALE_FIRST_NAMES)} {r.choice(LAST_NAMES)}"
    born = r.randint(1790, 1900)
    return {
        "title": name, "name": name, "surname": name.split()[-1], "born": str(born),
        "died": str(born + r.randint(48, 90)), "town": r.choice(SQUAD_TOWNS), "city": r.choice(CITIES),
        "teacher": person(r), "school": f"the {r.choice(CITIES)} School of Art", "painting": r.choice(
            ["The Ferry at Dusk", "Women Mending Nets", "Snow on the Mill Pond", "The Harvest Supper",
             "Morning, Low Tide", "The Orchard Wall"]),
        "exhibited": str(born + r.randint(22, 35)), "gallery": f"the {r.choice(CITIES)} Gallery",
        "subject": r.choice(["harbours and fishing boats", "farm workers", "river landscapes",
                             "city streets at night"]),
        "works": _num(r, 200, 1500, 10), "price": _num(r, 5000, 400000, 500),
    }


PAINTER_SECTIONS = [
    Section("", [
        "{name} ({born}–{died}) was a painter known for her pictures of {subject}.",
        "She was born in {town} and studied at {school}.",
        "Her best-known work, {painting}, was first shown at {gallery} in {exhibited}.",
        "She produced about {works} paintings and many more drawings during a career of over forty years.",
    ]),
    Section("Early life", [
        "{surname} was born in {town} in {born}, the eldest of four children of a schoolteacher.",
        "She began drawing as a child, and her mother kept many of her early sketches.",
        "At sixteen she went to {school}, where she was taught by {teacher}.",
        "{teacher} encouraged her to paint outdoors, which was still unusual for students at the time.",
    ]),
    Section("Career", [
        "After leaving art school, {surname} moved to {city} and shared a studio with two other painters.",
        "Her first pictures sold slowly, and for some years she worked as an illustrator for magazines.",
        "The showing of {painting} in {exhibited} brought her wide attention.",
        "In the following years she travelled along the coast, painting {subject} in all weathers.",
        "She was elected a member of the national academy in her fifties, one of the first women to be so "
        "honoured.",
    ]),
    Section("Style", [
        "{surname} painted with broad, quick strokes and a limited range of colours.",
        "Critics have compared her handling of light to that of the leading landscape painters of her day.",
        "Her later work became looser and brighter, and she often left parts of the canvas bare.",
        "She rarely painted portraits, and said that she preferred \" people at work to people posing \".",
    ]),
    Section("Personal life", [
        "{surname} never married, and lived for most of her adult life with her younger sister.",
        "She was a keen gardener, and several of her later paintings show the garden of her house in {city}.",
        "Friends described her as shy in company but fiercely determined in her work.",
        "She kept a diary for more than fifty years, which is now held by {gallery}.",
    ]),
    Section("Exhibitions", [
        "{surname} showed work at the annual exhibition of the national academy almost every year from "
        "{exhibited} until her death.",
        "Her first one-woman exhibition was held in {city} and included more than sixty paintings.",
        "A travelling exhibition of her harbour pictures visited five cities in the 1990s.",
        "In 2015 {gallery} held a large exhibition of her drawings, many of which had never been shown.",
    ]),
    Section("Later life and legacy", [
        "In old age {surname} returned to {town}, where she painted until a few months before her death in "
        "{died}.",
        "A retrospective exhibition was held at {gallery} ten years later.",
        "In 2009 one of her harbour scenes sold at auction for {price} pounds, a record for her work.",
        "A street in {town} is named after her, and the house where she was born carries a plaque.",
    ]),
]

def _castle_facts(r: random.Random) -> dict[str, str]:
    town = r.choice(SQUAD_TOWNS)
    built = r.randint(1070, 1320)
    return {
        "title": f"{town} Castle", "castle": f"{town} Castle", "town": town, "built": str(built),
        "builder": person(r), "river": r.choice(SQUAD_RIVERS), "region": r.choice(SQUAD_REGIONS),
        "rebuilt": str(built + r.randint(60, 180)), "siege": str(r.randint(1400, 1660)),
        "days": str(r.randint(9, 120)), "ruin": str(r.randint(1660, 1780)), "keep": str(r.randint(14, 32)),
        "wall": f"{r.randint(2, 4)}.{r.randint(0, 9)}", "visitors": _num(r, 20000, 250000, 1000),
        "trust": r.choice(["the Heritage Trust", "the county council", "the National Castles Board"]),
        "family": f"the {r.choice(LAST_NAMES)} family", "towers": r.choice(SQUAD_NUMBER_WORDS),
    }


CASTLE_SECTIONS = [
    Section("", [
        "{castle} is a ruined medieval castle in the town of {town}, in {region}.",
        "It stands on a rocky spur above the River {river}, guarding one of the few crossings of the river.",
        "The first castle on the site was built of timber by {builder} in about {built}, and was rebuilt in "
        "stone in {rebuilt}.",
        "Today the ruins are cared for by {trust} and are open to the public; they attract about {visitors} "
        "visitors a year.",
    ]),
    Section("History", [], [
        Section("Foundation", [
            "{builder} was given the land around {town} as a reward for service to the crown.",
            "He built an earth mound and a wooden tower, with a ditch and a bank around the outer courtyard.",
            "The site was chosen because it could be reached from only one side, the other three being "
            "steep slopes above the river.",
            "The timber castle was damaged by fire at least twice in its first century.",
        ]),
        Section("The stone castle", [
            "In {rebuilt} the castle was rebuilt in stone, with a great tower {keep} metres high.",
            "The new curtain wall was {wall} metres thick at its base and had {towers} towers.",
            "A stone gatehouse with two portcullises replaced the old timber gate.",
            "The castle passed by marriage to {family}, who held it for nearly three hundred years.",
            "{family} added a great hall and new private rooms, making the castle more comfortable to live "
            "in.",
        ]),
        Section("Siege and decline", [
            "In {siege} the castle was besieged for {days} days before the garrison surrendered for lack of "
            "food.",
            "After the siege part of the wall was pulled down so that the castle could not be defended again.",
            "By {ruin} the castle was described as a ruin, and local people were taking its stone for "
            "building.",
            "Many houses in the old part of {town} contain dressed stone from the castle walls.",
        ]),
    ]),
    Section("Architecture", [
        "The great tower is square, with walls that narrow slightly as they rise.",
        "Its entrance was on the first floor, reached by a wooden stair that could be removed in an attack.",
        "The ground floor was used for storage and had no windows, only narrow slits for air.",
        "The remains of the great hall stand against the north wall, where two tall windows survive.",
        "The outer courtyard is now a lawn, but the outline of the stables and kitchens can still be traced.",
    ]),
    Section("Restoration and present day", [
        "The ruins were bought by {trust} in the twentieth century, and the walls were made safe.",
        "Excavations in the courtyard found pottery, coins and the bones of animals eaten by the garrison.",
        "Some of the finds are shown in a small museum in the gatehouse.",
        "An open-air theatre company performs in the courtyard every summer.",
        "The castle is a scheduled monument and a listed building.",
    ]),
]

WIKI_KINDS = [
    (_village_facts, VILLAGE_SECTIONS), (_ship_facts, SHIP_SECTIONS), (_album_facts, ALBUM_SECTIONS),
    (_bird_facts, BIRD_SECTIONS), (_painter_facts, PAINTER_SECTIONS), (_castle_facts, CASTLE_SECTIONS),
]


def wikitext_tokenize(text: str) -> str:
    """Tokenize plain English the way WikiText-2 is."""
    # Mark the joiners first so that splitting off punctuation leaves them alone.
    text = re.sub(r"(\d),(?=\d{3})", "\\1\x00,", text)
    text = re.sub(r"(\d)\.(?=\d)", "\\1\x00.", text)
    text = re.sub(r"(\w)-(?=\w)", "\\1\x00-", text)
    text = re.sub(r"(\w)n't\b", r"\1n 't", text)
    text = re.sub(r"(\w)'s\b", r"\1 's", text)
    text = re.sub(r"(?<!\x00)([,.;:!?()\"–])", r" \1 ", text)
    text = re.sub("\x00(.)", r" @\1@ ", text)
    return " ".join(text.split())


def _wiki_article(rng: random.Random, sizes: Sizes, titles: set[str], kind: int) -> list[str]:
    make_facts, sections = WIKI_KINDS[kind % len(WIKI_KINDS)]
    while True:
        facts = make_facts(rng)
        if facts["title"] not in titles:
            titles.add(facts["title"])
            break
    facts["weight2"] = str(int(facts.get("weight", "0")) + rng.randint(4, 12))
    lo, hi = sizes.wiki_paragraphs

    def paragraphs(section: Section) -> list[str]:
        if not section.sentences:
            return []  # a section that only holds subsections
        keep = [s for s in section.sentences if rng.random() < 0.9] or list(section.sentences[:2])
        n = min(len(keep), rng.randint(lo, hi))
        cuts = sorted(rng.sample(range(1, len(keep)), n - 1)) if n > 1 else []
        bounds = [0, *cuts, len(keep)]
        return [" " + wikitext_tokenize(" ".join(keep[a:b]).format(**facts)) + " "
                for a, b in zip(bounds, bounds[1:], strict=False)]

    lines = [f" = {wikitext_tokenize(facts['title'])} = ", " "] + paragraphs(sections[0])
    body = [s for s in sections[1:] if rng.random() < 0.9] or list(sections[1:2])
    for section in body:
        lines += [" ", f" = = {section.heading} = = ", " "] + paragraphs(section)
        for sub in section.subsections:
            lines += [" ", f" = = = {sub.heading} = = = ", " "] + paragraphs(sub)
    return lines + [" ", " "]


def _unk(rng: random.Random, lines: list[str], counts: Counter) -> list[str]:
    """Replace some words that are rare in the whole corpus with <unk>, as WikiText's vocabulary cut-off
    does (there every word seen fewer than three times became <unk>)."""
    out = []
    for line in lines:
        if line.startswith(" = "):
            out.append(line)
            continue
        words = [("<unk>" if counts[w] < 3 and w.isalpha() and rng.random() < 0.3 else w)
                 for w in line.split(" ")]
        out.append(" ".join(words))
    return out


def build_wikitext(rng: random.Random, sizes: Sizes) -> Files:
    titles: set[str] = set()
    kinds = iter(range(rng.randrange(len(WIKI_KINDS)), 1000))  # take the kinds in turn
    splits = {}
    for path, n_articles in (("wikitext2/wiki.valid.tokens", sizes.wiki[0]),
                             ("wikitext2/wiki.test.tokens", sizes.wiki[1])):
        splits[path] = [" "] + [line for _ in range(n_articles)
                                for line in _wiki_article(rng, sizes, titles, next(kinds))]
    # Rarity is judged on the full-size sample corpus so the fixtures get a similar share of <unk>.
    counts = _wiki_counts() if sizes != SAMPLE_SIZES else Counter(
        w for lines in splits.values() for line in lines for w in line.split())
    return {path: "\n".join(_unk(rng, lines, counts)) + "\n" for path, lines in splits.items()}


def _wiki_counts() -> Counter:
    rng = random.Random(SEED + 7)
    titles: set[str] = set()
    return Counter(w for kind in range(SAMPLE_SIZES.wiki[0] + SAMPLE_SIZES.wiki[1])
                   for line in _wiki_article(rng, SAMPLE_SIZES, titles, kind) for w in line.split())


# ---------------------------------------------------------------------------------------------------------
# The rest of GLUE: CoLA, STS-B, QQP, MNLI, QNLI, WNLI, each in its GLUE release layout (CoLA without a
# header: source, label, the original author's mark, sentence; MNLI with the parse columns and, in its dev
# files, five annotator labels). Small template worlds written for bertlab, like the ones above.
# ---------------------------------------------------------------------------------------------------------

COLA_SUBJECTS = ["the farmer", "the teacher", "my neighbour", "the old sailor", "a young doctor", "the baker",
                 "the pilot", "her brother", "the new clerk", "the tall guard", "our cousin", "the painter"]
COLA_OBJECTS = ["the letter", "a small boat", "the red door", "the cake", "an old map", "the fence",
                "a warm coat", "the garden", "the last train", "a heavy box", "the bridge", "the radio"]
COLA_VERBS = [("opened", "open"), ("painted", "paint"), ("carried", "carry"), ("found", "find"),
              ("repaired", "repair"), ("sold", "sell"), ("washed", "wash"), ("moved", "move"),
              ("watched", "watch"), ("built", "build")]
COLA_ADVERBS = ["yesterday", "slowly", "last week", "in the morning", "carefully", "again"]
COLA_SOURCES = ["bl01", "bl02", "bl03", "bl04"]


def _cola_row(rng: random.Random) -> tuple[str, int, str, str]:
    s, o = rng.choice(COLA_SUBJECTS), rng.choice(COLA_OBJECTS)
    past, bare = rng.choice(COLA_VERBS)
    adv = rng.choice(COLA_ADVERBS)
    good = [f"{cap(s)} {past} {o} {adv}.", f"{cap(o)} was {past} by {s}.",
            f"{cap(s)} did not {bare} {o}.", f"Did {s} {bare} {o}?", f"{cap(s)} wanted to {bare} {o}."]
    bad = [f"{cap(s)} {o} {past} {adv}.", f"{cap(o)} was {bare} by {s}.", f"{cap(s)} did not {past} {o}.",
           f"Did {s} {past} {o}?", f"{cap(s)} wanted to {past} {o}.", f"{cap(s)} {past} {adv} {o} {o}."]
    if rng.random() < 0.7:  # CoLA is about 70 % acceptable
        return rng.choice(COLA_SOURCES), 1, "", rng.choice(good)
    return rng.choice(COLA_SOURCES), 0, "*", rng.choice(bad)


def build_cola(rng: random.Random, sizes: Sizes) -> Files:
    rows = unique(rng, lambda: _cola_row(rng), sum(sizes.cola), key=lambda e: e[3])
    train, dev = split(rows, sizes.cola)
    body = lambda part: "".join("\t".join(str(c) for c in row) + "\n" for row in part)  # noqa: E731
    return {"cola/train.tsv": body(train), "cola/dev.tsv": body(dev)}


STS_SUBJECTS = ["A man", "A woman", "A child", "Two dogs", "A cat", "An old man", "A girl", "A group of people"]
STS_VERBS = ["is playing", "is cutting", "is riding", "is eating", "is carrying", "is cleaning", "is watching"]
STS_OBJECTS = ["a guitar", "an onion", "a horse", "a bicycle", "a sandwich", "a ball", "a box", "the window"]
STS_PLACES = ["in the park", "on a stage", "in the kitchen", "on the beach", "in a field", "at home"]


def _stsb_pair(rng: random.Random) -> tuple[str, str, str, str]:
    slots = [STS_SUBJECTS, STS_VERBS, STS_OBJECTS, STS_PLACES]
    first = [rng.choice(s) for s in slots]
    changed = rng.sample(range(4), rng.randint(0, 4))
    second = [_other(rng, slots[i], w) if i in changed else w for i, w in enumerate(first)]
    score = min(5.0, max(0.0, 5.0 - 1.25 * len(changed) + rng.uniform(-0.4, 0.4)))
    genre = rng.choice(["main-captions", "main-news", "main-forums"])
    return genre, " ".join(first) + ".", " ".join(second) + ".", f"{score:.3f}"


def build_stsb(rng: random.Random, sizes: Sizes) -> Files:
    pairs = unique(rng, lambda: _stsb_pair(rng), sum(sizes.stsb), key=lambda e: e[1] + "\t" + e[2])
    header = ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2",
              "score"]
    out = {}
    for name, part in zip(("train", "dev"), split(pairs, sizes.stsb), strict=True):
        out[f"stsb/{name}.tsv"] = tsv(header, [(i, g, "bertlab", "2026", f"{i:04d}", "none", "none", a, b, s)
                                               for i, (g, a, b, s) in enumerate(part)])
    return out


QQP_TASKS = [("learn", "to swim"), ("fix", "a leaking tap"), ("cook", "rice"), ("grow", "tomatoes"),
             ("clean", "a laptop screen"), ("start", "a small business"), ("train", "a puppy"),
             ("save", "money on groceries"), ("improve", "my handwriting"), ("repair", "a bicycle tyre"),
             ("write", "a cover letter"), ("plan", "a trip to Carrick Bay")]
QQP_ASKS = ["How do I {v} {o}?", "What is the best way to {v} {o}?", "How can I {v} {o}?",
            "What is the easiest way to {v} {o}?", "Any tips on how to {v} {o}?"]


def _qqp_pair(rng: random.Random) -> tuple[str, str, int]:
    v, o = rng.choice(QQP_TASKS)
    a, b = pick(rng, QQP_ASKS, 2)
    if rng.random() < 0.4:
        return a.format(v=v, o=o), b.format(v=v, o=o), 1
    v2, o2 = _other(rng, QQP_TASKS, (v, o))
    other = rng.choice([(v, o2), (v2, o2)]) if v2 != v else (v2, o2)
    return a.format(v=v, o=o), b.format(v=other[0], o=other[1]), 0


def build_qqp(rng: random.Random, sizes: Sizes) -> Files:
    pairs = unique(rng, lambda: _qqp_pair(rng), sum(sizes.qqp), key=lambda e: e[0] + "\t" + e[1])
    header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
    out, qid = {}, 0
    for name, part in zip(("train", "dev"), split(pairs, sizes.qqp), strict=True):
        rows = []
        for i, (a, b, dup) in enumerate(part):
            rows.append((i, qid + 1, qid + 2, a, b, dup))
            qid += 2
        out[f"qqp/{name}.tsv"] = tsv(header, rows)
    return out


MNLI_ACTIVITIES = ["visited the museum", "bought a bicycle", "met an old friend", "gave a talk",
                   "watched a play", "sold the car", "painted the kitchen", "ran a marathon"]
MNLI_GENRES = (["fiction", "government", "slate", "telephone", "travel"],
               ["facetoface", "letters", "nineeleven", "oup", "verbatim"])
MNLI_LABELS = ["entailment", "neutral", "contradiction"]


def _mnli_pair(rng: random.Random) -> tuple[str, str, str]:
    p, city, act, day = person(rng), rng.choice(CITIES), rng.choice(MNLI_ACTIVITIES), rng.choice(DAYS)
    premise = rng.choice([f"{p} spent {day} in {city}, where they {act}.",
                          f"On {day}, {p} {act} in {city} before going home."])
    label = rng.choice(MNLI_LABELS)
    hypothesis = rng.choice({
        "entailment": [f"{p} was in {city} on {day}.", f"{p} {act}.", f"Someone {act} in {city}."],
        "neutral": [f"{p} enjoyed the day in {city}.", f"{p} went to {city} with a friend.",
                    f"{p} lives near {city}."],
        "contradiction": [f"{p} was never in {city}.", f"{p} spent {day} in {_other(rng, CITIES, city)}.",
                          f"{p} stayed at home all {day}."],
    }[label])
    return premise, hypothesis, label


def _parses(sentence: str) -> tuple[str, str]:
    """Stand-ins for MNLI's parse columns: the tokens in one bracket (bertlab reads only the plain text)."""
    tokens = ptb(sentence)
    return f"( {tokens} )", f"(ROOT (S {tokens}))"


def build_mnli(rng: random.Random, sizes: Sizes) -> Files:
    n_train, n_dev = sizes.mnli
    pairs = unique(rng, lambda: _mnli_pair(rng), n_train + 2 * n_dev, key=lambda e: e[0] + "\t" + e[1])
    train, matched, mismatched = split(pairs, (n_train, n_dev, n_dev))
    parse_cols = ["sentence1_binary_parse", "sentence2_binary_parse", "sentence1_parse", "sentence2_parse"]
    out = {}
    for name, part, genres in (("train", train, MNLI_GENRES[0]), ("dev_matched", matched, MNLI_GENRES[0]),
                               ("dev_mismatched", mismatched, MNLI_GENRES[1])):
        dev = name != "train"
        labels_cols = ["label1", "label2", "label3", "label4", "label5"] if dev else ["label1"]
        header = ["index", "promptID", "pairID", "genre", *parse_cols, "sentence1", "sentence2", *labels_cols,
                  "gold_label"]
        rows = []
        for i, (s1, s2, label) in enumerate(part):
            (b1, p1), (b2, p2) = _parses(s1), _parses(s2)
            votes = [label] * len(labels_cols)
            if dev and rng.random() < 0.3:  # annotators disagree now and then; gold is the majority
                votes[rng.randint(1, 4)] = _other(rng, MNLI_LABELS, label)
            prompt = rng.randint(10000, 99999)
            rows.append((i, prompt, f"{prompt}{'ecn'[i % 3]}", rng.choice(genres), b1, b2, p1, p2, s1, s2, *votes,
                         label))
        out[f"mnli/{name}.tsv"] = tsv(header, rows)
    return out


QNLI_FACTS = [
    ("What is {c} known for?", "{c} is known for its {x}.", ["salt marshes", "glass works", "spring fair"]),
    ("When was the bridge in {c} built?", "The bridge in {c} was built in {x}.", ["1887", "1902", "1951"]),
    ("Who founded the library in {c}?", "The library in {c} was founded by {x}.", ["a local printer",
                                                                                     "two sisters", "the mayor"]),
    ("How many people live in {c}?", "About {x} people live in {c}.", ["12,000", "48,000", "3,500"]),
]


def _qnli_pair(rng: random.Random) -> tuple[str, str, str]:
    c = rng.choice(CITIES)
    q, s, xs = rng.choice(QNLI_FACTS)
    if rng.random() < 0.5:
        return q.format(c=c), s.format(c=c, x=rng.choice(xs)), "entailment"
    _, s2, xs2 = _other(rng, QNLI_FACTS, (q, s, xs))
    return q.format(c=c), s2.format(c=c, x=rng.choice(xs2)), "not_entailment"


def build_qnli(rng: random.Random, sizes: Sizes) -> Files:
    pairs = unique(rng, lambda: _qnli_pair(rng), sum(sizes.qnli), key=lambda e: e[0] + "\t" + e[1])
    header = ["index", "question", "sentence", "label"]
    return {f"qnli/{name}.tsv": tsv(header, [(i, *row) for i, row in enumerate(part)])
            for name, part in zip(("train", "dev"), split(pairs, sizes.qnli), strict=True)}


WNLI_FRAMES = [
    ("The {a} could not lift the {b} because it was too {x}.", {"weak": "a", "heavy": "b"}),
    ("The {a} did not fit into the {b} because it was too {x}.", {"big": "a", "small": "b"}),
    ("The {a} passed the {b} because it was so {x}.", {"fast": "a", "slow": "b"}),
]
WNLI_THINGS = ["crate", "trunk", "cart", "barrel", "sack", "suitcase", "wagon", "chest"]


def _wnli_pair(rng: random.Random) -> tuple[str, str, int]:
    frame, roles = rng.choice(WNLI_FRAMES)
    a, b = pick(rng, WNLI_THINGS, 2)
    x = rng.choice(list(roles))
    named = rng.choice([a, b])
    label = int((a if roles[x] == "a" else b) == named)
    return frame.format(a=a, b=b, x=x), f"The {named} was too {x}.", label


def build_wnli(rng: random.Random, sizes: Sizes) -> Files:
    pairs = unique(rng, lambda: _wnli_pair(rng), sum(sizes.wnli), key=lambda e: e[0] + "\t" + e[1])
    header = ["index", "sentence1", "sentence2", "label"]
    return {f"wnli/{name}.tsv": tsv(header, [(i, *row) for i, row in enumerate(part)])
            for name, part in zip(("train", "dev"), split(pairs, sizes.wnli), strict=True)}


# ---------------------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------------------

BUILDERS: list[tuple[str, Callable[[random.Random, Sizes], Files]]] = [
    ("sst2", build_sst2), ("mrpc", build_mrpc), ("rte", build_rte), ("conll2003", build_conll),
    ("wnut17", build_wnut), ("squad_v1.1", build_squad), ("wikitext2", build_wikitext),
    ("cola", build_cola), ("stsb", build_stsb), ("qqp", build_qqp), ("mnli", build_mnli), ("qnli", build_qnli),
    ("wnli", build_wnli), ("squad_v2", build_squad_v2), ("swag", build_swag),
]


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def count(path: str, text: str) -> str:
    """A short description of what one generated file holds (for the README)."""
    lines = text.split("\n")[:-1]
    if path.endswith(".csv"):
        return f"{len(lines) - 1} rows"
    if path.startswith("cola/"):
        return f"{len(lines)} rows (no header line, as CoLA's)"
    if path.endswith(".tsv"):
        return f"{len(lines) - 1} rows"
    if path.startswith("conll2003/"):
        docs = sum(line.startswith("-DOCSTART-") for line in lines)
        sentences = sum(1 for a, b in zip(lines, lines[1:], strict=False)
                        if a and not a.startswith("-DOCSTART-") and not b)
        return f"{sentences} sentences in {docs} documents"
    if path.startswith("wnut17/"):
        sentences = sum(1 for a, b in zip(lines, lines[1:] + [""], strict=True) if a.strip() and not b.strip())
        return f"{sentences} sentences"
    if path.endswith(".json"):
        data = json.loads(text)["data"]
        paragraphs = [p for article in data for p in article["paragraphs"]]
        questions = sum(len(p["qas"]) for p in paragraphs)
        impossible = sum(qa.get("is_impossible", False) for p in paragraphs for qa in p["qas"])
        extra = f" ({impossible} unanswerable)" if impossible else ""
        return f"{questions} questions{extra} on {len(paragraphs)} paragraphs of {plural(len(data), 'article')}"
    if path.endswith(".tokens"):
        articles = sum(line.startswith(" = ") and not line.startswith(" = = ") for line in lines)
        return f"{plural(articles, 'article')}, {len(text.split()):,} tokens"
    raise ValueError(path)


SAMPLES_README = """\
# bertlab sample data

Small datasets bundled with bertlab so that every task runs out of the box (`data.source=sample`).
They were **written for bertlab**: every sentence, name, paragraph and article is invented, generated
from templates and word lists by `tools/make_samples.py` (seeded, so a rerun reproduces these files byte
for byte: `python tools/make_samples.py --check`). No text was copied from any dataset.

Each folder copies the file format of the public benchmark it stands in for, so the same readers load
both: GLUE TSV for SST-2, MRPC (header without the byte-order mark the GLUE file has), RTE, CoLA (no
header line: source, label, the author's mark, sentence), STS-B (a 0-5 score), QQP, MNLI (parse columns
reduced to one bracket; matched and mismatched dev files), QNLI and WNLI; CoNLL-2003
(`word POS chunk NER`, IOB1); WNUT-17 (`token<TAB>tag`, IOB2; tab-only sentence breaks for most of the
train file, as in the original); SQuAD v1.1 JSON (three answers per dev question); SQuAD 2.0 JSON (the same kind of articles plus
unanswerable questions: a question of another paragraph of the same article, whose answer is not in this
one); SWAG CSV (a context, the first words of the next sentence and four endings); WikiText-2 tokens.

The samples of the rest of GLUE (CoLA, STS-B, QQP, MNLI, QNLI, WNLI) are made the same way. For CoLA,
STS-B, QNLI and WNLI real files exist, but the copies at hand came from third-party repositories without a
licence statement for the text (and CoLA's sentences are quoted from linguistics publications), so no row
of them is shipped in this Apache-2.0 package; run on the real data from a data folder or the hub instead.

**Use them for smoke runs, demos and tutorials, not for reporting results**: the text is template-made,
so scores on it say nothing about a model's quality on real data.

License: Apache-2.0, the same as bertlab.

| file | contents |
|---|---|
{rows}
"""

FIXTURES_README = """\
# Test fixtures

Tiny datasets for the unit tests, in the same formats and folder layout as the real benchmark files
(`../shared/data` beside the repository) and the bundled samples (`src/bertlab/samples`). Written for bertlab (invented text,
generated by `tools/make_samples.py --only fixtures`); Apache-2.0.

| file | contents |
|---|---|
{rows}
"""


def generate(kind: str, seed: int = SEED) -> Files:
    """All files of one kind ("samples" or "fixtures"), keyed by path relative to its folder."""
    sizes = SAMPLE_SIZES if kind == "samples" else FIXTURE_SIZES
    files: Files = {}
    for index, (_, build) in enumerate(BUILDERS):
        files.update(build(random.Random(seed + 100 * index + (kind == "fixtures")), sizes))
    rows = "\n".join(f"| `{path}` | {count(path, text)} |" for path, text in files.items())
    files["README.md"] = (SAMPLES_README if kind == "samples" else FIXTURES_README).format(rows=rows)
    return files


def write(files: Files, root: Path) -> None:
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8", newline="\n")


def differences(files: Files, root: Path) -> list[str]:
    """Paths under ``root`` that are missing or differ from ``files``."""
    return [path for path, text in files.items()
            if not (root / path).is_file() or (root / path).read_text(encoding="utf-8") != text]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["samples", "fixtures"], help="write only one of the two sets")
    parser.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing")
    parser.add_argument("--out", type=Path, help="write the chosen set here instead (needs --only)")
    args = parser.parse_args(argv)
    if args.out and not args.only:
        parser.error("--out needs --only")
    if args.out and not args.check:  # a folder of its own: never a run or export folder, nor inside one
        from bertlab.runtime.errors import ConfigError
        from bertlab.runtime.outputs import refuse_folder_in_bertlab_folders

        try:
            refuse_folder_in_bertlab_folders(args.out, f"--out {args.out}", "Name a folder of its own")
        except ConfigError as err:
            parser.error(str(err))
    targets = {"samples": SAMPLES_DIR, "fixtures": FIXTURES_DIR}
    status = 0
    for kind in [args.only] if args.only else ["samples", "fixtures"]:
        files, root = generate(kind), args.out or targets[kind]
        if args.check:
            stale = differences(files, root)
            for path in stale:
                print(f"out of date: {root / path}", file=sys.stderr)
            status |= bool(stale)
        else:
            write(files, root)
            size = sum(len(text.encode()) for text in files.values())
            print(f"wrote {len(files)} files ({size / 1024:.0f} KiB) to {root}")
    return status


if __name__ == "__main__":
    sys.exit(main())
