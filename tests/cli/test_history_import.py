"""`ocat --import-history`: old chats become threads, once; a stop leaves whole conversations; a
bad conversation is listed and the rest import; what is stored is never touched.

Parsing each format is tested in tests/unit/test_history_parsers.py; this drives the CLI.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.support.cli import Cli, Running, stats
from tests.support.history_fixtures import (
    branched_conversation,
    claude_conversation,
    claude_message,
    gpt_conversation,
    gpt_linear,
    gpt_message,
    legacy_db,
    write_json,
    write_zip,
)

pytestmark = pytest.mark.slow


def kitchen_export(tmp_path: Path, extra: int = 0) -> Path:
    """A ChatGPT export as downloaded: a zip with conversations.json (and a chat.html)."""
    conversations = [
        gpt_linear("kitchen", "Kitchen plan", [
            ("user", "We want quartz counter tops for the kitchen."),
            ("assistant", "Quartz resists stains; budget about 18,000 euros with the cabinets."),
            ("user", "Who should fit the cabinets?"),
            ("assistant", "Ask Berg & Sons, who fitted your hallway."),
        ]),
        branched_conversation(),
        *[gpt_linear(f"more-{i}", f"More {i}", [("user", f"note {i}"), ("assistant", f"noted {i}")])
          for i in range(extra)],
    ]
    return write_zip(tmp_path / "chatgpt-export.zip", {"conversations.json": conversations, "chat.html": "<html/>"})


def test_a_chatgpt_export_becomes_threads_with_their_titles_and_the_chat_finds_them(cli: Cli, tmp_path: Path) -> None:
    export = kitchen_export(tmp_path)
    run = cli("--import-history", str(export), "--output", "json")
    assert run.returncode == 0, run.stderr
    result = run.json()["result"]
    assert result | {"problems": []} == {
        "source": "chatgpt", "conversations": 2, "already_here": 0, "new": 2, "grown": 0, "completed": 0, "empty": 0,
        "exchanges": 4, "updated": 0, "unfinished": 0, "stopped": False, "problems": [], "warnings": [],
        "secrets": [], "secrets_kept": False,
    }
    # Only the chosen branch was said: the regenerated and the edited-away messages are not memory.
    found = cli("--query-vector-store", "which river in Peru and how long", "--output", "json").json()["result"]
    texts = " ".join(h["text"] for h in found["results"])
    assert "Ucayali" in texts and "1,000 miles" in texts and "first try" not in texts and "1,600 km" not in texts
    # Threads keep their titles (and their own dates).
    found = cli("--query-vector-store", "quartz counter tops", "--output", "json").json()["result"]["results"]
    assert found[0]["metadata"]["thread_title"] == "Kitchen plan"
    assert found[0]["date"].startswith("2023-11-14")  # the conversation's own time, not the import's


def test_importing_again_adds_only_what_is_new_and_says_so(cli: Cli, tmp_path: Path) -> None:
    first = cli("--import-history", str(kitchen_export(tmp_path)))
    assert first.returncode == 0, first.stderr
    assert "2 conversations: 0 already here, 2 new, 4 exchanges" in first.stdout
    again = cli("--import-history", str(kitchen_export(tmp_path, extra=3)))
    assert again.returncode == 0, again.stderr
    assert "5 conversations: 2 already here, 3 new, 3 exchanges" in again.stdout
    assert stats(cli)["exchanges"] == 7


def test_a_broken_conversation_is_listed_and_the_others_import(cli: Cli, tmp_path: Path) -> None:
    broken = gpt_conversation("broken", "Broken tree", [
        ("root", None, None),
        ("u1", "nowhere", gpt_message("u1", "user", "orphaned question")),
    ], current_node="u1")
    good = gpt_linear("good", "Good", [("user", "the ferry leaves at noon"), ("assistant", "noted")])
    export = write_json(tmp_path / "conversations.json", [broken, good])
    run = cli("--import-history", str(export), "--output", "json")
    assert run.returncode == 0, run.stderr
    result = run.json()["result"]
    assert result["new"] == 1 and result["exchanges"] == 1
    assert [p["id"] for p in result["problems"]] == ["broken"] and "nowhere" in result["problems"][0]["problem"]
    assert "Broken tree" in run.stderr


def test_claude_and_llm_exports_import_too(cli: Cli, tmp_path: Path) -> None:
    claude = write_json(tmp_path / "claude.json", [claude_conversation("cl-1", "Trip", [
        claude_message("m1", "human", "We fly to Lisbon in May."),
        claude_message("m2", "assistant", "Lovely: warm, and before the crowds."),
    ])])
    run = cli("--import-history", str(claude), "--output", "json")
    assert run.returncode == 0, run.stderr
    assert run.json()["result"]["source"] == "claude" and run.json()["result"]["exchanges"] == 1
    logs = legacy_db(tmp_path / "logs.db")
    run = cli("--import-history", str(logs), "--output", "json")
    assert run.returncode == 0, run.stderr
    assert run.json()["result"]["source"] == "llm" and run.json()["result"]["new"] >= 1


def test_bad_input_is_a_clear_error_and_nothing_stored_is_touched(cli: Cli, tmp_path: Path) -> None:
    cli("--import-history", str(kitchen_export(tmp_path)))
    other = tmp_path / "notes.json"
    other.write_text(json.dumps({"hello": "world"}))
    run = cli("--import-history", str(other))
    assert run.returncode == 1 and "is not a ChatGPT, Claude or llm export" in run.stderr
    assert "Traceback" not in run.stderr
    wrong = cli("--import-history", str(other), "--from", "llm")
    assert wrong.returncode == 1 and "llm" in wrong.stderr
    misplaced = cli("--vector-store-stats", "--from", "chatgpt")
    assert misplaced.returncode == 2 and "--from applies to --import-history only" in misplaced.stderr
    assert stats(cli)["exchanges"] == 4


def test_ocats_own_export_imports_through_the_same_flag(cli: Cli, tmp_path: Path) -> None:
    cli("--import-history", str(kitchen_export(tmp_path)))
    backup = tmp_path / "backup.jsonl"
    assert cli("--export-memory", str(backup)).returncode == 0
    other = Cli(home=cli.home, store_path=tmp_path / "other-store")
    run = other("--import-history", str(backup))
    assert run.returncode == 0, run.stderr
    assert stats(other)["exchanges"] == 4


def test_ctrl_c_stops_after_whole_conversations_and_a_rerun_completes_exactly(cli: Cli, tmp_path: Path) -> None:
    # 48 conversations of 4 exchanges: three steps of 64 exchanges (ocat.operations.history), so a
    # stop at the first progress line lands with whole steps still to write. Short turns: the
    # stop and the rerun are what is tested, not the model's speed on long texts.
    count = 48
    conversations = [
        gpt_linear(f"c{i}", f"Chat {i}", [(role, f"{role} {i}.{t}: " + "words " * 8)
                                         for t in range(4) for role in ("user", "assistant")])
        for i in range(count)
    ]
    export = write_zip(tmp_path / "big.zip", {"conversations.json": conversations})
    running = Running(cli, "--import-history", str(export), "--output", "json")
    # The first progress line comes once conversations are being written.
    running.wait_until(lambda err: "conversations, " in err, timeout=180)
    code = running.kill(signal.SIGINT)
    assert code == 130, running.wait_until(lambda _: True)
    out = running.wait_until(lambda text: text.endswith("}\n"), stream="stdout", timeout=30)
    stopped = json.loads(out)["result"]
    assert stopped["stopped"] and 0 < stopped["new"] < count
    # Whole conversations only: every thread written holds its four exchanges.
    assert stats(cli)["exchanges"] == 4 * stopped["new"]
    rerun = cli("--import-history", str(export), "--output", "json")
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.json()["result"]["already_here"] == stopped["new"]
    assert rerun.json()["result"]["new"] == count - stopped["new"]
    assert stats(cli)["exchanges"] == 4 * count


def test_a_folder_of_several_exports_imports_each_with_a_line_each(cli: Cli, tmp_path: Path) -> None:
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    kitchen_export(downloads)  # chatgpt-export.zip
    write_zip(downloads / "claude-export.zip", {"conversations.json": [claude_conversation("cl-1", "Trip", [
        claude_message("m1", "human", "We fly to Lisbon in May."),
        claude_message("m2", "assistant", "Lovely: warm, and before the crowds."),
    ])]})
    legacy_db(downloads / "logs.db")
    (downloads / "notes.txt").write_text("not an export")
    (downloads / "broken.zip").write_bytes(b"PK\x03\x04 cut short")
    run = cli("--import-history", str(downloads))
    # One line per export, by name; the zip that is none is named too (exit 1), the others stored.
    lines = run.stdout.splitlines()
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert [line.split(":")[0] for line in lines] == ["chatgpt-export.zip (ChatGPT)", "claude-export.zip (Claude)",
                                                       "logs.db (llm)", "broken.zip"]
    assert "2 new, 4 exchanges" in lines[0] and "1 new, 1 exchange" in lines[1]
    assert "damaged or truncated zip" in lines[3] and "notes.txt" not in run.stdout
    (downloads / "broken.zip").unlink()
    stored = stats(cli)["exchanges"]
    assert stored >= 6
    again = cli("--import-history", str(downloads), "--output", "json")
    assert again.returncode == 0, again.stderr
    exports = again.json()["result"]["exports"]
    assert [Path(e["path"]).name for e in exports] == ["chatgpt-export.zip", "claude-export.zip", "logs.db"]
    assert [e["source"] for e in exports] == ["chatgpt", "claude", "llm"] and not any(e["exchanges"] for e in exports)
    assert stats(cli)["exchanges"] == stored
