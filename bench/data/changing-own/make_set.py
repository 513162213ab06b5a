#!/usr/bin/env python3
"""Build the changing-own set (a nurse in Glasgow) from conversations/*.txt and questions.py: bench/data/changing_set.py.

    python3 make_set.py              # write exchanges.jsonl, questions.json and index.tsv here
    python3 make_set.py --out DIR    # write them into DIR instead (used by validate.py)
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.dont_write_bytecode = True
sys.path.insert(0, str(HERE.parent))
from changing_set import main  # noqa: E402

if __name__ == "__main__":
    main(HERE, "urn:eval:changing-own:v1", "Europe/London")
