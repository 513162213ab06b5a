"""The road to OpenAI and OpenAI-compatible servers: one streamed chat completion over httpx.

Why not the `openai` SDK, or litellm: importing litellm costs seconds and the SDK more than a
second on a 2-core machine (its types are hundreds of pydantic models), while this road needs
one POST and a stream of server-sent events; httpx is loaded anyway (ChromaDB uses it). Measured
in docs/PERFORMANCE.md ("--ask against simonw/llm"). The chunks are OpenAI's, as dicts; the
errors carry the names litellm and the SDK give them, so ocat.llm words them the same way.
`chunk_field` reads a chunk of OpenAI's shape on either road (a dict here, litellm's object there).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any, AsyncIterator

if TYPE_CHECKING:
    import ssl

OPENAI_BASE = "https://api.openai.com/v1"


class OpenAICompatibleError(Exception):
    """A failure of this road; `kind` is the name litellm and the SDK give it (`AuthenticationError`,
    `RateLimitError`, `BadRequestError`, `NotFoundError`, `InternalServerError`,
    `APIConnectionError`, `APITimeoutError`), which ocat.llm words."""

    def __init__(self, kind: str, message: str, status: int | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        # The request's part the error is about (OpenAI's `param`: `tools[2].function.parameters`).
        self.param = param


# HTTP statuses as the names their errors have in litellm and the SDK.
_STATUS_NAMES = {400: "BadRequestError", 401: "AuthenticationError", 403: "PermissionDeniedError",
                 404: "NotFoundError", 408: "APITimeoutError", 422: "UnprocessableEntityError",
                 429: "RateLimitError"}


async def stream_chat(body: dict[str, Any], *, base_url: str | None, api_key: str | None,
                      timeout: float) -> AsyncIterator[dict[str, Any]]:
    """POST `body` (with `stream: true`) to `{base_url}/chat/completions` and yield each chunk
    of the answer as a dict, until `[DONE]`. `timeout` bounds the connection, the wait for the
    answer to start and each wait between its pieces."""
    import httpx

    url = (base_url or OPENAI_BASE).rstrip("/") + "/chat/completions"
    headers = {"Accept": "text/event-stream", "Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout), verify=_tls()) as client:
            async with client.stream("POST", url, headers=headers, json={**body, "stream": True}) as response:
                if response.status_code >= 400:
                    raise _http_error(response.status_code, (await response.aread()).decode("utf-8", "replace"))
                async for line in response.aiter_lines():
                    chunk = _event(line)
                    if chunk is _DONE:
                        return
                    if chunk is not None:
                        yield chunk
    except httpx.TimeoutException as exc:
        raise OpenAICompatibleError("APITimeoutError", f"the request timed out ({type(exc).__name__})") from exc
    except httpx.HTTPError as exc:
        raise OpenAICompatibleError("APIConnectionError", f"Connection error: {exc or type(exc).__name__}") from exc


@lru_cache(maxsize=1)
def _tls() -> ssl.SSLContext:
    """httpx's own default TLS context (certifi's CAs, or SSL_CERT_FILE / SSL_CERT_DIR), made once
    per process: every model call made a client, and each client loaded the CAs again (~50 ms of
    CPU a call, ~140 ms the first)."""
    import httpx

    return httpx.create_ssl_context()


_DONE: Any = object()


def _event(line: str) -> Any:
    """One line of the event stream: a chunk (a dict), `_DONE`, or None for anything else
    (comments, blank lines, other fields); an error sent as an event raises it."""
    if not line.startswith("data:"):
        return None
    data = line[5:].strip()
    if data == "[DONE]":
        return _DONE
    try:
        chunk = json.loads(data)
    except ValueError:
        return None
    if isinstance(chunk, dict) and isinstance(chunk.get("error"), dict):
        raise OpenAICompatibleError("InternalServerError", _message(chunk))
    return chunk if isinstance(chunk, dict) else None


def _http_error(status: int, text: str) -> OpenAICompatibleError:
    param = None
    try:
        body = json.loads(text)
        message = _message(body)
        error = body.get("error") if isinstance(body, dict) else None
        param = str(error["param"]) if isinstance(error, dict) and error.get("param") else None
    except ValueError:
        message = text.strip()[:300] or f"HTTP {status}"
    kind = _STATUS_NAMES.get(status, "InternalServerError" if status >= 500 else "APIError")
    return OpenAICompatibleError(kind, f"Error code: {status} - {message}", status, param)


def _message(body: Any) -> str:
    """The message of an OpenAI-style error body (`{"error": {"message": ...}}`), else the body."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return json.dumps(body)[:300]


def chunk_field(value: Any, name: str) -> Any:
    """A field of a streamed chunk in OpenAI's shape (or of a delta, a call), whether it is a dict
    (this road) or an object (litellm's)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)
