"""`ocat --ask` with 4 MCP servers configured against `--ask` without them, no tool called: the
same fake OpenAI-compatible server (tests/support, it answers at once), 4 Python fixture servers
(tests/support/mcp_fixture_server.py), memory off (the servers' cost alone, on the lightest --ask).

Three commands, in turn for each run: no servers; 4 servers never listed (no tool cache: each run
starts them to learn their tools, as before issue 46); 4 servers from the tool cache. Prints the
median wall time of each, the ratios pair by pair (median, min-max), and how many server processes
the cached runs started (issue 46's goal: at most 1.3x the run without servers, and none started).

    python bench/ask_mcp_cache.py             # 7 runs of each
    python bench/ask_mcp_cache.py --runs 11
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from startup import ocat_command, ocat_env, python_start  # noqa: E402

FIXTURE = REPO / "tests" / "support" / "mcp_fixture_server.py"
SERVERS = ("alpha", "beta", "gamma", "delta")


def write_config(folder: Path, servers: bool) -> Path:
    """A config with the 4 fixture servers (each counting its starts in folder/starts), or none."""
    python, *options = python_start()
    entries = {name: {"command": python, "args": [*options, str(FIXTURE)], "start_timeout": 60,
                      "env": {"FIXTURE_STARTS_FILE": str(folder / "starts")}} for name in SERVERS}
    path = folder / ("servers.yaml" if servers else "plain.yaml")
    path.write_text(json.dumps({"mcp_servers": entries if servers else {}}))
    return path


def starts(folder: Path) -> int:
    path = folder / "starts"
    return len(path.read_text().split()) if path.exists() else 0


def timed(command: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one whole process (it must succeed)."""
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    from tests.support.fakes import FakeLLMServer, serving

    with tempfile.TemporaryDirectory(prefix="ocat-bench-mcp-") as tmp, serving(FakeLLMServer()) as llm:
        folder = Path(tmp)
        env = ocat_env(folder / "home", folder / "store", folder / "model", None)
        env["XDG_STATE_HOME"] = str(folder / "home" / "state")
        env["PATH"] = "/usr/bin:/bin"
        base = [*ocat_command(), "--ask", "hello", "--no-vector-store", "--model", "openai/fake-model",
                "--set", f"llm.api_base={llm.api_base}", "--set", "llm.api_key=sk-bench", "--set", "tools.enabled=on"]
        plain = [*base, "--config", str(write_config(folder, servers=False))]
        with_servers = [*base, "--config", str(write_config(folder, servers=True))]
        cache = folder / "home" / "cache" / "ocat" / "mcp-tools.json"
        timed(plain, env)  # warm-up: the model table cached, files in the page cache
        times: dict[str, list[float]] = {"none": [], "uncached": [], "cached": []}
        cached_starts = 0
        for _ in range(args.runs):
            times["none"].append(timed(plain, env))
            cache.unlink(missing_ok=True)
            times["uncached"].append(timed(with_servers, env))
            before = starts(folder)
            times["cached"].append(timed(with_servers, env))
            cached_starts += starts(folder) - before
        shutil.rmtree(folder / "home", ignore_errors=True)
    print(f"ocat --ask, no tool called, {args.runs} runs of each (memory off)")
    for name, label in (("none", "no servers"), ("uncached", "4 servers, no cache"), ("cached", "4 servers, cached")):
        values = times[name]
        ratios = [one / other for one, other in zip(values, times["none"])]
        print(f"  {label:<22} median {statistics.median(values):.2f} s   ratio to no servers: median "
              f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
    print(f"  server processes started by the cached runs: {cached_starts}")


if __name__ == "__main__":
    main()
