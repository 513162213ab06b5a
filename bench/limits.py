"""The bounds issue 34 promises, measured: what a hostile or clumsy input costs.

- a ChatGPT export holding one 50 MB message: `ocat --import-history` peak RSS (goal: under 1 GB);
- Ctrl+C inside one long conversation (3,000 exchanges): seconds from SIGINT to the exit
  (goal: within 2 s);
- the wake block with a 660 KB profile and `wake.tokens: 100000`: milliseconds to build
  it (goal: under 100 ms; it was 17.5 s at 20,000 tokens and unfinished at 100,000);
- the time a prompt names, read from a pasted 637 KB log with an ISO date on every line, and from
  other prompts built to cost (issue 44; goal: under 50 ms each; the log took 62 s).

    python bench/limits.py                 # all four
    python bench/limits.py --only wake     # one of: big, stop, wake, time
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import smoke  # noqa: E402
from ingest import ocat_command, ocat_env, run_cli  # noqa: E402

DEFAULT_MODEL = REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2-int8"
WORDS = "bridge pier scour deck cable anchor steel rust survey river concrete valve pump".split()


def linear(conversation_id: str, turns: list[tuple[str, str]]) -> dict[str, Any]:
    """A ChatGPT conversation without branches."""
    mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    parent = "root"
    for n, (role, text) in enumerate(turns):
        node = f"{conversation_id}-{n}"
        mapping[node] = {"id": node, "parent": parent, "children": [], "message": {
            "id": node, "author": {"role": role}, "create_time": 1_700_000_000.0 + n,
            "content": {"content_type": "text", "parts": [text]}, "metadata": {}}}
        mapping[parent]["children"].append(node)
        parent = node
    return {"id": conversation_id, "title": conversation_id, "create_time": 1_700_000_000.0,
            "mapping": mapping, "current_node": parent}


def big_message(folder: Path, model: Path) -> None:
    rng = random.Random(1)
    text = " ".join(f"{rng.choice(WORDS)}{rng.randint(0, 99_999)}" for _ in range(smoke.size(4_500_000, 20_000)))
    export = folder / "big.json"
    export.write_text(json.dumps([linear("big", [("user", "read this log"), ("assistant", text)]),
                                  linear("small", [("user", "hi"), ("assistant", "hello")])]))
    run = run_cli(["--import-history", str(export)], folder / "home", folder / "store-big", model, None)
    mib = run["peak_rss_mib"]
    print(f"50 MB message: {run['seconds']:.1f} s, peak RSS {mib} MiB (goal: under 1024) "
          f"{'OK' if mib < 1024 else 'OVER'}; result {run['result']['new']} new")


def stop_inside_a_conversation(folder: Path, model: Path, runs: int) -> None:
    turns = [(role, f"{role} line {n}: " + " ".join(random.Random(n).choice(WORDS) for _ in range(60)))
             for n in range(3000) for role in ("user", "assistant")]
    export = folder / "long.json"
    export.write_text(json.dumps([linear("long", turns)]))
    waits = []
    for run in range(runs):
        env = {**os.environ, **ocat_env(folder / "home", folder / f"store-stop-{run}", model, None)}
        child = subprocess.Popen([*ocat_command(), "--import-history", str(export)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert child.stderr is not None
        while "conversations" not in child.stderr.readline():  # the first progress line: writing it
            pass
        time.sleep(2.0)  # well into the conversation
        sent = time.perf_counter()
        child.send_signal(signal.SIGINT)
        code = child.wait(timeout=120)
        waits.append(time.perf_counter() - sent)
        assert code == 130, code
    median = statistics.median(waits)
    print(f"Ctrl+C inside a 3,000-exchange conversation: exit after {median:.2f} s (median of {runs}; "
          f"max {max(waits):.2f}; goal: within 2 s) {'OK' if max(waits) <= 2.0 else 'OVER'}")


def timed_ms(run: Callable[[], Any], runs: int = 7) -> tuple[list[float], Any]:
    """Milliseconds each of `runs` calls of `run` took, and what the last returned."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = run()
        times.append((time.perf_counter() - started) * 1000)
    return times, result


def wake_with_a_big_profile(folder: Path) -> None:
    from ocat.config.loading import load_settings
    from ocat.operations.wake import build_wake

    profile = folder / "profile.md"
    profile.write_text("\n".join(f"- fact {n}: I prefer metric units and short answers about bridges."
                                 for n in range(smoke.size(10_000, 200))))  # about 660 KB
    settings = load_settings(env={}, overrides={"wake.profile": str(profile), "wake.tokens": 100_000})
    build_wake(settings, None)  # the tokenizer loads once
    times, block = timed_ms(lambda: build_wake(settings, None))
    median = statistics.median(times)
    print(f"wake block, {profile.stat().st_size // 1024} KB profile, 100,000 tokens: {median:.1f} ms median "
          f"(goal: under 100) {'OK' if median < 100 else 'OVER'}; {block.tokens:,} tokens; notes: {block.notes}")


def time_in_long_prompts() -> None:
    from datetime import datetime

    from ocat.memory.retrieval.time_range import time_range

    log = "\n".join(f"2025-{n % 12 + 1:02d}-{n % 28 + 1:02d}T12:00:{n % 60:02d} INFO job {n} done in {n % 97} ms "
                    f"on worker-{n % 7}" for n in range(smoke.size(11_000, 200)))
    prompts = {
        f"a {len(log) // 1024} KB log, the question last": f"{log}\nwhat did we decide about these jobs last week?",
        "the same, the question first": f"last week you saw a log like this:\n{log}",
        "40,000 months named": " ".join(["since the end of last march"] * smoke.size(40_000, 100)),
        "one line of 300,000 words": " ".join(f"qx{n:06d}" for n in range(smoke.size(300_000, 1000))),
    }
    now = datetime(2026, 11, 27, 12)
    time_range("what did we say last week", now)  # dateparser loads once (~0.6 s), as in any process
    for name, prompt in prompts.items():
        times, found = timed_ms(lambda: time_range(prompt, now))
        median = statistics.median(times)
        said = found.said() if found is not None else "no time"
        print(f"time in the prompt, {name}: {median:.1f} ms median, {max(times):.1f} max (goal: under 50) "
              f"{'OK' if median < 50 else 'OVER'}; {said[:90]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("big", "stop", "wake", "time"))
    parser.add_argument("--runs", type=int, default=3, help="Ctrl+C runs (default 3)")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    smoke.add_flag(parser)
    args = parser.parse_args()
    smoke.start(args.smoke)
    with tempfile.TemporaryDirectory(prefix="ocat-limits-") as tmp:
        folder = Path(tmp)
        (folder / "home").mkdir()
        if args.only in (None, "time"):
            time_in_long_prompts()
        if args.only in (None, "wake"):
            wake_with_a_big_profile(folder)
        if args.only in (None, "stop") and not smoke.on():  # a small import ends before a Ctrl+C lands
            stop_inside_a_conversation(folder, args.model, args.runs)
        if args.only in (None, "big"):
            big_message(folder, args.model)


if __name__ == "__main__":
    main()
