"""Issue 47: every way into memory keeps secrets out, every way out can only give what was kept.

A chat turn (prompt and answer; the model is sent them as typed), `/vadd`, `/vdoc`, every
`--import-history` format and `--import-memory`, the model's `remember`, `/remember` and MCP's
`memory_save` each store the corpus of fake credentials (tests/support/secrets_corpus.py) as
placeholders; the export, the memory block, the wake block, `ocat mcp` results and the lexical
index's terms then hold none of them. `keep` keeps them, `strict` takes prose too (but not from
`/remember`), and an old store is counted by `--check-store` and mended by `--redact-secrets`.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ocat.chat.outcomes import secrets_words
from ocat.chat.session import ChatSession
from ocat.commands import run_command
from ocat.config.loading import load_settings
from ocat.memory import MemoryStore, StoreLocation, export_memory, import_memory
from ocat.memory.storage.terms import terms
from ocat.operations.history import import_history
from ocat.operations.search import search
from ocat.records import PINNED_KEY, Exchange
from ocat.text.secrets import placeholder
from tests.support.agent_fixtures import ClaudeCodeSession, CodexSession
from tests.support.cli import Cli
from tests.support.fakes import FakeEmbedder
from tests.support.history_fixtures import (
    add_llm_thread, claude_conversation, claude_message, create_llm_db, gpt_linear, write_json,
)
from tests.support.secrets_corpus import CREDENTIALS, PROSE

# The whole corpus in one text: every kind, each in its sentence, one a paragraph.
CORPUS = "\n\n".join(sentence for _, sentence in CREDENTIALS.values())
SECRETS = [secret for secret, _ in CREDENTIALS.values()]
# The long terms the lexical index would hold, were a secret indexed.
SECRET_TERMS = {t for s in SECRETS for t in terms(s) if len(t) >= 8}


def stored_text(store: MemoryStore) -> str:
    """Everything the store's primary side holds: every text and every metadata value."""
    parts = []
    for kind in ("exchange", "document"):
        for record_id, text, metadata in store.iter_rows(kind):
            parts += [record_id, text, json.dumps(metadata)]
    return "\n".join(parts)


def lexical_terms(store: MemoryStore) -> set[str]:
    """Every term the lexical index holds, of both kinds."""
    db = store.lexical.file.connection
    return {row[0] for kind in ("exchange", "document") for row in db.execute(f"SELECT term FROM df_{kind}")}


def assert_no_secret(store: MemoryStore) -> None:
    held = stored_text(store)
    found = [s for s in SECRETS if s in held or json.dumps(s)[1:-1] in held]
    assert not found, found
    # Nor any long term made from a secret in the lexical index.
    assert not SECRET_TERMS & lexical_terms(store)


def assert_every_kind_placed(store: MemoryStore) -> None:
    held = stored_text(store)
    missing = [kind for kind in CREDENTIALS if placeholder(kind) not in held]
    assert not missing, missing


def session_on(store: MemoryStore, **overrides: Any) -> ChatSession:
    return ChatSession(load_settings(env={}, overrides=overrides), store=store)


# -- ways in ------------------------------------------------------------------------------------


def test_a_chat_turn_is_kept_without_its_secrets_and_the_conversation_keeps_it_as_typed(store: MemoryStore) -> None:
    session = session_on(store)
    recorded = session.record(f"why does this fail?\n{CORPUS}", "Your OpenAI key " + CREDENTIALS["OpenAI key"][0]
                              + " has expired.", [])
    assert recorded.stored
    assert_no_secret(store)
    assert_every_kind_placed(store)
    [kept] = store.get_thread(session.thread_id)
    assert "why does this fail?" in kept.user_prompt and "has expired." in kept.assistant_response
    # The conversation (what the next turn sends) has it as typed; memory has placeholders.
    assert CREDENTIALS["AWS key"][0] in session.history[-1].user_prompt
    assert len(recorded.secrets) == len(CREDENTIALS) + 1
    words = secrets_words(recorded)
    assert words is not None and words.startswith(f"{len(CREDENTIALS) + 1} secrets in this turn were not kept")
    one = session.record("my key " + CREDENTIALS["OpenAI key"][0], "noted", [])
    assert secrets_words(one) == "1 secret in this turn was not kept in memory (OpenAI key)."


def test_the_prompt_history_file_keeps_prompts_without_their_credentials(tmp_path: Path) -> None:
    from ocat.chat.prompt_history import append_history, load_history

    path = tmp_path / "history"
    append_history(CREDENTIALS["Stripe key"][1], path)
    assert load_history(path) == [CREDENTIALS["Stripe key"][1].replace(CREDENTIALS["Stripe key"][0],
                                                                       placeholder("Stripe key"))]


def test_the_file_a_closing_chat_keeps_holds_no_secret(store: MemoryStore, tmp_path: Path) -> None:
    session = session_on(store)
    exchange = session.stamp().exchange(CORPUS, "ok", [])
    session.session_memory.hold(exchange)  # as a turn whose answer came: every way out keeps it in a file first
    spooled = session.session_memory.spool()
    assert spooled.path is not None
    kept = Path(spooled.path).read_text(encoding="utf-8")
    assert not [s for s in SECRETS if s in kept or json.dumps(s)[1:-1] in kept]
    assert exchange.user_prompt == CORPUS  # the turn itself is as typed


def test_a_tool_call_s_arguments_are_kept_without_secrets(store: MemoryStore) -> None:
    from ocat.records import CalledTool

    session = session_on(store)
    call = CalledTool("remember", json.dumps({"text": CREDENTIALS["Stripe key"][1]}), count=1)
    session.record("store my key", "Remembered.", [], (call,))
    assert_no_secret(store)
    assert placeholder("Stripe key") in stored_text(store)


def test_vadd_vdoc_and_the_model_s_remember_keep_secrets_out(store: MemoryStore, tmp_path: Path) -> None:
    session = session_on(store)
    added = run_command(session, "/vadd " + CREDENTIALS["GitLab token"][1])
    assert "1 secret not kept (GitLab token)" in added.text
    notes = tmp_path / "env-notes.md"
    notes.write_text(CORPUS, encoding="utf-8")
    assert "not kept" in run_command(session, f"/vdoc {notes}").text
    box = session.tools().box(set())
    assert box is not None
    from ocat.tools.calls import ToolCall

    done = box.run(ToolCall("c", "remember", json.dumps({"text": "Slack: " + CREDENTIALS["Slack token"][1]})))
    assert done.error is None
    assert_no_secret(store)
    assert_every_kind_placed(store)


def test_mcp_memory_save_keeps_secrets_out_and_its_search_cannot_give_them(store: MemoryStore) -> None:
    from ocat.mcp_server.tools import MemoryTools

    tools = MemoryTools(load_settings(env={}), lambda: [store])
    tools.save(CORPUS, source="agent")
    assert_no_secret(store)
    found = json.dumps(tools.search("OpenAI key AWS key password token", 10))
    assert placeholder("password") in found and not [s for s in SECRETS if s in found]


def test_remember_keeps_prose_under_strict_but_never_a_credential(store: MemoryStore) -> None:
    session = session_on(store, **{"memory.secrets": "strict"})
    prose_secret, prose = PROSE["password"]
    said = run_command(session, f"/remember {prose} Key: {CREDENTIALS['Anthropic key'][0]}").text
    assert "1 secret not kept (Anthropic key)" in said
    held = stored_text(store)
    assert prose_secret in held and CREDENTIALS["Anthropic key"][0] not in held
    # The same prose said in a chat turn under strict is taken out.
    session.record(prose, "I will remember that.", [])
    [turn] = store.get_thread(session.thread_id)
    assert prose_secret not in turn.user_prompt and placeholder("password") in turn.user_prompt
    # The wake block gives the pinned note: with its prose, without the key.
    wake = session.wake.for_turn(session.session_memory, session.scope().project)
    assert wake is not None and prose_secret in wake.text() and CREDENTIALS["Anthropic key"][0] not in wake.text()


def test_keep_keeps_everything_and_says_how_many_it_kept(store: MemoryStore) -> None:
    store.secrets = "keep"
    session = session_on(store, **{"memory.secrets": "keep"})
    said = run_command(session, "/vadd " + CREDENTIALS["AWS key"][1]).text
    assert "1 secret kept as they were (AWS key)" in said
    recorded = session.record(CREDENTIALS["OpenAI key"][1], "ok", [])
    assert recorded.secrets == () and secrets_words(recorded) is None
    held = stored_text(store)
    assert CREDENTIALS["AWS key"][0] in held and CREDENTIALS["OpenAI key"][0] in held


def _history_files(tmp_path: Path) -> dict[str, Path]:
    """One file of each --import-history format, each conversation holding the corpus."""
    for folder in ("chatgpt", "claude"):
        (tmp_path / folder).mkdir()
    gpt = write_json(tmp_path / "chatgpt" / "conversations.json",
                     [gpt_linear("g1", "Deploy", [("user", CORPUS), ("assistant", "Rotate them all.")])])
    claude = write_json(tmp_path / "claude" / "conversations.json", [claude_conversation("c1", "Keys", [
        claude_message("m1", "human", CORPUS), claude_message("m2", "assistant", "Rotate them all.")])])
    logs = tmp_path / "logs.db"
    create_llm_db(logs)
    with sqlite3.connect(logs) as db:
        add_llm_thread(db, "t1", "Keys", [(CORPUS, "Rotate them all.")])
    db.close()
    claude_code = ClaudeCodeSession("cc-1").prompt(CORPUS).says("Rotate them all.").write(tmp_path / "cc" / "cc-1.jsonl")
    codex = CodexSession("cx-1").prompt(CORPUS).says("Rotate them all.").write(tmp_path / "codex" / "cx-1.jsonl")
    line = {"kind": "exchange", "exchange_id": "e-1", "thread_id": "t", "session_id": "s", "user_prompt": CORPUS,
            "assistant_response": "Rotate them all.", "timestamp": 1700000000.0, "prior_exchange_ids": [],
            "thread_session_id": "t_s", "thread_continuation_seq": 0}
    export = tmp_path / "export.jsonl"
    export.write_text(json.dumps(line) + "\n", encoding="utf-8")
    return {"chatgpt": gpt, "claude": claude, "llm": logs, "claude-code": claude_code, "codex": codex, "ocat": export}


@pytest.mark.parametrize("fmt", ["chatgpt", "claude", "llm", "claude-code", "codex"])
def test_every_history_format_is_imported_without_its_secrets(fmt: str, tmp_path: Path,
                                                            fake_embedder: FakeEmbedder) -> None:
    store = MemoryStore.open(StoreLocation(path=tmp_path / "store"), fake_embedder, name="test")
    done = import_history(store, _history_files(tmp_path)[fmt], fmt)
    assert done.exchanges >= 1 and len(done.secrets) == len(CREDENTIALS), done
    assert f"{len(CREDENTIALS)} secrets not kept" in done.sentence()
    assert_no_secret(store)
    assert_every_kind_placed(store)


def test_import_memory_of_an_export_keeps_secrets_out(store: MemoryStore, tmp_path: Path) -> None:
    export = _history_files(tmp_path)["ocat"]
    import_memory(store, export)
    assert_no_secret(store)


# -- ways out -----------------------------------------------------------------------------------


def test_the_export_the_memory_block_and_search_hold_only_placeholders(store: MemoryStore) -> None:
    session = session_on(store)
    session.record(f"here is my .env:\n{CORPUS}", "Rotate them all.", [])
    out = io.StringIO()
    export_memory(store, out)
    assert not [s for s in SECRETS if s in out.getvalue()]
    assert placeholder("private key") in out.getvalue()
    found = search([store], "here is my .env rotate", session.settings.vector_store, count=5)
    hits = [f.hit for f in found.found]
    assert hits
    from ocat.chat.messages import build_request

    request = build_request("what did I paste?", system="", memories=hits)  # as a turn quotes its memories
    sent = json.dumps(request.messages)
    assert not [s for s in SECRETS if s in sent] and "[secret: " in sent
    # The model's own tools read the same store: search_memory and read_thread give placeholders.
    from ocat.tools.calls import ToolCall

    box = session_on(store).tools().box(set())
    assert box is not None
    for name, arguments in (("search_memory", {"query": "here is my .env rotate"}),
                            ("read_thread", {"id": session.thread_id})):
        result = box.run(ToolCall("c", name, json.dumps(arguments)))
        assert result.error is None and "[secret: " in result.result, (name, result)
        assert not [s for s in SECRETS if s in result.result]
    assert not SECRET_TERMS & lexical_terms(store)


# -- old stores ---------------------------------------------------------------------------------


def _old_store(store: MemoryStore) -> Exchange:
    """A store an older ocat filled (memory.secrets: keep writes as it did): secrets and all, a
    pin, a title and a key ocat does not know on the records."""
    store.secrets = "keep"
    session = session_on(store, **{"memory.secrets": "keep"})
    session.record(CORPUS, "Rotate them all.", [])
    [exchange] = store.get_thread(session.thread_id)
    store.exchanges.update(ids=[exchange.exchange_id], metadatas=[{"thread_title": "Keys", "mine": "kept"}])
    run_command(session, "/vadd " + CREDENTIALS["Google key"][1])
    run_command(session, "/vadd the spare key is under the blue flowerpot")
    note = next(i for i, text, _ in store.iter_rows("document") if "flowerpot" in text)
    store.documents.update(ids=[note], metadatas=[{PINNED_KEY: 5.0}])
    store.secrets = "redact"
    return exchange


def test_check_counts_and_redact_rewrites_in_place_keeping_every_other_byte(store: MemoryStore) -> None:
    from ocat.memory import redact_store, secrets_in_store

    exchange = _old_store(store)
    before = {kind: {i: (t, m) for i, t, m in store.iter_rows(kind)} for kind in ("exchange", "document")}
    found = secrets_in_store(store)
    assert found.records == 2 and found.count == len(CREDENTIALS) + 1
    assert found.line().startswith("secrets: 2 records hold 18 secrets (") and CREDENTIALS["AWS key"][0] not in found.line()
    done = redact_store(store)
    assert done.rewritten == 2
    assert_no_secret(store)
    assert secrets_in_store(store).records == 0
    after = {kind: {i: (t, m) for i, t, m in store.iter_rows(kind)} for kind in ("exchange", "document")}
    assert {k: set(v) for k, v in after.items()} == {k: set(v) for k, v in before.items()}  # same ids, none lost
    for kind in after:
        for record_id, (text, metadata) in after[kind].items():
            old_text, old_metadata = before[kind][record_id]
            changed = {k for k in old_metadata if old_metadata[k] != metadata.get(k)}
            assert set(metadata) == set(old_metadata)
            assert changed <= {"user_prompt", "assistant_response"}, changed
            if not changed and kind == "document" and "flowerpot" in old_text:
                assert text == old_text
    kept = after["exchange"][exchange.exchange_id][1]
    assert kept["mine"] == "kept" and kept["thread_title"] == "Keys" and kept["timestamp"] == exchange.timestamp
    # The lexical index was rebuilt from the new text: a search by the placeholder's words finds it.
    assert [i for i, _ in store.lexical.search("exchange", terms("rotate placeholder secret"), 5)] == [exchange.exchange_id]
    assert not SECRET_TERMS & lexical_terms(store)


@pytest.mark.slow
def test_the_chat_from_the_command_line_then_check_store_and_redact_secrets(cli: Cli, tmp_path: Path,
                                                                          llm_server: Any) -> None:
    # --ask: the model is sent the key as typed; memory keeps a placeholder; JSON lists the kinds.
    args = ["--model", "openai/fake-model", "--set", f"llm.api_base={llm_server.api_base}", "--set", "llm.api_key=sk-test"]
    key = CREDENTIALS["OpenAI key"][0]
    asked = cli("--ask", f"is {key} valid?", "--output", "json", *args)
    assert asked.returncode == 0, asked.stderr
    assert asked.json()["result"]["secrets_not_kept"] == ["OpenAI key"]
    assert llm_server.requests[-1]["messages"][-1]["content"] == f"is {key} valid?"
    plain = cli("--ask", f"why does this fail?\n{CORPUS}", *args)
    assert f"{len(CREDENTIALS)} secrets in this turn were not kept in memory (" in plain.stderr
    # The line mode: the second turn is sent the first as typed (the conversation keeps it).
    line = cli("--plain", *args, input=f"here: {key}\nand again?\n")
    assert line.returncode == 0, line.stderr
    assert line.stderr.count("1 secret in this turn was not kept in memory (OpenAI key).") == 1
    assert {"role": "user", "content": f"here: {key}"} in llm_server.requests[-1]["messages"]
    # Not one byte of anything ocat wrote holds a secret: the store (Chroma's files too), its
    # derived files, the prompt history, the state folder, the log.
    written = [p for root in (cli.home, cli.store_path) for p in Path(root).rglob("*") if p.is_file()]
    assert written and not [p for p in written if any(s.encode() in p.read_bytes() for s in SECRETS)]

    # An old store: secrets written under `keep`, counted by --check-store, taken out by --redact-secrets.
    env_file = tmp_path / "env.md"
    env_file.write_text(CORPUS, encoding="utf-8")
    kept = cli("--add-to-vector-store", str(env_file), "--set", "memory.secrets=keep", "--output", "json")
    assert kept.returncode == 0, kept.stderr
    assert kept.json()["result"]["secrets_kept"] is True and len(kept.json()["result"]["secrets"]) == len(CREDENTIALS)
    check = cli("--check-store")
    assert "secrets: 2 records hold 17 secrets (" in check.stdout, check.stdout  # the file is two chunks
    assert not [s for s in SECRETS if s in check.stdout + check.stderr]
    refused = cli("--redact-secrets", input="")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    done = cli("--redact-secrets", "--yes", "--output", "json")
    assert done.returncode == 0, done.stderr
    assert done.json()["result"]["rewritten"] == 2
    exported = cli("--export-memory", "-")
    assert exported.returncode == 0 and not [s for s in SECRETS if s in exported.stdout]
    assert "secrets: none found" in cli("--check-store").stdout


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_full_screen_chat_says_it_once_quietly(llm_server: Any) -> None:
    from tests.support.pilot import make_app, memory_ready, notices, send

    app = make_app(llm_server)
    key = CREDENTIALS["OpenAI key"][0]
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, f"why is {key} refused?")
        await send(app, pilot, "and now?")
        said = [n for n in notices(app) if "secret" in n]
        assert said == ["1 secret in this turn was not kept in memory (OpenAI key)."]
        assert {"role": "user", "content": f"why is {key} refused?"} in llm_server.requests[-1]["messages"]
        store = app.session.session_memory.store
        assert store is not None and key not in stored_text(store)
