"""The prompt history both chats share, in prompt_toolkit's FileHistory format.

Entries are separated by a `# <time>` line and each of their lines is prefixed with `+`,
so the line-mode chat (prompt_toolkit) and the full-screen chat read one file. The file keeps
each prompt without its credentials (`kept_prompt`): it stays on disk for good, like memory.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from ocat.config.locations import data_dir
from ocat.text.secrets import redact_secrets

MAX_ENTRIES = 1000


def history_file() -> Path:
    """Where prompts are kept (`$XDG_DATA_HOME/ocat/history`)."""
    return data_dir() / "history"


def load_history(path: Path | None = None, *, limit: int = MAX_ENTRIES) -> list[str]:
    """The last `limit` prompts, oldest first; a missing or unreadable file is an empty history."""
    target = path or history_file()
    try:
        lines = target.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    entries: list[str] = []
    current: list[str] = []
    for line in lines:
        if line.startswith("+"):
            current.append(line[1:])
        elif current:
            entries.append("\n".join(current))
            current = []
    if current:
        entries.append("\n".join(current))
    return entries[-limit:]


def kept_prompt(prompt: str) -> str:
    """A prompt as the history file keeps it: keys, tokens and passwords replaced by placeholders."""
    return redact_secrets(prompt).text


def append_history(prompt: str, path: Path | None = None) -> None:
    """Add one prompt; failures to write are ignored (history is a convenience, not memory)."""
    target = path or history_file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a", encoding="utf-8") as handle:
            handle.write(f"\n# {datetime.now()}\n")
            for line in kept_prompt(prompt).split("\n"):
                handle.write(f"+{line}\n")
    except OSError:
        pass
