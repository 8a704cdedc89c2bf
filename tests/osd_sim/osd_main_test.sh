#!/usr/bin/env bash
# The OSD daemon's command line: bad values are refused before anything starts (exit 2,
# a message naming the flag and what it takes), --help lists the tuning flags.
# Its config file (--conf FILE, --cluster-dir DIR's msgr.conf): a value there is used, and
# [osd.K] > [osd] > [global] with the command line over all, seen through which value is
# refused (the OSD checks --durability, then --ring-bytes, then --weight, before starting).
set -uo pipefail
OSD=${TEST_SRCDIR:?run under bazel test}/msgr/osd_sim/osd
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# expect_refused "what it must say" ARGS...
expect_refused() {
  local want=$1; shift
  local out rc
  out=$("$OSD" --id 0 --mon 127.0.0.1:1 --durability memory "$@" 2>&1); rc=$?
  [[ $rc == 2 ]] || fail "$* exited $rc, want 2 (output: ${out:0:200})"
  grep -qF -- "$want" <<<"$out" || fail "$*: no '$want' in: ${out:0:300}"
}

expect_refused "--op-complaint-time wants a number, got 'abc'" --op-complaint-time abc
expect_refused "--op-complaint-time takes a number of seconds above 0" --op-complaint-time 0
expect_refused "poller-wakeup-us" --poller-wakeup-us fast
expect_refused "poller-spin-us" --poller-spin-us -5
expect_refused "--ring-bytes must be a power of two" --ring-bytes 100000
expect_refused "store_commit_window_us" --store-commit-window-us -5
expect_refused "--store-commit-window-us takes 0 to 1000000 microseconds" --store-commit-window-us 2000000
expect_refused "--store-zero-ahead-kb takes 0 to 1048576 KiB" --store-zero-ahead-kb 2000000
expect_refused "--poller-ack-spin-us takes 0 to 1000000 microseconds" --poller-ack-spin-us 2000000
expect_refused "--poller-nap-depth takes 0 to 65535 writes" --poller-nap-depth 70000
expect_refused "--ms-tcp-threads takes 0 to 64 threads" --ms-tcp-threads 65

help=$("$OSD" --help 2>&1)
for flag in --poller-spin-us --poller-wakeup-us --op-complaint-time --metrics-addr \
    --store-commit-window-us --store-zero-ahead-kb --poller-ack-spin-us --poller-nap-depth --ms-tcp-threads; do
  grep -qF -- "$flag" <<<"$help" || fail "--help does not mention $flag"
done

# expect_exit2 "what it must say" ARGS...: the OSD (no default flags) exits 2 saying it.
expect_exit2() {
  local want=$1; shift
  local out rc
  out=$("$OSD" "$@" 2>&1); rc=$?
  [[ $rc == 2 ]] || fail "$* exited $rc, want 2 (output: ${out:0:200})"
  grep -qF -- "$want" <<<"$out" || fail "$*: no '$want' in: ${out:0:300}"
}
DIR=${TEST_TMPDIR:-/tmp}/osd_main_test.$$
mkdir -p "$DIR"
CONF=$DIR/msgr.conf
BASE=(--mon 127.0.0.1:1 --auth none)
cat > "$CONF" <<'EOF'
# an OSD's settings
[global]
durability = memory
ring-bytes = 65536
[osd]
ring_bytes = 100000     ; not a power of two: refused, naming --ring-bytes
[osd.1]
ring bytes = 131072
[mon]
grace-ms = 3000
EOF
# [osd] over [global]: osd.0 gets ring-bytes 100000, and durability memory from [global]
# (else it would want --data-dir).
expect_exit2 "--ring-bytes must be a power of two" --id 0 "${BASE[@]}" --conf "$CONF"
# the command line over [osd]: on to --weight (a value that parses, refused after
# --ring-bytes is checked; a value that does not parse is refused before any of them)
expect_exit2 "--weight takes a number of 0 or more" --id 0 "${BASE[@]}" --conf "$CONF" \
  --ring-bytes 65536 --weight=-1
# [osd.1] over [osd]
expect_exit2 "--weight takes a number of 0 or more" --id 1 "${BASE[@]}" --conf "$CONF" --weight=-1
# ... found by the id's number: --id 01 is osd.1
expect_exit2 "--weight takes a number of 0 or more" --id 01 "${BASE[@]}" --conf "$CONF" \
  --weight=-1
expect_exit2 "--weight wants a number, got 'x'" --id 0 "${BASE[@]}" --weight x
# the command line over [global]
expect_exit2 "--durability must be durable" --id 1 "${BASE[@]}" --conf "$CONF" --durability x
# --cluster-dir DIR reads DIR/msgr.conf
expect_exit2 "--ring-bytes must be a power of two" --id 0 "${BASE[@]}" --cluster-dir "$DIR"
# A typo in the OSD's sections names the file, line and key; one in [mon] is the monitor's.
printf '[global]\nauth = none\n[mon]\ngrace-mss = 1\n[osd]\ndurabilty = memory\n' > "$DIR/typo.conf"
expect_exit2 "$DIR/typo.conf:6: unknown key 'durabilty' in [osd]: not a setting of osd" \
  --id 0 --mon 127.0.0.1:1 --conf "$DIR/typo.conf"
printf '[global]\nauth = none\n[osd]\nms-type tcp\n' > "$DIR/bad.conf"
expect_exit2 "$DIR/bad.conf:4: no '=' in line" --id 0 --mon 127.0.0.1:1 --conf "$DIR/bad.conf"
expect_exit2 "cannot read $DIR/none.conf" --id 0 --mon 127.0.0.1:1 --conf "$DIR/none.conf"
grep -qF -- "--conf FILE" <<<"$help" || fail "--help does not mention --conf"
rm -rf "$DIR"

if [[ $failures -gt 0 ]]; then echo "$failures failure(s)" >&2; exit 1; fi
echo "osd_main_test: ok"
