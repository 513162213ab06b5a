"""Writing a prompt in $EDITOR (/edit, keys.editor) and edit-and-resend (/edit last), with a fake editor script."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ocat.commands import Send, run_command
from ocat.commands.editing import replace_last
from ocat.commands.results import EditPrompt
from ocat.editor import edit_text, editor_command
from ocat.errors import OcatError
from ocat.memory import MemoryStore
from ocat.chat.session import ChatSession
from tests.support.cli import Cli
from tests.support.fakes import FakeLLMServer


def fake_editor(tmp_path: Path, body: str = 'printf "%s, edited" "$(cat "$file")" > "$file"') -> str:
    """A shell script that acts as the editor: it records its arguments and the file it was
    given, then runs `body` on that file ($file); returns the $EDITOR value that runs it."""
    script = tmp_path / "fake-editor.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$@" > "{tmp_path}/args"\n'
        'for file; do :; done\n'
        f'printf "%s" "$file" > "{tmp_path}/file"\n'
        f"{body}\n"
    )
    script.chmod(0o755)
    return str(script)


@pytest.fixture
def editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", fake_editor(tmp_path))
    return str(tmp_path)


def test_the_editor_is_visual_then_editor_split_like_a_shell_then_a_fallback(tmp_path: Path) -> None:
    assert editor_command({"VISUAL": "code --wait", "EDITOR": "nano"}) == ["code", "--wait"]
    assert editor_command({"VISUAL": " ", "EDITOR": "'my editor' -n"}) == ["my editor", "-n"]
    (tmp_path / "vi").write_text("#!/bin/sh\n")
    (tmp_path / "vi").chmod(0o755)
    assert editor_command({"PATH": str(tmp_path)}) == ["vi"]
    with pytest.raises(OcatError, match=r"no editor found: set \$EDITOR"):
        editor_command({"PATH": str(tmp_path / "empty")})
    with pytest.raises(OcatError, match=r"\$EDITOR cannot be read"):
        editor_command({"EDITOR": "vi 'unclosed"})


@pytest.mark.slow  # runs the fake editor
def test_the_saved_text_comes_back_and_the_temporary_file_goes(editor: str) -> None:
    assert edit_text("a long prompt\nin two lines") == "a long prompt\nin two lines, edited"
    used = Path(editor, "file").read_text()
    assert used.endswith(".md") and not Path(used).exists()


@pytest.mark.slow  # runs the fake editor
def test_arguments_in_editor_are_passed_before_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"{fake_editor(tmp_path)} --wait '-c set tw=0'")
    assert edit_text("x") == "x, edited"
    args = (tmp_path / "args").read_text().splitlines()
    assert args[:2] == ["--wait", "-c set tw=0"] and args[2] == (tmp_path / "file").read_text()


@pytest.mark.slow  # runs the fake editor
def test_an_editor_that_fails_or_is_missing_raises_and_removes_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", fake_editor(tmp_path, body='echo changed > "$file"; exit 3'))
    with pytest.raises(OcatError, match="exited with status 3; the prompt is left as it was"):
        edit_text("keep me")
    assert not Path((tmp_path / "file").read_text()).exists()
    monkeypatch.setenv("EDITOR", "no-such-editor-here --wait")
    with pytest.raises(OcatError, match="'no-such-editor-here' could not be started"):
        edit_text("keep me")


def test_edit_last_takes_nothing_back_until_the_edited_prompt_is_sent(session: ChatSession, store: MemoryStore) -> None:
    assert run_command(session, "/edit last").error  # nothing to edit yet
    assert run_command(session, "/edit").request == EditPrompt()
    session.record("first", "one", [])
    last = session.record("what is the capital of Australia?", "Sydney", []).exchange
    asked = run_command(session, "/edit last")
    assert asked.request == EditPrompt("what is the capital of Australia?", last.exchange_id)
    assert len(session.history) == 2 and store.count("exchange") == 2  # still there
    sent = replace_last(session, last.exchange_id, "what is the capital of Australia, really?")
    assert sent.request == Send("what is the capital of Australia, really?") and sent.conversation_replaced
    assert [e.user_prompt for e in session.history] == ["first"] and store.count("exchange") == 1


def test_an_edited_prompt_sent_after_the_conversation_moved_on_replaces_nothing(
    session: ChatSession, store: MemoryStore
) -> None:
    old = session.record("first", "one", []).exchange
    session.record("second", "two", [])
    sent = replace_last(session, old.exchange_id, "first, edited")
    assert sent.request == Send("first, edited") and not sent.conversation_replaced
    assert "nothing is replaced" in sent.text and store.count("exchange") == 2


@pytest.mark.slow  # runs the fake editor
@pytest.mark.anyio
async def test_the_editor_key_and_edit_put_the_edited_text_in_the_box(editor: str) -> None:
    from tests.support.pilot import make_app, notices, wait_for, wait_for_command
    from ocat.ui.widgets import PromptInput

    app = make_app(dummy=True, **{"vector_store.enabled": False})
    async with app.run_test(size=(80, 24)) as pilot:
        box = app.query_one(PromptInput)
        box.text = "a long prompt"
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: box.text == "a long prompt, edited", "the edited text in the box")
        assert app.turn is None  # not sent: Enter sends it
        box.text = "/edit"
        await pilot.press("enter")
        await wait_for_command(app, pilot)
        await wait_for(pilot, lambda: box.text == ", edited", "/edit's text in the box")
        # A failing editor leaves the box as it was and says why in the conversation.
        Path(editor, "fake-editor.sh").write_text("#!/bin/sh\nexit 4\n")
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: any("status 4" in n for n in notices(app)), "the editor's failure")
        assert box.text == ", edited"


@pytest.mark.slow  # the app's memory runs the real model
@pytest.mark.anyio
async def test_edit_last_in_the_app_replaces_the_stored_exchange(llm_server: Any) -> None:
    from ocat.ui.answer import AssistantMessage
    from ocat.ui.widgets import PromptInput, UserMessage
    from tests.support.pilot import make_app, memory_ready, send, wait_for, wait_for_command

    app = make_app(llm_server)
    async with app.run_test(size=(80, 24)) as pilot:
        await memory_ready(app, pilot)
        box = app.query_one(PromptInput)
        llm_server.reply = "Sydney"
        await send(app, pilot, "what is the capital of Australia?")
        await send(app, pilot, "/edit last")
        await wait_for_command(app, pilot)
        await wait_for(pilot, lambda: box.text == "what is the capital of Australia?", "the last prompt in the box")
        assert box.border_title and "editing the last prompt" in str(box.border_title)
        store = app.session.session_memory.store
        assert store is not None and store.count("exchange") == 1  # nothing taken back before sending
        # Cleared, the box forgets it was editing: nothing would be replaced.
        box.text = ""
        await wait_for(pilot, lambda: not box.editing_last, "the mark gone")
        await send(app, pilot, "/edit last")
        await wait_for_command(app, pilot)
        await wait_for(pilot, lambda: bool(box.editing_last), "the mark back")
        llm_server.reply = "Canberra"
        box.text = "what is the capital of Australia, really?"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.turn is not None and app.turn.is_finished and app.last_answer == "Canberra",
                       "the new answer")
        assert not box.border_title
        [kept] = app.session.history
        assert store.count("exchange") == 1
        stored = store.get(kept.exchange_id)
        assert (stored.user_prompt, stored.assistant_response) == ("what is the capital of Australia, really?",
                                                                    "Canberra")
        assert [str(w.render()) for w in app.query(UserMessage)] == ["what is the capital of Australia, really?"]
        assert [w.source for w in app.query(AssistantMessage)] == ["Canberra"]


def test_edit_last_in_line_mode_replaces_the_last_exchange(cli: Cli, llm_server: FakeLLMServer) -> None:
    from tests.cli.test_repl import chat_args

    llm_server.reply = "An answer."
    run = cli(*chat_args(llm_server), input="what is the capital?\n/edit last\nwhat is the capital of Australia?\n"
              "/edit last\n/help edit\n/quit\n")
    assert run.returncode == 0, run.stderr
    assert "Sending the edited prompt" in run.stdout
    assert [r["messages"][-1]["content"] for r in llm_server.requests] == [
        "what is the capital?", "what is the capital of Australia?"]
    assert not any(m["role"] == "assistant" for m in llm_server.requests[1]["messages"])
    # The second /edit last was followed by a command: nothing was taken back.
    assert cli("--vector-store-stats", "--output", "json").json()["result"]["exchanges"] == 1
