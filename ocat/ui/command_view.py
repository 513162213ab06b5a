"""Slash commands in the window: run off the UI thread with a progress bar, requests answered
with dialogs (ocat.ui.screens), results shown in the conversation.

`CommandView` is a component the app owns (ocat.ui.app): a widget that is never displayed, so
that it can own the commands' worker (`run`, one at a time). It is given what it uses: the
session, the conversation pane, memory (its count changes with commands), the themes, and the
one step of the app's it must take at once, starting a turn for a prompt a command sends.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from textual import work
from textual.widget import Widget

from ocat.errors import OcatError
from ocat.logs import failure_text
from ocat.ui.widgets import command_view, PromptInput, TaskProgress
from ocat.editor import edit_file
from ocat.ui.external_editor import in_editor
from ocat.ui.screens import ChoicePicker, ConfirmDialog

if TYPE_CHECKING:
    from textual.worker import Worker

    from ocat.commands.results import CommandResult, EditFile, EditPrompt
    from ocat.chat.session import ChatSession
    from ocat.ui.conversation import Conversation
    from ocat.ui.memory_view import MemoryView
    from ocat.ui.themes import Themes


class CommandView(Widget):
    """Running commands and carrying out what they ask."""

    DEFAULT_CSS = "CommandView { display: none; }"

    def __init__(
        self,
        session: ChatSession,
        *,
        conversation: Conversation,
        memory_view: MemoryView,
        themes: Themes,
        send: Callable[[str], None],
    ) -> None:
        """`send` starts a turn for a prompt (/retry's): it is called before the command's worker
        ends, so that a prompt held meanwhile (ocat.ui.app) is sent after it, not before."""
        super().__init__()
        self.session = session
        self.conversation = conversation
        self.memory_view = memory_view
        self.themes = themes
        self._send = send
        # The command under way, or the last one run.
        self.worker: Worker[None] | None = None

    def run(self, name: str, step: Callable[[], CommandResult]) -> None:
        """Run a command (or the step a dialog's answer carries out): `worker` is now its worker."""
        self.worker = self._run_slash_command(name, step)

    def fork_at(self, exchange_id: str, *, busy: bool) -> None:
        """Fork at a message picked on screen (`keys.fork`), as /fork does; not while an answer or a
        command runs (the conversation is still changing), and the prompt gets focus back."""
        self.app.query_one(PromptInput).focus()
        if busy:
            self.conversation.notice("An answer or a command is under way: fork once it has ended (Esc stops it).",
                                     error=True)
            return
        from ocat.commands import run_step  # noqa: PLC0415 - commands load after the first frame
        from ocat.commands.thread_commands import fork_at  # noqa: PLC0415 - commands load after the first frame

        self.run("/fork", lambda: run_step("/fork", lambda: fork_at(self.session, exchange_id)))

    @work(exclusive=True, group="command")
    async def _run_slash_command(self, name: str, step: Callable[[], CommandResult]) -> None:
        """Run a command (or the step a dialog's answer carries out) in a thread (it may touch
        the store) and show its result.

        A long command (/vdoc) shows a progress bar while it runs; Esc stops it between
        two stored batches. `step` turns its own failures into an error result (`run_command`,
        `run_step`); whatever else fails is shown and logged: the chat never stays stuck.
        """
        try:
            await self._run_and_show(name, step)
        except Exception as exc:
            self.conversation.notice(failure_text(name, exc), error=True)

    async def _run_and_show(self, name: str, step: Callable[[], CommandResult]) -> None:
        progress: list[TaskProgress] = []

        async def show_progress(label: str, done: int, total: int) -> None:
            if not progress:
                progress.append(TaskProgress())
                await self.conversation.append(progress[0])
            progress[0].show(label, done, total)

        def report(label: str, done: int, total: int) -> None:
            # Textual's stubs cannot type an async callback's None result ("Awaitable[Never]").
            self.app.call_from_thread(show_progress, label, done, total)  # type: ignore[arg-type]

        self.session.progress.start(report)
        try:
            result = await asyncio.to_thread(step)
        finally:
            self.session.progress.report = None
            if progress:
                await progress[0].remove()
            # A /vdoc, a knowledge folder or an /import grew the model's arena: the chat waits now.
            self.session.session_memory.release_idle()
        if result.quit:
            self.app.exit(0)
            return
        from ocat.commands.results import Send  # noqa: PLC0415 - commands load after the first frame

        send = result.request.prompt if isinstance(result.request, Send) else None
        if result.request is not None:
            result = self._carry_out(name, result)
        if result.conversation_replaced:
            await self.conversation.redraw(self.session.history)
        if result.text or result.rows:
            await self.conversation.append(command_view(result))
        await self.memory_view.refresh_count()  # commands add and delete memories
        if send is not None:
            # Only now: the turn mounts its prompt below what the command said ("Asking again…").
            self._send(send)

    def _carry_out(self, name: str, result: CommandResult) -> CommandResult:
        """Answer a command's request: a dialog for Confirm and Choose (its answer runs the
        request's step as a command of its own), the theme for ShowThemes; returns what to show now."""
        # Imported when a command has run, not before the first frame (the commands load after it).
        from ocat.commands import CommandResult, run_step  # noqa: PLC0415 - commands load after the first frame
        from ocat.commands.results import (  # noqa: PLC0415 - commands load after the first frame

            BrowseMemory,
            Choose,
            Confirm,
            EditFile,
            EditPrompt,
            Send,
            ShowThemes,
        )
        request = result.request
        if isinstance(request, Confirm):
            def answered(yes: bool | None) -> None:
                if yes:
                    self.run(name, lambda: run_step(name, request.then))
                else:
                    self.conversation.notice(request.declined)

            self.app.push_screen(ConfirmDialog(request.question), answered)
            return replace(result, request=None, text="")
        if isinstance(request, Choose):
            def picked(value: str | None) -> None:
                if value is not None:
                    self.run(name, lambda: run_step(name, lambda: request.then(value)))

            self.app.push_screen(ChoicePicker(request.title, request.options), picked)
            return replace(result, request=None, text="")
        if isinstance(request, Send):
            return replace(result, request=None)  # sent by _run_and_show, once the result is shown
        if isinstance(request, BrowseMemory):
            self.open_memory_browser(request.query)
            return replace(result, request=None, text="")
        if isinstance(request, EditPrompt):
            # After this command's result is shown: the editor takes the terminal meanwhile.
            self.app.call_later(self._edit_prompt, request)
            return replace(result, request=None)
        if isinstance(request, EditFile):
            self.app.call_later(self._edit_file, request)
            return replace(result, request=None)
        assert isinstance(request, ShowThemes)
        try:
            return CommandResult(text=self.themes.switch(request.name))
        except OcatError as exc:
            return CommandResult(text=str(exc), error=True)

    def _edit_file(self, request: EditFile) -> None:
        """/profile: the file in the editor; a failed editor says why."""
        from ocat.operations.profile import PROFILE_TEMPLATE  # noqa: PLC0415 - loads after the first frame

        _, problem = in_editor(self.app, lambda: edit_file(request.path, template=PROFILE_TEMPLATE))
        if problem:
            self.conversation.notice(problem, error=True)

    def _edit_prompt(self, request: EditPrompt) -> None:
        """/edit: the prompt box's text in the editor; /edit last: the last prompt back in the box."""
        box = self.app.query_one(PromptInput)
        if request.replaces:
            box.edit_last(request.prompt, request.replaces)
            return
        problem = box.edit_in_editor()
        if problem:
            self.conversation.notice(problem, error=True)

    def open_memory_browser(self, query: str) -> None:
        """Show the memory browser; a thread picked there is continued (as /continue would)."""
        from ocat.ui.memory_browser import MemoryBrowser  # noqa: PLC0415 - DataTable loads with the first table

        if isinstance(self.app.screen, MemoryBrowser):
            return

        def closed(thread_id: str | None) -> None:
            if thread_id:
                # As if typed: while an answer or a command runs it waits its turn (never cancels it).
                self.app.post_message(PromptInput.Submitted(f"/continue {thread_id}"))
            else:
                self.app.call_later(self.memory_view.refresh_count)  # the browser may have deleted memories

        self.app.push_screen(MemoryBrowser(self.session, query), closed)
