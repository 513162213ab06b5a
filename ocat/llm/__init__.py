"""Chat models: completions streamed (with tool calls), usage and cost, and errors.

Two roads reach a model. OpenAI and OpenAI-compatible servers (`openai/...`, with or without
`llm.api_base`: llama.cpp, vLLM, LM Studio, Ollama's /v1) go through one streamed POST over
httpx (ocat.llm.openai_compatible); every other provider goes through litellm. litellm takes seconds to
import (issue 35: it made `--ask` 7x slower than simonw/llm), so it is imported only for the
providers that need it; what ocat knows of a model (its window, prices, tools) comes from
litellm's table read without importing it (ocat.llm.model_table). `--dummy-mode` imports neither.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, AsyncIterator
import asyncio

from ocat.errors import ProviderError
from ocat.llm.call_assembler import AskedCall, CallAssembler
from ocat.llm.litellm_offline import litellm as load_litellm
from ocat.llm.model_table import model_facts
from ocat.llm.openai_compatible import chunk_field, stream_chat
from ocat.llm.tool_errors import refused_tool, refuses_tools
from ocat.text.redact import redact

if TYPE_CHECKING:
    from ocat.config.loading import LLMSettings

DUMMY_MODEL = "dummy"
# A chat message: role and content, and for tool calls their ids and arguments (OpenAI's shape).
Message = dict[str, Any]


class ToolsRefused(ProviderError):
    """The provider refused the request because it offered tools (a model or server that cannot
    call them): the turn asks again without them."""


class ToolRejected(ProviderError):
    """The provider refused one tool's definition (a schema or a name it cannot take): the turn
    asks again without that tool, named in `tool`."""

    def __init__(self, message: str, tool: str) -> None:
        super().__init__(message)
        self.tool = tool


@dataclass(frozen=True)
class Usage:
    """Tokens a turn used, and its cost in USD where litellm knows the model's price."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "cost_usd": self.cost_usd,
        }


def dummy_reply(messages: list[Message]) -> str:
    """The deterministic answer of `--dummy-mode`: it names the prompt and the memory it saw."""
    prompt = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    memories = sum(m["content"].count("<memory ") for m in messages if m["role"] == "system")
    return f"[dummy] You said: {prompt.strip()}\n\n(memories in context: {memories})"


def _call_args(
    messages: list[Message], settings: LLMSettings, tools: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    args: dict[str, Any] = {
        "model": settings.model,
        "messages": messages,
        "temperature": settings.temperature,
        "timeout": settings.timeout_seconds,
    }
    if tools:
        args["tools"] = tools
        args["tool_choice"] = "auto"
    if settings.max_tokens:
        args["max_tokens"] = settings.max_tokens
    if settings.api_base:
        args["api_base"] = settings.api_base
    if settings.api_key:
        args["api_key"] = settings.api_key
    return args


# The key sent to a server named by `llm.api_base` when none is set: local servers (llama.cpp,
# Ollama, vLLM) accept any key, and the SDKs refuse to send a request without one.
PLACEHOLDER_KEY = "ocat-no-key"


def openai_road(settings: LLMSettings) -> bool:
    """Whether the model is reached through the `openai` SDK (OpenAI, or a server speaking its
    API) rather than litellm."""
    model = settings.model
    if model.startswith("openai/"):
        return True
    if "/" in model:
        return False
    facts = model_facts(model)
    return facts is not None and facts.provider == "openai"


def _openai_key(settings: LLMSettings) -> str | None:
    """The key the SDK sends: `llm.api_key`, OPENAI_API_KEY, or a placeholder for a server named
    by `llm.api_base`; None when there is none (the provider needs one)."""
    key = settings.api_key or os.environ.get("OPENAI_API_KEY")
    if key:
        return key
    return PLACEHOLDER_KEY if settings.api_base else None


def warm_up(settings: LLMSettings) -> None:
    """Do now, in the background, the slow first-use work of an answer: import the SDK that
    reaches the model (and litellm, for its providers), read its facts, so the first answer
    starts as fast as the later ones. The token counter is not loaded: a chat counts tokens only
    when its history may not fit the window (ocat.chat.messages.build_request), and its tables
    would hold ~50 MB for the chat's life."""
    if settings.model == DUMMY_MODEL:
        return
    input_token_limit(settings)
    if openai_road(settings):
        import httpx  # noqa: F401  (the road's one import: ready before the first answer)

        return
    import openai

    openai.AsyncOpenAI(api_key="warm-up", base_url="http://127.0.0.1:9/v1").chat.completions  # noqa: B018
    # A first streamed call through litellm imports some 500 more modules (its dispatch and
    # logging): about a second on a 2-core machine. A mocked call (no request leaves the
    # machine) pays for them now.
    litellm = load_litellm()

    async def mocked() -> None:
        args = _call_args([{"role": "user", "content": "warm up"}], settings)
        response = await litellm.acompletion(**args, stream=True, mock_response="ok")
        async for _ in response:
            pass

    try:
        asyncio.run(mocked())
    except Exception:
        pass  # an unknown provider or model is reported by the first answer itself


def missing_credentials(settings: LLMSettings) -> list[str]:
    """Environment variables the model's provider needs that are not set (empty if unknown)."""
    if settings.model == DUMMY_MODEL or settings.api_key or settings.api_base:
        return []
    if openai_road(settings):
        return [] if _openai_key(settings) else ["OPENAI_API_KEY"]
    return missing_credentials_of(load_litellm(), settings)


# When litellm's table does not know a model's context window (local and self-hosted models),
# assume a small one: trimming too much history is better than a failed request.
FALLBACK_CONTEXT_TOKENS = 8192
# Room kept for the answer when llm.max_tokens leaves its length to the provider.
ANSWER_RESERVE_TOKENS = 1024


def input_token_limit(settings: LLMSettings) -> int:
    """Tokens the model accepts as input, less room for the answer (litellm's table, unimported)."""
    facts = model_facts(settings.model)
    window = facts.max_input_tokens if facts is not None and facts.max_input_tokens else FALLBACK_CONTEXT_TOKENS
    reserve = settings.max_tokens or ANSWER_RESERVE_TOKENS
    return max(window - reserve, 0)


def credentials_problem(settings: LLMSettings) -> str | None:
    """What to set when the model's provider has no credentials here, else None."""
    missing = missing_credentials(settings)
    if not missing:
        return None
    return f"no credentials for {settings.model}: set {', '.join(missing)} (or llm.api_key), or try --dummy-mode"


class AnswerStream:
    """One model call's answer piece by piece (`async for`); once it has finished, `usage` is
    set, and `tool_calls` holds the calls it asked for (`AskedCall`), if it was offered tools."""

    def __init__(
        self,
        messages: list[Message],
        settings: LLMSettings,
        *,
        dummy: bool = False,
        tools: list[dict[str, Any]] | None = None,
    ) -> None:
        self.messages = messages
        self.settings = settings
        self.dummy = dummy
        self.tools = tools
        self.usage: Usage | None = None
        self.tool_calls: list[AskedCall] = []

    def __aiter__(self) -> AsyncIterator[str]:
        return self._pieces()

    async def _pieces(self) -> AsyncIterator[str]:
        if self.dummy:
            words = dummy_reply(self.messages).split(" ")
            for index, word in enumerate(words):
                yield word if index == len(words) - 1 else word + " "
            self.usage = Usage()
            return
        calls: CallAssembler | None = None  # made when the first piece of a tool call comes
        try:
            async for chunk in _chunks(self.messages, self.settings, self.tools):
                choices = chunk_field(chunk, "choices")
                delta = chunk_field(choices[0], "delta") if choices else None
                piece = chunk_field(delta, "content")
                if piece:
                    yield piece
                if chunk_field(delta, "tool_calls"):
                    calls = calls or CallAssembler()
                    calls.feed(chunk_field(delta, "tool_calls"))
                if chunk_field(chunk, "usage"):
                    self.usage = _priced(chunk_field(chunk, "usage"), self.settings.model)
        except Exception as exc:
            if self.tools:
                said = redact(_first_line(exc), secrets=[self.settings.api_key])
                tool = refused_tool(str(exc), getattr(exc, "param", None), self.tools)
                if tool is not None:  # before a refusal: a schema error may say what is "not supported"
                    raise ToolRejected(said, tool) from exc
                if refuses_tools(str(exc)):
                    raise ToolsRefused(f"{self.settings.model} does not take tools: {said}") from exc
            raise provider_error(exc, self.settings) from exc
        self.tool_calls = calls.calls() if calls is not None else []


async def _chunks(
    messages: list[Message], settings: LLMSettings, tools: list[dict[str, Any]] | None
) -> AsyncIterator[Any]:
    """The streamed answer's chunks, OpenAI's shape, on either road (dicts on the OpenAI road,
    litellm's objects on the other). include_usage asks for token counts in the last chunk."""
    args = _call_args(messages, settings, tools)
    if openai_road(settings):
        body = {key: value for key, value in args.items() if key not in ("api_base", "api_key", "timeout")}
        body["model"] = settings.model.removeprefix("openai/")
        body["stream_options"] = {"include_usage": True}
        async for chunk in stream_chat(body, base_url=settings.api_base, api_key=_openai_key(settings),
                                       timeout=settings.timeout_seconds):
            yield chunk
        return
    litellm = load_litellm()
    if settings.api_base and not settings.api_key and missing_credentials_of(litellm, settings):
        args["api_key"] = PLACEHOLDER_KEY  # a local server behind litellm: it takes any key
    response = await litellm.acompletion(stream=True, stream_options={"include_usage": True}, **args)
    async for chunk in response:
        yield chunk


def missing_credentials_of(litellm: Any, settings: LLMSettings) -> list[str]:
    """What litellm says the provider needs and is not set (empty when it cannot tell)."""
    try:
        return list(litellm.validate_environment(model=settings.model).get("missing_keys") or [])
    except Exception:
        return []


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _kind(exc: Exception) -> str:
    """A failure's name as litellm and the OpenAI SDK give it (`RateLimitError`, ...)."""
    return str(getattr(exc, "kind", None) or type(exc).__name__)


def stream(
    messages: list[Message], settings: LLMSettings, *, dummy: bool = False, tools: list[dict[str, Any]] | None = None
) -> AnswerStream:
    """The answer to `messages`, to iterate with `async for`; provider failures become ProviderError
    (ToolsRefused when it was offered `tools` and says it cannot take them)."""
    return AnswerStream(messages, settings, dummy=dummy, tools=tools)


def model_calls_tools(settings: LLMSettings) -> bool | None:
    """Whether litellm's table says the model calls tools: True, False, or None when it does not
    know the model (a local server's, a new one): then the model is offered tools, and a refusal
    is remembered (ocat.tools.support)."""
    if settings.model == DUMMY_MODEL:
        return False
    facts = model_facts(settings.model)
    return None if facts is None else facts.supports_function_calling


def _priced(usage: Any, model: str) -> Usage:
    """Tokens from the provider's count, and the cost from litellm's table (None when it has no price)."""
    prompt = int(chunk_field(usage, "prompt_tokens") or 0)  # a dict on the OpenAI road, an object on litellm's
    completion = int(chunk_field(usage, "completion_tokens") or 0)
    facts = model_facts(model)
    cost: float | None = None
    if facts is not None and facts.input_cost_per_token is not None and facts.output_cost_per_token is not None:
        cost = prompt * facts.input_cost_per_token + completion * facts.output_cost_per_token
    return Usage(prompt_tokens=prompt, completion_tokens=completion, cost_usd=cost)


def provider_error(exc: Exception, settings: LLMSettings) -> ProviderError:
    """A one-line, actionable message for a provider failure, with credentials masked.

    Every face shows provider failures through this (the chat, the line mode, `--ask`), and a
    provider's error body can echo the key it was sent, or the address with its password.
    """
    return ProviderError(redact(_describe_failure(exc, settings), secrets=[settings.api_key]))


def _about_credentials(message: str) -> bool:
    """Whether a provider's error is about a missing or wrong key."""
    lowered = message.lower()
    return any(words in lowered for words in ("credential", "api_key", "api key", "auth token"))


def _describe_failure(exc: Exception, settings: LLMSettings) -> str:
    name = _kind(exc)
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else name
    model = settings.model
    # A missing key comes as AuthenticationError from some providers and as InternalServerError
    # ("Missing credentials ... set the OPENAI_API_KEY environment variable") from others:
    # either way, say which variable to set, as `credentials_problem` does before a turn.
    if name == "AuthenticationError" or _about_credentials(str(exc)):
        missing = missing_credentials(settings)
        if missing:
            return f"no credentials for {model}: set {', '.join(missing)} (or llm.api_key), or try --dummy-mode"
    if name == "AuthenticationError":
        return f"authentication failed for {model}. Check llm.api_key."
    if name == "RateLimitError":
        return f"rate limited by the provider of {model}; try again shortly"
    if name in ("Timeout", "APITimeoutError") or "timed out" in detail.lower():
        return f"{model} did not answer within {settings.timeout_seconds:g} s (llm.timeout_seconds)"
    if name in ("APIConnectionError", "ServiceUnavailableError", "InternalServerError"):
        where = settings.api_base or "the provider"
        return f"cannot reach {where} for {model}: {detail}"
    if name == "NotFoundError" or "LLM Provider NOT provided" in detail:
        return f"unknown model {model!r}: {detail}"
    return f"{model} failed ({name}): {detail}"


# -- what litellm knows of a provider's models (ocat.llm.model_list lists them) ------------------------


def _provider_of(model: str) -> str:
    """The litellm provider a model name belongs to ("openai" for a bare gpt-4o), or ""."""
    if "/" in model:
        return model.split("/", 1)[0]
    try:
        return str(load_litellm().get_llm_provider(model)[1])
    except Exception:
        return ""


def known_chat_models(model: str) -> tuple[str, tuple[str, ...]]:
    """litellm's offline list of the chat models of `model`'s provider: (provider, names, each in
    the form `model` has); no names when litellm has no list for it (it may not know them all)."""
    litellm = load_litellm()
    provider = _provider_of(model)
    listed = getattr(litellm, "models_by_provider", {}).get(provider) if provider else None
    if not listed:
        return provider, ()
    prefix = model.split("/", 1)[0] if "/" in model else ""
    costs = getattr(litellm, "model_cost", {})
    chat = [name for name in listed
            if (costs.get(name) or costs.get(f"{provider}/{name}") or {}).get("mode", "chat") == "chat"]
    return provider, tuple(sorted({n if not prefix or n.startswith(prefix + "/") else f"{prefix}/{n}" for n in chat}))
