"""Asking on a terminal, in the line mode, whether the model may call an MCP server's tool: one
letter and Enter. Nothing typed before the question answers it, and no line is lost.

The question comes while the user may be typing their next prompt. What was typed before it
(whole lines and a half-typed one) is read off the terminal first and set aside: it is said,
and it comes back as the start of the next prompt (`set_aside`, which the line mode reads). A
line typed after the question that is no answer is set aside the same way, not dropped.
"""

from __future__ import annotations

import os
import select
import sys
from typing import IO

from ocat.mcp_client.consent import Answer, Ask, ConsentRequest
from ocat.text.terminal import printable, shorten


def line_asker(err: IO[str], set_aside: list[str]) -> Ask:
    """An `Ask` that asks on the terminal (from the turn's tool thread, while no line editor
    reads stdin); what it sets aside is appended to `set_aside`. End of input means no."""

    def ask(request: ConsentRequest) -> Answer | None:
        fd = sys.stdin.fileno()
        early = typed_ahead(fd)
        if early.strip():
            set_aside.append(early)
            err.write(printable(f"ocat: set aside what was typed before this question (it is back at the "
                                f"next prompt): {shorten(' '.join(early.split()), 60)}") + "\n")
        while True:
            err.write(request.question())
            err.flush()
            # Polled, not a blocking read: a turn cancelled meanwhile (Ctrl+C) takes its question
            # back, and the next line typed goes to the prompt, not to a forgotten question.
            while not select.select([fd], [], [], 0.2)[0]:
                if request.abandoned.is_set():
                    err.write("\n")
                    return Answer.NO
            # The descriptor, not sys.stdin: its buffer would keep lines typed after the answer
            # away from the line editor, which reads the descriptor too.
            line = os.read(fd, 4096).decode(errors="replace")
            if not line:
                return Answer.NO
            answer = Answer.from_letter(line)
            if answer is not None:
                return answer
            if line.strip():
                set_aside.append(line)
            err.write("  y (yes, once), a (always) or n (no); what you typed is back at the next prompt\n")

    return ask


def typed_ahead(fd: int) -> str:
    """What waits unread on the terminal `fd`, whole lines and a half-typed one, read without
    waiting; the terminal's mode is left as it was ("" when `fd` is not a terminal)."""
    import termios  # noqa: PLC0415 - POSIX only, and only the line mode on a terminal asks

    try:
        saved = termios.tcgetattr(fd)
    except termios.error:
        return ""
    # Out of canonical mode for a moment: a line not yet ended with Enter becomes readable too
    # (in canonical mode it would wait, and be glued to the answer typed next).
    eager = [*saved[:6], list(saved[6])]
    eager[3] &= ~termios.ICANON
    eager[6][termios.VMIN] = 0
    eager[6][termios.VTIME] = 0
    chunks = []
    try:
        termios.tcsetattr(fd, termios.TCSANOW, eager)
        while select.select([fd], [], [], 0)[0]:
            data = os.read(fd, 4096)
            if not data:
                break
            chunks.append(data)
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)
    return b"".join(chunks).decode(errors="replace")
