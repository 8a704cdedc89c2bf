#!/usr/bin/env bash
# End-to-end test of the object CLI (tools/msgr.sh) against a real 3-OSD cluster:
#   * put/get round trips from files and pipes, byte-identical, sizes 0 B to 1 GiB+ (the
#     big one goes as many ring records and comes back in ranged reads);
#   * stat prints the size; ls lists (sorted, --prefix, --long) what was put and not removed;
#   * rm deletes durably: after an OSD restart the object is still gone;
#   * exit codes a script can use: 3 "no such object", 4 "cluster unreachable", 2 bad usage;
#   * no progress bar (no control characters) when stderr is not a terminal.
# MS_TYPE=tcp|rdma (env). Under `bazel test` the binaries come from the runfiles.
set -euo pipefail
# shellcheck source=tests/tools/test_paths.sh
source "$(dirname "$0")/test_paths.sh"
MS_TYPE=${MS_TYPE:-tcp} BIG_MB=${BIG_MB:-1100}
export MSGR_BIN=$RUNFILES MSGR_REBUILD=0
DIR=$(mktemp -d /tmp/msgr-cli-test.XXXXXX)
fail() { echo "FAIL: $*" >&2; tail -n 20 "$DIR"/log/*.log >&2 || true; exit 1; }
cleanup() { bash "$TOOLS/cluster.sh" stop --cluster-dir "$DIR" >/dev/null 2>&1 || true; rm -rf "$DIR"; }
trap cleanup EXIT
# Under ASan the CLI runs without the leak check: a gRPC thread that exits with the process
# leaves 904 bytes of libcrypto's own state (CRYPTO_zalloc, no frame of ours: libcrypto has
# no frame pointers), now and then, as cluster_test's monctl did. The client library's
# leaks are checked by its own tests (client_test, client_e2e_test).
cli() { ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" bash "$TOOLS/msgr.sh" --cluster-dir "$DIR" "$@"; }
# expect_rc RC WORD CMD...: CMD exits RC with WORD in its stderr.
expect_rc() {
  local want=$1 word=$2 rc=0 err
  shift 2
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  [[ $rc == "$want" ]] || fail "'$*' exited $rc, not $want: $err"
  grep -qF -- "$word" <<<"$err" || fail "'$*' did not say '$word': $err"
}

# Before a cluster exists: unreachable, and usage errors.
expect_rc 4 "cluster unreachable" cli ls
expect_rc 4 "cluster unreachable at 127.0.0.1:1" \
  bash "$TOOLS/msgr.sh" --mon 127.0.0.1:1 --mon-timeout 1 stat x
expect_rc 2 "unknown flag --no-such-flag" cli --no-such-flag ls
expect_rc 2 "bad command line for 'put'" cli put only-an-oid

# Memory mode: a 1 GiB object must fit in an OSD's RAM cap (1/8 of RAM); 3 GiB is enough.
bash "$TOOLS/cluster.sh" start --cluster-dir "$DIR" --osds 3 --ms-type "$MS_TYPE" \
  --durability memory --capacity $((3 << 30)) >/dev/null || fail "cluster did not start"

head -c 100000 /dev/urandom > "$DIR/small.bin"
: > "$DIR/empty.bin"
cli put obj/small "$DIR/small.bin" || fail "put small"
cli put obj/empty "$DIR/empty.bin" || fail "put empty"
printf 'from a pipe\n' | cli put obj/piped - || fail "put from stdin"
cli get obj/small "$DIR/small.out" 2>"$DIR/get.err" || fail "get small"
cmp "$DIR/small.bin" "$DIR/small.out" || fail "small object differs"
[[ ! -s "$DIR/get.err" ]] || fail "get printed to stderr when not on a terminal: $(cat -A "$DIR/get.err")"
[[ "$(cli get obj/piped -)" == "from a pipe" ]] || fail "get to stdout"
cli get obj/empty "$DIR/empty.out" && [[ -f "$DIR/empty.out" && ! -s "$DIR/empty.out" ]] \
  || fail "empty object"
[[ "$(cli stat obj/small)" == "obj/small size 100000" ]] || fail "stat: $(cli stat obj/small)"
cli put other/x "$DIR/small.bin" || fail "put other/x"

# Sorted listing from every OSD; --prefix; --long.
[[ "$(cli ls | tr '\n' ' ')" == "obj/empty obj/piped obj/small other/x " ]] \
  || fail "ls: $(cli ls | tr '\n' ' ')"
[[ "$(cli ls --prefix other/)" == "other/x" ]] || fail "ls --prefix"
[[ "$(cli ls --long --prefix=obj/s)" == "$(printf 'obj/small\t100000')" ]] || fail "ls --long"

# rm, and the exit code of a missing object.
cli rm obj/piped || fail "rm"
expect_rc 3 "no such object: obj/piped" cli get obj/piped "$DIR/x"
expect_rc 3 "no such object: obj/piped" cli stat obj/piped
expect_rc 3 "no such object: obj/piped" cli rm obj/piped
[[ "$(cli ls --prefix obj/ | tr '\n' ' ')" == "obj/empty obj/small " ]] || fail "ls after rm"

# Pools: put/get/stat/ls/rm in a created pool; the same oid there is another object; an
# unknown pool is bad usage naming the pools there are.
"$RUNFILES/osd_sim/mon/monctl" --cluster-dir "$DIR" pool create two --size 2 >/dev/null \
  || fail "monctl pool create"
expect_rc 2 "no pool 'other' (pools: default, two)" cli --pool other ls
printf 'in pool two\n' | cli --pool two put obj/small - || fail "put in pool two"
[[ "$(cli --pool two get obj/small -)" == "in pool two" ]] || fail "get in pool two"
cmp <(cli get obj/small -) "$DIR/small.bin" || fail "the default pool's obj/small changed"
[[ "$(cli --pool two stat obj/small)" == "obj/small size 12" ]] || fail "stat in pool two"
[[ "$(cli --pool two ls --long)" == "$(printf 'obj/small\t12')" ]] \
  || fail "ls in pool two: $(cli --pool two ls --long)"
[[ "$(cli --pool=default ls | tr '\n' ' ')" == "obj/empty obj/small other/x " ]] \
  || fail "ls of the default pool: $(cli ls | tr '\n' ' ')"
expect_rc 3 "no such object: other/x" cli --pool two stat other/x
cli --pool two rm obj/small || fail "rm in pool two"
expect_rc 3 "no such object: obj/small" cli --pool two get obj/small "$DIR/x"
[[ "$(cli stat obj/small)" == "obj/small size 100000" ]] || fail "rm in pool two touched default"

# A big object both ways (many records; ranged reads of 16 MiB), and its listing size.
# Deterministic, incompressible-enough content without the cost of /dev/urandom.
python3 -c "
import sys, hashlib
out = sys.stdout.buffer
block = b''.join(hashlib.sha256(str(i).encode()).digest() for i in range(32768))  # 1 MiB
for i in range($BIG_MB):
    out.write(block[i % 1000:] + block[:i % 1000])
" > "$DIR/big.bin"
t0=$SECONDS
cli put obj/big "$DIR/big.bin" || fail "put big"
cli get obj/big - | cmp - "$DIR/big.bin" || fail "big object differs"
echo "big object ($BIG_MB MiB) put + get in $((SECONDS - t0)) s over $MS_TYPE"
[[ "$(cli stat obj/big)" == "obj/big size $((BIG_MB << 20))" ]] || fail "stat big"
cli rm obj/big || fail "rm big"
rm -f "$DIR/big.bin"

# Durable deletes: a buffered cluster, rm, restart the object's OSD, still gone.
bash "$TOOLS/cluster.sh" stop --cluster-dir "$DIR" >/dev/null
rm -rf "$DIR"/osd.* "$DIR/mon"
bash "$TOOLS/cluster.sh" start --cluster-dir "$DIR" --osds 3 --ms-type "$MS_TYPE" \
  --durability durable >/dev/null || fail "durable cluster did not start"
for i in 1 2 3 4 5 6; do cli put "d/$i" "$DIR/small.bin" || fail "put d/$i"; done
cli rm d/3 || fail "rm d/3"
for id in 0 1 2; do
  bash "$TOOLS/cluster.sh" stop-osd --cluster-dir "$DIR" --id "$id" >/dev/null
  bash "$TOOLS/cluster.sh" start-osd --cluster-dir "$DIR" --id "$id" >/dev/null || fail "restart osd.$id"
done
[[ "$(cli ls --prefix d/ | tr '\n' ' ')" == "d/1 d/2 d/4 d/5 d/6 " ]] \
  || fail "after restarts: $(cli ls --prefix d/ | tr '\n' ' ')"
expect_rc 3 "no such object: d/3" cli get d/3 "$DIR/x"
cli get d/6 "$DIR/d6" && cmp "$DIR/d6" "$DIR/small.bin" || fail "d/6 after restarts"
echo "PASS: object CLI over $MS_TYPE"
