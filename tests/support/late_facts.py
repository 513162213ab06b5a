"""Long assistant answers whose one specific fact sits past the embedding model's first window.

all-MiniLM-L6-v2 reads 256 word pieces; each answer here opens with well over that of general
advice on its subject, then states the fact the user will ask about weeks later, in words the
question does not repeat. Used by tests/unit/test_passages.py and bench/recall.py's late-fact figure
(docs/RETRIEVAL.md, "Passage vectors"). Written for ocat; no real people or businesses.
"""

from __future__ import annotations

from ocat.records import Exchange

DAY = 86400.0
START = 1_740_000_000.0

# (prompt, general advice, the late fact, a question asked later, a wrong-but-near question)
LATE_FACTS: list[tuple[str, str, str, str]] = [
    (
        "we're moving flats next month, any general tips for packing and the move itself?",
        "Start with the rooms you use least: books, spare linen, seasonal clothes and decorations can "
        "go into boxes weeks ahead without disturbing daily life. Label every box on two sides with the "
        "room it goes to and a short list of what is inside, and number them so you can tell at a glance "
        "whether everything arrived. Keep heavy things in small boxes and light things in big ones; a "
        "large box of books is more than most people can lift safely. Pack a survival box for the first "
        "night with chargers, toilet paper, a kettle, mugs, basic tools, bedding and medication, and keep "
        "it with you rather than in the van. Photograph the back of the television and the router before "
        "unplugging anything so the cables go back the same way. Defrost the freezer a day ahead and leave "
        "its door open. Measure doorways and the stairwell at the new place before moving day, and book "
        "the lift or a parking permit for the van if the building requires one. Change your address with "
        "the bank, insurer and employer a week before, and set up mail forwarding for a few months. On the "
        "day itself, keep children and pets out of the way, walk through every room and cupboard before "
        "the van leaves, and read the meters at both places, with photos as proof.",
        "For the upright piano we went with the specialist crew from Ostrander & Daughters, who quoted "
        "three hundred and forty dollars including the staircase and a tuning visit afterwards.",
        "who is carrying our piano to the new flat and what will it cost?",
    ),
    (
        "can you explain how to look after a cast iron pan properly?",
        "Cast iron rewards a little routine. After cooking, rinse the pan while it is still warm and "
        "scrub off stuck food with a brush or coarse salt; a drop of mild soap does no harm to a "
        "well-seasoned surface despite the old warnings. Dry it completely straight away, ideally over a "
        "low flame for a minute, because standing water is what causes rust. Wipe a very thin film of "
        "neutral oil over the inside while it is warm, then buff it off until the pan looks almost dry: "
        "too much oil turns sticky. Cook fatty foods often in the first months, since frying builds the "
        "seasoning faster than anything else. Avoid long simmering of tomato sauces or wine until the "
        "surface is dark and glossy, as acid strips young seasoning. If rust appears, scrub it back to "
        "bare metal with steel wool, rinse, dry, and season in the oven upside down at a high temperature "
        "for an hour with a thin coat of oil. Store it with a paper towel inside if you stack pans, and "
        "never leave it soaking in the sink overnight. Preheat it slowly on a medium flame, since cast iron "
        "heats unevenly and a fierce flame can warp thin spots, and use a folded towel on the handle, "
        "which gets as hot as the pan. Enamelled cast iron is a different thing and needs none of this.",
        "The pan itself was my grandmother's, a number eight skillet cast in 1931 that she carried over "
        "from Lisbon, which is why I'd rather not strip it completely.",
        "how old is the skillet I inherited and where did it come from?",
    ),
    (
        "what should i think about before adopting a rescue dog?",
        "Think first about time: a dog needs walks at least twice a day, company, and training that takes "
        "weeks of short daily sessions. Look honestly at your home, whether the landlord allows pets, "
        "whether there is a park nearby, and who will care for the dog when you travel. Budget for food, "
        "insurance, vaccinations, a yearly check-up, and unexpected vet bills that can reach a few "
        "thousand dollars. Rescue dogs often come with a history you do not fully know; ask the shelter "
        "about behaviour with children, cats and other dogs, and whether a trial stay is possible. Give "
        "the dog a quiet corner and a predictable routine for the first weeks, and expect some accidents "
        "and nervousness while it settles. Reward-based training works better than punishment, and a "
        "good class helps both of you learn. Keep the first outings calm and short, and introduce new "
        "people and places gradually. Microchip registration and a tag with your phone number are "
        "essential from day one. Ask the shelter which food the dog is used to and change it gradually over "
        "a week or two, to spare its stomach. Plan the first vet visit within a fortnight, even for a "
        "healthy dog, so the clinic knows it before anything goes wrong. Dog-proof the flat as you would "
        "for a toddler: cables, shoes, bins and anything edible at nose height will be tested. A crate "
        "can become a safe den if it is introduced slowly and never used as punishment.",
        "The one we are meeting on Saturday is a shy four-year-old greyhound called Marzipan, retired "
        "from racing, at the shelter in Verdun.",
        "what is the name of the dog we planned to meet and what breed is it?",
    ),
    (
        "give me a general overview of preparing for a half marathon",
        "Most beginners need twelve to sixteen weeks. Build your weekly distance slowly, by no more than "
        "about ten percent a week, with one long run that grows from eight kilometres towards eighteen or "
        "nineteen. Keep most runs at an easy, conversational pace; a single session of intervals or tempo "
        "running a week is enough to improve speed. Rest days matter as much as running days, because "
        "the body adapts while it recovers. Strength work for the hips, glutes and calves twice a week "
        "helps prevent the common overuse injuries. Practise eating and drinking on long runs so race "
        "day holds no surprises, and try the shoes and clothes you will race in well before. Reduce "
        "your distance in the last ten days so you arrive fresh. On the day, start slower than you "
        "think you should, and speed up only after the halfway point if you still feel good. Sleep and "
        "hydration in the final week do more than any last workout. Keep a simple log of distance, pace "
        "and how you felt, because patterns of fatigue show up there before an injury does. If a pain "
        "changes how you run, stop and rest for a few days rather than pushing through it. Cross-training "
        "such as cycling or swimming keeps fitness up while sparing the legs. Pick up your race kit the "
        "day before, pin the bib to the front of your shirt, and lay everything out the night before.",
        "The race I signed up for is the autumn one along the Lachine canal on October 19th, bib "
        "number 2261, starting at eight sharp.",
        "when is my half marathon and what number am I wearing?",
    ),
    (
        "what are good habits for keeping houseplants alive over winter?",
        "Winter light is the main problem: move plants closer to south or west windows, clean the leaves "
        "so they catch what light there is, and turn the pots every week or two so they grow evenly. "
        "Water less often, because growth slows and soil stays wet longer; check with a finger two "
        "centimetres down and water only when it is dry. Central heating dries the air, so group plants "
        "together, use a pebble tray, or run a humidifier for tropical species. Keep them away from "
        "radiators and cold draughts from doors or single-glazed windows. Stop fertilising until spring, "
        "since feeding a resting plant burns the roots. Watch for spider mites and fungus gnats, which "
        "thrive in dry warm rooms and damp soil respectively. Repotting can wait until the days grow "
        "longer. If a plant drops a few leaves, that is usually adjustment rather than disaster; it will "
        "recover once the light returns in March. Succulents and cacti want a cool bright spot and almost "
        "no water until spring; ferns and calatheas want the opposite, steady moisture and humidity. "
        "Use water at room temperature, since cold tap water can shock tropical roots. Empty saucers "
        "half an hour after watering so the roots never sit in water, which is the commonest way plants "
        "die indoors. A cheap grow light on a timer can carry a struggling plant through the darkest weeks.",
        "The fiddle-leaf fig in the hallway was a housewarming gift from my colleague Ingrid, and it is "
        "the one that keeps shedding its lower leaves.",
        "who gave me the fiddle-leaf fig that keeps dropping leaves?",
    ),
]


def late_fact_exchanges() -> list[Exchange]:
    """The long exchanges, a day apart, in one thread each."""
    return [
        Exchange(
            user_prompt=prompt,
            assistant_response=f"{advice}\n\n{fact}",
            thread_id=f"late-{n}",
            session_id=f"late-{n}",
            exchange_id=f"late-fact-{n}",
            timestamp=START + n * DAY,
        )
        for n, (prompt, advice, fact, _) in enumerate(LATE_FACTS)
    ]


def late_fact_questions() -> list[tuple[str, str]]:
    """(question, the id of the exchange that answers it)."""
    return [(question, f"late-fact-{n}") for n, (_, _, _, question) in enumerate(LATE_FACTS)]
