"""The files beside a shared store that say who owns it and where it is served, and what a
process that waits for the store is told (ocat.memory.sharing.owner_lock).

`.ocat-owner.json` (the owner's pid, command, whether it serves) and `.ocat-server.json` (the
server's address) are believed only while the owner's lock is held: they are written whole
(a reader never sees half a file), and an address only once a server answers there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ocat.memory.storage.chroma import HEARTBEAT_SECONDS, server_answers
from ocat.memory.sharing.lock_holders import (
    OWNER_FILE,
    is_stopped,
    own_command,
    process_exists,
    process_state,
    read_holder,
)

SERVER_FILE = ".ocat-server.json"


def read_server(path: Path) -> tuple[str, int] | None:
    """The address in `.ocat-server.json`, if a Chroma server answers there.

    A heartbeat, not a connect: a stopped server's socket still accepts connections.
    """
    info = server_info(path)
    if info is None:
        return None
    host, port, _ = info
    return (host, port) if server_answers(host, port, HEARTBEAT_SECONDS) else None


def server_info(path: Path) -> tuple[str, int, int | None] | None:
    try:
        info = json.loads((path / SERVER_FILE).read_text(encoding="utf-8"))
        server_pid = info.get("server_pid")
        return str(info["host"]), int(info["port"]), int(server_pid) if server_pid is not None else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_server(path: Path, port: int, server_pid: int) -> None:
    write_json(path / SERVER_FILE, {"host": "127.0.0.1", "port": port, "pid": os.getpid(), "server_pid": server_pid})


def write_owner(path: Path, *, serves: bool, closing: bool = False) -> None:
    # Only for other processes' waiting messages: a folder where it cannot be written still works.
    record: dict[str, Any] = {"pid": os.getpid(), "command": own_command(), "serves": serves}
    if closing:
        record["closing"] = True
    try:
        write_json(path / OWNER_FILE, record)
    except OSError:
        (path / OWNER_FILE).unlink(missing_ok=True)


def write_json(target: Path, data: dict[str, Any]) -> None:
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(data), encoding="utf-8")
    partial.replace(target)  # readers never see half a file


def handing_over(path: Path) -> bool:
    """Whether the store's owner is giving it up (stopping its server, then letting go of the lock)."""
    holder = read_holder(path)
    return holder is not None and holder.closing


def why_busy(path: Path) -> str:
    """What a process that cannot take the store waits for, in words."""
    holder = read_holder(path)
    who = holder.describe() if holder else "another ocat process"
    if holder is not None and holder.closing:
        return f"{who} is closing, and hands it over once its memory server has stopped"
    info = server_info(path)
    if info is not None:
        host, port, server_pid = info
        url = f"http://{host}:{port}"
        if server_pid is not None and (process_state(server_pid) in ("Z", "X") or not process_exists(server_pid)):
            return f"{who} holds it, and its memory server at {url} has exited"
        if any(is_stopped(pid) for pid in (server_pid, holder.pid if holder else None) if pid):
            return f"{who} holds it, and its memory server at {url} is stopped, by Ctrl+Z perhaps ({_RESUME})"
        return f"{who} holds it, and its memory server at {url} does not answer (is it stopped, by Ctrl+Z?)"
    if holder is not None and is_stopped(holder.pid):
        return f"{who} holds it and is stopped, by Ctrl+Z perhaps ({_RESUME})"
    if holder is not None and holder.serves:
        return f"{who} holds it and is starting its memory server"
    return f"{who} holds it and does not share it (a one-shot command, such as --add-to-vector-store)"


_RESUME = "`fg` in its terminal resumes it"


