"""Coding agents' session logs (Claude Code, Codex): where they live, which format a path holds,
their JSON Lines read one line at a time, and a session's prompts and answers made into exchanges.

Both agents write one JSON Lines file per session and append to it as the session goes on; so a
file may end in the middle of a line the agent is still writing (read up to the last whole line,
without a word), and a line that does not parse is named (FILE:LINE) and passed over.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, BinaryIO

from ocat.errors import InputFileError
from ocat.history_import.model import ImportedExchange, SessionFile
from ocat.input_files import refuse_special

CLAUDE_CODE = "claude-code"
CODEX = "codex"
AGENT_FORMATS = (CLAUDE_CODE, CODEX)
"""The coding agents' formats, as `--from` names them."""

# The `type` of every line Claude Code writes, and of every line Codex writes (with a payload).
CLAUDE_CODE_TYPES = frozenset({"user", "assistant", "summary", "system", "queue-operation", "file-history-snapshot"})
CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
# Sub-agents' sessions (Claude Code's Task tool): their prompts are the main agent's, not the
# user's, and what they found is in the main session's answer already.
SIDECHAIN_PREFIX = "agent-"
# How many .jsonl files of a folder are looked at to tell which agent wrote them.
_FILES_TO_TELL = 20
# How deep a folder is searched for sessions: Codex keeps sessions/YYYY/MM/DD/, Claude Code
# projects/<folder>/<session>/subagents/; one more for the agent's own folder (~/.codex).
_DEPTH = 5
# A hook's JSON is a few hundred bytes; a file bigger than this is no hook's.
_HOOK_BYTES = 64 * 1024
MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest session line read, in bytes. A line holds one record: a prompt, an answer's
piece, a tool's output (a file read whole, a screenshot); one longer than this (a 1 GB log
pasted into a tool's output took 3.3 GB to decode) is skipped and named, and the rest of the
file is read. As large as the longest message an import takes (operations.history)."""
# How much of a skipped line is read at a time while passing over it.
_SKIP_BYTES = 1 << 20


def default_folder(fmt: str, environ: dict[str, str] | None = None) -> Path:
    """Where the agent keeps its sessions: ~/.claude/projects, or $CODEX_HOME/sessions
    (~/.codex/sessions when CODEX_HOME is not set)."""
    env = os.environ if environ is None else environ
    if fmt == CLAUDE_CODE:
        return Path.home() / ".claude" / "projects"
    codex_home = env.get("CODEX_HOME")
    return (Path(codex_home).expanduser() if codex_home else Path.home() / ".codex") / "sessions"


def session_files(path: Path) -> Iterator[Path]:
    """The session files at `path`: the file itself, or a folder's *.jsonl files (sub-folders
    too, in name order, links not followed), leaving out sub-agents' files (agent-*.jsonl)."""
    if not path.is_dir():
        yield path
        return
    yield from _walk(path, _DEPTH)


def _walk(folder: Path, depth: int) -> Iterator[Path]:
    try:
        children = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError:
        return  # an unreadable sub-folder holds nothing we can read
    for entry in children:
        if entry.name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False):
            if depth > 1:
                yield from _walk(Path(entry.path), depth - 1)
        elif (
            entry.name.endswith(".jsonl")
            and not entry.name.startswith(SIDECHAIN_PREFIX)
            and entry.is_file(follow_symlinks=False)
        ):
            yield Path(entry.path)


def agent_format(path: Path) -> str | None:
    """"claude-code" or "codex" when `path` is a session file of one (or a folder that holds
    them), told from the first lines' content; None when it is neither."""
    for number, file in enumerate(session_files(path)):
        if number >= _FILES_TO_TELL:
            break
        if not path.is_dir() or file.suffix == ".jsonl":
            found = _format_of_file(file)
            if found:
                return found
    return None


def _format_of_file(file: Path) -> str | None:
    try:
        with file.open("rb") as handle:
            if handle.read(1) != b"{":  # a JSON array (a data export), SQLite, a zip: not a session
                return None
            handle.seek(0)
            for _, line in zip(range(_FILES_TO_TELL), handle):
                try:
                    record = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                found = format_of_record(record)
                if found:
                    return found
    except OSError:
        return None
    return None


def format_of_record(record: Any) -> str | None:
    """Which agent wrote a session line: Codex's carry a `payload`, Claude Code's do not."""
    if not isinstance(record, dict):
        return None
    kind = record.get("type")
    if kind in CODEX_TYPES and "payload" in record:
        return CODEX
    if kind in CLAUDE_CODE_TYPES:
        return CLAUDE_CODE
    return None


def hook_transcript(path: Path) -> Path | None:
    """The session a Claude Code hook names (`transcript_path` of the JSON it sends on stdin),
    when `path` holds such a JSON object; None otherwise."""
    try:
        if path.stat().st_size > _HOOK_BYTES:
            return None
        payload = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(payload, dict) or "hook_event_name" not in payload and "session_id" not in payload:
        return None
    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not transcript:
        return None
    return Path(transcript).expanduser()


def stamp(file: Path) -> SessionFile:
    """The file's size and modification time now (InputFileError when it cannot be read)."""
    try:
        found = file.stat()
    except FileNotFoundError:
        raise InputFileError(f"no such file or folder: {file}") from None
    except OSError as exc:
        raise InputFileError(f"cannot read {file}: {exc.strerror or exc}") from None
    return SessionFile(file, found.st_size, found.st_mtime_ns)


def noting(warnings: list[str], warn: Callable[[str], None] | None) -> Callable[[str], None]:
    """A `warn` for `records` that keeps each line in `warnings` (the session's, for its result)
    and passes it on to `warn`, when there is one (the import's progress)."""

    def note(line: str) -> None:
        warnings.append(line)
        if warn is not None:
            warn(line)

    return note


def records(file: Path, warn: Callable[[str], None]) -> Iterator[dict[str, Any]]:
    """Each line of a JSON Lines file as an object, one at a time. A line that is not a JSON
    object, or is longer than MAX_LINE_BYTES, is passed over and named (`warn("FILE:LINE: ...")`);
    a last line without its newline that does not parse is one the agent is still writing, and
    is left for the next import."""
    refuse_special(file)  # a pipe would block on open, a device (/dev/zero) never end
    try:
        handle = file.open("rb")
    except FileNotFoundError:
        raise InputFileError(f"no such file: {file}") from None
    except OSError as exc:
        raise InputFileError(f"cannot read {file}: {exc.strerror or exc}") from None
    with handle:
        for number, line in _lines(handle, file, warn):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError) as exc:
                if not line.endswith(b"\n"):
                    return  # being written
                warn(f"{file}:{number}: not a JSON line ({_why(exc)}), skipped")
                continue
            if not isinstance(record, dict):
                warn(f"{file}:{number}: not a JSON object, skipped")
                continue
            yield record


def _lines(handle: BinaryIO, file: Path, warn: Callable[[str], None]) -> Iterator[tuple[int, bytes]]:
    """The file's lines with their numbers, each read with a bound: a line longer than
    MAX_LINE_BYTES is read past a chunk at a time (never held whole) and named."""
    bound = MAX_LINE_BYTES  # read at each call, so a test can lower it
    number = 0
    while True:
        line = handle.readline(bound + 1)
        if not line:
            return
        number += 1
        if len(line) <= bound:
            yield number, line
            continue
        size = len(line)
        while not line.endswith(b"\n"):
            line = handle.readline(_SKIP_BYTES)
            if not line:
                break
            size += len(line)
        warn(f"{file}:{number}: a line of {size:,} bytes is over the limit of {bound:,} bytes, skipped")


def _why(exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc).split(":")[0]


def absolute_folder(value: str) -> str:
    """A session's working folder when it is an absolute path (POSIX or Windows), else ""."""
    if not value:
        return ""
    return value if PurePosixPath(value).is_absolute() or PureWindowsPath(value).is_absolute() else ""


def title_from(prompt: str, width: int = 80) -> str:
    """A thread title from a prompt: its first line that says something, cut to `width`."""
    line = next((line.strip() for line in prompt.splitlines() if line.strip()), "")
    line = " ".join(line.split())
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"


@dataclass
class _Open:
    """The exchange being gathered: its prompt, the answer's pieces and the tools used."""

    prompt: str
    timestamp: float | None
    source_id: str
    git_branch: str
    # Dropped when nothing answered it (a slash command such as /clear).
    needs_answer: bool
    answers: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)


class ExchangeBuilder:
    """A session's prompts, answers and tool calls, in the order they were written, made into
    exchanges: each human prompt with the agent's text up to the next one, and the tools it
    used named on one line at the end ("(used Read, Edit)").

    The tool names are kept because an agent's answer is often just "Done.": what it read,
    edited or ran is what makes the fix findable later. Their inputs and outputs are not (a
    file's content, a test run's output): they would bury the conversation in the search."""

    def __init__(self) -> None:
        self.exchanges: list[ImportedExchange] = []
        self.current: _Open | None = None

    def prompt(
        self, text: str, timestamp: float | None, source_id: str, git_branch: str = "", *, needs_answer: bool = False
    ) -> None:
        """A human prompt: the exchange before it is complete."""
        self._close()
        self.current = _Open(text, timestamp, source_id, git_branch, needs_answer)

    def answer(self, text: str, timestamp: float | None, source_id: str) -> None:
        """A piece of the agent's answer (text before any prompt starts an exchange without one)."""
        if not text or text.isspace():
            return
        self._started(timestamp, source_id).answers.append(text.strip())

    def tool(self, name: str, timestamp: float | None, source_id: str) -> None:
        """A tool the agent called while answering."""
        current = self._started(timestamp, source_id)
        if name and name not in current.tools:
            current.tools.append(name)

    def build(self) -> tuple[ImportedExchange, ...]:
        """Every exchange, in order; the last is marked maybe unfinished when its answer holds no
        text (the file was read mid-turn: the prompt written, the answer not yet, or only tools)."""
        last, before = self.current, len(self.exchanges)
        self._close()
        if last is not None and not last.answers and len(self.exchanges) > before:
            self.exchanges[-1] = replace(self.exchanges[-1], maybe_unfinished=True)
        return tuple(self.exchanges)

    def _started(self, timestamp: float | None, source_id: str) -> _Open:
        if self.current is None:
            self.current = _Open("", timestamp, source_id, "", needs_answer=True)
        return self.current

    def _close(self) -> None:
        current, self.current = self.current, None
        if current is None or (current.needs_answer and not current.answers and not current.tools):
            return
        answer = "\n\n".join(current.answers)
        if current.tools:
            used = f"(used {', '.join(current.tools)})"
            answer = f"{answer}\n\n{used}" if answer else used
        self.exchanges.append(
            ImportedExchange(current.prompt, answer, current.timestamp, current.source_id, current.git_branch)
        )
