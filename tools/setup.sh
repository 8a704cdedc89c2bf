#!/usr/bin/env bash
# Installs every Debian package msgr needs to build, test and run.
# Idempotent: runs `apt-get update` only when something is missing, and prints
# nothing when everything is already present.
set -euo pipefail

PACKAGES=(
  # build
  bazel-bootstrap g++ pkg-config
  # libraries
  libboost-dev libboost-system-dev
  protobuf-compiler libprotobuf-dev libgrpc++-dev protobuf-compiler-grpc libabsl-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libibverbs-dev ibverbs-providers ibverbs-utils rdma-core
  libisal-dev libssl-dev nlohmann-json3-dev libspdlog-dev
  # /metrics (prometheus-cpp's Exposer); the real Prometheus server and promtool for its test
  prometheus-cpp-dev prometheus curl
  # tools: fuzzing, charts, process inspection
  clang libfuzzer-14-dev gnuplot-nox procps iproute2 python3 fio
  # the monitor's control-plane PKI (tools/lib/pki.sh) and its test from a Python gRPC client
  openssl python3-grpcio python3-protobuf
  # RDMA references run in the Soft-RoCE VMs (tools/rxe_vm_suite.sh --perf)
  perftest rdmacm-utils
  # tools/install.sh's units checked by systemd-analyze verify (tests/tools/install_test.sh)
  systemd
  # the demo report's check in a real browser (tests/tools/report_test.sh)
  chromium
)
# The Soft-RoCE VM (tools/rxe_vm.sh) needs these; MSGR_SKIP_VM_PACKAGES=1 skips them.
VM_PACKAGES=(qemu-system-x86 busybox-static cpio kmod)

if [[ "${MSGR_SKIP_VM_PACKAGES:-0}" != 1 ]]; then
  PACKAGES+=("${VM_PACKAGES[@]}")
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
