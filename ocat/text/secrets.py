"""Credentials found in text and replaced by a placeholder that names them: what memory keeps.

Yelp's detect-secrets finds the keys whose shape is known (AWS, GitHub, GitLab, Slack, Stripe,
OpenAI, JWTs, passwords in URLs...); ocat's own patterns add what it lacks (Anthropic, Google and
Hugging Face keys, newer OpenAI and GitHub keys, bearer tokens, whole private key blocks,
`password=` assignments, high-entropy values given to `*_KEY`/`*_TOKEN`/`*_SECRET` names) and,
for `memory.secrets: strict`, passwords and codes said in prose. detect-secrets is imported on
the first scan, off the startup path. Text is scanned in memory; nothing is written anywhere.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal, Sequence

if TYPE_CHECKING:
    from collections.abc import Iterator

# What memory does with a secret: redact credentials (the default), also passwords and codes said
# in prose (strict), or keep everything (keep: found and counted, never changed).
SecretsMode = Literal["redact", "strict", "keep"]
SECRETS_MODES: tuple[str, ...] = ("redact", "strict", "keep")

# detect-secrets' plugins whose shapes are specific enough for chat text: the name ocat gives each
# kind, and the strings one of its secrets always holds (a text without them is not scanned for
# it: scanning costs ~0.1 us a character a pattern). Left out: the keyword and high-entropy
# plugins (ocat's assignment rule below does their job with fewer false alarms in prose), IP
# addresses (no secret), the plugins that match any word after a keyword (Artifactory, IBM,
# SoftLayer, Cloudant), and Discord's, which holds no fixed string to look for first.
_PLUGINS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("aws", "AWSKeyDetector", "AWS key", ("AKIA", "ASIA", "ABIA", "ACCA", "A3T", "aws", "AWS", "Aws")),
    ("azure_storage_key", "AzureStorageKeyDetector", "Azure storage key", ("AccountKey=",)),
    ("basic_auth", "BasicAuthDetector", "password in a URL", ("://",)),
    ("github_token", "GitHubTokenDetector", "GitHub token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    ("gitlab_token", "GitLabTokenDetector", "GitLab token",
     ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "GR1348941", "glcbt-", "glimt-", "glptt-", "glagent-", "gloas-")),
    ("jwt", "JwtTokenDetector", "JSON web token", ("eyJ",)),
    ("mailchimp", "MailchimpDetector", "Mailchimp key", ("-us",)),
    ("npm", "NpmDetector", "npm token", ("_authToken",)),
    ("openai", "OpenAIDetector", "OpenAI key", ("T3BlbkFJ",)),
    ("pypi_token", "PypiTokenDetector", "PyPI token", ("pypi-",)),
    ("sendgrid", "SendGridDetector", "SendGrid key", ("SG.",)),
    ("slack", "SlackDetector", "Slack token", ("xox", "XOX", "hooks.slack.com")),
    ("square_oauth", "SquareOAuthDetector", "Square secret", ("sq0csp-",)),
    ("stripe", "StripeDetector", "Stripe key", ("_live_",)),
    ("telegram_token", "TelegramBotTokenDetector", "Telegram token", tuple(f"{d}:" for d in range(10))),
    ("twilio", "TwilioKeyDetector", "Twilio key", ("AC", "SK")),
)
# Plugins whose pattern's first group is the secret (the password of a URL, an AWS secret after
# its name); the others' groups are prefixes, and the whole match is the secret.
_GROUPED = {"BasicAuthDetector", "AWSKeyDetector"}

# ocat's own shapes, checked before detect-secrets' (a more specific kind wins an overlap).
_OWN: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = (
    ("private key", re.compile(
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"),
     ("PRIVATE KEY",)),
    ("Anthropic key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}"), ("sk-ant-",)),
    # Every OpenAI key starts sk- (sk-proj-, sk-svcacct-, sk-admin-, older ones bare); detect-secrets
    # knows only those that hold T3BlbkFJ.
    ("OpenAI key", re.compile(r"\bsk-(?!ant-)[A-Za-z0-9_-]{20,}"), ("sk-",)),
    ("Google key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"), ("AIza",)),
    ("Google token", re.compile(r"\bya29\.[0-9A-Za-z_-]{20,}"), ("ya29.",)),
    ("GitHub token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}"), ("github_pat_",)),
    ("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}"), ("hf_",)),
    ("Stripe key", re.compile(r"\b(?:sk|rk|whsec)_(?:live|test)_[0-9A-Za-z]{16,}"), ("_live_", "_test_")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), ("xox",)),
)
# The characters of a name (`DB_PASSWORD`, `settings.api_key`, `X-Api-Key`).
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
# The words a secret's name holds: where assignments are looked for (lower case).
_NAME_WORDS = ("pass", "pwd", "secret", "key", "token", "credential", "auth")
# What follows a name given a value: `= value`, `:= value`, `=> value`, or `": value` after a quoted key.
_ASSIGNMENT = re.compile(
    r"""(?:["']?\]?[ \t]*(?::=|=>|==?)|["'][ \t]*:)[ \t]*(?P<q>["'`]?)(?P<value>[^\s"'`,;&]+)(?P=q)""")
# `name: value` in a config file or a header (the name starts its line).
_CONFIG = re.compile(r"""[ \t]*:[ \t]+(?P<q>["']?)(?P<value>[^\s"',;]+)(?P=q)""")
_LINE_START = re.compile(r"(?:^|\n)[ \t]*(?:-[ \t]+|export[ \t]+)?$")
# `Authorization: Bearer TOKEN` (or Basic, or token): the value alone.
_BEARER_WORDS = ("bearer", "basic", "token")
_BEARER = re.compile(r"[ \t]+([A-Za-z0-9._~+/-]{8,}=*)")
# Names whose value is a password or a secret whatever it looks like.
_PASSWORD_NAME = re.compile(r"(?i)(?:passw(?:or)?d|pwd|passphrase|secret)s?$")
# Names whose value is a credential when it looks random (high entropy).
_KEY_NAME = re.compile(r"(?i)(?:key|token|secret|credential|auth)s?$")
# Names ending in key/token that hold no credential.
_NOT_SECRET_NAME = re.compile(
    r"(?i)(?:primary|foreign|sort|partition|cache|idempotency|public|pub|row|hash|dict|map|lookup|group|"
    r"object|item|field|unique|composite|ssh_public|max|min|next|page|continuation|csrf_?token_?name|key_?name)"
    r"[_.-]?(?:key|token)s?$|^(?:key|token|keys|tokens|monkey|hotkey|turkey|donkey|jockey|hockey|"
    r"(?:max|min|num|total|input|output|prompt|completion)_?tokens?)$|tokenizer|keyboard|keystroke|keyword")
# Values that stand for a secret rather than being one: placeholders, references, code.
_PLACEHOLDER = re.compile(
    r"(?i)^(?:\[secret:.*|<[^>]*>?|\$.*|%.*|\{.*|\*+|x{3,}|\.{3}.*|…|-+|none|null|nil|true|false|undefined|"
    r"changeme|change_me|example|placeholder|redacted|secret|password|your[-_].*|my[-_].*|.*\(.*|.*\[.*|"
    r"(?:os|process|settings|config|self|env|args|options|opts|request|params)\..*|[a-z_]+(?:\.[a-z_]+)+|"
    r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)$")
# Shortest value an assignment is a password with, and a key or token with (by entropy).
_MIN_PASSWORD = 4
_MIN_KEY = 16
# Shannon entropy (bits per character) a value given to a key name needs: random keys have
# 4-6, words and repeated characters less.
_KEY_ENTROPY = 3.3
# A data URL's base64 (a Markdown image) is never a secret, though its letters can look like one.
_DATA_URL = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=\s]+")
# Passwords and codes said in prose (strict only): "the wifi password is Blue-Heron-77",
# "door code: 4512", "PIN 0000".
_PROSE_WORDS = ("password", "passcode", "passphrase", "passwort", "pin", "code", "combination")
_PROSE = re.compile(
    r"(?i)s?(?P<said>[ \t]+(?:is|was|will[ \t]+be|now[ \t]+is|=|:|to|of)|[ \t]*[:=])?"
    r"[ \t]+[\"'“]?(?P<value>[^\s\"'”]{3,})")
_PROSE_STOP = {"the", "a", "an", "is", "was", "my", "your", "our", "their", "that", "this", "it", "not", "still",
               "same", "now", "set", "changed", "reset", "for", "and", "or", "but", "to", "in", "on", "at", "of"}
_PROSE_KINDS = {"pin": "PIN", "code": "code", "combination": "code"}


@dataclass(frozen=True)
class Found:
    """A secret in a text: where it is (start, end) and what kind it is, in words."""

    start: int
    end: int
    kind: str


@dataclass(frozen=True)
class Redaction:
    """A text as memory keeps it, and the kinds of the secrets found in it (one per secret)."""

    text: str
    kinds: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        """Whether any secret was found (and, unless kept, replaced)."""
        return bool(self.kinds)


def placeholder(kind: str) -> str:
    """What a secret of this kind becomes: `[secret: OpenAI key]`."""
    return f"[secret: {kind}]"


def redact_secrets(text: str, mode: str = "redact") -> Redaction:
    """`text` with each credential replaced by its placeholder (`strict`: passwords and codes said
    in prose too; `keep`: nothing replaced, the kinds still counted), and the kinds found."""
    found = find_secrets(text, prose=mode == "strict")
    if not found or mode == "keep":
        return Redaction(text, tuple(f.kind for f in found))
    parts: list[str] = []
    at = 0
    for secret in found:
        parts.append(text[at : secret.start])
        parts.append(placeholder(secret.kind))
        at = secret.end
    parts.append(text[at:])
    return Redaction("".join(parts), tuple(f.kind for f in found))


def find_secrets(text: str, *, prose: bool = False) -> list[Found]:
    """The secrets in `text`, in order, never overlapping (a more specific kind wins), and never
    inside a placeholder already put there or a data URL's base64."""
    if len(text) < _MIN_PASSWORD:
        return []
    spared = [(m.start(), m.end()) for m in _DATA_URL.finditer(text)]
    spared += [(m.start(), m.end()) for m in re.finditer(r"\[secret: [^\]]*\]", text)]
    taken: list[Found] = []
    for found in _candidates(text, prose):
        if found.end <= found.start or _inside(found, spared):
            continue
        if any(found.start < t.end and t.start < found.end for t in taken):
            continue
        taken.append(found)
    return sorted(taken, key=lambda f: f.start)


def count_kinds(kinds: Sequence[str]) -> str:
    """'OpenAI key', 'AWS key, 2 x password': the kinds found, for a message."""
    counted = Counter(kinds)
    return ", ".join(kind if n == 1 else f"{n} x {kind}" for kind, n in counted.items())


def _inside(found: Found, spans: list[tuple[int, int]]) -> bool:
    return any(start <= found.start and found.end <= end for start, end in spans)


def _candidates(text: str, prose: bool) -> Iterator[Found]:
    """Every match, most specific first: ocat's shapes, detect-secrets', bearer tokens, assignments,
    prose. A pattern runs only on a text holding one of its fixed strings."""
    lowered = _lowered(text)
    for kind, pattern, needles in _OWN:
        if any(n in text for n in needles):
            yield from (Found(m.start(), m.end(), kind) for m in pattern.finditer(text))
    for kind, patterns, grouped, needles in _plugin_patterns():
        if not any(n in text for n in needles):
            continue
        for pattern, match in ((p, m) for p in patterns for m in p.finditer(text)):
            group = 1 if grouped and pattern.groups and match.group(1) else 0
            end = match.end(group)
            if kind == "JSON web token":  # detect-secrets' pattern stops before the signature
                end += len(re.match(r"[A-Za-z0-9_.+/=-]*", text[end:]).group(0))  # type: ignore[union-attr]
            yield Found(match.start(group), end, kind)
    for at, end in _words(lowered, _BEARER_WORDS):
        said = _BEARER.match(text, end)
        if said and re.search(r"[\d._~+/-]", said.group(1)) and not _PLACEHOLDER.match(said.group(1)):
            yield Found(said.start(1), said.end(1), "bearer token")
    yield from _assignments(text, lowered)
    if prose:
        for at, end in _words(lowered, _PROSE_WORDS):
            prose_match = _PROSE.match(text, end)
            if prose_match:
                yield from _said(lowered[at:end], prose_match)


def _lowered(text: str) -> str:
    """`text` in lower case, each character where it was (a few letters lower to two)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _words(lowered: str, words: tuple[str, ...]) -> Iterator[tuple[int, int]]:
    """Where each of `words` stands as a word of its own in `lowered`: (start, end)."""
    for word in words:
        at = lowered.find(word)
        while at != -1:
            end = at + len(word)
            if (at == 0 or not lowered[at - 1].isalnum()) and (end == len(lowered) or not lowered[end].isalnum()):
                yield at, end
            at = lowered.find(word, end)


def _assignments(text: str, lowered: str) -> Iterator[Found]:
    """Values given to names that hold a secret's word (`DB_PASSWORD=...`, `"api_key": "..."`)."""
    done: set[int] = set()
    for word in _NAME_WORDS:
        at = lowered.find(word)
        while at != -1:
            start, end = at, at + len(word)
            while start > 0 and text[start - 1] in _NAME_CHARS:
                start -= 1
            while end < len(text) and text[end] in _NAME_CHARS:
                end += 1
            at = lowered.find(word, end)
            if end in done:
                continue
            done.add(end)
            name = text[start:end].lstrip(".-")
            match = _ASSIGNMENT.match(text, end)
            if match is None and _LINE_START.search(text, max(0, start - 40), start):
                match = _CONFIG.match(text, end)
            if match is not None:
                yield from _assignment(name, match)


def _assignment(name: str, match: re.Match[str]) -> Iterator[Found]:
    """A value given to a password's or a key's name, when it looks like one."""
    value = match.group("value")
    last = name.split(".")[-1]
    if not last or _PLACEHOLDER.match(value) or value.lower() == last.lower():
        return
    where = (match.start("value"), match.end("value"))
    if _PASSWORD_NAME.search(last) and len(value) >= _MIN_PASSWORD:
        yield Found(*where, "secret" if "secret" in last.lower() else "password")
    elif _KEY_NAME.search(last) and not _NOT_SECRET_NAME.search(last) and _looks_random(value):
        yield Found(*where, "key" if last.lower().endswith(("key", "keys")) else "token")


def _looks_random(value: str) -> bool:
    """Long enough, letters and digits mixed, and of high entropy: a generated key, not a word."""
    return (len(value) >= _MIN_KEY and bool(re.search(r"\d", value)) and bool(re.search(r"[A-Za-z]", value))
            and _entropy(value) >= _KEY_ENTROPY)


def _entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _said(what: str, match: re.Match[str]) -> Iterator[Found]:
    """A password or a code said in prose (strict): the word after "password is"."""
    value = match.group("value").rstrip(".,;:!?)")
    if value.lower() in _PROSE_STOP or _PLACEHOLDER.match(value) or len(value) < 3:
        return
    kind = _PROSE_KINDS.get(what, "password")
    if (kind != "password" or not match.group("said")) and not re.search(r"\d", value):
        return  # "the code is messy", "password policy": a code, or a password not announced, holds digits
    start = match.start("value")
    yield Found(start, start + len(value), kind)


@lru_cache(maxsize=1)
def _plugin_patterns() -> tuple[tuple[str, tuple[re.Pattern[str], ...], bool, tuple[str, ...]], ...]:
    """detect-secrets' patterns, plugin by plugin, imported on first use (it takes a fifth of a second)."""
    import importlib  # noqa: PLC0415 - detect-secrets loads on the first scan, not at startup

    plugins = []
    for module, name, kind, needles in _PLUGINS:
        plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)
        plugins.append((kind, tuple(plugin.denylist), name in _GROUPED, needles))
    return tuple(plugins)
