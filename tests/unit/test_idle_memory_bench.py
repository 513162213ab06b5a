"""bench/idle_memory.py cannot rot silently: it reads a process family's memory from /proc, and
its medians and report are whole (the figures themselves are the bench's, never asserted here)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.idle_memory import family_memory, format_report, medians


@pytest.mark.slow
def test_it_reads_a_process_and_its_child() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        import os

        family = family_memory(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert len(family["processes"]) >= 2  # this process and its child (at least)
    for m in family["processes"].values():
        assert 0 < m["uss"] <= m["pss"] <= m["rss"] <= m["peak_rss"] + 1
    assert family["total"]["rss"] == sum(m["rss"] for m in family["processes"].values())


def test_its_medians_and_report_keep_every_figure() -> None:
    run = {"processes": {"main": {"rss": 3.0, "pss": 2.0, "uss": 1.0, "peak_rss": 4.0}},
           "total": {"rss": 3.0, "pss": 2.0, "uss": 1.0}}
    other = {"processes": {"main": {"rss": 5.0, "pss": 4.0, "uss": 3.0, "peak_rss": 6.0}},
             "total": {"rss": 5.0, "pss": 4.0, "uss": 3.0}}
    middle = medians([run, other, run])
    assert middle == run
    text = format_report({"checkout": "x", "exchanges": 1, "runs": 3, "load": "1", "chat": middle, "mcp": middle,
                          "imports_rss": {"litellm": 200.0, "tiktoken": None}})
    assert "total" in text and "litellm" in text and "failed" in text
