"""Provider base URLs: checked before any call, and written or printed only with their credentials removed.

A key belongs in an environment variable, never in the URL: `user:token@host` is refused (LiteLLM would send
it nowhere useful and every call would fail), and `redact_url` blanks userinfo and the values of key-like query
parameters (`?key=…`, `api_key`, `token`, `sig`, …) wherever a URL reaches run.json, a log or the terminal.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from prbj.errors import ConfigError

REDACTED = "***"
# Query parameter names whose values are credentials: exact names and name parts (Azure SAS `sig`, `X-Amz-*`).
_SECRET_PARAM = re.compile(
    r"(^|[_\-.])(key|apikey|api_key|api-key|token|access_token|auth|authorization|secret|password|passwd|sig|"
    r"signature|credential|credentials|x-amz-signature|x-amz-credential|x-amz-security-token)$",
    re.IGNORECASE,
)
_SCHEMES = ("http", "https")


def is_secret_param(name: str) -> bool:
    return bool(_SECRET_PARAM.search(name.strip()))


def redact_url(url: str | None) -> str | None:
    """`url` with `user:password@` and the values of key-like query parameters replaced by ***; everything
    else is left byte for byte, so the result still says which server was used."""
    if url is None:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        # Unparseable: nothing can be said about where a secret sits in it, so none of it is shown.
        return REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    query = "&".join(_redact_pair(pair) for pair in parts.query.split("&")) if parts.query else ""
    fragment = REDACTED if "=" in parts.fragment else parts.fragment
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def _redact_pair(pair: str) -> str:
    name, sep, value = pair.partition("=")
    return f"{name}={REDACTED}" if sep and value and is_secret_param(name) else pair


def check_api_base(url: str, *, option: str = "--api-base") -> str:
    """The URL if a provider can be reached at it; otherwise a one-line ConfigError naming `option`."""
    shown = redact_url(url)
    try:
        parts = urlsplit(url.strip())
        _ = parts.port  # raises on a port that is not a number in range
    except ValueError as err:
        raise ConfigError(f"{option} {shown}: not a URL ({err})") from None
    if parts.scheme.lower() not in _SCHEMES or not parts.hostname:
        raise ConfigError(f"{option} {shown}: not an http(s) URL with a host (e.g. http://127.0.0.1:8000/v1)")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(
            f"{option} {shown}: credentials in the URL are not sent to the provider; remove them and put the "
            f"key in the environment variable the provider profile names (api_key_env, e.g. OPENAI_API_KEY)"
        )
    return url
