"""PersonalLLM (namkoong-lab/PersonalLLM, arXiv 2409.20296) through its card: users as weightings of ten reward
models, each judging one test prompt's responses.

Two kinds of file, told apart by their columns:

- **prompts** (`namkoong-lab/PersonalLLM`): `prompt`, and for each response n (1 to 8) its text `response_<n>` and
  ten reward models' scores `response_<n>_<model>`;
- **users** (the layout of the authors' evaluation sets, `gen_pref_interaction_database.py` and `eval.py`):
  `person_id`, `person_weight` (one weight per reward model, in the models' name order) and `test_prompt`, with
  the user's earlier choices `prompt_<j>`, `response_<j>_a`, `response_<j>_b`, `chosen_<j>` ("a" or "b").

A user's score of a response is the authors' `np.dot(person_weight, (score − mean) / sd)` over the ten models, each
model's score standardised by the mean and sd of the authors' constants (REWARD_MODELS below). The user's test
prompt is found among the prompts by its text; its responses, scored so, make one best-of-k item (the top score
preferred; none when the two best are within the card's `tie_margin`), or pairs with `items = "pairs"` (every
two responses more than `tie_margin` apart). The earlier choices are the user's history. The weights are never
shown to a judge: they are how the user prefers, the scoring standard itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from prbj.data.cards import Card
from prbj.data.dataset import Blob, blob_records
from prbj.data.loader_output import Mapped
from prbj.data.per_user import ReadOptions
from prbj.data.user_items import ItemRule
from prbj.data.validate import Location, RecordError, _mapping, _type_name, parsed
from prbj.errors import DataError

# The authors' reward models with the mean and sd of their scores (PersonalLLM/eval/constants.py), by name; a
# user's weights follow the names' sorted order, as `sorted(REWARD_MODELS.keys())` in their code.
REWARD_MODELS: dict[str, tuple[float, float]] = {
    "beaver_7b": (6.233516894340515, 3.012641148973965),
    "gemma_2b": (4.3304170169830325, 2.038611338958803),
    "gemma_7b": (1.6259730467796325, 2.6096741570264976),
    "llama3_sfairx": (1.0637639780044557, 2.953017385451928),
    "mistral_raft": (8.309211883544922, 3.0728436748484533),
    "mistral_ray": (3.0136284782886507, 1.6902981149232585),
    "mistral_weqweasdas": (7.071075622558594, 2.578636650248985),
    "oasst_deberta_v3": (2.8976835689097644, 1.7207868789061331),
    "oasst_pythia_1b": (4.293944010734558, 2.3018268820938133),
    "oasst_pythia_7b": (4.706351243972779, 1.3659142113789966),
}
MODELS = sorted(REWARD_MODELS)
_RESPONSE = re.compile(r"^response_(\d+)$")


def _responses(row: Mapping[str, Any]) -> list[tuple[str, list[float]]]:
    """A prompt row's responses in order, each with its ten standardised scores."""
    numbers = sorted(int(m.group(1)) for key in row if (m := _RESPONSE.match(key)))
    found = []
    for n in numbers:
        text = row.get(f"response_{n}")
        if not isinstance(text, str) or not text.strip():
            continue
        scores = []
        for model in MODELS:
            value = row.get(f"response_{n}_{model}")
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise RecordError(f"response_{n}_{model}", f"expected a number, got {_type_name(value)}")
            mean, sd = REWARD_MODELS[model]
            scores.append((float(value) - mean) / sd)
        found.append((text, scores))
    return found


def _weights(row: Mapping[str, Any]) -> list[float]:
    weights = row.get("person_weight")
    if not isinstance(weights, list | tuple) or len(weights) < len(MODELS):
        raise RecordError("person_weight", f"expected {len(MODELS)} weights, one per reward model")
    if any(isinstance(w, bool) or not isinstance(w, int | float) for w in weights[: len(MODELS)]):
        raise RecordError("person_weight", "expected numbers")
    return [float(w) for w in weights[: len(MODELS)]]


def _history(row: Mapping[str, Any], user: Any) -> list[dict[str, Any]]:
    """The user's earlier choices: prompt_<j> with responses a and b, `chosen_<j>` naming the one preferred."""
    earlier = []
    j = 1
    while row.get(f"prompt_{j}") is not None:
        chosen = row.get(f"chosen_{j}")
        if chosen not in ("a", "b"):
            raise RecordError(f"chosen_{j}", f"expected 'a' or 'b', got {chosen!r}")
        other = "b" if chosen == "a" else "a"
        earlier.append(
            {
                "user_id": user,
                "id": f"{user}:history-{j}",
                "prompt": row.get(f"prompt_{j}"),
                "chosen": row.get(f"response_{j}_{chosen}"),
                "rejected": row.get(f"response_{j}_{other}"),
                "split": "train",
            }
        )
        j += 1
    return earlier


def read_personal_llm(card: Card, blobs: Sequence[Blob]) -> Mapped:
    prompts: dict[str, list[tuple[str, list[float]]]] = {}
    people: list[tuple[Location, Mapping[str, Any]]] = []

    def read_row(location: Location, record: Any) -> None:
        """A users row is kept for later; a prompts row's responses are scored now."""
        row = _mapping(record, "record")
        if "person_weight" in row:
            people.append((location, row))
        elif isinstance(row.get("prompt"), str):
            prompts[row["prompt"].strip()] = _responses(row)

    parsed((item for blob in blobs for item in blob_records(blob)), read_row)
    if not people:
        raise DataError(
            "personal-llm: no users (rows with person_weight) among: " + ", ".join(b.name for b in blobs)
        )
    users = parsed(
        people, lambda location, row: [(location, record) for record in _user_records(row, prompts)]
    )
    records: list[tuple[Location, Any]] = [item for user in users for item in user]
    options = ReadOptions(split_map=card.split_map, rule=ItemRule(card.items, card.tie_margin))
    return Mapped(records, options)


def _user_records(
    row: Mapping[str, Any], prompts: Mapping[str, list[tuple[str, list[float]]]]
) -> list[dict[str, Any]]:
    user = row.get("person_id")
    weights = _weights(row)
    test = row.get("test_prompt")
    if not isinstance(test, str) or not test.strip():
        raise RecordError("test_prompt", f"expected the user's test prompt, got {_type_name(test)}")
    responses = prompts.get(test.strip())
    if responses is None:
        raise RecordError(
            "test_prompt", "not among the prompts read (a prompts file with its responses is needed)"
        )
    judged = {
        "user_id": user,
        "id": f"{user}:test",
        "prompt": test,
        "responses": [text for text, _ in responses],
        "scores": [sum(w * s for w, s in zip(weights, scores, strict=True)) for _, scores in responses],
        "split": "test",
    }
    return [*_history(row, user), judged]
