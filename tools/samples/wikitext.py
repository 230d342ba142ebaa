"""WikiText-2 samples: invented encyclopedia articles, tokenized the WikiText way."""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from samples.common import FEMALE_FIRST_NAMES, LAST_NAMES, SAMPLE_SIZES, SEED, Files, Sizes, person
from samples.mrpc import CITIES, MONTHS, _num
from samples.squad import SQUAD_NUMBER_WORDS, SQUAD_REGIONS, SQUAD_RIVERS, SQUAD_TOWNS
from samples.wnut import WNUT_ENTITIES

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
