"""History import throughput: `ocat --import-history` of a generated ChatGPT export against the raw model.

The export is written here (made-up conversations in the ChatGPT format, as downloaded: a zip
holding conversations.json, indented as the real one), about `--mb` megabytes of it. The CLI
imports it in a fresh process on a fresh store; the raw figure is the embedding model alone
on the same texts (each exchange's text and its prompt, as the store embeds both). Reported:
exchanges/s of each, their ratio, and the CLI's peak RSS; and what taking secrets out
(`memory.secrets`, issue 47) costs of it: the store's pass over the same rows, timed alone,
as a share of the import's time.

    python bench/import_history.py              # 50 MB
    python bench/import_history.py --mb 5       # a quick look
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from ingest import raw_embed, run_cli  # noqa: E402

DEFAULT_MODEL = REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2-int8"
WORDS = (
    "kitchen budget quartz cabinet joiner tile grey oak paint window garden fence ferry harbour "
    "lisbon porto tram sintra pastry sardine parser lifetime borrow crate lexer token grammar "
    "invoice ledger postgres backup index query cache latency deploy staging release rollback"
).split()


def conversation(n: int, rng: random.Random) -> dict[str, Any]:
    """One made-up ChatGPT conversation: a linear path of 2 to 12 user/assistant turns."""
    created = 1_700_000_000.0 + n * 3600
    mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    parent = "root"
    for t in range(rng.randint(1, 6)):
        for role in ("user", "assistant"):
            node = f"c{n}-{t}-{role}"
            length = rng.randint(8, 40) if role == "user" else rng.randint(150, 900)
            text = " ".join(rng.choice(WORDS) for _ in range(length))
            mapping[node] = {
                "id": node, "parent": parent, "children": [],
                "message": {
                    "id": node, "author": {"role": role}, "create_time": created + t * 60,
                    "content": {"content_type": "text", "parts": [text]}, "metadata": {},
                },
            }
            mapping[parent]["children"].append(node)
            parent = node
    return {"id": f"conv-{n}", "title": f"Chat {n}", "create_time": created, "update_time": created,
            "mapping": mapping, "current_node": parent}


def write_export(path: Path, megabytes: float, seed: int = 7) -> tuple[list[str], list[str]]:
    """A zip holding conversations.json of about `megabytes`; returns the exchanges' texts and prompts."""
    rng = random.Random(seed)
    target = int(megabytes * 1_000_000)
    texts: list[str] = []
    prompts: list[str] = []
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("conversations.json", "w") as raw:
            raw.write(b"[\n")
            written, n = 2, 0
            while written < target:
                item = conversation(n, rng)
                data = (b",\n" if n else b"") + json.dumps(item, indent=2).encode()
                raw.write(data)
                written += len(data)
                nodes = [m["message"] for m in item["mapping"].values() if m["message"]]
                for user, answer in zip(nodes[::2], nodes[1::2]):
                    prompt, reply = user["content"]["parts"][0], answer["content"]["parts"][0]
                    prompts.append(prompt)
                    texts.append(f"User: {prompt}\nAssistant: {reply}")
                n += 1
            raw.write(b"\n]\n")
    return texts, prompts


def redaction_seconds(texts: list[str], prompts: list[str]) -> float:
    """Seconds the store's redaction takes over the import's rows (as storage.writes runs it)."""
    from ocat.memory.storage.redaction import kept_rows

    rows = [(str(i), text, {"user_prompt": prompt, "assistant_response": text[len(prompt) + 18:]})
            for i, (text, prompt) in enumerate(zip(texts, prompts))]
    kept_rows("redact", "exchange", rows[:1])  # detect-secrets is imported on the first scan
    started = time.perf_counter()
    for start in range(0, len(rows), 256):
        kept_rows("redact", "exchange", rows[start : start + 256])
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    """Generate the export, import it with the CLI, embed its texts with the raw model; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0, help="size of conversations.json, in MB")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ocat-import-history-") as folder:
        scratch = Path(folder)
        export = scratch / "chatgpt-export.zip"
        texts, prompts = write_export(export, args.mb)
        cli = run_cli(["--import-history", str(export)], scratch / "home", scratch / "store", args.model, None)
        raw = raw_embed(texts + prompts, args.model)
    redacting = redaction_seconds(texts, prompts)
    count = len(texts)
    report = {
        "megabytes": args.mb,
        "zip_megabytes": round(export.stat().st_size / 1e6, 1) if export.exists() else None,
        "conversations": cli["result"]["conversations"],
        "exchanges": count,
        "cli_seconds": round(cli["seconds"], 1),
        "cli_per_s": round(count / cli["seconds"], 1),
        "raw_per_s": round(count / raw, 1),
        "ratio": round(raw / cli["seconds"], 2),
        "peak_rss_mib": cli["peak_rss_mib"],
        "redaction_seconds": round(redacting, 2),
        "redaction_share": round(redacting / cli["seconds"], 4),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{args.mb:g} MB ChatGPT export: {report['conversations']:,} conversations, {count:,} exchanges")
        print(f"  ocat --import-history  {report['cli_per_s']:>7} exchanges/s  ({report['cli_seconds']} s, "
              f"peak RSS {report['peak_rss_mib']} MiB)")
        print(f"  raw model              {report['raw_per_s']:>7} exchanges/s (text and prompt of each)")
        print(f"  ratio                  {report['ratio']}x")
        print(f"  secrets taken out      {report['redaction_seconds']} s of it "
              f"({100 * report['redaction_share']:.1f}% of the import's time)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
