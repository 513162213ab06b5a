"""The line-mode chat: a prompt, the answer streamed below it, memory recalled and stored.

Uses prompt_toolkit (history, line editing) on a terminal, and plain line reading when
stdin is a pipe, so the same chat can be scripted.
"""

from __future__ import annotations

import asyncio
import sys
from typing import IO, Callable

from ocat.commands import CommandResult, is_command, run_command
from ocat.errors import OcatError
from ocat.history import history_file
from ocat.models import SearchHit
from ocat.session import ChatSession
from ocat.text import printable


def render_result(result: CommandResult) -> str:
    """A command result as plain text: the message, then the rows in aligned columns.

    Cells quote stored memories, so control characters are escaped (ocat.text.printable).
    """
    lines = [printable(result.text)] if result.text else []
    if result.confirm:
        lines.append(f"To confirm: {result.confirm}")
    if result.rows:
        rows = [tuple(printable(cell) for cell in row) for row in result.rows]
        table = [result.columns, *rows] if result.columns else rows
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        for row in table:
            lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    return "\n".join(lines)


def memory_summary(memories: list[SearchHit], mode: str) -> list[str]:
    """The lines that tell the user which memories the model was given (per display.context_mode)."""
    if mode == "off" or not memories:
        return []
    noun = "memory" if len(memories) == 1 else "memories"
    lines = [f"· Using context from {len(memories)} {noun}"]
    if mode == "on":
        from ocat.memory.retrieval import reasons

        for hit, why in zip(memories, reasons(memories)):
            lines.append(f"  {hit.score:.2f}  {why:<13} {hit.when()}  {printable(hit.excerpt(70))}")
    return lines


def _line_reader(interactive: bool) -> Callable[[], str]:
    if not interactive:
        def read_piped() -> str:
            line = sys.stdin.readline()
            if not line:
                raise EOFError
            return line.rstrip("\n")

        return read_piped
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    path = history_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    prompt_session: PromptSession[str] = PromptSession(history=FileHistory(str(path)))
    return lambda: prompt_session.prompt("› ")


async def _stream_answer(session: ChatSession, prompt: str, out: IO[str], err: IO[str]) -> tuple[str, list[SearchHit]]:
    memories = session.recall(prompt)
    # Which memories were used is a status, not the answer: stderr, so `echo ... | ocat` gives
    # the answer alone on stdout.
    for line in memory_summary(memories, session.settings.display.context_mode):
        err.write(line + "\n")
    err.flush()
    request = session.request(prompt, memories)
    pieces: list[str] = []
    async for piece in session.stream(request):
        pieces.append(piece)
        # The model may repeat escape sequences it read in a memory; they are shown, not obeyed.
        out.write(printable(piece))
        out.flush()
    return "".join(pieces), memories


def _progress_printer(err: IO[str]) -> Callable[[str, int, int], None]:
    """Progress of a long command on stderr, throttled like the headless commands' progress."""
    from ocat.memory.ingest import throttled_progress

    printers: dict[str, Callable[[int, int], None]] = {}

    def report(label: str, done: int, total: int) -> None:
        if label not in printers:
            printers[label] = throttled_progress(lambda d, t: err.write(f"{printable(label)}: {d}/{t} chunks stored\n"))
        printers[label](done, total)

    return report


def run_repl(session: ChatSession, *, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """Chat until /quit or end of input; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    interactive = sys.stdin.isatty()
    read_line = _line_reader(interactive)
    if interactive:
        state = "memory on" if session.memory_on else "memory off"
        out.write(f"ocat · {session.settings.llm.model} · {state} · /help for commands, /quit to leave\n")
    if session.memory_error:
        err.write(f"ocat: memory is off: {session.memory_error}\n")
    session.on_progress = _progress_printer(err)
    while True:
        try:
            prompt = read_line()
        except (EOFError, KeyboardInterrupt):
            return 0
        if not prompt.strip():
            continue
        if is_command(prompt.strip()):
            try:
                result = run_command(session, prompt.strip())
            except KeyboardInterrupt:
                # Ctrl+C during a long /vdoc: whole batches are stored, and the same command completes it.
                err.write("ocat: interrupted; what was stored is kept, and the same command completes it\n")
                continue
            if result.quit:
                return 0
            if result.theme is not None:
                err.write("ocat: themes apply to the full-screen chat\n")
                continue
            if result.redraw:
                for exchange in session.history:
                    out.write(printable(f"› {exchange.user_prompt}\n{exchange.assistant_response}") + "\n\n")
            (err if result.error else out).write(render_result(result) + "\n")
            continue
        had_memory = session.memory_on
        try:
            answer, memories = asyncio.run(_stream_answer(session, prompt, out, err))
        except KeyboardInterrupt:
            # A cancelled turn keeps what was shown but is not remembered.
            out.write("\n[cancelled]\n")
            continue
        except OcatError as exc:
            err.write(f"ocat: {printable(str(exc))}\n")
            continue
        except Exception as exc:  # a bug must not end the chat: say it, log it, go on
            from ocat.logs import log_failure

            err.write(f"ocat: {printable(log_failure('the answer', exc))}\n")
            continue
        out.write("\n")
        session.record(prompt, answer, memories)
        if had_memory and not session.memory_on:
            err.write(f"ocat: memory is off: {session.memory_error}\n")
