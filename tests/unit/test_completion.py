"""Completing /model's and /vdoc's arguments: the candidates (ocat.completion), the provider's
model list (ocat.llm.model_list.list_models), /model's listing, and the suggestion list in the chat app."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from ocat.llm import model_list
from ocat.commands import run_command
from ocat.completion import complete
from ocat.config.loading import load_settings
from ocat.chat.session import ChatSession
from ocat.ui.widgets import CommandSuggestions, PromptInput
from tests.support.pilot import make_app, memory_ready, notices, send, wait_for, wait_for_command

MODELS = ("openai/fake-large", "openai/fake-model", "openai/gpt-4o")
NO_MEMORY = {"vector_store.enabled": False}


@pytest.fixture(autouse=True)
def fresh_model_lists() -> Any:
    """Each test lists models afresh (the list is otherwise kept for the whole process)."""
    model_list._listed_cache.clear()
    yield
    model_list._listed_cache.clear()


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "notes.md").write_text("n")
    (tmp_path / "novels").mkdir()
    (tmp_path / "other.txt").write_text("o")
    (tmp_path / ".nosy").write_text("hidden")
    return tmp_path


def _texts(text: str, **kwargs: Any) -> list[str]:
    found = complete(text, **kwargs)
    assert found is not None
    return [c.text for c in found.candidates]


def test_paths_complete_folders_first_with_a_slash_and_hide_dot_files(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    assert _texts(f"/vdoc {folder}/no") == [f"/vdoc {folder}/novels/", f"/vdoc {folder}/notes.md"]
    assert _texts(f"/vdoc {folder}/.n") == [f"/vdoc {folder}/.nosy"]
    assert _texts(f"/vdoc {folder}/zz") == []
    assert _texts(f"/vdoc {folder}/missing/x") == []


def test_a_path_under_home_keeps_its_tilde(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(_folder(tmp_path)))
    found = complete("/vdoc ~/ot")
    assert found is not None and [(c.text, c.label) for c in found.candidates] == [("/vdoc ~/other.txt", "other.txt")]
    assert not found.whole
    whole = complete("/vdoc ~/other.txt")
    assert whole is not None and whole.whole  # an existing path: Enter sends it


def test_docs_names_complete_inside_the_docs_folder_only(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    docs = _folder(tmp_path / "docs")
    assert _texts("/vdoc docs:no", docs_folder=str(docs)) == ["/vdoc docs:novels/", "/vdoc docs:notes.md"]
    assert _texts("/vdoc docs:../", docs_folder=str(docs)) == []
    assert _texts("/vdoc docs:no", docs_folder=None) == []
    assert "/vdoc docs:notes.md" in _texts("/vdoc do", docs_folder=str(docs))


def test_model_names_match_with_or_without_the_provider_prefix() -> None:
    assert _texts("/model gpt", models=MODELS) == ["/model openai/gpt-4o"]
    assert _texts("/model openai/fake", models=MODELS) == ["/model openai/fake-large", "/model openai/fake-model"]
    assert _texts("/model large", models=MODELS) == ["/model openai/fake-large"]  # contained, after the prefixed
    assert complete("/model openai/gpt-4o", models=MODELS).whole  # type: ignore[union-attr]
    assert complete("/vquery x") is None and complete("hello /model x") is None and complete("/model") is None


def test_model_lists_are_parsed_from_openai_and_ollama_answers() -> None:
    openai_style = {"object": "list", "data": [{"id": "b"}, {"id": "a"}, {"id": "a"}, {"nope": 1}]}
    assert model_list.model_names(openai_style, "openai") == ("openai/a", "openai/b")
    assert model_list.model_names({"models": [{"name": "llama3:latest"}]}, "ollama") == ("ollama/llama3:latest",)
    assert model_list.model_names({"data": [{"id": "groq/x"}]}, "groq") == ("groq/x",)
    assert model_list.model_names(["garbage"], "openai") == ()


def _settings(api_base: str | None, model: str = "openai/fake-model") -> Any:
    return load_settings(overrides={"llm.model": model, "llm.api_base": api_base, "llm.api_key": "sk-test-key-123"}).llm


def test_an_openai_compatible_server_lists_its_models_with_the_key(llm_server: Any) -> None:
    listed = model_list.list_models(_settings(llm_server.api_base))
    assert listed.names == ("openai/fake-large", "openai/fake-model") and listed.problem is None
    assert listed.source.endswith("/v1/models")
    assert llm_server.headers[-1]["Authorization"] == "Bearer sk-test-key-123"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_server_that_cannot_be_reached_is_one_line_not_a_traceback() -> None:
    listed = model_list.list_models(_settings(f"http://127.0.0.1:{_closed_port()}/v1"))
    assert listed.names == () and listed.problem is not None
    assert listed.problem.startswith("cannot reach http://127.0.0.1:") and "\n" not in listed.problem


@pytest.mark.slow  # imports litellm (tests/support/slow.py)
def test_without_an_api_base_litellms_offline_list_is_used() -> None:
    listed = model_list.list_models(_settings(None, model="openai/gpt-4o-mini"))
    assert "openai/gpt-4o-mini" in listed.names and "litellm" in listed.source


def test_model_command_lists_the_servers_models_and_marks_the_current_one(llm_server: Any) -> None:
    session = ChatSession(load_settings(overrides={**NO_MEMORY, "llm.model": "openai/fake-model",
                                                   "llm.api_base": llm_server.api_base}))
    result = run_command(session, "/model")
    assert result.text.startswith("Model: openai/fake-model\n2 models from http://127.0.0.1:")
    assert result.rows == [("openai/fake-large",), ("openai/fake-model (current)",)]
    assert model_list.cached_models(session.settings.llm) is not None  # kept for completion


def test_model_command_says_why_there_is_no_list() -> None:
    session = ChatSession(load_settings(overrides={**NO_MEMORY, "llm.model": "openai/x",
                                                   "llm.api_base": f"http://127.0.0.1:{_closed_port()}/v1"}))
    result = run_command(session, "/model")
    first, second = result.text.split("\n")
    assert first == "Model: openai/x" and second.startswith("No list of models: cannot reach ")
    dummy = run_command(ChatSession(load_settings(overrides=NO_MEMORY), dummy=True), "/model")
    assert "--dummy-mode answers without a provider" in dummy.text and not dummy.error


@pytest.mark.anyio
async def test_vdoc_lists_matching_paths_and_tab_completes_them(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "novels" / "one.md").write_text("1")
    app = make_app(dummy=True, **NO_MEMORY)
    async with app.run_test(size=(80, 24)) as pilot:
        await memory_ready(app, pilot)
        suggestions = app.query_one(CommandSuggestions)
        prompt = app.query_one(PromptInput)
        prompt.text = f"/vdoc {folder}/no"
        await wait_for(pilot, lambda: suggestions.display, "the paths are listed")
        labels = [str(suggestions.get_option_at_index(i).prompt) for i in range(suggestions.option_count)]
        assert labels == ["novels/", "notes.md"]
        await pilot.press("tab")
        assert prompt.text == f"/vdoc {folder}/novels/"
        await wait_for(pilot, lambda: suggestions.option_count == 1, "the folder's entries are listed")
        # Enter on a folder that exists sends it rather than completing further.
        await pilot.press("enter")
        assert prompt.text == ""


@pytest.mark.anyio
async def test_model_names_come_from_the_server_in_the_background(llm_server: Any) -> None:
    app = make_app(llm_server, **NO_MEMORY)
    async with app.run_test(size=(80, 24)) as pilot:
        await memory_ready(app, pilot)
        suggestions = app.query_one(CommandSuggestions)
        prompt = app.query_one(PromptInput)
        prompt.text = "/model fake-l"
        await wait_for(pilot, lambda: suggestions.display, "the models are listed")
        assert str(suggestions.get_option_at_index(0).prompt) == "openai/fake-large"
        await pilot.press("enter")  # a partial name: Enter completes it
        assert prompt.text == "/model openai/fake-large"
        await pilot.press("enter")
        await wait_for_command(app, pilot)
        assert app.session.settings.llm.model == "openai/fake-large"
        await send(app, pilot, "/model")
        await wait_for_command(app, pilot)
        assert any(n.startswith("Model: openai/fake-large\n2 models from") for n in notices(app))


def test_snapshot_model_completion(snap_compare: Any, llm_server: Any) -> None:
    llm_server.models = ("fake-model", "fake-large", "gpt-4o", "gpt-4o-mini", "o3-mini")

    async def settle(pilot: Any) -> None:
        await memory_ready(pilot.app, pilot)
        pilot.app.query_one(PromptInput).text = "/model "
        suggestions = pilot.app.query_one(CommandSuggestions)
        await wait_for(pilot, lambda: suggestions.option_count == 5, "the models are listed")
        await pilot.pause()

    assert snap_compare(make_app(llm_server, **NO_MEMORY), terminal_size=(80, 24), run_before=settle)


def test_line_mode_completes_commands_paths_and_models(tmp_path: Path, llm_server: Any) -> None:
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from ocat.repl import _completer

    folder = _folder(tmp_path)
    session = ChatSession(load_settings(overrides={**NO_MEMORY, "llm.model": "openai/fake-model",
                                                   "llm.api_base": llm_server.api_base}))
    completer = _completer(session)

    def offered(text: str) -> list[str]:
        return [c.text for c in completer.get_completions(Document(text), CompleteEvent(completion_requested=True))]

    assert offered("/vdo") == ["/vdoc"]
    assert offered(f"/vdoc {folder}/ot") == [f"/vdoc {folder}/other.txt"]
    assert offered("/model fake-l") == ["/model openai/fake-large"]
