#!/usr/bin/env python3
"""The thrasher's checker: proves from the recorded history that nothing acknowledged was lost.

  tools/thrash/check.py RUN_DIR

RUN_DIR holds history.*.jsonl (client/thrash/history.h: one start and one end line per op;
writers own their objects, so an object's writes and deletes are ordered by version) and
faults.jsonl (the thrasher's events). The rules, per object:

  * a read that returned version g (> 0) is valid iff g was written by a write that began
    before the read ended, g's bytes were intact, and g >= a, where a is the newest version
    acknowledged (write or delete ended ok) before the read began;
  * a read that found no object is valid iff a == 0 (nothing acknowledged yet), or some
    delete of version >= a began before the read ended (a deleted object stays deleted);
  * an op that failed must say why (a non-empty error); a write or delete that failed, timed
    out or never ended (its process was killed) is indeterminate: it may or may not be there.

Each violation prints the object, the versions involved and the fault events around it.
The last line is `violations: N`. Exit status: 0 none, 1 some, 2 bad input.
"""
import glob
import json
import os
import sys

AROUND_NS = 5_000_000_000  # faults this close to an op are printed with its violation


def load(run_dir):
    """(ops, faults): ops as dicts with kind, oid, v, t0, t1 (None: never ended), ok, ..."""
    ops, open_ops, bad_lines = [], {}, 0
    for path in sorted(glob.glob(os.path.join(run_dir, "history.*.jsonl"))):
        with open(path) as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    e = json.loads(line)
                except json.JSONDecodeError:
                    bad_lines += 1  # a torn last line of a killed process
                    continue
                key = (path, e.get("c"), e.get("op"), e.get("oid"), e.get("v"))
                if e.get("ev") == "start":
                    op = {"kind": e["op"], "oid": e["oid"], "v": e.get("v", 0), "t0": e["t"],
                          "t1": None, "ok": None, "client": e.get("c"), "file": path,
                          "size": e.get("size")}
                    # A read has v 0 in both lines; one process runs one op at a time, so a
                    # start closes nothing and an end matches the open op with that key.
                    open_ops[key] = op
                    ops.append(op)
                elif e.get("ev") == "end":
                    op = open_ops.pop(key, None)
                    if op is None:
                        bad_lines += 1
                        continue
                    op.update(t1=e["t"], ok=e.get("ok"), err=e.get("err", ""),
                              got=e.get("got"), corrupt=e.get("corrupt"))
    faults = []
    fpath = os.path.join(run_dir, "faults.jsonl")
    if os.path.exists(fpath):
        with open(fpath) as fh:
            for line in fh:
                if line.strip():
                    faults.append(json.loads(line))
    return ops, faults, bad_lines


def fmt_t(ns, t_base):
    return f"{(ns - t_base) / 1e9:.3f}s"


def check(ops, faults):
    """Returns the list of violation texts."""
    if not ops:
        return []
    t_base = min(op["t0"] for op in ops)
    mutations = {}  # oid -> ops of kind w/d
    for op in ops:
        if op["kind"] in ("w", "d"):
            mutations.setdefault(op["oid"], []).append(op)
    violations = []

    def around(op):
        lo = op["t0"] - AROUND_NS
        hi = (op["t1"] or op["t0"]) + AROUND_NS
        out = [f"    fault at {fmt_t(f['t0'], t_base)}: {f['what']}" for f in faults
               if f["t0"] <= hi and f.get("t1", f["t0"]) >= lo]
        return out or ["    (no fault within 5 s)"]

    def describe(op):
        end = fmt_t(op["t1"], t_base) if op["t1"] is not None else "never"
        state = "ok" if op["ok"] else ("failed: " + (op.get("err") or "?") if op["ok"] is False
                                       else "indeterminate")
        return (f"{op['kind']} v{op['v']} of {op['oid']} by client {op['client']} "
                f"[{fmt_t(op['t0'], t_base)} .. {end}] {state}")

    for op in ops:
        if op["t1"] is not None and op["ok"] is False and not op.get("err"):
            violations.append([f"op failed without saying why: {describe(op)}"] + around(op))
        if op["kind"] != "r" or op["t1"] is None or not op["ok"]:
            continue
        muts = mutations.get(op["oid"], [])
        acked = [m["v"] for m in muts if m["ok"] and m["t1"] is not None and m["t1"] < op["t0"]]
        a = max(acked, default=0)
        got = op.get("got")
        problem = None
        if op.get("corrupt"):
            problem = f"read returned corrupt data ({op['corrupt']})"
        elif got is None or got < 0:
            problem = "read result missing"
        elif got > 0:
            w = [m for m in muts if m["kind"] == "w" and m["v"] == got]
            if not w:
                problem = f"read returned v{got}, which no write of this object made"
            elif w[0]["t0"] > op["t1"]:
                problem = f"read returned v{got}, written only after the read ended"
            elif got < a:
                problem = f"read returned v{got}, older than v{a} acknowledged before the read"
        else:  # no such object
            deletes = [m for m in muts if m["kind"] == "d" and m["v"] >= a and m["t0"] < op["t1"]]
            if a > 0 and not deletes:
                problem = f"read found no object, but v{a} was acknowledged before the read"
        if problem:
            lines = [f"{op['oid']}: {problem}", f"  the read: {describe(op)}"]
            for m in sorted(muts, key=lambda m: m["v"]):
                if m["v"] >= min(a, got or a) - 2 and m["t0"] < (op["t1"] or op["t0"]) + AROUND_NS:
                    lines.append(f"  {describe(m)}")
            violations.append(lines + around(op))
    return violations


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(__doc__, file=sys.stderr)
        return 2
    ops, faults, bad_lines = load(argv[1])
    reads = [o for o in ops if o["kind"] == "r" and o["ok"]]
    acked = [o for o in ops if o["kind"] != "r" and o["ok"]]
    failed = [o for o in ops if o["ok"] is False]
    unended = [o for o in ops if o["t1"] is None]
    violations = check(ops, faults)
    for v in violations:
        print("VIOLATION " + "\n".join(v))
    print(f"ops: {len(ops)} ({len(acked)} writes/deletes acknowledged, {len(reads)} reads "
          f"checked, {len(failed)} failed with a reason, {len(unended)} never ended: their "
          f"process was killed), faults: {len(faults)}, torn lines: {bad_lines}")
    print(f"violations: {len(violations)}")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
