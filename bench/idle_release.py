"""What giving back idle memory costs a chat's turns: the embeddings of turns that follow a
release (`memory.release_idle_memory`, what the chat does once an exchange is kept) against
turns that follow none, interleaved on one model session; and the memory each leaves.

    python bench/idle_release.py                 # 60 turns of chats-dev, medians
    python bench/idle_release.py --turns 100

A turn here is the model's part of one: its search's two queries (the prompt, and the prompt
after the last prompts, each embedded alone as `retrieve` does), then the exchange kept (its
text and its prompt in one call, then its passages). The turns alternate: one after a release
("released": the arena was shrunk, so it is taken again), one after a turn that released nothing
("kept"). Each turn's wall and CPU time (this thread's, which is where onnxruntime's one thread
runs here: `embedding.threads` 1, as the tests do; the chat's own default uses the cores) and
each first embedding's (the first query, where taking the arena again lands); the release's own
time, which the chat spends in a thread of its own after the exchange is kept; and the resident
memory after each kind of turn once given back and not. Medians, and the ratio released / kept.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from recall import DEFAULT_MODEL  # noqa: E402
from recall_chats import DEFAULT_CHATS, load_chats  # noqa: E402


def resident_mb() -> float:
    """This process's resident memory (VmRSS), in MB."""
    found = re.search(r"VmRSS:\s+(\d+)", Path("/proc/self/status").read_text())
    return int(found.group(1)) * 1024 / 1e6 if found else 0.0


def timed(step: Callable[[], Any]) -> tuple[float, float]:
    """Wall and this thread's CPU time of `step`, in ms."""
    wall, cpu = time.perf_counter(), time.thread_time()
    step()
    return (time.perf_counter() - wall) * 1000, (time.thread_time() - cpu) * 1000


def main(argv: list[str] | None = None) -> int:
    """Run the interleaved turns and print the figures."""
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder, passages_of, release_idle_memory

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60, help="turns of each kind")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--chats", type=Path, default=DEFAULT_CHATS)
    parser.add_argument("--threads", type=int, default=1, help="the model's threads (embedding.threads)")
    parser.add_argument("--smoke", action="store_true", help="4 turns of each kind: that the bench runs")
    args = parser.parse_args(argv)
    turns = 4 if args.smoke else args.turns
    exchanges, _ = load_chats(args.chats)
    embedder = OnnxMiniLMEmbedder(args.model, threads=args.threads)
    embedder.load()
    embedder.embed(["warm up"])
    release_idle_memory(embedder)

    figures: dict[str, dict[str, list[float]]] = {
        kind: {"turn_wall": [], "turn_cpu": [], "first_wall": [], "first_cpu": [], "rss": []}
        for kind in ("kept", "released")}
    releases: list[float] = []
    rss_released: list[float] = []
    previous = ""
    for n in range(2 * turns):
        exchange = exchanges[n % len(exchanges)]
        kind = "released" if n % 2 else "kept"
        prompt = exchange.user_prompt
        after_last = f"{previous}\n{prompt}" if previous else prompt
        previous = prompt
        first = timed(lambda: embedder.embed([prompt]))
        rest = timed(lambda: (embedder.embed([after_last]),
                              embedder.embed([exchange.text, prompt]),
                              embedder.embed(passages_of(embedder, exchange.text))))
        part = figures[kind]
        part["first_wall"].append(first[0])
        part["first_cpu"].append(first[1])
        part["turn_wall"].append(first[0] + rest[0])
        part["turn_cpu"].append(first[1] + rest[1])
        part["rss"].append(resident_mb())
        if kind == "kept":  # the next turn follows a release, as in the chat
            releases.append(timed(lambda: release_idle_memory(embedder))[0])
            rss_released.append(resident_mb())

    def median(values: list[float]) -> float:
        return statistics.median(values)

    print(f"{turns} turns of each kind (chats-dev), model threads {args.threads}; medians, ms")
    print(f"{'':34}{'after no release':>18}{'after a release':>18}{'ratio':>8}")
    for label, key in (("a turn's embeddings, wall", "turn_wall"), ("a turn's embeddings, CPU", "turn_cpu"),
                       ("its first embedding, wall", "first_wall"), ("its first embedding, CPU", "first_cpu")):
        kept, released = median(figures["kept"][key]), median(figures["released"][key])
        print(f"{label:34}{kept:18.1f}{released:18.1f}{released / kept:8.3f}")
    added = [r - k for r, k in zip(figures["released"]["turn_wall"], figures["kept"]["turn_wall"])]
    print(f"added per turn (pairs' difference, wall): median {median(added):.1f} ms")
    print(f"the release itself (in the chat: its own thread, after the exchange is kept): median {median(releases):.1f} ms")
    print(f"resident after a turn: {median(figures['kept']['rss']):.1f} MB; once given back: {median(rss_released):.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
