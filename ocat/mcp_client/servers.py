"""The configured MCP servers, live: each one's client (the official SDK) on one asyncio loop in
a thread of its own, so any face (Textual's loop, the line mode, `--ask`) calls a tool with a
plain blocking call from the worker thread the turn runs tools in.

A server that cannot start, hangs at start, crashes or hangs in a call costs its own tools and
one line, never the turn: `start_timeout` bounds the start, `timeout` a call (the SDK sends
MCP's cancellation when a call is given up, as it does when Esc cancels it). A crashed server
starts again on its next use, at most once a turn. No descendant of a server outlives ocat
(ocat.mcp_client.server_processes): stopping a server takes its family first (its process group,
its session, their descendants), stops it through the SDK (stdin closed, then the SDK's kill of
its group while it lives), then ends whatever of that family is left, whether or not the server
itself has exited; at exit, on SIGTERM and when the full-screen chat leaves at once, every
recorded group's family is ended as a last resort.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ocat.errors import OcatError
from ocat.mcp_client.config import McpServerConfig
from ocat.mcp_client.results import result_text  # noqa: F401 - where callers find it
from ocat.mcp_client.server_output import StrayOutput, keep_sdk_log
from ocat.mcp_client.server_processes import (children, end, family, kill_on_sigterm, own_group, record_group,
                                              remember, running, writes_errors_to)
from ocat.text.redact import redact

log = logging.getLogger(__name__)

# Providers' limit on a function's name; a server's tools are named SERVER__TOOL within it.
NAME_LIMIT = 64
_ALLOWED = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


# JSON-RPC's code for a connection that closed under a request (mcp_types.CONNECTION_CLOSED).
_CONNECTION_CLOSED = -32000


class CallFailed(OcatError):
    """A server's tool could not give a result: the server is down, timed out, or said it failed."""


@dataclass(frozen=True)
class ServerTool:
    """One tool of one server, as the model is offered it (`qualified`) and as the server names it."""

    server: str
    name: str
    qualified: str
    description: str
    schema: dict[str, Any]
    read_only: bool


@dataclass(frozen=True)
class ServerStatus:
    """A server as `/tools` and `--list-tools` show it."""

    name: str
    state: str  # starting, ready, failed, crashed, stopped
    tools: tuple[ServerTool, ...]
    error: str | None
    command: str
    # How many lines the server wrote to stdout that were not JSON-RPC (ignored, kept in `log`).
    stray: int = 0
    log: Path | None = None


def qualified_name(server: str, tool: str, taken: set[str]) -> str:
    """`SERVER__TOOL` within providers' limits (`^[a-zA-Z0-9_-]{1,64}$`), unique among `taken`."""
    clean = "".join(ch if ch in _ALLOWED else "_" for ch in f"{server}__{tool}")[:NAME_LIMIT]
    name, number = clean, 2
    while name in taken:
        suffix = f"_{number}"
        name, number = clean[: NAME_LIMIT - len(suffix)] + suffix, number + 1
    return name


# Told each tool list a server gives: at its start, and again after `notifications/tools/list_changed`.
ToolsHeard = Callable[[McpServerConfig, "tuple[ServerTool, ...]"], None]


class _Server:
    """One server's life on the loop: start, serve calls, stop (or crash and start again)."""

    def __init__(self, config: McpServerConfig, log_dir: Path, on_tools: ToolsHeard | None = None) -> None:
        self.config = config
        self.on_tools = on_tools
        self.relisting: set[asyncio.Task[None]] = set()
        self.log_dir = log_dir
        self.state = "stopped"
        self.error: str | None = None
        self.tools: tuple[ServerTool, ...] = ()
        self.client: Any = None
        self.task: asyncio.Task[None] | None = None
        self.stopping: asyncio.Event | None = None
        self.started: asyncio.Event | None = None
        self.pids: set[int] = set()
        self.stray = StrayOutput(log_dir / f"{config.name}.log")

    async def start(self) -> None:
        """Start the server and list its tools, within `start_timeout`; a failure is its state."""
        self.state, self.error = "starting", None
        self.stopping, self.started = asyncio.Event(), asyncio.Event()
        before = children()
        self.task = asyncio.create_task(self._live())
        try:
            await asyncio.wait_for(self.started.wait(), self.config.start_timeout)
        except asyncio.TimeoutError:
            self.fail(f"did not start within {self.config.start_timeout:g} s (start_timeout)")
        started = {pid for pid in children() - before if own_group(pid)}
        for group in started:
            record_group(group)  # ended at exit even if its leader has gone by then
        # Servers start side by side: this one's is the child whose stderr is its log.
        self.pids |= {pid for pid in started if writes_errors_to(pid, self.log_dir / f"{self.config.name}.log")}

    async def _live(self) -> None:
        from mcp import Client

        assert self.stopping is not None and self.started is not None
        try:
            async with contextlib.AsyncExitStack() as stack:
                self.client = await stack.enter_async_context(
                    Client(self._transport(stack), mode="legacy", logging_callback=_ignore_log,
                           message_handler=self._on_message))
                await self._list()
                self.state = "ready"
                self.started.set()
                await self.stopping.wait()
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # the server's own failure: its state, never the chat's
            self.fail(_said(exc))
        finally:
            self.client = None
            self.started.set()
            if self.state in ("starting", "ready"):
                self.state = "stopped"

    async def _list(self) -> None:
        listed = await self.client.list_tools()
        self.tools = _tools_of(self.config.name, listed.tools)
        if self.on_tools is not None:
            with contextlib.suppress(Exception):  # a list not kept (ocat's cache) costs nothing here
                self.on_tools(self.config, self.tools)

    async def _on_message(self, message: Any) -> None:
        """A changed tool list is read again, in a task of its own (the SDK reads nothing more
        until this returns); the rest is for `stray`."""
        if getattr(message, "method", None) == "notifications/tools/list_changed" and self.client is not None:
            task = asyncio.create_task(self._relist())
            self.relisting.add(task)
            task.add_done_callback(self.relisting.discard)
        await self.stray.on_message(message)

    async def _relist(self) -> None:
        with contextlib.suppress(Exception):  # the server went away: its next start lists again
            await self._list()

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        config = self.config
        if config.url is not None:
            if not config.headers:
                return config.url
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(config.url, http_client=httpx2.AsyncClient(headers=dict(config.headers)))
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        self.log_dir.mkdir(parents=True, exist_ok=True)
        errlog = stack.enter_context(open(self.log_dir / f"{config.name}.log", "a", encoding="utf-8"))
        env_names = ", ".join(f"{k}=***" for k in config.env) or "none"
        log.info("starting MCP server %s: %s (env: %s)", config.name, redact(config.describe()), env_names)
        # The server's environment: the SDK's short list of safe variables (PATH, HOME, ...) and
        # its entry's `env`; ocat's own keys are not passed on unless the entry names them.
        params = StdioServerParameters(command=config.command or "", args=list(config.args), env=dict(config.env),
                                       cwd=config.cwd)
        return stdio_client(params, errlog=errlog)

    def fail(self, why: str) -> None:
        """The server is off, and why (its task, if any, is stopped)."""
        self.state, self.error, self.tools = "failed", why, ()
        if self.task is not None and not self.task.done():
            self.task.cancel()

    async def stop(self) -> None:
        """Stop the server, then end what is left of its family (a child the server left behind
        when it exited on stdin EOF, one that ignored SIGTERM)."""
        kin = family(self.pids)  # before the stop: a descendant is found through its parent only while it lives
        remember(kin)
        if self.stopping is not None:
            self.stopping.set()
        if self.task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(self.task), 5)
            if not self.task.done():
                self.task.cancel()
        await asyncio.to_thread(end, self.pids, kin)
        if self.state != "failed":
            self.state = "stopped"

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """The server's result for one call (raises CallFailed when it has none)."""
        client = self.client
        if client is None or self.state != "ready":
            raise CallFailed(f"the server {self.config.name} is {self.state}: {self.error or 'not started'}")
        timeout = self.config.timeout
        try:
            return await asyncio.wait_for(client.call_tool(tool, arguments), timeout)
        except asyncio.TimeoutError:
            raise CallFailed(f"{self.config.name}.{tool} did not answer within {timeout:g} s (timeout)") from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # The connection closed (the SDK's CONNECTION_CLOSED), or the process is gone: the
            # process may still be exiting when its pipe closes, so the code decides, not the pid.
            if getattr(getattr(exc, "error", None), "code", None) == _CONNECTION_CLOSED or not self.alive():
                self.state, self.error = "crashed", _said(exc)
                raise CallFailed(f"the server {self.config.name} stopped during the call ({_said(exc)})") from None
            raise CallFailed(f"{self.config.name}.{tool}: {_said(exc)}") from None

    def alive(self) -> bool:
        """Whether the server's task still serves (a crashed server's transport has ended it)."""
        if self.task is None or self.task.done():
            return False
        return not self.pids or any(running(pid) for pid in self.pids)


class McpServers:
    """The chat's MCP servers: started in the background, called from any thread, closed at exit."""

    def __init__(self, configs: Sequence[McpServerConfig], log_dir: Path, on_tools: ToolsHeard | None = None) -> None:
        self.servers = {config.name: _Server(config, log_dir, on_tools) for config in configs}
        self.log_dir = log_dir
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._begun: dict[str, concurrent.futures.Future[None]] = {}  # each server's start
        self._inflight: set[concurrent.futures.Future[Any]] = set()
        self._lock = threading.Lock()
        self._closed = False
        # Set here: a chat builds this in the main thread, where handlers are set.
        kill_on_sigterm()

    def start(self, only: Iterable[str] | None = None) -> None:
        """Start the named servers (every one when None) in the background, each on its own
        (returns at once; `wait_for` waits for one). A server already started is left as it is."""
        with self._lock:
            if not self.servers or self._closed:
                return
            if self._loop is None:
                loop = asyncio.new_event_loop()
                # A daemon: the loop holds no native state, and close() (at exit) ends the servers first.
                self._thread = threading.Thread(target=loop.run_forever, name="ocat-mcp", daemon=True)
                self._thread.start()
                self._loop = loop
                atexit.register(self.close)
                with contextlib.suppress(OSError):
                    self.log_dir.mkdir(parents=True, exist_ok=True)
                    keep_sdk_log(self.log_dir)  # its records of a server's stray output: not over the chat
            for name in self.servers if only is None else only:
                if name in self.servers and name not in self._begun:
                    self._begun[name] = asyncio.run_coroutine_threadsafe(self.servers[name].start(), self._loop)

    def wait(self) -> None:
        """Start every server and wait until each has started or failed (each within its `start_timeout`)."""
        self.start()
        for name, server in self.servers.items():
            self.wait_for(name, server.config.start_timeout + 5)

    def wait_for(self, name: str, timeout: float) -> ServerStatus:
        """The server `name`'s status once it is ready or failed, or when `timeout` has passed
        (at once for a server not started)."""
        begun = self._begun.get(name)
        if begun is not None:
            with contextlib.suppress(concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                begun.result(timeout=timeout)
        return next(status for status in self.statuses() if status.name == name)

    def statuses(self) -> list[ServerStatus]:
        """Each server's state, tools and last error, in config order."""
        return [ServerStatus(s.config.name, s.state, s.tools, s.error, s.config.describe(), s.stray.count, s.stray.log)
                for s in self.servers.values()]

    def tools(self) -> list[ServerTool]:
        """The tools of the servers that are up (a crashed server's, which its next use restarts)."""
        return [tool for s in self.servers.values() for tool in s.tools]  # a failed server has none

    def call(self, server: str, tool: str, arguments: dict[str, Any], *, restarted: set[str]) -> Any:
        """The result of `server`'s `tool` (a CallToolResult); CallFailed when there is none.
        A crashed server is started again first unless it is in `restarted` (the servers this
        turn restarted already), where it is then added."""
        live = self.servers.get(server)
        if live is None or self._loop is None:
            raise CallFailed(f"there is no MCP server {server!r}")
        if live.state in ("crashed", "failed") and server not in restarted:
            restarted.add(server)
            self._run(self._restart(live), live.config.start_timeout + 10)
        return self._run(live.call(tool, arguments), live.config.timeout + 10)

    async def _restart(self, live: _Server) -> None:
        await live.stop()
        await live.start()

    def _run(self, coroutine: Any, timeout: float) -> Any:
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        with self._lock:
            self._inflight.add(future)
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.CancelledError:
            raise CallFailed("cancelled") from None
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise CallFailed("the server did not answer") from None
        finally:
            with self._lock:
                self._inflight.discard(future)

    def cancel_calls(self) -> None:
        """Give up every call under way (Esc): the SDK sends MCP's cancellation to its server."""
        with self._lock:
            running = list(self._inflight)
        for future in running:
            future.cancel()

    def close(self) -> None:
        """Stop every server and the loop; whatever of the servers' families is left is ended."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.cancel_calls()  # a thread waiting for a call's answer is freed at once
        loop = self._loop
        if loop is not None and loop.is_running():
            stopping = asyncio.run_coroutine_threadsafe(self._stop_all(), loop)
            with contextlib.suppress(Exception):
                stopping.result(timeout=12)  # the SDK's stop (up to 5 s), then a family's SIGTERM and SIGKILL
            loop.call_soon_threadsafe(loop.stop)
        end(self.pids())  # a stop that timed out, or a loop that was not running
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)

    async def _stop_all(self) -> None:
        await asyncio.gather(*(server.stop() for server in self.servers.values()), return_exceptions=True)

    def pids(self) -> set[int]:
        """The process groups the servers were started in."""
        return {pid for server in self.servers.values() for pid in server.pids}


def _tools_of(server: str, listed: Sequence[Any]) -> tuple[ServerTool, ...]:
    taken: set[str] = set()
    tools = []
    for tool in listed:
        qualified = qualified_name(server, tool.name, taken)
        taken.add(qualified)
        annotations = getattr(tool, "annotations", None)
        schema = dict(tool.input_schema or {"type": "object", "properties": {}})
        tools.append(ServerTool(server, tool.name, qualified, tool.description or tool.title or tool.name, schema,
                                bool(annotations is not None and annotations.read_only_hint)))
    return tuple(tools)


async def _ignore_log(params: Any) -> None:
    """A server's log notifications (a flood of them, even) are not the chat's business."""


def _said(exc: BaseException) -> str:
    """An exception (or an exception group's first) as one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return redact(text)[:300]
