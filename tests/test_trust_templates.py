"""Issue 12 item 11: a template that would reach the model as literal braces is refused, naming file and text."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from loopback import ProviderServer

from prbj.cli import main
from prbj.errors import ConfigError
from prbj.prompts import builtin, from_file

GOOD = "Question: {question}\n\nAnswer: {response}\n{context}\n"
JSON_EXAMPLE = 'Reply as JSON like {"score": 7, "why": {"short": "text"}} for {question}: {response}\n'


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (GOOD + "{oops}\n", "unknown placeholder {oops}"),
        (GOOD + "{0}\n", "positional placeholder {0}"),
        (GOOD + "{}\n", "positional placeholder {}"),
        (GOOD + "{{question}}\n", "escaped placeholder {{question}}"),
        (GOOD + "{question:>10}\n", "placeholder {question:>10}"),
        ("Question: {question\n\nAnswer: {response}\n", "'{' never closed"),
        ("Question: {question}}\n{response}\n", "'}' without a matching '{'"),
    ],
)
def test_templates_that_would_be_sent_as_literal_text_are_refused(
    tmp_path: Path, text: str, shown: str
) -> None:
    path = tmp_path / "user.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        from_file(path, option="--judge-template-user", required={"question", "response"})
    message = str(caught.value)
    assert message.startswith(f"--judge-template-user {path}: line ") and shown in message
    assert "\n" not in message


def test_json_examples_and_documented_placeholders_pass(tmp_path: Path) -> None:
    for text in (GOOD, JSON_EXAMPLE, "{profile}{rubrics}{Response_A}{Response_B}{question}{response}"):
        path = tmp_path / "user.txt"
        path.write_text(text, encoding="utf-8")
        assert from_file(path, option="--judge-template-user").text == text
    path.write_text("{aspect} {question}", encoding="utf-8")
    assert from_file(path, option="-t", allowed={"aspect", "question"}).placeholders == {"aspect", "question"}


@pytest.mark.parametrize("name", ["pairwise_system", "pairwise_user", "pointwise_system", "pointwise_user"])
def test_builtin_judge_templates_pass_their_own_check(tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.txt"
    path.write_text(builtin(name).text, encoding="utf-8")
    from_file(path, option="--judge-template-user")


def test_cli_refuses_an_unknown_placeholder_before_any_call(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    template = tmp_path / "user.txt"
    template.write_text("{question}\n{Response_A}\n{Response_B}\n{oops}\n", encoding="utf-8")
    with ProviderServer(reply=lambda request: "Result: A") as server:
        result = CliRunner().invoke(
            main,
            [
                "judge",
                "--no-progress",
                "-p",
                "gpt-5.1",
                "--api-base",
                server.url,
                "--context",
                "none",
                "--mode",
                "pairwise",
                "--judge-template-user",
                str(template),
                "--cache-dir",
                str(tmp_path / "c"),
                "--out",
                str(tmp_path / "out"),
            ],
        )
        assert server.count() == 0
    assert result.exit_code == 2, result.output
    assert "{oops}" in result.output and str(template) in result.output


def test_rendering_fills_each_placeholder_once_and_leaves_unknown_ones_as_written() -> None:
    """A value is inserted as it is, never read again for placeholders (an answer may contain `{question}`),
    a name without a value stays as written, and JSON braces around placeholders are text."""
    from prbj.prompts import Template

    template = Template("t", 'Q {question}; {"score": {response}}; again {question}; {context}{missing}')
    rendered = template.render({"question": "why {response}?", "response": "7", "context": ""})
    assert rendered == 'Q why {response}?; {"score": 7}; again why {response}?; {missing}'
    assert Template("t", "no placeholders").render({"question": "x"}) == "no placeholders"
    assert Template("t", "{question}").render({"question": ""}) == ""
