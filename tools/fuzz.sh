#!/usr/bin/env bash
# Builds the fuzzers with clang++ -fsanitize=fuzzer,address,undefined (outside Bazel) and
# runs each for a bounded time:
#   frame  the frame and handshake decoders (bytes from a TCP peer)       msg/fuzz/frame_fuzzer.cc
#   ring   the receive-ring consumer (ring memory a peer wrote, e.g. by RDMA) msg/fuzz/ring_fuzzer.cc
#
#   tools/fuzz.sh [--seconds N] [--only frame|ring]     (default 60 s, split between them)
#
# Prints "fuzz: PASSED ..." or "fuzz: FAILED ..." last; exits non-zero on a finding.
set -uo pipefail
cd "$(dirname "$0")/.."

SECONDS_TO_RUN=60
ONLY="frame ring"
# shellcheck source=tools/lib/flags.sh
source tools/lib/flags.sh
FLAGS_SCRIPT=fuzz.sh
usage_text() { flags_header tools/fuzz.sh; }
flags_begin "$@"
while flags_next; do
  case "$FLAG" in
    --seconds) flag_value SECONDS_TO_RUN ;;
    --only) flag_value ONLY ;;
    -h|--help) usage_text; exit 0 ;;
    *) flag_unknown ;;
  esac
done

OUT=${FUZZ_OUT:-/tmp/msgr-fuzz}
CXX=${CXX_FUZZ:-clang++}
ABSL_CFLAGS=$(pkg-config --cflags absl_status absl_statusor absl_strings absl_str_format)
ABSL_LIBS=$(pkg-config --libs absl_status absl_statusor absl_strings absl_str_format)
LIBS="$ABSL_LIBS $(pkg-config --libs libisal libcrypto)"
declare -A SOURCES=(
  [frame]="msg/fuzz/frame_fuzzer.cc msg/frame.cc msg/handshake.cc msg/base/crc32c.cc msg/ring/ring_format.cc msg/messenger.cc"
  [ring]="msg/fuzz/ring_fuzzer.cc msg/ring/ring.cc msg/ring/ring_format.cc msg/base/crc32c.cc"
)
set -- $ONLY
PER=$(( SECONDS_TO_RUN / $# ))
(( PER > 0 )) || PER=1
summary=() rc=0
for name in "$@"; do
  [[ -n "${SOURCES[$name]:-}" ]] || { echo "fuzz: unknown fuzzer '$name'"; exit 2; }
  dir="$OUT/$name"
  mkdir -p "$dir/corpus"
  echo "fuzz: building $dir/fuzzer"
  # shellcheck disable=SC2086
  if ! $CXX -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -I. $ABSL_CFLAGS \
      ${SOURCES[$name]} -o "$dir/fuzzer" $LIBS; then
    echo "fuzz: FAILED to build $name"
    exit 1
  fi
  # Seeds: a few inputs kept from earlier runs (msg/fuzz/corpus for the frame fuzzer).
  [[ $name == frame ]] && cp -n msg/fuzz/corpus/* "$dir/corpus/" 2>/dev/null
  echo "fuzz: running $name for ${PER}s"
  "$dir/fuzzer" -max_total_time="$PER" -max_len=8192 -rss_limit_mb=2048 \
      -artifact_prefix="$dir/" "$dir/corpus" 2>&1 | tee "$dir/fuzz.log" |
    grep -E "^#[0-9]+ +(DONE|pulse)|ERROR|SUMMARY|crash-|Done"
  r=${PIPESTATUS[0]}
  if [[ $r -eq 0 ]]; then
    runs=$(grep -oE 'Done [0-9]+ runs' "$dir/fuzz.log" | tail -1)
    summary+=("$name: ${runs:-done}, corpus $(ls "$dir/corpus" | wc -l)")
  else
    summary+=("$name: FAILED (exit $r; reproducer in $dir/, log $dir/fuzz.log)")
    rc=$r
  fi
done
if [[ $rc -eq 0 ]]; then
  echo "fuzz: PASSED ($(IFS=';'; echo "${summary[*]}") in ${SECONDS_TO_RUN}s)"
else
  echo "fuzz: FAILED ($(IFS=';'; echo "${summary[*]}"))"
fi
exit $rc
