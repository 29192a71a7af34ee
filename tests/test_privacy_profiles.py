"""Who may be sent personal data is what a profile states for its own endpoint and model, and who states the
policy is the person running prbj (issue 42 item 5 and acceptance; issue 45 item 5): a profile extending a local
or zero-retention one loses the claim when it changes `api_base` or `model` unless it restates it; `[params]`
cannot route elsewhere; `--api-base` on a local profile is refused naming the override and how to state the
claim for the new address; `PRBJ_PERSONAL_DATA` states the policy, a dataset or a card never does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from loopback import ProviderServer

from conftest import make_record, write_jsonl
from prbj.cli import main
from prbj.errors import ConfigError
from prbj.llm.providers import load_profile, resolve_provider

KEYS = {"OPENAI_API_KEY": "dummy-key-for-the-loopback"}


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server: ProviderServer) -> None:
    server.reset()


def write_profile(folder: Path, name: str, **fields: Any) -> Path:
    folder.mkdir(exist_ok=True)
    lines = [f"{key} = {value}" for key, value in fields.items() if key != "params"]
    if "params" in fields:
        lines += ["[params]", *fields["params"]]
    (folder / f"{name}.toml").write_text("\n".join(lines) + "\n")
    return folder


def judge(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(
        main,
        ["judge", "--no-progress", "--limit", "1", "--context", "none", "--out", str(tmp_path / "out"),
         "--cache-dir", str(tmp_path / "cache"), *args],
        env={**KEYS, "PRBJ_PRIVATE_DIR": str(tmp_path / "private"), **(env or {})},
        catch_exceptions=False,
        terminal_width=400,
    )  # fmt: skip
    return result.exit_code, result.output


def error_line(output: str) -> str:
    [line] = [line for line in output.splitlines() if line.startswith("error:")]
    return line


def local_base(folder: Path, server: ProviderServer) -> Path:
    """A self-hosted server's profile: local, at the loopback."""
    return write_profile(
        folder, "my-vllm", model='"openai/served"', api_base=f'"{server.url}"', paid="false", local="true",
        api_key_required="false",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "changed"),
    [({"api_base": '"http://10.9.8.7:8000/v1"'}, "api_base"), ({"model": '"openai/other"'}, "model")],
)
def test_extending_a_local_profile_and_moving_it_drops_the_claim(
    tmp_path: Path, server: ProviderServer, changes: dict[str, str], changed: str
) -> None:
    folder = local_base(tmp_path / "providers", server)
    write_profile(folder, "moved", extends='"my-vllm"', **changes)
    code, output = judge(tmp_path, "-p", "moved", "--providers-dir", str(folder), "--personal-data", "local")
    assert code == 2, output
    line = error_line(output)
    assert f"extends my-vllm and changes its {changed}" in line and "state it in" in line
    assert server.requests == []
    # Stated again by the profile that moved it, the claim holds.
    write_profile(folder, "moved", extends='"my-vllm"', local="true", **{changed: changes[changed]})
    assert resolve_provider("moved", folder).local
    # The same profile unmoved inherits what its base states (and sends).
    write_profile(folder, "renamed", extends='"my-vllm"', rpm="600")
    code, output = judge(
        tmp_path, "-p", "renamed", "--providers-dir", str(folder), "--personal-data", "local"
    )
    assert code == 0, output
    assert len(server.requests) == 3


def test_extending_a_zero_retention_profile_to_another_endpoint_drops_the_claim(
    tmp_path: Path, server: ProviderServer
) -> None:
    folder = write_profile(tmp_path / "providers", "zdr", extends='"gpt-5.1"', retention='"zero"')
    write_profile(folder, "proxy", extends='"zdr"', api_base=f'"{server.url}"')
    code, output = judge(
        tmp_path, "-p", "proxy", "--providers-dir", str(folder), "--personal-data", "zero-retention"
    )
    assert code == 2, output
    assert 'the retention = "zero" stated for zdr does not carry over' in error_line(output)
    assert server.requests == []


@pytest.mark.parametrize("key", ["api_base", "base_url"])
def test_params_cannot_send_requests_elsewhere(tmp_path: Path, key: str) -> None:
    path = tmp_path / "sneaky.toml"
    path.write_text(f'extends = "openai-compatible"\n[params]\n{key} = "http://10.9.8.7/v1"\n')
    with pytest.raises(ConfigError, match=rf"sneaky\.toml: field 'params\.{key}': where requests go"):
        load_profile("sneaky", path, user_dir=tmp_path)


def test_api_base_over_a_local_profile_names_the_override_and_how_to_state_it(
    tmp_path: Path, server: ProviderServer
) -> None:
    """Issue 45 item 5: the refusal said "no local = true in openai-compatible.toml", which the file does state."""
    code, output = judge(
        tmp_path, "-p", "openai-compatible", "--api-base", server.url, "--personal-data", "local"
    )
    assert code == 2, output
    line = error_line(output)
    assert "no local = true in" not in line
    assert "its profile states local = true for http://127.0.0.1:8000/v1 only" in line
    assert f"--api-base {server.url} sends it elsewhere" in line
    assert f'extends = "openai-compatible", api_base = "{server.url}", local = true' in line
    assert server.requests == []
    # Doing what it says works: a profile of one's own stating local = true for that address.
    folder = write_profile(
        tmp_path / "providers",
        "my-server",
        extends='"openai-compatible"',
        api_base=f'"{server.url}"',
        local="true",
    )
    code, output = judge(
        tmp_path, "-p", "my-server", "--providers-dir", str(folder), "--personal-data", "local"
    )
    assert code == 0, output
    assert len(server.requests) == 3


def test_the_policy_may_come_from_the_environment_never_from_a_dataset_or_card(
    tmp_path: Path, server: ProviderServer
) -> None:
    record = make_record(1)
    dataset = write_jsonl(tmp_path / "mine.jsonl", [record])
    args = ("-p", "gpt-5.1", "--api-base", server.url, "--dataset", str(dataset))
    code, output = judge(tmp_path, *args)
    assert code == 2 and "not public data" in error_line(output)
    code, output = judge(tmp_path, *args, env={"PRBJ_PERSONAL_DATA": "any"})
    assert code == 0, output
    assert len(server.requests) == 1
    # The option wins over the environment; a wrong value is one line naming where it came from.
    server.reset()
    code, output = judge(tmp_path, *args, "--personal-data", "local", env={"PRBJ_PERSONAL_DATA": "any"})
    assert code == 2 and "is not local" in error_line(output) and server.requests == []
    code, output = judge(tmp_path, *args, env={"PRBJ_PERSONAL_DATA": "anywhere"})
    assert code == 2 and "--personal-data" in output
    # A record naming a policy states nothing: the data is still not public, and nothing is sent.
    record["personal_data"] = "any"
    write_jsonl(dataset, [record])
    code, output = judge(tmp_path, *args)
    assert code == 2 and server.requests == []
    # A card may not state one either: the field is refused, one line naming file and field.
    card = tmp_path / "mine.toml"
    shipped = Path(__file__).resolve().parents[1] / "prbj" / "data" / "benchmarks" / "prism.toml"
    card.write_text(shipped.read_text().replace("[benchmark]\n", '[benchmark]\npersonal_data = "any"\n'))
    code, output = judge(tmp_path, "-p", "gpt-5.1", "--api-base", server.url, "--benchmark", str(card))
    assert code == 2 and "field 'benchmark.personal_data': unknown field" in error_line(output)
    assert server.requests == []
