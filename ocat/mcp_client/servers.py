"""The configured MCP servers, live: each one's client (the official SDK) on one asyncio loop in
a thread of its own, so any face (Textual's loop, the line mode, `--ask`) calls a tool with a
plain blocking call from the worker thread the turn runs tools in.

Servers start side by side, each in the background and each on its own: one server's state
never depends on another's. A server is never stopped for being slow to start (a first-run
`npx -y` or `uvx` downloads the package first, and npm killed mid-install damages its cache):
`start_timeout` is how long a turn waits for it, counted from its start, and its tools are
offered from the first turn after it is ready. A server that cannot start, crashes or hangs in
a call costs its own tools and one line, never the turn: `timeout` bounds a call (the SDK sends
MCP's cancellation when a call is given up, as it does when Esc cancels it). A crashed server
starts again on its next use, at most once a turn. No descendant of a server outlives ocat
(ocat.mcp_client.server_processes): each server's process group is recorded as soon as it is
spawned; stopping a server takes its family first (its process group, its session, their
descendants), stops it through the SDK (stdin closed, then the SDK's SIGTERM of its group and,
after a grace, SIGKILL), then ends whatever of that family is left; at exit, on SIGTERM and when
the full-screen chat leaves at once, every recorded group's family is ended as a last resort.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import threading
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterable, Sequence

from ocat.config.mcp_servers import McpServerConfig
from ocat.mcp_client.server_output import StrayOutput, keep_sdk_log
from ocat.mcp_client.server_processes import (children, end, end_at_exit, family, kill_on_sigterm, own_group,
                                              record_group, running, writes_errors_to)
from ocat.mcp_client.server_status import CallFailed, ServerState, ServerStatus
from ocat.mcp_client.server_tool import ServerTool, qualified_name, result_text, tools_of
from ocat.text.redact import redact

__all__ = ["CallFailed", "McpServers", "ServerState", "ServerStatus", "ServerTool", "qualified_name", "result_text"]

log = logging.getLogger(__name__)

# JSON-RPC's code for a connection that closed under a request (mcp_types.CONNECTION_CLOSED).
_CONNECTION_CLOSED = -32000


# Told each tool list a server gives: at its start, and again after `notifications/tools/list_changed`.
ToolsHeard = Callable[[McpServerConfig, "tuple[ServerTool, ...]"], None]


class _Server:
    """One server's life on the loop: start, serve calls, stop (or crash and start again)."""

    def __init__(self, config: McpServerConfig, log_dir: Path, on_tools: ToolsHeard | None = None) -> None:
        self.config = config
        self.on_tools = on_tools
        self.relisting: set[asyncio.Task[None]] = set()
        self.log_dir = log_dir
        self.state = ServerState.STOPPED
        self.error: str | None = None
        self.tools: tuple[ServerTool, ...] = ()
        self.client: Any = None
        self.task: asyncio.Task[None] | None = None
        self.stopping: asyncio.Event | None = None
        # Set (from the loop) when the server is ready or failed; waited for from any thread.
        self.settled = threading.Event()
        self.began = 0.0  # time.monotonic() of the last start: a turn waits until began + start_timeout
        self.launched = False  # McpServers.start has started it (once; a crash's restart is `call`'s)
        self.pids: set[int] = set()
        self.stray = StrayOutput(log_dir / f"{config.name}.log")

    def mark_starting(self) -> None:
        """Starting from now (said in the caller's thread, so a wait that follows sees it)."""
        self.state, self.error, self.began = ServerState.STARTING, None, time.monotonic()
        self.settled.clear()

    async def start(self) -> None:
        """Start the server in the background (returns at once): no deadline stops it, however
        long it takes; its state says when it is ready or failed."""
        if self.task is not None and not self.task.done():
            return
        if self.state is not ServerState.STARTING:
            self.mark_starting()
        self.stopping = asyncio.Event()
        self.task = asyncio.create_task(self._live())

    async def _live(self) -> None:
        from mcp import Client

        assert self.stopping is not None
        try:
            async with contextlib.AsyncExitStack() as stack:
                self.client = await stack.enter_async_context(
                    Client(self._transport(stack), mode="legacy", logging_callback=_ignore_log,
                           message_handler=self._on_message))
                await self._list()
                self.state = ServerState.READY
                self.settled.set()
                await self.stopping.wait()
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # the server's own failure: its state, never the chat's
            self.fail(_said(exc))
        finally:
            self.client = None
            if self.state in (ServerState.STARTING, ServerState.READY):
                self.state = ServerState.STOPPED
            self.settled.set()

    @contextlib.asynccontextmanager
    async def _recording(self, transport: Any) -> AsyncIterator[Any]:
        """`transport`, with the server's process group recorded the moment it is spawned (so a
        server still starting is ended at exit too)."""
        before = children()
        async with transport as streams:
            started = {pid for pid in children() - before if own_group(pid)}
            # Servers start side by side: this one's is the child whose stderr is its log.
            mine = {pid for pid in started if writes_errors_to(pid, self.log_dir / f"{self.config.name}.log")}
            for group in mine:
                record_group(group)  # ended at exit even if its leader has gone by then
            self.pids |= mine
            yield streams

    async def _list(self) -> None:
        listed = await self.client.list_tools()
        self.tools = tools_of(self.config.name, listed.tools)
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
        return self._recording(stdio_client(params, errlog=errlog))

    def fail(self, why: str) -> None:
        """The server is off, and why (its task, if any, is stopped)."""
        self.state, self.error, self.tools = ServerState.FAILED, why, ()
        if self.task is not None and not self.task.done():
            self.task.cancel()

    async def stop(self) -> None:
        """Stop the server, then end what is left of its family (a child the server left behind
        when it exited on stdin EOF, one that ignored SIGTERM)."""
        kin = family(self.pids)  # before the stop: a descendant is found through its parent only while it lives
        end_at_exit(kin)
        starting = self.state is ServerState.STARTING
        if self.stopping is not None:
            self.stopping.set()
        if self.task is not None:
            # A server still starting cannot be asked to stop (it has not answered yet): its
            # task is cancelled at once, and the SDK closes its stdin, then SIGTERMs its group and
            # gives it a grace before SIGKILL (npm killed mid-install damages its cache).
            if not starting:
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(self.task), 5)
            if not self.task.done():
                self.task.cancel()
            if starting:  # the SDK's stop: up to 0.5 s + 2 s + 2 s
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(self.task), 6)
        await asyncio.to_thread(end, self.pids, kin)
        if self.state is not ServerState.FAILED:
            self.state = ServerState.STOPPED
        self.settled.set()

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """The server's result for one call (raises CallFailed when it has none)."""
        client = self.client
        if client is None or self.state is not ServerState.READY:
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
                self.state, self.error = ServerState.CRASHED, _said(exc)
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
        self._inflight: set[concurrent.futures.Future[Any]] = set()
        self._lock = threading.Lock()
        self._closed = False
        # Set here: a chat builds this in the main thread, where handlers are set.
        kill_on_sigterm()

    def start(self, only: Iterable[str] | None = None) -> None:
        """Start the servers named in `only` (all of them when None), each in the background and
        each on its own; returns at once. A server already started (starting, ready, failed or
        crashed) is left as it is; a name that is not a server's is ignored."""
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
            names = list(self.servers) if only is None else [name for name in only if name in self.servers]
            for name in names:
                server = self.servers[name]
                if server.launched:
                    continue
                server.launched = True
                server.mark_starting()
                asyncio.run_coroutine_threadsafe(server.start(), self._loop)

    def wait_for(self, name: str, timeout: float) -> ServerStatus:
        """Wait up to `timeout` seconds for the server `name` (started now if it was not) to be
        ready or failed, and give its status; a server still starting is never stopped here."""
        server = self.servers[name]  # KeyError: not a configured server
        self.start([name])
        server.settled.wait(max(0.0, timeout))
        return _status(server)

    def wait(self) -> None:
        """Wait, for a turn, for the servers still starting: each until its `start_timeout` has
        passed since it started (a later turn does not wait for it again); those still starting
        then go on in the background."""
        for name in self.servers:
            self.wait_turn(name)

    def wait_turn(self, name: str) -> ServerStatus:
        """Wait, for a turn, for the server `name` (started now if it was not) until its
        `start_timeout` has passed since it started, and give its status; one still starting
        then goes on in the background."""
        server = self.servers[name]  # KeyError: not a configured server
        self.start([name])
        if server.state is ServerState.STARTING:
            server.settled.wait(max(0.0, server.began + server.config.start_timeout - time.monotonic()))
        return _status(server)

    def status(self, name: str) -> ServerStatus:
        """The server `name`'s status now (starting nothing)."""
        return _status(self.servers[name])

    def wait_all(self, ceiling: float, progress: Callable[[list[str], float], None], every: float = 5.0) -> None:
        """Wait until every server is ready or failed, up to `ceiling` seconds (`--list-tools`,
        which doubles as a way to prepare them); every `every` seconds while some are still
        starting, `progress(their names, seconds so far)`."""
        self.start()
        began = time.monotonic()
        while True:
            waiting = [s for s in self.servers.values() if s.state is ServerState.STARTING]
            spent = time.monotonic() - began
            if not waiting or spent >= ceiling:
                return
            if not waiting[0].settled.wait(min(every, ceiling - spent)):
                still = [s.config.name for s in self.servers.values() if s.state is ServerState.STARTING]
                if still:
                    progress(still, time.monotonic() - began)

    def statuses(self) -> list[ServerStatus]:
        """Each server's state, tools and last error, in config order."""
        return [_status(server) for server in self.servers.values()]

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
        if live.state in (ServerState.CRASHED, ServerState.FAILED) and server not in restarted:
            restarted.add(server)
            self._run(live.stop(), 20)
            live.mark_starting()
            self._run(live.start(), 10)
        if live.state is ServerState.STARTING:  # a restart, or a call before the server is ready
            self.wait_for(server, max(0.0, live.began + live.config.start_timeout - time.monotonic()))
            if live.state is ServerState.STARTING:
                raise CallFailed(f"the server {server} is still starting; its tools come when it is ready")
        return self._run(live.call(tool, arguments), live.config.timeout + 10)

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


def _status(server: _Server) -> ServerStatus:
    return ServerStatus(server.config.name, server.state, server.tools, server.error, server.config.describe(),
                        server.stray.count, server.stray.log)


async def _ignore_log(params: Any) -> None:
    """A server's log notifications (a flood of them, even) are not the chat's business."""


def _said(exc: BaseException) -> str:
    """An exception (or an exception group's first) as one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return redact(text)[:300]
