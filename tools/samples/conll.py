"""CoNLL-2003 samples: `word POS chunk NER` in IOB1, news documents."""

from __future__ import annotations

import random
from collections.abc import Mapping

from samples.common import FIRST_NAMES, LAST_NAMES, Files, Sizes, pick
from samples.mrpc import DAYS, MONTHS

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
