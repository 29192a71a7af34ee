"""Benchmark cards: the four shipped cards read their bundled samples (PRISM's ratings become pairs, ties within
the card's margin dropped, each user's last conversation by start time judged;
PersonaFeedback's personas joined by line; PersonalRewardBench's per-user rows), `prbj judge --benchmark X
--dry-run` plans every shipped card's sample, a user's card maps in-house columns, and a card or a row given
wrong is one line naming the file, the line and the field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from loopback import ChatRequest, ProviderServer

from prbj.cli import main
from prbj.data import load_dataset
from prbj.data.cards import read_card, resolve_card, shipped_cards
from prbj.errors import ConfigError, DataError
from prbj.runs.run_pairs import read_run_pairs

ROOT = Path(__file__).resolve().parents[1]
INHOUSE = ROOT / "examples" / "benchmarks" / "inhouse.toml"


def reply(request: ChatRequest) -> str:
    return "It fits.\nScore: 7" if "evaluator of an answer" in request.system else "Fits.\nResult: A"


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer(reply=reply) as running:
        yield running


def test_the_shipped_cards() -> None:
    assert shipped_cards() == [
        "pal-tldr", "persona", "persona-feedback", "personal-llm", "personal-reward-bench", "personamem", "prb",
        "prism",
    ]  # fmt: skip
    prism = resolve_card("prism")
    assert (prism.loader, prism.version, prism.profile) == ("prism", "2", ("history", "persona", "facts"))
    # The PRISM authors count two ratings 5 points apart or closer as a tie; no other shipped card has ties.
    assert prism.tie_margin == 5 and resolve_card("personal-reward-bench").tie_margin == 0
    assert resolve_card("personal-reward-bench").profile_k == 15


@pytest.mark.parametrize("name", shipped_cards())
def test_a_dry_run_plans_every_shipped_cards_sample(
    name: str, server: ProviderServer, openai_profiles: Path, tmp_path: Path
) -> None:
    data = load_dataset(None, name)
    args = [
        "judge",
        "--benchmark",
        name,
        "--dry-run",
        "-p",
        "judge",
        "--context",
        "profile",
        "--context",
        "none",
    ]
    shared = [
        "--api-base",
        server.url,
        "--providers-dir",
        str(openai_profiles),
        "--cache-dir",
        str(tmp_path / "c"),
    ]
    out = ["--out", str(tmp_path / "out"), "--no-progress"]
    result = CliRunner(env={"COLUMNS": "300"}).invoke(main, [*args, *shared, *out])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.split()[:1] == ["judge"])
    # One pairwise call per pair, context and answer order the card's [protocol] asks for (a best-of-k item: one
    # per two of its candidates), nothing sent.
    protocol = resolve_card(name).protocol
    orders = 2 if protocol is not None and protocol.order == "both" else 1
    calls = sum(p.k * (p.k - 1) // 2 for p in data.pairs)
    assert int(row.split()[1]) == 2 * calls * orders and server.count() == 0
    if name != "prb":
        version = resolve_card(name).version
        sizes = sorted({p.k for p in data.pairs})
        items = "pairs" if sizes == [2] else f"items (best of {'/'.join(map(str, sizes))})"
        assert (
            f"benchmark {name} (version {version}): {len(data.pairs)} {items}"
            + (" (one per user)" if data.users == len(data.pairs) else f" of {data.users} users")
            + " to judge"
            in result.output
        )
    assert not (tmp_path / "out").exists()


def test_prism_ratings_become_pairs_the_higher_score_chosen_and_ties_dropped() -> None:
    data = load_dataset(None, "prism")
    by_id = {p.id: p for p in data.pairs}
    # user9005's last conversation: responses rated 94, 20 and 94 → two pairs (each 94 over the 20); the tie
    # between the two 94s makes none.
    rust = [p for p in data.pairs if p.user_id == "user9005"]
    assert len(rust) == 2
    assert all("Rust, or iron oxide" in p.rejected for p in rust)
    assert {p.chosen.split(",")[0] for p in rust} == {
        "Soak them overnight in white vinegar",
        "Soak them in vinegar",
    }
    # user9002's last conversation rates 88, 35 and 40: 40 over 35 is within the 5-point margin, no pair.
    assert len([p for p in data.pairs if p.user_id == "user9002"]) == 2
    assert data.notes == ("5 tied ratings (scores 5 points apart or closer) made no pair (dropped)",)
    assert (len(data.pairs), data.history_rows) == (26, 24)
    # Four responses rated 92, 4, 30 and 88 in an opening turn make five pairs in that user's history (92 and 88
    # are a tie).
    opening = [
        h for h in by_id["c9102-0-1"].history if h.prompt == "Is it true that we only use 10% of our brains?"
    ]
    assert len(opening) == 5
    # A later turn's question is the conversation so far: the earlier prompt and the response rated highest.
    later = by_id["c9102-1-1"]
    assert later.turns[0] == ("user", "Does raising the minimum wage cost jobs?")
    assert later.turns[1][0] == "assistant" and later.turns[1][1].startswith("The evidence is mixed")
    assert later.turns[-1] == ("user", "What about very large increases?")
    # The last conversation is judged, earlier ones are history; a user with one conversation has none. PRISM says
    # nothing of which users trained a model: no user is seen or unseen.
    single = [p for p in data.pairs if p.user_id == "user9008"]
    assert single and all(dict(p.groups)["has_history"] == "no" and not p.history for p in single)
    assert all(
        dict(p.groups)["has_history"] == "yes" and p.history for p in data.pairs if p.user_id != "user9008"
    )
    assert all(p.seen is None for p in data.pairs)
    # The survey gives the persona, the facts and the groups the card names.
    first = by_id["c9102-0-1"]
    assert first.persona.startswith("I value honesty")
    assert ("importance: factual and informative (0-100)", "98") in first.facts
    assert dict(first.groups) == {
        "age": "25-34 years old",
        "gender": "Female",
        "region": "Northern Europe",
        "has_history": "yes",
    }


def _prism_folder(folder: Path, *, started: dict[str, str] | None) -> None:
    """Two conversations of one user: c1 first in the file, c2 second; `started` gives the conversations file."""
    rows = []
    for conversation, prompt in (("c1", "first question"), ("c2", "second question")):
        for n, (score, chosen) in enumerate(((90, True), (40, False), (43, False))):
            rows.append(
                {
                    "utterance_id": f"{conversation}-{n}",
                    "conversation_id": conversation,
                    "user_id": "u1",
                    "turn": 0,
                    "conversation_type": "unguided",
                    "user_prompt": prompt,
                    "model_response": f"{prompt} answer {n}",
                    "score": score,
                    "if_chosen": chosen,
                }
            )
    folder.mkdir()
    (folder / "utterances.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if started is not None:
        lines = [{"conversation_id": c, "user_id": "u1", "generated_datetime": t} for c, t in started.items()]
        (folder / "conversations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


def test_prism_judges_each_users_latest_conversation_by_its_start_time(tmp_path: Path) -> None:
    # Without a conversations file the file's order decides: c2 is judged.
    _prism_folder(tmp_path / "plain", started=None)
    plain = load_dataset(str(tmp_path / "plain"), "prism")
    assert {p.question for p in plain.pairs} == {"second question"}
    # The conversations file says c2 started first: c1 is the latest, judged, and c2 is its history.
    _prism_folder(tmp_path / "timed", started={"c1": "2023-11-23 09:00:00", "c2": "2023-11-22 18:30:00"})
    timed = load_dataset(str(tmp_path / "timed"), "prism")
    assert {p.question for p in timed.pairs} == {"first question"}
    assert all({h.prompt for h in p.history} == {"second question"} for p in timed.pairs)
    # 90 over 40 and over 43 are pairs; 43 over 40 is within the margin.
    assert len(timed.pairs) == 2 and timed.history_rows == 2


def test_a_prism_card_sets_its_tie_margin(tmp_path: Path) -> None:
    _prism_folder(tmp_path / "data", started=None)
    shipped = (ROOT / "prbj" / "data" / "benchmarks" / "prism.toml").read_text()
    exact = tmp_path / "exact.toml"
    exact.write_text(shipped.replace('name = "prism"', 'name = "prism-exact"').replace("tie_margin = 5", ""))
    data = load_dataset(str(tmp_path / "data"), read_card(exact))
    # Only equal scores tie: 43 over 40 is a pair too.
    assert len(data.pairs) == 3 and data.notes == ()


def test_a_bad_start_time_names_the_conversations_file_line_and_field(tmp_path: Path) -> None:
    _prism_folder(tmp_path / "data", started={"c1": "2023-11-23 09:00:00", "c2": "2023-11-22 18:30:00"})
    lines = (tmp_path / "data" / "conversations.jsonl").read_text().splitlines()
    lines[1] = json.dumps({"conversation_id": "c2", "generated_datetime": 1700000000})
    (tmp_path / "data" / "conversations.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(
        DataError, match=r"conversations.jsonl:2: field 'generated_datetime': expected a date and time"
    ):
        load_dataset(str(tmp_path / "data"), "prism")


def test_persona_feedback_joins_each_persona_by_line_with_tracks_and_tiers() -> None:
    data = load_dataset(None, "persona-feedback")
    assert data.subsets == ["general", "specific"]
    by_id = {p.id: p for p in data.pairs}
    first = by_id["general-easy-1"]
    assert first.user_id == "1" and first.persona.startswith("Name: Lena Fischer")
    assert dict(first.groups) == {"tier": "easy"} and not first.history
    assert {dict(p.groups)["tier"] for p in data.pairs} == {"easy", "medium", "hard"}


def test_persona_feedback_row_without_a_persona_names_its_column(tmp_path: Path) -> None:
    (tmp_path / "persona").mkdir()
    (tmp_path / "persona" / "all_personas.jsonl").write_text('{"Name": "Only one"}\n')
    (tmp_path / "data" / "general").mkdir(parents=True)
    row = {"user_id": 2, "question": "q?", "chosen": "a", "reject": "b"}
    (tmp_path / "data" / "general" / "easy.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(
        DataError, match=r"easy.jsonl:1: field 'user_id': no persona for user 2 in persona/all_"
    ):
        load_dataset(str(tmp_path), "persona-feedback")


def test_personal_reward_bench_rows_are_users_with_their_earlier_choices() -> None:
    data = load_dataset(None, "personal-reward-bench")
    assert (len(data.pairs), data.users, data.history_rows) == (16, 8, 32)
    pair = next(p for p in data.pairs if p.turns)
    assert [role for role, _ in pair.turns] == ["user", "assistant", "user"]
    assert all(len(p.history) == 4 for p in data.pairs)


def test_a_users_card_maps_in_house_columns(tmp_path: Path) -> None:
    card = read_card(INHOUSE)
    data = load_dataset(None, card)
    assert (data.benchmark, data.benchmark_version, data.card) == ("inhouse-support", "2024.1", str(INHOUSE))
    pair = next(p for p in data.pairs if p.id == "t-2003")
    assert pair.user_id == "c-200" and dict(pair.groups) == {"plan": "Business"}
    assert pair.persona.startswith("Runs a design agency") and pair.facts == (
        ("preferred language", "English"),
    )
    # The 'history' phase was written as train: both earlier tickets are this customer's history.
    assert [h.id for h in pair.history] == ["t-2001", "t-2002"]
    # A bad row names the column the card reads, not prbj's field.
    rows = [
        json.loads(line) for line in (INHOUSE.parent / "inhouse" / "feedback.jsonl").read_text().splitlines()
    ]
    rows[1]["message"] = 42
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(DataError, match=rf"^{bad}:2: field 'message': expected a string, got int"):
        load_dataset(str(bad), card)


CARD = """[benchmark]
name = "mine"
version = "1"

[data]
loader = "per-user"

[columns]
prompt = "message"
"""


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("[columns]\n", '[columns]\npromt = "x"\n'),
            ":9: field 'columns.promt': unknown field; did you mean",
        ),
        (('loader = "per-user"', 'loader = "csv"'), ":6: field 'data.loader': unknown loader 'csv'"),
        (('version = "1"', "version = 1.5"), ":3: field 'benchmark.version': expected a version string"),
        (
            ('prompt = "message"', "prompt = 3"),
            ":9: field 'columns.prompt': expected a column name (a string), got 3",
        ),
        (("[data]", "[dataset]"), ":5: field 'dataset': unknown field"),
        (
            ('loader = "per-user"', 'loader = "persona-feedback"\ntie_margin = 5'),
            ":7: field 'data.tie_margin': only the per-user, prism, personal-llm loaders",
        ),
        (
            ('loader = "per-user"', 'loader = "prism"\ntie_margin = -1'),
            ":7: field 'data.tie_margin': expected a non",
        ),
        (('name = "mine"', 'name = "My Bench"'), ":2: field 'benchmark.name': expected lower-case letters"),
    ],
)
def test_a_card_given_wrong_is_one_line_naming_file_line_and_field(
    tmp_path: Path, edit: tuple[str, str], message: str
) -> None:
    path = tmp_path / "card.toml"
    path.write_text(CARD.replace(*edit))
    with pytest.raises(ConfigError) as caught:
        read_card(path)
    assert str(caught.value).startswith(f"{path}{message}")
    result = CliRunner().invoke(
        main, ["judge", "--benchmark", str(path), "--dataset", str(path), "--no-progress"]
    )
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output


def test_an_unknown_benchmark_is_refused_with_the_shipped_names() -> None:
    result = CliRunner().invoke(main, ["judge", "--benchmark", "prizm", "--no-progress"])
    assert result.exit_code == 2
    assert "unknown benchmark; did you mean 'prism'?" in result.output
    assert (
        "pal-tldr, persona, persona-feedback, personal-llm, personal-reward-bench, personamem, prb, prism"
        in result.output
    )


def test_the_run_names_its_benchmark_and_its_pairs_read_back_the_same_way(tmp_path: Path) -> None:
    for benchmark, expected in (("prism", {"name": "prism", "version": "2"}), (str(INHOUSE), None)):
        out = tmp_path / benchmark.replace("/", "_")
        args = ["judge", "--benchmark", benchmark, "-p", "length", "--out", str(out), "--no-progress"]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        (run_dir,) = out.iterdir()
        run = json.loads((run_dir / "run.json").read_text())
        recorded = run["config"]["benchmark"]
        if expected is not None:
            assert recorded == expected
        else:
            assert recorded == {"name": "inhouse-support", "version": "2024.1", "card": str(INHOUSE)}
        found = read_run_pairs(run["dataset"], run["config"], run_dir=run_dir)
        assert found.note is None and len(found.pairs) == run["dataset"]["n_pairs"]


def test_the_oracle_context_is_refused_where_there_is_no_scoring_standard(
    server: ProviderServer, openai_profiles: Path, tmp_path: Path
) -> None:
    args = [
        "judge",
        "--benchmark",
        "prism",
        "-p",
        "judge",
        "--context",
        "oracle",
        "--dry-run",
        "--no-progress",
    ]
    shared = [
        "--api-base",
        server.url,
        "--providers-dir",
        str(openai_profiles),
        "--cache-dir",
        str(tmp_path / "c"),
    ]
    result = CliRunner().invoke(main, [*args, *shared])
    assert result.exit_code == 2
    assert "--context oracle: prism has no scoring standard" in result.output
