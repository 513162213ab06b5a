"""The walk of one chat turn through ocat's files: from Enter in the full-screen chat to the
stored exchange (a thread's first turn; the model calls no tool), as docs/ARCHITECTURE.md counts it.

How it counts: the chat runs under Textual's Pilot on a store with the fake embedder and the
fake OpenAI-compatible server (tests/support/fakes.py). A profile function (sys.setprofile, and
threading.setprofile for the threads the turn starts) sees every Python call; a call is part of the
walk when it runs in the context of the Enter handler (`OcatApp.on_prompt_input_submitted`) or
of what it started (the turn's worker, and the threads `asyncio.to_thread` runs for it: both copy
the context), so Textual's own painting in between is left out. Recording stops when
`SessionMemory.keep` returns (the exchange is stored). Each call into a file of `ocat/` is noted
in call order (a generator resumed counts as a call); a file is counted once, and a move is two
calls in a row, in that order, whose files lie in different packages (`ocat/<package>/...`;
a module directly in `ocat/` is its own package, named after the module; memory's rooms are
`memory`).

    python bench/turn_walk.py            # the files in call order, then the counts
    python bench/turn_walk.py --quiet    # the counts only

tests/unit/test_turn_walk.py runs it and holds the turn to ARCHITECTURE.md's figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
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
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

OCAT = ROOT / "ocat"
_IN_WALK: contextvars.ContextVar[bool] = contextvars.ContextVar("in_walk", default=False)


@dataclass
class Walk:
    """The ocat files a turn called into, in call order (consecutive calls in one file once), and
    the same per thread (the turn's steps run in threads of their own: a move is counted within one)."""

    calls: list[str] = field(default_factory=list)
    by_thread: dict[int, list[str]] = field(default_factory=dict)
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


def stops(calls: list[str]) -> list[str]:
    """The walk's stops: memory behind its front door is one stop (`memory`; docs/ARCHITECTURE.md
    walks one search inside it), the ground is left out, and a stop called twice in a row is one."""
    kept: list[str] = []
    for path in calls:
        if package_of(path) in GROUND:
            continue
        stop = "memory" if package_of(path) == "memory" else path
        if not kept or kept[-1] != stop:
            kept.append(stop)
    return kept


def package_of(path: str) -> str:
    """`ui` for ui/app.py, `memory` for memory/retrieval/rank.py, `repl` for repl.py."""
    parts = Path(path).parts
    return parts[0] if len(parts) > 1 else Path(path).stem


def _profiler(walk: Walk, lock: threading.Lock) -> Any:
    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if walk.stopped or event not in ("call", "return"):
            return
        code = frame.f_code
        if event == "call" and code.co_name == "on_prompt_input_submitted" and code.co_filename.endswith("ui/app.py"):
            _IN_WALK.set(True)  # the handler's context, and what it starts, are the walk
        if not _IN_WALK.get():
            return
        filename = code.co_filename
        if event == "return":
            if code.co_name == "keep" and filename.endswith("chat/session_memory.py"):
                walk.stopped = True
            return
        if not filename.startswith(str(OCAT)) or _on_a_timer(frame):
            return
        relative = str(Path(filename).relative_to(OCAT))
        with lock:
            if not walk.calls or walk.calls[-1] != relative:
                walk.calls.append(relative)
            mine = walk.by_thread.setdefault(threading.get_ident(), [])
            if not mine or mine[-1] != relative:
                mine.append(relative)

    return profile


def _on_a_timer(frame: FrameType) -> bool:
    """Whether a Textual timer called this (the status line's clock ticking while the turn runs)."""
    caller: FrameType | None = frame.f_back
    while caller is not None:
        if caller.f_code.co_filename.endswith("textual/timer.py"):
            return True
        caller = caller.f_back
    return False


async def _drive(walk: Walk) -> None:
    from ocat.chat.session import ChatSession
    from ocat.config.loading import load_settings
    from ocat.records import Exchange
    from ocat.ui.app import OcatApp
    from tests.support.fakes import FakeLLMServer, serving

    with serving(FakeLLMServer()) as server:
        settings = load_settings(overrides={
            "llm.model": "openai/fake-model", "llm.api_base": server.api_base, "llm.api_key": "sk-test"})
        session = ChatSession(settings)
        app = OcatApp(session, serve=False)
        async with app.run_test() as pilot:
            await app.workers.wait_for_complete()  # memory, the model check, the slash commands: not the walk
            store = vars(session)["session_memory" if "session_memory" in vars(session) else "memory"].store
            store.add_exchanges([
                Exchange(user_prompt=f"Which tiles for the kitchen floor, take {n}?", assistant_response="Grey slate.",
                         thread_id=f"kitchen-{n}", session_id="s", exchange_id=f"k{n}") for n in range(5)])
            # A turn first, in a thread of its own, so that what loads with the first turn of a
            # process (the modules, the memory tools) is not counted; then a new thread's first turn.
            await _send(app, pilot, "hello")
            app.session.new_thread()
            # The threads `asyncio.to_thread` runs in are made afresh, so the profile reaches them.
            asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor())
            lock = threading.Lock()
            profile = _profiler(walk, lock)
            threading.setprofile(profile)
            sys.setprofile(profile)
            try:
                await _send(app, pilot, "which tiles did we pick for the kitchen?")
            finally:
                sys.setprofile(None)
                threading.setprofile(None)  # type: ignore[arg-type]
            await pilot.pause(0.2)


async def _send(app: Any, pilot: Any, text: str) -> None:
    from ocat.ui.widgets import PromptInput

    app.query_one(PromptInput).text = text
    await pilot.press("enter")
    await pilot.pause()
    if app.turn is not None:
        await app.turn.wait()
    await pilot.pause()


def measure() -> Walk:
    """Walk one first turn, Enter to the stored exchange, in a fresh HOME."""
    from tests.support import MODEL_DIR

    saved = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="ocat-walk-") as home:
        os.environ.update({"HOME": home, "XDG_CONFIG_HOME": f"{home}/.config", "XDG_DATA_HOME": f"{home}/.local/share",
                           "XDG_STATE_HOME": f"{home}/.local/state", "XDG_CACHE_HOME": f"{home}/.cache",
                           "OCAT_EMBEDDING_MODEL_PATH": os.environ.get("OCAT_EMBEDDING_MODEL_PATH", str(MODEL_DIR)),
                           "OCAT_EMBEDDING_THREADS": "1"})
        walk = Walk()
        try:
            asyncio.run(_drive(walk))
        finally:
            os.environ.clear()
            os.environ.update(saved)
    if not walk.stopped:
        raise SystemExit(f"the turn never stored its exchange (calls seen: {walk.calls[:40]})")
    return walk


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quiet", action="store_true", help="print the counts only")
    quiet = parser.parse_args().quiet
    walk = measure()
    if not quiet:
        for path in walk.stop_files:
            print(f"  {path}")
    print(f"the walk's stops (memory behind its door, the ground left out): {len(walk.stop_files)} files, "
          f"{walk.stop_moves} moves between packages")
    print(f"every file of ocat called: {len(walk.files)} files in {len(walk.packages)} packages "
          f"({', '.join(walk.packages)}), {walk.moves} moves between packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
