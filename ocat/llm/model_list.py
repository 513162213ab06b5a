"""The models a provider offers, for `/model` and the completion of its argument.

An OpenAI-compatible `llm.api_base` answers `GET /models`, Ollama `GET /api/tags`; for the
rest litellm's own offline list (ocat.llm.known_chat_models) is used. A listing never raises
and never waits long: it is a convenience, and a provider that does not answer is one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from ocat.llm import DUMMY_MODEL, known_chat_models
from ocat.text.redact import redact
import json

if TYPE_CHECKING:
    from ocat.config.settings import LLMSettings

# Listing models is a convenience: a provider that does not answer quickly is skipped, not waited for.
LIST_TIMEOUT_SECONDS = 5.0
OLLAMA_DEFAULT_BASE = "http://localhost:11434"


@dataclass(frozen=True)
class ModelList:
    """The model names a provider offers, in the form `/model` and `--model` take, and where
    they came from; `problem` says in one line why there is no list."""

    names: tuple[str, ...] = ()
    source: str = ""
    problem: str | None = None


def model_names(payload: object, prefix: str) -> tuple[str, ...]:
    """The names in an OpenAI-style (`{"data": [{"id": ...}]}`) or Ollama (`{"models":
    [{"name": ...}]}`) model list, each with `prefix/` unless it has it already; sorted, once each."""
    entries: list[object] = []
    if isinstance(payload, dict):
        found = payload.get("data", payload.get("models"))
        entries = found if isinstance(found, list) else []
    names = set()
    for entry in entries:
        name = entry.get("id") or entry.get("name") or entry.get("model") if isinstance(entry, dict) else entry
        if isinstance(name, str) and name.strip():
            name = name.strip()
            names.add(name if not prefix or name.startswith(prefix + "/") else f"{prefix}/{name}")
    return tuple(sorted(names))


def _fetch_json(url: str, api_key: str | None, timeout: float) -> object:
    import urllib.request

    if not url.lower().startswith(("http://", "https://")):
        raise ValueError("not an http(s) address")
    request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310 - checked above
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - checked above
        return json.loads(response.read().decode("utf-8", "replace"))


def _listing_failure(exc: Exception, where: str) -> str:
    import urllib.error

    if isinstance(exc, urllib.error.HTTPError):
        hint = " (check llm.api_key)" if exc.code in (401, 403) else ""
        return f"{where} answered {exc.code} {exc.reason}{hint}"
    if isinstance(exc, urllib.error.URLError):
        return f"cannot reach {where}: {exc.reason}"
    if isinstance(exc, TimeoutError):
        return f"{where} did not answer within {LIST_TIMEOUT_SECONDS:g} s"
    if isinstance(exc, ValueError):
        return f"{where} did not answer with a model list"
    return f"{where} failed: {type(exc).__name__}: {exc}"


def list_models(settings: LLMSettings, *, dummy: bool = False) -> ModelList:
    """The models the configured provider offers: an OpenAI-compatible `api_base`'s /models,
    Ollama's /api/tags, else litellm's own (offline) list for the provider. Never raises."""
    if dummy or settings.model == DUMMY_MODEL:
        return ModelList(problem="--dummy-mode answers without a provider, so there are no models to list")
    model = settings.model
    provider = model.split("/", 1)[0] if "/" in model else ""
    try:
        if provider in ("ollama", "ollama_chat"):
            base = (settings.api_base or OLLAMA_DEFAULT_BASE).rstrip("/")
            url = f"{base}/api/tags"
            return _listed(url, provider, settings)
        if settings.api_base:
            return _listed(f"{settings.api_base.rstrip('/')}/models", provider, settings)
        return _known_models(model)
    except Exception as exc:  # a listing must never cost the user more than a line
        return ModelList(problem=redact(f"cannot list models: {type(exc).__name__}: {exc}", secrets=[settings.api_key]))


def _listed(url: str, prefix: str, settings: LLMSettings) -> ModelList:
    where = redact(url, secrets=[settings.api_key])
    try:
        payload = _fetch_json(url, settings.api_key, min(LIST_TIMEOUT_SECONDS, settings.timeout_seconds))
    except Exception as exc:
        return ModelList(problem=redact(_listing_failure(exc, where), secrets=[settings.api_key]))
    names = model_names(payload, prefix)
    if not names and not (isinstance(payload, dict) and isinstance(payload.get("data", payload.get("models")), list)):
        return ModelList(problem=f"{where} did not answer with a model list")
    return ModelList(names=names, source=where)


def _known_models(model: str) -> ModelList:
    """litellm's offline list of the provider's chat models (it may not know them all)."""
    provider, names = known_chat_models(model)
    if not names:
        return ModelList(problem=f"litellm has no list of models for {model}; any name the provider knows works")
    return ModelList(names=names, source=f"litellm's list for {provider} (offline; the provider may offer more)")


_listed_cache: dict[tuple[str, str | None, str | None], ModelList] = {}


def cached_models(settings: LLMSettings) -> ModelList | None:
    """The list `list_models` last gave for this provider in this process, or None (never blocks)."""
    return _listed_cache.get(_cache_key(settings))


def remember_models(settings: LLMSettings, listed: ModelList) -> ModelList:
    """Keep `listed` for completion in this process (a failed listing too: it is not retried on every key)."""
    _listed_cache[_cache_key(settings)] = listed
    return listed


def _cache_key(settings: LLMSettings) -> tuple[str, str | None, str | None]:
    # One list per provider; a bare name (gpt-4o, claude-3-haiku) stands for its own provider.
    model = settings.model
    return (model.split("/", 1)[0] if "/" in model else model, settings.api_base, settings.api_key)


def models_for(settings: LLMSettings, *, dummy: bool = False) -> ModelList:
    """The list kept for this provider, else listed now and kept (it may wait for the provider)."""
    return cached_models(settings) or remember_models(settings, list_models(settings, dummy=dummy))
