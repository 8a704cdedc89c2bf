#!/usr/bin/env bash
# tools/install.sh into a staging root (--root, --no-build): the binaries under their msgr-
# names run, the tools and their libraries are there, a second install keeps the edited
# settings file, and the systemd units pass `systemd-analyze verify` (which fails on a
# unit whose ExecStart binary is missing: checked too).
set -euo pipefail
# shellcheck source=tests/tools/test_paths.sh
source "$(dirname "$0")/test_paths.sh"
if [[ -n "${TEST_SRCDIR:-}" ]]; then export MSGR_BIN=$RUNFILES; fi
fail() { echo "FAIL: $*" >&2; exit 1; }
STAGE=$(mktemp -d "${TEST_TMPDIR:-/tmp}/msgr-install.XXXXXX")

bash "$TOOLS/install.sh" --root "$STAGE" --no-build || fail "install.sh failed"
for b in msgr-mon msgr-osd msgr-monctl msgr-admin msgr-bench msgr; do
  [[ -x "$STAGE/usr/local/bin/$b" ]] || fail "no executable $b"
done
# Captured first: `--help | grep -q` under pipefail fails once the text passes a pipe write
# (grep exits at its match, the next write gets SIGPIPE).
osd_help=$("$STAGE/usr/local/bin/msgr-osd" --help) || fail "msgr-osd --help exited $?"
grep -q -- "--public-addr" <<<"$osd_help" || fail "msgr-osd --help"
for f in cluster.sh bench.sh hosts.sh msgr.sh lib/flags.sh lib/pki.sh; do
  [[ -f "$STAGE/usr/local/share/msgr/tools/$f" ]] || fail "no tools/$f"
done
grep -q '^LimitMEMLOCK=infinity$' "$STAGE/etc/systemd/system/msgr-osd@.service" || fail "no LimitMEMLOCK"
grep -q '^Restart=on-failure$' "$STAGE/etc/systemd/system/msgr-mon.service" || fail "no Restart"

# The settings file is the operator's after the first install.
echo "MSGR_MON_ADDR=198.18.0.1:6789" >> "$STAGE/etc/msgr/msgr.env"
bash "$TOOLS/install.sh" --root "$STAGE" --no-build || fail "second install failed"
grep -q '^MSGR_MON_ADDR=198.18.0.1:6789$' "$STAGE/etc/msgr/msgr.env" || fail "msgr.env overwritten"

command -v systemd-analyze >/dev/null || fail "systemd-analyze not installed (apt-get install systemd)"
# verify --root resolves the units' dependencies (network-online.target, ...) in the root.
mkdir -p "$STAGE/usr/lib/systemd"
cp -a /usr/lib/systemd/system "$STAGE/usr/lib/systemd/"
units=("$STAGE/etc/systemd/system/msgr-mon.service" "$STAGE/etc/systemd/system/msgr-osd@.service")
systemd-analyze verify --root="$STAGE" "${units[@]}" || fail "systemd-analyze verify"
rm "$STAGE/usr/local/bin/msgr-mon"
if systemd-analyze verify --root="$STAGE" "${units[0]}" 2>/dev/null; then
  fail "verify passed a unit whose binary is missing: it checks nothing"
fi
echo "PASS: install into $STAGE, units verified"
