"""Idle memory of the full-screen chat and of `ocat mcp`, with their children; and what each library holds.

    python bench/idle_memory.py                       # chat at 80x24 and `ocat mcp`, on a store of 1,000 exchanges
    python bench/idle_memory.py --imports             # also: RSS of a plain python after importing each library
    python bench/idle_memory.py --checkout /tmp/ocat-before --json   # another tree (git archive), for before/after
    python bench/idle_memory.py --turn                # also: the chat idle again after one turn with a long answer

The chat runs in a detached tmux session of 80x24 (its own socket) against a fake
OpenAI-compatible server (tests/support/fakes.py), on a store of `--exchanges` exchanges (made
once by `--import-memory` and kept in `--cache`); it is read `--settle` seconds after its header
shows the store's count (memory loaded). `ocat mcp` is started on the same store, sent
`initialize`, and read after the same wait. Both are read once their memory has settled
(their summed RSS still for three seconds). For each process and its children: RSS, PSS and USS
(private pages) from /proc/<pid>/smaps_rollup, in MB (10^6 bytes), medians over `--runs`. The
total of a process and its children is their summed PSS (shared pages counted once, split
between the processes that map them) and their summed RSS (each counted in full).

`--turn` also reads the chat after one turn: a prompt typed once it is idle, the fake model's
answer (about 330 words: its exchange gets passages) shown and kept (the header's count one
up), then the same settling.

`--imports` starts a plain python per library (litellm, chromadb, onnxruntime, tiktoken,
textual, and ocat's embedding model loaded as the chat loads it) and reads its RSS after the
import; the baseline is `python -c pass`. tracemalloc cannot see onnxruntime's or Chroma's
native memory; this can. docs/PERFORMANCE.md, "Idle memory (issue 49)", has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from startup import DEFAULT_MODEL, descendants, ocat_command, ocat_env  # noqa: E402

SOCKET = f"ocat-idle-{os.getpid()}"
WIDTH, HEIGHT = 80, 24
MB = 1_000_000
# What the chat's header shows once memory is loaded (bench/startup.py waits for the same).
LOADED = (" exchanges", "memory off")
# The fake model's answer: long enough that its exchange gets passages (past 256 word pieces).
ANSWER = " ".join(f"Point {n}: the footbridge's damper was tuned to the deck's first mode." for n in range(30))
IMPORTS = {
    "python -c pass": "pass",
    "litellm": "import litellm",
    "chromadb": "import chromadb",
    "onnxruntime": "import onnxruntime",
    "tiktoken": "import tiktoken",
    "ocat's token counter, used": "from ocat.text.tokens import count_tokens; count_tokens('warm')",
    "textual": "import textual.app, textual.widgets",
    "ocat's model, loaded": (
        "import sys; from pathlib import Path; from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder as E; "
        "e = E(Path(sys.argv[1])); e.load(); e.embed(['warm up the session'])"
    ),
}


def memory_of(pid: int) -> dict[str, float]:
    """One process's resident memory in MB: RSS, PSS, USS (private clean + dirty), and its peak RSS."""
    rollup: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, value = line.partition(":")
        if value.strip().endswith("kB"):
            rollup[key] = int(value.split()[0]) * 1024
    peak = next(int(line.split()[1]) * 1024 for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("VmHWM:"))
    return {
        "rss": rollup["Rss"] / MB,
        "pss": rollup["Pss"] / MB,
        "uss": (rollup["Private_Clean"] + rollup["Private_Dirty"]) / MB,
        "peak_rss": peak / MB,
    }


def family_memory(pid: int) -> dict[str, Any]:
    """A process's memory and each child's, and their totals (summed PSS and RSS)."""
    processes = {"main": memory_of(pid)}
    for n, child in enumerate(sorted(descendants(pid))):
        try:
            processes[f"child {n + 1} ({_name(child)})"] = memory_of(child)
        except (OSError, StopIteration):  # gone meanwhile
            continue
    total = {key: sum(p[key] for p in processes.values()) for key in ("rss", "pss", "uss")}
    return {"processes": processes, "total": total}


def settled(pid: int, settle: float, steady: float = 3.0) -> None:
    """Wait `settle` seconds, then until the summed RSS of `pid` and its children has moved less
    than 2 MB over `steady` seconds, read four times (a store server still importing ChromaDB is
    not idle yet; at most two minutes)."""
    time.sleep(settle)
    readings: list[float] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            readings.append(family_memory(pid)["total"]["rss"])
        except (OSError, StopIteration):
            readings.append(0.0)
        if len(readings) >= 4 and max(readings[-4:]) - min(readings[-4:]) < 2:
            return
        time.sleep(steady / 3)


def _name(pid: int) -> str:
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return "chroma run" if any(b"chroma" in a for a in argv) else Path(argv[0].decode() or "?").name


def tmux(*args: str) -> str:
    """A tmux command on this bench's own server (never the user's)."""
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=False).stdout


def chat_idle(command: list[str], env: dict[str, str], settle: float, *, turn: int | None = None,
              steady: float = 3.0) -> dict[str, Any]:
    """The chat at 80x24, `settle` seconds after memory is loaded; with `turn` (the store's count),
    after one turn too, once its exchange is kept."""
    name = f"idle{time.monotonic_ns()}"
    line = "exec env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(command)
    tmux("new-session", "-d", "-s", name, "-x", str(WIDTH), "-y", str(HEIGHT), line, ";", "set", "remain-on-exit", "on")
    try:
        started = time.monotonic()
        screen = ""
        while time.monotonic() - started < 300:
            screen = tmux("capture-pane", "-p", "-t", name)
            if any(marker in screen for marker in LOADED):
                break
            time.sleep(0.1)
        else:
            raise SystemExit(f"idle_memory: memory never loaded; the screen was:\n{screen}")
        loaded = time.monotonic() - started
        pid = int(tmux("list-panes", "-t", name, "-F", "#{pane_pid}").split()[0])
        settled(pid, settle, steady)
        idle = {"memory_loaded_s": round(loaded, 1), **family_memory(pid)}
        if turn is None:
            return idle
        shown = re.search(r" (\d+) exchanges", screen)
        tmux("send-keys", "-t", name, "tell me about the footbridge", "Enter")
        kept = f" {(int(shown.group(1)) if shown else turn) + 1} exchanges"
        deadline = time.monotonic() + 300
        while kept not in (screen := tmux("capture-pane", "-p", "-t", name)):
            if time.monotonic() > deadline:
                raise SystemExit(f"idle_memory: the turn's exchange was never kept; the screen was:\n{screen}")
            time.sleep(0.2)
        settled(pid, settle, steady)
        return {**idle, "after_turn": family_memory(pid)}
    finally:
        _stop(name)


def _stop(name: str) -> None:
    pids = [int(p) for p in tmux("list-panes", "-t", name, "-F", "#{pane_pid}").split()]
    family = set(pids).union(*(descendants(p) for p in pids))
    tmux("kill-session", "-t", name)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in family):
        time.sleep(0.05)


def mcp_idle(command: list[str], env: dict[str, str], settle: float, steady: float = 3.0) -> dict[str, Any]:
    """`ocat mcp` after `initialize` and `settle` seconds."""
    server = subprocess.Popen([*command, "mcp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    assert server.stdin is not None and server.stdout is not None
    try:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
        server.stdin.write((json.dumps(hello) + "\n").encode())
        server.stdin.flush()
        started = time.monotonic()
        server.stdout.readline()
        answered = time.monotonic() - started
        server.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        server.stdin.flush()
        settled(server.pid, settle, steady)
        return {"initialized_s": round(answered, 1), **family_memory(server.pid)}
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def import_costs(model: Path, env: dict[str, str], runs: int) -> dict[str, float | None]:
    """RSS (MB) of a plain python after each import: the median over `runs` (None: it failed)."""
    out: dict[str, float | None] = {}
    # litellm fetches its price table at import unless told not to (ocat always tells it).
    env = {**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    read = "; import re; print(re.search(r'VmRSS:\\s+(\\d+)', open('/proc/self/status').read()).group(1))"
    for label, code in IMPORTS.items():
        values = []
        for _ in range(runs):
            done = subprocess.run([sys.executable, "-c", code + read, str(model)], env=env, capture_output=True,
                                  text=True, check=False)
            if done.returncode == 0:
                values.append(int(done.stdout.split()[-1]) * 1024 / MB)
        out[label] = round(statistics.median(values), 1) if values else None
    return out


def store_of(folder: Path, count: int, env: dict[str, str]) -> None:
    """A store of `count` exchanges, 4 to a thread (made once; kept for the next run)."""
    if (folder / "made").exists():
        return
    from ask_vs_llm import store_with_exchanges

    store_with_exchanges(folder, count, env)
    (folder / "made").write_text(str(count))


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each figure over the runs (processes matched by their place)."""
    def median_of(values: list[Any]) -> Any:
        if isinstance(values[0], dict):
            keys = [k for k in values[0] if all(k in v for v in values)]
            return {k: median_of([v[k] for v in values]) for k in keys}
        return round(statistics.median(values), 1)
    return median_of(runs)


def main(argv: list[str] | None = None) -> int:
    """Measure the chat and `ocat mcp` idle (and, with --imports, each library); print a report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--exchanges", type=int, default=1000, help="exchanges in the store")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds idle before reading")
    parser.add_argument("--steady", type=float, default=3.0,
                        help="seconds over which the RSS must hold still (within 2 MB) before it is read")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--checkout", type=Path, help="run ocat from this source tree")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ocat-idle-bench",
                        help="where the store is made once and kept")
    parser.add_argument("--imports", action="store_true", help="also measure each library's import in a plain python")
    parser.add_argument("--turn", action="store_true", help="also read the chat idle again after one turn")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from tests.support.fakes import FakeLLMServer, serving

    folder = args.cache / f"exchanges-{args.exchanges}"
    folder.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"checkout": str(args.checkout or REPO), "exchanges": args.exchanges, "runs": args.runs,
                              "load": Path("/proc/loadavg").read_text().split()[0]}
    with tempfile.TemporaryDirectory(prefix="ocat-idle-") as scratch, \
            serving(FakeLLMServer(reply=ANSWER)) as server:
        env = {**ocat_env(Path(scratch) / "home", folder / "store", args.model, args.checkout),
               "OCAT_LLM_MODEL": "openai/fake-model", "OCAT_LLM_API_BASE": server.api_base, "OCAT_LLM_API_KEY": "sk-test",
               "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "xterm-256color", "LANG": "C.UTF-8"}
        full = {**os.environ, **env}
        store_of(folder, args.exchanges, full)
        if args.turn:  # the turns write to a copy: the kept store stays as made
            shutil.copytree(folder / "store", Path(scratch) / "store")
            env["OCAT_VECTOR_STORE_PATH"] = full["OCAT_VECTOR_STORE_PATH"] = str(Path(scratch) / "store")
        try:
            report["chat"] = medians([chat_idle(ocat_command(), env, args.settle, turn=args.exchanges if args.turn else None,
                                                steady=args.steady)
                                      for _ in range(args.runs)])
        finally:
            subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True, check=False)
        report["mcp"] = medians([mcp_idle(ocat_command(), full, args.settle, args.steady) for _ in range(args.runs)])
        if args.imports:
            report["imports_rss"] = import_costs(args.model, full, args.runs)
    print(json.dumps(report, indent=1) if args.json else format_report(report))
    return 0


def format_report(report: dict[str, Any]) -> str:
    """The report as a table: per process RSS / PSS / USS, the totals, then the imports."""
    lines = [f"ocat from {report['checkout']}; {report['exchanges']} exchanges; medians of {report['runs']} runs "
             f"(MB); load {report['load']}"]
    faces = [("chat", report["chat"]), ("chat after a turn", report["chat"].get("after_turn")), ("mcp", report["mcp"])]
    for face, part in faces:
        if part is None:
            continue
        lines.append(f"{face}:")
        for name, m in part["processes"].items():
            lines.append(f"  {name:<28} rss {m['rss']:7.1f}  pss {m['pss']:7.1f}  uss {m['uss']:7.1f}  peak {m['peak_rss']:7.1f}")
        t = part["total"]
        lines.append(f"  {'total':<28} rss {t['rss']:7.1f}  pss {t['pss']:7.1f}  uss {t['uss']:7.1f}")
    for label, rss in report.get("imports_rss", {}).items():
        lines.append(f"  import {label:<28} rss {'failed' if rss is None else f'{rss:7.1f}'}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
