"""Coding-agent session import at scale: `ocat --import-history FOLDER --from claude-code` of a
generated ~/.claude/projects against the raw model, then reruns over it unchanged and grown.

The folder is written here: `<projects>/<encoded cwd>/<session>.jsonl`, several projects, each
session of the shape Claude Code writes (a summary line, bookkeeping records, human prompts,
thinking blocks, assistant text, and mostly tool_use / tool_result records: files read of
tens of KB, test logs, greps, edits and writes, each output also repeated in the record's
`toolUseResult` as Claude Code does), about `--mb` megabytes over `--sessions` files. Most of
the bytes are tool output, which the import leaves out; what it keeps (each prompt with the
agent's text and a "(used Read, Bash)" line) is a few per cent of the folder.

Each import is a fresh process (the CLI) with its own HOME and state folder:

0. the folder read alone, as the import reads it (no store, no model): time and peak RSS;
1. the first import, on a fresh store: wall time, exchanges/s, the kept text's size, peak RSS;
2. the raw model on the same inputs the store embeds of the kept text (each exchange's text,
   its prompt, and the passage windows of a text past the model's first window), and the
   ratio of the two rates;
3. a rerun over the unchanged folder (the requirement: under 5 s for 1,000 sessions);
4. one session grown by `--grow` prompts (appended as the agent does) and a rerun: only the
   new turns are added; then another grown the same way with its old modification time put
   back, so only its size tells (a rerun must not trust the time alone).

    python bench/agent_import.py                              # 1,000 sessions, 100 MB: ~17 min
    python bench/agent_import.py --sessions 30 --mb 3         # a quick look (~1 min)
    python bench/agent_import.py --sessions 1000 --mb 500 --prompts 1 --skip-raw   # a 500 MB folder: ~6 min

Times are for a 2-core machine with a test suite on the other core. The first import and the
raw model take nearly all of it (both embed the kept text, ~3-6 exchanges/s there); writing
the folder takes about 1 s per 100 MB, reading it alone 1 s per 150 MB, a rerun a few seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from ingest import raw_embed, run_cli  # noqa: E402
from smoke import threads  # noqa: E402
from startup import python_start  # noqa: E402

DEFAULT_MODEL = REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2-int8"
PROJECTS = ("ferry", "ledger", "tide-tables", "parser", "kitchen-planner", "deploy-tools", "invoice-api",
            "garden-sensor", "lexer", "backup-agent", "tram-map", "recipes")
WORDS = (
    "the a to of and in is it that for this we test file function error fix add parser token lexer "
    "grammar cache index query latency deploy staging release rollback invoice ledger postgres backup "
    "timetable ferry tide harbour schedule sunday timezone config module import class method return "
    "value list dict key missing none type check assert raise exception handler retry timeout async "
    "await thread lock queue worker batch stream buffer line column offset encoding utf8 path folder "
    "branch commit merge rebase diff patch review docs readme coverage flaky slow fast memory leak"
).split()
TOOLS_USED = ("Read", "Bash", "Grep", "Edit", "Write", "Glob", "TodoWrite")


class Writer:
    """Claude Code records for one session, written as they are made; counts bytes, and keeps
    what the import should keep of it (each prompt and the answer it will be given)."""

    def __init__(self, handle: Any, session_id: str, cwd: str, rng: random.Random, clock: float) -> None:
        self.handle, self.session_id, self.cwd, self.rng = handle, session_id, cwd, rng
        self.clock = clock
        self.last: str | None = None
        self.bytes = 0
        self.kept: list[tuple[str, str]] = []

    def line(self, record: dict[str, Any]) -> None:
        data = (json.dumps(record) + "\n").encode()
        self.handle.write(data)
        self.bytes += len(data)

    def record(self, kind: str, message: dict[str, Any], **extra: Any) -> None:
        self.clock += self.rng.uniform(1, 40)
        uuid = "%08x-%04x-4%03x-8%03x-%012x" % tuple(self.rng.getrandbits(b) for b in (32, 16, 12, 12, 48))
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.clock)) + ".000Z"
        self.line({"parentUuid": self.last, "isSidechain": False, "userType": "external", "cwd": self.cwd,
                   "sessionId": self.session_id, "version": "1.0.98", "gitBranch": "main", "type": kind,
                   "message": message, "uuid": uuid, "timestamp": stamp, **extra})
        self.last = uuid

    def assistant(self, block: dict[str, Any]) -> None:
        self.record("assistant", {"id": "msg_01", "type": "message", "role": "assistant",
                                  "model": "claude-sonnet-4", "content": [block]})

    def bookkeeping(self) -> None:
        """What Claude Code writes around a slash command: nothing the import keeps."""
        self.line({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}, "isSnapshotUpdate": False})
        self.record("user", {"role": "user", "content": "Caveat: The messages below were generated by the user "
                                                        "while running local commands."}, isMeta=True)
        self.record("user", {"role": "user", "content": "<command-name>/clear</command-name>\n"
                                                        "<command-message>clear</command-message>\n<command-args></command-args>"})
        self.record("user", {"role": "user", "content": "<local-command-stdout></local-command-stdout>"})

    def turn(self, budget: int, pool: str) -> None:
        """A prompt and the agent's work on it until the turn holds about `budget` bytes:
        thinking, tool calls with their (large) outputs, text between them, a closing text."""
        rng = self.rng
        start = self.bytes
        prompt = words(rng, rng.randint(8, 60))
        self.record("user", {"role": "user", "content": prompt})
        answers: list[str] = []
        used: list[str] = []
        self.assistant({"type": "thinking", "thinking": words(rng, rng.randint(40, 300)), "signature": "EqQBCkYIBxgC"})
        while True:
            name = rng.choice(TOOLS_USED)
            left = budget - (self.bytes - start)
            size = max(500, min(rng.randint(2_000, 40_000), left // 2))  # the output is written twice
            self.tool(name, size, pool)
            if name not in used:
                used.append(name)
            if rng.random() < 0.4:
                said = words(rng, rng.randint(10, 80))
                self.assistant({"type": "text", "text": said})
                answers.append(said)
            if self.bytes - start >= budget:
                break
        said = words(rng, rng.randint(20, 150))
        self.assistant({"type": "text", "text": said})
        answers.append(said)
        self.kept.append((prompt, "\n\n".join(answers) + f"\n\n(used {', '.join(used)})"))

    def tool(self, name: str, size: int, pool: str) -> None:
        """A tool_use and its tool_result, `size` characters of output (repeated in toolUseResult)."""
        rng = self.rng
        at = rng.randrange(0, len(pool) - size)
        output = pool[at : at + size]
        path = f"{self.cwd}/src/{rng.choice(WORDS)}_{rng.randint(1, 99)}.py"
        tool_input: dict[str, Any] = {
            "Read": {"file_path": path},
            "Bash": {"command": "python -m pytest -q -x tests/", "description": "Run the tests"},
            "Grep": {"pattern": rng.choice(WORDS), "path": self.cwd, "output_mode": "content"},
            "Edit": {"file_path": path, "old_string": output[: size // 4], "new_string": output[size // 4 : size // 2]},
            "Write": {"file_path": path, "content": output[: size // 2]},
            "Glob": {"pattern": "**/*.py"},
            "TodoWrite": {"todos": [{"content": words(rng, 8), "status": "pending", "id": "1"}]},
        }[name]
        call = "toolu_01" + "%022x" % rng.getrandbits(88)
        self.assistant({"type": "tool_use", "id": call, "name": name, "input": tool_input})
        result = output if name in ("Read", "Bash", "Grep", "Glob") else f"The file {path} has been updated."
        self.record("user", {"role": "user", "content": [{"tool_use_id": call, "type": "tool_result", "content": result}]},
                    toolUseResult={"stdout": result, "stderr": "", "interrupted": False})


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, k=n)).capitalize() + "."


def code_pool(rng: random.Random, chars: int = 2_000_000) -> str:
    """Text that looks like files read and test logs (what tool outputs are), to slice from."""
    lines, size, n = [], 0, 0
    while size < chars:
        n += 1
        kind = rng.random()
        if kind < 0.5:
            line = f"{n:6d}\t    {rng.choice(WORDS)}_{rng.choice(WORDS)} = {rng.choice(WORDS)}({rng.randint(0, 999)})"
        elif kind < 0.8:
            line = f"tests/test_{rng.choice(WORDS)}.py::test_{rng.choice(WORDS)}_{rng.choice(WORDS)} PASSED [{n % 100:3d}%]"
        else:
            line = f"E   AssertionError: assert {rng.randint(0, 99)} == {rng.randint(0, 99)}  # {words(rng, 6)}"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def write_projects(root: Path, sessions: int, megabytes: float, prompts: int, seed: int = 11) -> list[dict[str, Any]]:
    """The folder: `sessions` files of about megabytes/sessions each, spread over the projects;
    returns each session's path and the exchanges the import should keep of it."""
    rng = random.Random(seed)
    pool = code_pool(rng)
    per_session = int(megabytes * 1_000_000 / sessions)
    made = []
    for n in range(sessions):
        cwd = f"/home/ada/src/{PROJECTS[n % len(PROJECTS)]}"
        session_id = "%08x-%04x-4%03x-8%03x-%012x" % tuple(rng.getrandbits(b) for b in (32, 16, 12, 12, 48))
        path = root / cwd.replace("/", "-") / f"{session_id}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        count = rng.randint(1, 2 * prompts - 1)  # `prompts` on average
        with path.open("wb") as handle:
            writer = Writer(handle, session_id, cwd, rng, 1_750_000_000.0 + n * 7200)
            writer.line({"type": "summary", "summary": words(rng, 6), "leafUuid": "not-yet"})
            if rng.random() < 0.3:
                writer.bookkeeping()
            for _ in range(count):
                writer.turn(per_session // count, pool)
        made.append({"path": path, "kept": writer.kept, "session_id": session_id, "cwd": cwd,
                     "clock": writer.clock, "last": writer.last, "seed": n})
    return made


def grow(session: dict[str, Any], turns: int, keep_mtime: bool) -> int:
    """Append `turns` prompts and their work to a session, as the agent does; with `keep_mtime`
    the file's old modification time is put back (only its size says it grew). Returns the
    bytes added."""
    path: Path = session["path"]
    before = path.stat()
    rng = random.Random(10_000 + session["seed"])
    with path.open("ab") as handle:
        writer = Writer(handle, session["session_id"], session["cwd"], rng, session["clock"])
        writer.last = session["last"]
        for _ in range(turns):
            writer.turn(60_000, code_pool(rng, 200_000))
    if keep_mtime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    session["kept"] += writer.kept
    return path.stat().st_size - before.st_size


def passage_windows(texts: list[str], model: Path) -> list[str]:
    """The passage windows the store embeds for `texts` (those past each text's first window)."""
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder, passages_of

    embedder = OnnxMiniLMEmbedder(model, threads=threads())
    return [window for text in texts for window in passages_of(embedder, text)]


def child_read(folder: Path) -> None:
    """(In a child process) read every session of the folder as the import does, without the
    store or the model; print the time, the exchanges and the peak RSS."""
    import resource

    from ocat.history_import import ImportedConversation, read_history
    from ocat.operations.history import exchanges_of

    started = time.perf_counter()
    sessions = exchanges = 0
    for item in read_history(folder, "claude-code"):
        if isinstance(item, ImportedConversation):
            sessions += 1
            exchanges += len(exchanges_of(item))
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(json.dumps({"seconds": round(seconds, 1), "sessions": sessions, "exchanges": exchanges, "peak_rss_mib": peak}))


def read_alone(folder: Path) -> dict[str, Any]:
    """The reading alone (child_read in a fresh process)."""
    done = subprocess.run([*python_start(), __file__, "--child-read", str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"agent_import: reading the folder failed: {done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Write the folder, import it, rerun it unchanged and grown; print the figures."""
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--child-read":
        child_read(Path(sys.argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000, help="session files (default 1000)")
    parser.add_argument("--mb", type=float, default=100.0, help="the folder's size in MB (default 100)")
    parser.add_argument("--prompts", type=int, default=2, help="prompts per session on average (default 2)")
    parser.add_argument("--grow", type=int, default=2, help="prompts appended to a session before the last reruns")
    parser.add_argument("--skip-raw", action="store_true", help="do not time the raw model (saves as long as the import)")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)

    from ocat.records import exchange_text

    report: dict[str, Any] = {"loadavg_start": _load()}
    with tempfile.TemporaryDirectory(prefix="ocat-agent-import-") as folder:
        scratch = Path(folder)
        projects, home, store = scratch / "home" / ".claude" / "projects", scratch / "home", scratch / "store"
        os.environ["XDG_STATE_HOME"] = str(home / "state")  # the session ledger: this run's, never the user's

        started = time.perf_counter()
        made = write_projects(projects, args.sessions, args.mb, args.prompts)
        folder_bytes = sum(s["path"].stat().st_size for s in made)
        pairs = [pair for s in made for pair in s["kept"]]
        texts = [exchange_text(prompt, answer) for prompt, answer in pairs]
        prompts = [prompt for prompt, _ in pairs]
        kept_bytes = sum(len(t.encode()) for t in texts)
        report["folder"] = {
            "sessions": len(made), "projects": len({s["cwd"] for s in made}), "megabytes": round(folder_bytes / 1e6, 1),
            "exchanges": len(pairs), "kept_text_megabytes": round(kept_bytes / 1e6, 2),
            "kept_share": f"{100 * kept_bytes / folder_bytes:.1f}%", "write_seconds": round(time.perf_counter() - started, 1),
        }
        _say(args, f"folder: {report['folder']}")

        report["read"] = read_alone(projects)
        assert report["read"]["exchanges"] == len(pairs), report["read"]
        _say(args, f"read alone: {report['read']}")

        command = ["--import-history", str(projects), "--from", "claude-code"]
        first = run_cli(command, home, store, args.model, None)
        outcome = first["result"]
        assert outcome["exchanges"] == len(pairs), f"imported {outcome['exchanges']} exchanges, expected {len(pairs)}"
        assert outcome["new"] == len(made) and not outcome["problems"], outcome
        report["import"] = {"seconds": round(first["seconds"], 1), "per_s": round(len(pairs) / first["seconds"], 1),
                            "kept_mb_per_s": round(kept_bytes / 1e6 / first["seconds"], 3),
                            "folder_mb_per_s": round(folder_bytes / 1e6 / first["seconds"], 2),
                            "peak_rss_mib": first["peak_rss_mib"]}
        _say(args, f"import: {report['import']}")

        if not args.skip_raw:
            # Everything the store embeds of the kept text: each exchange's first window, its
            # prompt, and the passage windows of its text past the first (ocat.memory.storage.
            # prompt_vectors); the model alone on these is the rate the import can reach.
            passages = passage_windows(texts, args.model)
            raw = raw_embed(texts + prompts + passages, args.model)
            report["raw"] = {"seconds": round(raw, 1), "per_s": round(len(pairs) / raw, 1),
                             "passages": len(passages), "ratio": round(raw / first["seconds"], 2)}
            _say(args, f"raw model: {report['raw']}")

        again = run_cli(command, home, store, args.model, None)
        outcome = again["result"]
        assert outcome["exchanges"] == 0 and outcome["already_here"] == len(made), outcome
        report["rerun"] = {"seconds": round(again["seconds"], 2), "peak_rss_mib": again["peak_rss_mib"]}
        _say(args, f"rerun unchanged: {report['rerun']}")

        for label, session, keep_mtime in (("grown", made[0], False), ("grown_same_mtime", made[1], True)):
            added = grow(session, args.grow, keep_mtime)
            run = run_cli(command, home, store, args.model, None)
            outcome = run["result"]
            assert outcome["exchanges"] == args.grow and outcome["grown"] == 1, outcome
            assert outcome["already_here"] == len(made) - 1, outcome
            report[label] = {"seconds": round(run["seconds"], 2), "added": outcome["exchanges"],
                             "bytes_appended": added, "peak_rss_mib": run["peak_rss_mib"]}
            _say(args, f"rerun {label}: {report[label]}")
    report["loadavg_end"] = _load()

    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(table(report))
    return 0


def table(report: dict[str, Any]) -> str:
    """The figures as a small Markdown table."""
    f, imp = report["folder"], report["import"]
    rows = [
        f"{f['sessions']:,} sessions in {f['projects']} projects, {f['megabytes']} MB; {f['exchanges']:,} exchanges, "
        f"kept text {f['kept_text_megabytes']} MB ({f['kept_share']} of the folder)",
        "",
        "| | time | exchanges/s | peak RSS |",
        "|---|---|---|---|",
        f"| reading alone (no store, no model) | {report['read']['seconds']} s | | {report['read']['peak_rss_mib']} MiB |",
        f"| first import | {imp['seconds']} s | {imp['per_s']} | {imp['peak_rss_mib']} MiB |",
    ]
    if "raw" in report:
        rows.append(f"| raw model, same inputs (texts, prompts, {report['raw']['passages']} passage windows) "
                    f"| {report['raw']['seconds']} s | {report['raw']['per_s']} | |")
        rows.append(f"| ratio | | **{report['raw']['ratio']}x** | |")
    rows.append(f"| rerun, unchanged | **{report['rerun']['seconds']} s** | | {report['rerun']['peak_rss_mib']} MiB |")
    for label, name in (("grown", "rerun, one session grown"), ("grown_same_mtime", "rerun, grown, old mtime")):
        g = report[label]
        rows.append(f"| {name} (+{g['added']} exchanges) | {g['seconds']} s | | {g['peak_rss_mib']} MiB |")
    rows.append(f"\nload average {report['loadavg_start']} -> {report['loadavg_end']}")
    return "\n".join(rows)


def _say(args: argparse.Namespace, line: str) -> None:
    if not args.json:
        print(line, file=sys.stderr, flush=True)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    raise SystemExit(main())
