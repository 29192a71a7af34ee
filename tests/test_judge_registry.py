"""From options to judges: the registry table picks the factory by name or prefix, and every provider spec
is resolved, priced and key-checked once, in prbj.judges.setup.resolve_provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from prbj.errors import ConfigError
from prbj.judges import registry
from prbj.judges.baselines import BASELINES
from prbj.judges.generative import PointwiseLLMJudge
from prbj.judges.registry import build_judges, factory_for
from prbj.judges.scalar import ScalarOptions
from prbj.judges.setup import JudgeOptions
from prbj.llm import providers
from prbj.llm.cache import ResponseCache
from prbj.llm.gateway import Gateway
from prbj.llm.setup import GatewayOptions


@pytest.mark.parametrize(
    ("spec", "factory"),
    [
        *((name, registry._baseline) for name in BASELINES),
        ("hf:/models/some-rm", registry._scalar),
        ("hf-local:/models/some-lm", registry._llm),
        ("litellm:openai/gpt-4o-mini", registry._llm),
        ("gemini-3-flash", registry._llm),  # a bundled provider profile
    ],
)
def test_the_table_picks_the_factory_by_name_or_prefix(spec: str, factory: Any) -> None:
    assert factory_for(spec, GatewayOptions()) is factory


def test_an_unknown_spec_names_every_kind_of_judge() -> None:
    with pytest.raises(ConfigError, match="unknown judge") as raised:
        factory_for("no-such-judge", GatewayOptions())
    assert "bm25-profile" in str(raised.value) and "hf:<path-or-hub-id>" in str(raised.value)


def test_each_provider_is_resolved_and_checked_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    resolved: list[str] = []
    real = providers.resolve_provider

    def counting(spec: str, *args: Any, **kwargs: Any) -> providers.ProviderSpec:
        resolved.append(spec)
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(providers, "resolve_provider", counting)
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    options = JudgeOptions(contexts=("none", "profile", "planner"), planner="gemini-3-flash")
    with Gateway(ResponseCache(tmp_path / "cache")) as gateway:
        judges, planner = build_judges(["gemini-3-flash", "length"], options, GatewayOptions(), gateway)
    # One judge per context, one planner shared by them, one resolution per spec (judge, planner).
    assert [type(j) for j in judges[:3]] == [PointwiseLLMJudge] * 3 and judges[3].name == "length"
    assert planner is not None
    assert all(isinstance(j, PointwiseLLMJudge) and j.contexts.planner is planner for j in judges[:3])
    assert resolved == ["gemini-3-flash", "gemini-3-flash"]


def test_keys_are_required_only_when_calls_are_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    with Gateway(ResponseCache(tmp_path / "cache")) as gateway:
        with pytest.raises(ConfigError, match="GEMINI_API_KEY"):
            build_judges(["gemini-3-flash"], JudgeOptions(), GatewayOptions(), gateway)
        judges, _ = build_judges(["gemini-3-flash"], JudgeOptions(), GatewayOptions(dry_run=True), gateway)
    assert len(judges) == 1


def test_judge_options_take_their_own_and_the_scalar_options_out_of_a_command() -> None:
    options: dict[str, Any] = {
        "seed": 7,
        "contexts": ("none",),
        "mode": "pairwise",
        "dtype": "fp32",
        "max_length": 512,
        "out": Path("reports"),
    }
    judging = JudgeOptions.pop_from(options)
    assert options == {"out": Path("reports")}
    assert judging.seed == 7 and judging.mode == "pairwise" and judging.contexts == ("none",)
    assert judging.scalar == ScalarOptions(dtype="fp32", max_length=512)


def test_a_bad_template_fails_before_any_judge_is_built(tmp_path: Path) -> None:
    template = tmp_path / "user.txt"
    template.write_text("no placeholders at all")
    options = JudgeOptions(judge_template_user=template)
    with Gateway(None) as gateway, pytest.raises(ConfigError, match="--judge-template-user"):
        build_judges(["length"], options, GatewayOptions(), gateway)
