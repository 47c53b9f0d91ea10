#!/usr/bin/env bash
# Certificates for mxrun's mutual TLS, with openssl (Debian's `openssl` package).
#
#   scripts/make-certs.sh DIR ca                          a new CA: DIR/ca.pem, DIR/ca.key
#   scripts/make-certs.sh DIR node NAME ADDR [ADDR...]    DIR/NAME.pem and DIR/NAME.key, signed by
#                                                         DIR/ca.*; ADDR: the node's IP addresses
#                                                         and DNS names, as others dial it
#
# A node certificate serves both ways (the agent that hosts the master presents it as a server,
# every agent as a client), so it carries both extended key usages. Keys are EC P-256, written
# 0600. DAYS (default 365) sets the validity. Give each node its NAME.pem and NAME.key and every
# node and the master the same ca.pem:
#   mxrun ... --rdzv_conf cert=NAME.pem,key=NAME.key,cacert=ca.pem
#   mxrun-master --cert=master.pem --key=master.key --cacert=ca.pem
set -euo pipefail

usage() { sed -n '3,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ "$#" -ge 2 ] || usage
dir="$1"; what="$2"; shift 2
DAYS="${DAYS:-365}"
case "$DAYS" in ''|*[!0-9]*|0) echo "make-certs.sh: DAYS must be a positive whole number" >&2; exit 2;; esac
command -v openssl >/dev/null || { echo "make-certs.sh: openssl is not installed (apt-get install openssl)" >&2; exit 2; }
mkdir -p "$dir"
umask 077

case "$what" in
  ca)
    [ "$#" -eq 0 ] || usage
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 \
      -days "$DAYS" -subj "/CN=mxrun CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    chmod 0644 "$dir/ca.pem"
    echo "$dir/ca.pem"
    ;;
  node)
    [ "$#" -ge 2 ] || usage
    name="$1"; shift
    case "$name" in ''|*[!A-Za-z0-9._-]*) echo "make-certs.sh: NAME must be letters, digits, '.', '_' or '-'" >&2; exit 2;; esac
    [ -f "$dir/ca.pem" ] && [ -f "$dir/ca.key" ] || { echo "make-certs.sh: no CA in $dir (run: $0 $dir ca)" >&2; exit 2; }
    san=""
    for addr in "$@"; do
      if [[ "$addr" =~ ^[0-9.]+$ || "$addr" == *:* ]]; then san+="${san:+,}IP:$addr"; else san+="${san:+,}DNS:$addr"; fi
    done
    ext="$(mktemp)"
    trap 'rm -f -- "$ext" "$dir/$name.csr"' EXIT
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n' "$san" > "$ext"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 \
      -subj "/CN=$name" -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
    openssl x509 -req -sha256 -days "$DAYS" -in "$dir/$name.csr" -CA "$dir/ca.pem" \
      -CAkey "$dir/ca.key" -CAcreateserial -out "$dir/$name.pem" -extfile "$ext" 2>/dev/null
    chmod 0644 "$dir/$name.pem"
    echo "$dir/$name.pem"
    ;;
  *) usage ;;
esac
