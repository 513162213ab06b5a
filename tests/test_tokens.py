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
