"""Who holds a store folder, in words: the owner's own record, and what the OS says of its process.

A process waiting for the store (ocat.memory.sharing.owner_lock) tells the user whom it waits for; the
record is believed only while the lock is held and its process exists.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

LOCK_FILE = ".ocat-owner.lock"
OWNER_FILE = ".ocat-owner.json"


def own_command() -> str:
    """How this process was started, for others' waiting messages: the program, a subcommand,
    and option names only; option values can be secrets (`--set llm.api_key=...`)."""
    argv = sys.argv or [""]
    program = Path(argv[0]).name
    if program == "__main__.py":  # python -m ocat
        program = Path(argv[0]).parent.name
    elif program in ("-c", ""):
        program = "python"
    words = [program]
    for index, arg in enumerate(argv[1:]):
        if arg.startswith("-"):
            words.append(arg.split("=", 1)[0])
        elif index == 0 and re.fullmatch(r"[a-z][a-z-]{0,30}", arg):
            words.append(arg)  # a subcommand, such as `ocat mcp`
    return " ".join(words)[:120]


@dataclass(frozen=True)
class Holder:
    pid: int
    command: str
    serves: bool
    # Set by an owner giving the store up (its server stopping): it hands over in a moment.
    closing: bool = False

    def describe(self) -> str:
        return f"process {self.pid} ({self.command})"


def read_holder(path: Path) -> Holder | None:
    """The lock holder as it recorded itself, or None if unknown.

    Asked only while the lock is held; a record whose process is gone (left by a crash,
    not yet rewritten by the next owner) is ignored.
    """
    try:
        info = json.loads((path / OWNER_FILE).read_text(encoding="utf-8"))
        holder = Holder(int(info["pid"]), str(info.get("command") or "ocat")[:120], bool(info.get("serves")),
                        bool(info.get("closing")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return holder if process_exists(holder.pid) else None


def is_stopped(pid: int) -> bool:
    return process_state(pid) in ("T", "t")


def lock_is_held(path: Path) -> bool:
    from filelock import FileLock, Timeout

    probe = FileLock(str(path / LOCK_FILE), thread_local=False)
    try:
        probe.acquire(timeout=0)
    except Timeout:
        return True
    except OSError:
        return False
    probe.release()
    return False


def process_exists(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would send Ctrl+C there; trust the lock
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def process_state(pid: int) -> str | None:
    """A process's state letter (R, S, T for stopped, Z for exited...) on Linux; None elsewhere or if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the name, in parentheses, may hold spaces
    return fields[0] if fields else None


def duration_words(seconds: float) -> str:
    whole = max(1, round(seconds)) if seconds > 0 else 0
    minutes, rest = divmod(whole, 60)
    if not minutes:
        return f"{rest} s"
    return f"{minutes} min" + (f" {rest} s" if rest else "")
