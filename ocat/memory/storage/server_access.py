"""Reaching a Chroma server safely: no clear text off this machine, headers from the environment, a refusal in one line.

`ocat.memory.storage.chroma` opens the client; this module decides, before any lookup or
connection, whether the address may be reached, builds the headers it sends (their values
never appear in a message or a log), and words what a server or its proxy answers with a
refusal (401, 403) or an absence (502-504 from a proxy whose Chroma is down).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ocat.config.settings import HEADER_VARIABLE
from ocat.errors import ConfigError, StoreError
from ocat.text.redact import remember_secret, url_without_credentials

if TYPE_CHECKING:
    import httpx

    from ocat.memory.storage.location import StoreLocation

# What a proxy answers when the Chroma server behind it is down or slow: the server is away, not refusing.
_AWAY = {502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}
_REFUSED = {401: "Unauthorized", 403: "Forbidden", 407: "Proxy Authentication Required"}


class ServerProblem(StoreError):
    """A Chroma server (or the proxy in front of it) could not be used: its message is complete in itself."""


class ServerNotAnswering(ServerProblem):
    """A Chroma server did not answer a request in time, or refused the connection."""


class ServerRefused(ServerProblem):
    """A Chroma server or its proxy refused ocat (HTTP 401 or 403): a missing or wrong token."""


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine, told from its text alone (no lookup): `localhost`
    (and `*.localhost`, RFC 6761), or a loopback address (127.0.0.0/8, ::1)."""
    name = host.strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def refuse_clear_text(location: StoreLocation) -> None:
    """Raise StoreError when the location would send memory in clear text off this machine:
    plain HTTP to a host that is not loopback, unless `vector_store.insecure` says so.

    Called before anything resolves or connects to the host."""
    if location.host is None or location.scheme == "https" or location.insecure or is_loopback(location.host):
        return
    raise StoreError(
        f"refusing plain HTTP to {location.server_url()}: memory and tokens would cross the network in clear "
        "text; use https (vector_store.url: https://..., or vector_store.ssl: true), or set "
        "vector_store.insecure: true to allow it"
    )


def expanded_headers(location: StoreLocation, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The headers to send, `${NAME}` replaced from the environment; every value (and each word
    of it) is remembered as a secret, so no message or log shows it. A variable that is not set
    is a ConfigError naming it."""
    env = os.environ if env is None else env
    headers: dict[str, str] = {}
    for name, template in location.headers:
        missing = [var for var in HEADER_VARIABLE.findall(template) if not env.get(var)]
        if missing:
            raise ConfigError(
                f"config error: vector_store.headers: {name} needs the environment variable {missing[0]}, "
                "which is not set (or empty)"
            )
        value = HEADER_VARIABLE.sub(lambda match: env[match.group(1)], template)
        for secret in (value, *value.split()):
            remember_secret(secret)
        headers[name] = value
    return headers


def tls_context(ca_file: str) -> ssl.SSLContext:
    """A client TLS context that trusts the certificates in `ca_file` (PEM) and checks host names."""
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"config error: vector_store.ca_file: cannot read {ca_file}: {exc}") from None


def check_answer(response: httpx.Response) -> None:
    """An httpx response hook: a refusal or a proxy's 'server away' becomes one line naming the
    server and the status, before chromadb reads the body (which it would misread, or ignore)."""
    status = response.status_code
    if status in _REFUSED:
        server = server_of(str(response.request.url))
        raise ServerRefused(
            f"the memory server at {server} refused ocat: HTTP {status} {_REFUSED[status]}; "
            "check vector_store.headers (a missing or wrong token)"
        )
    if status in _AWAY:
        server = server_of(str(response.request.url))
        raise ServerNotAnswering(
            f"the memory server at {server} is away: HTTP {status} {_AWAY[status]} from the proxy in front of it"
        )


def untrusted_certificate(exc: BaseException, server: str) -> ServerProblem | None:
    """The error for a TLS certificate this machine does not trust, when that is what `exc` is about."""
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, ssl.SSLCertVerificationError):
            return ServerProblem(
                f"the memory server at {server} has a TLS certificate this machine does not trust "
                f"({current.verify_message}); set vector_store.ca_file to its CA's certificate (PEM)"
            )
        current = current.__cause__ or current.__context__
    return None


def absence(exc: BaseException) -> str:
    """Why a connection failed, in words: a name that does not resolve is not a server that is down."""
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, socket.gaierror):
            return "cannot be found: its name does not resolve (is it right? is this machine offline?)"
        current = current.__cause__ or current.__context__
    return "is not running"


def server_of(url: str) -> str:
    """A request's URL cut to the server's address as configured (scheme, host, port, prefix)."""
    base, _, _ = url.partition("/api/v")
    return url_without_credentials(base.rstrip("/"))


def problem_in(exc: BaseException) -> ServerProblem | None:
    """The ServerProblem behind an exception, if any (chromadb re-raises some as ValueError)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ServerProblem):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None

