"""States are types, not strings compared by hand: the context display, whether tools are offered,
an MCP server's state, a history format and the output format are Literals or enums that mypy
checks (`strict_equality`), the config's and the command line's choices come from them, and the
history formats are found through one registry of readers."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import get_args

import pytest
from mypy import api as mypy_api

from ocat.cli.parser import build_parser
from ocat.config.keys import SPECS
from ocat.config.settings import CONTEXT_MODES, TOOL_MODES, ContextMode, ToolMode
from ocat.headless.output import OUTPUT_FORMATS
from ocat.history_import import FORMATS, detect_format
from ocat.history_import.readers import EXPORTS, SESSIONS, export_of
from tests.support.paths import REPO

ROOT = REPO


def _choices(option: str) -> tuple[str, ...]:
    action = next(a for a in build_parser()._actions if option in a.option_strings)
    assert isinstance(action, argparse.Action) and action.choices is not None
    return tuple(action.choices)


def test_the_config_and_the_command_line_take_their_choices_from_the_types() -> None:
    assert CONTEXT_MODES == get_args(ContextMode) and TOOL_MODES == get_args(ToolMode)
    assert SPECS["display"]["context_mode"].meta["choices"] == CONTEXT_MODES
    assert SPECS["tools"]["enabled"].meta["choices"] == TOOL_MODES
    assert _choices("--output") == OUTPUT_FORMATS
    assert _choices("--from") == (*FORMATS, "ocat")  # and ocat's own export, read by --import-memory's code


def test_each_history_format_has_one_reader_found_by_name(tmp_path: Path) -> None:
    assert set(FORMATS) == {*EXPORTS, *SESSIONS, "llm"}  # llm's logs.db is a database, told apart as one
    assert export_of({"mapping": {}, "current_node": "a"}) == "chatgpt"
    assert export_of({"uuid": "u", "chat_messages": []}) == "claude"
    assert export_of({"something": "else"}) is None
    claude = tmp_path / "conversations.json"
    claude.write_text('[{"uuid": "u", "name": "t", "chat_messages": []}]', encoding="utf-8")
    assert detect_format(claude) == "claude"


@pytest.mark.slow  # runs mypy over ocat's settings and states: ~2 s of CPU
def test_mypy_refuses_a_state_compared_with_a_value_it_cannot_hold(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from ocat.config.settings import Settings\n"
        "from ocat.mcp_client.server_status import ServerState\n"
        "def f(s: Settings, state: ServerState) -> bool:\n"
        "    return s.display.context_mode == 'onn' or s.tools.enabled == 'yes'\n", encoding="utf-8")
    # mypy raises the process's recursion limit (to 2**14) and leaves it so: a later test in this
    # worker that reads JSON nested thousands deep would then decode it instead of naming it.
    limit = sys.getrecursionlimit()
    try:
        out, _, code = mypy_api.run(["--strict-equality", "--no-incremental", "--follow-imports=silent",
                                     "--config-file", str(ROOT / "pyproject.toml"), str(probe)])
    finally:
        sys.setrecursionlimit(limit)
    assert code == 1 and out.count("Non-overlapping equality check") == 2, out
