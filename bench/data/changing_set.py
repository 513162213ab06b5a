"""Build a changing-facts set (bench/data/changing-own, changing-own2): exchanges.jsonl,
questions.json and index.tsv, from its conversations/*.txt and questions.py. Each set's
make_set.py calls `main` with its folder, its namespace of ids and its time zone.
Standard library only; deterministic: every run gives byte-identical output.

    python3 make_set.py              # (in a set's folder) write the three files there
    python3 make_set.py --out DIR    # write them into DIR instead (used by validate.py)

Source format
    # comment lines (only before the first THREAD marker of a file)
    === THREAD t04
    title: ...
    date: 2025-01-22
    --- e01 20:15            exchange 1 of the thread, in the set's local time
    >>> user
    ...
    >>> assistant
    ...
    === SESSION 2025-04-22   the thread is resumed on a later day (thread_continuation_seq + 1)
    --- e04 19:30
    ...
"""

import argparse
import importlib.util
import json
import re
import sys
import uuid
from datetime import date, datetime, timedelta
from pathlib import Path

# The set being built: its folder and its namespace of ids (set by `main`).
HERE = Path(".")
NS = uuid.NAMESPACE_URL
TO_UNIX = None

THREAD_RE = re.compile(r"^=== THREAD (t\d\d)$")
SESSION_RE = re.compile(r"^=== SESSION (\d{4}-\d\d-\d\d)$")
EXCHANGE_RE = re.compile(r"^--- e(\d\d) (\d\d):(\d\d)$")
ROLE_RE = re.compile(r"^>>> (user|assistant)$")
KEY_RE = re.compile(r"^t\d\d-e\d\d$")

FACETS = {"current", "history", "stable"}
DIFFICULTIES = {"easy", "medium", "hard"}


def die(msg):
    sys.exit(f"make_set.py ({HERE.name}): " + msg)


def uid(name):
    return str(uuid.uuid5(NS, name))


# ---------------------------------------------------------------------------------------
# Europe/London local time -> unix seconds, without tzdata.
# GMT (UTC+0) in winter; BST (UTC+1) from the last Sunday of March 01:00 UTC to the last
# Sunday of October 01:00 UTC.
# ---------------------------------------------------------------------------------------
def _last_sunday(year, month):
    d = date(year, month + 1, 1) - timedelta(days=1) if month < 12 else date(year, 12, 31)
    return d - timedelta(days=(d.weekday() - 6) % 7)


def london_to_unix(local):
    """Naive Europe/London wall-clock datetime -> unix seconds."""
    start = datetime.combine(_last_sunday(local.year, 3), datetime.min.time()) + timedelta(hours=1)
    end = datetime.combine(_last_sunday(local.year, 10), datetime.min.time()) + timedelta(hours=1)
    # start/end: the switch instants in UTC (01:00 UTC). In local time, 01:00-01:59 on the
    # March switch day does not exist; BST runs from 02:00 local that day until 02:00 local
    # (BST) on the October switch day.
    if start <= local < start + timedelta(hours=1):
        die(f"{local} does not exist in Europe/London (clocks go forward)")
    bst = start + timedelta(hours=1) <= local < end + timedelta(hours=1)
    utc = local - timedelta(hours=1) if bst else local
    return (utc - datetime(1970, 1, 1)).total_seconds()


# ---------------------------------------------------------------------------------------
# America/Toronto (= Montreal) local time -> unix seconds, without tzdata.
# EST (UTC-5) in winter; EDT (UTC-4) from the second Sunday of March 02:00 local (07:00 UTC)
# to the first Sunday of November 02:00 local EDT (06:00 UTC).
# ---------------------------------------------------------------------------------------
def _nth_sunday(year, month, n):
    d = date(year, month, 1)
    first = d + timedelta(days=(6 - d.weekday()) % 7)
    return first + timedelta(weeks=n - 1)


def montreal_to_unix(local):
    """Naive America/Toronto wall-clock datetime -> unix seconds."""
    start = datetime.combine(_nth_sunday(local.year, 3, 2), datetime.min.time()) + timedelta(hours=2)
    end = datetime.combine(_nth_sunday(local.year, 11, 1), datetime.min.time()) + timedelta(hours=2)
    # start/end: the switch instants in local wall-clock time. 02:00-02:59 on the March switch
    # day does not exist; 01:00-01:59 on the November switch day happens twice (both refused).
    if start <= local < start + timedelta(hours=1):
        die(f"{local} does not exist in America/Toronto (clocks go forward)")
    if end - timedelta(hours=1) <= local < end:
        die(f"{local} is ambiguous in America/Toronto (clocks go back)")
    edt = start + timedelta(hours=1) <= local < end
    utc = local + timedelta(hours=4 if edt else 5)
    return (utc - datetime(1970, 1, 1)).total_seconds()


ZONES = {"Europe/London": london_to_unix, "America/Toronto": montreal_to_unix}


# ---------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------
def clean(lines):
    lines = [ln.rstrip() for ln in lines]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def parse_sources(conv_dir):
    threads = []   # dicts: tid, title, date, sessions: [dicts: seq, date, exchanges: [...]]
    for path in sorted(conv_dir.glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        thread = session = ex = None
        role = None
        header = True      # between THREAD marker and first exchange (title:, date:)
        started = False    # seen the first THREAD marker in this file
        for lineno, raw in enumerate(text.split("\n"), 1):
            line = raw.rstrip("\r")
            where = f"{path.name}:{lineno}"
            if not started:
                if not line.strip() or line.startswith("#"):
                    continue
                if not THREAD_RE.match(line):
                    die(f"{where}: text before the first THREAD marker")
            m = THREAD_RE.match(line)
            if m:
                started = True
                thread = dict(tid=m.group(1), title=None, date=None, sessions=[], file=path.name)
                threads.append(thread)
                session = ex = role = None
                header = True
                continue
            m = SESSION_RE.match(line)
            if m:
                if thread is None or not thread["sessions"]:
                    die(f"{where}: SESSION before the thread's first exchange")
                session = dict(seq=len(thread["sessions"]), date=m.group(1), exchanges=[])
                thread["sessions"].append(session)
                ex = role = None
                continue
            m = EXCHANGE_RE.match(line)
            if m:
                if header:
                    if not thread["title"] or not thread["date"]:
                        die(f"{where}: thread {thread['tid']} lacks title: or date:")
                    header = False
                    session = dict(seq=0, date=thread["date"], exchanges=[])
                    thread["sessions"].append(session)
                ex = dict(num=int(m.group(1)), hh=int(m.group(2)), mm=int(m.group(3)),
                          user=[], assistant=[], seen=[], where=where)
                session["exchanges"].append(ex)
                role = None
                continue
            m = ROLE_RE.match(line)
            if m:
                if ex is None:
                    die(f"{where}: role marker outside an exchange")
                role = m.group(1)
                if role in ex["seen"]:
                    die(f"{where}: second '>>> {role}' in one exchange")
                ex["seen"].append(role)
                continue
            if header:
                if line.startswith("title: "):
                    thread["title"] = line[len("title: "):].strip()
                elif line.startswith("date: "):
                    thread["date"] = line[len("date: "):].strip()
                elif line.strip():
                    die(f"{where}: unexpected header line")
                continue
            if role is None:
                if line.strip():
                    die(f"{where}: text outside user/assistant blocks")
                continue
            ex[role].append(line)
    return threads


def build_exchanges(threads):
    out = []
    keys = set()
    prev_tnum = 0
    prev_tdate = ""
    for th in threads:
        tnum = int(th["tid"][1:])
        if tnum != prev_tnum + 1:
            die(f"thread {th['tid']} out of sequence (after t{prev_tnum:02d})")
        if th["date"] < prev_tdate:
            die(f"thread {th['tid']} starts before the previous thread")
        prev_tnum, prev_tdate = tnum, th["date"]
        thread_id = uid(th["tid"])
        expected = 1
        last_ts = None
        last_date = ""
        for ses in th["sessions"]:
            if ses["date"] < last_date or not ses["exchanges"]:
                die(f"{th['tid']} session {ses['seq']}: bad date or no exchanges")
            last_date = ses["date"]
            session_id = uid(f"{th['tid']}-s{ses['seq']}")
            y, mo, d = (int(x) for x in ses["date"].split("-"))
            for ex in ses["exchanges"]:
                if ex["num"] != expected:
                    die(f"{ex['where']}: expected e{expected:02d}")
                expected += 1
                key = f"{th['tid']}-e{ex['num']:02d}"
                if key in keys:
                    die(f"duplicate key {key}")
                keys.add(key)
                if ex["seen"] != ["user", "assistant"]:
                    die(f"{ex['where']}: needs '>>> user' then '>>> assistant'")
                user, assistant = clean(ex["user"]), clean(ex["assistant"])
                if not user or not assistant:
                    die(f"{ex['where']}: empty prompt or answer")
                local = datetime(y, mo, d, ex["hh"], ex["mm"])
                seconds = uuid.uuid5(NS, key + "#seconds").int % 60
                ts = TO_UNIX(local) + seconds
                if last_ts is not None and ts <= last_ts:
                    die(f"{ex['where']}: time not after the previous exchange of the thread")
                last_ts = ts
                out.append(dict(
                    key=key, thread=th["tid"], seq=ses["seq"], title=th["title"],
                    local=local.strftime("%Y-%m-%d %H:%M"),
                    record={
                        "kind": "exchange",
                        "exchange_id": uid(key),
                        "thread_id": thread_id,
                        "session_id": session_id,
                        "user_prompt": user,
                        "assistant_response": assistant,
                        "timestamp": float(ts),
                        "prior_exchange_ids": [],
                        "thread_session_id": f"{thread_id}_{session_id}",
                        "thread_continuation_seq": ses["seq"],
                    }))
    out.sort(key=lambda e: (e["record"]["timestamp"], e["key"]))
    stamps = [e["record"]["timestamp"] for e in out]
    if len(set(stamps)) != len(stamps):
        die("two exchanges share a timestamp")
    return out


# ---------------------------------------------------------------------------------------
# Questions
# ---------------------------------------------------------------------------------------
def load_questions(path):
    sys.dont_write_bytecode = True
    spec = importlib.util.spec_from_file_location("changing_set_questions", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.RECALL, mod.OFFTOPIC, mod.NEAR


def build_questions(recall, offtopic, near, key_to_id):
    """The questions.json entries of a set's RECALL, OFFTOPIC and NEAR lists (questions.py), checked.

    Fields (same meaning as in changing-dev's README)
      id          c = recall/current, h = recall/history, s = recall/stable, o = offtopic, n = near
      question    paraphrased, never copied from a prompt
      facet       recall only: current | history | stable; offtopic / near: no facet (null)
      targets     recall: every exchange that holds the answer
                  current: the exchange stating the newest value + later restatements of it
                  history: the exchange(s) holding the asked (older) version or the change/reason
                  offtopic / near: empty
      superseded  current only: every older exchange holding an outdated value of the same fact
      related     recall: partial answers / context; history: exchanges with the other versions;
                  near: the exchanges the question sits next to
      difficulty  easy | medium | hard
      note        expected answer (recall; for current also the older values) or why nothing
                  answers it (offtopic / near)
    """
    def ids(keys, qid, field):
        for k in keys:
            if not KEY_RE.match(k) or k not in key_to_id:
                die(f"{qid}: unknown key {k!r} in {field}")
        if len(set(keys)) != len(keys):
            die(f"{qid}: repeated key in {field}")
        return [key_to_id[k] for k in keys]

    def note_with_keys(note, superseded, related):
        parts = []
        if superseded:
            parts.append("superseded keys: " + ", ".join(superseded))
        if related:
            parts.append("related keys: " + ", ".join(related))
        if not parts:
            return note
        tail = "[" + "; ".join(parts) + "]"
        return f"{note} {tail}" if note else tail

    allowed = {"id", "question", "facet", "targets", "superseded", "related", "note", "difficulty"}
    out, seen = [], set()
    for kind, items in (("recall", recall), ("offtopic", offtopic), ("near", near)):
        for q in items:
            qid = q.get("id")
            extra = set(q) - allowed
            if extra:
                die(f"{qid}: unknown fields {sorted(extra)}")
            if not qid or qid in seen:
                die(f"missing or repeated question id {qid!r}")
            seen.add(qid)
            if q.get("difficulty") not in DIFFICULTIES:
                die(f"{qid}: bad difficulty")
            targets = list(q.get("targets", []))
            superseded = list(q.get("superseded", []))
            related = list(q.get("related", []))
            if kind == "recall":
                facet = q.get("facet")
                if facet not in FACETS:
                    die(f"{qid}: bad facet {facet!r}")
                if qid[0] != facet[0]:
                    die(f"{qid}: id prefix does not match facet {facet}")
                if not targets:
                    die(f"{qid}: recall question without targets")
                if superseded and facet != "current":
                    die(f"{qid}: only current questions have superseded")
            else:
                facet = None
                if q.get("facet") is not None or targets or superseded:
                    die(f"{qid}: {kind} questions have no facet, targets or superseded")
                if qid[0] != kind[0]:
                    die(f"{qid}: id prefix does not match kind {kind}")
            overlap = (set(targets) & set(superseded)) | (set(targets) & set(related)) \
                | (set(superseded) & set(related))
            if overlap:
                die(f"{qid}: key in two lists: {sorted(overlap)}")
            out.append({
                "id": qid,
                "question": q["question"],
                "kind": kind,
                "facet": facet,
                "targets": ids(targets, qid, "targets"),
                "target_keys": targets,
                "superseded": ids(superseded, qid, "superseded"),
                "related": ids(related, qid, "related"),
                "note": note_with_keys(q.get("note", ""), superseded, related),
                "difficulty": q["difficulty"],
            })
    return out


# ---------------------------------------------------------------------------------------
def preview(text, width=90):
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 3] + "..."


def main(folder, namespace, zone):
    """Build the set in `folder`: its ids from `namespace`, its times read in `zone`."""
    global HERE, NS, TO_UNIX
    HERE, NS, TO_UNIX = folder, uuid.uuid5(uuid.NAMESPACE_URL, namespace), ZONES[zone]
    ap = argparse.ArgumentParser(description=f"Build exchanges.jsonl, questions.json and index.tsv for {folder.name}.")
    ap.add_argument("--out", type=Path, default=HERE, help="output directory (default: here)")
    args = ap.parse_args()

    exchanges = build_exchanges(parse_sources(HERE / "conversations"))
    key_to_id = {e["key"]: e["record"]["exchange_id"] for e in exchanges}
    questions = build_questions(*load_questions(HERE / "questions.py"), key_to_id)

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "exchanges.jsonl", "w", encoding="utf-8", newline="\n") as f:
        for e in exchanges:
            f.write(json.dumps(e["record"], ensure_ascii=False) + "\n")
    with open(out / "questions.json", "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(questions, ensure_ascii=False, indent=2) + "\n")
    with open(out / "index.tsv", "w", encoding="utf-8", newline="\n") as f:
        f.write("key\texchange_id\tthread\tseq\tlocal_time\tthread_title\tuser_prompt_preview\n")
        for e in exchanges:
            row = [e["key"], e["record"]["exchange_id"], e["thread"], str(e["seq"]), e["local"],
                   e["title"], preview(e["record"]["user_prompt"])]
            f.write("\t".join(row) + "\n")

    n_threads = len({e["thread"] for e in exchanges})
    n_sessions = len({e["record"]["session_id"] for e in exchanges})
    print(f"{len(exchanges)} exchanges, {n_threads} threads, {n_sessions} sessions, "
          f"{len(questions)} questions -> {out}")

