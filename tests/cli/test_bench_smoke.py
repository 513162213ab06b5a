"""Every bench in bench/ still runs: each at its smallest (a few questions over a few exchanges,
one run), asserting only that it exits 0 and prints its table (or report). A change that breaks a bench fails
here, not when the next person needs its figures (issue 50, part 6). Its figures mean nothing.

A bench is a file of bench/ that runs as a script (`if __name__ == "__main__":`); a new one is
picked up by itself and run with `--smoke`, its smallest run (bench/smoke.py). One that needs the
shared data beside the repository (../shared: the real embedding model, the dev sets) or a tool
(tmux, simonw/llm's venv) is skipped, saying why, where it is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.paths import REPO
from tests.support.warm_start import launched, python_command

BENCH = REPO / "bench"
SHARED = REPO.parent / "shared"
NEEDS = {
    "model": (SHARED / "models" / "all-MiniLM-L6-v2-int8", "the real embedding model (../shared/models)"),
    "eval": (SHARED / "eval", "the dev sets (../shared/eval)"),
    "llm": (BENCH / ".venv-llm", "simonw/llm's venv (bench/.venv-llm; made by hand, it needs the network)"),
}
SMOKE = ["--smoke"]
WARM_ENV = "BENCH_WARM_PYTHON"  # bench/startup.py's
# Each bench's smallest run and what it needs beyond the repository. A bench not named here
# runs with --smoke and needs nothing more.
# (recall_dated and recall_projects smoke chats-dev alone: their LoCoMo side reads it with the
# loader that recall and tool_recall smoke.)
RUNS: dict[str, tuple[list[str], set[str]]] = {
    "agent_import": (["--sessions", "2", "--prompts", "1", "--mb", "0.01", "--grow", "1", "--skip-raw"], {"model"}),
    "ask_mcp_cache": (["--runs", "1"], set()),
    "ask_vs_llm": (["--runs", "1"], {"model", "llm"}),
    "big_file": (["--mb", "0.01"], {"model"}),
    "idle_memory": (["--runs", "1", "--exchanges", "20", "--settle", "0.2", "--steady", "0.3"], {"model", "tmux"}),
    "idle_release": (SMOKE, {"model", "eval"}),
    "import_history": (["--mb", "0.01"], {"model"}),
    "ingest": (["--prose-mb", "0.005", "--import-exchanges", "5"], {"model"}),
    "latency": ([*SMOKE, "--exchanges", "20", "--vectors", "synthetic", "--queries", "3"], {"model", "eval"}),
    "limits": (SMOKE, {"model"}),
    "link_cost": (SMOKE, {"model", "eval"}),
    "passage_cost": ([*SMOKE, "--runs", "1"], {"model", "eval"}),
    "quit": (["--runs", "1", "--type-after", "0.5"], {"model", "tmux"}),
    "recall": ([*SMOKE, "--modes", "hybrid"], {"model", "eval"}),
    "recall_changing": ([*SMOKE, "--why"], {"model", "eval"}),
    "recall_dated": ([*SMOKE, "--boosts", "0.5", "--sets", "chats"], {"model", "eval"}),
    "recall_notes": (SMOKE, {"model"}),
    "recall_projects": ([*SMOKE, "--boosts", "0.5", "--sets", "chats"], {"model", "eval"}),
    "secrets_kept_out": (SMOKE, {"eval"}),
    "startup": (["--runs", "1"], {"model", "tmux"}),
    "store_properties": (["--runs", "1", "--steps", "3"], set()),
    "tool_latency": ([*SMOKE, "--exchanges", "20", "--queries", "3"], {"model", "eval"}),
    "tool_recall": (SMOKE, {"model", "eval"}),
    "turn_walk": (["--quiet"], {"model"}),
    "two_machines": (["--sizes", "50", "--rounds", "1", "--import-size", "20"], {"model"}),
}
# Files of bench/ that run as scripts but are not benches.
NOT_BENCHES = {"bare_app": "the one-line app bench/startup.py times against ocat: it runs until it is quit"}


def benches() -> list[str]:
    """The benches: the files of bench/ that run as scripts, but for NOT_BENCHES."""
    return sorted(path.stem for path in BENCH.glob("*.py")
                  if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8") and path.stem not in NOT_BENCHES)


def missing(needs: set[str]) -> list[str]:
    """What of `needs` this machine lacks, in words."""
    said = [NEEDS[need][1] for need in sorted(needs & set(NEEDS)) if not NEEDS[need][0].exists()]
    return said + (["tmux"] if "tmux" in needs and shutil.which("tmux") is None else [])


def test_every_bench_is_found_and_every_named_one_exists() -> None:
    found = benches()
    assert {"recall", "tool_recall", "latency"} <= set(found)
    assert set(RUNS) <= set(found), "RUNS names a bench that is not in bench/"


def test_no_bench_file_takes_the_name_of_a_standard_library_module() -> None:
    # Run as a script, bench/ comes first on the path: a bench/secrets.py stood for the standard
    # library's `secrets` in every bench that imported the MCP SDK, and broke it silently.
    shadowing = sorted(p.name for p in BENCH.glob("*.py") if p.stem in sys.stdlib_module_names)
    assert shadowing == [], f"rename these benches: {shadowing}"


@pytest.mark.slow
@pytest.mark.parametrize("bench", benches())
def test_the_bench_runs_at_its_smallest_and_prints_its_table(bench: str, tmp_path: Path, run_vectors: Path) -> None:
    arguments, needs = RUNS.get(bench, (SMOKE, set()))
    lacking = missing(needs)
    if lacking:
        pytest.skip(f"bench/{bench}.py needs {', '.join(lacking)}")
    # The benches that read the dev sets embed the same texts as each other and as the harness's
    # tests: each text's vector is made once in the run (bench/smoke.py, VECTORS_ENV).
    env = {**os.environ, "TMPDIR": str(tmp_path), "HOME": str(tmp_path / "home"), "BENCH_VECTOR_CACHE": str(run_vectors)}
    (tmp_path / "home").mkdir()
    # The Python processes a bench starts (ocat, its helpers) come from the worker's warm
    # interpreter too, when they can (bench/startup.py, WARM_ENV): each cold one paid ~2.5 s of CPU.
    warm = python_command(env=env)
    if launched(warm):
        env[WARM_ENV] = json.dumps(warm)
    # From the worker's warm interpreter (tests/support/warm_start.py), as `python bench/NAME.py`
    # runs: what a bench times here means nothing, so its own start need not be cold.
    run = subprocess.run(python_command(str(BENCH / f"{bench}.py"), *arguments, env=env), cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, f"bench/{bench}.py {' '.join(arguments)} failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    assert run.stdout.strip(), f"bench/{bench}.py printed nothing:\n{run.stderr[-3000:]}"
