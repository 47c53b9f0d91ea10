#!/usr/bin/env bash
# Installs every build and test dependency of mxrun from Debian 12's packages. Idempotent and quick
# when everything is present (one dpkg query, no apt-get call).
set -euo pipefail

PACKAGES=(
  g++ make cmake ninja-build pkgconf ccache
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev
  libabsl-dev libcli11-dev libspdlog-dev nlohmann-json3-dev catch2
  libtorch-dev libgloo-dev python3-torch
  systemd  # systemd-analyze, for the unit tests of the service files
  clang  # scripts/fuzz.sh: the libFuzzer targets (ASan + UBSan)
  openssl  # scripts/make-certs.sh: the certificates of mutual TLS (and the TLS tests)
  libhwloc-dev hwloc  # --numa-binding: the topology library (hwloc's lstopo writes test topologies)
  elfutils gdb  # eu-stack and gdb: stack dumps of hung workers (optional for mxrun itself)
  etcd-server etcd-client  # the tests' etcd members (rendezvous on etcd)
  python3-etcd  # torchrun's etcd-v2 backend: the reference of scripts/bench/etcd_ha.sh
  golang-etcd-server-dev golang-github-gogo-protobuf-dev golang-github-grpc-ecosystem-grpc-gateway-dev
                           # etcd's v3 .proto files and their imports, compiled into mxrun
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
