"""The README's "Your first five minutes", run as written in a fresh home folder: its shell blocks
are read from README.md, with made-up exports where the user's downloads would be, and the bare
`ocat` line answered by a fake model through the line-mode chat (stdin is a pipe). The shell
block of its "Everyday commands" is run the same way."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import MODEL_DIR, REPO
from tests.support.cli import Cli
from tests.support.fakes import FakeLLMServer
from tests.support.warm_start import warm_ocat_folder
from tests.support.history_fixtures import (
    claude_conversation,
    claude_message,
    gpt_linear,
    legacy_db,
    write_zip,
)

SECTION = "## Your first five minutes"


def readme_blocks(section: str = SECTION) -> list[str]:
    """The ```bash blocks of one README section (up to the next `## ` heading)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index(section + "\n")
    end = text.find("\n## ", start + len(section))
    body = text[start : end if end >= 0 else len(text)]
    return re.findall(r"```bash\n(.*?)```", body, flags=re.DOTALL)


def place_downloads(home: Path) -> None:
    """The exports the section names, where it names them: ChatGPT's and Claude's zips in
    ~/Downloads, llm's logs.db in its own config folder, and the three in ~/Downloads/exports
    (made-up conversations)."""
    downloads = home / "Downloads"
    downloads.mkdir()
    write_zip(downloads / "chatgpt-export.zip", {"conversations.json": [gpt_linear("kitchen", "Kitchen plan", [
        ("user", "We want quartz counter tops for the kitchen."),
        ("assistant", "Quartz resists stains; budget about 18,000 euros with the cabinets."),
    ])]})
    write_zip(downloads / "claude-export.zip", {"conversations.json": [claude_conversation("cl-1", "Lisbon trip", [
        claude_message("m1", "human", "We fly to Lisbon in May."),
        claude_message("m2", "assistant", "Lovely: warm, and before the crowds."),
    ])]})
    llm_folder = home / ".config" / "io.datasette.llm"
    llm_folder.mkdir(parents=True)
    legacy_db(llm_folder / "logs.db")
    # A folder of several: the same exports again, side by side (each is found already here).
    gathered = downloads / "exports"
    gathered.mkdir()
    for export in (downloads / "chatgpt-export.zip", downloads / "claude-export.zip", llm_folder / "logs.db"):
        shutil.copy(export, gathered / export.name)


def fresh_environment(home: Path, server: FakeLLMServer) -> dict[str, str]:
    """A new user's environment: HOME only (no XDG folders, no ocat settings), the `ocat` command
    on PATH, the shared model, and the model's provider the fake server.

    The command is the installed one's stand-in, which runs `python -m ocat` (what the installed
    script runs) forked from the worker's warm interpreter: each of the sections' dozen commands
    paid ~2.5 s of CPU to start cold. What a cold start loads is tests/cli/test_startup.py's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OCAT_", "XDG_"))}
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "ocat").is_file(), f"the ocat command is not installed beside {sys.executable}"
    warm = warm_ocat_folder(home.parent / "warm-bin", env)
    path = os.pathsep.join(str(folder) for folder in (warm, bin_dir) if folder is not None)
    return env | {
        "HOME": str(home),
        "PATH": f"{path}{os.pathsep}{env.get('PATH', '')}",
        "OCAT_EMBEDDING_MODEL_PATH": str(MODEL_DIR),
        "OCAT_LLM_MODEL": "openai/fake-model",
        "OCAT_LLM_API_BASE": server.api_base,
        "OCAT_LLM_API_KEY": "sk-test",
    }


def test_the_readme_finds_the_section_and_its_commands() -> None:
    blocks = readme_blocks()
    assert blocks, f"README.md has no bash block under {SECTION!r}"
    script = "\n".join(blocks)
    for needed in ("--import-history", "profile.md", "\nocat "):
        assert needed in script, f"{needed!r} is not in the section's commands any more: update this test"


@pytest.mark.slow
def test_the_first_five_minutes_work_in_a_fresh_home(tmp_path: Path, llm_server: FakeLLMServer) -> None:
    home = tmp_path / "newcomer"
    home.mkdir()
    place_downloads(home)
    llm_server.reply = "You chose quartz."
    script = "set -euo pipefail\n" + "\n".join(readme_blocks())
    # The bare `ocat` line is the chat: stdin is a pipe, so it is the line-mode chat, asked this.
    run = subprocess.run(
        ["bash", "-c", script], input="which counter tops did we want for the kitchen?\n",
        capture_output=True, text=True, env=fresh_environment(home, llm_server), cwd=home, timeout=600,
    )
    assert run.returncode == 0, f"the README's commands failed:\n{run.stderr}"
    assert "Traceback" not in run.stderr
    # The folder of several: a line each, all already here.
    assert "chatgpt-export.zip (ChatGPT): 1 conversation: 1 already here, 0 new" in run.stdout
    assert "logs.db (llm): " in run.stdout and "claude-export.zip (Claude): " in run.stdout
    # Every export was imported, and the profile was written where ocat reads it.
    assert "You chose quartz." in run.stdout
    profile = (home / ".config" / "ocat" / "profile.md").read_text(encoding="utf-8")
    assert "structural engineer in Porto" in profile
    # The chat's one request carried the profile (the wake block) and the imported memory.
    sent = " ".join(str(m.get("content")) for m in llm_server.requests[-1]["messages"])
    assert "structural engineer in Porto" in sent
    assert "quartz counter tops" in sent
    assert "Lisbon" in sent or "Lisbon trip" in sent  # the Claude thread is in the wake block's list


@pytest.mark.slow
def test_any_run_of_ocat_makes_its_config_folder(cli: Cli, isolated_home: Path) -> None:
    # So that `echo ... > ~/.config/ocat/profile.md` works after any first command.
    folder = isolated_home / ".config" / "ocat"
    assert not folder.exists()
    run = cli("--wake", "--no-vector-store")
    assert run.returncode == 0, run.stderr
    assert folder.is_dir()


EVERYDAY = "## Everyday commands"


def test_the_readme_finds_the_everyday_shell_commands() -> None:
    blocks = readme_blocks(EVERYDAY)
    assert len(blocks) == 1, f"README.md should have one bash block under {EVERYDAY!r}"
    lines = [line for line in blocks[0].splitlines() if line.strip()]
    assert len(lines) >= 5 and all(line.startswith("ocat ") for line in lines), "each line is one ocat command"


@pytest.mark.slow
def test_the_everyday_shell_commands_work_as_written(tmp_path: Path, llm_server: FakeLLMServer) -> None:
    # The section's block, line by line, in a fresh home holding the folders it names: the line
    # mode answers the one prompt on stdin; every command must succeed.
    home = tmp_path / "user"
    for folder, note in (("notes", "The billing database is PostgreSQL 16."), ("work/notes", "Standup at 9:30.")):
        (home / folder).mkdir(parents=True)
        (home / folder / "decisions.md").write_text(f"# Decisions\n\n## Billing\n\n{note}\n", encoding="utf-8")
    llm_server.reply = "Noted."
    script = "set -euo pipefail\n" + readme_blocks(EVERYDAY)[0]
    run = subprocess.run(["bash", "-c", script], input="which database for billing?\n", capture_output=True,
                         text=True, env=fresh_environment(home, llm_server), cwd=home, timeout=600)
    assert run.returncode == 0, f"the README's everyday commands failed:\n{run.stderr}"
    assert "Traceback" not in run.stderr
    assert run.stdout.startswith("Noted.\nNoted.\n")  # the line mode's answer, then --ask's
    # The query found the line mode's exchange first, given to the model (`*`).
    assert re.search(r" 1\. \d\.\d\d\* exchange", run.stdout) and "User: which database for billing" in run.stdout
    assert run.stdout.count("Added 1 chunk from ") == 2  # each folder's note, in its own store
    assert "created store work" in run.stderr
    assert (home / "memory.jsonl").is_file()
