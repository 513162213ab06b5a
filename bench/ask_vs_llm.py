"""`ocat --ask` against simonw/llm's `llm -m MODEL PROMPT`: the same fake OpenAI-compatible server
(it answers at once), the same prompt; wall time and peak RSS of each whole process, median of
the runs, and the ratio pair by pair (runs alternate, so a machine that slows down slows both).

ocat runs with memory on, on a store of 200 exchanges (its model loaded and a search made before
the request, as a user's --ask does). llm is installed from PyPI into the bench's own venv
(`--llm-venv`, made on first use). Issue 35's goal: ocat at most 1.5x llm's wall time, peak
RSS at most 250 MB (docs/PERFORMANCE.md, "--ask against simonw/llm").

    python bench/ask_vs_llm.py                  # 9 pairs
    python bench/ask_vs_llm.py --runs 15 --checkout /path/to/older/ocat   # the same, an older tree
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from startup import ocat_command, ocat_env  # noqa: E402

DEFAULT_MODEL = REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2-int8"
PROMPT = "hello"


def llm_python(venv: Path) -> Path:
    """The bench venv's Python with llm installed from PyPI (made on first use)."""
    python = venv / "bin" / "python"
    if not (venv / "bin" / "llm").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "llm"], check=True)
    return python


def timed(command: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (MiB) and stdout of one whole process."""
    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    out = child.stdout.read() if child.stdout else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed: {child.stderr.read() if child.stderr else ''}")
    return seconds, usage.ru_maxrss // 1024, out


def store_with_exchanges(folder: Path, count: int, env: dict[str, str]) -> None:
    records = [{"kind": "exchange", "exchange_id": f"e{i}", "thread_id": f"t{i // 4}", "session_id": "s",
                "user_prompt": f"question {i} about the garden and the shed number {i}",
                "assistant_response": f"answer {i}: the ladder hangs on the north wall " * 5,
                "timestamp": 1_764_000_000.0 + i, "prior_exchange_ids": [], "thread_session_id": f"t{i // 4}_s",
                "thread_continuation_seq": 0} for i in range(count)]
    path = folder / "history.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    subprocess.run([*ocat_command(), "--import-memory", str(path)], env=env, check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--llm-venv", type=Path, default=REPO / "bench" / ".venv-llm")
    parser.add_argument("--checkout", type=Path, help="time this source tree's ocat instead")
    args = parser.parse_args()
    from tests.support.fakes import FakeLLMServer, serving

    python = llm_python(args.llm_venv)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(args.checkout or REPO / "ocat")], check=True)
    with tempfile.TemporaryDirectory(prefix="ocat-ask-bench-") as tmp, \
            serving(FakeLLMServer(reply="Hello! This is a short answer from the fake model.")) as server:
        folder = Path(tmp)
        ocat = {**os.environ, **ocat_env(folder / "home", folder / "store", args.model, args.checkout)}
        store_with_exchanges(folder, 200, ocat)
        llm_home = folder / "llm"
        llm_home.mkdir()
        (llm_home / "extra-openai-models.yaml").write_text(
            f'- model_id: fake\n  model_name: fake-model\n  api_base: "{server.api_base}"\n  api_key_name: fake\n')
        (llm_home / "keys.json").write_text(json.dumps({"fake": "sk-test"}))
        llm = {**os.environ, "LLM_USER_PATH": str(llm_home)}
        ask = [*ocat_command(), "--ask", PROMPT, "--model", "openai/fake-model",
               "--set", f"llm.api_base={server.api_base}", "--set", "llm.api_key=sk-test"]
        theirs = [str(python), "-m", "llm", "-m", "fake", PROMPT]
        timed(ask, ocat), timed(theirs, llm)  # warm-up: caches, bytecode
        pairs: list[dict[str, Any]] = []
        for _ in range(args.runs):
            a_wall, a_rss, a_out = timed(ask, ocat)
            b_wall, b_rss, b_out = timed(theirs, llm)
            assert "fake model" in a_out and "fake model" in b_out, (a_out, b_out)
            pairs.append({"ocat": a_wall, "llm": b_wall, "ratio": a_wall / b_wall, "ocat_rss": a_rss, "llm_rss": b_rss})
    median = {key: statistics.median(p[key] for p in pairs) for key in pairs[0]}
    print(f"--ask, {args.runs} pairs, medians: ocat {median['ocat']:.2f} s, {median['ocat_rss']:.0f} MiB; "
          f"llm {median['llm']:.2f} s, {median['llm_rss']:.0f} MiB; wall ratio {median['ratio']:.2f} "
          f"(min {min(p['ratio'] for p in pairs):.2f}, max {max(p['ratio'] for p in pairs):.2f}); goal 1.5x, 250 MiB")


if __name__ == "__main__":
    main()
