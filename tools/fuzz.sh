#!/usr/bin/env bash
# Builds the frame/handshake fuzzer with clang++ -fsanitize=fuzzer,address (outside
# Bazel) and runs it for a bounded time.
#
#   tools/fuzz.sh [--seconds N]     (default 60)
#
# Prints "fuzz: PASSED ..." or "fuzz: FAILED ..." last; exits non-zero on a finding.
set -uo pipefail
cd "$(dirname "$0")/.."

SECONDS_TO_RUN=60
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) SECONDS_TO_RUN="$2"; shift 2 ;;
    *) echo "usage: $0 [--seconds N]"; exit 2 ;;
  esac
done

OUT=${FUZZ_OUT:-/tmp/msgr-fuzz}
mkdir -p "$OUT/corpus"
CXX=${CXX_FUZZ:-clang++}
ABSL_CFLAGS=$(pkg-config --cflags absl_status absl_statusor absl_strings absl_str_format)
ABSL_LIBS=$(pkg-config --libs absl_status absl_statusor absl_strings absl_str_format)
echo "fuzz: building $OUT/frame_fuzzer"
if ! $CXX -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -I. $ABSL_CFLAGS \
    msg/fuzz/frame_fuzzer.cc msg/frame.cc msg/handshake.cc msg/crc32c.cc \
    msg/ring/ring_format.cc msg/messenger.cc \
    -o "$OUT/frame_fuzzer" $ABSL_LIBS $(pkg-config --libs libisal libcrypto); then
  echo "fuzz: FAILED to build"
  exit 1
fi
# Seeds: a few inputs kept from earlier runs (msg/fuzz/corpus).
cp -n msg/fuzz/corpus/* "$OUT/corpus/" 2>/dev/null || true
echo "fuzz: running for ${SECONDS_TO_RUN}s"
"$OUT/frame_fuzzer" -max_total_time="$SECONDS_TO_RUN" -max_len=8192 -rss_limit_mb=2048 \
    -artifact_prefix="$OUT/" "$OUT/corpus" 2>&1 | tee "$OUT/fuzz.log" | grep -E "^#[0-9]+ +(DONE|pulse)|ERROR|SUMMARY|crash-|Done" 
rc=${PIPESTATUS[0]}
if [[ $rc -eq 0 ]]; then
  runs=$(grep -oE 'Done [0-9]+ runs' "$OUT/fuzz.log" | tail -1)
  echo "fuzz: PASSED (${runs:-done} in ${SECONDS_TO_RUN}s, corpus $(ls "$OUT/corpus" | wc -l) inputs)"
else
  echo "fuzz: FAILED (exit $rc); reproducer in $OUT/ (see $OUT/fuzz.log)"
fi
exit $rc
