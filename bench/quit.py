"""Leaving the chat: seconds from Ctrl+Q to the end of the process, in a real terminal.

Each run starts ocat in a detached tmux session (a throwaway HOME, an empty store, the
real model, a fake OpenAI-compatible server on loopback), waits for the window, optionally
has one answer streamed, presses Ctrl+Q, and polls until the pane's process has ended.
Two cases: quitting right after the first frame (while litellm and the store are still
loading in workers) and quitting after one model turn. The target is under 0.5 s. The
second case also reports how long the first answer took when typed a few seconds after
start (litellm is warmed up in the background meanwhile).

    python bench/quit.py                 # 5 runs of each case; medians and worst
    python bench/quit.py --runs 10 --checkout /tmp/ocat-before
"""

from __future__ import annotations

import argparse
import re
import shlex
import statistics
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.startup import DEFAULT_MODEL, HEIGHT, WIDTH, ocat_command, ocat_env, stop_session, tmux  # noqa: E402
from tests.support.fakes import FakeLLMServer, llm_handler  # noqa: E402

TARGET_SECONDS = 0.5


def wait_for_screen(name: str, marker: str, timeout: float = 60.0) -> None:
    """Poll the pane until `marker` is on screen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker in tmux("capture-pane", "-p", "-t", name):
            return
        time.sleep(0.01)
    raise SystemExit(f"quit: {marker!r} never appeared:\n{tmux('capture-pane', '-p', '-t', name)}")


def one_quit(env: dict[str, str], *, turn: bool, settle: float, type_after: float) -> tuple[float, float | None]:
    """Seconds from Ctrl+Q until the ocat process has ended, and (with `turn`) how long the
    first answer took, as its status line says, typed `type_after` s after the window showed."""
    name = f"quit{time.monotonic_ns()}"
    line = "exec env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(ocat_command())
    tmux("new-session", "-d", "-s", name, "-x", str(WIDTH), "-y", str(HEIGHT), line, ";", "set", "remain-on-exit", "on")
    try:
        # The footer's quit key: shown at any width (a narrow window leaves out "Send", ocat.ui.footer).
        wait_for_screen(name, "Quit")
        answered = None
        if turn:
            time.sleep(type_after)  # a person reads the window, then types
            tmux("send-keys", "-t", name, "hello")
            time.sleep(0.3)  # as a person types: versions before the typed-ahead fix lost a burst's text
            tmux("send-keys", "-t", name, "Enter")
            wait_for_screen(name, "last answer")  # the status line once the answer is complete
            found = re.search(r"last answer (\d+\.\d+)s", tmux("capture-pane", "-p", "-t", name))
            answered = float(found.group(1)) if found else None
        time.sleep(settle)
        started = time.perf_counter()
        tmux("send-keys", "-t", name, "C-q")
        while tmux("display", "-p", "-t", name, "#{pane_dead}").strip() != "1":
            if time.perf_counter() - started > 30:
                raise SystemExit("quit: ocat was still running 30 s after Ctrl+Q")
            time.sleep(0.005)
        return time.perf_counter() - started, answered
    finally:
        stop_session(name)


def main(argv: list[str] | None = None) -> int:
    """Measure both cases and print medians, worst runs and the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each case (default 5)")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="the embedding model folder")
    parser.add_argument("--checkout", type=Path, help="measure this source tree instead of the installed ocat")
    parser.add_argument("--type-after", type=float, default=3.0, help="seconds before the first prompt is typed (3)")
    args = parser.parse_args(argv)

    server = FakeLLMServer(reply="A short answer from the fake model.")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), llm_handler(server))
    server.port = httpd.server_address[1]
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    cases = {"right after the first frame": (False, 0.2), "after one model turn": (True, 0.5)}
    results: dict[str, list[float]] = {case: [] for case in cases}
    first_answers: list[float] = []
    try:
        for _ in range(args.runs):
            for case, (turn, settle) in cases.items():  # alternate, so load falls on both
                with tempfile.TemporaryDirectory(prefix="ocat-quit-") as home:
                    env = ocat_env(Path(home), Path(home) / "store", args.model, args.checkout)
                    env |= {"OCAT_LLM_MODEL": "openai/fake", "OCAT_LLM_API_BASE": server.api_base,
                            "OCAT_LLM_API_KEY": "sk-bench", "TERM": "xterm-256color"}
                    quit_seconds, answered = one_quit(env, turn=turn, settle=settle, type_after=args.type_after)
                    results[case].append(quit_seconds)
                    if answered is not None:
                        first_answers.append(answered)
    finally:
        httpd.shutdown()
    print(f"Ctrl+Q to process end, {args.runs} runs each (target under {TARGET_SECONDS} s):")
    for case, times in results.items():
        print(f"  {case:<28} median {statistics.median(times):.3f} s   worst {max(times):.3f} s")
    if first_answers:
        print(f"First answer, typed {args.type_after:g} s after the window showed: median {statistics.median(first_answers):.1f} s "
              f"(the fake server answers at once: the rest is ocat's own first-use work)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
