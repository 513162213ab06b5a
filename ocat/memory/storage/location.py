"""Where a store lives: a folder for the embedded client, or a Chroma server's address with what
`vector_store` says of it (ocat.memory.storage.chroma opens it; ocat.memory.storage.server_access
checks, before any connection, that it may be reached)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit


@dataclass(frozen=True)
class StoreLocation:
    """Where a store lives: a folder for the embedded client, or a server address (or both:
    a folder whose owning process serves it, reached through that server).

    A server's address may carry what `vector_store` says of it: https, a path prefix, headers
    (as configured: `${VAR}` is read when the client opens, and no message ever shows them),
    a tenant and a database, and whether plain HTTP off this machine is allowed."""

    path: Path | None = None
    host: str | None = None
    port: int = 8000
    scheme: str = "http"
    prefix: str = ""  # a URL's path, e.g. /chroma behind a proxy that serves more than Chroma
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    tenant: str | None = None
    database: str | None = None
    insecure: bool = False
    ca_file: str | None = None

    def server_url(self) -> str:
        """The server's address as a URL (no headers, no credentials): `https://host:port/prefix`."""
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.prefix}"

    def cache_key(self) -> str:
        """What names this server's files on this machine (its lexical index, its import lock):
        `host-port`, and a short digest of the prefix, tenant and database when any is set, so two
        stores of one name on one server, in two databases or behind two prefixes, never share a file."""
        key = f"{self.host}-{self.port}"
        where = (self.prefix, self.tenant or "", self.database or "")
        if any(where):
            key += "-" + hashlib.sha256("\0".join(where).encode()).hexdigest()[:10]
        return key

    def describe(self) -> str:
        """The location as a user reads it: a path, the server's URL (with its tenant and
        database when not Chroma's defaults), or a path reached through its owner."""
        if self.host and self.path is not None:
            return f"{self.path} (through its owner at {self.server_url()})"
        if self.host:
            named = [f"{what} {value}" for what, value in (("tenant", self.tenant), ("database", self.database))
                     if value]
            return self.server_url() + (f" ({', '.join(named)})" if named else "")
        return str(self.path)


def server_location(url: str | None, host: str | None, port: int, *, ssl: bool = False,
                    headers: Mapping[str, str] | None = None, tenant: str | None = None,
                    database: str | None = None, insecure: bool = False,
                    ca_file: str | None = None) -> StoreLocation:
    """The location of a Chroma server from `vector_store`'s settings: `url` when set, else host and port."""
    scheme, prefix = ("https" if ssl else "http"), ""
    if url:
        parts = urlsplit(url)
        scheme, host, prefix = parts.scheme, parts.hostname, parts.path.rstrip("/")
        port = parts.port or (443 if scheme == "https" else 80)
    return StoreLocation(host=host, port=port, scheme=scheme, prefix=prefix,
                         headers=tuple((headers or {}).items()), tenant=tenant, database=database,
                         insecure=insecure, ca_file=ca_file)
