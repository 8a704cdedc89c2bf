#!/usr/bin/env bash
# Runs every msgr test for real (no cached results) and ends with one line
# "N passed, N failed" counted from the actual results; exits non-zero on any failure.
#
#   tools/test.sh            setup + the layering check (tools/check_layers.py) + plain
#                            build/tests (-c opt: the thrash, hosts and rdma-vm
#                            steps run the same binaries, so the tree is built once for
#                            them; the ASan step keeps asserts on) + ASan/UBSan build/tests + clang
#                            thread-safety build + thrasher (tcp, rdma) + test hosts
#                            (network namespaces) + RDMA VM suite (with the test
#                            hosts' netem case, in the VM)
#   tools/test.sh --quick    plain tests only (for development)
#
# Steps: each prints its own "step NAME: N passed, N failed" line (Bazel steps add
# ", N skipped"); the last line is the total of passed and failed. Bazel steps count test
# cases, from the test.xml of every run (tools/count_tests.py: gtest cases; an sh_test is
# one case; a run that failed without a failed case in its XML, or a test target with no
# result, counts as one failed case); skipped cases (GTEST_SKIP) are neither.
set -uo pipefail
cd "$(dirname "$0")/.."

QUICK=0
# shellcheck source=tools/lib/flags.sh
source tools/lib/flags.sh
FLAGS_SCRIPT=test.sh
usage_text() { flags_header tools/test.sh; }
flags_begin "$@"
while flags_next; do
  case "$FLAG" in
    --quick) QUICK=1 ;;
    -h|--help) usage_text; exit 0 ;;
    *) flag_unknown ;;
  esac
done

bash tools/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

TOTAL_PASS=0
TOTAL_FAIL=0
LOGDIR=$(mktemp -d /tmp/msgr-test.XXXXXX)

run_bazel_step() {
  local name=$1; shift
  local log="$LOGDIR/$name.log" bep="$LOGDIR/$name.bep.json" rc counts pass fail skip
  local start=$SECONDS
  echo "=== step $name: bazel test $* //..."
  bazel test --nocache_test_results --test_summary=short --build_event_json_file="$bep" \
    "$@" //... 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  # Now, before another invocation replaces the test.xml files the build events name.
  counts=$(python3 tools/count_tests.py "$bep" 2>"$LOGDIR/$name.count.log")
  tee -a "$log" <"$LOGDIR/$name.count.log"
  if [[ $counts =~ ^([0-9]+)\ ([0-9]+)\ ([0-9]+)$ ]]; then
    pass=${BASH_REMATCH[1]} fail=${BASH_REMATCH[2]} skip=${BASH_REMATCH[3]}
  else
    echo "step $name: the test results could not be counted (tools/count_tests.py)"
    pass=0 fail=1 skip=0
  fi
  # A failure that leaves no test result (bazel itself failed): it cannot look green.
  if [[ $rc -ne 0 && $fail -eq 0 ]]; then fail=1; fi
  echo "$name step took $((SECONDS - start)) s"
  echo "step $name: $pass passed, $fail failed, $skip skipped"
  TOTAL_PASS=$((TOTAL_PASS + pass))
  TOTAL_FAIL=$((TOTAL_FAIL + fail))
}

# The house's layering: every project #include points down (tools/check_layers.py).
echo "=== step layers: tools/check_layers.py"
if python3 tools/check_layers.py; then
  echo "step layers: 1 passed, 0 failed"
  TOTAL_PASS=$((TOTAL_PASS + 1))
else
  echo "step layers: 0 passed, 1 failed"
  TOTAL_FAIL=$((TOTAL_FAIL + 1))
fi

run_bazel_step plain -c opt
if [[ $QUICK -eq 0 ]]; then
  # Only what the tests need (the plain step already built every binary and benchmark).
  # tools/lsan.supp: OpenSSL's per-thread state in gRPC's pool threads (see the file).
  # Tests tagged no_asan (the tcp twins of the multi-process tests: tests/tools/BUILD) run
  # in the plain step only.
  run_bazel_step asan --config=asan --build_tests_only --test_tag_filters=-no_asan \
    "--test_env=LSAN_OPTIONS=suppressions=$PWD/tools/lsan.supp"
  # clang's thread-safety analysis over every ABSL_GUARDED_BY (gcc ignores them): one case.
  echo "=== step tsa: bazel build --config=tsa (clang -Wthread-safety -Werror=thread-safety)"
  step_start=$SECONDS
  bazel build --config=tsa //msg/... //osd_sim/... //client/... //proto/... >"$LOGDIR/tsa.log" 2>&1
  rc=$?
  grep -E 'error:|ERROR:' "$LOGDIR/tsa.log" | head -20
  if [[ $rc -eq 0 ]]; then
    echo "tsa step took $((SECONDS - step_start)) s"
    echo "step tsa: 1 passed, 0 failed"
    TOTAL_PASS=$((TOTAL_PASS + 1))
  else
    echo "step tsa: 0 passed, 1 failed (log: $LOGDIR/tsa.log)"
    TOTAL_FAIL=$((TOTAL_FAIL + 1))
  fi
  # The thrasher (tools/thrash.sh): a short run per backend with a fixed seed, each one
  # case: it passes when the checker finds no violation ("violations: 0").
  echo "=== step thrash: tools/thrash.sh, 2.5 min per backend, fixed seeds"
  step_start=$SECONDS
  tpass=0 tfail=0
  if bazel build -c opt //client/thrash:workload //osd_sim:osd //osd_sim/mon:mon \
      //osd_sim/mon:monctl //osd_sim/tools:msgr_admin >"$LOGDIR/thrash-build.log" 2>&1; then
    # BACKEND:SEED:POOL_SIZE. The rdma run keeps three copies of each object on four OSDs:
    # replication over rdma, recovery from PG logs and backfill under the same faults.
    for spec in tcp:1:1 rdma:2:3; do
      IFS=: read -r ms seed size <<<"$spec"
      MSGR_REBUILD=0 bash tools/thrash.sh --minutes 2.5 --seed "$seed" --ms-type "$ms" \
        --pool-size "$size" --max-size 1048576 --out "$LOGDIR/thrash-$ms" \
        >"$LOGDIR/thrash-$ms.log" 2>&1
      rc=$?
      last=$(tail -1 "$LOGDIR/thrash-$ms.log")
      grep -E '^thrash: .* faults injected|^ops: ' "$LOGDIR/thrash-$ms.log"
      echo "thrash $ms (seed $seed, pool size $size): $last"
      if [[ $rc -eq 0 && "$last" == "violations: 0" ]]; then
        tpass=$((tpass + 1))
      else
        tfail=$((tfail + 1))
        grep -A8 '^VIOLATION' "$LOGDIR/thrash-$ms.log" | head -40
        echo "thrash $ms: failed (log: $LOGDIR/thrash-$ms.log)"
      fi
    done
  else
    tail -20 "$LOGDIR/thrash-build.log"
    tfail=2
  fi
  echo "thrash step took $((SECONDS - step_start)) s"
  echo "step thrash: $tpass passed, $tfail failed"
  TOTAL_PASS=$((TOTAL_PASS + tpass))
  TOTAL_FAIL=$((TOTAL_FAIL + tfail))
  # The cluster across test hosts (network namespaces, tcp): tests/tools/hosts_test.sh,
  # one case per fault; a case the kernel cannot run (netem) is skipped with the reason
  # (this machine's kernel has no sch_netem: the rdma-vm step runs that case in its guest).
  echo "=== step hosts: tests/tools/hosts_test.sh (mon, 3 OSDs and a client on 5 test hosts)"
  step_start=$SECONDS
  if bazel build -c opt //client/bench:bench //client/cli:msgr //osd_sim:osd //osd_sim/mon:mon \
      //osd_sim/mon:monctl //osd_sim/tools:msgr_admin >"$LOGDIR/hosts-build.log" 2>&1; then
    timeout 600 bash tests/tools/hosts_test.sh 2>&1 | tee "$LOGDIR/hosts.log" | grep -E '^hosts_test: |^hosts: '
    line=$(grep -E '^hosts: [0-9]+ passed, [0-9]+ failed' "$LOGDIR/hosts.log" | tail -1)
    hpass=$(echo "$line" | sed -nE 's/^hosts: ([0-9]+) passed.*/\1/p')
    hfail=$(echo "$line" | sed -nE 's/.* ([0-9]+) failed.*/\1/p')
    hskip=$(echo "$line" | sed -nE 's/.* ([0-9]+) skipped$/\1/p')
    hpass=${hpass:-0}; hfail=${hfail:-1}; hskip=${hskip:-0}
  else
    tail -20 "$LOGDIR/hosts-build.log"
    hpass=0 hfail=1 hskip=0
  fi
  echo "hosts step took $((SECONDS - step_start)) s"
  echo "step hosts: $hpass passed, $hfail failed, $hskip skipped"
  TOTAL_PASS=$((TOTAL_PASS + hpass))
  TOTAL_FAIL=$((TOTAL_FAIL + hfail))
  if [[ -x tools/rxe_vm_suite.sh ]]; then
    log="$LOGDIR/rdma_vm.log"
    # Phase 1 in one VM (rxe0 on lo; its last entry is the hosts step's netem case, over
    # tcp on namespaces inside the guest, whose kernel has sch_netem), phase 2 in two VMs
    # joined by one link (tools/rxe_vms.sh: rxe0 on each guest's NIC, the cluster on one,
    # the client on the other); all counted in its one line. The bound (20 min, host build
    # included) only stops a hung run.
    echo "=== step rdma-vm: RDMA suite on real verbs (Soft-RoCE: one VM, then two VMs on one link) + the netem case of the test hosts"
    rdma_vm_start=$SECONDS
    timeout --kill-after=30 1200 bash tools/rxe_vm_suite.sh 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    line=$(grep -E '^rdma-vm: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
    pass=$(echo "$line" | sed -nE 's/^rdma-vm: ([0-9]+) passed.*/\1/p')
    fail=$(echo "$line" | sed -nE 's/.* ([0-9]+) failed$/\1/p')
    pass=${pass:-0}; fail=${fail:-0}
    if [[ $rc -ne 0 && $fail -eq 0 ]]; then fail=1; fi
    echo "rdma-vm step took $((SECONDS - rdma_vm_start)) s"
    echo "step rdma-vm: $pass passed, $fail failed"
    TOTAL_PASS=$((TOTAL_PASS + pass))
    TOTAL_FAIL=$((TOTAL_FAIL + fail))
  fi
fi

echo "logs: $LOGDIR (whole run: $SECONDS s)"
echo "$TOTAL_PASS passed, $TOTAL_FAIL failed"
[[ $TOTAL_FAIL -eq 0 ]]
