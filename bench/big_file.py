"""Adding one big file: read and chunk time, embed-and-write throughput, and the time for the whole file.

Generates a text file of --mb megabytes, then runs the same add as `ocat --add-to-vector-store`
(`ocat.memory.add_path`) with the real embedding model. --stop-after N cancels after N
chunks (as Ctrl+C would) and extrapolates the full time from the rate so far; a second run
with --store pointing at the same folder measures completing a partial add.

    python bench/big_file.py --mb 50 --stop-after 2048
    python bench/big_file.py --mb 10 --one-line --stop-after 1024   # one 10 MB line, no break
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORDS = "harbour lantern copper meadow violin glacier orchard saddle tunnel walnut quarry ribbon falcon pepper".split()


class Stop(Exception):
    """Raised from the progress callback to cancel the add, as Ctrl+C does."""


def make_file(path: Path, megabytes: float, *, one_line: bool = False) -> None:
    """Paragraphs of random words until the file reaches the size (`one_line`: all on one
    line, with no sentence end or break to cut at)."""
    rng = random.Random(1)
    target = int(megabytes * 1024 * 1024)
    with path.open("w", encoding="utf-8") as handle:
        written = index = 0
        while written < target:
            end = " " if one_line else ".\n\n"
            paragraph = f"{index} " + " ".join(rng.choice(WORDS) for _ in range(150)) + end
            handle.write(paragraph)
            written += len(paragraph)
            index += 1


def main(argv: list[str] | None = None) -> int:
    """Build the file, add it, print the timings."""
    sys.path.insert(0, str(REPO))
    from bench.recall import DEFAULT_MODEL
    from bench.smoke import threads
    from ocat.text.chunking import chunk_text
    from ocat.config.loading import shipped_settings
    from ocat.memory import MemoryStore, StoreLocation, add_path, partial_documents
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--stop-after", type=int, default=0, help="cancel after this many chunks (0: add it all)")
    parser.add_argument("--one-line", action="store_true", help="the whole file on one line, with no break")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--store", type=Path, help="keep the store (and the file) here")
    args = parser.parse_args(argv)

    folder = args.store or Path(tempfile.mkdtemp(prefix="ocat-bigfile-"))
    folder.mkdir(parents=True, exist_ok=True)
    big = folder / "big.txt"
    if not big.exists():
        make_file(big, args.mb, one_line=args.one_line)
    options = shipped_settings().chunking
    started = time.perf_counter()
    chunks = chunk_text(big.read_text(encoding="utf-8"), options)
    print(f"file: {big.stat().st_size / 1e6:.1f} MB, {len(chunks)} chunks; read + chunk {time.perf_counter() - started:.2f} s")

    store = MemoryStore.open(StoreLocation(path=folder / "store"), OnnxMiniLMEmbedder(args.model, threads=threads()), name="bench")
    first = [0.0]

    def progress(file: Path, done: int, total: int) -> None:
        if not first[0]:
            first[0] = time.perf_counter() - started
        if args.stop_after and done >= args.stop_after:
            raise Stop

    started = time.perf_counter()
    try:
        add_path(store, big, options, chunks_stored=progress)
        cancelled = False
    except Stop:
        cancelled = True
    elapsed = time.perf_counter() - started
    stored = store.count("document")
    rate = stored / elapsed if elapsed else 0.0
    print(f"first batch stored after {first[0]:.1f} s; {stored} chunks in {elapsed:.1f} s = {rate:.1f} chunks/s")
    if cancelled:
        print(f"cancelled; partial documents: {len(partial_documents(store))}; "
              f"the whole file would take about {len(chunks) / rate / 60:.0f} min at this rate")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
