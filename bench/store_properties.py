"""The stateful property of tests/property/test_store_properties.py, run long: random runs of add, note,
delete, pin, rename, history import with duplicates, export/import, damaged derived files,
reopening and repair, each checked to lose nothing the user kept. CI runs 40 fixed runs.

    python bench/store_properties.py                  # 500 random runs of up to 30 steps
    python bench/store_properties.py --runs 2000 --steps 50
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    env = {**os.environ, "STORE_PROPERTY_EXAMPLES": str(args.runs), "STORE_PROPERTY_STEPS": str(args.steps),
           "STORE_PROPERTY_RANDOM": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--hypothesis-show-statistics",
               "tests/property/test_store_properties.py"]
    raise SystemExit(subprocess.call(command, cwd=REPO, env=env))


if __name__ == "__main__":
    main()
