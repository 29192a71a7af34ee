"""Reward functions for PPO/GRPO trainers that call a running `prbj serve` (standard library only, so that a
trainer's environment needs nothing but prbj itself).

- verl: `custom_reward_function.path=<this file>`, `custom_reward_function.name=compute_score` (or
  `compute_score_batch` with verl's batch reward manager). The official setup's reward is score / 10; the
  divisor is `PRBJ_REWARD_DIVISOR` (default 10).
- TRL: `reward_funcs=[trl_reward_function()]`; the dataset's `query` and `profile` columns are sent along.
- OpenRLHF needs no client: `--remote_rm_url http://HOST:PORT/get_reward` (see docs/serving.md).

The server address is `PRBJ_REWARD_URL` (default http://127.0.0.1:8000), and its token, when it was started with
one, `PRBJ_SERVE_TOKEN` (sent as `Authorization: Bearer`). A failed request is retried a few times, then raised:
a silent default reward would train the policy on noise.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from prbj.web import SERVE_TOKEN_ENV

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV = "PRBJ_REWARD_URL"
TOKEN_ENV = SERVE_TOKEN_ENV
DIVISOR_ENV = "PRBJ_REWARD_DIVISOR"
OFFICIAL_DIVISOR = 10.0


class RewardServerError(RuntimeError):
    """The reward server could not score a request, even after retries."""


class RewardClient:
    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 1.0,
    ) -> None:
        self.url = (url or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")
        self.token = token or os.environ.get(TOKEN_ENV) or None
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff

    def score(self, response_text: str, query: str, profile: Any = None) -> float:
        body = {"response_text": response_text, "query": query, "profile": profile}
        return float(self._post("/score", body)["score"])

    def score_batch(self, items: Sequence[Mapping[str, Any]]) -> list[float]:
        if not items:
            return []
        return [float(s) for s in self._post("/score/batch", {"items": list(items)})["scores"]]

    def _post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        last_error = ""
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(self.url + path, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as err:
                message = _error_message(err)
                if err.code < 500:
                    # The request itself is wrong: retrying cannot help.
                    raise RewardServerError(f"{self.url}{path}: {err.code}: {message}") from None
                last_error = f"{err.code}: {message}"
            except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
                last_error = str(getattr(err, "reason", err))
            if attempt < self.retries:
                time.sleep(self.backoff * 2**attempt)
        raise RewardServerError(f"{self.url}{path}: failed after {self.retries + 1} attempts: {last_error}")


def _error_message(err: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(err.read()).get("error", err.reason))
    except (json.JSONDecodeError, AttributeError):
        return str(err.reason)


_CLIENT: RewardClient | None = None


def _client() -> RewardClient:
    global _CLIENT
    url = (os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")
    token = os.environ.get(TOKEN_ENV) or None
    if _CLIENT is None or (_CLIENT.url, _CLIENT.token) != (url, token):
        _CLIENT = RewardClient()
    return _CLIENT


def _divisor() -> float:
    return float(os.environ.get(DIVISOR_ENV, OFFICIAL_DIVISOR))


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    **_: Any,
) -> float:
    """verl's per-sample reward function; `extra_info` holds `query` and `profile` as in the official data."""
    info = extra_info or {}
    return _client().score(solution_str, info.get("query", ""), info.get("profile", "")) / _divisor()


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Mapping[str, Any] | None],
    **_: Any,
) -> list[float]:
    """verl's batch reward manager form: one HTTP request for the whole batch."""
    items = [
        {
            "response_text": text,
            "query": (info or {}).get("query", ""),
            "profile": (info or {}).get("profile", ""),
        }
        for text, info in zip(solution_strs, extra_infos, strict=True)
    ]
    divisor = _divisor()
    return [score / divisor for score in _client().score_batch(items)]


def trl_reward_function(
    url: str | None = None,
    *,
    token: str | None = None,
    divisor: float = 1.0,
    query_column: str = "query",
    profile_column: str = "profile",
) -> Callable[..., list[float]]:
    """A TRL reward function (GRPOTrainer / RLOOTrainer `reward_funcs`): TRL passes the prompts, the completions
    and every other dataset column as keyword lists; `query_column` and `profile_column` name the question and
    the user's profile. `token` defaults to PRBJ_SERVE_TOKEN."""
    client = RewardClient(url, token=token)

    def prbj_reward(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
        queries = columns.get(query_column) or [""] * len(completions)
        profiles = columns.get(profile_column) or [None] * len(completions)
        items = [
            {"response_text": _completion_text(completion), "query": query, "profile": profile}
            for completion, query, profile in zip(completions, queries, profiles, strict=True)
        ]
        return [score / divisor for score in client.score_batch(items)]

    return prbj_reward


def _completion_text(completion: Any) -> str:
    """TRL completions are strings, or lists of chat messages in conversational datasets."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content", ""))
    raise TypeError(f"cannot read a completion of type {type(completion).__name__}")
