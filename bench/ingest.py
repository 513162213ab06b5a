"""Ingest throughput: `--add-to-vector-store` and `--import-memory` against the raw embedding model.

In one run, on the same texts:

- prose: about 1 MB of Markdown written from the dev conversations (one file per session,
  in several volumes with different paragraphing so no two files are alike) is added with
  `ocat --add-to-vector-store DIR`; the raw figure is `OnnxMiniLMEmbedder.embed` on exactly
  the chunks the configured chunking makes of those files;
- exchanges: a JSON Lines export of N distinct exchanges (default 10,000) is imported with
  `ocat --import-memory FILE`; the raw figure is `embed` on their texts and their prompts
  (the store embeds each exchange's prompt alone too: its prompt side).

Each CLI run is a fresh process on a fresh store, so its wall time includes start-up and
loading the model (a few seconds). The CLI's peak RSS is reported too.

    python bench/ingest.py
    python bench/ingest.py --prose-mb 0.2 --import-exchanges 1000     # a quick look
    python bench/ingest.py --rss-only --import-exchanges 10000 100000  # peak RSS of imports, synthetic vectors

`--rss-only` skips the throughput runs and imports each size with the real import code
(ocat.memory.storage.export_import.import_memory) in a child process, with the synthetic vectors of
bench/latency.py instead of the model (100k real embeddings take about an hour here), to
show whether the import's memory grows with the file.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.latency import synthetic_embedder, synthetic_exchanges  # noqa: E402
from bench.recall import DEFAULT_DATA, DEFAULT_MODEL, load_conversations  # noqa: E402
from bench.startup import ocat_command, ocat_env  # noqa: E402
from bench.smoke import threads  # noqa: E402


def write_prose(folder: Path, megabytes: float, data: Path) -> list[Path]:
    """Markdown files from the dev conversations, about `megabytes` in all."""
    raw = json.loads(data.read_text(encoding="utf-8"))
    sessions = []
    for item in raw:
        conv = item["conversation"]
        for key in sorted(k for k in conv if k.startswith("session_") and not k.endswith("date_time")):
            turns = conv[key]
            if isinstance(turns, list) and turns:
                sessions.append((f"{item['sample_id']}-{key}", conv.get(f"{key}_date_time", ""), turns))
    folder.mkdir(parents=True, exist_ok=True)
    files, size, volume = [], 0, 0
    while size < megabytes * 1_000_000:
        volume += 1
        per_paragraph = volume + 1  # each volume groups the turns differently
        for name, date, turns in sessions:
            lines = [f"# {name} (volume {volume})", "", f"Written {date}.", ""]
            for start in range(0, len(turns), per_paragraph):
                group = turns[start : start + per_paragraph]
                lines.append(" ".join(f"{t['speaker']} said: {t['text']}" for t in group))
                lines.append("")
            path = folder / f"v{volume:02d}-{name}.md"
            path.write_text("\n".join(lines), encoding="utf-8")
            files.append(path)
            size += path.stat().st_size
            if size >= megabytes * 1_000_000:
                break
    return files


def write_export(path: Path, count: int, base: list[Any]) -> None:
    """An export file of `count` distinct exchanges (bench/latency.py's synthetic ones)."""
    with path.open("w", encoding="utf-8") as out:
        for exchange in synthetic_exchanges(base, count):
            out.write(json.dumps({"kind": "exchange", **exchange.to_record()}, ensure_ascii=False) + "\n")


def run_cli(args: list[str], home: Path, store: Path, model: Path, checkout: Path | None) -> dict[str, Any]:
    """Run ocat once on a fresh store; wall seconds, peak RSS (MiB) and its JSON result."""
    env = {**os.environ, **ocat_env(home, store, model, checkout)}
    command = [*ocat_command(), *args, "--output", "json"]
    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    out, err = child.stdout.read(), child.stderr.read()  # type: ignore[union-attr]
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"ingest: {' '.join(command)} failed: {err}")
    return {"seconds": seconds, "peak_rss_mib": usage.ru_maxrss // 1024, "result": json.loads(out)["result"]}


def raw_embed(texts: list[str], model: Path) -> float:
    """Seconds the model alone takes to embed the texts (loaded and warmed first)."""
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder

    embedder = OnnxMiniLMEmbedder(model, threads=threads())  # as the CLI's runs, on embedding.threads
    embedder.embed(["warm up"])
    started = time.perf_counter()
    embedder.embed(texts)
    return time.perf_counter() - started


def prose_chunks(files: list[Path]) -> list[str]:
    """The chunk texts `--add-to-vector-store` makes of the files (a folder of them) with the default
    config: a knowledge folder's markdown is split at its headings (`folder_file_chunks`)."""
    from ocat.config.loading import load_settings
    from ocat.memory.ingest.folders import folder_file_chunks

    options = load_settings(env={}).chunking
    texts = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        texts.extend(c.text for c in folder_file_chunks(path.parent, path, text, options, source="cli"))
    return texts


def child_import(path: Path, store: Path, count: int) -> None:
    """(In a child process) import `path` into a fresh store with synthetic vectors; print peak RSS."""
    from ocat.memory import MemoryStore, StoreLocation
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder
    from ocat.memory.storage.export_import import import_memory

    base = [e for c in load_conversations(DEFAULT_DATA) for e in c.exchanges]
    real = OnnxMiniLMEmbedder(DEFAULT_MODEL)
    embedder = synthetic_embedder(base, count, real, path.parent / "dev-halves.json")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    store_ = MemoryStore.open(StoreLocation(path=store), embedder, name="default")
    started = time.perf_counter()
    result = import_memory(store_, path)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(json.dumps({"added": result.added, "seconds": round(seconds, 1), "rss_before_import_mib": before, "peak_rss_mib": after}))


def rss_only(sizes: list[int], scratch: Path, base: list[Any]) -> dict[str, Any]:
    """Peak RSS of synthetic-vector imports of each size, each in its own process."""
    report = {}
    for size in sizes:
        export = scratch / f"export-{size}.jsonl"
        write_export(export, size, base)
        done = subprocess.run(
            [sys.executable, __file__, "--child-import", str(export), str(scratch / f"store-{size}"), str(size)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"ingest: the import of {size} failed: {done.stderr}")
        report[size] = {"file_mb": round(export.stat().st_size / 1e6, 1), **json.loads(done.stdout.strip().splitlines()[-1])}
        print(f"import {size} exchanges ({report[size]['file_mb']} MB file): {report[size]}", flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    """Run the ingest benchmarks and print chunks/s and exchanges/s against the raw model."""
    if argv is None and len(sys.argv) == 5 and sys.argv[1] == "--child-import":
        child_import(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prose-mb", type=float, default=1.0, help="megabytes of Markdown to add (default 1; 0 skips)")
    parser.add_argument("--import-exchanges", type=int, nargs="+", default=[10_000], help="exchanges to import (0 skips)")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--rss-only", action="store_true", help="only the import's peak RSS, with synthetic vectors")
    parser.add_argument("--checkout", type=Path, help="run ocat (the CLI and the raw model) from this source tree")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    if args.checkout:
        sys.path.insert(0, str(args.checkout.resolve()))  # before anything imports ocat

    base = [e for c in load_conversations(DEFAULT_DATA) for e in c.exchanges]
    report: dict[str, Any] = {"loadavg_start": _load()}
    with tempfile.TemporaryDirectory(prefix="ocat-ingest-") as scratch_name:
        scratch = Path(scratch_name)
        if args.rss_only:
            report["import_rss"] = rss_only(args.import_exchanges, scratch, base)
            report["loadavg_end"] = _load()
            if args.json:
                print(json.dumps(report, indent=2))
            return 0
        if args.prose_mb > 0:
            report["add"] = bench_add(args, scratch)
            _show("add", report["add"], args.json)
        for count in (c for c in args.import_exchanges if c > 0):
            report[f"import {count}"] = bench_import(args, scratch, base, count)
            _show(f"import {count}", report[f"import {count}"], args.json)
    report["loadavg_end"] = _load()
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


def bench_add(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    """--add-to-vector-store on the prose folder against the raw model on the same chunks."""
    files = write_prose(scratch / "prose", args.prose_mb, DEFAULT_DATA)
    chunks = prose_chunks(files)
    megabytes = sum(f.stat().st_size for f in files) / 1e6
    raw = raw_embed(chunks, args.model)
    folder = scratch / "prose"
    cli = run_cli(["--add-to-vector-store", str(folder)], scratch / "home-add", scratch / "store-add", args.model, args.checkout)
    stored = cli["result"]["added_chunks"]
    assert stored == len(chunks), f"the CLI stored {stored} chunks, the bench made {len(chunks)}"
    return {
        "megabytes": round(megabytes, 2),
        "files": len(files),
        "chunks": len(chunks),
        "raw_chunks_per_s": round(len(chunks) / raw, 1),
        "cli_chunks_per_s": round(len(chunks) / cli["seconds"], 1),
        "cli_seconds": round(cli["seconds"], 1),
        "ratio": round(raw / cli["seconds"], 2),
        "cli_peak_rss_mib": cli["peak_rss_mib"],
    }


def bench_import(args: argparse.Namespace, scratch: Path, base: list[Any], count: int) -> dict[str, Any]:
    """--import-memory of `count` exchanges against the raw model on their texts and prompts."""
    export = scratch / f"export-{count}.jsonl"
    write_export(export, count, base)
    texts = [text for e in synthetic_exchanges(base, count) for text in (e.text, e.user_prompt)]
    raw = raw_embed(texts, args.model)
    cli = run_cli(
        ["--import-memory", str(export)], scratch / f"home-{count}", scratch / f"store-{count}", args.model, args.checkout
    )
    return {
        "exchanges": count,
        "raw_per_s": round(count / raw, 1),
        "cli_per_s": round(count / cli["seconds"], 1),
        "cli_seconds": round(cli["seconds"], 1),
        "ratio": round(raw / cli["seconds"], 2),
        "cli_peak_rss_mib": cli["peak_rss_mib"],
    }


def _show(label: str, entry: dict[str, Any], quiet: bool) -> None:
    if not quiet:
        print(f"{label}: " + ", ".join(f"{k} {v}" for k, v in entry.items()), flush=True)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    raise SystemExit(main())
