"""The rest of GLUE's samples: CoLA, STS-B, QQP, MNLI, QNLI, WNLI."""

from __future__ import annotations

import random

from samples.common import Files, Sizes, cap, person, pick, ptb, split, tsv, unique
from samples.mrpc import CITIES, DAYS
from samples.rte import _other

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
