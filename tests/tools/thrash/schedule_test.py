"""tools/thrash/thrash.py's fault schedule: the same seed gives the same schedule (host faults
included), seeds differ, the schedules of runs without --hosts are those from before host
faults existed, --pool-size N > 1 overlaps faults but never takes more than N - 1 OSDs away
at once (--pool-size 1 keeps the old one-at-a-time timeline), and --dry-run prints it without
starting anything."""
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CANDIDATES = [os.path.join(os.environ.get("TEST_SRCDIR", ""), "msgr", "tools", "thrash"),
              os.path.join(HERE, "..", "..", "..", "tools", "thrash")]
THRASH_DIR = next(d for d in CANDIDATES if os.path.exists(os.path.join(d, "thrash.py")))
sys.path.insert(0, THRASH_DIR)
import thrash  # noqa: E402

HOST_KINDS = thrash.FAULT_KINDS + thrash.HOST_FAULT_KINDS


def dry_run(*args):
    r = subprocess.run([sys.executable, os.path.join(THRASH_DIR, "thrash.py"), "--dry-run",
                        *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout
    return r.stdout


class ScheduleTest(unittest.TestCase):
    def test_without_hosts_the_schedule_is_the_one_from_before_host_faults(self):
        # seed 1's first events as thrash.py drew them before --hosts existed (tools/test.sh
        # and earlier reports name seeds: they must keep meaning the same faults).
        got = [e[:4] for e in thrash.schedule(1, thrash.FAULT_KINDS, 3, 3, count=5)]
        self.assertEqual(got, [("stop_osd", 2, 3.47, 3.29), ("kill_mon", 0, 2.23, 2.35),
                               ("kill_client", 0, 0.83, 1.09), ("kill_client", 1, 2.63, 3.3),
                               ("kill_client", 1, 3.03, 1.69)])
        self.assertTrue(all(e[4] is None for e in thrash.schedule(1, thrash.FAULT_KINDS, 3, 3,
                                                                   count=500)))

    def test_hosts_schedule_is_pinned_and_the_same_for_the_same_seed(self):
        a = thrash.schedule(1, HOST_KINDS, 3, 3, count=2000)
        self.assertEqual(a, thrash.schedule(1, HOST_KINDS, 3, 3, count=2000))
        self.assertEqual(a[:6], [
            ("stop_osd", 2, 3.47, 3.29, None),
            ("kill_mon", 0, 2.23, 2.35, None),
            ("partition", 1, 1.47, 1.09, {"from": "mon"}),
            ("netem", 0, 4.48, 1.8, {"host": "mon", "delay_ms": 50, "loss_pct": 0}),
            ("netem", 1, 1.15, 1.08, {"host": "osd", "delay_ms": 1, "loss_pct": 2}),
            ("link_cut", 0, 5.7, 2.14, None)])
        self.assertNotEqual(a, thrash.schedule(2, HOST_KINDS, 3, 3, count=2000))

    def test_host_faults_are_well_formed(self):
        seen = set()
        for kind, target, hold, gap, extra in thrash.schedule(7, HOST_KINDS, 3, 3, count=3000):
            seen.add(kind if kind != "partition" else f"partition-{extra['from']}")
            if kind == "netem":
                seen.add(f"netem-{extra['host']}")
            self.assertTrue(1.0 <= gap <= 4.0)
            if kind in thrash.HOST_FAULT_KINDS:
                self.assertTrue(1.0 <= hold <= 6.0, hold)
                self.assertIn(target, range(3))
            if kind == "partition":
                self.assertIn(extra["from"], ("mon", "clients"))
            elif kind == "netem":
                self.assertIn(extra["delay_ms"], thrash.NETEM_DELAYS_MS)
                self.assertIn(extra["loss_pct"], thrash.NETEM_LOSS_PCT)
                self.assertIn(thrash.netem_host(target, extra), range(thrash.N_HOSTS))
            else:
                self.assertIsNone(extra)
        self.assertEqual(seen, (set(HOST_KINDS) - {"partition"})
                         | {"partition-mon", "partition-clients", "netem-osd", "netem-mon",
                            "netem-clients"})
        # osd.K on host 1+K, like tools/cluster.sh --hosts on five hosts; clients on host 4.
        self.assertEqual([thrash.osd_host(k) for k in range(3)], [1, 2, 3])
        self.assertNotIn(thrash.CLIENT_HOST, [thrash.MON_HOST] + [1, 2, 3])

    def test_dry_run_prints_the_same_schedule_for_the_same_seed(self):
        one = dry_run("--minutes", "3", "--seed", "1", "--hosts")
        self.assertEqual(one, dry_run("--minutes", "3", "--seed", "1", "--hosts"))
        lines = one.strip().split("\n")
        self.assertTrue(lines[0].startswith("thrash: seed 1: the schedule of 3.0 min"), lines[0])
        self.assertIn("SIGSTOP osd.2 for 3.47 s", lines[1])
        self.assertIn("partition: osd.1 (msgr-h2) and the monitor (msgr-h0) drop what they "
                      "send each other for 1.47 s", lines[3])
        self.assertIn("netem: the monitor's host msgr-h0 sends with 50 ms delay, no loss for "
                      "4.48 s (skipped where there is no sch_netem)", lines[4])
        self.assertIn("link cut: osd.0's host msgr-h1 loses its link (eth0 down) for 5.7 s",
                      lines[6])
        # The count line adds up the lines above it.
        events = lines[1:-1]
        self.assertRegex(lines[-1], rf"^thrash: {len(events)} faults in the schedule \(")
        for kind in HOST_KINDS:
            self.assertRegex(lines[-1], rf"{kind} [1-9]")
        self.assertNotEqual(one, dry_run("--minutes", "3", "--seed", "2", "--hosts"))
        plain = dry_run("--minutes", "3", "--seed", "1")
        self.assertNotIn("link cut", plain)
        self.assertNotIn("partition", plain)
        self.assertIn("kill -9 workload 0 (mid-op), restart after 0.83 s", plain.split("\n")[3])


    def test_pool_size_1_keeps_the_one_at_a_time_timeline(self):
        events = thrash.schedule(1, thrash.FAULT_KINDS, 3, 3, count=200)
        t, want = 2.0, []
        for ev in events:  # the timeline thrash.py had before --pool-size
            if t + ev[2] >= 180:
                break
            want.append((t, ev))
            t += ev[2] + ev[3]
        got = thrash.plan(events, 1, 3, 3)
        self.assertEqual([(t, ev) for t, ev, _ in got], want)
        self.assertEqual(thrash.n_osds(1), 3)

    def test_replicated_schedule_is_pinned_and_the_same_for_the_same_seed(self):
        self.assertEqual(thrash.n_osds(3), 4)
        a = thrash.schedule(1, thrash.FAULT_KINDS, 4, 3, count=2000)
        self.assertEqual(a, thrash.schedule(1, thrash.FAULT_KINDS, 4, 3, count=2000))
        self.assertEqual([e[:4] for e in a[:4]], [
            ("stop_osd", 0, 1.39, 2.49), ("kill_client", 1, 2.78, 3.37),
            ("kill_osd", 3, 0.6, 3.51), ("kill_client", 2, 3.17, 1.01)])
        self.assertEqual(thrash.plan(a, 3, 4, 10), thrash.plan(a, 3, 4, 10))

    def check_limit(self, events, size, osds, minutes, kinds):
        """Replays plan(): at every start at most size - 1 OSDs are taken away (none twice),
        the monitor, a workload and the network have one fault at a time, faults start in
        order, each at least its gap after the previous one started. Returns how many
        starts had size - 1 OSDs away."""
        timeline = thrash.plan(events, size, osds, minutes)
        self.assertTrue(timeline)
        self.assertEqual([ev for _, ev, _ in timeline], events[:len(timeline)])  # in order
        running, full, prev = [], 0, None  # (end, osds, holds)
        for t, ev, down in timeline:
            kind, target, hold, gap, _ = ev
            self.assertIn(kind, kinds)
            if prev is not None:
                self.assertGreaterEqual(t, prev[0] + prev[1][3] - 1e-9)
            running = [r for r in running if r[0] > t]
            mine = thrash.fault_osds(kind, target, osds)
            taken = frozenset().union(*(r[1] for r in running))
            self.assertFalse(mine & taken, (t, ev, taken))
            self.assertNotIn(thrash.fault_holds(kind, target), [r[2] for r in running])
            self.assertEqual(down, taken | mine)
            self.assertLessEqual(len(down), size - 1, (t, ev, down))
            full += len(down) == size - 1
            running.append((t + hold, mine, thrash.fault_holds(kind, target)))
            prev = (t, ev)
        return full

    def test_replicated_schedule_takes_at_most_size_minus_1_osds_away(self):
        kinds = thrash.FAULT_KINDS + ["out_in"]
        for seed in range(1, 6):
            for size in (2, 3, 4):
                events = thrash.schedule(seed, kinds, 4, 3, count=3000)
                full = self.check_limit(events, size, 4, 30, kinds)
                if size == 3:  # two OSDs away at once happens (faults overlap)
                    self.assertGreater(full, 0, seed)
        # host faults: a link cut or partition takes every OSD of its host away (osd.0 and
        # osd.3 share msgr-h1 with four OSDs on three OSD hosts).
        self.assertEqual(thrash.fault_osds("link_cut", 3, 4), frozenset([0, 3]))
        self.assertEqual(thrash.fault_osds("netem", 3, 4), frozenset())
        events = thrash.schedule(2, HOST_KINDS, 4, 3, count=3000)
        self.check_limit(events, 3, 4, 30, HOST_KINDS)

    def test_dry_run_with_pool_size(self):
        one = dry_run("--minutes", "3", "--seed", "1", "--pool-size", "3")
        self.assertEqual(one, dry_run("--minutes", "3", "--seed", "1", "--pool-size", "3"))
        lines = one.strip().split("\n")
        self.assertIn("pool size 3 (4 OSDs, at most 2 taken away at once, faults overlap)",
                      lines[0])
        self.assertIn("SIGSTOP osd.0 for 1.39 s [taken away now: osd.0]", lines[1])
        self.assertRegex(one, r"\[taken away now: osd\.\d, osd\.\d\]")
        self.assertNotRegex(one, r"\[taken away now: osd\.\d, osd\.\d, ")
        self.assertRegex(lines[-1], rf"^thrash: {len(lines) - 2} faults in the schedule \(")
        r = subprocess.run([sys.executable, os.path.join(THRASH_DIR, "thrash.py"), "--dry-run",
                            "--minutes", "1", "--seed", "1", "--pool-size", "5"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--pool-size takes 1..4", r.stdout)


if __name__ == "__main__":
    unittest.main()
