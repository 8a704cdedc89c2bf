"""tools/thrash/check.py on hand-made histories: every rule fires on its violation and on
nothing else (indeterminate writes and deletes, killed processes, reads during a write)."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.environ.get("TEST_SRCDIR", ""), "msgr", "tools", "thrash"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tools", "thrash"))
import check  # noqa: E402


class History:
    def __init__(self):
        self.lines = {}

    def op(self, c, op, oid, v, t0, t1=None, ok=True, err="", got=None, corrupt=None):
        f = self.lines.setdefault(c, [])
        f.append({"ev": "start", "c": c, "op": op, "oid": oid, "v": v, "size": 4096, "t": t0})
        if t1 is not None:
            e = {"ev": "end", "c": c, "op": op, "oid": oid, "v": v, "t": t1, "ok": ok}
            if err:
                e["err"] = err
            if got is not None:
                e["got"] = got
            if corrupt:
                e["corrupt"] = corrupt
            f.append(e)

    def violations(self, faults=()):
        d = tempfile.mkdtemp()
        for c, lines in self.lines.items():
            with open(os.path.join(d, f"history.{c}.jsonl"), "w") as fh:
                for l in lines:
                    fh.write(json.dumps(l) + "\n")
                fh.write('{"ev": "start", "c"')  # a torn last line
        with open(os.path.join(d, "faults.jsonl"), "w") as fh:
            for f in faults:
                fh.write(json.dumps(f) + "\n")
        ops, fl, torn = check.load(d)
        self.torn = torn
        return check.check(ops, fl)


S = 1_000_000_000


class CheckTest(unittest.TestCase):
    def test_valid_history_has_no_violation(self):
        h = History()
        h.op(0, "w", "a", 1, 1 * S, 2 * S)
        h.op(1, "r", "a", 0, 3 * S, 4 * S, got=1)
        h.op(0, "w", "a", 2, 5 * S, 9 * S, ok=False, err="DEADLINE_EXCEEDED: timed out")
        h.op(1, "r", "a", 0, 6 * S, 7 * S, got=1)   # indeterminate v2 not seen: fine
        h.op(1, "r", "a", 0, 8 * S, 10 * S, got=2)  # or seen: fine
        h.op(0, "w", "a", 3, 11 * S)                # killed mid-write
        h.op(0, "d", "a", 4, 12 * S, 13 * S)
        h.op(1, "r", "a", 0, 14 * S, 15 * S, got=0)  # deleted stays deleted
        h.op(1, "r", "b", 0, 14 * S, 15 * S, got=0)  # never written
        h.op(1, "r", "b", 0, 16 * S, 17 * S, ok=False, err="UNAVAILABLE: osd.1 down")
        self.assertEqual(h.violations(), [])
        self.assertEqual(h.torn, 2)

    def test_stale_read_is_a_violation_naming_versions_and_faults(self):
        h = History()
        h.op(0, "w", "a", 1, 1 * S, 2 * S)
        h.op(0, "w", "a", 2, 3 * S, 4 * S)
        h.op(1, "r", "a", 0, 5 * S, 6 * S, got=1)
        v = h.violations([{"t0": int(4.5 * S), "t1": 5 * S, "what": "kill -9 osd.1"}])
        self.assertEqual(len(v), 1)
        text = "\n".join(v[0])
        self.assertIn("read returned v1, older than v2 acknowledged before the read", text)
        self.assertIn("w v2 of a", text)
        self.assertIn("kill -9 osd.1", text)

    def test_lost_object_and_resurrected_delete_and_corruption(self):
        h = History()
        h.op(0, "w", "a", 1, 1 * S, 2 * S)
        h.op(1, "r", "a", 0, 3 * S, 4 * S, got=0)        # acked write lost
        h.op(0, "d", "b", 1, 1 * S, 2 * S)
        h.op(0, "w", "c", 1, 1 * S, 2 * S)
        h.op(0, "d", "c", 2, 3 * S, 4 * S)
        h.op(1, "r", "c", 0, 5 * S, 6 * S, got=1)        # deleted object came back
        h.op(1, "r", "d", 0, 5 * S, 6 * S, got=-1, corrupt="version 3: differs at 77")
        h.op(1, "r", "e", 0, 5 * S, 6 * S, got=9)        # a version nobody wrote
        h.op(0, "w", "f", 1, 7 * S, 8 * S, ok=False)     # failed without a reason
        found = ["\n".join(v) for v in h.violations()]
        self.assertEqual(len(found), 5, found)
        self.assertTrue(any("found no object, but v1 was acknowledged" in f for f in found))
        self.assertTrue(any("read returned v1, older than v2" in f for f in found))
        self.assertTrue(any("corrupt data (version 3: differs at 77)" in f for f in found))
        self.assertTrue(any("v9, which no write of this object made" in f for f in found))
        self.assertTrue(any("failed without saying why" in f for f in found))

    def test_a_read_cannot_see_a_write_that_began_after_it(self):
        h = History()
        h.op(1, "r", "a", 0, 1 * S, 2 * S, got=1)
        h.op(0, "w", "a", 1, 3 * S, 4 * S)
        self.assertIn("written only after the read ended", "\n".join(h.violations()[0]))


if __name__ == "__main__":
    unittest.main()
