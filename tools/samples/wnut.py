"""WNUT-17 samples: tweets, `token<TAB>tag` in IOB2."""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Sequence

from samples.common import Files, Sizes, split, unique

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
