"""The thread operations: name a thread, delete a whole thread, write a conversation as Markdown.

`/rename`, `/deletethread` and `/export` call these (listing and resolving threads are in
`ocat.operations.lookup`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ocat.errors import UsageError
from ocat.text.limits import MAX_TITLE_CHARS
from ocat import memory
from ocat.text.terminal import clean_title, count_of, local_time, shorten
from ocat.operations.transfer import write_whole

if TYPE_CHECKING:
    from ocat.memory import MemoryStore
    from ocat.records import Exchange

TITLE_CHARS = 60


def default_title(first_prompt: str) -> str:
    """A thread's name until the user gives it one: its first prompt's first line, shortened."""
    line = next((text.strip() for text in first_prompt.splitlines() if text.strip()), "")
    if not line:
        return "(untitled)"
    return shorten(line, TITLE_CHARS)


def rename_thread(store: MemoryStore, thread_id: str, title: str) -> str:
    """Give a thread a title (an empty one brings back its first prompt as its name); returns it."""
    cleaned = clean_title(title)  # controls and bidi overrides out: what is stored always exports and imports
    if len(cleaned) > MAX_TITLE_CHARS:
        raise UsageError(f"a title is at most {MAX_TITLE_CHARS} characters; this one has {len(cleaned)}")
    memory.set_thread_title(store, thread_id, cleaned or None)
    return cleaned


def thread_title(store: MemoryStore, thread_id: str, exchanges: Sequence[Exchange]) -> str:
    """What a thread is called: the title given to it, else its first prompt, shortened."""
    given = store.threads.titles([thread_id]).get(thread_id)
    return given or default_title(exchanges[0].user_prompt if exchanges else "")


@dataclass(frozen=True)
class DeletedThread:
    """What deleting a thread removed."""

    thread_id: str
    title: str
    exchanges: int


def delete_thread(store: MemoryStore, thread_id: str) -> DeletedThread:
    """Delete every exchange of a thread, and its title."""
    exchanges = store.get_thread(thread_id)
    if not exchanges:
        raise UsageError(f"no thread {thread_id!r} in memory")
    title = thread_title(store, thread_id, exchanges)
    removed = store.delete([e.exchange_id for e in exchanges])
    store.threads.set_title(thread_id, None)
    return DeletedThread(thread_id, title, removed)


def conversation_markdown(title: str, exchanges: Sequence[Exchange]) -> str:
    """A conversation as Markdown: a heading, then each prompt and answer, with their times.

    Answers are Markdown already and are written as they are; prompts are quoted, so a
    prompt's own `#` or `---` cannot change the document's outline.
    """
    lines = [f"# {title}", ""]
    if exchanges:
        lines += [f"{count_of(len(exchanges), 'exchange')}, {local_time(exchanges[0].timestamp)} to "
                  f"{local_time(exchanges[-1].timestamp)}; thread {exchanges[0].thread_id}", ""]
    for exchange in exchanges:
        lines.append(f"## You, {local_time(exchange.timestamp, '%Y-%m-%d %H:%M')}")
        lines.append("")
        lines += [f"> {line}" if line else ">" for line in exchange.user_prompt.splitlines()]
        lines += ["", "## Assistant", "", exchange.assistant_response.rstrip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def export_path(target: str | None, title: str, *, folder: Path | None = None) -> Path:
    """Where `/export` writes: the path given (a folder gets a file named after the title), or
    a file named after the title in the current folder."""
    name = "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")
    default = f"ocat-{'-'.join(filter(None, name.split('-')))[:50] or 'conversation'}.md"
    if not target:
        return (folder or Path.cwd()) / default
    path = Path(target).expanduser()
    return path / default if path.is_dir() else path


def export_conversation(title: str, exchanges: Sequence[Exchange], target: str | None) -> Path:
    """Write a conversation as Markdown where `export_path` says, whole or not at all; returns the file."""
    path = export_path(target, title)
    text = conversation_markdown(title, exchanges)
    write_whole(path, lambda out: out.write(text))
    return path
