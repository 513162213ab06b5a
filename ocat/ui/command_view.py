"""Slash commands in the window: run off the UI thread with a progress bar, requests answered
with dialogs (ocat.ui.screens), results shown in the conversation.

A mixin of `OcatApp` (ocat.ui.app): it uses the app's session, `_append`, `_notice`,
`_failure_text` and `_refresh_count`.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from textual import work
from textual.containers import VerticalScroll

from ocat.commands import Choose, CommandResult, Confirm, Send, ShowThemes, run_step
from ocat.errors import OcatError
from ocat.text import printable
from ocat.ui.screens import ChoicePicker, ConfirmDialog
from ocat.ui.widgets import TaskProgress, UserMessage, command_view

if TYPE_CHECKING:
    from textual.app import App
    from textual.widget import Widget
    from textual.worker import Worker

    from ocat.session import ChatSession

    AppBase = App[int]
else:
    AppBase = object  # a mixin of OcatApp (an App) at run time


class CommandView(AppBase):
    """Running commands and carrying out what they ask."""

    session: ChatSession
    command: Worker[None] | None
    theme_problems: list[str]
    turn: Worker[None] | None

    if TYPE_CHECKING:  # the app's own, used here
        async def _append(self, widget: Widget) -> None: ...
        def _notice(self, text: str, *, error: bool = False) -> None: ...
        def _failure_text(self, what: str, exc: BaseException) -> str: ...
        async def _refresh_count(self) -> None: ...
        def chat_turn(self, prompt: str) -> Worker[None]: ...

    def _send_now(self, prompt: str) -> None:
        """Start a turn for `prompt` (a command asked to send it), once the command has ended."""
        self.turn = self.chat_turn(prompt)

    @work(exclusive=True, group="command")
    async def run_slash_command(self, name: str, step: Callable[[], CommandResult]) -> None:
        """Run a command (or the step a dialog's answer carries out) in a thread (it may touch
        the store) and show its result.

        A long command (/vdoc) shows a progress bar while it runs; Esc stops it between
        two stored batches. Whatever fails is shown and logged: the chat never stays stuck.
        """
        try:
            await self._run_and_show(name, step)
        except Exception as exc:
            self._notice(self._failure_text(name, exc), error=True)

    async def _run_and_show(self, name: str, step: Callable[[], CommandResult]) -> None:
        progress: list[TaskProgress] = []

        async def show_progress(label: str, done: int, total: int) -> None:
            if not progress:
                progress.append(TaskProgress())
                await self._append(progress[0])
            progress[0].show(label, done, total)

        self.session.cancel.clear()
        def report(label: str, done: int, total: int) -> None:
            # Textual's stubs cannot type an async callback's None result ("Awaitable[Never]").
            self.call_from_thread(show_progress, label, done, total)  # type: ignore[arg-type]

        self.session.on_progress = report
        try:
            result = await asyncio.to_thread(run_step, name, step)
        finally:
            self.session.on_progress = None
            if progress:
                await progress[0].remove()
        if result.quit:
            self.exit(0)
            return
        if result.request is not None:
            result = self._carry_out(name, result)
        if result.conversation_replaced:
            await self._redraw_conversation()
        if result.text or result.rows:
            await self._append(command_view(result))
        await self._refresh_count()  # commands add and delete memories

    def _carry_out(self, name: str, result: CommandResult) -> CommandResult:
        """Answer a command's request: a dialog for Confirm and Choose (its answer runs the
        request's step as a command of its own), the theme for ShowThemes; returns what to show now."""
        request = result.request
        if isinstance(request, Confirm):
            def answered(yes: bool | None) -> None:
                if yes:
                    self.command = self.run_slash_command(name, request.then)
                else:
                    self._notice(request.declined)

            self.push_screen(ConfirmDialog(request.question), answered)
            return replace(result, request=None, text="")
        if isinstance(request, Choose):
            def picked(value: str | None) -> None:
                if value is not None:
                    self.command = self.run_slash_command(name, lambda: request.then(value))

            self.push_screen(ChoicePicker(request.title, request.options), picked)
            return replace(result, request=None, text="")
        if isinstance(request, Send):
            # After this command's result is shown: the turn mounts the prompt below it.
            self.call_later(self._send_now, request.prompt)
            return replace(result, request=None)
        assert isinstance(request, ShowThemes)
        try:
            return CommandResult(text=self._switch_theme(request.name))
        except OcatError as exc:
            return CommandResult(text=str(exc), error=True)

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
                lines.append(f"Not loaded ({len(self.theme_problems)} broken theme file(s)):")
                lines += [f"  {problem}" for problem in self.theme_problems]
            return "\n".join(lines)
        if name not in self.available_themes:
            raise OcatError(f"no theme {name!r}; /theme lists them")
        self.theme = name
        save_choice("display.theme", name)
        return f"Theme: {name} (kept for next time)"
