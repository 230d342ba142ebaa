"""What every sample data set shares: the sizes of each set, the seed, the output folders, and small helpers
(sampling, splitting, TSV, PTB-style tokens, names)."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
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
