"""Who may talk to prbj's HTTP servers (`prbj view`, `prbj serve`): the host names a request may be addressed to,
the origins a browser may send one from, and the token a caller proves it was given the address with.

The Host check is what stops DNS rebinding: a page on evil.example whose name is made to resolve to this machine
reaches the server with `Host: evil.example`, never with one of this machine's own names. It holds at every bind
address; a bind beyond loopback adds a token on top (the name check cannot tell the machines of a network apart)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from urllib.parse import urlsplit

from prbj.errors import ConfigError

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
# A token shorter than this is guessable by whoever can send requests (or, "  ", is none at all).
MIN_TOKEN_CHARS = 16
# A DNS name (labels of letters, digits, `-` and `_`, as cluster service names have), optionally fully qualified.
_LABEL = r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?"
_HOST_NAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*\.?")


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


# Every request names its Host: parsing one (ipaddress is slow) is kept for the next request naming it.
@lru_cache(maxsize=1024)
def normal_name(host: str) -> str:
    """A host name or address as compared here: lower case, no brackets, no trailing dot, IPv6 compressed."""
    name = host.strip().strip("[]").rstrip(".").lower()
    address = _address(name)
    return str(address) if address is not None else name


def is_loopback(host: str) -> bool:
    if normal_name(host) == "localhost":
        return True
    address = _address(host)
    return address is not None and address.is_loopback


def is_wildcard(host: str) -> bool:
    """0.0.0.0 or :: (every address of the machine), or an empty host, which asyncio binds the same way."""
    if not host.strip():
        return True
    address = _address(host)
    return address is not None and address.is_unspecified


@lru_cache(maxsize=1024)
def split_host(value: str) -> str | None:
    """The name of a Host header (`name`, `name:port`, `[v6]`, `[v6]:port`), normalised; None when malformed."""
    value = value.strip()
    if not value or any(c.isspace() or c in "/\\@?#" for c in value):
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1 :] and not value[end + 1 :].startswith(":")):
            return None
        name = value[1:end]
        if _address(name) is None:
            return None
        port = value[end + 2 :]
    else:
        name, _, port = value.partition(":")
        if ":" in port:
            return None
    if port and not port.isdigit():
        return None
    return normal_name(name) or None


@cache
def machine_names() -> frozenset[str]:
    """This machine's host name, its fully qualified name and the addresses they resolve to (read once)."""
    import socket  # here: `prbj --help` and every command import this module through the CLI

    names: set[str] = set()
    for name in {socket.gethostname(), socket.getfqdn()}:
        if not name:
            continue
        names.add(normal_name(name))
        try:
            infos = socket.getaddrinfo(name, None)
        except OSError:
            continue
        names.update(normal_name(str(info[4][0])) for info in infos)
    return frozenset(names)


@dataclass(frozen=True)
class HostPolicy:
    """The names a request may be addressed to (any port: a reverse proxy may present another one)."""

    names: frozenset[str]

    @classmethod
    def for_bind(cls, host: str, allowed: Iterable[str] = ()) -> HostPolicy:
        """The bound address, this machine's names and addresses, the loopback names when bound to loopback or
        to every address, and the names given with --allow-host (checked here: ConfigError for a name no policy
        may hold, whichever server asks)."""
        names = set(machine_names())
        if host.strip():
            # 0.0.0.0 too: a client that typed it is no page of another site.
            names.add(normal_name(host))
        if is_loopback(host) or is_wildcard(host):
            names.update(LOOPBACK_NAMES)
        names.update(normal_name(name) for name in checked_allowed_hosts(allowed))
        return cls(frozenset(names))

    def allows(self, host_header: str | None, local_address: str | None = None) -> bool:
        """Whether a request with this Host header may be answered. `local_address` is the address the
        connection reached: a client that typed this machine's address in the URL names it in the Host."""
        if host_header is None:
            return False
        name = split_host(host_header)
        if name is None:
            return False
        return name in self.names or (local_address is not None and name == normal_name(local_address))

    def allows_origin(self, origin: str, local_address: str | None = None) -> bool:
        """Whether a browser's Origin header names a page of this server (same site); `null` never does."""
        try:
            parts = urlsplit(origin.strip())
            netloc = parts.netloc
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not netloc:
            return False
        return self.allows(netloc, local_address)


def checked_token(token: str | None, option: str = "--token") -> str | None:
    """The token a server was given, stripped (a token read from a file or a variable often ends in a newline);
    None when none was. One shorter than MIN_TOKEN_CHARS (spaces only, a word) is refused."""
    if token is None:
        return None
    token = token.strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"{option}: {len(token)} characters; a token needs at least {MIN_TOKEN_CHARS} "
            "(python -c 'import secrets; print(secrets.token_urlsafe(32))' makes one)"
        )
    return token


def checked_allowed_hosts(values: Iterable[str]) -> tuple[str, ...]:
    """The names given with --allow-host, each a host name or an address: one without a port (every port is
    accepted) and without a wildcard (each name is given), else a ConfigError saying so."""
    checked = []
    for value in values:
        name = value.strip()
        bare = name[1:-1] if name.startswith("[") and name.endswith("]") else name
        if _address(bare) is not None:
            checked.append(bare)
            continue
        if "*" in name:
            problem = "a wildcard; name each host (a name allowed is a site that may reach the server)"
        elif ":" in name:
            problem = "a name with a port; give the name alone (any port is accepted)"
        elif not _HOST_NAME.fullmatch(name.lower()):
            problem = "not a host name or an address"
        else:
            checked.append(name)
            continue
        raise ConfigError(f"--allow-host {value!r}: {problem}")
    return tuple(checked)


def same_token(sent: str | None, token: str) -> bool:
    """A constant-time comparison; an empty or missing value never matches."""
    if not sent or not token:
        return False
    import hmac

    return hmac.compare_digest(sent.encode("utf-8", "surrogatepass"), token.encode("utf-8"))


def bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header, else None."""
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    return (value.strip() or None) if scheme.lower() == "bearer" else None
