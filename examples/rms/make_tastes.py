"""Write examples/rms/tastes.jsonl: a small per-user sample where users' tastes differ and length says nothing.

Sixteen users, four tastes: budget (cheap, second-hand, free), premium (the best, built to last), quick (fast,
minimal effort) and thorough (careful, compare and plan). Every question has one answer in each style, all of
about the same length. A user's pair shows their own style against the opposite one (budget against premium,
quick against thorough), so two users of opposite tastes see the same two answers with the labels swapped: no
model that ignores who is asking can beat 50% on average. Each user has 6 train and 1 validation rows (their
history) and 3 test rows (judged). No `groups`: a model must learn the taste from the history, not read it.

    python examples/rms/make_tastes.py        # rewrites tastes.jsonl (deterministic)
"""

from __future__ import annotations

import json
import random
from pathlib import Path

STYLES = ("budget", "premium", "quick", "thorough")
OPPOSITE = {
    "budget": "premium",
    "premium": "budget",
    "quick": "thorough",
    "thorough": "quick",
}
USERS_PER_STYLE = 4
TRAIN, VAL, TEST = 6, 1, 3

ANSWERS: dict[str, dict[str, str]] = {
    "I want to get into film photography. What camera should I buy?": {
        "budget": "Pick up a used manual camera from a flea market or an online auction; most sell for very little, "
        "and expired film from friends costs almost nothing.",
        "premium": "Invest in a professionally serviced Leica or Contax with a premium lens; superb build quality "
        "lasts decades and holds its resale value remarkably well.",
        "quick": "Grab a point-and-shoot from the nearest shop today, load it and start shooting; no settings to "
        "learn, no setup, just press the button.",
        "thorough": "Compare three or four models side by side, read the long-term reviews, rent one for a weekend, "
        "and keep notes before you settle on the right one.",
    },
    "How should I furnish my first flat?": {
        "budget": "Collect free furniture from neighbours and local giveaway groups, then fill the gaps with "
        "second-hand finds; paint and new handles make cheap pieces look fresh.",
        "premium": "Choose a few designer pieces in solid oak and real leather from a respected maker; quality "
        "furniture feels better every day and lasts a lifetime.",
        "quick": "Order one ready-made room bundle online with next-day delivery and assembly included; the whole "
        "flat is done in an afternoon without any fuss.",
        "thorough": "Measure every room, draw a floor plan, list what you truly need, and visit several showrooms "
        "to compare comfort and dimensions before buying anything.",
    },
    "What should I cook for a dinner with friends?": {
        "budget": "Make a big pot of lentil chilli with rice; dried beans and seasonal vegetables feed eight people "
        "for a few coins, and leftovers freeze well.",
        "premium": "Serve dry-aged ribeye with truffle butter and a fine Burgundy from a specialist merchant; "
        "splurge on exceptional ingredients and your guests will remember it.",
        "quick": "Order pizzas and pick up a ready-made salad on the way home; dinner is on the table in twenty "
        "minutes and you spend the evening with friends.",
        "thorough": "Plan the menu a week ahead, test the main dish once, write a timed prep schedule, and check "
        "every guest's allergies and preferences in advance.",
    },
    "How do I start learning the guitar?": {
        "budget": "Borrow a guitar from a friend or buy a cheap used one, then learn from free video lessons and "
        "library songbooks; you need not spend anything.",
        "premium": "Buy a hand-built acoustic from a renowned luthier and book private lessons with a top teacher; "
        "the finest instrument makes every practice session a joy.",
        "quick": "Learn four easy chords from a short video tonight and strum along to a simple song; you can be "
        "playing something recognisable within an hour.",
        "thorough": "Work through a structured method book chapter by chapter, keep a practice log, record yourself "
        "weekly, and review your technique against the exercises.",
    },
    "What laptop should I get for university?": {
        "budget": "A refurbished business laptop from a certified reseller costs a fraction of a new one, runs all "
        "coursework fine, and often comes with a warranty.",
        "premium": "Get the top model with the best screen, maximum memory and an aluminium body; a flagship "
        "machine stays fast for years and feels premium every day.",
        "quick": "Walk into the nearest electronics store and take the bestseller on the shelf; it will do "
        "everything a student needs, so the decision takes minutes.",
        "thorough": "List your courses' software requirements, compare battery tests and benchmarks across shortlisted "
        "models, and read repairability scores before you decide.",
    },
    "How can I get fit this year?": {
        "budget": "Run in the park, do body-weight exercises at home and follow free workout videos; no gym "
        "membership or equipment is needed to make real progress.",
        "premium": "Join an upscale club with a personal trainer, a spa and a pool, and buy top-tier gear; the best "
        "coaching and facilities make fitness a luxury habit.",
        "quick": "Do a seven-minute workout every morning as soon as you wake up; it is short, needs nothing, and "
        "you are done before breakfast.",
        "thorough": "Book a fitness assessment, set measurable goals, design a periodised twelve-week programme, and "
        "track every session to adjust the plan each month.",
    },
    "Where should I go on holiday this summer?": {
        "budget": "Go camping at a nearby national park and cook your own meals; off-season trains and free hiking "
        "trails make a great week for very little money.",
        "premium": "Book a five-star resort in the Maldives with an overwater villa and private chef; an exclusive "
        "luxury escape is worth every penny once a year.",
        "quick": "Take a last-minute package deal leaving this weekend; flights, hotel and transfers are bundled, so "
        "you just pack a bag and go.",
        "thorough": "Research destinations for weather and crowds, compare itineraries, read travel forums, and book "
        "each leg carefully months in advance for the best fit.",
    },
    "What gift should I buy for my sister's birthday?": {
        "budget": "Make her a handmade photo album or bake her favourite cake; a thoughtful homemade gift costs "
        "little and means more than anything from a shop.",
        "premium": "Buy her a designer handbag or a piece of fine jewellery from a luxury boutique; an elegant, "
        "high-end gift shows how much she matters.",
        "quick": "Send her a digital gift card to her favourite store right now; it arrives instantly and she can "
        "choose exactly what she wants.",
        "thorough": "Ask her friends what she has mentioned lately, keep a list over a few weeks, and compare options "
        "carefully so the gift truly suits her.",
    },
    "How should I start investing my savings?": {
        "budget": "Open a no-fee account and buy a low-cost index fund in small monthly amounts; avoiding fees and "
        "commissions matters more than anything else.",
        "premium": "Hire a private wealth manager at a prestigious bank for a tailored portfolio; exclusive advice and "
        "premium service are worth paying for.",
        "quick": "Put everything into one global index fund through an app in five minutes and stop thinking about "
        "it; simple and done today.",
        "thorough": "Read two investing books, define your time horizon and risk tolerance, compare funds on costs and "
        "tracking error, and write down a plan first.",
    },
    "What coffee setup should I get for home?": {
        "budget": "A simple moka pot or a second-hand French press makes excellent coffee for very little; buy beans "
        "in bulk from a discount roaster.",
        "premium": "Get a dual-boiler espresso machine and a high-end grinder from a boutique supplier; premium "
        "equipment pulls café-quality shots every single morning.",
        "quick": "Buy a pod machine and a box of capsules; one button gives you a cup in thirty seconds with no "
        "grinding, weighing or cleaning.",
        "thorough": "Try brewing methods at a café first, read grinder comparisons, weigh doses and time extractions, "
        "then pick the setup that matches your taste notes.",
    },
}


def records() -> list[dict[str, object]]:
    draw = random.Random(40)
    questions = list(ANSWERS)
    rows: list[dict[str, object]] = []
    for style in STYLES:
        for n in range(1, USERS_PER_STYLE + 1):
            user = f"{style}-{n}"
            order = questions[:]
            draw.shuffle(order)
            splits = ["train"] * TRAIN + ["val"] * VAL + ["test"] * TEST
            for index, (question, split) in enumerate(zip(order, splits, strict=True)):
                rows.append(
                    {
                        "user_id": user,
                        "id": f"{user}-{index + 1}",
                        "prompt": question,
                        "chosen": ANSWERS[question][style],
                        "rejected": ANSWERS[question][OPPOSITE[style]],
                        "split": split,
                    }
                )
    return rows


def main() -> None:
    path = Path(__file__).with_name("tastes.jsonl")
    path.write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in records()),
        encoding="utf-8",
    )
    print(f"wrote {path} ({len(records())} rows)")


if __name__ == "__main__":
    main()
