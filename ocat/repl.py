"""The line-mode chat: a prompt, the answer streamed below it, memory recalled and stored.

Uses prompt_toolkit (history, line editing) on a terminal, and plain line reading when
stdin is a pipe, so the same chat can be scripted.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import textwrap
import threading
from typing import IO, Callable, Sequence

from ocat.commands import (REGISTRY, Choose, CommandResult, Confirm, Send, ShowThemes, is_command, run_command,
                           run_step)
from ocat.commands.results import BrowseMemory, EditFile, EditPrompt, Request
from ocat.errors import OcatError
from ocat.mcp_client.line_consent import line_asker
from ocat.chat.outcomes import TextPiece, ToolFinished, ToolStarted, remembered_words, secrets_words
from ocat.chat.prompt_history import history_file, kept_prompt
from ocat.records import SearchHit
from ocat.operations.add import progress_printer
from ocat.chat.session import ChatSession, open_chat
from ocat.config.settings import ContextMode, Settings
from ocat.chat.turn import Turn
from ocat.text.terminal import packed_columns, printable, shorten
from ocat.config.locations import display_path
from ocat.commands.editing import replace_last
from ocat.completion import command_names, complete
from ocat.editor import edit_file, edit_text
from ocat.llm import model_list
from ocat.logs import log_failure
from ocat.operations.profile import PROFILE_TEMPLATE
from ocat.operations.search import used_memories
from ocat.process_end import KEEP_WAIT_SECONDS, end_by_signal, keep_on_signals


# A fitted column (/vquery's excerpt) never gets narrower than this, however narrow the terminal.
MIN_FIT_WIDTH = 12
# With less room than this, the fitted cell goes on a line of its own under its row (as in the full-screen chat).
STACK_BELOW = 30


def render_result(result: CommandResult) -> str:
    """A command result as plain text: the message, then the rows in aligned columns.

    Cells quote stored memories, so control characters are escaped (ocat.text.terminal.printable).
    """
    lines = [printable(result.text)] if result.text else []
    if result.rows:
        lines.extend(_aligned(result.rows, result.columns, fit=result.fit_column, wrap=result.fit_wraps))
    if result.markdown:
        lines.extend(["", printable(result.markdown).rstrip("\n")])
    return "\n".join(lines)


def _aligned(
    rows: Sequence[tuple[str, ...]], columns: tuple[str, ...] = (), fit: int | None = None, width: int | None = None,
    *, wrap: bool = False,
) -> list[str]:
    """Rows in columns two spaces apart; column `fit` (if any) takes what the terminal's width
    (or `width`) leaves the others, its cells cut with "…" (with `wrap`, the last column's cells
    wrap under themselves instead: /help's descriptions). When that is too narrow to read (less
    than STACK_BELOW), each row's fitted cell goes on a line of its own, under the others."""
    printed = [tuple(printable(cell) for cell in row) for row in rows]
    table = [columns, *printed] if columns else printed
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    if fit is not None:
        total = width or shutil.get_terminal_size().columns
        others = sum(w for i, w in enumerate(widths) if i != fit) + 2 * (len(widths) - 1)
        room = total - others
        if wrap and fit == len(widths) - 1 and room >= STACK_BELOW:
            return [line for row in table for line in _wrapped(row, widths, room, total - room)]
        if room < min(STACK_BELOW, widths[fit]) or wrap:
            return _stacked(table, widths, fit, total, has_header=bool(columns), wrap=wrap)
        widths[fit] = min(widths[fit], max(MIN_FIT_WIDTH, room))
        table = [tuple(shorten(c, widths[fit]) if i == fit else c for i, c in enumerate(row)) for row in table]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in table]


def _wrapped(row: tuple[str, ...], widths: list[int], room: int, indent: int) -> list[str]:
    """One row whose last cell wraps to `room` columns, its further lines indented under it."""
    head = "  ".join(cell.ljust(width) for cell, width in zip(row[:-1], widths)) + ("  " if len(row) > 1 else "")
    parts = textwrap.wrap(row[-1], room) or [""]
    return [(head if n == 0 else " " * indent) + part for n, part in enumerate(parts)]


def _stacked(
    table: list[tuple[str, ...]], widths: list[int], fit: int, total: int, *, has_header: bool, wrap: bool = False,
) -> list[str]:
    """Each row's cells but the fitted one on as few lines as hold them whole, the fitted one
    indented under them, cut to the terminal's width (or, with `wrap`, wrapped to it)."""
    lines = []
    packed = packed_columns([i for i in range(len(widths)) if i != fit], widths, total)
    for n, row in enumerate(table):
        for line in packed:
            lines.append(shorten("  ".join(row[i].ljust(widths[i]) for i in line).rstrip(), total))
        if not (has_header and n == 0):
            fitted = textwrap.wrap(row[fit], max(1, total - 4)) if wrap else [shorten(row[fit], total - 4)]
            lines.extend("    " + part for part in fitted or [""])
    return lines


def memory_summary(memories: list[SearchHit], mode: str) -> list[str]:
    """The lines that tell the user which memories the model was given (per display.context_mode)."""
    if mode == "off" or not memories:
        return []
    title, words = used_memories(memories)
    lines = [f"· {title}"]
    if mode == "on":
        for hit, line in zip(memories, words):
            lines.append(f"  {printable(line.heading())}")
            lines.append(f"    {printable(hit.excerpt(70))}")
    return lines


def _completer(session: ChatSession):  # noqa: ANN202 - a prompt_toolkit Completer, imported lazily
    """Tab completes command names, /model's models and /vdoc's paths (ocat.completion), in a
    thread: the first /model completion waits for the provider's list, never the typing."""
    from prompt_toolkit.completion import Completer, Completion, ThreadedCompleter

    class Completions(Completer):
        def get_completions(self, document, complete_event):  # noqa: ANN001, ANN202 - prompt_toolkit's
            text = document.text_before_cursor
            settings = session.settings.llm
            models = model_list.models_for(settings, dummy=session.dummy).names if text.startswith("/model ") else ()
            found = complete(text, models=models, docs_folder=session.settings.vector_store.docs_folder)
            for candidate in found.candidates if found is not None else command_names(text):
                yield Completion(candidate.text, start_position=-len(text), display=candidate.label)

    return ThreadedCompleter(Completions())


def _line_reader(interactive: bool, session: ChatSession | None = None) -> Callable[..., str]:
    """Reads one line: prompt_toolkit on a terminal (given the prompt to show, completing what
    `session` offers), else stdin."""
    if not interactive:
        def read_piped() -> str:
            line = sys.stdin.readline()
            if not line:
                raise EOFError
            return line.rstrip("\n")

        return read_piped
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    class KeptHistory(FileHistory):
        """prompt_toolkit's history file, each prompt written without its credentials (Up still
        brings this session's prompts back as typed)."""

        def store_string(self, string: str) -> None:
            super().store_string(kept_prompt(string))

    path = history_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Ctrl+X Ctrl+E opens the line in $EDITOR, as in bash (/edit does too).
    prompt_session: PromptSession[str] = PromptSession(history=KeptHistory(str(path)), enable_open_in_editor=True,
                                                       completer=_completer(session) if session else None)
    return lambda message="› ", default="": prompt_session.prompt(message, default=default)


async def _stream_answer(turn: Turn, context_mode: ContextMode, out: IO[str], err: IO[str]) -> None:
    turn.recall()
    if turn.wake_is_new and turn.wake is not None and context_mode == "on":
        err.write(f"· Wake block for this thread ({turn.wake.tokens} tokens)\n")
        err.writelines(f"  {printable(line)}\n" for line in turn.wake.text().splitlines())
    if turn.problem:  # this turn's search failed; memory stays on
        err.write(f"ocat: note: {printable(turn.problem)}\n")
    # Which memories were used is a status, not the answer: stderr, so `echo ... | ocat` gives
    # the answer alone on stdout.
    for line in memory_summary(turn.memories, context_mode):
        err.write(line + "\n")
    err.flush()
    async for event in turn:
        match event:
            case TextPiece(text):
                # The model may repeat escape sequences it read in a memory; they are shown, not obeyed.
                out.write(printable(text))
                out.flush()
            case ToolFinished(call):
                # One line per call, on stderr beside the memories used: the answer alone is on stdout.
                err.write(f"· {printable(call.line())}\n")
                if context_mode == "on" and call.result:
                    err.writelines(f"  {printable(line)}\n" for line in call.result.splitlines())
                err.flush()
            case ToolStarted():
                pass  # the line mode writes a call's line once it has its result
    for note in turn.tool_notes:
        err.write(f"ocat: note: {printable(note)}\n")


def run_repl(settings: Settings, *, dummy: bool, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """Open the chat (memory and all: `ocat.chat.session.open_chat`), chat until /quit or end of
    input, then give memory up, saying what became of any exchange it could not take
    (ocat.chat.unsaved); returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    # What a consent question set aside (typed before it, or no answer): the next prompt starts with it.
    set_aside: list[str] = []
    # An MCP server's tool not allowed beforehand asks on the terminal; piped, nobody is asked (no).
    ask = line_asker(err, set_aside) if sys.stdin.isatty() else None
    session = open_chat(settings, dummy=dummy, serve=True, stream=err, ask=ask)
    # SIGTERM, or the terminal closing (SIGHUP): what memory has not taken is kept in a file at once,
    # and the chat ends as with /quit (closing below says what became of it).
    restore = keep_on_signals(session.session_memory, end_by_signal)
    try:
        return _chat(session, set_aside, out, err)
    finally:
        note = session.close(wait_seconds=KEEP_WAIT_SECONDS)
        if note:
            err.write(f"ocat: {printable(note)}\n")
        restore()


def banner(model: str, *, memory_on: bool) -> str:
    """The line mode's greeting: the model, memory's state, and the commands for help and for
    leaving, named as /help lists them (the registry's names, never an alias /help leaves out)."""
    state = "memory on" if memory_on else "memory off"
    named = {key: REGISTRY[key].name for key in ("help", "quit")}
    return f"ocat · {model} · {state} · /{named['help']} for commands, /{named['quit']} to leave"


def _chat(session: ChatSession, set_aside: list[str], out: IO[str], err: IO[str]) -> int:
    interactive = sys.stdin.isatty()
    read_line = _line_reader(interactive, session)
    if interactive:
        out.write(banner(session.settings.llm.model, memory_on=session.session_memory.on) + "\n")
    loaded = session.session_memory.loaded
    notice = loaded.notice(len(session.session_memory.unsaved)) if loaded else None
    if notice:
        text, _ = notice
        # The same words as the full-screen chat's notice, in the CLI's "ocat: lower case" form.
        err.write(printable(f"ocat: {text[:1].lower()}{text[1:]}") + "\n")
    def say(line: str) -> None:
        err.write(printable(line) + "\n")

    session.progress.start(progress_printer(say))
    # The MCP servers start in the background: the first prompt is not kept waiting for them.
    session.server_tools.start()
    # What the next prompt starts with (/edit), and the exchange it replaces when sent (/edit last).
    prefill, editing_last = "", ""
    while True:
        if set_aside:
            prefill = "".join([prefill, *set_aside]).rstrip("\n")
            set_aside.clear()
        try:
            prompt = read_line(default=prefill) if prefill and interactive else read_line()
        except (EOFError, KeyboardInterrupt):
            return 0
        # Only the very next line can replace the exchange: a blank line or a command keeps it.
        prefill, replaces, editing_last = "", editing_last, ""
        if not prompt.strip():
            continue
        if replaces and not is_command(prompt.strip()):
            replaced = run_step("/edit last", lambda: replace_last(session, replaces, prompt))
            (err if replaced.error else out).write(render_result(replaced) + "\n")
            if not isinstance(replaced.request, Send):
                continue
        if is_command(prompt.strip()):
            go_on, send = _run_command_line(session, prompt.strip(), read_line if interactive else None, out, err)
            if not go_on:
                return 0
            if isinstance(send, EditPrompt):
                prefill, editing_last = _edit_prompt(send, interactive, err)
                continue
            if send is None:
                continue
            prompt = send.prompt  # /retry: the prompt goes again, as if typed
            if interactive:
                out.write(printable(f"› {prompt}") + "\n")
        turn = session.turn(prompt)
        try:
            asyncio.run(_stream_answer(turn, session.settings.display.context_mode, out, err))
        except KeyboardInterrupt:
            if not turn.complete:
                # A cancelled turn keeps what was shown but is not remembered.
                turn.cancel()
                out.write("\n[cancelled]\n")
                continue
            # Ctrl+C came once the whole answer had: it is remembered as any other.
        except OcatError as exc:
            err.write(f"ocat: {printable(str(exc))}\n")
            continue
        except Exception as exc:  # a bug must not end the chat: say it, log it, go on
            err.write(f"ocat: {printable(log_failure('the answer', exc))}\n")
            continue
        out.write("\n")
        if not _finish(turn, err):
            return 130
        if turn.memory_lost:
            err.write(f"ocat: memory is off: {printable(turn.memory_lost)}\n")
        elif turn.recorded is not None and (said := remembered_words(turn.recorded)) is not None:
            err.write(f"ocat: note: {printable(said[0])}\n")
        if turn.recorded is not None and (secrets := secrets_words(turn.recorded)) is not None:
            err.write(f"ocat: note: {printable(secrets)}\n")


def _finish(turn: Turn, err: IO[str]) -> bool:
    """Record the turn's exchange in a thread of its own, which Ctrl+C cannot cut short. False
    when Ctrl+C came meanwhile: the chat then ends (as with SIGTERM or SIGHUP, whose SystemExit
    goes on), once the write is done or KEEP_WAIT_SECONDS have passed, the exchange being kept
    in a file meanwhile, saying so."""
    done = threading.Event()

    def record() -> None:
        try:
            turn.finish()
        finally:
            done.set()

    # A daemon: a write that never ends must not keep the process alive; the file keeps its exchange.
    writer = threading.Thread(target=record, name="ocat-record", daemon=True)
    try:
        # start() is inside: on a busy machine the writer may be at the store before start()
        # returns, and a signal handled there (SIGHUP's SystemExit) must find this handler too.
        writer.start()
        done.wait()
        return True
    except (KeyboardInterrupt, SystemExit) as leaving:
        # An event, not writer.is_alive() or join(): in Python 3.11 a join that a signal
        # interrupted marks the thread as ended while it still runs.
        if writer.ident is not None and not done.is_set():
            kept = turn.session_memory.spool().path
            where = f"; it is kept in {display_path(kept)} meanwhile" if kept else ""
            err.write(f"ocat: leaving once this exchange is written to memory (up to {KEEP_WAIT_SECONDS:g} s{where})\n")
            err.flush()
            done.wait(KEEP_WAIT_SECONDS)
        if isinstance(leaving, SystemExit):
            raise
        return False


def _run_command_line(
    session: ChatSession, text: str, ask: Callable[[str], str] | None, out: IO[str], err: IO[str]
) -> tuple[bool, Send | EditPrompt | None]:
    """Run a slash command and carry out what it asks (`ask` reads the user's answer on a
    terminal; piped, the way to do it by typing is shown instead). Returns whether the chat
    goes on, and what the next prompt is to be (`Send`: /retry; `EditPrompt`: /edit)."""
    send: Send | EditPrompt | None = None
    try:
        result = run_command(session, text)
        while result.request is not None and not result.quit:
            if isinstance(result.request, (Send, EditPrompt)):
                send = result.request
                break
            shown = render_result(result)
            if shown:
                (err if result.error else out).write(shown + "\n")
            result = _answer(result.request, ask, out)
    except KeyboardInterrupt:
        # Ctrl+C during a long /vdoc: the chunks embedded so far are stored whole, and the same command completes it.
        err.write("ocat: interrupted; what was stored is kept, and the same command completes it\n")
        return True, None
    if result.quit:
        return False, None
    if result.conversation_replaced:
        for exchange in session.history:
            out.write(printable(f"› {exchange.user_prompt}\n{exchange.assistant_response}") + "\n\n")
    (err if result.error else out).write(render_result(result) + "\n")
    session.session_memory.release_idle()  # a /vdoc or an /import grew the model's arena: the chat waits now
    return True, send


def _edit_prompt(request: EditPrompt, interactive: bool, err: IO[str]) -> tuple[str, str]:
    """Carry out /edit in line mode: what the next prompt starts with, and the exchange it
    replaces. /edit last puts the last prompt there (piped: the next line replaces it);
    /edit writes the prompt in $EDITOR, shown at the next prompt to send with Enter."""
    if request.replaces:
        return request.prompt, request.replaces
    if not interactive:
        err.write("ocat: /edit needs a terminal to open the editor in\n")
        return "", ""
    try:
        return edit_text(""), ""
    except OcatError as exc:
        err.write(f"ocat: {printable(str(exc))}\n")
        return "", ""


def _answer(request: Request, ask: Callable[[str], str] | None, out: IO[str]) -> CommandResult:
    """Carry out a command's request in line mode: ask on a terminal, else say how to do it by typing."""
    if isinstance(request, ShowThemes):
        return CommandResult(text="ocat: themes apply to the full-screen chat", error=True)
    if isinstance(request, EditFile):
        if ask is None:  # piped: no terminal for an editor
            return CommandResult(text=f"Edit {request.path} in your editor.")
        try:
            edit_file(request.path, template=PROFILE_TEMPLATE)
        except OcatError as exc:
            return CommandResult(text=str(exc), error=True)
        return CommandResult()
    if isinstance(request, BrowseMemory):
        return CommandResult(text="The memory browser is a screen of the full-screen chat (ocat without --plain). "
                                  "Here: /threads, /vquery WORDS, /vget ID, /vdelete ID.", error=True)
    if isinstance(request, Confirm):
        if ask is None:
            return CommandResult(text=f"{request.question}\nTo confirm: {request.typed}")
        if _read_answer(ask, printable(f"{request.question} Go ahead? [y/N] ")).lower() not in ("y", "yes"):
            return CommandResult(text=request.declined)
        return run_step("the confirmed command", request.then)
    assert isinstance(request, Choose)  # Send and EditPrompt are handled by the caller
    out.write(printable(request.title) + "\n")
    if ask is None:
        # Piped: the values themselves, to type (`/continue ID`).
        out.write("\n".join(_aligned(request.options)) + "\n")
        return CommandResult()
    numbered = [(str(n), label) for n, (_, label) in enumerate(request.options, start=1)]
    out.write("\n".join(_aligned(numbered)) + "\n")
    picked = _read_answer(ask, "Number (Enter for none): ")
    if not picked:
        return CommandResult()
    if not picked.isdigit() or not 1 <= int(picked) <= len(request.options):
        return CommandResult(text=f"{picked!r} is not one of the numbers 1 to {len(request.options)}", error=True)
    return run_step("the picked command", lambda: request.then(request.options[int(picked) - 1][0]))


def _read_answer(ask: Callable[[str], str], question: str) -> str:
    try:
        return ask(question).strip()
    except (EOFError, KeyboardInterrupt):
        return ""
