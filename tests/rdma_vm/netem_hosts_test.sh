#!/usr/bin/env bash
# The netem case of the test hosts (tests/tools/hosts_test.sh --only netem-1ms) where the
# kernel can run it: inside the Soft-RoCE VM (tools/rxe_vm_suite.sh, from
# tests/rdma_vm/SUITE). The host's kernel has no sch_netem and cannot load modules, so
# there that case is skipped; Debian's guest kernel ships sch_netem, bridge and veth as
# modules, which this script loads from the module tree the guest mounts.
#
# In the guest: tools/hosts.sh's five network namespaces on a bridge, the monitor and 3 OSDs
# on them (tcp), then the same short 4 KiB -t 1 bench from the client host without and
# with 1 ms of netem delay on every host's link. PASS needs hosts_test's own verdict
# (verified, no failed op, p50 and the fastest write >= 2 ms, that write >= 1 ms slower than
# without the delay, packets through the client's and the OSD hosts' netem qdiscs) and no
# skip: here a skip would mean the case did not run. Under emulation p50 is mostly CPU (a
# few ms with or without the delay); the fastest write is what shows the round trip.
# The OSDs run in memory mode with pollers spinning 50 us (HOSTS_TEST_CLUSTER_ARGS, unless
# set): under emulation durable mode took ~30 s longer to start, and spinning pollers take
# the two emulated CPUs from everything else (as in SUITE's cluster_test).
#   netem_hosts_test.sh [--timeout SECONDS]   (the bound of hosts_test.sh, default 180)
# Binaries: MSGR_BIN if set (as for every suite entry), else the -c opt ones
# (bazel-out/k8-opt/bin; tools/rxe_vm_suite.sh builds them): under emulation a fastbuild
# cluster's fastest write took 4.5 ms with no delay at all (on a busy machine), more than
# the 2 ms the delay adds.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TIMEOUT=180
# shellcheck source=tools/lib/flags.sh
source "$ROOT/tools/lib/flags.sh"
FLAGS_SCRIPT=netem_hosts_test.sh
usage_text() { flags_header "$0"; }
flags_begin "$@"
while flags_next; do
  case "$FLAG" in
    --timeout) flag_value TIMEOUT ;;
    -h|--help) usage_text; exit 0 ;;
    *) flag_unknown ;;
  esac
done

export MSGR_BIN=${MSGR_BIN:-$ROOT/bazel-out/k8-opt/bin}
for b in osd_sim/osd osd_sim/mon/mon osd_sim/mon/monctl client/bench/bench; do
  [[ -x $MSGR_BIN/$b ]] || { echo "FAIL: no $MSGR_BIN/$b (bazel build -c opt //${b%/*}:${b##*/}, or set MSGR_BIN)"; exit 1; }
done

start=$SECONDS
for m in sch_netem bridge veth; do
  [[ -d /sys/module/$m ]] || modprobe "$m" || { echo "FAIL: modprobe $m (kernel $(uname -r))"; exit 1; }
done
echo "netem_hosts_test: sch_netem, bridge, veth loaded in $((SECONDS - start)) s"

export HOSTS_TEST_CLUSTER_ARGS=${HOSTS_TEST_CLUSTER_ARGS---durability memory --poller-spin-us 50}
out=$(mktemp /tmp/msgr-netem-hosts.XXXXXX)
# Each line with the seconds since this script started: where emulated time goes.
timeout --kill-after=10 "$TIMEOUT" bash "$ROOT/tests/tools/hosts_test.sh" --only netem-1ms 2>&1 \
  | while IFS= read -r l; do echo "[$((SECONDS - start)) s] $l"; done | tee "$out"
rc=${PIPESTATUS[0]}
line=$(grep -E '^\[[0-9]+ s\] hosts: [0-9]+ passed' "$out" | tail -1)
line=${line#*] }
rm -f "$out"
echo "netem_hosts_test: ${line:-no summary line}, status $rc, $((SECONDS - start)) s"
[[ $rc == 124 || $rc == 137 ]] && { echo "FAIL: hosts_test.sh did not finish within $TIMEOUT s"; exit 1; }
[[ $rc == 0 && $line == "hosts: 1 passed, 0 failed, 0 skipped" ]] || { echo "FAIL: the netem case did not pass"; exit 1; }
echo "PASS"
