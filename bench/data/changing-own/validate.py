#!/usr/bin/env python3
"""Consistency checks for the changing-own set: bench/data/changing_check.py.

    python3 validate.py                  # check the files in this folder
    python3 validate.py --determinism    # also rebuild into a temp dir and compare bytes
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.dont_write_bytecode = True
sys.path.insert(0, str(HERE.parent))
from changing_check import main  # noqa: E402

if __name__ == "__main__":
    main(HERE, "urn:eval:changing-own:v1")
