"""The docs cannot drift: the options, config keys, functions, store methods, MCP tools, files and
tests they name are checked against the code (CI runs these with the rest of the suite)."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest
import yaml

from ocat.cli import reference as cli_reference
from ocat.cli.parser import build_mcp_parser, build_parser
from ocat.config.keys import MOVED_KEYS, env_name
from ocat.config.settings import SECTIONS
from tests.support.paths import REPO
from tests.unit.test_docs_names import resolves

DOCS = REPO / "docs"
DEFAULTS = REPO / "config" / "default.yaml"
DOC_FILES = sorted(DOCS.glob("*.md")) + [REPO / "README.md"]
REGENERATE = "python -m ocat.cli.reference --write docs/cli.md"


def _cli_doc() -> str:
    return (DOCS / "cli.md").read_text(encoding="utf-8")


def test_the_option_list_in_cli_md_is_what_the_parsers_generate() -> None:
    committed = cli_reference.committed_section(_cli_doc())
    assert committed == cli_reference.render(), f"docs/cli.md's option list is out of date: run {REGENERATE}"


def test_every_option_is_also_explained_in_the_hand_written_part_of_cli_md() -> None:
    document = _cli_doc()
    start, end = document.index(cli_reference.BEGIN), document.index(cli_reference.END)
    prose = document[:start] + document[end:]
    parsers = (build_parser(), build_mcp_parser())
    flags = {flag for parser in parsers for action in parser._actions for flag in action.option_strings}
    missing = sorted(flag for flag in flags if not re.search(f"`{re.escape(flag)}[ `]", prose))
    assert missing == [], f"say what these options do in docs/cli.md (beyond the generated list): {missing}"


def test_the_generator_replaces_only_the_text_between_the_markers() -> None:
    document = f"# Title\n\nprose before\n\n{cli_reference.BEGIN}\nstale\n{cli_reference.END}\n\nprose after\n"
    written = cli_reference.replace_section(document, "fresh\n")
    assert written == f"# Title\n\nprose before\n\n{cli_reference.BEGIN}\nfresh\n{cli_reference.END}\n\nprose after\n"
    assert cli_reference.committed_section(written) == "fresh\n"
    assert cli_reference.replace_section(written, "fresh\n") == written
    with pytest.raises(ValueError):
        cli_reference.replace_section("no markers here\n", "fresh\n")


def test_check_says_when_a_file_is_stale_and_write_fixes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "cli.md"
    doc.write_text(f"intro\n{cli_reference.BEGIN}\nold\n{cli_reference.END}\noutro\n", encoding="utf-8")
    assert cli_reference.main(["--check", str(doc)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert cli_reference.main(["--write", str(doc)]) == 0
    assert cli_reference.main(["--check", str(doc)]) == 0
    assert doc.read_text(encoding="utf-8").startswith("intro\n") and doc.read_text(encoding="utf-8").endswith("outro\n")


def _shipped_defaults() -> dict[str, object]:
    sections = yaml.safe_load(DEFAULTS.read_text(encoding="utf-8"))
    return {f"{section}.{key}": value for section, keys in sections.items() for key, value in keys.items()}


def _documented_defaults() -> dict[str, object]:
    """The `| `section.key` | `default` | ... |` rows of docs/configuration.md's key table, read as YAML."""
    text = (DOCS / "configuration.md").read_text(encoding="utf-8").split("## Every key\n")[1].split("\n## ")[0]
    rows = re.findall(r"^\| `([a-z_]+\.[a-z_0-9]+)` \| `([^`]*)` \|", text, flags=re.MULTILINE)
    return {key: yaml.safe_load(value) for key, value in rows}


def test_configuration_md_lists_every_shipped_key_with_its_default() -> None:
    shipped, documented = _shipped_defaults(), _documented_defaults()
    assert sorted(set(shipped) - set(documented)) == [], "add these keys to docs/configuration.md's key table"
    assert sorted(set(documented) - set(shipped)) == [], "docs/configuration.md lists keys config/default.yaml lacks"
    wrong = {key: (documented[key], value) for key, value in shipped.items() if documented[key] != value}
    assert wrong == {}, "docs/configuration.md gives these defaults as (documented, shipped)"


# `section.key` names in backticks, e.g. `vector_store.memory_threshold` or `llm.model=MODEL` (not a
# module or file, `llm.py`, `tools.md`). Every section but `memory`, which is also the package's name
# and files' (`memory.open_store`, `memory.jsonl`): its moved keys are checked by name below.
_SECTIONS_CHECKED = [section for section in SECTIONS if section != "memory"]
_KEY_MENTION = re.compile(rf"`(?:--set )?((?:{'|'.join(_SECTIONS_CHECKED)})\.(?!(?:py|md|json)`)[a-z_0-9]+)[`=: ]")
# Misspelt on purpose: the examples of what a typo in a key does.
_TYPOS = {"llm.temprature", "llm.modle"}


def test_every_config_key_the_docs_name_exists() -> None:
    assert {"wake", "tools"} <= set(_SECTIONS_CHECKED)
    shipped = _shipped_defaults()
    named = {(doc.name, key) for doc in DOC_FILES for key in _KEY_MENTION.findall(doc.read_text(encoding="utf-8"))}
    assert sorted((doc, key) for doc, key in named if key not in shipped and key not in _TYPOS) == []


# A key that moved is named by its old name only where the move is told (configuration.md's
# "Keys that moved"), so the docs cannot go back to the old name.
_MOVES_TOLD = ("configuration.md", "## Keys that moved\n")


def old_names_named(doc: Path) -> set[str]:
    """The old names of moved keys (`MOVED_KEYS`) that `doc` writes outside the section telling the move."""
    text = doc.read_text(encoding="utf-8")
    if doc.name == _MOVES_TOLD[0]:
        before, _, after = text.partition(_MOVES_TOLD[1])
        text = before + after.partition("\n## ")[2]
    return {old for old in MOVED_KEYS if re.search(rf"\b{re.escape(old)}\b", text)}


def test_the_docs_name_a_moved_key_by_its_new_name() -> None:
    assert _MOVES_TOLD[1] in (DOCS / _MOVES_TOLD[0]).read_text(encoding="utf-8")
    named = {(doc.name, old) for doc in DOC_FILES for old in old_names_named(doc)}
    assert sorted(named) == [], "write these keys by their new names (ocat.config.keys.MOVED_KEYS)"
    documented = _documented_defaults()
    assert all(new in documented and old not in documented for old, new in MOVED_KEYS.items())


def test_configuration_md_tells_every_move_with_both_variables() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8").split("## Keys that moved\n")[1].split("\n## ")[0]
    rows = re.findall(r"^\| `([a-z_.]+)` \| `([a-z_.]+)` \| `(OCAT_\w+)` \| `(OCAT_\w+)` \|$", text, flags=re.MULTILINE)
    assert rows == [(old, new, env_name(old), env_name(new)) for old, new in MOVED_KEYS.items()]


def test_every_store_method_the_docs_name_exists() -> None:
    from ocat.memory.storage.store import MemoryStore

    named = {
        (doc.name, method)
        for doc in DOC_FILES
        for method in re.findall(r"\bstore\.([a-z_]+)\(", doc.read_text(encoding="utf-8"))
    }
    assert {doc for doc, _ in named} >= {"python-api.md"}, "python-api.md names no store methods: has its form changed?"
    assert sorted((doc, m) for doc, m in named if not callable(getattr(MemoryStore, m, None))) == []


def _mcp_tools() -> dict[str, set[str]]:
    """Each MCP tool's name and argument names, as the server advertises them (its deprecated old
    names left out: docs/mcp.md lists them in a table of their own)."""
    from ocat.mcp_server.server import DEPRECATED_NAMES, build_server

    server = build_server(None)  # type: ignore[arg-type]  # the tools are only called when a client calls
    return {tool.name: set(tool.parameters.get("properties", {})) for tool in server._tool_manager.list_tools()
            if tool.name not in DEPRECATED_NAMES}


def test_mcp_md_lists_every_deprecated_name_with_the_tool_it_became() -> None:
    from ocat.mcp_server.server import DEPRECATED_NAMES

    text = (DOCS / "mcp.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"^\| `(memory_[a-z]+)` \| `([a-z_]+)` \|", text, flags=re.MULTILINE))
    assert listed == DEPRECATED_NAMES


@pytest.mark.slow  # builds the MCP server: imports mcp (tests/support/slow.py)
def test_mcp_md_documents_every_tool_and_argument() -> None:
    text = (DOCS / "mcp.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^### `([a-z_]+)`\n(.*?)(?=^##)", text, flags=re.MULTILINE | re.DOTALL))
    tools = _mcp_tools()
    assert sorted(sections) == sorted(tools), "docs/mcp.md's tool sections (### `name`) vs the tools served"
    for name, arguments in tools.items():
        documented = set(re.findall(r"^\| `([a-z_]+)`", sections[name], flags=re.MULTILINE))
        paired = re.findall(r"^\| `([a-z_]+)`, `([a-z_]+)`", sections[name], flags=re.MULTILINE)  # | `a`, `b` |
        documented |= {argument for pair in paired for argument in pair}
        assert documented == arguments, f"docs/mcp.md's {name} arguments (documented vs served)"


def test_every_file_the_docs_name_exists() -> None:
    # Paths under ocat/ are checked with the names in tests/unit/test_docs_names.py.
    named = {
        (doc.name, path)
        for doc in DOC_FILES
        for path in re.findall(r"`((?:tests|config|themes|bench|docs)/[\w./-]+)`", doc.read_text(encoding="utf-8"))
    }
    assert sorted((doc, path) for doc, path in named if not (REPO / path).exists()) == []


def test_every_test_the_docs_cite_exists() -> None:
    defined = {
        name
        for test in (REPO / "tests").rglob("*.py")
        for name in re.findall(r"def (test_\w+)", test.read_text(encoding="utf-8"))
    }
    cited = {
        (doc.name, name) for doc in DOC_FILES for name in re.findall(r"`(test_\w+)`", doc.read_text(encoding="utf-8"))
    }
    assert sorted((doc, name) for doc, name in cited if name not in defined) == []


def test_every_function_python_api_md_lists_exists_where_it_says() -> None:
    # Rows such as | `search_store(store, ...)` (`ocat.memory.retrieval.across_stores`) | ... |; the module is ocat.memory unless named.
    text = (DOCS / "python-api.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([A-Za-z_]\w*)\((?:[^|]|\\\|)*?(?:\(`(ocat[\w.]*)`\))? \|", text, flags=re.MULTILINE)
    assert len(rows) > 10, "python-api.md's table of calls has changed form"
    named = [f"{module or 'ocat.memory'}.{name}" for name, module in rows]
    assert sorted(dotted for dotted in named if not resolves(dotted)) == []


# The classes the docs name methods of (`ChatSession.recall`), and where each lives.
_CLASSES = {
    "ChatSession": "ocat.chat.session",
    "SessionMemory": "ocat.chat.session_memory",
    "MemoryStore": "ocat.memory.storage.store",
    "StoreLease": "ocat.memory.sharing.owner_lock",
    "OnnxMiniLMEmbedder": "ocat.memory.embedding.embedders",
}


def test_every_method_the_docs_name_on_ocat_classes_exists() -> None:
    pattern = re.compile(rf"`({'|'.join(_CLASSES)})\.(\w+)")
    cited = {(doc.name, cls, name) for doc in DOC_FILES for cls, name in pattern.findall(doc.read_text(encoding="utf-8"))}
    assert cited, "the docs name no methods of these classes: has the pattern changed?"
    assert sorted(c for c in cited if not _has(_CLASSES[c[1]], c[1], c[2])) == []


def _has(module: str, cls: str, name: str) -> bool:
    """Whether the class has `name`: a method or class attribute, or an attribute its code (or an
    ocat class it is built on: MemoryStore on StoreParts) sets on self."""
    found = getattr(importlib.import_module(module), cls)
    own = [k for k in found.__mro__ if k.__module__.startswith("ocat")]
    return hasattr(found, name) or any(re.search(rf"self\.{name}\s*[:=]", inspect.getsource(k)) for k in own)


def test_chat_md_and_cli_md_explain_the_words_a_query_list_shows() -> None:
    from ocat.operations.search import ADMITTED_LEGEND, reasons
    from ocat.records import SearchHit

    def hit(i: str, score: float, **kw: object) -> SearchHit:
        return SearchHit(id=i, kind="exchange", score=score, text=i, metadata={}, threshold=0.65, **kw)  # type: ignore[arg-type]

    # One hit of each verdict, in the order a list shows them.
    words = reasons([hit("a", 0.95), hit("b", 0.30, context_of="a", with_admitted=True),
                     hit("c", 0.70, outranked=True), hit("d", 0.40), hit("e", 0.20, beyond=True)])
    chat_md = (DOCS / "chat.md").read_text(encoding="utf-8")
    cli_md = _cli_doc()
    for said in words:
        assert f"`{said}`" in chat_md, f"docs/chat.md does not explain {said!r}"
        assert f"`{said}`" in cli_md, f"docs/cli.md does not explain {said!r}"
    assert ADMITTED_LEGEND in cli_md
    assert "they come first, in the chat's order" in chat_md


# -- counts and lists the docs give, against the code (issue 49: "four tools" when there were eight) --

_NUMBERS = {word: n for n, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen".split())}
# `/word` at the start of a code span that is no slash command: paths and HTTP endpoints.
_NOT_COMMANDS = {"tmp", "proc", "models", "name"}


def _slash_commands() -> dict[str, str]:
    """Every name and alias the slash command table answers to, with the command's own name."""
    from ocat.commands import REGISTRY

    return {key: entry.name for key, entry in REGISTRY.items()}


def test_chat_md_lists_every_slash_command_and_alias_and_no_other() -> None:
    text = (DOCS / "chat.md").read_text(encoding="utf-8").split("## Commands\n")[1].split("\n## ")[0]
    rows = re.findall(r"^\| (`/.*?) \| ", text, flags=re.MULTILINE)
    assert len(rows) > 20, "docs/chat.md's command table has changed form"
    listed = {name for row in rows for name in re.findall(r"`/([a-z?]+)", row)}
    known = _slash_commands()
    assert sorted(set(known) - listed) == [], "add these commands (or aliases) to docs/chat.md's table"
    assert sorted(listed - set(known)) == [], "docs/chat.md's table names commands ocat does not have"


def test_every_slash_command_the_docs_name_exists() -> None:
    known = _slash_commands()
    named = {
        (doc.name, name)
        for doc in DOC_FILES
        for name in re.findall(r"`/([a-z]+)[ `]", doc.read_text(encoding="utf-8"))
    }
    assert ("README.md", "tools") in named and ("README.md", "project") in named
    assert sorted((doc, name) for doc, name in named if name not in known and name not in _NOT_COMMANDS) == []


@pytest.mark.slow  # builds the MCP server: imports mcp (tests/support/slow.py)
def test_the_number_of_tools_the_docs_give_ocat_mcp_is_the_servers() -> None:
    served = len(_mcp_tools())
    said = {
        (doc.name, count)
        for doc in DOC_FILES
        for count in re.findall(rf"`ocat mcp`[^.]*?\b(\d+|{'|'.join(_NUMBERS)}) tools\b", doc.read_text(encoding="utf-8"))
    }
    assert {doc for doc, _ in said} >= {"README.md", "mcp.md"}, "the README and mcp.md no longer count the tools"
    assert sorted((doc, count) for doc, count in said if _NUMBERS.get(count, count) not in (served, str(served))) == [], \
        f"ocat mcp serves {served} tools"


def test_ci_installs_what_the_readme_installs_then_runs_its_test_command() -> None:
    # .ci/run says it runs "exactly the README's test command": the README's Development section's
    # first block installs the test extras, then runs the suite; .ci/run installs the same extras
    # (with uv, beside the linters'), and its last line is that test command.
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Development\n")[1].split("\n## ")[0]
    install, command = re.findall(r"```bash\n(.*?)\n```", section, re.S)[0].splitlines()
    assert install == "pip install -e '.[test]'", "the README's Development section no longer installs the test extras first"
    assert command.startswith("python -m pytest"), "the README's Development section no longer gives the test command"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.strip().splitlines()[-1] == command
    assert "uv pip install --native-tls --quiet -e '.[test,lint]'" in ci and "pip install --quiet -e '.[test,lint]'" in ci
    # mypy runs beside the suite: its verdict is read as the run ends, and fails it.
    assert "trap mypy_verdict EXIT" in ci and "nice -n 19 mypy ocat" in ci
