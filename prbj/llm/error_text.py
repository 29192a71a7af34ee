"""What the user reads about a failed call: one line naming the real cause (the HTTP status the provider
answered, no server reachable, a client that refused to send), with every key masked."""

from __future__ import annotations

import re
from collections.abc import Sequence

from prbj.llm.provider_errors import causes
from prbj.llm.retry import (
    http_status,
    is_retryable,
    is_unreachable,
    raised_before_sending,
    retry_after_seconds,
)
from prbj.llm.urls import redact_url


def describe_error(
    error: BaseException | None,
    attempts: int,
    elapsed: float,
    *,
    secrets: Sequence[str | None] = (),
    ended: str | None = None,
) -> str:
    """One line for the user: what failed, after how many attempts, and (`ended`) why its retries stopped;
    never the key."""
    if error is None:
        return f"gave up after {attempts} attempts ({elapsed:.1f}s)"
    what, _, detail = one_line(error, secrets=secrets).partition(": ")
    plural = "s" if attempts != 1 else ""
    if ended is None and is_retryable(error):
        # Retries stopped without a stated reason (a caller other than the gateway's retry loop): the delay the
        # provider asked for is still worth knowing.
        asked = retry_after_seconds(error)
        ended = f"the provider asked to retry in {asked:g}s" if asked is not None else None
    why = f"; {ended}" if ended else ""
    return f"{what} after {attempts} attempt{plural} ({elapsed:.1f}s{why}): {detail}"


def one_line(error: BaseException, *, secrets: Sequence[str | None] = ()) -> str:
    """`<what>: <first line of the message>`, where <what> names the real cause: the HTTP status a server
    answered, or that no server could be reached, or that the client refused to send (LiteLLM reports the
    last two as a 500 of its own making, which would send the user looking for a server error)."""
    root = list(causes(error))[-1]
    if is_unreachable(error):
        what, message = "could not connect", f"{type(root).__name__}: {root}"
    elif raised_before_sending(error):
        what, message = "not sent by the client", str(root)
    else:
        status = http_status(error)
        what, message = type(error).__name__ + (f" HTTP {status}" if status else ""), str(error)
    # Mask before cutting: a key straddling the cut would otherwise survive in part.
    text = mask_secrets(message, secrets)
    first_line = (text.strip().splitlines() or [""])[0][:300]
    return f"{what}: {first_line}"


# Shorter "keys" are placeholders ("EMPTY", "x") or test values: masking them would only mangle the message.
MIN_SECRET_LENGTH = 8
_UNMISTAKABLE_SECRET_LENGTH = 20
_URL_IN_TEXT = re.compile(r"https?://[^\s'\"<>]+")
_TOKEN_CHAR = re.compile(r"[A-Za-z0-9_\-]")


def mask_secrets(text: str, secrets: Sequence[str | None]) -> str:
    """`text` with each secret replaced by *** where it stands as a whole token (never inside a longer word),
    also when the text quotes only its start (a message cut by the provider), and with credentials in any URL
    it quotes redacted."""
    text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)) or "", text)
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True):
        text = _mask_one(text, secret)
    return text


def _mask_one(text: str, secret: str) -> str:
    pieces: list[str] = []
    position = 0
    start = text.find(secret[:MIN_SECRET_LENGTH])
    while start >= 0:
        length = MIN_SECRET_LENGTH
        while length < len(secret) and start + length < len(text) and text[start + length] == secret[length]:
            length += 1
        end = start + length
        # A whole token: nothing word-like glued to either side (a cut key ends where the secret diverges).
        before_ok = start == 0 or not _TOKEN_CHAR.match(text[start - 1])
        after_ok = end == len(text) or not _TOKEN_CHAR.match(text[end])
        # A full key of real length cannot be an ordinary word: it goes even when glued to other text.
        whole_key = length == len(secret) and length >= _UNMISTAKABLE_SECRET_LENGTH
        if whole_key or (before_ok and after_ok):
            pieces.append(text[position:start] + "***")
            position = end
        start = text.find(secret[:MIN_SECRET_LENGTH], max(end, start + 1))
    return "".join(pieces) + text[position:]
