"""The walk of one chat turn, Enter to the stored exchange, as bench/turn_walk.py counts it: what
docs/ARCHITECTURE.md says of it stays true (its files, its hand-offs between packages, and no
more moves), and within issue 50's goal (at most 18 files and 20 hand-offs)."""

from __future__ import annotations

import re

import pytest

from bench.turn_walk import Walk, measure, package_of, stop_of, stops
from tests.support.paths import REPO

ARCHITECTURE = REPO / "docs" / "ARCHITECTURE.md"
# Issue 50's goal for this walk: at most 18 files and 20 moves between packages, a hand-off counted once.
MOST_FILES, MOST_HANDOFFS = 18, 20


def test_the_walk_counts_stops_hand_offs_and_moves_between_packages() -> None:
    walk = Walk(calls=["ui/app.py", "memory/storage/store.py", "memory/__init__.py", "text/terminal.py", "chat/turn.py"])
    walk.by_thread = {1: walk.calls}
    walk.handoffs = dict.fromkeys([("ui/app.py", "memory"), ("ui/app.py", "chat/turn.py")])
    assert stops(walk.calls) == ["ui/app.py", "memory", "chat/turn.py"]
    assert (stop_of("memory/retrieval/rank.py"), stop_of("text/terminal.py"), stop_of("ui/app.py")) == (
        "memory", None, "ui/app.py")
    assert (package_of("repl.py"), package_of("memory/retrieval/rank.py")) == ("repl", "memory")
    assert (len(walk.stop_files), walk.stop_moves, len(walk.files), walk.moves) == (3, 2, 5, 3)
    assert len(walk.handoffs) == 2


@pytest.mark.slow
def test_architecture_md_gives_the_turn_s_true_walk_within_the_goal() -> None:
    said = re.search(r"the turn\s+visits\s+\*\*(\d+) files\*\*\s+with\s+\*\*(\d+) hand-offs between packages\*\*"
                     r"\s+\((\d+) moves counted call by call", ARCHITECTURE.read_text(encoding="utf-8"))
    assert said is not None, "ARCHITECTURE.md no longer gives the turn's walk"
    files, handoffs, moves = (int(group) for group in said.groups())
    walk = measure()
    assert len(walk.stop_files) == files, walk.stop_files
    assert len(walk.handoffs) == handoffs, list(walk.handoffs)
    assert files <= MOST_FILES and handoffs <= MOST_HANDOFFS
    # The moves counted call by call differ a little from run to run (what the window's own timers
    # and the opening store call meanwhile), so the documented figure gets a tenth more.
    assert walk.stop_moves <= moves * 1.1, walk.calls


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["tool", "agent"])
def test_architecture_md_gives_the_true_walk_of_a_tool_call_and_of_an_agent_import(kind: str) -> None:
    """ARCHITECTURE.md's figures for `bench/turn_walk.py --walk tool` (a search_memory call) and
    `--walk agent` (a coding agent's session imported), as the bench counts them now (the MCP
    call's walk, `--walk mcp`, starts a server of its own: the bench alone counts it)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    after = text[text.index(f"`python bench/turn_walk.py --walk {kind}`"):]
    said = re.search(r"\*\*(\d+) files\*\*,\s+\*\*(\d+) hand-offs", after)
    assert said is not None, f"ARCHITECTURE.md no longer counts the {kind} walk"
    walk = measure(kind)
    assert (len(walk.stop_files), len(walk.handoffs)) == (int(said.group(1)), int(said.group(2))), (
        walk.stop_files, list(walk.handoffs))
