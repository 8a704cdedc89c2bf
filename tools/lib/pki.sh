#!/usr/bin/env bash
# The cluster's PKI for the monitor's gRPC control plane (mutual TLS), made with OpenSSL.
#
#   bash tools/lib/pki.sh init DIR            DIR/pki/ca.crt + ca.key (EC P-256, 10 years)
#   bash tools/lib/pki.sh issue DIR ENTITY    DIR/pki/ENTITY.crt + ENTITY.key, CN=ENTITY,
#                                             signed by DIR/pki/ca.key
#
# Or sourced (`source tools/lib/pki.sh`), which defines pki_init DIR and pki_issue DIR ENTITY.
#
# ENTITY is the name the monitor authorises by: mon, osd.K, client.admin, client.NAME.
# The mon's certificate carries the fixed DNS name mon.msgr (plus localhost and
# IP:127.0.0.1): clients verify it under that name (gRPC's SSL target name override), so a
# monitor keeps its certificate whichever address it listens on.
#
# Idempotent: an existing key or certificate is kept (a kept key whose certificate is
# missing is signed again). Keys are mode 0600. `issue` never makes a CA: a host that joins
# a cluster must use that cluster's ca.crt, and a fresh CA there would fail every handshake
# later instead of now.

PKI_DAYS=3650

pki_die() {
  echo "pki.sh: $*" >&2
  return 1
}

# Writes to a temporary file beside the target, then renames, so an interrupted run never
# leaves a half-written key or certificate that a later run would keep.
pki_tmp() { mktemp "$1.tmp.XXXXXX"; }

pki_check_entity() {
  [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] ||
    pki_die "bad entity name '$1' (want e.g. mon, osd.0, client.admin)"
}

# pki_newkey FILE: a fresh EC P-256 key, mode 0600, unless FILE exists.
pki_newkey() {
  local key=$1 tmp
  [[ -s $key ]] && return 0
  tmp=$(umask 077 && pki_tmp "$key") || return 1
  if ! openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$tmp" 2>/dev/null; then
    rm -f "$tmp"
    pki_die "openssl could not make a key for $key"
    return 1
  fi
  chmod 600 "$tmp" && mv -f "$tmp" "$key"
}

pki_init() {
  local dir=${1:?pki_init DIR}
  local pki=$dir/pki
  command -v openssl >/dev/null || { pki_die "openssl is not installed (tools/setup.sh)"; return 1; }
  mkdir -p "$pki" || return 1
  chmod 700 "$pki"
  pki_newkey "$pki/ca.key" || return 1
  [[ -s $pki/ca.crt ]] && return 0
  local tmp
  tmp=$(pki_tmp "$pki/ca.crt") || return 1
  # A random suffix in the CA's name: two clusters' CAs are told apart in error messages.
  if ! openssl req -x509 -new -key "$pki/ca.key" -sha256 -days "$PKI_DAYS" \
      -subj "/O=msgr/CN=msgr cluster CA $(openssl rand -hex 4)" \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" \
      -addext "subjectKeyIdentifier=hash" \
      -out "$tmp" 2>/dev/null; then
    rm -f "$tmp"
    pki_die "openssl could not make the CA certificate $pki/ca.crt"
    return 1
  fi
  chmod 644 "$tmp" && mv -f "$tmp" "$pki/ca.crt"
}

pki_issue() {
  local dir=${1:?pki_issue DIR ENTITY} entity=${2:?pki_issue DIR ENTITY}
  local pki=$dir/pki
  pki_check_entity "$entity" || return 1
  if [[ ! -s $pki/ca.crt || ! -s $pki/ca.key ]]; then
    pki_die "no CA in $pki (make it first: bash tools/lib/pki.sh init $dir)"
    return 1
  fi
  pki_newkey "$pki/$entity.key" || return 1
  [[ -s $pki/$entity.crt ]] && return 0

  local san=""
  # The fixed name every client verifies the monitor under (see the header).
  [[ $entity == mon ]] && san="subjectAltName=DNS:mon.msgr,DNS:localhost,IP:127.0.0.1"
  local ext csr tmp
  ext=$(mktemp) csr=$(mktemp)
  tmp=$(pki_tmp "$pki/$entity.crt") || return 1
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=serverAuth,clientAuth"
    echo "subjectKeyIdentifier=hash"
    echo "authorityKeyIdentifier=keyid,issuer"
    if [[ -n $san ]]; then echo "$san"; fi
  } >"$ext"
  local ok=1
  openssl req -new -key "$pki/$entity.key" -subj "/O=msgr/CN=$entity" -out "$csr" 2>/dev/null &&
    openssl x509 -req -in "$csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
      -set_serial "0x$(openssl rand -hex 16)" -sha256 -days "$PKI_DAYS" \
      -extfile "$ext" -out "$tmp" 2>/dev/null || ok=0
  rm -f "$ext" "$csr"
  if [[ $ok != 1 ]]; then
    rm -f "$tmp"
    pki_die "openssl could not sign $pki/$entity.crt"
    return 1
  fi
  chmod 644 "$tmp" && mv -f "$tmp" "$pki/$entity.crt"
}

pki_usage() {
  cat <<'EOF'
usage: pki.sh init DIR            make DIR/pki/ca.crt and ca.key (kept if present)
       pki.sh issue DIR ENTITY    make DIR/pki/ENTITY.crt and ENTITY.key signed by the CA
  ENTITY: mon, osd.K, client.admin, client.NAME (the monitor authorises by this name)
EOF
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  case "${1:-}" in
    init) [[ $# -eq 2 ]] || { pki_usage >&2; exit 2; }; pki_init "$2" ;;
    issue) [[ $# -eq 3 ]] || { pki_usage >&2; exit 2; }; pki_issue "$2" "$3" ;;
    -h|--help) pki_usage ;;
    *) pki_usage >&2; exit 2 ;;
  esac
fi
