#!/usr/bin/env bash
# The demo's report (tools/plot.sh + tools/report.py) checked in a real browser: from bench
# JSON results of two sections, report.html must be self-contained (no external URL), and
# headless Chromium must lay out every table and every chart (report.py's page script
# counts tables with rows and SVG charts with a non-empty box into <body data-rendered>).
# Also: the text summary says rdma vs tcp per section, and the verify column says "ok/bad".
# Needs gnuplot and chromium (tools/setup.sh installs both): missing, the test fails.
set -euo pipefail
# shellcheck source=tests/tools/test_paths.sh
source "$(dirname "$0")/test_paths.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in gnuplot chromium; do
  command -v "$tool" >/dev/null || fail "$tool not installed: run tools/setup.sh"
done
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/report-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# Bench results as tools/bench.sh --json writes them (the fields the report reads).
python3 - "$WORK" <<'PY'
import json, os, sys
work = sys.argv[1]
for section, slow in (("memory", 1.0), ("durable", 4.0)):
    os.makedirs(f"{work}/{section}")
    for b, f in (("tcp", 1.0), ("rdma", 2.5)):
        for s in (4096, 65536, 4 << 20):
            iops = 20000 * f / slow * (4096 / s) ** 0.5
            r = {"mode": "write", "ms_type": b, "object_size": s, "concurrency": 16,
                 "seconds": 5, "ops": int(iops * 5), "bytes": int(iops * 5 * s),
                 "mb_per_s": iops * s / 2 ** 20, "iops": iops,
                 "lat_us": {"p50": 80 * slow / f, "p99": 300 * slow / f, "p999": 500, "max": 900,
                            "avg": 100},
                 "cpu_s_per_gb": {"client": 2.0 / f, "osds": 6.0 / f},
                 "verify": {"enabled": True, "checked": 640, "mismatches": 0},
                 "lat_cdf": [[10 * k * slow / f, k / 20] for k in range(1, 21)]}
            with open(f"{work}/{section}/{b}-{s}.json", "w") as fh:
                json.dump(r, fh)
PY
for section in memory durable; do
  bash "$TOOLS/plot.sh" "$WORK/$section"/*.json --out "$WORK" --name "$section" \
    --title "$section mode" >/dev/null || fail "plot.sh for $section"
done
text=$(python3 "$TOOLS/report.py" "$WORK" --html "$WORK/report.html") || fail "report.py"
grep -q "rdma vs tcp: 2.50x IOPS at 4K, 2.50x lower p50, 2.50x less OSD CPU per GiB, 2.50x MB/s at 4M" \
  <<<"$text" || fail "no summary line: $text"
[[ $(grep -c "rdma vs tcp" <<<"$text") == 2 ]] || fail "one summary per section: $text"
grep -q "640 ok, 0 bad" <<<"$text" || fail "verify column: $text"

grep -qE "(src|href)=\"(https?:)?//" "$WORK/report.html" && fail "report.html loads external assets"
[[ $(grep -c "<svg" "$WORK/report.html") == 8 ]] || fail "8 inline charts expected"
dom=$(timeout 60 chromium --headless --no-sandbox --disable-gpu --virtual-time-budget=5000 \
  --user-data-dir="$WORK/profile" --dump-dom "file://$WORK/report.html" 2>/dev/null) \
  || fail "chromium could not load the report"
rendered=$(grep -o 'data-rendered="[^"]*"' <<<"$dom") || fail "the page script did not run"
[[ "$rendered" == 'data-rendered="tables=2 charts=8"' ]] || fail "rendered: $rendered"
echo "PASS: report rendered ($rendered)"
