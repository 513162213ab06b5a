"""Issue 34 (H, I, messages): the profile is a regular file, read up to 64 KB and fitted in
linear time; what is left out is said; comments and an unedited template never reach the model;
MCP on several stores lists their pins and gives their wake block."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ocat.config.loading import load_settings
from ocat.memory import MemoryStore
from ocat.operations.profile import PROFILE_BYTES, PROFILE_TEMPLATE, fit_lines, read_profile
from ocat.operations.wake import build_wake, remember
from tests.support.warm_start import python_command
from tests.support.cli import Cli
from tests.cli.test_mcp import BILLING, CAT, call, mcp_session


def settings_for(profile: Path | str, **overrides: Any) -> Any:
    return load_settings(env={}, overrides={"wake.profile": str(profile), **overrides})


def test_a_pipe_or_a_device_is_no_profile_and_says_so(tmp_path: Path) -> None:
    fifo = tmp_path / "profile.fifo"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        found = read_profile(path)
        assert found.text == "" and found.note is not None and "not a regular file" in found.note


def test_a_long_profile_is_read_to_64_kb_and_a_binary_one_is_left_out_with_a_word(tmp_path: Path) -> None:
    long = tmp_path / "long.md"
    long.write_text("I like bridges. " * 50_000)  # 800 KB
    found = read_profile(long)
    assert len(found.text.encode()) <= PROFILE_BYTES and found.note and "64 KB" in found.note
    binary = tmp_path / "binary.md"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    assert read_profile(binary).text == "" and "binary" in str(read_profile(binary).note)
    latin = tmp_path / "latin.md"
    latin.write_bytes("caf\xe9".encode("latin-1"))
    assert read_profile(latin).text == "" and "UTF-8" in str(read_profile(latin).note)


def test_comments_and_the_unedited_template_never_reach_the_model(tmp_path: Path) -> None:
    profile = tmp_path / "profile.md"
    profile.write_text(PROFILE_TEMPLATE)
    assert read_profile(profile).text == ""
    assert build_wake(settings_for(profile), None).empty
    profile.write_text(PROFILE_TEMPLATE + "\nI work on bridges. <!-- private: my salary -->\n")
    text = read_profile(profile).text
    assert "bridges" in text and "salary" not in text and "<!--" not in text


def test_fitting_counts_each_line_once(tmp_path: Path) -> None:
    lines = [f"line {n}: I like short answers and metric units." for n in range(5000)]
    counted: list[int] = []

    def count(text: str) -> int:
        counted.append(len(text))
        return len(text.split())

    fitted = fit_lines("\n".join(lines), 20_000, count)
    assert fitted.startswith("line 0") and count(fitted) <= 20_000
    # Linear: the characters counted stay within a few times the text's (quadratic would be ~2,500 times).
    assert sum(counted) <= 4 * len("\n".join(lines))


@pytest.mark.slow
def test_ocat_wake_with_a_pipe_for_a_profile_returns_and_says_why(cli: Cli, tmp_path: Path) -> None:
    fifo = tmp_path / "profile.fifo"
    os.mkfifo(fifo)
    done = subprocess.run(python_command("-m", "ocat", "--wake", "--set", f"wake.profile={fifo}", env=cli.environ()),
                          capture_output=True, text=True, env=cli.environ(), cwd=cli.home, timeout=60)
    assert done.returncode == 0 and "not a regular file" in done.stderr


@pytest.mark.anyio
async def test_mcp_on_several_stores_lists_every_pin_and_gives_their_wake_block(cli: Cli) -> None:
    for store, note in (("work", BILLING), ("personal", CAT)):
        async with mcp_session(cli, "--store", store) as session:
            saved = await call(session, "remember", {"content": note})
            await call(session, "pin_memory", {"id": saved["ids"][0]})
    async with mcp_session(cli, "--store", "work,personal") as session:
        pins = await call(session, "memory_pins", {})
        wake = await call(session, "memory_wake", {})
    assert sorted(p["store"] for p in pins["pins"]) == ["personal", "work"]
    assert "billing" in wake["text"].lower() and "cat" in wake["text"].lower() and len(wake["pins"]) == 2


def test_the_wake_block_of_several_stores_merges_their_pins(store: MemoryStore, tmp_path: Path) -> None:
    from ocat.memory import StoreLocation
    from tests.support.fakes import FakeEmbedder

    other = MemoryStore.open(StoreLocation(path=tmp_path / "other"), FakeEmbedder(), name="other")
    settings = settings_for(tmp_path / "none.md")
    remember(store, "The boiler code is 4411.", settings)
    remember(other, "Ana is allergic to peanuts.", settings)
    block = build_wake(settings, [store, other])
    assert len(block.pins) == 2 and "peanuts" in block.pins[0]
