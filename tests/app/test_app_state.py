"""The chat window shows its state at ordinary sizes: the header at 80 and 60 columns and after
resizing, ocat's commands in the palette (Ctrl+P), the theme and context display kept
across runs, and an old config key's name said once."""

from __future__ import annotations

from typing import Any

import pytest
from textual.command import CommandPalette
from textual.containers import VerticalScroll
from textual.widgets import Static

from ocat.ui.memory_view import MemoryState, MemoryStatus, fit_header, memory_words
from ocat.ui.widgets import PromptInput
from tests.support.pilot import make_app, memory_ready, notices, send, wait_for, wait_for_command

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"


def header(app: Any) -> str:
    return str(app.query_one("#header", Static).render())


# -- the header ------------------------------------------------------------------------------


def test_the_header_keeps_the_model_and_memory_state_and_drops_paths_first() -> None:
    paths = ["~/.local/share/ocat/vector_stores/default", "~/.config/ocat/config.yaml"]
    wide = fit_header(MODEL, "3 exchanges", paths, 200)
    assert wide == f"ocat · {MODEL} · 3 exchanges · {paths[0]} · {paths[1]}"
    at_80 = fit_header(MODEL, "3 exchanges", paths, 78)
    assert at_80.startswith(f"ocat · {MODEL} · 3 exchanges · …") and at_80.endswith("default")
    assert len(at_80) <= 78
    at_40 = fit_header(MODEL, "memory off", paths, 40)
    assert at_40 == f"ocat · {MODEL} · memory off"
    # A model name longer than the window is shortened; the memory state stays whole.
    long_model = "openrouter/anthropic/claude-3.5-sonnet-20241022-with-a-long-tail"
    narrow = fit_header(long_model, "memory loading…", paths, 58)
    assert narrow.endswith("… · memory loading…") and len(narrow) == 58


def test_memory_words_render_each_state_as_the_header_has_always_said_it() -> None:
    assert memory_words(MemoryStatus(MemoryState.LOADING)) == "memory loading…"
    assert memory_words(MemoryStatus(MemoryState.WAITING)) == "memory waiting…"
    assert memory_words(MemoryStatus(MemoryState.OFF)) == "memory off"
    assert memory_words(MemoryStatus(MemoryState.READY, exchanges=1)) == "1 exchange"
    assert memory_words(MemoryStatus(MemoryState.READY, exchanges=3)) == "3 exchanges"
    assert memory_words(MemoryStatus(MemoryState.DOWNLOADING, downloaded=49, download_size=100)) == "downloading model 49%"
    assert memory_words(MemoryStatus(MemoryState.DOWNLOADING, downloaded=12_000_000)) == "downloading model 12.0 MB"
    assert [state for state in MemoryState if state.pending] == [
        MemoryState.LOADING, MemoryState.WAITING, MemoryState.DOWNLOADING
    ]


@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (60, 20)], ids=["80x24", "60x20"])
async def test_the_header_shows_model_and_memory_state(size: tuple[int, int]) -> None:
    app = make_app(**{"llm.model": MODEL})
    async with app.run_test(size=size) as pilot:
        await memory_ready(app, pilot)
        text = header(app)
        assert MODEL in text and "0 exchanges" in text
        assert len(text) <= size[0] - 2  # fitted, so nothing is cut or wrapped
        assert app.query_one("#header").region.height == 1


async def test_the_header_says_memory_off_at_60_columns() -> None:
    app = make_app(**{"llm.model": MODEL, "vector_store.enabled": False})
    async with app.run_test(size=(60, 20)) as pilot:
        await pilot.pause()
        text = header(app)
        assert MODEL in text and "memory off" in text


async def test_an_old_key_name_is_said_once_in_the_conversation_naming_the_new_one() -> None:
    app = make_app(dummy=True, **{"memory.wake_threads": 2, "vector_store.enabled": False})
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert app.session.settings.wake.threads == 2
        said = [text for text in notices(app) if "deprecated" in text]
        assert said == ["config: command line: 'memory.wake_threads' is deprecated, it is now 'wake.threads' "
                        "(the old name is read for this release only)"]


@pytest.mark.slow
def test_snapshot_header_at_80x24(snap_compare: Any) -> None:
    async def settle(pilot: Any) -> None:
        await memory_ready(pilot.app, pilot)
        await send(pilot.app, pilot, "hello")

    assert snap_compare(make_app(dummy=True), terminal_size=(80, 24), run_before=settle)


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 100, 120])
async def test_the_footer_keeps_the_copy_keys_whole_at_any_width(width: int) -> None:
    """At 80 columns the footer showed `^o Copy` and no `^b Copy code`: the keys said elsewhere
    (Esc, in the status line while answering; Enter) give way first, and come back when there is room."""
    from textual.widgets._footer import FooterKey

    def shown(app: Any) -> dict[str, str]:
        return {key.action: key.description for key in app.query(FooterKey)}

    app = make_app(dummy=True)
    async with app.run_test(size=(width, 24)) as pilot:
        await memory_ready(app, pilot)
        await pilot.pause(0.2)
        keys = shown(app)
        assert keys["copy_last"] == "Copy answer" and keys["copy_code"] == "Copy code"
        assert ("cancel" in keys) is (width >= 120) and ("submit" in keys) is (width >= 90)
        total = sum(key.region.width for key in app.query(FooterKey))
        assert total <= width
        if width == 80:
            await pilot.resize_terminal(120, 24)
            await pilot.pause(0.2)
            assert "cancel" in shown(app) and "submit" in shown(app)


@pytest.mark.slow
def test_snapshot_the_footer_at_80x24(snap_compare: Any) -> None:
    async def settle(pilot: Any) -> None:
        await memory_ready(pilot.app, pilot)
        await send(pilot.app, pilot, "show me a shell command")
        await pilot.pause(0.2)

    assert snap_compare(make_app(dummy=True), terminal_size=(80, 24), run_before=settle)


@pytest.mark.slow
async def test_the_layout_survives_resizing() -> None:
    app = make_app(**{"llm.model": MODEL})
    async with app.run_test(size=(120, 30)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "/help")
        await wait_for_command(app, pilot)
        wide = header(app)
        for width in (60, 80):
            await pilot.resize_terminal(width, 30)
            await pilot.pause()
            await pilot.pause()
            text = header(app)
            assert MODEL in text and "exchanges" in text and len(text) <= width - 2
            assert app.query_one("#header").region.height == 1
            conversation = app.query_one("#conversation", VerticalScroll)

            def fills_the_rest() -> bool:
                # The conversation fills what the header, status line, prompt box, command list (when
                # shown) and footer leave: no blank gap. Waited for: a loaded machine lays out late.
                shown = [app.query_one(f"#{n}") for n in ("header", "status", "prompt", "suggestions")]
                others = sum(w.outer_size.height for w in shown if w.display)
                footer = app.screen.query("Footer").first().outer_size.height
                return conversation.outer_size.height == 30 - others - footer

            await wait_for(pilot, fills_the_rest, f"the layout at {width} columns")
            assert conversation.outer_size.width == width
        assert len(header(app)) < len(wide)  # refitted at 80, not left at 120's text


# -- the command palette ---------------------------------------------------------------------


@pytest.mark.slow
async def test_ctrl_p_lists_ocat_commands_and_puts_the_chosen_one_in_the_box() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await memory_ready(app, pilot)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette opens")
        await pilot.press(*"vque")
        palette = app.screen
        options = palette.query_one("CommandList")

        def listed() -> list[str]:
            return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]  # type: ignore[attr-defined]

        await wait_for(pilot, lambda: any("/vquery" in label for label in listed()), "/vquery is listed")
        assert any("search memory" in label.lower() or "quer" in label.lower() for label in listed())
        await pilot.press("down")  # highlight the first hit
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette), "the palette closes")
        assert app.query_one(PromptInput).text == "/vquery "


@pytest.mark.slow
async def test_a_command_without_arguments_runs_from_the_palette() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await memory_ready(app, pilot)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette opens")
        await pilot.press(*"vstats")
        options = app.screen.query_one("CommandList")

        def first() -> str:
            return str(options.get_option_at_index(0).prompt) if options.option_count else ""  # type: ignore[attr-defined]

        await wait_for(pilot, lambda: "/vstats" in first(), "/vstats is the first hit")
        await pilot.press("down", "enter")  # highlight the first hit and run it
        await wait_for_command(app, pilot)
        assert app.query_one(PromptInput).text == ""
        assert app.query(".command-result")


# -- choices kept across runs ----------------------------------------------------------------


@pytest.mark.slow
async def test_theme_lists_the_current_one_and_broken_files_and_is_kept() -> None:
    from ocat.config.locations import config_dir

    user_themes = config_dir() / "themes"
    user_themes.mkdir(parents=True)
    (user_themes / "broken.yaml").write_text("name: broken\nprimary: red\n")
    first = make_app(dummy=True)
    async with first.run_test(size=(80, 24)) as pilot:
        await memory_ready(first, pilot)
        await send(first, pilot, "/theme")
        await wait_for_command(first, pilot)
        listing = notices(first)[-1]
        assert "textual-dark (current)" in listing and "ocat-night," in listing
        assert "broken.yaml" in listing and "primary must be a hex colour" in listing
        await send(first, pilot, "/theme ocat-night")
        await wait_for_command(first, pilot)
        await send(first, pilot, "/theme")
        await wait_for_command(first, pilot)
        assert "ocat-night (current)" in notices(first)[-1]
    second = make_app(dummy=True)
    async with second.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert second.theme == "ocat-night"
    # A theme the config names wins over the saved one.
    named = make_app(dummy=True, **{"display.theme": "ocat-paper"})
    async with named.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert named.theme == "ocat-paper"


@pytest.mark.slow
async def test_showcontext_is_kept_for_the_next_chat_unless_the_config_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = make_app(dummy=True)
    assert first.session.settings.display.context_mode == "summary"
    async with first.run_test(size=(80, 24)) as pilot:
        await memory_ready(first, pilot)
        await send(first, pilot, "/showcontext off")
        await wait_for_command(first, pilot)
    second = make_app(dummy=True)
    assert second.session.settings.display.context_mode == "off"
    async with second.run_test(size=(80, 24)) as pilot:
        await memory_ready(second, pilot)
        await send(second, pilot, "/showcontext")
        await wait_for_command(second, pilot)
        assert notices(second)[-1] == "Context display: off"
    monkeypatch.setenv("OCAT_DISPLAY_CONTEXT_MODE", "on")
    assert make_app(dummy=True).session.settings.display.context_mode == "on"


def test_saved_choices_apply_only_where_the_config_names_none() -> None:
    from ocat.choices import save_choice, saved_choices, with_saved_choices
    from ocat.config.loading import load_settings
    from ocat.config.locations import choices_file, config_dir

    assert saved_choices() == {}
    save_choice("display.theme", "ocat-night")
    save_choice("display.context_mode", "on")
    assert saved_choices() == {"display.theme": "ocat-night", "display.context_mode": "on"}
    plain_settings = with_saved_choices(load_settings())
    assert (plain_settings.display.theme, plain_settings.display.context_mode) == ("ocat-night", "on")
    config_dir().mkdir(parents=True)
    (config_dir() / "config.yaml").write_text("display:\n  theme: textual-light\n")
    named = with_saved_choices(load_settings())
    assert (named.display.theme, named.display.context_mode) == ("textual-light", "on")
    flagged = with_saved_choices(load_settings(overrides={"display.context_mode": "summary"}))
    assert flagged.display.context_mode == "summary"
    # A damaged file is no choice at all, never a failure to start.
    choices_file().write_text("{not json")
    assert saved_choices() == {}
    choices_file().write_text('{"display.context_mode": "loud"}')
    assert with_saved_choices(load_settings()).display.context_mode == "summary"
