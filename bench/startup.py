"""Start-up of ocat in a real terminal: time to first frame against a bare Textual app, CLI wall times, idle memory.

Each run starts a detached tmux session of a fixed size running the command, and polls
`tmux capture-pane -p` until the expected text is on screen (ocat's header, or the bare
app's one line). Both apps are timed the same way in the same run, alternately, so tmux's
own cost and the machine's load fall on both; the ratio is the figure to read.

    python bench/startup.py                       # first frame, --version, --help, --vector-store-stats
    python bench/startup.py --store /tmp/ocat-bench/synthetic-100000 --idle-rss --collection bench
    python bench/startup.py --checkout /tmp/ocat-before   # the same, for another checkout (git archive)

`--store` points ocat at an existing store (a fresh empty one by default); `--idle-rss`
also opens the chat on it, waits until memory is loaded, and reports the peak RSS of the
app and of its store server. The app runs in `--dummy-mode` in a throwaway HOME.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2-int8"
SOCKET = f"ocat-bench-{os.getpid()}"
# Set by the suite's smoke runs (tests/cli/test_bench_smoke.py): the command line (JSON) that runs
# `python ARGS` from the test worker's warm interpreter (tests/support/warm_start.py), which has
# imported chromadb and the model's libraries once; each Python process a bench starts paid ~2.5 s
# of CPU for them. What a smoke run times means nothing, and it runs this tree, never --checkout's.
WARM_ENV = "BENCH_WARM_PYTHON"
WIDTH, HEIGHT = 120, 40


def ocat_env(home: Path, store: Path, model: Path, checkout: Path | None) -> dict[str, str]:
    """Environment for running ocat apart from the user's own files: its home, store and model."""
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "OCAT_VECTOR_STORE_PATH": str(store),
        "OCAT_EMBEDDING_MODEL_PATH": str(model),
    }
    # The tree timed: this one, or `--checkout`'s (`python -P -m ocat` reads it from here, not
    # from the current folder or the installed copy).
    env["PYTHONPATH"] = str((checkout or Path(__file__).resolve().parent.parent).resolve())
    return env


def ocat_command() -> list[str]:
    """`python -P -m ocat`: the tree on PYTHONPATH (ocat_env), started as that tree starts itself.
    Not the installed console script, which names the entry point of the tree that was installed;
    -P keeps the current folder (another tree, maybe) off the path. In the suite's smoke runs, the
    test worker's warm interpreter runs this tree's ocat instead (`python_start`)."""
    warm = os.environ.get(WARM_ENV)
    return [*json.loads(warm), "-m", "ocat"] if warm else [sys.executable, "-P", "-m", "ocat"]


def python_start() -> list[str]:
    """How a bench starts a Python process of this tree (`[*python_start(), "-c", CODE]`, or a
    script): `sys.executable`; in the suite's smoke runs, its worker's warm interpreter."""
    warm = os.environ.get(WARM_ENV)
    return list(json.loads(warm)) if warm else [sys.executable]


def tmux(*args: str) -> str:
    """Run a tmux command on this bench's own server (its own socket, never the user's)."""
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=False).stdout


def first_frame(command: list[str], env: dict[str, str], marker: str, *, timeout: float = 60.0) -> float:
    """Seconds from starting `command` in a fresh tmux session until `marker` is on screen."""
    name = f"run{time.monotonic_ns()}"
    line = "exec env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(command)
    started = time.perf_counter()
    # remain-on-exit keeps a crashed command's last screen for the error message.
    tmux("new-session", "-d", "-s", name, "-x", str(WIDTH), "-y", str(HEIGHT), line, ";", "set", "remain-on-exit", "on")
    try:
        how = f"not within {timeout:g} s"
        while time.perf_counter() - started < timeout:
            screen = tmux("capture-pane", "-p", "-t", name)
            if marker in screen:
                return time.perf_counter() - started
            dead, status = (tmux("display", "-p", "-t", name, "#{pane_dead} #{pane_dead_status}").split() + ["", ""])[:2]
            if dead == "1":
                # tmux 3.3 gives the status only some of the time, and no word of a signal.
                how = f"the command ended after {time.perf_counter() - started:.1f} s" + (
                    f", exit status {status}" if status else "")
                break
            time.sleep(0.005)
        raise SystemExit(f"startup: {marker!r} never appeared ({how}); the screen was:\n"
                         f"{tmux('capture-pane', '-p', '-t', name)}")
    finally:
        stop_session(name)


def stop_session(name: str) -> None:
    """Kill a session and wait for its processes (and their children) to be gone, so runs don't overlap."""
    pids = [int(p) for p in tmux("list-panes", "-t", name, "-F", "#{pane_pid}").split()]
    family = set(pids)
    for pid in pids:
        family |= descendants(pid)
    tmux("kill-session", "-t", name)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() and not _zombie(p) for p in family):
        time.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def descendants(pid: int) -> set[int]:
    """Every process below `pid`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def memory_of(pid: int) -> dict[str, int]:
    """Peak and current resident memory of a process, in MiB (VmHWM, VmRSS)."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            fields[key] = int(value.split()[0]) // 1024
    return fields


def wall(command: list[str], env: dict[str, str], runs: int) -> dict[str, float]:
    """Median and spread (milliseconds) of a command's wall time; it must succeed."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        times.append((time.perf_counter() - t0) * 1000)
        if done.returncode != 0:
            raise SystemExit(f"startup: {shlex.join(command)} failed: {done.stderr}")
    return {"median_ms": round(statistics.median(times), 1), "min_ms": round(min(times), 1), "max_ms": round(max(times), 1)}


def idle_rss(command: list[str], env: dict[str, str], settle: float) -> dict[str, Any]:
    """Open the chat on the store, wait for memory to load and `settle` seconds more, read peak RSS."""
    name = "idle"
    line = "exec env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(command)
    tmux("new-session", "-d", "-s", name, "-x", str(WIDTH), "-y", str(HEIGHT), line)
    try:
        started = time.perf_counter()
        screen = ""
        while time.perf_counter() - started < 600:
            screen = tmux("capture-pane", "-p", "-t", name)
            if " exchanges" in screen or "memory off" in screen:
                break
            time.sleep(0.1)
        loaded = time.perf_counter() - started
        time.sleep(settle)
        app = int(tmux("list-panes", "-t", name, "-F", "#{pane_pid}").split()[0])
        server = sorted(descendants(app))
        return {
            "memory_loaded_s": round(loaded, 1),
            "header": next((s.strip() for s in screen.splitlines() if "ocat" in s), ""),
            "app": memory_of(app),
            "store_server": {str(p): memory_of(p) for p in server},
        }
    finally:
        stop_session(name)


def compile_bytecode(source: Path) -> None:
    """Compile the measured tree's modules first, as `pip install` does for an installed ocat.

    An editable install (a checkout) compiles a module when it is first imported and caches it
    in __pycache__; with PYTHONDONTWRITEBYTECODE set (as on some CI machines) it never caches,
    so every start compiled all of ocat's ~90 modules again (~25 ms of a ~100 ms gap), while
    Textual, installed from a wheel, had its bytecode: the ratio measured the environment, not
    ocat. With the bytecode there both start as a user's install does.
    """
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(source / "ocat")], check=True)


def main(argv: list[str] | None = None) -> int:
    """Time first frames, CLI commands and (optionally) idle memory; print a report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each measurement (median reported)")
    parser.add_argument("--store", type=Path, help="an existing store folder for ocat (default: a fresh empty one)")
    parser.add_argument("--collection", default="default", help="the store's collection name (bench/latency.py uses 'bench')")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--idle-rss", action="store_true", help="also report the app's peak RSS, idle on the store")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds idle after memory loads, before reading RSS")
    parser.add_argument("--checkout", type=Path, help="run ocat from this source tree (e.g. an older commit, for before/after)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)

    ocat = ocat_command()
    compile_bytecode(args.checkout or REPO)
    with tempfile.TemporaryDirectory(prefix="ocat-startup-") as scratch:
        home = Path(scratch)
        store = args.store or home / "store"
        env = {
            **ocat_env(home, store, args.model, args.checkout),
            "OCAT_VECTOR_STORE_COLLECTION": args.collection,
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
        }
        full_env = {**os.environ, **env}
        report: dict[str, Any] = {
            "runs": args.runs,
            "store": str(args.store or "fresh, empty"),
            "checkout": str(args.checkout or REPO),
            "loadavg_start": _load(),
        }
        try:
            bare, app = [], []
            for _ in range(args.runs):
                bare.append(first_frame([sys.executable, str(REPO / "bench" / "bare_app.py")], env, "bare textual app ready"))
                app.append(first_frame([*ocat, "--dummy-mode"], env, "ocat ·"))
            report["first_frame"] = {
                "bare_textual_ms": _ms(bare),
                "ocat_ms": _ms(app),
                "ratio_of_medians": round(statistics.median(app) / statistics.median(bare), 2),
            }
            report["wall"] = {
                "ocat --version": wall([*ocat, "--version"], full_env, args.runs),
                "ocat --help": wall([*ocat, "--help"], full_env, args.runs),
                "ocat --vector-store-stats": wall([*ocat, "--vector-store-stats"], full_env, args.runs),
                "python -c pass": wall([sys.executable, "-c", "pass"], full_env, args.runs),
            }
            if args.idle_rss:
                report["idle_rss_mib"] = idle_rss([*ocat, "--dummy-mode"], env, args.settle)
        finally:
            subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True, check=False)
        report["loadavg_end"] = _load()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report)
    return 0


def _ms(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {"median": round(statistics.median(ms), 1), "min": round(min(ms), 1), "max": round(max(ms), 1)}


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _print(report: dict[str, Any]) -> None:
    frame = report["first_frame"]
    print(f"ocat from {report['checkout']}, store: {report['store']}")
    print(f"load average {report['loadavg_start']} -> {report['loadavg_end']}")
    print(f"first frame, median of {report['runs']} (min-max):")
    for label, key in (("bare Textual app", "bare_textual_ms"), ("ocat", "ocat_ms")):
        stats = frame[key]
        print(f"  {label:18} {stats['median']:7.1f} ms ({stats['min']:.0f}-{stats['max']:.0f})")
    print(f"  ratio ocat / bare: {frame['ratio_of_medians']}x")
    print("wall time, median (min-max):")
    for label, stats in report["wall"].items():
        print(f"  {label:28} {stats['median_ms']:7.1f} ms ({stats['min_ms']:.0f}-{stats['max_ms']:.0f})")
    if "idle_rss_mib" in report:
        idle = report["idle_rss_mib"]
        print(f"idle chat ({idle['header']}), memory loaded after {idle['memory_loaded_s']} s:")
        print(f"  app: peak {idle['app'].get('VmHWM')} MiB, now {idle['app'].get('VmRSS')} MiB")
        for pid, mem in idle["store_server"].items():
            print(f"  store server (pid {pid}): peak {mem.get('VmHWM')} MiB, now {mem.get('VmRSS')} MiB")


if __name__ == "__main__":
    raise SystemExit(main())
