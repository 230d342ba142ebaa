"""SST-2 samples: single film-review sentences, 1 = positive, 0 = negative."""

from __future__ import annotations

import random
import re

from samples.common import Files, Sizes, pick, split, tsv, unique

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
