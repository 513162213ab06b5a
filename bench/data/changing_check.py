"""Consistency checks for a changing-facts set (bench/data/changing-own, changing-own2), standard
library only. Each set's validate.py calls `main` with its folder and its namespace of ids.

    python3 validate.py                  # (in a set's folder) check its files
    python3 validate.py --determinism    # also rebuild into a temp dir and compare bytes
"""
import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

EX_FIELDS = ["kind", "exchange_id", "thread_id", "session_id", "user_prompt", "assistant_response",
             "timestamp", "prior_exchange_ids", "thread_session_id", "thread_continuation_seq"]
Q_FIELDS = ["id", "question", "kind", "facet", "targets", "target_keys", "superseded", "related",
            "note", "difficulty"]
OUTPUTS = ["exchanges.jsonl", "questions.json", "index.tsv"]


def main(HERE, namespace):
    """Check the set in folder `HERE`, whose ids come from `namespace`; exit 1 on any failure."""
    NS = uuid.uuid5(uuid.NAMESPACE_URL, namespace)
    errors = []

    def check(cond, msg):
        if not cond:
            errors.append(msg)

    exchanges = [json.loads(line) for line in open(HERE / "exchanges.jsonl", encoding="utf-8")]
    questions = json.load(open(HERE / "questions.json", encoding="utf-8"))
    rows = [line.rstrip("\n").split("\t") for line in open(HERE / "index.tsv", encoding="utf-8")][1:]

    # exchanges: structure, unique ids, ids derived from readable keys, sorted by time
    ids = [e["exchange_id"] for e in exchanges]
    check(len(ids) == len(set(ids)), "an exchange id repeats")
    for e in exchanges:
        check(list(e) == EX_FIELDS, f"{e.get('exchange_id')}: fields differ from the schema")
        check(e["kind"] == "exchange" and isinstance(e["timestamp"], float)
              and e["prior_exchange_ids"] == [] and isinstance(e["thread_continuation_seq"], int)
              and e["thread_session_id"] == f"{e['thread_id']}_{e['session_id']}",
              f"{e['exchange_id']}: bad field value")
    ts = [e["timestamp"] for e in exchanges]
    check(ts == sorted(ts), "exchanges.jsonl is not sorted by timestamp")
    check(len(rows) == len(exchanges), "index.tsv and exchanges.jsonl differ in length")
    key_to_id, id_to_ts = {}, {e["exchange_id"]: e["timestamp"] for e in exchanges}
    for row, e in zip(rows, exchanges):
        key = row[0]
        key_to_id[key] = row[1]
        check(row[1] == e["exchange_id"] == str(uuid.uuid5(NS, key)), f"{key}: id mismatch")
        check(e["thread_id"] == str(uuid.uuid5(NS, row[2])), f"{key}: thread id mismatch")
        check(e["session_id"] == str(uuid.uuid5(NS, f"{row[2]}-s{row[3]}")), f"{key}: session id mismatch")

    # questions
    qids = [q["id"] for q in questions]
    check(len(qids) == len(set(qids)), "a question id repeats")
    for q in questions:
        qid = q["id"]
        check(list(q) == Q_FIELDS, f"{qid}: fields differ from the schema")
        for field in ("targets", "superseded", "related"):
            for x in q[field]:
                check(x in id_to_ts, f"{qid}: {field} id {x} not in exchanges.jsonl")
        check([key_to_id.get(k) for k in q["target_keys"]] == q["targets"],
              f"{qid}: target_keys do not resolve to targets")
        if q["kind"] == "recall":
            check(q["facet"] in ("current", "history", "stable"), f"{qid}: bad facet")
            check(bool(q["targets"]), f"{qid}: recall question without targets")
            if q["facet"] == "current":
                check(bool(q["superseded"]), f"{qid}: current question without superseded")
                if q["superseded"] and q["targets"]:
                    newest_old = max(id_to_ts[x] for x in q["superseded"])
                    first_target = min(id_to_ts[x] for x in q["targets"])
                    check(newest_old < first_target,
                          f"{qid}: a superseded exchange is not older than the current target")
            else:
                check(not q["superseded"], f"{qid}: superseded outside facet current")
        else:
            check(q["kind"] in ("offtopic", "near") and q["facet"] is None,
                  f"{qid}: bad kind/facet")
            check(not q["targets"] and not q["target_keys"] and not q["superseded"],
                  f"{qid}: offtopic/near question with targets or superseded")
        sets = [set(q["targets"]), set(q["superseded"]), set(q["related"])]
        check(not (sets[0] & sets[1] or sets[0] & sets[2] or sets[1] & sets[2]),
              f"{qid}: an exchange is in two of targets/superseded/related")

    # determinism: rebuild twice into temp dirs and compare with the files here
    if "--determinism" in sys.argv:
        for _ in range(2):
            with tempfile.TemporaryDirectory() as tmp:
                subprocess.run([sys.executable, str(HERE / "make_set.py"), "--out", tmp],
                               check=True, stdout=subprocess.DEVNULL)
                for name in OUTPUTS:
                    check((Path(tmp) / name).read_bytes() == (HERE / name).read_bytes(),
                          f"{name}: rebuild is not byte-identical")

    if errors:
        print("\n".join("FAIL " + e for e in errors))
        sys.exit(1)
    print(f"OK: {len(exchanges)} exchanges, {len(questions)} questions"
          + (", rebuild byte-identical" if "--determinism" in sys.argv else ""))
