#!/usr/bin/env python3
"""The thrasher (run it as tools/thrash.sh): workloads under continuous faults, then a check.

Starts a durable 3-OSD cluster (tools/cluster.sh; 4 OSDs with --pool-size N > 1) and
--writers workload processes (//client/thrash:workload: writes, overwrites, reads and deletes
of 4 KiB..--max-size objects whose sizes change between versions), then for --minutes
injects faults drawn from --seed, one at a time (overlapping with --pool-size N > 1: see
below): kill -9 and restart of an OSD, SIGSTOP/SIGCONT of an OSD, kill -9 and restart of the
monitor, kill -9 of a workload process mid-op and its restart, and with --out-in also `monctl
out`/`in` of an OSD. The same seed gives the same schedule (kinds, targets, hold and gap
times). At the end every fault is healed, the workloads stop, every object is read once
more, and tools/thrash/check.py checks the history; its last line, `violations: N`, is the
run's last line. Everything runs on 127.0.0.1; every process it
started is stopped by pid.

--hosts: the run makes five test hosts (tools/hosts.sh: network namespaces msgr-h0..h4 on
one bridge; tcp only) and puts the monitor on host 0, osd.K on host 1+K and every workload
on host 4 (tools/cluster.sh --hosts). The schedule then also draws host faults: an OSD
host's link cut (eth0 down, then up), a partition (an OSD and the monitor, or an OSD and the
client host, drop what they send each other: blackhole routes) and netem delay/loss on one
host's link. netem needs sch_netem: where `tc qdisc add ... netem` fails, those events are
skipped with the reason printed (the schedule stays the seed's). The hosts, their links and
routes are the run's own and are removed at the end, also on an error, Ctrl-C or SIGTERM.
Without root (or with no `ip`) --hosts says why and runs on 127.0.0.1 without host faults.

--pool-size N (1..4): the cluster's default pool keeps N copies (tools/cluster.sh --pool-size
N, min_size N - N/2), on 4 OSDs when N > 1. Faults then overlap: each starts its gap after the
previous one started (at size 1, after it ended), but at most N - 1 OSDs are taken away at
once (killed, stopped, out, or on a host that is cut off or partitioned), never one OSD twice,
and the monitor, each workload and the network take one fault at a time; a fault that may not
start yet waits for one to end, and the faults after it wait behind it. A stopped OSD's fault
lasts until the map has it up again, a killed one's until it is restarted and up. At the end,
after the final read-back, every PG is waited for to be active and `msgr scrub` compares
every copy with the placement map: each missing or differing copy counts as a violation
(stray copies do not), added to the checker's in the last line `violations: N`; the line
before says how many came from which. The OSDs' perf dumps and the scrub's output are left in
the results folder (perf.osd.K.json, scrub.txt).

--dry-run prints the schedule for --minutes (each fault taking exactly its hold time) and
starts nothing.
"""
import argparse
import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "tools")
HOSTS_SH = os.path.join(TOOLS, "hosts.sh")

FAULT_KINDS = ["kill_osd", "stop_osd", "kill_mon", "kill_client"]
HOST_FAULT_KINDS = ["link_cut", "partition", "netem"]  # --hosts only
OSD_FAULT_KINDS = ["kill_osd", "stop_osd", "out_in"]  # each takes its OSD away while it lasts

# The test hosts of --hosts (tools/hosts.sh, tools/cluster.sh --hosts with five hosts).
N_HOSTS = 5
MON_HOST = 0
CLIENT_HOST = 4
NETEM_DELAYS_MS = [1, 5, 20, 50]
NETEM_LOSS_PCT = [0, 0.5, 2, 5]


def log(msg):
    print(f"thrash: {msg}", flush=True)


def schedule(seed, kinds, osds, writers, count=100000):
    """The seeded fault schedule: (kind, target, hold_s, gap_s, extra) tuples. extra is None
    but for host faults: partition {"from": "mon"|"clients"}, netem {"host": "osd"|"mon"|
    "clients", "delay_ms", "loss_pct"} (netem's target is an OSD when host is "osd").
    Draws for the kinds without --hosts are the same as before host faults existed, so a
    seed's schedule without --hosts did not change."""
    rng = random.Random(seed)
    events = []
    for _ in range(count):
        kind = rng.choice(kinds)
        extra = None
        if kind == "kill_client":
            target = rng.randrange(writers)
        elif kind == "netem":
            t = rng.randrange(osds + 2)  # an OSD's host, the monitor's or the clients'
            target = t if t < osds else 0
            extra = {"host": "osd" if t < osds else ("mon" if t == osds else "clients"),
                     "delay_ms": rng.choice(NETEM_DELAYS_MS),
                     "loss_pct": rng.choice(NETEM_LOSS_PCT)}
        else:
            target = rng.randrange(osds)
            if kind == "partition":
                extra = {"from": rng.choice(["mon", "clients"])}
        if kind in HOST_FAULT_KINDS:  # long enough, some of them, for the grace (2 s) to pass
            hold = round(rng.uniform(1.0, 6.0), 2)
        else:
            hold = round(rng.uniform(0.5, 4.0), 2)
        events.append((kind, target, hold, round(rng.uniform(1.0, 4.0), 2), extra))
    return events


def n_osds(pool_size):
    """The run's OSDs: 3 at size 1 (as always), 4 when replicated (a PG that loses a member
    still has min_size copies, and there is somewhere to go)."""
    return 3 if pool_size == 1 else 4


def fault_osds(kind, target, osds):
    """The OSDs a fault takes away while it lasts: killed, stopped, out, or (host faults) on
    a host that is cut off from the monitor or the clients. netem takes none away."""
    if kind in OSD_FAULT_KINDS:
        return frozenset([target])
    if kind in ("link_cut", "partition"):
        return frozenset(k for k in range(osds) if osd_host(k) == osd_host(target))
    return frozenset()


def fault_holds(kind, target):
    """What else a fault holds while it lasts (one fault at a time per thing): the monitor,
    a workload process, the test hosts' network (one host fault at a time), an OSD."""
    if kind == "kill_mon":
        return "mon"
    if kind == "kill_client":
        return f"workload.{target}"
    if kind in HOST_FAULT_KINDS:
        return "net"
    return f"osd.{target}"


class Limit:
    """Which faults may run at once. --pool-size 1: one fault at a time, whatever it is (the
    old behaviour: each fault starts its gap after the previous one ended). --pool-size N > 1:
    faults overlap (each starts its gap after the previous one started), but at most N - 1
    OSDs are taken away at once (fault_osds), no OSD twice, and one fault at a time holds the
    monitor, a workload, or the network (fault_holds). Faults start in the schedule's order:
    one that may not start yet waits, and the ones after it wait behind it."""

    def __init__(self, pool_size, osds):
        self.pool_size = pool_size
        self.osds = osds
        self.active = {}  # key -> (osds, holds)

    def down(self):
        return frozenset().union(*(o for o, _ in self.active.values()))

    def may_start(self, kind, target):
        if self.pool_size == 1:
            return not self.active
        osds = fault_osds(kind, target, self.osds)
        down = self.down()
        return (not (osds & down) and len(osds | down) <= self.pool_size - 1
                and fault_holds(kind, target) not in (h for _, h in self.active.values()))

    def start(self, key, kind, target):
        self.active[key] = (fault_osds(kind, target, self.osds), fault_holds(kind, target))

    def end(self, key):
        self.active.pop(key, None)


def plan(events, pool_size, osds, minutes, t=2.0):
    """The schedule's timeline with each fault taking exactly its hold time (what --dry-run
    prints; a real run's restarts take longer, so it reaches fewer faults): a list of (start
    time in s, event, OSDs taken away from then on, the fault's included). The first fault
    starts at 2 s, after the workloads' first ops."""
    limit, ends, out, end = Limit(pool_size, osds), {}, [], minutes * 60
    for i, ev in enumerate(events):
        kind, target, hold, gap, _extra = ev
        for k in [k for k, e in ends.items() if e <= t]:
            limit.end(k)
            del ends[k]
        while not limit.may_start(kind, target):  # the next fault to end frees a slot
            t = max(t, min(ends.values()))
            for k in [k for k, e in ends.items() if e <= t]:
                limit.end(k)
                del ends[k]
        if t + hold >= end:
            break
        limit.start(i, kind, target)
        ends[i] = t + hold
        out.append((t, ev, limit.down()))
        t += gap if pool_size > 1 else hold + gap
    return out


def host_name(k):
    return f"msgr-h{k}"


def osd_host(k):
    """The test host of osd.K (tools/cluster.sh --hosts with N_HOSTS hosts: 1 + K mod 3)."""
    return 1 + k % (N_HOSTS - 2)


def netem_host(target, extra):
    return {"osd": osd_host(target), "mon": MON_HOST, "clients": CLIENT_HOST}[extra["host"]]


def describe(kind, target, hold, extra):
    """What the fault does, as logged (and as --dry-run prints it)."""
    if kind == "kill_osd":
        return f"kill -9 osd.{target}, restart after {hold} s"
    if kind == "stop_osd":
        return f"SIGSTOP osd.{target} for {hold} s"
    if kind == "kill_mon":
        return f"kill -9 the monitor, restart after {hold} s"
    if kind == "kill_client":
        return f"kill -9 workload {target} (mid-op), restart after {hold} s"
    if kind == "out_in":
        return f"monctl out {target}, in after {hold} s"
    h = osd_host(target)
    if kind == "link_cut":
        return (f"link cut: osd.{target}'s host {host_name(h)} loses its link (eth0 down) "
                f"for {hold} s")
    if kind == "partition":
        if extra["from"] == "mon":
            return (f"partition: osd.{target} ({host_name(h)}) and the monitor "
                    f"({host_name(MON_HOST)}) drop what they send each other for {hold} s; "
                    f"the clients still reach both")
        return (f"partition: osd.{target} ({host_name(h)}) and the client host "
                f"({host_name(CLIENT_HOST)}) drop what they send each other for {hold} s; "
                f"the monitor still reaches both")
    if kind == "netem":
        who = {"osd": f"osd.{target}'s host", "mon": "the monitor's host",
               "clients": "the client host"}[extra["host"]]
        loss = f"{extra['loss_pct']}% loss" if extra["loss_pct"] else "no loss"
        return (f"netem: {who} {host_name(netem_host(target, extra))} sends with "
                f"{extra['delay_ms']} ms delay, {loss} for {hold} s")
    raise ValueError(kind)


class Run:
    def __init__(self, a):
        self.a = a
        self.bin = os.environ.get("MSGR_BIN", os.path.join(ROOT, "bazel-bin"))
        # MSGR_HOSTS_PREFIX=msgr: tools/cluster.sh --hosts runs daemons in msgr-hK.
        self.env = dict(os.environ, MSGR_BIN=self.bin, MSGR_REBUILD="0",
                        MSGR_HOSTS_PREFIX="msgr")
        self.dir = a.cluster_dir
        self.out = a.out
        self.writers = {}  # k -> Popen
        self.faults = open(os.path.join(self.out, "faults.jsonl"), "a")
        self.t_start = time.monotonic()
        self.mon_addr = None
        self.hosts = False        # on test hosts (set by setup_hosts)
        self.hosts_made = False   # this run made them: it removes them
        self.addrs = {}           # test host -> its address
        self.netem_why = None     # why netem events are skipped (None: netem works)
        self.net_undo = []        # tools/hosts.sh commands undoing the network fault in place
        self.injected = collections.Counter()
        self.skipped = collections.Counter()
        self.osds = n_osds(a.pool_size)
        self.lock = threading.Lock()  # faults run on threads at --pool-size N > 1
        self.fault_error = None       # the first fault thread's error: the run stops on it
        self.scrub_problems = 0       # missing + differing copies (or 1: no scrub result)
        self.threads = []             # the fault threads (joined before the teardown)
        self.restart_retries = 0      # OSD restarts tried again (start_osd)

    # --- test hosts --------------------------------------------------------------------
    def hosts_sh(self, *args, check=True):
        r = subprocess.run(["bash", HOSTS_SH, *map(str, args)], env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"tools/hosts.sh {' '.join(map(str, args))} failed:\n{r.stdout}")
        return r

    def setup_hosts(self):
        """Makes the run's test hosts. Returns why there are none (the run then stays on
        127.0.0.1), or None."""
        if os.geteuid() != 0:
            return "needs root (network namespaces)"
        if shutil.which("ip") is None:
            return "needs iproute2's ip"
        there = self.hosts_sh("status").stdout.split("\n")
        there = [line.split()[0] for line in there if line.strip()]
        if there:
            raise RuntimeError(f"test hosts exist already ({' '.join(there)}): another run or "
                               "tests/tools/hosts_test.sh uses them; tools/hosts.sh stop removes "
                               "them if they are left over")
        r = self.hosts_sh("start", N_HOSTS, check=False)
        if r.returncode != 0:  # (hosts.sh removed what it had made)
            raise RuntimeError(f"tools/hosts.sh start {N_HOSTS} failed:\n{r.stdout}")
        self.hosts_made = True
        self.hosts = True
        self.addrs = {k: self.hosts_sh("addr", k).stdout.strip() for k in range(N_HOSTS)}
        # netem: tried once on the monitor's host, removed at once.
        r = subprocess.run(["ip", "netns", "exec", host_name(MON_HOST), "tc", "qdisc", "add",
                            "dev", "eth0", "root", "netem", "delay", "1ms"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode == 0:
            self.hosts_sh("exec", MON_HOST, "tc", "qdisc", "del", "dev", "eth0", "root")
        else:
            first = (r.stdout.strip().split("\n") or [""])[0]
            self.netem_why = (f"this kernel ({os.uname().release}) has no sch_netem: "
                              f"`tc qdisc add ... netem` says: {first}")
            log(f"netem events are skipped: {self.netem_why}")
        return None

    def on_client_host(self, argv):
        return ["ip", "netns", "exec", host_name(CLIENT_HOST), *argv] if self.hosts else argv

    def net_fault(self, do, undo):
        """Applies the tools/hosts.sh commands `do`; `undo` (run by net_heal) reverses them."""
        self.net_undo.extend(undo)  # first: a fault applied in part is undone too
        for cmd in do:
            self.hosts_sh(*cmd)

    def net_heal(self):
        """Undoes the network fault in place (an undo of what was never applied fails
        harmlessly)."""
        undo, self.net_undo = self.net_undo, []
        for cmd in undo:
            self.hosts_sh(*cmd, check=False)

    def remove_hosts(self):
        if self.hosts_made:
            r = self.hosts_sh("stop", check=False)
            if r.returncode != 0 or r.stdout.strip():
                log(f"tools/hosts.sh stop: {r.stdout.strip()}")
            self.hosts_made = False

    # --- cluster -----------------------------------------------------------------------
    def cluster(self, *args, check=True):
        r = subprocess.run(["bash", os.path.join(TOOLS, "cluster.sh"), *args,
                            "--cluster-dir", self.dir], env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"cluster.sh {' '.join(args)} failed:\n{r.stdout}")
        return r

    def monctl(self, *args, timeout=30):
        return subprocess.run([os.path.join(self.bin, "osd_sim/mon/monctl"), "--cluster-dir",
                               self.dir, *args], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout)

    def pid(self, name):
        with open(os.path.join(self.dir, f"{name}.pid")) as fh:
            return int(fh.read().strip())

    def start_cluster(self):
        self.cluster("start", "--osds", str(self.osds), "--ms-type", self.a.ms_type,
                     "--durability", "durable", "--grace-ms", "2000",
                     *(["--pool-size", str(self.a.pool_size)] if self.a.pool_size > 1 else []),
                     *(["--hosts"] if self.hosts else []))
        with open(os.path.join(self.dir, "mon.addr")) as fh:
            self.mon_addr = fh.read().strip()
        where = ""
        if self.hosts:
            where = (f" on test hosts: the monitor on {host_name(MON_HOST)}, "
                     + ", ".join(f"osd.{k} on {host_name(osd_host(k))} ({self.addrs[osd_host(k)]})"
                                 for k in range(self.osds))
                     + f", the workloads on {host_name(CLIENT_HOST)} ({self.addrs[CLIENT_HOST]})")
        size = (f", pool size {self.a.pool_size}: at most {self.a.pool_size - 1} OSDs "
                "down, stopped or out at once" if self.a.pool_size > 1 else "")
        log(f"cluster up in {self.dir} (monitor {self.mon_addr}, {self.osds} OSDs, ms-type "
            f"{self.a.ms_type}{size}){where}")

    def restart_mon(self):
        # On the same address, with the cluster's settings: daemons and clients keep it.
        self.cluster("start-mon")

    def start_writer(self, k):
        ms = self.a.ms_type
        if ms == "both":
            ms = "tcp" if k % 2 == 0 else "rdma"
        args = [os.path.join(self.bin, "client/thrash/workload"), "--cluster-dir", self.dir,
                "--ms-type", ms, "--id", str(k), "--writers", str(self.a.writers),
                "--objects", str(self.a.objects), "--seconds", "100000",
                "--seed", str(self.a.seed), "--history",
                os.path.join(self.out, f"history.{k}.jsonl"), "--max-size", str(self.a.max_size),
                "--rate", str(self.a.rate)]
        # On the client host `ip netns exec` execs the workload: the pid is the workload's.
        self.writers[k] = subprocess.Popen(
            self.on_client_host(args), stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            stderr=open(os.path.join(self.out, f"workload.{k}.log"), "a"))

    def stop_writers(self):
        for p in self.writers.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 60
        for k, p in self.writers.items():
            try:
                p.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"workload {k} did not stop within 60 s of SIGTERM: killed")
                p.kill()
                p.wait()

    # --- faults ------------------------------------------------------------------------
    def fault(self, kind, target, hold, extra=None, note=""):
        what = describe(kind, target, hold, extra)
        stamp = f"+{time.monotonic() - self.t_start:6.1f}s"
        if kind == "netem" and self.netem_why:
            log(f"{stamp} {what}: skipped (no sch_netem)")
            self.skipped[kind] += 1
            return
        t0 = time.monotonic_ns()
        log(f"{stamp} {what}{note}")
        if kind == "kill_osd":
            self.cluster("stop-osd", "--id", str(target), "--kill")
            time.sleep(hold)
            self.start_osd(target)
        elif kind == "stop_osd":
            pid = self.pid(f"osd.{target}")
            os.kill(pid, signal.SIGSTOP)
            time.sleep(hold)
            os.kill(pid, signal.SIGCONT)
            if self.a.pool_size > 1:  # its slot is free once the map has it up again
                self.wait_up(target)
        elif kind == "kill_mon":
            os.kill(self.pid("mon"), signal.SIGKILL)
            time.sleep(hold)
            self.restart_mon()
        elif kind == "kill_client":
            self.writers[target].kill()
            self.writers[target].wait()
            time.sleep(hold)
            self.start_writer(target)
        elif kind == "out_in":
            self.monctl("out", str(target))
            time.sleep(hold)
            self.monctl("in", str(target))
        elif kind == "link_cut":
            h = osd_host(target)
            self.net_fault([("link", h, "down")], [("link", h, "up")])
            time.sleep(hold)
            self.net_heal()
        elif kind == "partition":
            a = osd_host(target)
            b = MON_HOST if extra["from"] == "mon" else CLIENT_HOST
            self.net_fault([("block", a, self.addrs[b]), ("block", b, self.addrs[a])],
                           [("unblock", a, self.addrs[b]), ("unblock", b, self.addrs[a])])
            time.sleep(hold)
            self.net_heal()
        elif kind == "netem":
            h = netem_host(target, extra)
            netem = ["netem", "delay", f"{extra['delay_ms']}ms"]
            if extra["loss_pct"]:
                netem += ["loss", f"{extra['loss_pct']}%"]
            self.net_fault([("exec", h, "tc", "qdisc", "add", "dev", "eth0", "root", *netem)],
                           [("exec", h, "tc", "qdisc", "del", "dev", "eth0", "root")])
            time.sleep(hold)
            self.net_heal()
        with self.lock:
            self.injected[kind] += 1
            self.faults.write(json.dumps({"t0": t0, "t1": time.monotonic_ns(), "what": what,
                                          "kind": kind}) + "\n")
            self.faults.flush()

    def start_osd(self, k, tries=3):
        """cluster.sh start-osd, tried again when it fails: at --pool-size N > 1 the monitor
        may be killed while an OSD restarts, and an OSD that cannot boot with the monitor
        within 10 s exits. One still running that comes up later is fine."""
        for attempt in range(1, tries + 1):
            r = self.cluster("start-osd", "--id", str(k), check=False)
            if r.returncode == 0:
                return
            why = (r.stdout.strip().split("\n") or [""])[-1] or f"exit {r.returncode}"
            try:
                os.kill(self.pid(f"osd.{k}"), 0)
                running = True
            except (OSError, ValueError):
                running = False
            if running and self.wait_up(k):
                log(f"osd.{k}: {why}; it came up later")
                return
            log(f"osd.{k} did not restart ({why}; attempt {attempt} of {tries})")
            with self.lock:
                self.restart_retries += 1
            self.cluster("stop-osd", "--id", str(k), "--kill", check=False)
        raise RuntimeError(f"osd.{k} did not restart in {tries} attempts: see "
                           f"{self.dir}/log/osd.{k}.log")

    def wait_up(self, k, timeout=60):
        """Waits (bounded) until the map has osd.K up; False if it did not come up."""
        try:
            return self.monctl("wait", str(k), "up", timeout=timeout).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def heal(self):
        """Every link up with no blackhole route or netem left; every OSD running, up and in;
        the monitor running."""
        self.net_heal()
        if self.hosts:
            for k in range(N_HOSTS):
                self.hosts_sh("link", k, "up", check=False)
        for k in range(self.osds):
            try:
                os.kill(self.pid(f"osd.{k}"), signal.SIGCONT)
            except (OSError, ValueError):
                pass
        for k in range(self.osds):
            self.monctl("in", str(k))
            if not self.wait_up(k):
                log(f"osd.{k} not up after the heal (monctl wait): cluster.sh start-osd --id {k}")
                self.start_osd(k)

    def kinds(self):
        return (FAULT_KINDS + (["out_in"] if self.a.out_in else [])
                + (HOST_FAULT_KINDS if self.hosts else []))

    def run_fault(self, key, kind, target, hold, extra, limit, note):
        try:
            self.fault(kind, target, hold, extra, note)
        except BaseException as e:  # noqa: BLE001 (reported by the main thread)
            with self.lock:
                self.fault_error = self.fault_error or e
        finally:
            with self.lock:
                limit.end(key)

    def run(self):
        kinds = self.kinds()
        events = schedule(self.a.seed, kinds, self.osds, self.a.writers)
        size = (f", pool size {self.a.pool_size} ({self.osds} OSDs, at most "
                f"{self.a.pool_size - 1} taken away at once, faults overlap)"
                if self.a.pool_size > 1 else "")
        log(f"seed {self.a.seed}: {self.a.minutes} min, {self.a.writers} workload processes, "
            f"faults: {', '.join(kinds)}{size}; results in {self.out}")
        self.start_cluster()
        for k in range(self.a.writers):
            self.start_writer(k)
        end = self.t_start + self.a.minutes * 60
        time.sleep(2)  # the workloads' first ops before the first fault
        # The same rules as plan() (what --dry-run prints), on the real clock: at size 1
        # one fault at a time, here in this thread; at size N > 1 each fault on its own
        # thread, started `gap` after the previous one started once Limit lets it.
        limit, threads = Limit(self.a.pool_size, self.osds), self.threads
        for i, (kind, target, hold, gap, extra) in enumerate(events):
            while True:
                with self.lock:
                    if self.fault_error:
                        raise RuntimeError(f"a fault failed: {self.fault_error}")
                    if limit.may_start(kind, target):
                        break
                time.sleep(0.05)
            if time.monotonic() + hold >= end:
                break
            if self.a.pool_size == 1:
                self.fault(kind, target, hold, extra)
                time.sleep(min(gap, max(0, end - time.monotonic())))
                continue
            with self.lock:
                limit.start(i, kind, target)
                down = sorted(limit.down())
            note = f" [taken away now: {', '.join(f'osd.{k}' for k in down)}]" if down else ""
            th = threading.Thread(target=self.run_fault, daemon=True,
                                  args=(i, kind, target, hold, extra, limit, note))
            th.start()
            threads.append(th)
            time.sleep(min(gap, max(0, end - time.monotonic())))
        for th in threads:
            th.join()
        if self.fault_error:
            raise RuntimeError(f"a fault failed: {self.fault_error}")
        per_kind = ", ".join(
            f"{k} {self.injected[k]}"
            + (f" ({self.skipped[k]} skipped: no sch_netem)" if self.skipped[k] else "")
            for k in kinds)
        retried = (f"; {self.restart_retries} OSD restarts had to be tried again"
                   if self.restart_retries else "")
        log(f"{sum(self.injected.values())} faults injected ({per_kind}){retried}; healing, "
            "stopping the workloads, reading every object")
        self.heal()
        self.stop_writers()
        final = subprocess.run(self.on_client_host(
            [os.path.join(self.bin, "client/thrash/workload"), "--cluster-dir", self.dir,
             "--ms-type", "tcp" if self.a.ms_type == "both" else self.a.ms_type,
             "--final-read", "--id", "0", "--writers", str(self.a.writers),
             "--objects", str(self.a.objects), "--seconds", "120",
             "--history", os.path.join(self.out, "history.final.jsonl")]),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if final.returncode != 0:
            log(f"the final read failed: {final.stdout.strip()}")
        if self.a.pool_size > 1:
            self.scrub()
        self.faults.close()

    def perf(self, k):
        """osd.K's perf dump (its admin socket), or None."""
        try:
            r = subprocess.run([os.path.join(self.bin, "osd_sim/tools/msgr_admin"),
                                os.path.join(self.dir, "run", f"osd.{k}.asok"), "perf", "dump"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               timeout=10)
            return json.loads(r.stdout) if r.returncode == 0 else None
        except (subprocess.TimeoutExpired, json.JSONDecodeError):
            return None

    def wait_active(self, timeout=60):
        """Waits (bounded) until the OSDs lead every PG of the map's pools between them and
        none is peering. Returns (active, peering, pgs) as last seen."""
        pgs = None
        r = self.monctl("map-json")
        if r.returncode == 0:
            m = json.loads(r.stdout)
            pgs = sum(p["pg_num"] for p in m.get("pools", [])) or m.get("pg_num")
        deadline = time.monotonic() + timeout
        while True:
            dumps = [self.perf(k) for k in range(self.osds)]
            active = sum(d["peering"]["pgs_active"] for d in dumps if d)
            peering = sum(d["peering"]["pgs_peering"] for d in dumps if d)
            if (None not in dumps and peering == 0 and active == pgs) \
                    or time.monotonic() > deadline:
                return active, peering, pgs
            time.sleep(0.5)

    def scrub(self):
        """After the final read, on the quiet healed cluster: every PG active, then `msgr
        scrub` (every copy on every up OSD against the placement map). Its missing and
        differing copies are counted as violations (a scrub that gives no result: one);
        stray copies are listed but are no violation. Writes each OSD's perf dump and the
        scrub's output to the results folder."""
        active, peering, pgs = self.wait_active()
        if peering or active != pgs:
            log(f"scrub: not every PG active within 60 s of the final read ({active} of "
                f"{pgs} active, {peering} peering): scrubbing anyway")
        for k in range(self.osds):
            d = self.perf(k)
            if d:
                with open(os.path.join(self.out, f"perf.osd.{k}.json"), "w") as fh:
                    json.dump(d, fh, indent=1)
        peer = collections.Counter()
        for k in range(self.osds):
            try:
                with open(os.path.join(self.out, f"perf.osd.{k}.json")) as fh:
                    peer.update(json.load(fh)["peering"])
            except (OSError, ValueError, KeyError):
                pass
        if peer:
            log("peering (all OSDs): " + ", ".join(
                f"{k} {peer[k]}" for k in ("peerings", "pulls", "pushes", "recoveries_from_log",
                                           "backfills", "objects_recovered", "bytes_recovered",
                                           "peering_errors")))
        try:
            r = subprocess.run(self.on_client_host(
                [os.path.join(self.bin, "client/cli/msgr"), "--cluster-dir", self.dir, "scrub"]),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        except subprocess.TimeoutExpired as e:
            r = subprocess.CompletedProcess(e.cmd, -1, (e.stdout or b"").decode() if
                                            isinstance(e.stdout, bytes) else (e.stdout or ""))
        with open(os.path.join(self.out, "scrub.txt"), "w") as fh:
            fh.write(r.stdout)
        lines = r.stdout.rstrip("\n").split("\n")
        summary = next((ln for ln in reversed(lines) if ln.startswith("scrub: ")), None)
        for ln in lines:
            if ln != summary and ln.strip():
                print(f"SCRUB {ln}", flush=True)
        if summary is None or r.returncode not in (0, 5):
            log(f"scrub gave no result (exit {r.returncode}): counted as one violation")
            self.scrub_problems = 1
            return
        counts = dict((w, int(n)) for n, w in
                      zip(summary.split()[1::2], [x.strip(",") for x in summary.split()[2::2]]))
        self.scrub_problems = counts.get("missing", 0) + counts.get("differing", 0)
        log(f"{summary} (exit {r.returncode}; missing + differing copies count as "
            "violations)")


def dry_run(a):
    """Prints the schedule of a run of --minutes, each fault taking exactly its hold time
    (a real run's restarts take longer, so it reaches fewer of them): plan()."""
    kinds = (FAULT_KINDS + (["out_in"] if a.out_in else [])
             + (HOST_FAULT_KINDS if a.hosts else []))
    osds = n_osds(a.pool_size)
    size = (f", pool size {a.pool_size} ({osds} OSDs, at most {a.pool_size - 1} taken away "
            f"at once, faults overlap)" if a.pool_size > 1 else "")
    print(f"thrash: seed {a.seed}: the schedule of {a.minutes} min (dry run: nothing started), "
          f"faults: {', '.join(kinds)}{size}")
    n = collections.Counter()
    for t, (kind, target, hold, _gap, extra), down in plan(
            schedule(a.seed, kinds, osds, a.writers), a.pool_size, osds, a.minutes):
        note = ""
        if a.pool_size > 1 and down:
            note = f" [taken away now: {', '.join(f'osd.{k}' for k in sorted(down))}]"
        print(f"thrash: +{t:6.1f}s {describe(kind, target, hold, extra)}"
              + (" (skipped where there is no sch_netem)" if kind == "netem" else "") + note)
        n[kind] += 1
    print(f"thrash: {sum(n.values())} faults in the schedule ("
          + ", ".join(f"{k} {n[k]}" for k in kinds) + ")")


def main():
    p = argparse.ArgumentParser(prog="tools/thrash.sh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--ms-type", choices=["tcp", "rdma", "both"], default="tcp")
    p.add_argument("--pool-size", type=int, default=1,
                   help="copies of each object (1..4; default 1). N > 1: 4 OSDs, faults "
                        "overlap with at most N - 1 OSDs down, stopped or out at once, and a "
                        "scrub at the end whose missing or differing copies are violations")
    p.add_argument("--hosts", action="store_true",
                   help="on five test hosts (network namespaces, tcp only) with host faults: "
                        "link cuts, partitions, netem delay/loss (where sch_netem exists)")
    p.add_argument("--writers", type=int, default=3, help="workload processes (default 3)")
    p.add_argument("--objects", type=int, default=8, help="objects per workload (default 8)")
    p.add_argument("--max-size", type=int, default=8 << 20,
                   help="largest object version in bytes (default 8 MiB)")
    p.add_argument("--rate", type=float, default=10,
                   help="ops per second per workload process (default 10): a run writes "
                        "about writers x rate x 0.6 x the mean size (max-size / ln(max-size / "
                        "4 KiB)) per second, which the store's compaction reclaims as it is "
                        "overwritten")
    p.add_argument("--out-in", action="store_true",
                   help="also mark OSDs out and in (the PGs that move are backfilled "
                        "before their new holders serve them)")
    p.add_argument("--out", help="results folder (default: a new one under /tmp)")
    p.add_argument("--cluster-dir", help="the cluster's directory (default: a new one)")
    p.add_argument("--keep", action="store_true", help="keep the cluster directory")
    p.add_argument("--dry-run", action="store_true",
                   help="print the seed's fault schedule for --minutes and start nothing")
    a = p.parse_args()
    if a.minutes <= 0:
        p.error("--minutes must be positive")
    if not 1 <= a.pool_size <= 4:
        p.error("--pool-size takes 1..4 (a replicated run has 4 OSDs)")
    if a.writers < 1:
        p.error("--writers must be at least 1")
    if a.dry_run:
        dry_run(a)
        return 0
    if a.hosts and a.ms_type != "tcp":
        log(f"--hosts: test hosts are tcp-only (the soft RDMA provider's sockets are per "
            f"namespace): --ms-type {a.ms_type} becomes tcp")
        a.ms_type = "tcp"
    a.out = a.out or tempfile.mkdtemp(prefix="msgr-thrash.")
    os.makedirs(a.out, exist_ok=True)
    own_dir = a.cluster_dir is None
    a.cluster_dir = a.cluster_dir or tempfile.mkdtemp(prefix="msgr-thrash-cluster.", dir="/tmp")
    run = Run(a)

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)  # the finally below stops everything
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    rc = 1
    try:
        if a.hosts:
            why = run.setup_hosts()
            if why:
                log(f"--hosts: no test hosts here ({why}): running on 127.0.0.1 without host "
                    "faults")
        run.run()
        check = subprocess.run([sys.executable, os.path.join(TOOLS, "thrash", "check.py"), a.out],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        rc = check.returncode
        out = check.stdout.rstrip("\n").split("\n")
        print("\n".join(out[:-1]))
        log(f"seed {a.seed}, results in {a.out}")
        if a.pool_size > 1:
            # The last line adds the scrub's missing and differing copies to the checker's
            # violations (the line before says how many of each).
            n = int(out[-1].split()[-1]) if out[-1].startswith("violations: ") else None
            if n is None:
                print(out[-1])
            else:
                log(f"violations: {n} in the history check, {run.scrub_problems} from the "
                    "scrub (missing + differing copies)")
                print(f"violations: {n + run.scrub_problems}")
                if rc == 0 and run.scrub_problems:
                    rc = 1
        else:
            print(out[-1])  # violations: N
    except RuntimeError as e:  # a tool that failed: say which, then clean up
        log(f"error: {e}")
        rc = 1
    except KeyboardInterrupt:
        log("interrupted: healing the network, stopping every process, removing the test hosts")
        rc = 130
    finally:
        # Stop handling SIGINT/SIGTERM while tearing down: a second Ctrl-C must not leave the
        # test hosts behind.
        for s_ in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s_, signal.SIG_IGN)
        for th in run.threads:  # a fault still running would restart a daemon after the stop
            th.join(timeout=120)
        for p_ in run.writers.values():
            if p_.poll() is None:
                p_.kill()
                p_.wait()
        run.net_heal()
        for k in range(run.osds):  # an OSD held in SIGSTOP would not stop on SIGTERM
            try:
                os.kill(run.pid(f"osd.{k}"), signal.SIGCONT)
            except (OSError, ValueError):
                pass
        run.cluster("stop", check=False)
        if os.path.isdir(os.path.join(a.cluster_dir, "log")):
            shutil.copytree(os.path.join(a.cluster_dir, "log"), os.path.join(a.out, "cluster-log"),
                            dirs_exist_ok=True)
        run.remove_hosts()
        if own_dir and not a.keep:
            shutil.rmtree(a.cluster_dir, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
