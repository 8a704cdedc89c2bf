#!/usr/bin/env bash
# Installs msgr on this host: the daemons, the tools and systemd units.
#
#   tools/install.sh [--prefix PREFIX] [--root ROOT] [--no-build]
#
#   PREFIX (default /usr/local): PREFIX/bin/{msgr-mon,msgr-osd,msgr-monctl,msgr-admin,
#          msgr-bench,msgr}; PREFIX/share/msgr/tools (cluster.sh, bench.sh, hosts.sh, lib/).
#   ROOT   (default /): everything goes under ROOT (a staging tree; the units still name
#          PREFIX paths, as they will be on the target host).
#   Units: ROOT/etc/systemd/system/msgr-mon.service and msgr-osd@.service (instance = the
#          OSD id), reading ROOT/etc/msgr/msgr.env (written once, never overwritten:
#          MSGR_CLUSTER_DIR, MSGR_MON_ADDR, MSGR_PUBLIC_NETWORK, ...). Both restart on
#          failure; the OSD's has LimitMEMLOCK=infinity (RDMA registers its rings).
#   The cluster directory (default /etc/msgr/cluster) holds keyring and pki/ as copied from
#   the admin host (tools/cluster.sh, README "Deploy on three hosts"); data under
#   /var/lib/msgr/{mon,osd.K}.
#
# Builds the optimised binaries first (bazel build -c opt ...) unless --no-build.
# After installing: systemctl daemon-reload; systemctl enable --now msgr-mon (on the
# monitor's host) or msgr-osd@K (on an OSD's host). The units pass systemd-analyze verify.
set -euo pipefail
ROOT_DIR="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=tools/lib/flags.sh
source "$ROOT_DIR/tools/lib/flags.sh"
FLAGS_SCRIPT=install.sh
usage_text() { flags_header "${BASH_SOURCE[0]}"; }
die() { echo "install.sh: $*" >&2; exit 1; }

PREFIX=/usr/local DEST=/ BUILD=1
flags_begin "$@"
while flags_next; do
  case "$FLAG" in
    --prefix) flag_value PREFIX ;;
    --root) flag_value DEST ;;
    --no-build) BUILD=0 ;;
    -h|--help) usage_text; exit 0 ;;
    *) flag_unknown ;;
  esac
done
[[ $PREFIX == /* ]] || die "--prefix must be an absolute path"
BIN="${MSGR_BIN:-$ROOT_DIR/bazel-bin}"
if [[ $BUILD == 1 ]]; then
  (cd "$ROOT_DIR" && bazel build -c opt //osd_sim:osd //osd_sim/mon:mon //osd_sim/mon:monctl \
      //osd_sim/tools:msgr_admin //client/bench:bench //client/cli:msgr >&2) \
    || die "build failed (run tools/setup.sh first?)"
fi

at() { echo "${DEST%/}$1"; }
install -d "$(at "$PREFIX/bin")" "$(at "$PREFIX/share/msgr/tools/lib")" \
  "$(at /etc/systemd/system)" "$(at /etc/msgr)"
# Installed names carry a msgr- prefix: "mon" and "osd" are too generic for PREFIX/bin.
for pair in osd_sim/mon/mon:msgr-mon osd_sim/osd:msgr-osd osd_sim/mon/monctl:msgr-monctl \
            osd_sim/tools/msgr_admin:msgr-admin client/bench/bench:msgr-bench client/cli/msgr:msgr; do
  src="$BIN/${pair%%:*}"
  [[ -x $src ]] || die "no $src: build first (or drop --no-build)"
  install -m 0755 "$src" "$(at "$PREFIX/bin/${pair##*:}")"
done
for f in cluster.sh bench.sh hosts.sh msgr.sh; do
  install -m 0755 "$ROOT_DIR/tools/$f" "$(at "$PREFIX/share/msgr/tools/$f")"
done
for f in flags.sh pki.sh; do
  install -m 0644 "$ROOT_DIR/tools/lib/$f" "$(at "$PREFIX/share/msgr/tools/lib/$f")"
done

ENV_FILE=$(at /etc/msgr/msgr.env)
if [[ ! -e $ENV_FILE ]]; then
  cat > "$ENV_FILE" <<'EOF'
# msgr daemons' settings (read by msgr-mon.service and msgr-osd@.service).
# The cluster directory: keyring and pki/ (ca.crt, mon.crt/.key, osd.K.crt/.key) copied
# from the admin host.
MSGR_CLUSTER_DIR=/etc/msgr/cluster
# The monitor: where it listens (on its host) and where the OSDs find it.
MSGR_MON_ADDR=127.0.0.1:6789
# Where an OSD binds and advertises: a network of this host's addresses (CIDR).
MSGR_PUBLIC_NETWORK=127.0.0.0/8
MSGR_MS_TYPE=tcp
MSGR_DURABILITY=durable
# Extra OSD flags, e.g. --rdma-device rxe0 --cluster-network 198.18.1.0/24
MSGR_OSD_ARGS=
EOF
fi

cat > "$(at /etc/systemd/system/msgr-mon.service)" <<EOF
[Unit]
Description=msgr monitor (cluster membership, gRPC over mutual TLS)
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
EnvironmentFile=/etc/msgr/msgr.env
StateDirectory=msgr/mon
ExecStart=$PREFIX/bin/msgr-mon --data-dir /var/lib/msgr/mon --addr \${MSGR_MON_ADDR} --auth secret --cluster-dir \${MSGR_CLUSTER_DIR}
Restart=on-failure
RestartSec=2

[Install]
WantedBy=multi-user.target
EOF

cat > "$(at /etc/systemd/system/msgr-osd@.service)" <<EOF
[Unit]
Description=msgr OSD %i
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
EnvironmentFile=/etc/msgr/msgr.env
StateDirectory=msgr/osd.%i
RuntimeDirectory=msgr
# RDMA registers (pins) its rings and pools.
LimitMEMLOCK=infinity
LimitNOFILE=1048576
ExecStart=$PREFIX/bin/msgr-osd --id %i --mon \${MSGR_MON_ADDR} --data-dir /var/lib/msgr/osd.%i --run-dir /run/msgr --cluster-dir \${MSGR_CLUSTER_DIR} --public-network \${MSGR_PUBLIC_NETWORK} --ms-type \${MSGR_MS_TYPE} --durability \${MSGR_DURABILITY} \$MSGR_OSD_ARGS
Restart=on-failure
RestartSec=2

[Install]
WantedBy=multi-user.target
EOF
echo "installed msgr under $(at "$PREFIX") and units in $(at /etc/systemd/system) (settings: /etc/msgr/msgr.env)" >&2
