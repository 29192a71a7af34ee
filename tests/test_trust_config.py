"""Issue 12 items 5 and 8: numbers and URLs that cannot work are refused before any call, secrets never shown."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from loopback import ProviderServer

from prbj.cli import main
from prbj.errors import ConfigError
from prbj.llm.budget import Budget
from prbj.llm.error_text import describe_error, mask_secrets
from prbj.llm.providers import load_profile, resolve_provider
from prbj.llm.urls import check_api_base, redact_url

KEY = "sk-CANARY-never-write-me-0123456789"
GOOD_PROFILE = 'model = "openai/m"\napi_key_env = "OPENAI_API_KEY"\n[price]\ninput = 1.0\noutput = 2.0\n'


@pytest.fixture(scope="module")
def server():
    with ProviderServer(reply=lambda request: "Result: A") as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server, monkeypatch):
    server.reset()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("PRBJ_PROVIDERS_DIR", raising=False)


def _judge(server: ProviderServer, tmp_path: Path, *args: str, api_base: str | None = None):
    command = ["judge", "--no-progress", "-p", "gpt-5.1", "--api-base", api_base or server.url]
    command += ["--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out"), "--context", "none"]
    return CliRunner().invoke(main, [*command, *args])


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("model = 5\n[price]\ninput = 1.0\noutput = 2.0\n", "'model': expected a string"),
        (GOOD_PROFILE.replace("input = 1.0", "input = nan"), "'price.input'"),
        (GOOD_PROFILE.replace("output = 2.0", "output = inf"), "'price.output'"),
        (GOOD_PROFILE + "", None),
        ("tpm = inf\n" + GOOD_PROFILE, "'tpm'"),
        ("rpm = nan\n" + GOOD_PROFILE, "'rpm'"),
        ("timeout = inf\n" + GOOD_PROFILE, "'timeout'"),
        ('paid = "yes"\n' + GOOD_PROFILE, "'paid': expected true or false"),
        ('api_key_required = "no"\n' + GOOD_PROFILE, "'api_key_required': expected true or false"),
        ('api_base = "notaurl"\n' + GOOD_PROFILE, "'api_base'"),
    ],
)
def test_profile_fields_that_cannot_work_are_named(tmp_path: Path, line: str, field: str | None) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(line, encoding="utf-8")
    if field is None:
        assert load_profile("mine", path).input_price == pytest.approx(1e-6)
        return
    with pytest.raises(ConfigError) as caught:
        load_profile("mine", path)
    message = str(caught.value)
    assert str(path) in message and field in message and "\n" not in message


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0])
def test_budget_refuses_caps_that_never_bind(value: float) -> None:
    with pytest.raises(ConfigError, match="--max-cost"):
        Budget(value)
    assert Budget(0.05).remaining == pytest.approx(0.05)


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_cli_max_cost_nan_or_inf_exits_2_before_any_call(server, tmp_path: Path, value: str) -> None:
    result = _judge(server, tmp_path, "--max-cost", value)
    assert result.exit_code == 2, result.output
    assert "--max-cost" in result.output and "Traceback" not in result.output
    assert server.count() == 0


def test_cli_profile_with_nan_price_exits_2_before_any_call(server, tmp_path: Path) -> None:
    folder = tmp_path / "providers"
    folder.mkdir()
    (folder / "gpt-5.1.toml").write_text(GOOD_PROFILE.replace("input = 1.0", "input = nan"), encoding="utf-8")
    result = _judge(server, tmp_path, "--providers-dir", str(folder))
    assert result.exit_code == 2, result.output
    assert "price.input" in result.output and "gpt-5.1.toml" in result.output
    assert server.count() == 0


def test_cli_missing_providers_dir_exits_2(server, tmp_path: Path) -> None:
    result = _judge(server, tmp_path, "--providers-dir", str(tmp_path / "nonexistent"))
    assert result.exit_code == 2, result.output
    assert "--providers-dir" in result.output and "no such folder" in result.output


@pytest.mark.parametrize("api_base", ["notaurl", "ftp://host/v1", "http://", "http://host:99999/v1"])
def test_cli_api_base_that_is_not_a_url_exits_2(server, tmp_path: Path, api_base: str) -> None:
    result = _judge(server, tmp_path, api_base=api_base)
    assert result.exit_code == 2, result.output
    assert "--api-base" in result.output and "Traceback" not in result.output
    assert server.count() == 0


def test_cli_api_base_with_credentials_is_refused_without_echoing_them(server, tmp_path: Path) -> None:
    host = server.url.split("://", 1)[1]
    result = _judge(server, tmp_path, api_base=f"http://user:{KEY}@{host}")
    assert result.exit_code == 2, result.output
    assert "environment variable" in result.output and KEY not in result.output
    assert server.count() == 0


def test_check_api_base_accepts_ordinary_urls() -> None:
    for url in ("http://127.0.0.1:8000/v1", "https://api.example.com", "https://h/v1?api-version=2024-01-01"):
        assert check_api_base(url) == url
    assert resolve_provider("gpt-5.1", api_base="http://127.0.0.1:1/v1").api_base == "http://127.0.0.1:1/v1"


def test_redact_url_blanks_userinfo_and_key_like_query_values_only() -> None:
    assert redact_url(None) is None
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    assert redact_url(f"https://user:{KEY}@h.example/v1") == "https://***@h.example/v1"
    assert (
        redact_url(f"https://h/v1?key={KEY}&api-version=2024&access_token=t&sig=s&model=m")
        == "https://h/v1?key=***&api-version=2024&access_token=***&sig=***&model=m"
    )
    assert redact_url(f"https://h/v1?API_KEY={KEY}") == "https://h/v1?API_KEY=***"
    spec = resolve_provider("gpt-5.1", api_base=f"https://h/v1?key={KEY}")
    assert KEY not in (spec.redacted_api_base or "")


def test_masking_touches_only_whole_tokens_of_a_real_key() -> None:
    error = RuntimeError("Exception in x handler: bad request")
    assert describe_error(error, 1, 0.1, secrets=["x"]).endswith("Exception in x handler: bad request")
    assert mask_secrets("passwords password", ["password"]) == "passwords ***"
    assert mask_secrets(f"Bearer {KEY}.", [KEY]) == "Bearer ***."


def test_masking_survives_a_cut_key_and_a_cut_message() -> None:
    # The provider quoted only the start of the key.
    assert KEY[:15] not in mask_secrets(f"Incorrect API key provided: {KEY[:15]}...", [KEY])
    # The key sits across prbj's own 300-character cut.
    error = RuntimeError("e" * 280 + " " + KEY + " tail")
    line = describe_error(error, 2, 1.0, secrets=[KEY])
    assert KEY[:8] not in line and "***" in line
    # A URL with a key in the error text is redacted even when the key is not among the secrets.
    assert KEY not in describe_error(RuntimeError(f"GET https://h/v1?key={KEY} failed"), 1, 0.1)
