"""What a guarded run leaves at rest (issue 42 items 2, 4 and 6; issue 44 item 10's guard and export mutants):
under every policy but `any` the run directory keeps no reply, context block, planner aspect or error message
(an error keeps its cause), exports carry no text unless asked (then the pseudonymized text, never a local run's
clear text), rare group values are merged, answers are cached in the private store; a swapped profile's
placeholders never collide with the asker's."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from loopback import ChatRequest, ProviderServer

from conftest import make_record, write_jsonl
from prbj.cli import main

KEYS = {"OPENAI_API_KEY": "dummy-key-for-the-loopback"}
# Planted in every profile: four words, so that a quote of exactly them is one export must cut.
QUOTE = "quokka lantern orchard meadow"
FAIL = "PARSEFAIL"
FORMATS = (("csv", "judgments.csv"), ("parquet", "judgments.parquet"), ("eee", "eee"), ("inspect", "inspect"))


def _reply(request: ChatRequest) -> str:
    """A planner gets an aspect quoting the profile; a judge a verdict after the quote, or (for a question asking
    it) no verdict at all, so that its error message quotes the reply."""
    quoted = f"- you wrote {QUOTE}"
    if FAIL in request.prompt and "Result" in request.prompt:
        return f"I cannot decide; {quoted}."
    return f"{quoted}\nResult: A"


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        running.reply = _reply
        yield running


@pytest.fixture(autouse=True)
def fresh(server: ProviderServer) -> None:
    server.reset()


def local_profile(folder: Path, server: ProviderServer) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "my-vllm.toml").write_text(
        f'model = "openai/served"\napi_base = "{server.url}"\npaid = false\nlocal = true\napi_key_required = false\n'
    )
    return folder


def records() -> list[dict[str, Any]]:
    out = []
    for n in (1, 2, 3):
        record = make_record(n, question=f"Which lens for portraits? {FAIL if n == 3 else ''}".strip())
        record["profile"][0]["text"] = f"My notes: {QUOTE} and darkroom tips."
        out.append(record)
    return out


def cli(*args: str, env: dict[str, str], code: int = 0) -> str:
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False, terminal_width=200)
    assert result.exit_code == code, result.output
    return result.output


def judged(tmp_path: Path, server: ProviderServer, policy: str, *more: str) -> tuple[Path, dict[str, str]]:
    env = {**KEYS, "PRBJ_PRIVATE_DIR": str(tmp_path / "private")}
    dataset = write_jsonl(tmp_path / "mine.jsonl", records())
    providers = local_profile(tmp_path / "providers", server)
    cli(
        "judge", "--no-progress", "--dataset", str(dataset), "-p", "my-vllm", "--providers-dir", str(providers),
        "--context", "profile", "--context", "planner", "--planner", "my-vllm", "--personal-data", policy,
        "--out", str(tmp_path / "out"), *more, env=env,
    )  # fmt: skip
    [run_dir] = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    return run_dir, env


def all_text(folder: Path) -> str:
    import zipfile

    parts = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        parts.append(path.read_bytes().decode("utf-8", "replace"))
        if path.suffix == ".parquet":
            parts.append(json.dumps(pl.read_parquet(path).select(pl.col(pl.String)).to_dicts()))
        if path.suffix == ".eval":
            with zipfile.ZipFile(path) as archive:
                parts += [archive.read(n).decode("utf-8", "replace") for n in archive.namelist()]
    return "\n".join(parts)


def test_a_local_run_files_and_exports_no_text_and_errors_keep_their_cause(
    tmp_path: Path, server: ProviderServer
) -> None:
    run_dir, env = judged(tmp_path, server, "local", "--cache-dir", str(tmp_path / "cache"))
    judgments = pl.read_parquet(run_dir / "judgments.parquet")
    assert judgments["reply"].null_count() == judgments["context_block"].null_count() == judgments.height
    errors = judgments.filter(pl.col("error").is_not_null())["error"].to_list()
    assert errors and all(e.startswith("the reply held no readable verdict or score;") for e in errors), (
        errors
    )
    planner = [json.loads(line) for line in (run_dir / "planner.jsonl").read_text().splitlines()]
    assert planner and all(record["aspects"] == [] for record in planner)
    assert QUOTE not in all_text(run_dir)
    # What the run directory does not hold is in the private store, for this machine's viewer.
    stored = pl.read_parquet(tmp_path / "private" / "runs" / run_dir.name / "judgments.parquet")
    assert any(QUOTE in (reply or "") for reply in stored["reply"].to_list())
    assert any(QUOTE in (error or "") for error in stored["error"].to_list())
    # Exports in every format: no question, answer, reply or error message; an error says its cause.
    for fmt, target in FORMATS:
        cli("export", str(run_dir), "--format", fmt, "--out", str(tmp_path / "exports" / target), env=env)
    exported = all_text(tmp_path / "exports")
    for text in (QUOTE, "Which lens for portraits", records()[0]["chosen"], records()[0]["rejected"]):
        assert text not in exported, text
    table = pl.read_csv(tmp_path / "exports" / "judgments.csv")
    assert table["question"].null_count() == table.height
    assert "message withheld (--personal-data local)" in " ".join(table["error"].drop_nulls().to_list())
    # Asked for, a local run's texts are still refused: they were never pseudonymized.
    output = cli(
        "export", str(run_dir), "--format", "csv", "--out", str(tmp_path / "x.csv"), "--include-texts", env=env,
        code=2,
    )  # fmt: skip
    assert "sent its texts in clear to models that policy trusts" in output


def test_a_pseudonymized_run_exports_its_texts_as_sent_only_when_asked(
    tmp_path: Path, server: ProviderServer
) -> None:
    for record_ in (records_ := records()):
        record_["question"] += " Write to ana.lima@example.org."
    dataset = write_jsonl(tmp_path / "mine.jsonl", records_)
    env = {**KEYS, "PRBJ_PRIVATE_DIR": str(tmp_path / "private")}
    cli(
        "judge", "--no-progress", "--dataset", str(dataset), "-p", "gpt-5.1", "--api-base", server.url,
        "--context", "profile", "--personal-data", "pseudonymized", "--ner-model", "none",
        "--pseudonymize-answers", "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"), env=env,
    )  # fmt: skip
    [run_dir] = list((tmp_path / "out").iterdir())
    cli("export", str(run_dir), "--format", "csv", "--out", str(tmp_path / "plain.csv"), env=env)
    plain = pl.read_csv(tmp_path / "plain.csv")
    assert plain["question"].null_count() == plain["reply"].null_count() == plain.height
    cli(
        "export",
        str(run_dir),
        "--format",
        "csv",
        "--out",
        str(tmp_path / "sent.csv"),
        "--include-texts",
        env=env,
    )
    sent = pl.read_csv(tmp_path / "sent.csv")
    questions = sent["question"].to_list()
    assert all("Write to EMAIL_1." in q for q in questions) and "ana.lima" not in " ".join(questions)
    assert sent["reply"].null_count() == 0
    # Quotes of the (pseudonymized) profile are cut from the replies as for any run.
    assert not any(QUOTE in r for r in sent["reply"].to_list())


def test_guarded_runs_cache_their_answers_in_the_private_store(
    tmp_path: Path, server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replies quote what their requests held (here the profile, sent in clear to a local model): the shared
    cache folder of the project, which CI caches and colleagues copy, holds none of it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PRBJ_CACHE_DIR", raising=False)
    judged(tmp_path, server, "local")
    assert not (tmp_path / "cache").exists()
    private_cache = tmp_path / "private" / "cache"
    assert QUOTE in all_text(private_cache)
    # A rerun finds its answers there and pays nothing.
    sent = len(server.requests)
    (tmp_path / "again").mkdir()
    judged(tmp_path / "again", server, "local", "--private-dir", str(tmp_path / "private"))
    assert len(server.requests) == sent


def test_an_any_run_exports_errors_and_replies_with_profile_quotes_cut(
    tmp_path: Path, server: ProviderServer
) -> None:
    run_dir, env = judged(tmp_path, server, "any", "--cache-dir", str(tmp_path / "cache"))
    judgments = pl.read_parquet(run_dir / "judgments.parquet")
    assert any(QUOTE in (e or "") for e in judgments["error"].to_list())  # as it always was under any
    cli("export", str(run_dir), "--format", "csv", "--out", str(tmp_path / "j.csv"), env=env)
    table = pl.read_csv(tmp_path / "j.csv")
    assert QUOTE not in " ".join(table["error"].drop_nulls().to_list())
    assert QUOTE not in " ".join(table["reply"].drop_nulls().to_list())
    assert "[profile text removed]" in " ".join(table["error"].drop_nulls().to_list())


def test_a_quote_of_four_words_is_cut() -> None:
    from prbj.data.schema import Pair, ProfilePost
    from prbj.export.privacy import ProfileScrubber

    pair = Pair("p", "c", "q", (ProfilePost("1", "x", f"My notes: {QUOTE}."),), "", (), "a", "b", user_id="p")
    scrubber = ProfileScrubber([pair])
    assert scrubber.scrub(f"You said {QUOTE}, fine.") == "You said [profile text removed], fine."
    assert (
        scrubber.scrub("You said quokka lantern orchard, fine.") == "You said quokka lantern orchard, fine."
    )


def per_user_groups(regions: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {"user_id": user, "id": f"{user}-t", "prompt": "Which lens?", "chosen": "A prime.", "rejected": "A zoom.",
         "split": "test", "groups": {"region": region}}
        for user, region in regions.items()
    ]  # fmt: skip


def test_a_group_value_of_few_users_is_merged_under_a_guarded_policy(tmp_path: Path) -> None:
    regions = {f"u{n}": "west" for n in range(5)} | {"u5": "Tórshavn"}
    dataset = write_jsonl(tmp_path / "users.jsonl", per_user_groups(regions))
    env = {"PRBJ_PRIVATE_DIR": str(tmp_path / "private")}
    for policy in ("any", "local"):
        out = tmp_path / policy
        cli("judge", "--no-progress", "--dataset", str(dataset), "-p", "length", "--personal-data", policy,
            "--out", str(out), env=env)  # fmt: skip
        [run_dir] = list(out.iterdir())
        values = set(pl.read_parquet(run_dir / "judgments.parquet")["group:region"].to_list())
        if policy == "any":
            assert values == {"west", "Tórshavn"}
        else:
            assert values == {"west", "other (fewer than 5 users)"}
            assert "Tórshavn" not in all_text(run_dir)


GROUPS_RM = """
import json
from pathlib import Path


class Groups:
    version = "1"

    def score(self, items):
        with (Path(__file__).parent / "groups.log").open("a") as log:
            for item in items:
                log.write(json.dumps(dict(item.groups)) + "\\n")
        return [0.0 for _ in items]
"""


def test_a_model_run_in_process_sees_the_groups_a_guarded_run_records_merged(tmp_path: Path) -> None:
    """The merge of rare group values is what a guarded run records: a py: reward model (in-process, nothing
    sent) is given each user's groups as they are, as under `any`, so its figures do not change with the policy;
    judgments.parquet and every other file of the run still hold the merged value only."""
    regions = {f"u{n}": "west" for n in range(5)} | {"u5": "Tórshavn"}
    dataset = write_jsonl(tmp_path / "users.jsonl", per_user_groups(regions))
    rm = tmp_path / "groups_rm.py"
    rm.write_text(GROUPS_RM)
    out = tmp_path / "runs"
    cli("judge", "--no-progress", "--dataset", str(dataset), "-p", f"py:{rm}:Groups", "--personal-data", "local",
        "--out", str(out), env={"PRBJ_PRIVATE_DIR": str(tmp_path / "private")})  # fmt: skip
    seen = [json.loads(line)["region"] for line in (tmp_path / "groups.log").read_text().splitlines()]
    assert sorted(set(seen)) == ["Tórshavn", "west"]
    [run_dir] = list(out.iterdir())
    assert set(pl.read_parquet(run_dir / "judgments.parquet")["group:region"].to_list()) == {
        "west",
        "other (fewer than 5 users)",
    }
    assert "Tórshavn" not in all_text(run_dir)


def test_a_swapped_profile_draws_placeholders_apart_from_the_askers() -> None:
    from prbj.context.swap import swapped_profiles
    from prbj.data.schema import Pair, ProfilePost
    from prbj.privacy.detect import Detector
    from prbj.privacy.pseudonyms import Pseudonymizer

    def pair(user: str, email: str) -> Pair:
        post = ProfilePost(f"{user}-p", "x", f"I am {email}, and my son is at {user}@school.org.")
        return Pair(f"{user}-1", "c", f"Mail {email} the plan", (post,), "", (), "a", "b", user_id=user)

    pairs, _ = Pseudonymizer(Detector(), answers=True).records(
        [pair("ana", "ana@x.org"), pair("ben", "ben@y.org")]
    )
    assert pairs[0].question == "Mail EMAIL_1 the plan" and pairs[1].question == "Mail EMAIL_1 the plan"
    shown = swapped_profiles(pairs, seed=0)
    # Ana's judge reads her EMAIL_1 in the question and Ben's profile beside it: his addresses read EMAIL_2, 3.
    assert shown["ana-1"].posts[0].text == "I am EMAIL_2, and my son is at EMAIL_3."
    placeholders = set(re.findall(r"EMAIL_\d", pairs[0].question))
    assert placeholders.isdisjoint(re.findall(r"EMAIL_\d", shown["ana-1"].posts[0].text))
