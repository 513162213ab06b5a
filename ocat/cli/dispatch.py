"""Command-line entry point: parse arguments, load settings, run a headless action or the app.

`ocat mcp [OPTIONS]` (the word first) serves the memory over MCP instead; everything else
is flags. Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 configuration error. Only argparse
and ocat's own light modules are imported up front, so `--version` and `--help` are quick.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn, Sequence

from ocat.cli.parser import ACTIONS, build_mcp_parser, build_parser
from ocat.errors import OcatError, UsageError
from ocat.process_end import leave_now, run_and_end
from ocat.text.terminal import printable

if TYPE_CHECKING:
    from ocat.config.loading import Settings

# Text arguments that reach the embedder, the store or the provider, as their flags.
TEXT_ARGUMENTS = {"query_vector_store": "--query-vector-store", "ask": "--ask", "model": "--model", "where": "--where"}


def with_allowed_tools(settings: Settings, args: argparse.Namespace) -> Settings:
    """The settings with `--allow-tool`'s tools allowed for this command, and `--project`'s project."""
    import dataclasses

    if args.allow_tool:
        settings = dataclasses.replace(settings, allowed_tools=frozenset(args.allow_tool))
    if args.project:
        from ocat.memory import project_of

        settings = dataclasses.replace(settings, project=project_of(args.project))
    return settings


def chat_tool_warnings(settings: Settings, names: list[str]) -> list[str]:
    """`--allow-tool` for the chat, checked against the servers' cached tool lists (the chat
    starts no server to check, its first frame comes first): a name no configured server has is
    a UsageError listing those that exist; a server never listed has its names accepted, with a warning."""
    if not names:
        return []
    from ocat.mcp_client.allow_check import check_allowed_tools
    from ocat.mcp_client.tool_cache import ToolCache, known_tools

    return [f"warning: {said}" for said in check_allowed_tools(names, known_tools(settings.mcp_servers, ToolCache()))]


def clean_arguments(args: argparse.Namespace, note: Callable[[str], None]) -> None:
    """Replace undecodable bytes in text arguments with U+FFFD, saying so in one line.

    A path to add is refused instead (UsageError): its name is stored with every chunk, and
    a name changed by replacement would name no file.
    """
    from ocat.headless.output import valid_text

    path = getattr(args, "add_to_vector_store", None)
    if path is not None and valid_text(path)[1]:
        shown = valid_text(path)[0]
        raise UsageError(f"--add-to-vector-store: the path {shown!r} is not valid UTF-8; rename the file or folder")
    changed = []
    for dest, flag in TEXT_ARGUMENTS.items():
        value = getattr(args, dest, None)
        values = value if isinstance(value, list) else [value]
        cleaned = [valid_text(v) if isinstance(v, str) else (v, False) for v in values]
        if any(replaced for _, replaced in cleaned):
            texts = [text for text, _ in cleaned]
            setattr(args, dest, texts if isinstance(value, list) else texts[0])
            changed.append(flag)
    if changed:
        note(f"ocat: warning: {', '.join(changed)} is not valid UTF-8; undecodable bytes replaced with U+FFFD")


def chosen_action(args: argparse.Namespace) -> str | None:
    """The headless action named on the command line, or None for the chat app."""
    for dest, name in ACTIONS.items():
        value = getattr(args, dest)
        if value not in (None, False):
            return name
    return None


def overrides_from(args: argparse.Namespace) -> dict[str, object]:
    """Config overrides the flags make (flags win over env and files)."""
    from ocat.config.loading import parse_override

    overrides: dict[str, object] = dict(parse_override(item) for item in args.set)
    if args.model:
        overrides["llm.model"] = args.model
    if args.no_vector_store:
        overrides["vector_store.enabled"] = False
    if args.stores:
        # The first store is the configured one; any others are read alongside it.
        overrides["vector_store.collection"] = args.stores[0]
    return overrides


def configured_store(args: argparse.Namespace, settings: Settings) -> str:
    """The store ocat would use without `--store`: the default, or the one the config names.
    It is made silently on first use; a store named only by `--store` must exist to be read."""
    if not args.stores:
        return settings.vector_store.collection
    from ocat.config.loading import load_settings

    without_store = argparse.Namespace(**{**vars(args), "stores": []})
    return load_settings(args.config, overrides=overrides_from(without_store)).vector_store.collection


def parse_stores(args: argparse.Namespace) -> None:
    """Read `--store a,b` once, into `args.stores` (an empty list without the flag); UsageError for a bad name."""
    args.stores = []
    if args.store:
        # Only for --store: the full-screen chat paints before memory's modules are imported.
        from ocat.memory import parse_store_names

        args.stores = parse_store_names(args.store)


def run() -> NoReturn:
    """The `ocat` command: `main`, then the process ends without Python's teardown
    (ocat.process_end)."""
    run_and_end(main)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ocat; returns the process exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["mcp"]:
        return _run_mcp(arguments[1:])
    args = build_parser().parse_args(arguments)
    make_config_folder()
    action = chosen_action(args)
    if action is None:
        return _run_app(args)
    from ocat.headless.actions import Reporter, run_action

    reporter = Reporter(action=action, output=args.output)
    try:
        clean_arguments(args, reporter.note)
        parse_stores(args)
        check_store_use(action, args)
        from ocat.config.loading import load_settings

        settings = with_allowed_tools(load_settings(args.config, overrides=overrides_from(args)), args)
        for line in settings.deprecations:
            reporter.note(f"ocat: {line}")
        args.configured_store = configured_store(args, settings)
    except OcatError as exc:
        return reporter.fail(exc)
    except Exception as exc:  # a bug: one line (and the JSON envelope) naming the log, no traceback
        return reporter.fail(OcatError(_logged("loading the configuration", exc)))
    return run_action(action, args, settings, reporter)


def make_config_folder() -> None:
    """Create `$XDG_CONFIG_HOME/ocat` if it is not there: a new user's first steps write into it
    by hand (`echo ... > ~/.config/ocat/profile.md`). One that cannot be made is no error here."""
    from ocat.config.locations import config_dir

    try:
        config_dir().mkdir(parents=True, exist_ok=True)
    except OSError:
        pass


def _logged(what: str, exc: BaseException) -> str:
    """Log an unexpected failure's traceback; returns the one line for the user."""
    from ocat.logs import log_failure

    return log_failure(what, exc)


def _say(prefix: str, message: str) -> None:
    """One line on stderr: redacted (an error can quote a key) and safe for the terminal."""
    from ocat.text.redact import redact

    print(f"{prefix}: {printable(redact(message))}", file=sys.stderr)


# Actions that only read memory: they may read several stores at once (`--store a,b`).
READ_ONLY_ACTIONS = ("query", "stats")


def check_store_use(action: str | None, args: argparse.Namespace) -> None:
    """UsageError for `--where` outside a query, or several stores (`parse_stores`) for anything that writes."""
    if args.where and action != "query":
        raise UsageError("--where applies to --query-vector-store only")
    if getattr(args, "history_format", None) and action != "import-history":
        raise UsageError("--from applies to --import-history only")
    if getattr(args, "project", None) and action not in (None, "ask", "query", "wake"):
        raise UsageError("--project applies to --query-vector-store, --ask, --wake and the chat only")
    if getattr(args, "allow_tool", None) and action not in (None, "ask"):
        raise UsageError("--allow-tool applies to --ask and the chat only")
    if getattr(args, "now", None) and action not in ("ask", "query"):
        raise UsageError("--now applies to --query-vector-store and --ask only")
    if getattr(args, "accept_smaller_store", False) and action != "repair":
        raise UsageError("--accept-smaller-store applies to --repair-store only")
    if getattr(args, "yes", False) and action != "redact-secrets":
        raise UsageError("--yes applies to --redact-secrets only")
    if len(args.stores) > 1 and action not in READ_ONLY_ACTIONS:
        flags = {name: "--" + dest.replace("_", "-") for dest, name in ACTIONS.items()}
        what = flags[action] if action else "the chat"
        raise UsageError(
            f"several stores ({', '.join(args.stores)}) can only be read (queries and stats); {what} needs one --store"
        )


def _run_mcp(argv: list[str]) -> int:
    """`ocat mcp`: errors before serving go to stderr (stdout belongs to the protocol)."""
    args = build_mcp_parser().parse_args(argv)
    make_config_folder()
    try:
        from ocat.config.loading import load_settings, parse_override

        parse_stores(args)
        names = args.stores
        overrides: dict[str, object] = dict(parse_override(item) for item in args.set)
        if names:
            overrides["vector_store.collection"] = names[0]  # --store wins over --set, as flags do
        settings = load_settings(args.config, overrides=overrides)
        for line in settings.deprecations:
            _say("ocat mcp", line)
        if not settings.vector_store.enabled:
            raise UsageError("memory is disabled (vector_store.enabled is false): there is nothing to serve")
        from ocat.mcp_server import serve

        return serve(settings, names or [settings.vector_store.collection])
    except OcatError as exc:
        _say("ocat mcp", str(exc))
        return exc.exit_code
    except Exception as exc:  # a bug: one line naming the log; stdout stays the protocol's
        _say("ocat mcp", _logged("the MCP server", exc))
        return 1


def _run_app(args: argparse.Namespace) -> int:
    """The interactive chat: full screen on a terminal, line mode with --plain or when piped."""
    if args.results is not None or args.output != "text":
        print("ocat: --results and --output apply to headless actions only", file=sys.stderr)
        return UsageError.exit_code
    try:
        clean_arguments(args, lambda message: print(message, file=sys.stderr))
        parse_stores(args)
        check_store_use(None, args)
        from ocat.config.loading import load_settings

        settings = with_allowed_tools(load_settings(args.config, overrides=overrides_from(args)), args)
        from ocat.operations.stores import chat_note  # light: memory is imported only for `--store NEW`

        new_store = chat_note(args.stores[0] if args.stores else None, configured_store(args, settings), settings)
        notes = chat_tool_warnings(settings, args.allow_tool) + ([new_store] if new_store else [])
        if args.plain or not (sys.stdin.isatty() and sys.stdout.isatty()):
            # Imported on this branch only: the full-screen chat paints before it needs any of them.
            from ocat import llm
            from ocat.repl import run_repl

            for note in [*settings.deprecations, *notes]:  # the window shows both itself
                print(f"ocat: {note}", file=sys.stderr)
            problem = None if args.dummy_mode else llm.credentials_problem(settings.llm)
            if problem:
                # The chat still opens: the person may fix the key, or only browse memory.
                print(f"ocat: {problem}", file=sys.stderr)
            # Line mode by request, or when piped: the same chat, scriptable.
            return run_repl(settings, dummy=args.dummy_mode)
        from ocat.chat.session import ChatSession
        from ocat.ui.app import OcatApp
        from ocat.ui.consent import ask_in_window
        from ocat.ui.terminal_restore import restore_on_signals, restore_terminal

        # The window paints first; litellm, chromadb and the embedding model load in
        # workers after it, and the app reports missing credentials in the chat.
        session = ChatSession(settings, dummy=args.dummy_mode, ask=ask_in_window)
        app = OcatApp(session, quick_exit=True, notes=notes)
        restore_on_signals()  # SIGTERM, SIGHUP: the terminal given back before the signal ends the chat
        code = app.run() or 0
        restore_terminal()  # whatever closed the window (a signal's quit too): the terminal as it was found
        leave_now(code, app.memory_view.closing, session)
    except OcatError as exc:
        _say("ocat", str(exc))
        return exc.exit_code
    except Exception as exc:  # a bug: one line naming the log, no traceback
        _say("ocat", _logged("the chat", exc))
        return 1
    except KeyboardInterrupt:
        # Ctrl+C before the line-mode chat started (during the model's download, say): a
        # download leaves nothing behind, and the next start fetches it again.
        print("\nocat: interrupted", file=sys.stderr)
        return 130
