"""Personal data stays where its owner says (docs/privacy.md): the routing policy refuses providers before any
request, and `pseudonymized` sends, caches and files no planted email, phone number or URL, with one pseudonym
per entity across a user's posts. Every request is counted and read at a loopback provider."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from loopback import ProviderServer

from conftest import make_record, write_jsonl
from prbj.cli import main
from prbj.errors import ConfigError
from prbj.llm.providers import ProviderSpec, list_providers, load_profile
from prbj.llm.routing import Routing, routing_for
from prbj.privacy.store import Mapping, PrivateStore

KEYS = {"OPENAI_API_KEY": "dummy-key-for-the-loopback", "GEMINI_API_KEY": "dummy-key-for-the-loopback"}

# Planted in the profiles of two users; none of it may reach the provider, the cache or the run directory.
ANA_EMAIL, ANA_PHONE, ANA_URL = (
    "ana.lima@example.org",
    "+1 415-555-0132",
    "https://ana-lima.example.net/darkroom",
)
BEN_EMAIL, BEN_PHONE = "ben.okafor@example.com", "+44 20 7946 0958"
PLANTED = (ANA_EMAIL, ANA_PHONE, ANA_URL, BEN_EMAIL, BEN_PHONE)


def planted_records() -> list[dict[str, Any]]:
    ana = make_record(1)
    ana["profile"] = [
        {"id": "a1", "category": "photo", "text": f"Write to me at {ANA_EMAIL} about film swaps."},
        {"id": "a2", "category": "photo", "text": f"My darkroom notes live at {ANA_URL} if you are curious."},
        {"id": "a3", "category": "photo", "text": f"Text {ANA_PHONE} or email {ANA_EMAIL}, I answer both."},
    ]
    ben = make_record(2)
    ben["profile"] = [
        {"id": "b1", "category": "photo", "text": f"Ring me on {BEN_PHONE} for the camera club."},
        {"id": "b2", "category": "photo", "text": f"Send negatives to {BEN_EMAIL} please."},
    ]
    return [ana, ben]


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server: ProviderServer) -> None:
    server.reset()


def judge(tmp_path: Path, *args: str, dataset: Path | str | None = None) -> tuple[int, str, Path | None]:
    out = tmp_path / "out"
    command = ["judge", "--no-progress", "--out", str(out), "--cache-dir", str(tmp_path / "cache")]
    if dataset is not None:
        command += ["--dataset", str(dataset)]
    result = CliRunner().invoke(
        main,
        [*command, *args],
        env={**KEYS, "PRBJ_PRIVATE_DIR": str(tmp_path / "private")},
        catch_exceptions=False,
        terminal_width=200,
    )
    runs = sorted(p for p in out.iterdir() if p.is_dir()) if out.exists() else []
    return result.exit_code, result.output, runs[-1] if runs else None


def profile(folder: Path, name: str, **fields: Any) -> Path:
    """A profile extending the bundled gpt-5.1 with `fields` (TOML values written as given)."""
    folder.mkdir(exist_ok=True)
    lines = ['extends = "gpt-5.1"', "rpm = 600000", *(f"{key} = {value}" for key, value in fields.items())]
    (folder / f"{name}.toml").write_text("\n".join(lines) + "\n")
    return folder


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def assert_refused(code: int, output: str, server: ProviderServer, *phrases: str) -> None:
    """Exit 2 with one error line holding every phrase, and not one request at the provider."""
    assert code == 2
    [line] = error_lines(output)
    for phrase in phrases:
        assert phrase in line, line
    assert server.requests == []


# --- routing: refused before any request ------------------------------------------------------------------------


def test_zero_retention_refuses_a_standard_profile_before_any_request(
    tmp_path: Path, server: ProviderServer
) -> None:
    code, output, _ = judge(
        tmp_path, "-p", "gpt-5.1", "--api-base", server.url, "--personal-data", "zero-retention"
    )
    assert_refused(
        code, output, server, "'gpt-5.1'", 'retention = "standard"', "--personal-data zero-retention"
    )


def test_zero_retention_sends_to_a_profile_that_states_it(tmp_path: Path, server: ProviderServer) -> None:
    providers = profile(tmp_path / "providers", "gpt-zdr", retention='"zero"', api_base=f'"{server.url}"')
    code, output, run_dir = judge(
        tmp_path, "-p", "gpt-zdr", "--providers-dir", str(providers), "--limit", "1",
        "--context", "none", "--personal-data", "zero-retention",
    )  # fmt: skip
    assert code == 0, output
    assert len(server.requests) == 3  # one pair per subset of the sample
    assert run_dir is not None
    assert json.loads((run_dir / "run.json").read_text())["privacy"]["personal_data"] == "zero-retention"


def test_an_api_base_other_than_the_profiles_voids_what_it_states(
    tmp_path: Path, server: ProviderServer
) -> None:
    # The profile vouches for its own endpoint; sent elsewhere (maybe a proxy), it is standard and remote again.
    providers = profile(tmp_path / "providers", "gpt-zdr", retention='"zero"', local="true")
    code, output, _ = judge(
        tmp_path, "-p", "gpt-zdr", "--providers-dir", str(providers), "--api-base", server.url,
        "--personal-data", "zero-retention",
    )  # fmt: skip
    # The refusal names the real reason (the override) and how to state the claim for the new address.
    assert_refused(
        code, output, server, "'gpt-zdr'", "its profile states", f"--api-base {server.url} sends it elsewhere",
        'extends = "gpt-zdr"', f'api_base = "{server.url}"',
    )  # fmt: skip


@pytest.mark.parametrize(
    "provider",
    ["gpt-5.1", "gemini-3-flash", "litellm:openai/Qwen/Qwen3-8B"],
)
def test_local_refuses_every_remote_judge_even_on_a_loopback_url(
    tmp_path: Path, server: ProviderServer, provider: str
) -> None:
    # 127.0.0.1 says nothing about where the data goes next: locality is what a profile states, never the URL.
    code, output, _ = judge(tmp_path, "-p", provider, "--api-base", server.url, "--personal-data", "local")
    assert_refused(code, output, server, f"'{provider}'", "is not local", "--personal-data local")


def test_local_sends_to_a_profile_stating_local_and_runs_offline_judges(
    tmp_path: Path, server: ProviderServer
) -> None:
    providers = profile(
        tmp_path / "providers", "my-vllm", local="true", api_base=f'"{server.url}"', paid="false"
    )
    code, output, _ = judge(
        tmp_path, "-p", "my-vllm", "-p", "length", "--providers-dir", str(providers), "--limit", "1",
        "--context", "none", "--personal-data", "local",
    )  # fmt: skip
    assert code == 0, output
    assert len(server.requests) == 3


def test_batch_is_refused_where_the_policy_forbids_keeping_data(
    tmp_path: Path, server: ProviderServer
) -> None:
    providers = profile(tmp_path / "providers", "gpt-zdr", retention='"zero"', api_base=f'"{server.url}"')
    code, output, _ = judge(
        tmp_path, "-p", "gpt-zdr", "--providers-dir", str(providers), "--batch", "--no-wait",
        "--personal-data", "zero-retention",
    )  # fmt: skip
    assert_refused(code, output, server, "--batch", "never zero-retention")


def test_own_data_goes_to_no_remote_model_until_the_policy_is_stated(
    tmp_path: Path, server: ProviderServer
) -> None:
    dataset = write_jsonl(tmp_path / "mine.jsonl", planted_records())
    code, output, _ = judge(tmp_path, "-p", "gpt-5.1", "--api-base", server.url, dataset=dataset)
    assert_refused(code, output, server, "not public data", "--personal-data any | pseudonymized", "gpt-5.1")
    # Offline judges read it as before; stating the policy sends it.
    assert judge(tmp_path, "-p", "length", dataset=dataset)[0] == 0
    code, output, _ = judge(
        tmp_path, "-p", "gpt-5.1", "--api-base", server.url, "--context", "none", "--personal-data", "any",
        dataset=dataset,
    )  # fmt: skip
    assert code == 0, output
    assert len(server.requests) == 2


def test_the_sample_and_the_benchmark_default_to_any() -> None:
    assert routing_for(None, "sample", public=True).policy == "any"
    assert routing_for(None, "pairs.jsonl", public=False).policy is None
    assert routing_for("local", "sample", public=True).policy == "local"


@pytest.mark.parametrize("card", ["personal-reward-bench", "prism", "persona-feedback"])
def test_a_shipped_benchmarks_sample_defaults_to_any(
    tmp_path: Path, server: ProviderServer, card: str
) -> None:
    code, output, run_dir = judge(
        tmp_path, "-p", "gpt-5.1", "--api-base", server.url, "--benchmark", card, "--limit", "1",
        "--context", "none",
    )  # fmt: skip
    assert code == 0, output
    assert server.requests
    assert run_dir is not None
    assert json.loads((run_dir / "run.json").read_text())["privacy"]["personal_data"] == "any"


def own_card(folder: Path) -> Path:
    """A user's card: PRISM's, renamed, naming its own hub repository, with a copy of the sample beside it."""
    import shutil

    shipped = Path(__file__).resolve().parents[1] / "prbj" / "data" / "benchmarks"
    shutil.copytree(shipped / "prism", folder / "sample")
    text = (shipped / "prism.toml").read_text().replace('name = "prism"', 'name = "our-logs"')
    text = text.replace("hf:HannahRoseKirk/prism-alignment", "hf:our-org/our-logs")
    (folder / "ours.toml").write_text(text.replace('loader = "prism"', 'loader = "prism"\nsample = "sample"'))
    return folder / "ours.toml"


def test_the_hub_datasets_the_shipped_cards_name_are_public_and_a_users_card_is_not(tmp_path: Path) -> None:
    from prbj.data.cards import read_card, resolve_card, shipped_cards
    from prbj.data.loaders import is_public

    for name in shipped_cards():
        assert is_public("sample", resolve_card(name)), name
    for repo in (
        "QiyaoMa/Personalized-RewardBench",
        "alireza7/LaMP-QA",
        "HannahRoseKirk/prism-alignment",
        "PersonalAILab/PersonaFeedback",
        "MichaelR207/prism_personalized_0125",
        "MichaelR207/chatbot_arena_personalized_0125",
    ):
        assert is_public(f"hf:{repo}"), repo
    # A user's card is theirs to write: the hub id it names as source and the sample beside it are theirs too.
    ours = read_card(own_card(tmp_path))
    assert not is_public("sample", ours) and not is_public(None, ours)
    assert not is_public("hf:our-org/our-logs", ours) and not is_public("hf:our-org/our-logs")
    assert not is_public(str(tmp_path / "sample"))


def test_the_docs_name_every_card_and_hub_dataset_treated_as_public() -> None:
    """docs/privacy.md's default and `prbj judge --help` name every shipped card, and the docs every hub
    repository prbj treats as public data: the list a reader checks before sending data (the four cards added in
    issue 41 were missing from both)."""
    from prbj.data.cards import shipped_cards
    from prbj.data.loaders import public_hub_datasets

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "privacy.md").read_text(encoding="utf-8")
    default = " ".join(text.split("**Default.**", 1)[1].split("\n\n", 1)[0].split())
    listed = default.split("(`--benchmark ", 1)[1].split("`", 1)[0].split(" | ")
    assert sorted(listed) == sorted(shipped_cards())
    assert [repo for repo in sorted(public_hub_datasets()) if f"`hf:{repo}`" not in default] == []
    # Click wraps the help at 80 columns, breaking a long name after its hyphen.
    helped = " ".join(CliRunner().invoke(main, ["judge", "--help"]).output.split()).replace("- ", "-")
    assert [name for name in shipped_cards() if f"{name}," not in helped and f"{name} " not in helped] == []


def test_a_users_own_card_and_its_sample_go_to_no_remote_model_until_the_policy_is_stated(
    tmp_path: Path, server: ProviderServer
) -> None:
    card = own_card(tmp_path)
    args = ("-p", "gpt-5.1", "--api-base", server.url, "--benchmark", str(card), "--limit", "1")
    code, output, _ = judge(tmp_path, *args)
    assert_refused(code, output, server, "'gpt-5.1'", f"the sample of {card} is not public")
    code, output, _ = judge(tmp_path, *args, "--context", "none", "--personal-data", "any")
    assert code == 0, output
    assert server.requests


def test_the_routing_rules_table() -> None:
    remote = ProviderSpec(name="r", model="openai/x", api_key_env=None)
    zero = ProviderSpec(name="z", model="openai/x", api_key_env=None, retention="zero")
    mine = ProviderSpec(name="m", model="openai/x", api_key_env=None, local=True)
    in_process = ProviderSpec(name="h", model="prbj-local/x", api_key_env=None, transport="local")
    policies: list[Any] = ["local", "zero-retention", "pseudonymized", "any", None]
    allowed = {
        policy: [p.name for p in (remote, zero, mine, in_process) if Routing(policy, "d").refusal(p) is None]
        for policy in policies
    }
    assert allowed == {
        "local": ["m", "h"],
        "zero-retention": ["z", "m", "h"],
        "pseudonymized": ["r", "z", "m", "h"],
        "any": ["r", "z", "m", "h"],
        None: ["m", "h"],
    }


def test_a_profile_stating_a_wrong_retention_is_one_line_naming_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "odd.toml"
    path.write_text('model = "openai/x"\nretention = "none"\n')
    with pytest.raises(ConfigError, match=r"odd\.toml: field 'retention': expected \"zero\" or \"standard\""):
        load_profile("odd", path)
    path.write_text('model = "openai/x"\nlocal = "yes"\n')
    with pytest.raises(ConfigError, match=r"odd\.toml: field 'local': expected true or false"):
        load_profile("odd", path)


def test_bundled_profiles_state_standard_retention_and_are_not_local() -> None:
    stated = {spec.name: (spec.retention, spec.local) for spec in list_providers(resolve_prices=False)}
    assert stated.pop("openai-compatible") == ("standard", True)
    assert set(stated.values()) == {("standard", False)}


# --- pseudonymized: what leaves, what is cached, what is filed --------------------------------------------------


def sent_bodies(server: ProviderServer) -> list[str]:
    return [json.dumps(r.body, ensure_ascii=False) for r in server.requests]


def every_byte_under(*folders: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for folder in folders for p in sorted(folder.rglob("*")) if p.is_file()]


def parquet_strings(path: Path) -> str:
    """The text of every string cell (Parquet pages are compressed: grepping the bytes alone could miss one)."""
    frame = pl.read_parquet(path)
    return json.dumps(frame.select(pl.col(pl.String)).to_dicts(), ensure_ascii=False)


def test_pseudonymized_never_sends_caches_or_files_the_planted_entities(
    tmp_path: Path, server: ProviderServer
) -> None:
    dataset = write_jsonl(tmp_path / "mine.jsonl", planted_records())
    code, output, run_dir = judge(
        tmp_path, "-p", "gpt-5.1", "--api-base", server.url, "--context", "profile",
        "--personal-data", "pseudonymized", "--ner-model", "none", dataset=dataset,
    )  # fmt: skip
    assert code == 0, output
    assert run_dir is not None
    bodies = sent_bodies(server)
    assert len(bodies) == 2
    for body in bodies:
        for planted in PLANTED:
            assert planted not in body
    # One pseudonym per entity across a user's posts: Ana's email twice, as EMAIL_1 both times.
    [ana] = [b for b in bodies if "darkroom notes" in b]
    assert ana.count("EMAIL_1") == 2 and "URL_1" in ana and "PHONE_1" in ana
    [ben] = [b for b in bodies if "camera club" in b]
    assert "PHONE_1" in ben and "EMAIL_1" in ben
    # Nothing planted in the cache or the run directory, byte for byte, nor in any Parquet cell.
    files = every_byte_under(tmp_path / "cache", run_dir)
    assert files
    for path, data in files:
        for planted in PLANTED:
            assert planted.encode() not in data, path
        if path.suffix == ".parquet":
            text = parquet_strings(path)
            assert not any(planted in text for planted in PLANTED), path
    # Nor in an export of the run, even one asked to include what the judges were shown.
    for fmt, target in (("eee", tmp_path / "eee"), ("csv", tmp_path / "judgments.csv")):
        exported = CliRunner().invoke(
            main,
            ["export", str(run_dir), "--format", fmt, "--out", str(target), "--include-profiles",
             "--private-dir", str(tmp_path / "private")],
        )  # fmt: skip
        assert exported.exit_code == 0, exported.output
        for path, data in (
            every_byte_under(tmp_path / "eee") if fmt == "eee" else [(target, target.read_bytes())]
        ):
            assert not any(planted.encode() in data for planted in PLANTED), path
    # The run directory holds pair ids, not the text shown or written: that is in the private store.
    judgments = pl.read_parquet(run_dir / "judgments.parquet")
    assert judgments["context_block"].null_count() == judgments.height
    assert judgments["reply"].null_count() == judgments.height
    privacy = json.loads((run_dir / "run.json").read_text())["privacy"]
    assert privacy["personal_data"] == "pseudonymized" and privacy["ner"] is None
    assert privacy["replaced"] == {"EMAIL_ADDRESS": 2, "PHONE_NUMBER": 2, "URL": 1}
    store = PrivateStore(tmp_path / "private")
    table = store.load_pseudonyms(privacy["pseudonyms"])
    assert table is not None
    assert table.mapping("t-001").reveal("EMAIL_1 wrote") == f"{ANA_EMAIL} wrote"
    texts = store.load_texts(run_dir.name, "judgments")
    assert texts is not None and texts["context_block"].null_count() == 0
    assert "EMAIL_1" in texts["context_block"][0] or "EMAIL_1" in texts["context_block"][1]
    # Owner-only, all the way down.
    for path in [store.directory, *store.directory.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), path


def test_a_rerun_sends_the_same_prompts_and_pays_nothing(tmp_path: Path, server: ProviderServer) -> None:
    dataset = write_jsonl(tmp_path / "mine.jsonl", planted_records())
    args = (
        "-p",
        "gpt-5.1",
        "--api-base",
        server.url,
        "--personal-data",
        "pseudonymized",
        "--ner-model",
        "none",
    )
    assert judge(tmp_path, *args, dataset=dataset)[0] == 0
    first = len(server.requests)
    assert first > 0
    code, output, _ = judge(tmp_path, *args, dataset=dataset)
    assert code == 0, output
    assert len(server.requests) == first


def test_names_and_places_go_through_a_spacy_ner_model(tmp_path: Path, server: ProviderServer) -> None:
    # No spaCy model can be downloaded here: a blank pipeline with an entity ruler stands in for one, and
    # travels the same path a trained model's entities do (spacy.load, Presidio's SpacyRecognizer).
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns(
        [{"label": "PERSON", "pattern": "Tom"}, {"label": "GPE", "pattern": "Lisbon"}]
    )
    nlp.to_disk(tmp_path / "ner")
    record = make_record(1)
    record["profile"] = [
        {"id": "p1", "category": "family", "text": "My son Tom wants a camera for his birthday."},
        {"id": "p2", "category": "family", "text": "Tom and I are moving to Lisbon in May."},
    ]
    dataset = write_jsonl(tmp_path / "mine.jsonl", [record])
    code, output, _ = judge(
        tmp_path, "-p", "gpt-5.1", "--api-base", server.url, "--personal-data", "pseudonymized",
        "--ner-model", str(tmp_path / "ner"), dataset=dataset,
    )  # fmt: skip
    assert code == 0, output
    [body] = sent_bodies(server)
    assert "Tom" not in body and "Lisbon" not in body
    assert "My son PERSON_1 wants" in body and "PERSON_1 and I are moving to LOCATION_1" in body
    # "Tomato" is not Tom.
    assert "PERSON_1ato" not in body


def test_questions_and_answers_are_pseudonymized_when_asked(tmp_path: Path, server: ProviderServer) -> None:
    record = make_record(1, question=f"Can you email {ANA_EMAIL} a film list?")
    record["profile"] = [{"id": "p1", "category": "photo", "text": f"I am {ANA_EMAIL}."}]
    dataset = write_jsonl(tmp_path / "mine.jsonl", [record])
    base = (
        "-p",
        "gpt-5.1",
        "--api-base",
        server.url,
        "--personal-data",
        "pseudonymized",
        "--ner-model",
        "none",
        "--context",
        "profile",
    )
    assert judge(tmp_path, *base, dataset=dataset)[0] == 0
    [left_alone] = sent_bodies(server)
    assert f"Can you email {ANA_EMAIL}" in left_alone and f"I am {ANA_EMAIL}" not in left_alone
    server.reset()
    assert judge(tmp_path, *base, "--pseudonymize-answers", dataset=dataset)[0] == 0
    [both] = sent_bodies(server)
    assert ANA_EMAIL not in both and "Can you email EMAIL_1" in both and "I am EMAIL_1." in both


def test_any_does_not_import_presidio(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from prbj.cli import main\n"
        f"r = CliRunner().invoke(main, ['judge', '--no-progress', '-p', 'length', '--out', {str(tmp_path)!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(('presidio', 'spacy')))\n"
        "print(heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=os.environ
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# --- the store and the mapping --------------------------------------------------------------------------------


def test_a_mapping_applies_and_reveals_whole_words_only() -> None:
    mapping = Mapping((("PERSON", "Tom", "PERSON_1"), ("EMAIL_ADDRESS", "tom@x.org", "EMAIL_1")))
    clear = "Tom (tom@x.org) likes Tomatoes."
    shown = mapping.apply(clear)
    assert shown == "PERSON_1 (EMAIL_1) likes Tomatoes."
    assert mapping.reveal(shown) == clear


def test_a_tampered_pseudonym_table_is_refused_naming_the_file(tmp_path: Path) -> None:
    store = PrivateStore(tmp_path)
    (tmp_path / "pseudonyms").mkdir()
    (tmp_path / "pseudonyms" / "0123456789abcdef.json").write_text('{"users": 3}')
    with pytest.raises(ConfigError, match=r"0123456789abcdef\.json: not a pseudonym table"):
        store.load_pseudonyms("0123456789abcdef")
    with pytest.raises(ConfigError, match="not a table name"):
        store.load_pseudonyms("../../etc/passwd")


# --- what privacy costs, and the shipped data ---------------------------------------------------------------------


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def privacy_runs(tmp_path: Path, dataset: Path, *args: str) -> tuple[list[Path], list[dict[str, str]]]:
    """The same judges run with --personal-data any and pseudonymized, and the report's privacy-cost rows by
    header."""
    runs = []
    for policy in ("any", "pseudonymized"):
        code, output, run_dir = judge(
            tmp_path, *args, "--personal-data", policy, "--ner-model", "none", dataset=dataset
        )
        assert code == 0 and run_dir is not None, output
        runs.append(run_dir)
    result = CliRunner().invoke(
        main, ["report", *map(str, runs), "--out", str(tmp_path / "lb")], terminal_width=200
    )
    assert result.exit_code == 0, result.output
    assert "What privacy costs" in result.output
    section = (tmp_path / "lb" / "report.md").read_text().split("## What privacy costs", 1)[1]
    header, _, *rows = [line for line in section.splitlines() if line.startswith("|")]

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]

    return runs, [dict(zip(cells(header), cells(row), strict=True)) for row in rows]


def outcomes(run_dir: Path, judge_name: str) -> dict[str, bool]:
    frame = pl.read_parquet(run_dir / "judgments.parquet").filter(pl.col("judge") == judge_name)
    return dict(frame.select("pair_id", "correct").iter_rows())


def test_the_report_pairs_a_run_with_any_and_one_pseudonymized(tmp_path: Path) -> None:
    from prbj.analysis.mcnemar import paired_test

    runs, rows = privacy_runs(tmp_path, EXAMPLES / "planted_pii.jsonl", "-p", "bm25-profile", "-p", "length")
    assert [r["judge"] for r in rows] == ["bm25-profile", "length"]
    for row in rows:
        n, test = paired_test(*(outcomes(run, row["judge"]) for run in runs))
        assert row["policy"] == "pseudonymized" and row["pairs"] == str(n) == "20"
        assert row["lost / gained"] == f"{test.lost} / {test.gained}"
        assert "users" not in row  # one pair per user: pairs are users
    # The length judge never reads the profile: pseudonyms cannot change its verdicts.
    [length] = [r for r in rows if r["judge"] == "length"]
    assert length["lost / gained"] == "0 / 0" and length["95% CI (pp)"] == "0.0…0.0"


def test_where_users_repeat_the_privacy_cost_is_tested_and_resampled_over_users(tmp_path: Path) -> None:
    """On the per-user planted sample (8 users, 2 judged pairs each) the test is over users: with under 50 users
    the exact sign-flip test, computed here by hand from the judgments by listing every sign of the per-user
    differences D_k = the user's pairs lost minus pairs gained."""
    import itertools

    runs, rows = privacy_runs(
        tmp_path, EXAMPLES / "planted_pii_users.jsonl", "--benchmark", "personal-reward-bench",
        "-p", "bm25-profile", "-p", "embed-profile", "-p", "length",
    )  # fmt: skip
    judged = pl.read_parquet(runs[0] / "judgments.parquet")
    user_of = dict(judged.select("pair_id", "user_id").unique().iter_rows())
    assert len(set(user_of.values())) == 8 and len(user_of) == 16
    flipped = 0
    for row in rows:
        clear, guarded = (outcomes(run, row["judge"]) for run in runs)
        lost = {p for p in clear if clear[p] and not guarded[p]}
        gained = {p for p in clear if guarded[p] and not clear[p]}
        assert row["users"] == "8" and row["lost / gained"] == f"{len(lost)} / {len(gained)}"
        d = Counter(user_of[p] for p in lost)
        d.subtract(user_of[p] for p in gained)
        values = [v for v in d.values() if v]
        signs = list(itertools.product((1, -1), repeat=len(values)))
        observed = abs(sum(values))
        extreme = sum(
            abs(sum(s * v for s, v in zip(flip, values, strict=True))) >= observed for flip in signs
        )
        assert row["p"] == f"{extreme / len(signs):.3f}"
        flipped += len(lost) + len(gained)
    assert flipped  # pseudonyms moved some verdict here, so the test above is not only the trivial p = 1
    # The guarded run is the same benchmark as the clear one (its card and version, not PRB's).
    benchmarks = [json.loads((run / "run.json").read_text())["config"]["benchmark"] for run in runs]
    assert benchmarks[0] == benchmarks[1] and benchmarks[0]["name"] == "personal-reward-bench"


def test_the_planted_sample_is_what_its_script_writes() -> None:
    script = Path(__file__).resolve().parents[1] / "scripts" / "plant_pii.py"
    done = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout


def test_the_shipped_lamp_records_are_public_and_an_edited_copy_is_not(tmp_path: Path) -> None:
    from prbj.data.lamp import SHIPPED_FINGERPRINTS, load_lamp

    shipped = Path(__file__).resolve().parents[1] / "examples" / "lamp_qa.jsonl"
    assert load_lamp(str(shipped)).fingerprint() in SHIPPED_FINGERPRINTS
    edited = tmp_path / "lamp.jsonl"
    edited.write_text(shipped.read_text().replace("watercolour", "watercolor"))
    assert load_lamp(str(edited)).fingerprint() not in SHIPPED_FINGERPRINTS


# --- reading a guarded run back: viewer and show ------------------------------------------------------------


def test_the_viewer_shows_pseudonyms_reveals_locally_and_a_bundle_carries_no_text(
    tmp_path: Path, server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prbj.view.catalog import Catalog

    dataset = write_jsonl(tmp_path / "mine.jsonl", planted_records())
    args = (
        "-p",
        "gpt-5.1",
        "--api-base",
        server.url,
        "--personal-data",
        "pseudonymized",
        "--ner-model",
        "none",
    )
    code, output, run_dir = judge(tmp_path, *args, dataset=dataset)
    assert code == 0 and run_dir is not None, output
    monkeypatch.setenv("PRBJ_PRIVATE_DIR", str(tmp_path / "private"))

    def first_post(catalog: Catalog) -> tuple[str, Any]:
        [key] = catalog.runs
        loaded = catalog.load(key)
        pair = loaded.pair("t-001")
        return (pair.profile[0].text if pair is not None else ""), loaded

    shown, loaded = first_post(Catalog.open([run_dir]))
    assert shown == "Write to me at EMAIL_1 about film swaps."
    assert loaded.data.judgments["reply"].null_count() == 0  # from the private store
    revealed, _ = first_post(Catalog.open([run_dir], reveal=True))
    assert revealed == f"Write to me at {ANA_EMAIL} about film swaps."
    bundled, loaded = first_post(Catalog.open([run_dir], private=False))
    assert bundled == "" and "bundle is shared" in (loaded.pairs.note or "")
    assert loaded.data.judgments["reply"].null_count() == loaded.data.judgments.height
    # Without the table on this machine, nothing is shown in clear.
    monkeypatch.setenv("PRBJ_PRIVATE_DIR", str(tmp_path / "elsewhere"))
    hidden, loaded = first_post(Catalog.open([run_dir]))
    assert hidden == "" and "not on this machine" in (loaded.pairs.note or "")


def test_reveal_is_refused_for_a_bundle_or_another_host(tmp_path: Path) -> None:
    for extra in (["--bundle", str(tmp_path / "site")], ["--host", "0.0.0.0"]):
        result = CliRunner().invoke(main, ["view", str(tmp_path), "--reveal", *extra])
        assert result.exit_code == 2
        assert error_lines(result.output) == [
            "error: --reveal shows personal text in clear: only to this machine (--host 127.0.0.1), never in a "
            "--bundle"
        ]


def test_pseudonyms_are_per_user_across_that_users_pairs() -> None:
    from prbj.data.schema import Pair, ProfilePost
    from prbj.privacy.detect import Detector
    from prbj.privacy.pseudonyms import Pseudonymizer

    def pair(pair_id: str, user: str, text: str) -> Pair:
        post = ProfilePost(f"{pair_id}-p", "x", text)
        return Pair(pair_id, "Art_and_Entertainment", "q?", (post,), "n", (), "a", "b", user_id=user)

    pairs = [
        pair("p1", "ana", f"Mail {ANA_EMAIL} or {BEN_EMAIL}."),
        pair("p2", "ana", f"Only {BEN_EMAIL} now."),
        pair("p3", "ben", f"I am {BEN_EMAIL}."),
    ]
    rewritten, tables = Pseudonymizer(Detector()).records(pairs)
    texts = [p.profile[0].text for p in rewritten]
    # Ana's two pairs share her table (Ben's address is her EMAIL_2 in both); Ben numbers his own.
    assert texts == ["Mail EMAIL_1 or EMAIL_2.", "Only EMAIL_2 now.", "I am EMAIL_1."]
    assert [(e.original, e.pseudonym) for e in tables["ana"]] == [
        (ANA_EMAIL, "EMAIL_1"),
        (BEN_EMAIL, "EMAIL_2"),
    ]


# --- the per-user layout: personas, earlier choices, stated facts, conversations ----------------------------------

CARA_EMAIL, CARA_PHONE, CARA_URL = (
    "cara.ng@example.org",
    "+1 206-555-0147",
    "https://cara-ng.example.net/trips",
)
DAN_EMAIL, DAN_URL = "dan.ruiz@example.com", "https://danruiz.example.com/bikes"
PLANTED_PER_USER = (CARA_EMAIL, CARA_PHONE, CARA_URL, DAN_EMAIL, DAN_URL)


def per_user_records() -> list[dict[str, Any]]:
    """Two users in the per-user layout with their details in every kind of profile text (persona, facts, both
    answers and the prompt of earlier choices), and two judged rows each; the judged conversations mention the
    user's own email (left alone unless --pseudonymize-answers)."""

    def history(user: str, n: int, prompt: str, chosen: str, rejected: str, **more: Any) -> dict[str, Any]:
        return {"user_id": user, "id": f"{user}-h{n}", "prompt": prompt, "chosen": chosen,
                "rejected": rejected, "split": "train", **more}  # fmt: skip

    def judged(user: str, n: int, email: str) -> dict[str, Any]:
        return {
            "user_id": user,
            "id": f"{user}-t{n}",
            "context": [
                {"role": "user", "content": f"Plan a weekend away #{n}; send it to {email}."},
                {"role": "assistant", "content": "By train or by bike?"},
                {"role": "user", "content": "By train, somewhere quiet."},
            ],
            "chosen": "A quiet lakeside town two hours away, trains hourly.",
            "rejected": "A festival city, loud all weekend.",
            "split": "test",
        }

    return [
        history(
            "cara", 1, f"Email {CARA_EMAIL} a packing list", f"Sent to {CARA_EMAIL}: light layers.",
            "A long list of gadgets.", persona=f"Slow traveller; reach me at {CARA_EMAIL} or {CARA_PHONE}.",
            facts={"travel blog": CARA_URL},
        ),
        history("cara", 2, f"Summarize my blog {CARA_URL}", "Short trips by train.", f"Call {CARA_PHONE} first."),
        judged("cara", 1, CARA_EMAIL),
        judged("cara", 2, CARA_EMAIL),
        history(
            "dan", 1, "Which bike for commuting?", f"A steel tourer, as on {DAN_URL}.", "A racing bike.",
            persona=f"Commuter who writes at {DAN_URL}; mail {DAN_EMAIL}.",
        ),
        judged("dan", 1, DAN_EMAIL),
        judged("dan", 2, DAN_EMAIL),
    ]  # fmt: skip


def assert_none_at_rest(planted: tuple[str, ...], *folders: Path) -> None:
    """No planted text in any file under `folders`, byte for byte, nor in any Parquet string cell."""
    files = every_byte_under(*folders)
    assert files
    for path, data in files:
        assert not any(p.encode() in data for p in planted), path
        if path.suffix == ".parquet":
            text = parquet_strings(path)
            assert not any(p in text for p in planted), path


def test_pseudonymized_per_user_data_sends_caches_and_files_none_of_its_personal_details(
    tmp_path: Path, server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prbj.view.catalog import Catalog

    dataset = write_jsonl(tmp_path / "users.jsonl", per_user_records())
    args = [
        "-p",
        "gpt-5.1",
        "--api-base",
        server.url,
        "--context",
        "profile",
        "--personal-data",
        "pseudonymized",
        "--ner-model",
        "none",
    ]
    # Without --pseudonymize-answers stated otherwise the judged conversations stay as they are (the old default).
    code, output, run_dir = judge(tmp_path, *args, "--no-pseudonymize-answers", dataset=dataset)
    assert code == 0, output
    assert run_dir is not None
    bodies = sent_bodies(server)
    assert len(bodies) == 4  # two judged rows per user
    planted_in_profiles = (CARA_PHONE, CARA_URL, DAN_URL)
    for body in bodies:
        assert not any(planted in body for planted in planted_in_profiles), body
    cara = [b for b in bodies if "Slow traveller" in b]
    assert len(cara) == 2
    for body in cara:
        # One placeholder per entity across persona, facts and both earlier choices, in both of her pairs.
        assert "reach me at EMAIL_1 or PHONE_1" in body and "travel blog: URL_1" in body
        assert "Email EMAIL_1 a packing list" in body and "Sent to EMAIL_1: light layers." in body
        assert "Summarize my blog URL_1" in body and "Call PHONE_1 first." in body
        # The judged conversation is the question: left as it is with --no-pseudonymize-answers.
        assert f"send it to {CARA_EMAIL}" in body
        assert body.count(CARA_EMAIL) == 1
    for body in (b for b in bodies if "Commuter" in b):
        assert "Commuter who writes at URL_1; mail EMAIL_1." in body and "as on URL_1." in body
    # Run files, the cache and the planner's store: none of the profile's details.
    assert_none_at_rest(planted_in_profiles, tmp_path / "cache", run_dir)
    privacy = json.loads((run_dir / "run.json").read_text())["privacy"]
    assert privacy["replaced"] == {"EMAIL_ADDRESS": 2, "PHONE_NUMBER": 1, "URL": 2}
    assert privacy["questions_and_answers"] is False
    # The viewer shows the pairs as the judges saw them, persona and history included.
    monkeypatch.setenv("PRBJ_PRIVATE_DIR", str(tmp_path / "private"))
    [key] = (catalog := Catalog.open([run_dir])).runs
    shown = catalog.load(key).pair("cara-t1")
    assert shown is not None
    assert shown.persona == "Slow traveller; reach me at EMAIL_1 or PHONE_1."
    assert shown.facts == (("travel blog", "URL_1"),)
    assert [h.chosen for h in shown.history] == ["Sent to EMAIL_1: light layers.", "Short trips by train."]

    # By default on per-user data (issue 42 item 4) the conversation's turns are the user's too, pseudonymized
    # by the same table as her profile: her email is her EMAIL_1 in both, so a judge can still tie them.
    server.reset()
    code, output, run_dir = judge(tmp_path, *args, dataset=dataset)
    assert code == 0, output
    bodies = sent_bodies(server)
    assert len(bodies) == 4
    for body in bodies:
        assert not any(planted in body for planted in PLANTED_PER_USER), body
    for body in (b for b in bodies if "Slow traveller" in b):
        assert "send it to EMAIL_1." in body and "reach me at EMAIL_1" in body
    assert run_dir is not None
    assert json.loads((run_dir / "run.json").read_text())["privacy"]["questions_and_answers"] is True
    assert_none_at_rest(PLANTED_PER_USER, tmp_path / "cache", run_dir)


def test_every_text_of_a_per_user_pair_is_rewritten_and_nothing_else() -> None:
    """A pair with the same email in every text it holds about its user: after pseudonymizing (answers too) no
    string of the pair holds it; ids, roles, fact names and groups are as they were."""
    from dataclasses import astuple

    from prbj.data.schema import Pair, Preference, ProfilePost, RubricAspect
    from prbj.privacy.detect import Detector
    from prbj.privacy.pseudonyms import Pseudonymizer

    mail = CARA_EMAIL
    pair = Pair(
        "p1", "default", f"User: hi {mail}\n\nAssistant: hello", (ProfilePost("post", "c", f"post {mail}"),),
        f"narrative {mail}", (RubricAspect(f"aspect {mail}", f"evidence {mail}", f"reason {mail}"),),
        f"chosen {mail}", f"rejected {mail}", user_id="cara", groups=(("age", "35-44"),),
        turns=(("user", f"hi {mail}"), ("assistant", "hello")),
        history=(Preference("h1", f"prompt {mail}", f"earlier {mail}", f"other {mail}"),),
        persona=f"persona {mail}", facts=(("contact", f"fact {mail}"),),
    )  # fmt: skip
    [rewritten], tables = Pseudonymizer(Detector(), answers=True).records([pair])

    def strings(value: Any) -> list[str]:
        if isinstance(value, str):
            return [value]
        return [s for item in value for s in strings(item)] if isinstance(value, tuple) else []

    assert not [text for text in strings(astuple(rewritten)) if mail in text]
    assert rewritten.persona == "persona EMAIL_1" and rewritten.turns[0] == ("user", "hi EMAIL_1")
    assert rewritten.question.startswith("User: hi EMAIL_1")
    kept = ("id", "user_id", "category", "groups")
    assert [getattr(rewritten, f) for f in kept] == [getattr(pair, f) for f in kept]
    assert rewritten.facts[0][0] == "contact" and rewritten.history[0].id == "h1"
    assert [(e.original, e.pseudonym) for e in tables["cara"]] == [(mail, "EMAIL_1")]


def test_a_url_ends_before_the_sentences_punctuation_and_no_entity_is_part_of_a_word() -> None:
    # Presidio's URL pattern takes a trailing full stop or semicolon: one address would get two pseudonyms.
    from prbj.privacy.detect import Detector

    detector = Detector()
    for text in ("(see https://x.org/a).", "go to https://x.org/a; then", "Is it https://x.org/a?"):
        assert [text[f.start : f.end] for f in detector.find(text) if f.kind == "URL"] == ["https://x.org/a"]
    # Part of a longer word is no entity (replacement is by whole words: it would take a number, never a place).
    from prbj.data.schema import Pair
    from prbj.privacy.pseudonyms import Pseudonymizer

    code = Pair("p", "c", "q", (), "Reverse with items.reverse() or ask a@b.org.", (), "x", "y", user_id="u")
    [rewritten], tables = Pseudonymizer(detector).records([code])
    assert rewritten.narrative == "Reverse with items.reverse() or ask EMAIL_1."
    assert [e.original for e in tables["u"]] == ["a@b.org"]


def test_build_under_pseudonymized_sends_no_planted_entity(tmp_path: Path, server: ProviderServer) -> None:
    import lamp_fixture

    records = [lamp_fixture.lamp_record(ref) for ref in ("art-1", "life-1")]
    for record in records:
        record["profile"][0]["text"] += f" Write to {ANA_EMAIL} or call {ANA_PHONE}."
    lamp = write_jsonl(tmp_path / "lamp.jsonl", records)
    default = server.reply
    server.reply = lamp_fixture.reply
    try:
        result = CliRunner().invoke(
            main,
            ["build", "--input", str(lamp), "--out", str(tmp_path / "built"), "-p", "gpt-5.1", "--no-progress",
             "--api-base", server.url, "--cache-dir", str(tmp_path / "cache"), "--personal-data", "pseudonymized",
             "--ner-model", "none"],
            env={**KEYS, "PRBJ_PRIVATE_DIR": str(tmp_path / "private")},
        )  # fmt: skip
    finally:
        server.reply = default
    assert result.exit_code == 0, result.output
    bodies = sent_bodies(server)
    assert bodies and not any(ANA_EMAIL in b or ANA_PHONE in b for b in bodies)
    assert any("EMAIL_1" in b for b in bodies)
    run = json.loads((tmp_path / "built" / "run.json").read_text())
    assert run["privacy"]["personal_data"] == "pseudonymized"
