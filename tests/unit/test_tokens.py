"""Counting tokens (ocat.text.tokens): tiktoken only when its encoding is on this machine, never a
fetch; and the estimate that the soft budgets (wake block, memories, tool results) use."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ocat.text import tokens
from ocat.text.tokens import count_tokens, estimate_tokens


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No cached encoding anywhere tiktoken or litellm keep one, and no network."""
    import tiktoken.load

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken"))
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *args: None)

    def fetch(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("tiktoken tried to fetch its encoding")

    monkeypatch.setattr(tiktoken.load, "read_file", fetch)
    tokens._encoding.cache_clear()
    yield
    tokens._encoding.cache_clear()


def test_without_the_encoding_on_this_machine_it_estimates_and_fetches_nothing(nowhere: None) -> None:
    assert tokens.encoding_folder() is None
    assert count_tokens("a sentence of some words") == estimate_tokens("a sentence of some words")


def test_a_cached_encoding_is_found_where_tiktoken_keeps_it(nowhere: None, tmp_path: Path) -> None:
    import hashlib

    folder = tmp_path / "tiktoken"
    folder.mkdir()
    (folder / hashlib.sha1(tokens.ENCODING_URL.encode()).hexdigest()).write_bytes(b"")
    assert tokens.encoding_folder() == str(folder)


def test_the_estimate() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd" * 25) == 25  # a quarter of ASCII characters, as every tuned figure was made with
    assert estimate_tokens("東京は日本の首都です") == 5  # other characters count half each
    assert estimate_tokens("word " * 10 + "東京") == 13 + 1


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the chat's request counts (ocat.chat.messages), by the real counter."""
    from ocat.chat import messages

    seen: list[str] = []

    def counting(text: str) -> int:
        seen.append(text)
        return count_tokens(text)

    monkeypatch.setattr(messages, "count_tokens", counting)
    return seen


def test_a_history_that_surely_fits_the_window_is_sent_whole_without_loading_the_tokenizer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ocat.chat.messages import build_request
    from ocat.records import Exchange

    counted = _counted(monkeypatch)
    history = [Exchange(user_prompt=f"question {i}", assistant_response="an answer " * 50, thread_id="t", session_id="s")
               for i in range(20)]

    request = build_request("the prompt", system="be brief", history=history, token_limit=128_000)

    assert counted == []  # the tokenizer's tables (~50 MB) are never loaded for it
    assert len(request.messages) == 1 + 2 * 20 + 1
    # Under a window it may not fit (bytes > tokens), it is counted and trimmed, oldest first.
    trimmed = build_request("the prompt", system="be brief", history=history, token_limit=2_000)
    assert counted and 2 < len(trimmed.messages) < len(request.messages)
    assert trimmed.messages[-3]["content"] == "question 19"


def test_warming_up_the_model_does_not_load_the_token_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    from ocat import llm
    from ocat.config.loading import load_settings

    monkeypatch.setattr(tokens, "_encoding", lambda: pytest.fail("the token counter was loaded"))
    settings = load_settings(env={"OCAT_LLM_MODEL": "openai/fake-model", "OCAT_LLM_API_BASE": "http://127.0.0.1:9/v1"})

    llm.warm_up(settings.llm)
