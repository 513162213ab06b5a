"""Slash-command arguments: each command declares them, and run_command checks them before the handler runs."""

from __future__ import annotations

import inspect
import shlex
from pathlib import Path

import pytest

from ocat import commands as registry
from ocat.commands import Arg, Choose, CommandResult, Confirm, ShowThemes, command, commands, run_command
from ocat.commands.arguments import check_declaration
from ocat.text.limits import MAX_RESULTS, whole_number
from ocat.memory import MemoryStore
from ocat.records import Exchange
from ocat.chat.session import ChatSession
from ocat.llm import model_list
from ocat.llm.model_list import ModelList
from tests.support.cli import Cli


def error_of(session: ChatSession, line: str) -> str:
    result = run_command(session, line)
    assert result.error, f"{line!r} should have been refused: {result.text}"
    assert "Traceback" not in result.text
    return result.text


# -- the breaks --------------------------------------------------------------------------------


def test_vquery_count_follows_the_rule_and_limits_of_results(session: ChatSession) -> None:
    for n in range(6):
        run_command(session, f"/vadd garden note number {n} about tomatoes")
    assert error_of(session, '/vquery "tomatoes" 0') == (
        '/vquery: COUNT must be a whole number from 1 to 1000, not "0"; usage: /vquery "QUERY" [COUNT]'
    )
    assert "not \"1001\"" in error_of(session, "/vquery tomatoes 1001")
    assert "not \"-2\"" in error_of(session, "/vquery tomatoes -2")
    # The words are the CLI's: one function says what --results and COUNT accept.
    with pytest.raises(ValueError) as cli_words:
        whole_number("0", 1, MAX_RESULTS)
    assert str(cli_words.value) in error_of(session, '/vquery "tomatoes" 0')
    assert len(run_command(session, "/vquery garden tomatoes 2").rows) == 2  # unquoted words, then the count
    assert len(run_command(session, '/vquery "garden tomatoes" 1000').rows) == 6
    assert len(run_command(session, "/vquery garden tomatoes").rows) == 5  # context_results by default
    # A lone number is the query, and a quoted query may end in a number.
    assert not run_command(session, "/vquery 2019").error
    assert "'tomatoes 3'" in run_command(session, "/vquery 'tomatoes 3' 4").text
    assert error_of(session, '/vquery "   "') == '/vquery needs a query: /vquery "what did we decide" 5'


def test_threads_count_is_checked_not_read_as_none(session: ChatSession) -> None:
    for n in range(9):
        session.new_thread()
        session.record(f"question {n}", "answer", [])
    assert len(run_command(session, "/threads").rows) == 9
    assert len(run_command(session, "/threads 3").rows) == 3
    assert error_of(session, "/threads 0") == (
        '/threads: COUNT must be a whole number from 1 to 1000, not "0"; usage: /threads [COUNT]'
    )
    assert error_of(session, "/threads abc") == (
        '/threads: COUNT must be a whole number from 1 to 1000, not "abc"; usage: /threads [COUNT]'
    )
    assert "too many arguments" in error_of(session, "/threads 3 4")


def test_history_count_is_checked(session: ChatSession) -> None:
    for n in range(3):
        session.record(f"prompt {n}", "answer", [])
    assert [row[1] for row in run_command(session, "/history 2").rows] == ["prompt 1", "prompt 2"]
    assert error_of(session, "/history abc") == (
        '/history: COUNT must be a whole number from 1 to 1000, not "abc"; usage: /history [COUNT]'
    )
    assert "not \"0\"" in error_of(session, "/history 0")  # was: every prompt ([-0:])


@pytest.mark.parametrize("line", ["/clear extra", "/vstats extra", "/exit now", "/quit now"])
def test_commands_without_arguments_refuse_extras_and_do_nothing(session: ChatSession, line: str) -> None:
    session.record("kept", "answer", [])
    thread = session.thread_id
    name = line.split()[0][1:]
    shown = registry.REGISTRY[name].usage
    expected = f'/{registry.REGISTRY[name].name}: takes no arguments, not "{line.split()[1]}"; usage: {shown}'
    assert error_of(session, line) == expected
    assert not run_command(session, line).quit
    assert session.thread_id == thread and [e.user_prompt for e in session.history] == ["kept"]


def test_model_takes_one_name(session: ChatSession, monkeypatch: pytest.MonkeyPatch) -> None:
    before = session.settings.llm.model
    # A provider's list without litellm's: listing the default provider's models offline imports
    # litellm (5-9 s); tests/unit/test_completion.py lists them from a server.
    monkeypatch.setattr(model_list, "list_models", lambda settings, dummy=False: ModelList(("gpt-4o",), "a test"))
    assert error_of(session, "/model a b c") == '/model: too many arguments ("b c" is extra); usage: /model [NAME]'
    assert session.settings.llm.model == before
    assert run_command(session, "/model").text.splitlines()[0] == f"Model: {before}"  # then the models listed
    assert run_command(session, '/model "other/model"').text.startswith("Model: other/model")


@pytest.mark.slow  # a process of its own, which imports litellm for its list
def test_model_lists_litellms_offline_models_for_a_provider_without_a_server(cli: Cli) -> None:
    run = cli("--plain", "--model", "gpt-4o-mini", "--set", "llm.api_key=k", input="/model\n")
    assert run.returncode == 0, run.stderr
    assert "models from litellm's list for openai (offline; the provider may offer more)" in run.stdout
    assert "gpt-4o-mini (current)" in run.stdout and "gpt-4o\n" in run.stdout


def test_choices_words_and_flags(session: ChatSession, store: MemoryStore) -> None:
    assert run_command(session, "/showcontext ON").text == "Context display: on"
    assert error_of(session, "/showcontext loud") == (
        '/showcontext: MODE must be one of off, on, summary, not "loud"; usage: /showcontext [MODE]'
    )
    assert "too many arguments" in error_of(session, "/theme a b")
    assert run_command(session, "/theme ocat-night").request == ShowThemes("ocat-night")
    assert run_command(session, "/theme").request == ShowThemes("")
    assert "too many arguments" in error_of(session, "/vget a b")
    assert "too many arguments" in error_of(session, "/continue a b")
    assert "too many arguments" in error_of(session, "/help vquery threads")
    exchange = session.record("delete me later", "ok", []).exchange
    prefix = exchange.exchange_id[:8]
    assert error_of(session, f"/vdelete {prefix} --force") == (
        '/vdelete: unknown option "--force"; usage: /vdelete ID [--yes]'
    )
    assert "needs one id" in error_of(session, "/vdelete --yes")
    assert "too many arguments" in error_of(session, f"/vdelete {prefix} other --yes")
    assert store.count("exchange") == 1
    assert run_command(session, f"/vdelete --yes {prefix}").text.startswith("Deleted")  # a flag goes anywhere
    assert store.count("exchange") == 0


# -- quotes ------------------------------------------------------------------------------------


def test_an_unbalanced_quote_is_a_message_and_rest_of_line_text_keeps_it(session: ChatSession) -> None:
    assert error_of(session, '/vquery "spare key') == (
        "/vquery: a quote is not closed (put words with an apostrophe in double quotes: \"what's new\"); "
        'usage: /vquery "QUERY" [COUNT]'
    )
    assert "a quote is not closed" in error_of(session, "/vquery what's new")
    assert "ends in a backslash" in error_of(session, "/vget abc\\")
    assert not run_command(session, "/vquery \"what's new\"").error
    # /vadd remembers the rest of the line as typed: an apostrophe is text, quotes are kept.
    assert run_command(session, "/vadd don't forget the \"blue\" key").text.startswith("Remembered")
    found = run_command(session, "/vquery \"don't forget the blue key\"")
    assert "don't forget the \"blue\" key" in found.rows[0][-1]


def test_vdoc_takes_a_path_with_spaces_quoted_or_not(session: ChatSession, tmp_path: Path) -> None:
    notes = tmp_path / "my notes.md"
    notes.write_text("Standup moved to 9:30.")
    assert "Added 1 chunk" in run_command(session, f"/vdoc {notes}").text
    assert "already stored" in run_command(session, f'/vdoc "{notes}"').text
    assert error_of(session, "/vdoc") == "/vdoc needs a file or folder: /vdoc notes.md"
    assert error_of(session, '/vdoc ""') == "/vdoc needs a file or folder: /vdoc notes.md"


def test_odd_imported_ids_survive_the_confirmation_and_the_picker(session: ChatSession, store: MemoryStore) -> None:
    odd = Exchange("plan the garden", "tomatoes", thread_id="it's a thread", session_id="s",
                   exchange_id="it's odd")
    store.add_exchange(odd)
    ask = run_command(session, "/vdelete \"it's odd\"").request
    assert isinstance(ask, Confirm)
    # The command to type instead of answering the dialog quotes the id.
    assert ask.typed == f"/vdelete {shlex.quote('it' + chr(39) + 's odd')} --yes"
    listing = run_command(session, "/continue").request
    assert isinstance(listing, Choose)
    value = next(v for v, _ in listing.options)
    assert listing.then(value).conversation_replaced  # what the picker runs
    assert session.thread_id == "it's a thread"
    assert run_command(session, "/continue \"it's a\"").conversation_replaced  # a quoted prefix, typed
    assert ask.then().text.startswith("Deleted") and store.count("exchange") == 0


# -- the declaration is the one source ---------------------------------------------------------


def test_help_command_shows_synopsis_arguments_defaults_aliases_and_an_example(session: ChatSession) -> None:
    shown = run_command(session, "/help vquery")
    synopsis = '/vquery "QUERY" [COUNT]: search memory: rank, score, where from, date, excerpt'
    assert shown.text.splitlines()[0] == synopsis
    assert 'Example: /vquery "what did we decide" 5' in shown.text
    rows = dict(shown.rows)
    assert rows["[COUNT]"] == (
        "how many results: a whole number from 1 to 1000; optional, default vector_store.context_results"
    )
    assert rows['"QUERY"'].startswith("a query: several words") and rows['"QUERY"'].endswith("required")
    assert dict(run_command(session, "/help /threads").rows)["[COUNT]"].endswith("optional, default 10")
    assert "one of off, on, summary" in dict(run_command(session, "/help showcontext").rows)["[MODE]"]
    leave = run_command(session, "/help quit")
    assert leave.text.splitlines()[0] == "/exit: leave ocat"
    assert "It takes no arguments." in leave.text and "Also: /quit, /q" in leave.text and not leave.rows
    assert error_of(session, "/help nope") == "no command /nope; /help lists them"


def test_usage_and_handlers_follow_the_declared_arguments() -> None:
    for entry in commands():
        assert entry.usage == " ".join([f"/{entry.name}", *(a.synopsis for a in entry.arguments)])
        params = list(inspect.signature(entry.handler).parameters)
        assert params == ["session", *(a.name for a in entry.arguments)], entry.name
        assert entry.example.startswith(f"/{entry.name}")
        # Completion adds a space after names that take arguments (ocat/ui/widgets.py).
        assert bool(entry.arguments) == (entry.usage != f"/{entry.name}")


def test_a_handler_is_never_called_on_bad_input(session: ChatSession, monkeypatch: pytest.MonkeyPatch) -> None:
    import ocat.commands.registry as registry_module

    # The registry the decorator writes to (not the package's re-export), so /probe never outlives the test.
    monkeypatch.setattr(registry_module, "REGISTRY", dict(registry_module.REGISTRY))
    calls: list[tuple[str, int | None]] = []

    @command("probe", "records its calls", group="settings", arguments=(
        Arg("what", "a word"), Arg("count", "a count", kind="int", optional=True, lo=1, hi=5, default=2)))
    def _probe(session: ChatSession, what: str, count: int) -> CommandResult:
        calls.append((what, count))
        return CommandResult(text="ok")

    for line in ("/probe", "/probe x 0", "/probe x 6", "/probe x y", "/probe x 1 2", "/probe 'x"):
        error_of(session, line)
    assert calls == []
    assert run_command(session, "/probe x").text == "ok" and run_command(session, "/probe 'x y' 5").text == "ok"
    assert calls == [("x", 2), ("x y", 5)]


@pytest.mark.parametrize(
    "arguments",
    [
        (Arg("a", "a", optional=True), Arg("b", "b")),  # required after optional
        (Arg("a", "a", kind="text"), Arg("b", "b")),  # a word after text: ambiguous
        (Arg("a", "a", kind="rest"), Arg("b", "b", optional=True)),  # rest of line, then more
        (Arg("a", "a"), Arg("a", "again")),
        (Arg("n", "n", kind="int", lo=5, hi=1),),
        (Arg("m", "m", kind="choice"),),
        (Arg("n", "n", kind="int"),),  # no range given
        (Arg("yes", "yes", kind="flag"),),  # a required flag
    ],
)
def test_ambiguous_declarations_are_refused(arguments: tuple[Arg, ...]) -> None:
    with pytest.raises(ValueError):
        check_declaration("x", arguments)
