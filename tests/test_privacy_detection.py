"""What `--personal-data pseudonymized` finds and how it names it (issue 42 items 1 and 3; issue 44 item 10's
detect, pseudonyms and store mutants): no run without a named-entity model unless `--ner-model none` says so;
one entity, one pseudonym per user whatever its spelling; phones of every region; the recognizers Presidio ships
on; the privacy step makes no network request; the stored table is read by whole names, the longest first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from loopback import ProviderServer
from privacy_fixture import MARKERS, ner_pipeline

from conftest import make_record, write_jsonl
from prbj.cli import main
from prbj.data.schema import Pair, ProfilePost
from prbj.errors import ConfigError
from prbj.privacy.store import Mapping, PrivateStore

KEYS = {"OPENAI_API_KEY": "dummy-key-for-the-loopback"}


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


@pytest.fixture(scope="module")
def detector(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Patterns and the test's NER pipeline, with a pattern that takes a verb into a name (as models do)."""
    from prbj.privacy.detect import Detector
    from prbj.privacy.ner import resolve_ner

    folder = ner_pipeline(
        tmp_path_factory.mktemp("ner"),
        {"PERSON": ("Jane Doe", "J. Doe", "Ask Jane Doe", "Tom"), "GPE": ("Galway",)},
    )
    return Detector(resolve_ner(str(folder)))


def judge(tmp_path: Path, server: ProviderServer, *args: str) -> tuple[int, str]:
    record = make_record(1)
    record["profile"] = [
        {"id": "p1", "category": "x", "text": "Jane Doe from Galway wrote to ana@example.org."}
    ]
    dataset = write_jsonl(tmp_path / "mine.jsonl", [record])
    result = CliRunner().invoke(
        main,
        ["judge", "--no-progress", "--dataset", str(dataset), "-p", "gpt-5.1", "--api-base", server.url,
         "--context", "profile", "--personal-data", "pseudonymized", "--out", str(tmp_path / "out"),
         "--cache-dir", str(tmp_path / "cache"), *args],
        env={**KEYS, "PRBJ_PRIVATE_DIR": str(tmp_path / "private")},
        catch_exceptions=False,
        terminal_width=200,
    )  # fmt: skip
    return result.exit_code, result.output


# --- item 1: fail closed without NER ---------------------------------------------------------------------------


def test_pseudonymized_without_an_ner_model_refuses_before_anything_is_sent(
    tmp_path: Path, server: ProviderServer
) -> None:
    server.reset()
    code, output = judge(tmp_path, server)  # no spaCy model is installed here
    assert code == 2, output
    [line] = [line for line in output.splitlines() if line.startswith("error:")]
    assert "python -m spacy download en_core_web_lg" in line and "--ner-model none" in line
    assert server.requests == []
    assert not (tmp_path / "out").exists()


def test_ner_model_none_states_that_names_and_places_stay(tmp_path: Path, server: ProviderServer) -> None:
    server.reset()
    code, output = judge(tmp_path, server, "--ner-model", "none")
    assert code == 0, output
    [body] = [json.dumps(r.body) for r in server.requests]
    assert "Jane Doe from Galway wrote to EMAIL_1" in body
    [run_dir] = (tmp_path / "out").iterdir()
    assert json.loads((run_dir / "run.json").read_text())["privacy"]["ner"] is None


def test_a_named_pipeline_finds_names_and_a_missing_one_is_one_line(
    tmp_path: Path, server: ProviderServer
) -> None:
    server.reset()
    folder = ner_pipeline(tmp_path / "ner", {"PERSON": ("Jane Doe",), "GPE": ("Galway",)})
    code, output = judge(tmp_path, server, "--ner-model", str(folder))
    assert code == 0, output
    [body] = [json.dumps(r.body) for r in server.requests]
    assert "PERSON_1 from LOCATION_1 wrote to EMAIL_1" in body
    code, output = judge(tmp_path, server, "--ner-model", str(tmp_path / "nowhere"))
    assert code == 2
    assert "--ner-model" in output and "not a spaCy pipeline" in output


# --- item 3: one entity, one pseudonym ---------------------------------------------------------------------------


def one_user(*texts: str, answers: tuple[str, str] = ("a", "b")) -> Pair:
    posts = tuple(ProfilePost(f"p{i}", "x", text) for i, text in enumerate(texts))
    return Pair("t1", "default", "q?", posts, "n", (), *answers, user_id="ana")


def pseudonymized(detector: Any, pair: Pair, *, answers: bool = False) -> tuple[Pair, dict[str, str]]:
    from prbj.privacy.pseudonyms import Pseudonymizer

    [rewritten], tables = Pseudonymizer(detector, answers=answers).records([pair])
    return rewritten, {e.original: e.pseudonym for e in tables.get("ana", ())}


def test_spellings_of_one_entity_share_one_pseudonym(detector: Any) -> None:
    pair = one_user(
        "Mail Ana.Lima@Example.org or ana.lima@example.org.",
        "Ring +44 20 7946 0958, or 020 7946 0958 from the UK.",
        "See https://www.ana-lima.example.net/darkroom/ and ana-lima.example.net/darkroom.",
        "Jane Doe, jane doe and J. Doe are my sister.",
    )
    rewritten, table = pseudonymized(detector, pair)
    assert [p.text for p in rewritten.profile] == [
        "Mail EMAIL_1 or EMAIL_1.",
        "Ring PHONE_1, or PHONE_1 from the UK.",
        "See URL_1 and URL_1.",
        "PERSON_1, PERSON_1 and PERSON_1 are my sister.",
    ]
    # "jane doe" needs no entry of its own: a name of two words is replaced whatever its case.
    assert table["J. Doe"] == table["Jane Doe"] == "PERSON_1"


def test_a_name_is_trimmed_of_the_verb_a_model_took_into_it(detector: Any) -> None:
    rewritten, table = pseudonymized(detector, one_user("Ask Jane Doe about Galway."))
    assert rewritten.profile[0].text == "Ask PERSON_1 about LOCATION_1."
    assert "Ask Jane Doe" not in table


def test_profile_and_answers_share_one_table(detector: Any) -> None:
    pair = one_user("I climb in Galway.", answers=("Galway has a wall at Jane Doe's gym.", "Try elsewhere."))
    rewritten, _ = pseudonymized(detector, pair, answers=True)
    assert rewritten.profile[0].text == "I climb in LOCATION_1."
    assert rewritten.chosen == "LOCATION_1 has a wall at PERSON_1's gym."


def test_phones_in_twelve_national_formats_are_found(detector: Any) -> None:
    text = "; ".join(MARKERS["phone"])
    found = {text[f.start : f.end] for f in detector.find(text) if f.kind == "PHONE_NUMBER"}
    assert found == set(MARKERS["phone"])
    # Not a phone: dates, year ranges, prices, versions.
    prose = "From 2019-2020 it cost 1.299.000; on 12/05/1990 at version 3.11.2, 30 to 45 days."
    assert [prose[f.start : f.end] for f in detector.find(prose) if f.kind == "PHONE_NUMBER"] == []


def test_the_recognizers_presidio_ships_are_on_unless_turned_off(tmp_path: Path) -> None:
    from prbj.privacy.detect import Detector

    text = (
        "Passport C03005988, UK driving licence MORGA753116SM9IJ, NI number AB 12 34 56 C, born 1990-05-12, "
        "follow @ana_lima88, I live at 12 Quay Street."
    )
    kinds = {f.kind for f in Detector().find(text)}
    assert {"US_PASSPORT", "UK_DRIVING_LICENCE", "UK_NINO", "DATE_TIME", "HANDLE", "STREET_ADDRESS"} <= kinds
    kept = {f.kind for f in Detector(kept=("DATE_TIME", "UK_NINO")).find(text)}
    assert "DATE_TIME" not in kept and "UK_NINO" not in kept and "US_PASSPORT" in kept
    with pytest.raises(ConfigError, match="--keep-entities PASPORT: not an entity kind"):
        Detector(kept=("PASPORT",))


# --- issue 44 item 10: whole words, longest first, table names, no network ---------------------------------------


def test_a_name_is_replaced_only_where_it_stands_whole(detector: Any) -> None:
    mapping = Mapping((("PERSON", "Tom", "PERSON_1"), ("URL", "x.org", "URL_1")))
    assert (
        mapping.apply("Tom ate x.organic food Tomorrow at x.org.")
        == "PERSON_1 ate x.organic food Tomorrow at URL_1."
    )
    rewritten, _ = pseudonymized(detector, one_user("Tomorrow Tom visits Tomsk."))
    assert rewritten.profile[0].text == "Tomorrow PERSON_1 visits Tomsk."


def test_the_longest_spelling_is_replaced_first() -> None:
    mapping = Mapping((("URL", "https://x.example", "URL_1"), ("URL", "https://x.example/ana-lima", "URL_2")))
    assert mapping.apply("See https://x.example/ana-lima and https://x.example.") == "See URL_2 and URL_1."


def test_a_table_name_is_taken_whole_or_refused(tmp_path: Path) -> None:
    store = PrivateStore(tmp_path)
    for key in ("0123456789abcdef0", "0123456789abcdef/../x", "0123456789abcdef.json", "0123456789abcde"):
        with pytest.raises(ConfigError, match="not a table name"):
            store.load_pseudonyms(key)
    for run_id in ("20260101-x/../../etc", "run id"):
        with pytest.raises(ConfigError, match="not a run directory name"):
            store.load_texts(run_id, "judgments")


def test_pseudonymizing_makes_no_network_request(tmp_path: Path) -> None:
    """Presidio's email check asks tldextract, which fetches the public suffix list on first use unless told
    not to: every name looked up or connected to while detecting is recorded, in a fresh process."""
    code = (
        "import socket\n"
        "asked = []\n"
        "real_getaddrinfo, real_connect = socket.getaddrinfo, socket.socket.connect\n"
        "def getaddrinfo(host, *a, **k):\n"
        "    asked.append(str(host)); raise OSError('no network in this test')\n"
        "def connect(self, address):\n"
        "    asked.append(str(address)); raise OSError('no network in this test')\n"
        "socket.getaddrinfo, socket.socket.connect = getaddrinfo, connect\n"
        "from prbj.privacy.detect import Detector\n"
        "found = Detector().find('Write to ana.lima@example.org or ben@example.co.uk today.')\n"
        "assert [f.kind for f in found if f.kind == 'EMAIL_ADDRESS'] == ['EMAIL_ADDRESS'] * 2, found\n"
        "print(asked)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TLDEXTRACT")}
    env["TLDEXTRACT_CACHE"] = str(tmp_path / "tldextract")  # no list cached by an earlier fetch
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
