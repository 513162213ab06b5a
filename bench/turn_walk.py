"""The walk of one chat turn through ocat's files: from Enter in the full-screen chat to the
stored exchange (a thread's first turn; the model calls no tool), as docs/ARCHITECTURE.md counts it.

How it counts: the chat runs under Textual's Pilot on a store with the fake embedder and the
fake OpenAI-compatible server (tests/support/fakes.py). A profile function (sys.setprofile, and
threading.setprofile for the threads the turn starts) sees every Python call; a call is part of the
walk when it runs in the context of the Enter handler (`OcatApp.on_prompt_input_submitted`) or
of what it started (the turn's worker, and the threads `asyncio.to_thread` runs for it: both copy
the context), so Textual's own painting in between is left out. Recording stops when
`SessionMemory.keep` returns (the exchange is stored). Each call into a file of `ocat/` is noted
in call order (a generator resumed counts as a call). The walk's stops are those files, with
memory behind its front door as one stop (`memory`) and the ground (text, config, records,
errors, logs) left out; a file is counted once.

Moves between packages, two ways:
- a hand-off: a stop calling a stop of another package (`ocat/<package>/...`; a module directly
  in `ocat/` is its own package), each (caller, callee) pair once, the caller being the nearest
  ocat code up the stack (through any library between; for a thread's first call, the stop that
  handed it to `asyncio.to_thread`). This is the measure issue 50's goal is read against
  ("at most 20 moves between packages": each hand-off once, as its reviewer counted by reading);
- call by call: two calls in a row, in one thread, into stops of different packages, counted
  every time (so each streamed piece of the answer, relayed window -> turn -> model, is three).

    python bench/turn_walk.py            # the files in call order, then the counts
    python bench/turn_walk.py --quiet    # the counts only

tests/unit/test_turn_walk.py runs it and holds the turn to ARCHITECTURE.md's figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import dataclasses
import os
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, bench/ is first on the path, where a bench named as a module of the standard
# library would stand for it (tests/cli/test_bench_smoke.py refuses such names): the repository's
# root takes its place.
sys.path[:] = [path for path in sys.path if Path(path or ".").resolve() != ROOT / "bench"]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

OCAT = ROOT / "ocat"
_IN_WALK: contextvars.ContextVar[bool] = contextvars.ContextVar("in_walk", default=False)
# The stop that handed work to a thread (`asyncio.to_thread` copies the context into the thread).
_HANDED_BY: contextvars.ContextVar[str | None] = contextvars.ContextVar("handed_by", default=None)


@dataclass
class Walk:
    """The ocat files a turn called into, in call order (consecutive calls in one file once), and
    the same per thread (the turn's steps run in threads of their own: a move is counted within one)."""

    calls: list[str] = field(default_factory=list)
    by_thread: dict[int, list[str]] = field(default_factory=dict)
    # Each (caller's stop, callee's stop) in different packages, once, in the order first made.
    handoffs: dict[tuple[str, str], None] = field(default_factory=dict)
    # Calls count once the walk is armed (what the chat does before, warming up, is not the walk).
    armed: bool = True
    stopped: bool = False

    @property
    def files(self) -> list[str]:
        """Each file once, in the order first visited."""
        return list(dict.fromkeys(self.calls))

    @property
    def packages(self) -> list[str]:
        """Each package once, in the order first visited."""
        return list(dict.fromkeys(package_of(path) for path in self.calls))

    @property
    def moves(self) -> int:
        """Calls in a row, in one thread, whose files lie in different packages."""
        return sum(_moves(calls) for calls in self.by_thread.values())

    @property
    def stop_files(self) -> list[str]:
        """Each of the walk's stops once (see `stops`), in the order first visited."""
        return list(dict.fromkeys(stops(self.calls)))

    @property
    def stop_moves(self) -> int:
        """Moves between packages along the walk's stops, in each thread."""
        return sum(_moves(stops(calls)) for calls in self.by_thread.values())


def _moves(calls: list[str]) -> int:
    shown = [package_of(path) for path in calls]
    return sum(1 for before, after in zip(shown, shown[1:]) if before != after)


# Called from every layer as the standard library is (words, settings, records, errors, the log):
# the walk's stops leave them out.
GROUND = ("text", "config", "records", "errors", "logs")


def stop_of(path: str) -> str | None:
    """The walk's stop a file of ocat belongs to: memory behind its front door is one stop
    (`memory`; docs/ARCHITECTURE.md walks one search inside it), the ground none."""
    if package_of(path) in GROUND:
        return None
    return "memory" if package_of(path) == "memory" else path


def stops(calls: list[str]) -> list[str]:
    """The walk's stops in call order (see `stop_of`); a stop called twice in a row is one."""
    kept: list[str] = []
    for path in calls:
        stop = stop_of(path)
        if stop is not None and (not kept or kept[-1] != stop):
            kept.append(stop)
    return kept


def package_of(path: str) -> str:
    """`ui` for ui/app.py, `memory` for memory/retrieval/rank.py, `repl` for repl.py."""
    parts = Path(path).parts
    return parts[0] if len(parts) > 1 else Path(path).stem


# Where a walk starts (a call) and ends (that function's return): (file of ocat/, function).
ENTER, STORED = ("ui/app.py", "on_prompt_input_submitted"), ("chat/session_memory.py", "keep")
IMPORT = ("cli/dispatch.py", "main")


def _profiler(walk: Walk, lock: threading.Lock, start: tuple[str, str] = ENTER,
              stop: tuple[str, str] = STORED) -> Any:
    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if walk.stopped or not walk.armed or event not in ("call", "return"):
            return
        code = frame.f_code
        if event == "call" and code.co_name == start[1] and code.co_filename.endswith(start[0]):
            _IN_WALK.set(True)  # the start's context, and what it starts, are the walk
        if not _IN_WALK.get():
            return
        filename = code.co_filename
        if event == "return":
            if code.co_name == stop[1] and filename.endswith(stop[0]):
                walk.stopped = True
            return
        if event == "call" and code.co_name == "to_thread" and filename.endswith(os.path.join("asyncio", "threads.py")):
            _HANDED_BY.set(_caller_stop(frame))  # the thread's first call was handed over by this stop
            return
        if not filename.startswith(str(OCAT)) or _on_a_timer(frame) or _importing(frame):
            return
        relative = str(Path(filename).relative_to(OCAT))
        callee = stop_of(relative)
        if callee is not None:
            caller = _caller_stop(frame)
            if caller is None and _in_a_pool_thread(frame):
                caller = _HANDED_BY.get()
            if caller is not None and package_of(caller) != package_of(callee):
                walk.handoffs.setdefault((caller, callee), None)
        with lock:
            if not walk.calls or walk.calls[-1] != relative:
                walk.calls.append(relative)
            mine = walk.by_thread.setdefault(threading.get_ident(), [])
            if not mine or mine[-1] != relative:
                mine.append(relative)

    return profile


def _caller_stop(frame: FrameType) -> str | None:
    """The stop of the nearest ocat code that called `frame` (through any library between), or
    None when the call came from no ocat code (the event loop resuming a task, a thread's start)."""
    caller = frame.f_back
    while caller is not None:
        filename = caller.f_code.co_filename
        if filename.startswith(str(OCAT)):
            stop = stop_of(str(Path(filename).relative_to(OCAT)))
            if stop is not None:
                return stop
        caller = caller.f_back
    return None


def _in_a_pool_thread(frame: FrameType) -> bool:
    """Whether `frame` runs in a thread of the pool `asyncio.to_thread` hands work to (not an event
    loop's thread, such as the MCP servers', whose coroutines ocat code hands over itself)."""
    caller: FrameType | None = frame
    while caller is not None:
        if caller.f_code.co_filename.endswith(os.path.join("concurrent", "futures", "thread.py")):
            return True
        caller = caller.f_back
    return False


def _importing(frame: FrameType) -> bool:
    """Whether this call runs as a module is imported (its body, its classes, its decorators):
    loading, not the walk."""
    caller: FrameType | None = frame
    while caller is not None:
        if caller.f_code.co_filename.startswith("<frozen importlib"):
            return True
        caller = caller.f_back
    return False


def _on_a_timer(frame: FrameType) -> bool:
    """Whether a Textual timer called this (the status line's clock ticking while the turn runs)."""
    caller: FrameType | None = frame.f_back
    while caller is not None:
        if caller.f_code.co_filename.endswith("textual/timer.py"):
            return True
        caller = caller.f_back
    return False


# What the model asks for on the measured turn, by walk (tests/support/fakes.py's script).
SCRIPTS: dict[str, list[Any]] = {
    "turn": [],
    "tool": [[{"name": "search_memory", "arguments": {"query": "kitchen floor tiles"}}]],
    "mcp": [[{"name": "fx__write_note", "arguments": {"text": "slate tiles for the kitchen"}}]],
}


async def _drive(walk: Walk, kind: str, folder: Path) -> None:
    from ocat.chat.session import ChatSession
    from ocat.config.loading import load_settings
    from ocat.records import Exchange
    from ocat.ui.app import OcatApp
    from ocat.ui.consent import ask_in_window
    from tests.support.fakes import FakeLLMServer, serving

    with serving(FakeLLMServer()) as server:
        settings = load_settings(overrides={
            "llm.model": "openai/fake-model", "llm.api_base": server.api_base, "llm.api_key": "sk-test"})
        if kind == "mcp":
            from ocat.config.mcp_servers import parse_servers
            from tests.unit.test_mcp_client import fixture_entry

            servers = parse_servers({"fx": fixture_entry(folder)}, "walk", folder)
            settings = dataclasses.replace(settings, mcp_servers=servers)
        session = ChatSession(settings, ask=ask_in_window)
        app = OcatApp(session, serve=False)
        profile = _profiler(walk, threading.Lock())
        walk.armed = False
        if kind == "mcp":  # the MCP servers' loop thread starts with the window: it must carry the profile
            threading.setprofile(profile)
        try:
            async with app.run_test() as pilot:
                await app.workers.wait_for_complete()  # memory, the model check, the slash commands: not the walk
                store = session.session_memory.store
                store.add_exchanges([
                    Exchange(user_prompt=f"Which tiles for the kitchen floor, take {n}?",
                             assistant_response="Grey slate.", thread_id=f"kitchen-{n}", session_id="s",
                             exchange_id=f"k{n}") for n in range(5)])
                # A turn first, in a thread of its own, so that what loads with the first turn of a
                # process (the modules, the memory tools) is not counted; then a new thread's first turn.
                await _send(app, pilot, "hello")
                app.session.new_thread()
                # The threads `asyncio.to_thread` runs in are made afresh, so the profile reaches them.
                asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor())
                server.script = list(SCRIPTS[kind])
                threading.setprofile(profile)
                sys.setprofile(profile)
                walk.armed = True
                await _send(app, pilot, "which tiles did we pick for the kitchen?", consent="y" if kind == "mcp" else "")
                sys.setprofile(None)
                await pilot.pause(0.2)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]


async def _send(app: Any, pilot: Any, text: str, consent: str = "") -> None:
    """Send `text` and wait for its turn to end; `consent`: the key that answers the consent dialog."""
    from ocat.ui.consent import ConsentDialog
    from ocat.ui.widgets import PromptInput
    from tests.support.pilot import wait_for

    app.query_one(PromptInput).text = text
    await pilot.press("enter")
    await pilot.pause()
    if consent:
        await wait_for(pilot, lambda: isinstance(app.screen, ConsentDialog) and app.screen.armed,
                       "the consent dialog", seconds=60)
        await pilot.press(consent)
    if app.turn is not None:
        await app.turn.wait()
    await pilot.pause()


def _import(walk: Walk, folder: Path) -> None:
    """A coding agent's session imported (`ocat --import-history FILE`, a Claude Code session), from
    `ocat.cli.dispatch.main` to its return, in a process of its own (a command holds its store until
    its process ends): a first import loads the model, then a second one is walked."""
    import json
    import subprocess

    from tests.support.agent_fixtures import ferry_fix_session

    first = ferry_fix_session().write(folder / "session.jsonl")
    subprocess.run([sys.executable, "-m", "ocat", "--import-history", str(first)], check=True, capture_output=True)
    again = ferry_fix_session("walk-2").write(folder / "session-2.jsonl")
    child = subprocess.run([sys.executable, __file__, "--import-child", str(again)], check=True, capture_output=True,
                           text=True, cwd=ROOT)
    seen = json.loads(child.stdout.strip().splitlines()[-1])
    walk.calls, walk.stopped = seen["calls"], seen["stopped"]
    walk.by_thread = {int(thread): calls for thread, calls in seen["by_thread"].items()}
    walk.handoffs = dict.fromkeys((caller, callee) for caller, callee in seen["handoffs"])


def _import_child(path: str) -> int:
    """In the child: walk one import of `path`, and print the walk as one JSON line."""
    import json

    from ocat.cli.dispatch import main

    walk = Walk()
    profile = _profiler(walk, threading.Lock(), start=IMPORT, stop=IMPORT)
    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        code = main(["--import-history", path])
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    print(json.dumps({"calls": walk.calls, "stopped": walk.stopped, "by_thread": walk.by_thread,
                      "handoffs": list(walk.handoffs)}), flush=True)
    os._exit(code)  # as the command ends: no teardown waiting on the store's background work


WALKS = ("turn", "tool", "mcp", "agent")


def measure(kind: str = "turn") -> Walk:
    """Walk one path in a fresh HOME: a thread's first turn, Enter to the stored exchange (`turn`;
    `tool`: the model calls search_memory once; `mcp`: it calls an MCP server's tool, which the
    user allows in the consent dialog), or a coding agent's session imported (`agent`)."""
    from tests.support import MODEL_DIR

    saved = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="ocat-walk-") as home:
        os.environ.update({"HOME": home, "XDG_CONFIG_HOME": f"{home}/.config", "XDG_DATA_HOME": f"{home}/.local/share",
                           "XDG_STATE_HOME": f"{home}/.local/state", "XDG_CACHE_HOME": f"{home}/.cache",
                           "OCAT_EMBEDDING_MODEL_PATH": os.environ.get("OCAT_EMBEDDING_MODEL_PATH", str(MODEL_DIR)),
                           "OCAT_EMBEDDING_THREADS": "1"})
        walk = Walk()
        try:
            if kind == "agent":
                _import(walk, Path(home))
            else:
                asyncio.run(_drive(walk, kind, Path(home)))
        finally:
            os.environ.clear()
            os.environ.update(saved)
    if not walk.stopped:
        raise SystemExit(f"the {kind} walk never ended (calls seen: {walk.calls[:40]})")
    return walk


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quiet", action="store_true", help="print the counts only")
    parser.add_argument("--walk", choices=WALKS, default="turn",
                        help="turn (default), tool (a search_memory call), mcp (an MCP tool allowed in the "
                             "consent dialog), agent (a coding agent's session imported)")
    parser.add_argument("--import-child", metavar="FILE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.import_child:
        return _import_child(args.import_child)
    walk = measure(args.walk)
    if not args.quiet:
        for path in walk.stop_files:
            print(f"  {path}")
        print("hand-offs between packages (caller -> callee, each once):")
        for caller, callee in walk.handoffs:
            print(f"  {caller} -> {callee}")
    print(f"the {args.walk} walk's stops (memory behind its door, the ground left out): {len(walk.stop_files)} files, "
          f"{len(walk.handoffs)} hand-offs between packages ({walk.stop_moves} moves counted call by call)")
    print(f"every file of ocat called: {len(walk.files)} files in {len(walk.packages)} packages "
          f"({', '.join(walk.packages)}), {walk.moves} moves between packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
