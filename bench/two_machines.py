"""Two machines, one memory (issue 48): one `chroma run` server on loopback, two ocat processes
with HOMEs of their own, at a given store size.

A (the writer) builds the store with synthetic vectors through ocat's own write path (a hashed
bag of words standing in for the model, under the model's name: building 100k exchanges with
the model would take hours here, and the vectors' values cost nothing in what is measured).
B (the joining machine) runs the real model, as a user's machine does. Reported, per size:

- join: B's open (derived data made whole) and its first turn (a search), from a fresh HOME;
- catch-up per remote write: B's turn (a search) right after A wrote one exchange, against a
  turn with nothing new (medians of --rounds), and the bytes B read from the server for each
  (counted at the HTTP layer: every response body chromadb's httpx client reads);
- whether B's open session finds A's new exchange at its next turn (by a word no other has);
- B closed while A wrote one exchange, then opened again: its open, against one with nothing new;
- B's turns while A imports --import-size more exchanges: median and worst latency.

    python bench/two_machines.py                           # 2,000 exchanges: a smoke run, ~2 min
    python bench/two_machines.py --sizes 10000,100000      # the issue's sizes
    python bench/two_machines.py --tree /work/wt-sync-before --sizes 10000   # another tree (before)
    python bench/two_machines.py --sizes 100000 --keep /tmp/tm --join-only      # build once; then time joins alone

`--tree` runs both machines on another checkout of ocat, with its `.venv` when it has one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from startup import WARM_ENV, python_start  # noqa: E402

MODEL = REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2-int8"

# One machine: reads JSON commands, one a line, and answers each with one JSON line.
MACHINE = r"""
import dataclasses, hashlib, json, random, sys, threading, time
import httpx
import numpy as np

received = [0]
send = httpx.Client.send
def counted(self, request, **kwargs):
    response = send(self, request, **kwargs)
    response.read()
    received[0] += len(response.content)
    return response
httpx.Client.send = counted

from ocat.config.loading import load_settings
from ocat.memory import RetrievalLimits, open_store, retrieve
from ocat.memory.embedding.embedders import embedder_for
from ocat.records import Exchange

settings = load_settings()
real = embedder_for(settings.embedding)

class Synthetic:
    # A hashed bag of words under the model's name and size: the writer's stand-in for the model.
    name, dimensions = real.name, real.dimensions
    def embed(self, texts):
        out = []
        for text in texts:
            v = np.zeros(self.dimensions, dtype=np.float32)
            for word in text.lower().split():
                v[int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big") % self.dimensions] += 1
            n = float(np.linalg.norm(v)) or 1.0
            out.append((v / n).tolist())
        return out

WORDS = ("ledger invoice ferry harbour tide parser lexer token cache index query deploy staging release "
         "rollback postgres backup timetable schedule sunday timezone config module worker batch stream "
         "garden sensor recipe kitchen tram map budget travel doctor dentist vet school holiday train").split()

def exchange(n, rng):
    prompt = " ".join(rng.choice(WORDS) for _ in range(10)) + f" item{n}"
    answer = " ".join(rng.choice(WORDS) for _ in range(50))
    return Exchange(user_prompt=prompt, assistant_response=answer, thread_id=f"t{n // 20}", session_id="s",
                    timestamp=1.7e9 + n)

synthetic = sys.argv[1] == "writer"
started = time.perf_counter()
store = open_store(settings, embedder=Synthetic() if synthetic else real)
opened = time.perf_counter() - started
limits = RetrievalLimits(exchange_results=10, document_results=0, exchange_threshold=0, document_threshold=0)
print(json.dumps({"open_s": opened, "bytes": received[0]}), flush=True)
importing = None
for line in sys.stdin:
    asked = json.loads(line)
    rng = random.Random(asked.get("seed", 0))
    before = received[0]
    t0 = time.perf_counter()
    if "build" in asked:
        start, count = asked["build"]
        for first in range(start, start + count, 1024):
            store.add_exchanges([exchange(n, rng) for n in range(first, min(first + 1024, start + count))])
        said = count
    elif "import" in asked:  # in the background: B's turns are timed meanwhile
        start, count = asked["import"]
        def run(start=start, count=count, rng=rng, flag=asked["flag"]):
            for first in range(start, start + count, 256):
                store.add_exchanges([exchange(n, rng) for n in range(first, min(first + 256, start + count))])
            open(flag, "w").close()
        importing = threading.Thread(target=run)
        importing.start()
        said = True
    elif "imported" in asked:
        importing.join()
        said = True
    elif "write_one" in asked:  # one exchange with a word no other has
        one = exchange(asked["write_one"], rng)
        one = dataclasses.replace(one, user_prompt=f"{one.user_prompt} rareword{asked['write_one']}")
        store.add_exchange(one)
        said = one.exchange_id
    elif "search" in asked:
        said = [h.id for h in retrieve(store, asked["search"], limits, mode=asked.get("mode", "hybrid"))]
    elif "passages" in asked:
        said = store.wait_for_passages(asked["passages"])
    print(json.dumps({"said": said, "s": time.perf_counter() - t0, "bytes": received[0] - before}), flush=True)
"""

QUERIES = ("when is the ferry on sunday", "what did the vet say", "how do I roll back the release",
           "which postgres backup runs at night", "the kitchen recipe with the budget")


class Machine:
    """One ocat process with its own HOME, on the server."""

    def __init__(self, role: str, home: Path, port: int, tree: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OCAT_", "XDG_"))}
        env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), XDG_CONFIG_HOME=str(home / ".config"),
                   XDG_DATA_HOME=str(home / ".local/share"), XDG_STATE_HOME=str(home / ".local/state"),
                   OCAT_VECTOR_STORE_HOST="127.0.0.1", OCAT_VECTOR_STORE_PORT=str(port),
                   OCAT_EMBEDDING_MODEL_PATH=str(MODEL), PYTHONPATH=str(tree))
        started = time.perf_counter()
        # The tree's own interpreter when it has one: an editable install of another tree would
        # otherwise be imported whatever PYTHONPATH says.
        python = tree / ".venv" / "bin" / "python"
        # This tree, in the suite's smoke run: from its worker's warm interpreter (bench/startup.py).
        start = python_start() if tree == REPO and WARM_ENV in os.environ else [str(python if python.exists() else sys.executable)]
        self.process = subprocess.Popen([*start, "-c", MACHINE, role], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env, cwd=home)
        self.opened = self.answer()
        self.opened["wall_s"] = time.perf_counter() - started

    def answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"a machine ended (exit {self.process.wait()})")
        return dict(json.loads(line))

    def __call__(self, **command: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self.answer()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=600)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    chroma = shutil.which("chroma", path=str(Path(sys.executable).parent)) or "chroma"
    port = free_port()
    process = subprocess.Popen([chroma, "run", "--path", str(folder), "--host", "127.0.0.1", "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return process, port
        time.sleep(0.2)
    process.terminate()
    raise SystemExit("chroma run did not start")


def one_size(size: int, tree: Path, rounds: int, import_size: int, work: Path, *, join_only: bool = False) -> dict[str, Any]:
    """Every figure at one size, in `work` (a folder kept by --keep is built once: `built` marks it;
    --join-only then times a fresh machine's join and nothing else, which leaves the store as it was)."""
    server, port = serve(work / "server")
    marker = work / "built"
    try:
        a = None if join_only and marker.exists() else Machine("writer", work / "a", port, tree)
        built = None
        if a is not None and not marker.exists():
            t0 = time.perf_counter()
            a(build=[0, size])
            built = time.perf_counter() - t0
            marker.write_text(f"{size}\n")
            print(f"  built {size:,} exchanges in {built:.0f} s", file=sys.stderr)
        shutil.rmtree(work / "b", ignore_errors=True)  # B joins from a fresh HOME every time
        b = Machine("reader", work / "b", port, tree)
        first = b(search=QUERIES[0])
        join = {"open_s": b.opened["open_s"], "process_wall_s": b.opened["wall_s"], "first_turn_s": first["s"],
                "bytes": b.opened["bytes"] + first["bytes"]}
        if join_only:
            b.close()
            if a is not None:
                a.close()
            return {"size": size, "build_s": built, "join": join, "load": os.getloadavg()[0]}
        assert a is not None
        b(passages=600)  # a backfill the join started ends before turns are timed
        quiet, after, found = [], [], 0
        for n in range(rounds):
            b(search=QUERIES[n % len(QUERIES)])  # warm
            quiet.append(b(search=f"{QUERIES[n % len(QUERIES)]} rareword{size + n}"))  # nothing new
            written = a(write_one=size + n, seed=n + 1)["said"]
            after.append(b(search=f"{QUERIES[n % len(QUERIES)]} rareword{size + n}"))  # after A wrote one
            found += written in after[-1]["said"]
        # A machine that was closed while A wrote one exchange, opened again; and opened with nothing new.
        b.close()
        a(write_one=size + rounds, seed=rounds + 1)
        reopened = Machine("reader", work / "b", port, tree)
        reopened_turn = reopened(search=f"rareword{size + rounds}", mode="lexical")
        reopened.close()
        again = Machine("reader", work / "b", port, tree)
        again.close()
        b = Machine("reader", work / "b", port, tree)
        during: list[float] = []
        flag = work / "imported"
        t0 = time.perf_counter()
        a(**{"import": [size + rounds, import_size], "flag": str(flag)})
        while not flag.exists() or not during:  # B's turns go on until A's import is done
            during.append(b(search=QUERIES[len(during) % len(QUERIES)])["s"])
        imported = time.perf_counter() - t0
        a(imported=True)
        idle = [b(search=QUERIES[n % len(QUERIES)])["s"] for n in range(3)]
        a.close()
        b.close()
    finally:
        server.terminate()
        server.wait(timeout=60)
    median = statistics.median
    return {
        "size": size,
        "build_s": built,
        "join": join,
        "turn_quiet_s": median(x["s"] for x in quiet),
        "turn_after_one_remote_write_s": median(x["s"] for x in after),
        "ratio": median(x["s"] for x in after) / median(x["s"] for x in quiet),
        "bytes_quiet_turn": median(x["bytes"] for x in quiet),
        "bytes_after_one_remote_write": median(x["bytes"] for x in after),
        "found_by_next_turn": f"{found}/{rounds}",
        "reopen_after_one_remote_write": {"open_s": reopened.opened["open_s"], "bytes": reopened.opened["bytes"],
                                          "found": bool(reopened_turn["said"])},
        "reopen_nothing_new": {"open_s": again.opened["open_s"], "bytes": again.opened["bytes"]},
        "turns_while_importing": {"import_s": imported, "count": len(during), "median_s": median(during), "worst_s": max(during),
                                  "idle_median_s": median(idle)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000", help="store sizes, comma-separated (default: 2000)")
    parser.add_argument("--tree", type=Path, default=REPO, help="the ocat checkout to run (default: this one)")
    parser.add_argument("--rounds", type=int, default=5, help="remote writes timed per size (default: 5)")
    parser.add_argument("--import-size", type=int, default=2048, help="exchanges A imports while B's turns run")
    parser.add_argument("--out", type=Path, help="also write the results here as JSON")
    parser.add_argument("--keep", type=Path, help="keep each size's server data in DIR/<size> and reuse it when built")
    parser.add_argument("--join-only", action="store_true", help="time a fresh machine's join alone (with --keep: again and again)")
    args = parser.parse_args()
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="ocat-two-machines-") as scratch:
            work = args.keep / str(size) if args.keep else Path(scratch)
            work.mkdir(parents=True, exist_ok=True)
            print(f"{size:,} exchanges, tree {args.tree}", file=sys.stderr)
            result = one_size(size, args.tree, args.rounds, args.import_size, work, join_only=args.join_only)
            print(json.dumps(result, indent=2))
            results.append(result)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
