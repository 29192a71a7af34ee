"""One status vocabulary: every layer's statuses come from prbj.data.status."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from prbj.data.status import CALL_STATUSES, FAILED_STATUSES, STATUSES, most_severe

PACKAGE = Path(__file__).resolve().parent.parent / "prbj"


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (["ok", "ok"], "ok"),
        (["ok", "parse_error"], "parse_error"),
        (["parse_error", "api_error"], "api_error"),
        (["api_error", "skipped_budget", "parse_error"], "skipped_budget"),
        (["ok", "no_rubric"], "ok"),
    ],
)
def test_a_combined_result_takes_the_status_that_explains_most(parts: list[str], expected: str) -> None:
    assert most_severe(parts) == expected


def test_call_statuses_and_failures_are_part_of_the_one_vocabulary() -> None:
    assert set(CALL_STATUSES) < set(STATUSES)
    assert set(FAILED_STATUSES) < set(STATUSES)
    assert "ok" not in FAILED_STATUSES and "dry_run" not in FAILED_STATUSES


def test_no_module_declares_its_own_list_of_statuses() -> None:
    # A tuple, set or Literal naming three or more statuses outside prbj/data/status.py is a second vocabulary.
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "data" / "status.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Tuple | ast.Set | ast.List):
                names = {
                    e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                }
                if len(names & set(STATUSES)) >= 3:
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
            if isinstance(node, ast.Dict) and path.name != "status.py":
                names = {
                    k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
                }
                if len(names & set(STATUSES)) >= 3:
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not offenders, f"statuses declared outside prbj/data/status.py: {offenders}"
