"""The line-mode chat, driven through a pipe: it answers, remembers, recalls, and survives errors."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import Cli
from tests.support.fakes import FakeLLMServer


def chat_args(server: FakeLLMServer) -> list[str]:
    return [
        "--plain", "--model", "openai/fake-model",
        "--set", f"llm.api_base={server.api_base}", "--set", "llm.api_key=sk-test",
        "--set", "display.context_mode=on",
    ]


def test_a_conversation_is_remembered_in_the_next_session(cli: Cli, llm_server: FakeLLMServer) -> None:
    llm_server.reply = "Noted: teal."
    first = cli(*chat_args(llm_server), input="my favourite colour is teal\nand my cat is called Miso\n/quit\n")
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("Noted: teal.") == 2
    # Within a session the earlier exchange is sent as history, not recalled as memory.
    second_request = llm_server.requests[1]["messages"]
    assert {"role": "user", "content": "my favourite colour is teal"} in second_request
    assert not any("<memory" in m["content"] for m in second_request if m["role"] == "system")

    llm_server.reply = "It is teal."
    later = cli(*chat_args(llm_server), input="what is my favourite colour?\n")
    assert later.returncode == 0, later.stderr
    # Which memories were used is status, on stderr; stdout is the answer alone (piped mode).
    assert "Using context from" in later.stderr and "favourite colour is teal" in later.stderr
    assert later.stdout == "It is teal.\n"
    memory = [m for m in llm_server.requests[-1]["messages"] if m["role"] == "system" and "<memory" in m["content"]]
    assert memory and "my favourite colour is teal" in memory[0]["content"]
    stats = cli("--vector-store-stats", "--output", "json").json()["result"]
    assert stats["exchanges"] == 3


def test_a_provider_error_is_shown_and_the_chat_goes_on(cli: Cli, llm_server: FakeLLMServer) -> None:
    llm_server.status = 500
    run = cli(*chat_args(llm_server), "--set", "llm.timeout_seconds=5", input="first try\nsecond try\n")
    assert run.returncode == 0
    assert run.stderr.count("ocat: ") >= 2 and "Traceback" not in run.stderr
    assert len(llm_server.requests) >= 2  # the second prompt was still sent
    assert cli("--vector-store-stats", "--output", "json").json()["result"]["exchanges"] == 0


def test_dummy_mode_chats_without_a_key_and_stores_nothing(cli: Cli) -> None:
    run = cli("--dummy-mode", input="ping\n")
    assert run.returncode == 0, run.stderr
    assert "[dummy] You said: ping" in run.stdout
    assert cli("--vector-store-stats", "--output", "json").json()["result"]["exchanges"] == 0


def test_a_broken_store_turns_memory_off_but_not_the_chat(cli: Cli, llm_server: FakeLLMServer, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store should be")
    run = cli(*chat_args(llm_server), input="hello\n", env={"OCAT_VECTOR_STORE_PATH": str(blocker)})
    assert run.returncode == 0
    assert "memory is off" in run.stderr
    assert "Hello from the fake model." in run.stdout


def test_a_long_vdoc_reports_its_progress_on_stderr(cli: Cli, tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_text("\n\n".join(f"Paragraph {i} is about topic number {i}." for i in range(700)))
    small_chunks = ["--set", "chunking.strategy=fixed_size", "--set", "chunking.chunk_size=40",
                    "--set", "chunking.chunk_overlap=0", "--set", "chunking.max_chunk_size=40"]
    run = cli("--plain", "--dummy-mode", *small_chunks, input=f"/vdoc {big}\n")
    assert run.returncode == 0, run.stderr
    assert "big.txt: 0/" in run.stderr and "chunks stored" in run.stderr  # the total comes first
    assert "Added " in run.stdout


def test_retry_in_line_mode_replaces_the_last_answer(cli: Cli, llm_server: FakeLLMServer) -> None:
    llm_server.reply = "An answer."
    run = cli(*chat_args(llm_server), input="what is the capital of Australia?\n/retry\n/quit\n")
    assert run.returncode == 0, run.stderr
    assert "Asking again" in run.stdout and run.stdout.count("An answer.") >= 2
    assert [r["messages"][-1]["content"] for r in llm_server.requests] == ["what is the capital of Australia?"] * 2
    # The second request does not carry the first answer as history: it was taken back.
    assert not any(m["role"] == "assistant" for m in llm_server.requests[1]["messages"])
    assert cli("--vector-store-stats", "--output", "json").json()["result"]["exchanges"] == 1


def test_the_greeting_names_the_commands_help_lists() -> None:
    """The greeting said "/quit to leave" while /help lists /exit (/quit is an alias it leaves out)."""
    import re

    from ocat.commands.registry import command_overview
    from ocat.repl import banner

    listed = {cell for row in command_overview().rows for cell in row if cell}
    named = re.findall(r"(?<!\w)/\w+", banner("openai/fake-model", memory_on=True))
    assert named == ["/help", "/exit"] and set(named) <= listed
