"""The list under the prompt box that completes what is typed: slash command names with what
they do, then a command's argument (a model name after `/model `, a path after `/vdoc `, from
ocat.completion)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.widgets import OptionList, TextArea
from textual.widgets.option_list import Option

from ocat.ui.plain import plain
from ocat.llm import model_list

if TYPE_CHECKING:
    from ocat.completion import Completions


class CommandSuggestions(OptionList):
    """The slash commands that match what is being typed, each with what it does."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.display = False
        self.can_focus = False  # the prompt keeps the focus; it steers this list
        # The name the list was built for: a list already built for the text is left alone,
        # so the highlight the user chose survives (see show_for).
        self._built_for: str | None = None
        # The values listed for an argument being typed (None while commands are listed).
        self._arguments: Completions | None = None
        self._fetching_models = False

    def show_for(self, text: str) -> None:
        """Offer the commands whose name starts with the typed `/word`, or the values of the
        argument being typed (/model NAME, /vdoc PATH: ocat.completion); hide otherwise.

        Calling it again for the same text changes nothing: the prompt box calls it before it
        acts on a key, since keys typed in a burst act before the list hears of the text.
        """
        from ocat.completion import argument_being_typed  # noqa: PLC0415 - commands load after the first frame

        typed = partial_command(text)
        # An argument's list is built for the whole text (a command's for its name: no spaces).
        built_for = typed if typed is not None or argument_being_typed(text) is None else text
        if built_for == self._built_for:
            return  # up to date (or hidden with Esc, until the text changes)
        self._built_for = built_for
        if built_for is None and not self.display:
            return  # ordinary typing: nothing to rebuild on every key
        self._arguments = None
        if typed is None and built_for is not None:
            self._show_arguments(text)
            return
        from ocat.commands import commands  # noqa: PLC0415 - commands load after the first frame

        matches = [] if typed is None else [c for c in commands() if any(
            n.startswith(typed) for n in (c.name, *c.aliases))]
        self.clear_options()
        if not matches:
            self.display = False
            return
        width = max(len(c.usage) for c in matches)
        self.add_options(
            Option(Text(f"{c.usage:<{width}}  {c.help}", no_wrap=True, overflow="ellipsis"), id=c.name)
            for c in matches
        )
        self.highlighted = 0
        self.display = True

    def chosen(self) -> str | None:
        """The highlighted command's name (None while an argument's values are listed)."""
        if not self.display or self.highlighted is None or self._arguments is not None:
            return None
        return self.get_option_at_index(self.highlighted).id

    def completion(self) -> str | None:
        """The whole input the highlighted entry makes: `/name ` for a command, the input with
        the argument completed for a value."""
        if not self.display or self.highlighted is None:
            return None
        if self._arguments is not None:
            return self._arguments.candidates[self.highlighted].text
        name = self.get_option_at_index(self.highlighted).id
        from ocat.commands import REGISTRY  # noqa: PLC0415 - commands load after the first frame

        return None if name is None else (f"/{name} " if REGISTRY[name].arguments else f"/{name}")

    def enter_completes(self, text: str) -> bool:
        """Whether Enter completes rather than sends: a value is listed and what is typed is not
        already whole (an existing path, a listed model)."""
        arguments = self._arguments
        return (self.display and arguments is not None and not arguments.whole
                and self.completion() not in (None, text))

    def _show_arguments(self, text: str) -> None:
        from ocat.completion import complete  # noqa: PLC0415 - commands load after the first frame

        session = self.app.session  # type: ignore[attr-defined]
        found = complete(text, models=self._model_names(), docs_folder=session.settings.vector_store.docs_folder)
        self.clear_options()
        if found is None or not found.candidates:
            self.display = False
            return
        self._arguments = found
        self.add_options(Option(plain(c.label, no_wrap=True, overflow="ellipsis")) for c in found.candidates)
        self.highlighted = 0
        self.display = True

    def _model_names(self) -> tuple[str, ...]:
        """The provider's models as listed once this session; the first ask fetches them in the
        background (typing never waits for the network), and the list appears when they come."""
        listed = model_list.cached_models(self.app.session.settings.llm)  # type: ignore[attr-defined]
        if listed is None:
            if not self._fetching_models:
                self._fetching_models = True
                self._fetch_models()
            return ()
        return listed.names

    @work(thread=True, group="model-list", exit_on_error=False)
    def _fetch_models(self) -> None:
        session = self.app.session  # type: ignore[attr-defined]
        try:
            model_list.models_for(session.settings.llm, dummy=session.dummy)
        finally:
            self.app.call_from_thread(self._models_arrived)

    def _models_arrived(self) -> None:
        self._fetching_models = False
        self._built_for = None  # rebuild for the text in the box, now with the names
        prompt = self.screen.query("#prompt")  # the chat's PromptInput (ocat.ui.widgets), a TextArea
        if prompt:
            self.show_for(prompt.first(TextArea).text)


def partial_command(text: str) -> str | None:
    """The command name being typed (`/vq` gives `vq`), or None once it is more than a name."""
    if not text.startswith("/") or text.startswith("//") or any(ch.isspace() for ch in text):
        return None
    return text[1:].lower()
