"""Slash commands in the window: run off the UI thread with a progress bar, requests answered
with dialogs (ocat.ui.screens), results shown in the conversation.

A mixin of `OcatApp` (ocat.ui.app): it uses the app's session, `_append`, `_notice`
and `_refresh_count`.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from textual import work
from textual.containers import VerticalScroll

from ocat.errors import OcatError
from ocat.logs import failure_text
from ocat.text.terminal import count_of, printable
from ocat.ui.widgets import TaskProgress, UserMessage, command_view

if TYPE_CHECKING:
    from textual.app import App
    from textual.widget import Widget
    from textual.worker import Worker

    from ocat.commands.results import CommandResult, EditFile, EditPrompt
    from ocat.chat.session import ChatSession
    from ocat.ui.memory_browser import MemoryBrowser

    AppBase = App[int]
else:
    AppBase = object  # a mixin of OcatApp (an App) at run time


# The app's actions that belong to the chat screen alone.
_CHAT_ONLY_ACTIONS = frozenset({"copy_last", "copy_code", "edit_prompt", "memory"})


class CommandView(AppBase):
    """Running commands and carrying out what they ask."""

    session: ChatSession
    command: Worker[None] | None
    theme_problems: list[str]
    turn: Worker[None] | None

    if TYPE_CHECKING:  # the app's own, used here
        async def _append(self, widget: Widget) -> None: ...
        def _notice(self, text: str, *, error: bool = False) -> None: ...
        async def _refresh_count(self) -> None: ...
        def chat_turn(self, prompt: str) -> Worker[None]: ...
        def action_edit_prompt(self) -> None: ...

    def _send_now(self, prompt: str) -> None:
        """Start a turn for `prompt` (a command asked to send it), once the command has ended."""
        self.turn = self.chat_turn(prompt)

    @work(exclusive=True, group="command")
    async def run_slash_command(self, name: str, step: Callable[[], CommandResult]) -> None:
        """Run a command (or the step a dialog's answer carries out) in a thread (it may touch
        the store) and show its result.

        A long command (/vdoc) shows a progress bar while it runs; Esc stops it between
        two stored batches. `step` turns its own failures into an error result (`run_command`,
        `run_step`); whatever else fails is shown and logged: the chat never stays stuck.
        """
        try:
            await self._run_and_show(name, step)
        except Exception as exc:
            self._notice(failure_text(name, exc), error=True)

    async def _run_and_show(self, name: str, step: Callable[[], CommandResult]) -> None:
        progress: list[TaskProgress] = []

        async def show_progress(label: str, done: int, total: int) -> None:
            if not progress:
                progress.append(TaskProgress())
                await self._append(progress[0])
            progress[0].show(label, done, total)

        def report(label: str, done: int, total: int) -> None:
            # Textual's stubs cannot type an async callback's None result ("Awaitable[Never]").
            self.call_from_thread(show_progress, label, done, total)  # type: ignore[arg-type]

        self.session.progress.start(report)
        try:
            result = await asyncio.to_thread(step)
        finally:
            self.session.progress.report = None
            if progress:
                await progress[0].remove()
        if result.quit:
            self.exit(0)
            return
        from ocat.commands.results import Send

        send = result.request.prompt if isinstance(result.request, Send) else None
        if result.request is not None:
            result = self._carry_out(name, result)
        if result.conversation_replaced:
            await self._redraw_conversation()
        if result.text or result.rows:
            await self._append(command_view(result))
        await self._refresh_count()  # commands add and delete memories
        if send is not None:
            # Only now: the turn mounts its prompt below what the command said ("Asking again…").
            self._send_now(send)

    def _carry_out(self, name: str, result: CommandResult) -> CommandResult:
        """Answer a command's request: a dialog for Confirm and Choose (its answer runs the
        request's step as a command of its own), the theme for ShowThemes; returns what to show now."""
        # Imported when a command has run, not before the first frame (the commands load after it).
        from ocat.commands import CommandResult, run_step
        from ocat.commands.results import (
            BrowseMemory,
            Choose,
            Confirm,
            EditFile,
            EditPrompt,
            Send,
            ShowThemes,
        )
        from ocat.ui.screens import ChoicePicker, ConfirmDialog

        request = result.request
        if isinstance(request, Confirm):
            def answered(yes: bool | None) -> None:
                if yes:
                    self.command = self.run_slash_command(name, lambda: run_step(name, request.then))
                else:
                    self._notice(request.declined)

            self.push_screen(ConfirmDialog(request.question), answered)
            return replace(result, request=None, text="")
        if isinstance(request, Choose):
            def picked(value: str | None) -> None:
                if value is not None:
                    self.command = self.run_slash_command(name, lambda: run_step(name, lambda: request.then(value)))

            self.push_screen(ChoicePicker(request.title, request.options), picked)
            return replace(result, request=None, text="")
        if isinstance(request, Send):
            return replace(result, request=None)  # sent by _run_and_show, once the result is shown
        if isinstance(request, BrowseMemory):
            self.open_memory_browser(request.query)
            return replace(result, request=None, text="")
        if isinstance(request, EditPrompt):
            # After this command's result is shown: the editor takes the terminal meanwhile.
            self.call_later(self._edit_prompt, request)
            return replace(result, request=None)
        if isinstance(request, EditFile):
            self.call_later(self._edit_file, request)
            return replace(result, request=None)
        assert isinstance(request, ShowThemes)
        try:
            return CommandResult(text=self._switch_theme(request.name))
        except OcatError as exc:
            return CommandResult(text=str(exc), error=True)

    def _edit_file(self, request: EditFile) -> None:
        """/profile: the file in the editor; a failed editor says why."""
        from ocat.editor import edit_file
        from ocat.operations.profile import PROFILE_TEMPLATE
        from ocat.ui.external_editor import in_editor

        _, problem = in_editor(self, lambda: edit_file(request.path, template=PROFILE_TEMPLATE))
        if problem:
            self._notice(problem, error=True)

    def _edit_prompt(self, request: EditPrompt) -> None:
        """/edit: the prompt box's text in the editor; /edit last: the last prompt back in the box."""
        from ocat.ui.widgets import PromptInput

        if request.replaces:
            self.query_one(PromptInput).edit_last(request.prompt, request.replaces)
        else:
            self.action_edit_prompt()

    async def _redraw_conversation(self) -> None:
        """Show the session's conversation afresh (after /continue or /clear)."""
        from ocat.ui.answer import AssistantMessage

        conversation = self.query_one("#conversation", VerticalScroll)
        await conversation.remove_children()
        for exchange in self.session.history:
            answer = AssistantMessage()
            await conversation.mount_all([UserMessage(exchange.user_prompt), answer])
            await answer.update(printable(exchange.assistant_response))
        conversation.scroll_end(animate=False)

    def _switch_theme(self, name: str) -> str:
        """List the themes (the current one marked, broken theme files after), or switch to one
        and keep it for the next runs (ocat.choices)."""
        from ocat.choices import save_choice

        if not name:
            names = [f"{theme} (current)" if theme == self.theme else theme for theme in sorted(self.available_themes)]
            lines = ["Themes: " + ", ".join(names)]
            if self.theme_problems:
                lines.append(f"Not loaded ({count_of(len(self.theme_problems), 'broken theme file')}):")
                lines += [f"  {problem}" for problem in self.theme_problems]
            return "\n".join(lines)
        if name not in self.available_themes:
            raise OcatError(f"no theme {name!r}; /theme lists them")
        self.theme = name
        save_choice("display.theme", name)
        return f"Theme: {name} (kept for next time)"

    # -- the memory browser ------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The chat's own keys (copy the answer, the editor, the browser) do nothing over another
        screen (the memory browser, a dialog): hidden there, so its footer shows its own keys."""
        if action in _CHAT_ONLY_ACTIONS and len(self.screen_stack) > 1:
            return False
        return True

    def action_memory(self) -> None:
        """Open the memory browser (`keys.memory`)."""
        self.open_memory_browser("")

    def open_memory_browser(self, query: str) -> None:
        """Show the memory browser; a thread picked there is continued (as /continue would)."""
        from ocat.ui.memory_browser import MemoryBrowser

        if isinstance(self.screen, MemoryBrowser):
            return

        def closed(thread_id: str | None) -> None:
            if thread_id:
                from ocat.ui.widgets import PromptInput

                # As if typed: while an answer or a command runs it waits its turn (never cancels it).
                self.post_message(PromptInput.Submitted(f"/continue {thread_id}"))
            else:
                self.call_later(self._refresh_count)  # the browser may have deleted memories

        self.push_screen(MemoryBrowser(self.session, query), closed)

    async def on_memory_browser_threads_deleted(self, message: MemoryBrowser.ThreadsDeleted) -> None:
        """The thread on screen was deleted in the browser: start a new one, as /deletethread does."""
        if self.session.thread_id not in message.threads:
            return
        self.session.new_thread()
        await self._redraw_conversation()
        self._notice("The thread on screen was deleted from memory; a new thread starts.")
