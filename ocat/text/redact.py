"""Secrets removed from error messages and logs: API keys, tokens and credentials in URLs.

A provider's error body can echo the key it was sent, and `llm.api_base` can carry
`user:password@`. Every message ocat shows or logs about a failure goes through `redact`.
The shapes of keys and tokens are ocat.text.secrets' (what memory keeps out); what is here is
what only a message needs: known values, whole URL userinfo, and a looser `api_key=` (a mask
too many costs a log nothing).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from ocat.text.secrets import find_secrets

MASK = "***"
# Shorter values are not credentials, and masking them would garble ordinary words.
MIN_SECRET_LENGTH = 8
# Environment variables whose values are credentials, by the usual naming.
_SECRET_ENV_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET")

# Values set at run time (the configured llm.api_key, the password in llm.api_base).
_known: set[str] = set()

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # `https://user:pass@host`: keep the scheme and host, drop the userinfo.
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@"), rf"\1{MASK}@"),
    # Any word after Bearer or Basic (ocat.text.secrets wants a token-like one; a message need not).
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}"), rf"\1 {MASK}"),
    # `api_key=...`, `"api-key": "..."` and `?key=...` in echoed requests.
    (re.compile(r"(?i)(\bapi[_-]?key[\"']?\s*[=:]\s*[\"']?|[?&]key=)[A-Za-z0-9._~+/-]{8,}"), rf"\1{MASK}"),
)


def remember_secret(value: str | None) -> None:
    """Mask `value` wherever it appears from now on (the configured API key, say)."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        _known.add(value)


def _env_secrets(env: Mapping[str, str]) -> Iterable[str]:
    for name, value in env.items():
        if name.upper().endswith(_SECRET_ENV_SUFFIXES) and len(value) >= MIN_SECRET_LENGTH:
            yield value


def redact(text: str, secrets: Iterable[str | None] = (), env: Mapping[str, str] | None = None) -> str:
    """`text` with credentials replaced by `***`: `secrets`, remembered ones, the values of
    `*_API_KEY`, `*_TOKEN` and `*_SECRET` variables, key-like patterns and URL userinfo."""
    values = {s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}
    values |= _known | set(_env_secrets(os.environ if env is None else env))
    # Longest first, so a key that contains another is masked whole.
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, MASK)
    for found in reversed(find_secrets(text)):  # every key shape memory keeps out, from the end
        text = text[: found.start] + MASK + text[found.end :]
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def url_without_credentials(url: str) -> str:
    """`url` with any `user:password@` masked, for messages that name the provider's address."""
    return _PATTERNS[0][0].sub(_PATTERNS[0][1], url)
