#!/usr/bin/env python3
"""The thrasher (run it as tools/thrash.sh): workloads under continuous faults, then a check.

Starts a durable 3-OSD cluster (tools/cluster.sh) and --writers workload processes
(//client/thrash:workload: writes, overwrites, reads and deletes of 4 KiB..--max-size
objects whose sizes change between versions), then for --minutes injects faults drawn from
--seed, one at a time: kill -9 and restart of an OSD, SIGSTOP/SIGCONT of an OSD, kill -9
and restart of the monitor, kill -9 of a workload process mid-op and its restart, and with
--out-in also `monctl out`/`in` of an OSD. The same seed gives the same schedule (kinds,
targets, hold and gap times). At the end every fault is healed, the workloads stop, every
object is read once more, and tools/thrash/check.py checks the history; its last line,
`violations: N`, is the run's last line. Everything runs on 127.0.0.1; every process it
started is stopped by pid.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "tools")

FAULT_KINDS = ["kill_osd", "stop_osd", "kill_mon", "kill_client"]


def log(msg):
    print(f"thrash: {msg}", flush=True)


def schedule(seed, kinds, osds, writers, count=100000):
    """The seeded fault schedule: (kind, target, hold_s, gap_s) tuples."""
    rng = random.Random(seed)
    events = []
    for _ in range(count):
        kind = rng.choice(kinds)
        target = rng.randrange(writers if kind == "kill_client" else osds)
        events.append((kind, target, round(rng.uniform(0.5, 4.0), 2), round(rng.uniform(1.0, 4.0), 2)))
    return events


class Run:
    def __init__(self, a):
        self.a = a
        self.bin = os.environ.get("MSGR_BIN", os.path.join(ROOT, "bazel-bin"))
        self.env = dict(os.environ, MSGR_BIN=self.bin, MSGR_REBUILD="0")
        self.dir = a.cluster_dir
        self.out = a.out
        self.writers = {}  # k -> Popen
        self.faults = open(os.path.join(self.out, "faults.jsonl"), "a")
        self.t_start = time.monotonic()
        self.mon_addr = None

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
        self.cluster("start", "--osds", "3", "--ms-type", self.a.ms_type,
                     "--durability", "durable", "--grace-ms", "2000")
        with open(os.path.join(self.dir, "mon.addr")) as fh:
            self.mon_addr = fh.read().strip()
        log(f"cluster up in {self.dir} (monitor {self.mon_addr}, 3 OSDs, ms-type {self.a.ms_type})")

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
        self.writers[k] = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
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
    def fault(self, kind, target, hold):
        t0 = time.monotonic_ns()
        if kind == "kill_osd":
            what = f"kill -9 osd.{target}, restart after {hold} s"
            log(f"+{time.monotonic() - self.t_start:6.1f}s {what}")
            self.cluster("stop-osd", "--id", str(target), "--kill")
            time.sleep(hold)
            self.cluster("start-osd", "--id", str(target))
        elif kind == "stop_osd":
            what = f"SIGSTOP osd.{target} for {hold} s"
            log(f"+{time.monotonic() - self.t_start:6.1f}s {what}")
            pid = self.pid(f"osd.{target}")
            os.kill(pid, signal.SIGSTOP)
            time.sleep(hold)
            os.kill(pid, signal.SIGCONT)
        elif kind == "kill_mon":
            what = f"kill -9 the monitor, restart after {hold} s"
            log(f"+{time.monotonic() - self.t_start:6.1f}s {what}")
            os.kill(self.pid("mon"), signal.SIGKILL)
            time.sleep(hold)
            self.restart_mon()
        elif kind == "kill_client":
            what = f"kill -9 workload {target} (mid-op), restart after {hold} s"
            log(f"+{time.monotonic() - self.t_start:6.1f}s {what}")
            self.writers[target].kill()
            self.writers[target].wait()
            time.sleep(hold)
            self.start_writer(target)
        elif kind == "out_in":
            what = f"monctl out {target}, in after {hold} s"
            log(f"+{time.monotonic() - self.t_start:6.1f}s {what}")
            self.monctl("out", str(target))
            time.sleep(hold)
            self.monctl("in", str(target))
        self.faults.write(json.dumps({"t0": t0, "t1": time.monotonic_ns(), "what": what}) + "\n")
        self.faults.flush()

    def heal(self):
        """Every OSD running, up and in; the monitor running."""
        for k in range(3):
            try:
                os.kill(self.pid(f"osd.{k}"), signal.SIGCONT)
            except (OSError, ValueError):
                pass
        for k in range(3):
            self.monctl("in", str(k))
            if self.monctl("wait", str(k), "up", timeout=60).returncode != 0:
                self.cluster("start-osd", "--id", str(k))

    def run(self):
        kinds = FAULT_KINDS + (["out_in"] if self.a.out_in else [])
        events = schedule(self.a.seed, kinds, 3, self.a.writers)
        log(f"seed {self.a.seed}: {self.a.minutes} min, {self.a.writers} workload processes, "
            f"faults: {', '.join(kinds)}; results in {self.out}")
        self.start_cluster()
        for k in range(self.a.writers):
            self.start_writer(k)
        end = self.t_start + self.a.minutes * 60
        time.sleep(2)  # the workloads' first ops before the first fault
        n = 0
        for kind, target, hold, gap in events:
            if time.monotonic() + hold >= end:
                break
            self.fault(kind, target, hold)
            n += 1
            time.sleep(min(gap, max(0, end - time.monotonic())))
        log(f"{n} faults injected; healing, stopping the workloads, reading every object")
        self.heal()
        self.stop_writers()
        final = subprocess.run(
            [os.path.join(self.bin, "client/thrash/workload"), "--cluster-dir", self.dir,
             "--ms-type", "tcp" if self.a.ms_type == "both" else self.a.ms_type,
             "--final-read", "--id", "0", "--writers", str(self.a.writers),
             "--objects", str(self.a.objects), "--seconds", "120",
             "--history", os.path.join(self.out, "history.final.jsonl")],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if final.returncode != 0:
            log(f"the final read failed: {final.stdout.strip()}")
        self.faults.close()


def main():
    p = argparse.ArgumentParser(prog="tools/thrash.sh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--ms-type", choices=["tcp", "rdma", "both"], default="tcp")
    p.add_argument("--pool-size", type=int, default=1)
    p.add_argument("--hosts", action="store_true")
    p.add_argument("--writers", type=int, default=3, help="workload processes (default 3)")
    p.add_argument("--objects", type=int, default=8, help="objects per workload (default 8)")
    p.add_argument("--max-size", type=int, default=8 << 20,
                   help="largest object version in bytes (default 8 MiB)")
    p.add_argument("--rate", type=float, default=10,
                   help="ops per second per workload process (default 10). The store does "
                        "not reclaim overwritten space yet: a run writes about writers x rate "
                        "x 0.6 x the mean size (max-size / ln(max-size / 4 KiB)) per second")
    p.add_argument("--out-in", action="store_true",
                   help="also mark OSDs out and in (reads then find stale copies until "
                        "backfill exists: the checker reports them)")
    p.add_argument("--out", help="results folder (default: a new one under /tmp)")
    p.add_argument("--cluster-dir", help="the cluster's directory (default: a new one)")
    p.add_argument("--keep", action="store_true", help="keep the cluster directory")
    a = p.parse_args()
    if a.minutes <= 0:
        p.error("--minutes must be positive")
    if a.pool_size != 1:
        p.error("--pool-size: only 1 until pools with a size exist (the replication issue)")
    if a.hosts:
        p.error("--hosts: test hosts are not supported yet (the many-hosts issue)")
    a.out = a.out or tempfile.mkdtemp(prefix="msgr-thrash.")
    os.makedirs(a.out, exist_ok=True)
    own_dir = a.cluster_dir is None
    a.cluster_dir = a.cluster_dir or tempfile.mkdtemp(prefix="msgr-thrash-cluster.", dir="/tmp")
    run = Run(a)
    rc = 1
    try:
        run.run()
        check = subprocess.run([sys.executable, os.path.join(TOOLS, "thrash", "check.py"), a.out],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        rc = check.returncode
        out = check.stdout.rstrip("\n").split("\n")
        print("\n".join(out[:-1]))
        log(f"seed {a.seed}, results in {a.out}")
        print(out[-1])  # violations: N
    finally:
        for p_ in run.writers.values():
            if p_.poll() is None:
                p_.kill()
        run.cluster("stop", check=False)
        if os.path.isdir(os.path.join(a.cluster_dir, "log")):
            shutil.copytree(os.path.join(a.cluster_dir, "log"), os.path.join(a.out, "cluster-log"),
                            dirs_exist_ok=True)
        if own_dir and not a.keep:
            shutil.rmtree(a.cluster_dir, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
