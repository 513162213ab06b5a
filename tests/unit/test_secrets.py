"""Issue 47: what memory keeps out. The detector (`ocat.text.secrets`) on a corpus of fake
credentials, one of each kind, and on look-alikes that must stay; the modes; and the property
that redaction never takes a word that holds no secret."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from ocat.text.redact import redact
from ocat.text.secrets import find_secrets, placeholder, redact_secrets
from tests.support.examples import examples
from tests.support.secrets_corpus import CREDENTIALS, LOOK_ALIKES, PROSE


@pytest.mark.parametrize("kind", sorted(CREDENTIALS))
def test_each_kind_of_credential_becomes_a_placeholder_and_the_words_around_it_stay(kind: str) -> None:
    secret, sentence = CREDENTIALS[kind]
    kept = redact_secrets(sentence)
    assert secret not in kept.text and kept.kinds == (kind,), kept
    assert placeholder(kind) in kept.text
    # Every word that was not the secret is still there.
    assert kept.text == sentence.replace(secret, placeholder(kind))


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alikes_stay_as_they_are_even_under_strict(text: str) -> None:
    assert redact_secrets(text, "strict") == redact_secrets(text, "strict").__class__(text, ())


@pytest.mark.parametrize("kind", sorted(PROSE))
def test_prose_passwords_and_codes_are_kept_by_default_and_taken_under_strict(kind: str) -> None:
    secret, sentence = PROSE[kind]
    assert redact_secrets(sentence).text == sentence
    strict = redact_secrets(sentence, "strict")
    assert secret not in strict.text and strict.kinds == (kind,)


def test_keep_changes_nothing_and_still_names_what_it_found() -> None:
    secret, sentence = CREDENTIALS["AWS key"]
    kept = redact_secrets(sentence, "keep")
    assert kept.text == sentence and kept.kinds == ("AWS key",)


def test_redaction_is_idempotent_on_the_whole_corpus() -> None:
    everything = "\n\n".join(s for _, s in CREDENTIALS.values())
    once = redact_secrets(everything)
    assert sorted(once.kinds) == sorted(CREDENTIALS)
    assert redact_secrets(once.text) == once.__class__(once.text, ())
    assert not find_secrets(once.text, prose=True)


def test_a_private_key_block_goes_whole_even_when_cut_short() -> None:
    _, sentence = CREDENTIALS["private key"]
    cut = sentence[: sentence.index("-----END")]
    kept = redact_secrets(cut + " trailing")
    assert kept.kinds == ("private key",) and "MIIE" not in kept.text and kept.text.startswith("my server key:")


def test_error_messages_still_hide_keys_through_the_same_detector() -> None:
    # ocat.text.redact masks with *** in errors and logs; the key shapes come from ocat.text.secrets.
    secret, sentence = CREDENTIALS["GitHub token"]
    assert secret not in redact(sentence, env={}) and "***" in redact(sentence, env={})


# Words that hold no secret. "Bearer", "Basic" and "token" are left out: a word after one of them
# that looks like a token (8 characters or more, a digit) is one (`Authorization: Basic 0a1b2c3d`),
# so the words drawn after them would be secrets the text holds ("BASIC 00000000" was drawn).
_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=1, max_size=12) \
    .filter(lambda word: word.lower() not in ("bearer", "basic", "token"))


@settings(max_examples=examples(200), deadline=None)
@given(words=st.lists(_WORD, min_size=1, max_size=40),
       secrets=st.lists(st.sampled_from(sorted(CREDENTIALS)), max_size=3),
       where=st.lists(st.integers(min_value=0, max_value=40), max_size=3))
def test_redaction_never_removes_a_word_that_holds_no_secret(words: list[str], secrets: list[str], where: list[int]) -> None:
    text_words = list(words)
    for kind, at in zip(secrets, where):  # each secret in its sentence, on a line of its own
        text_words.insert(min(at, len(text_words)), "\n" + CREDENTIALS[kind][1] + "\n")
    text = " ".join(text_words)
    kept = redact_secrets(text).text.split()
    for word in words:
        assert kept.count(word) >= words.count(word), (word, text, kept)
    for kind in secrets:
        assert CREDENTIALS[kind][0] not in " ".join(kept)
