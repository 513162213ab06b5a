"""In-process fakes: a deterministic embedder and an OpenAI-compatible chat server on loopback,
so tests never load a model they do not need and LLM calls never leave the machine."""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator, Sequence


class FakeEmbedder:
    """Deterministic bag-of-words vectors: texts sharing words are close. For fast unit tests."""

    def __init__(self, name: str = "fake-embedder", dimensions: int = 64) -> None:
        self.name = name
        self.dimensions = dimensions
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        vectors = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.sha256(word.encode()).digest()
                vector[int.from_bytes(digest[:4], "big") % self.dimensions] += 1.0
            norm = math.sqrt(sum(x * x for x in vector)) or 1.0
            vectors.append([x / norm for x in vector] if any(vector) else [1.0] + [0.0] * (self.dimensions - 1))
        return vectors


@dataclass
class FakeLLMServer:
    """A local OpenAI-compatible chat endpoint. Replies with `reply`, or fails with `status`."""

    reply: str = "Hello from the fake model."
    status: int = 200
    # Seconds between streamed pieces (to test cancelling an answer mid-stream).
    delay: float = 0.0
    # Seconds the server says nothing at all before answering (a provider that does not answer:
    # a streamed answer that keeps coming, however slowly, is an answer).
    stall: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    # The headers of each request (to check which API key a client sent).
    headers: list[dict[str, str]] = field(default_factory=list)
    port: int = 0
    # What GET /v1/models lists (the ids of an OpenAI-style model list).
    models: tuple[str, ...] = ("fake-model", "fake-large")
    # What the next requests answer, one step each, before `reply` takes over: a text, or the
    # tool calls of one step ([{"name": ..., "arguments": {...} or raw text}, ...]), streamed
    # the way providers stream them (ids first, the arguments in pieces, several per step).
    script: list[str | list[dict[str, Any]]] = field(default_factory=list)
    # Answer a request that offers tools with HTTP 400, as a server that cannot call them does.
    refuse_tools: bool = False
    # Answer a request that offers this tool with OpenAI's HTTP 400 for a schema it cannot read.
    refuse_tool: str = ""
    # Answer a request that offers tools with HTTP 400 and this error message (the provider's words).
    error_with_tools: str = ""

    def next_step(self, body: dict[str, Any]) -> str | list[dict[str, Any]]:
        """What to answer `body` with: the next scripted step (tool calls only when tools are offered)."""
        while self.script:
            step = self.script.pop(0)
            if isinstance(step, str) or body.get("tools"):
                return step
        return self.reply

    @property
    def api_base(self) -> str:
        """The base URL a client's `llm.api_base` names."""
        return f"http://127.0.0.1:{self.port}/v1"


def _canonical(headers: Any) -> dict[str, str]:
    """Header names in one spelling (`Authorization`): HTTP names are case-insensitive, and
    openai 3.x sends them in lower case where 2.x capitalised them."""
    return {name.title(): value for name, value in headers}


def llm_handler(server_state: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    """The request handler class of a fake LLM server that replies as `server_state` says."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:
            server_state.headers.append(_canonical(self.headers.items()))
            if self.path.rstrip("/") != "/v1/models":
                self._send(404, "application/json", b'{"error": {"message": "not found"}}')
                return
            listed = {"object": "list", "data": [{"id": m, "object": "model"} for m in server_state.models]}
            self._send(200, "application/json", json.dumps(listed).encode())

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            server_state.requests.append(body)
            server_state.headers.append(_canonical(self.headers.items()))
            if server_state.stall:
                time.sleep(server_state.stall)
            if server_state.status != 200:
                failure = json.dumps({"error": {"message": "fake failure", "type": "error", "code": server_state.status}})
                self._send(server_state.status, "application/json", failure.encode())
                return
            offered = [tool["function"]["name"] for tool in body.get("tools") or []]
            if server_state.refuse_tool in offered:
                index = offered.index(server_state.refuse_tool)
                refusal = {"error": {"message": f"Invalid schema for function '{server_state.refuse_tool}': In "
                                                "context=(), object schema missing properties.",
                                     "type": "invalid_request_error", "param": f"tools[{index}].function.parameters",
                                     "code": "invalid_function_parameters"}}
                self._send(400, "application/json", json.dumps(refusal).encode())
                return
            if server_state.error_with_tools and offered:
                failure = {"error": {"message": server_state.error_with_tools, "type": "invalid_request_error",
                                     "param": "messages", "code": None}}
                self._send(400, "application/json", json.dumps(failure).encode())
                return
            if server_state.refuse_tools and body.get("tools"):
                refusal = {"error": {"message": "tools is not supported for this model", "type": "invalid_request_error",
                                     "param": "tools", "code": None}}
                self._send(400, "application/json", json.dumps(refusal).encode())
                return
            usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
            step = server_state.next_step(body) if body.get("stream") else server_state.reply
            if body.get("stream"):
                events = []
                deltas: list[dict[str, Any]] = []
                if isinstance(step, str):
                    deltas = [{"content": step[i : i + 5]} for i in range(0, len(step), 5)]
                else:
                    deltas = _tool_call_deltas(step, len(server_state.requests))
                for delta in deltas:
                    chunk = {
                        "id": "c1",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": body.get("model"),
                        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                    }
                    events.append(f"data: {json.dumps(chunk)}\n\n")
                final = {
                    "id": "c1",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": body.get("model"),
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "stop" if isinstance(step, str) else "tool_calls"}],
                    "usage": usage,
                }
                events.append(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n")
                if server_state.delay:
                    self._trickle(events, server_state.delay)
                else:
                    self._send(200, "text/event-stream", "".join(events).encode())
                return
            if server_state.delay:
                time.sleep(server_state.delay * 10)  # a slow whole answer (to kill a client while it waits)
            payload = {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model"),
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": server_state.reply}, "finish_reason": "stop"}
                ],
                "usage": usage,
            }
            self._send(200, "application/json", json.dumps(payload).encode())

        def _trickle(self, events: list[str], delay: float) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for event in events:
                    self.wfile.write(event.encode())
                    self.wfile.flush()
                    time.sleep(delay)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client cancelled

        def _send(self, status: int, content_type: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _tool_call_deltas(calls: list[dict[str, Any]], request: int) -> list[dict[str, Any]]:
    """Tool calls as OpenAI streams them: for each call its index, id and name first, then its
    arguments in pieces of 7 characters; the calls of one step one after another."""
    deltas: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        arguments = call.get("arguments", {})
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        deltas.append({"role": "assistant", "content": None, "tool_calls": [
            {"index": index, "id": f"call_{request}_{index}", "type": "function",
             "function": {"name": call["name"], "arguments": ""}}]})
        for start in range(0, len(text), 7):
            deltas.append({"tool_calls": [{"index": index, "function": {"arguments": text[start : start + 7]}}]})
    return deltas


@contextmanager
def serving(state: FakeLLMServer) -> Iterator[FakeLLMServer]:
    """Serve `state` on a free loopback port until the block ends."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), llm_handler(state))
    state.port = httpd.server_address[1]
    # A short poll: shutdown() waits up to one poll interval (0.5 s by default), and 40 tests of
    # the quick loop start a server; at 0.5 s it was a third of test_tool_turn's time.
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


class SameCalibration:
    """A calibration that maps a fused score to itself, so that lifts read as they are made."""

    def relevance_of(self, z: float) -> float:
        return z
