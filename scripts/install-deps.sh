#!/usr/bin/env bash
# Installs every build and test dependency of mxrun (only what the demo builds and runs with
# --demo): Debian 12's packages, then the project's Python
# environment (.venv/: PyTorch 2.13 and what the tests and benchmarks use; scripts/python-env.sh
# names the versions). Idempotent and quick when everything is present (one dpkg query, no apt-get
# or pip call).
#
# PyTorch comes from PyPI, not Debian (whose libtorch-dev and python3-torch are 1.13 and pull ~50
# OpenCV/Qt/GDAL packages): the trainer is built against the LibTorch inside .venv's torch.
set -euo pipefail

# What builds mxrun and the trainer (all that scripts/demo.sh needs).
PACKAGES=(
  g++ make cmake ninja-build pkgconf ccache
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev
  libabsl-dev libcli11-dev libspdlog-dev nlohmann-json3-dev catch2
  libgloo-dev  # Gloo's headers, which the torch wheel lacks: docs/ARCHITECTURE.md says why they are safe
  python3 python3-venv  # the interpreter of .venv (scripts/python-env.sh)
  libhwloc-dev  # --numa-binding: the topology library
  libtomlplusplus-dev  # toml++ 3.3, used header-only: --config files (launcher/flags/config_file.cc)
  libssl-dev  # OpenSSL 3.0 (gRPC's own here): TLS files verified before serving (rendezvous/grpc/tls_verify.cc)
  golang-etcd-server-dev golang-github-gogo-protobuf-dev golang-github-grpc-ecosystem-grpc-gateway-dev
                           # etcd's v3 .proto files and their imports, compiled into mxrun
)
# What the tests and tools call besides (skipped by --demo).
TEST_PACKAGES=(
  systemd  # systemd-analyze, for the unit tests of the service files
  clang-format-14  # tests/check_format.py: the C++ code follows .clang-format
  clang libclang-rt-14-dev  # scripts/fuzz.sh: the libFuzzer targets (ASan + UBSan; the
                            # sanitizers' headers and runtimes are in clang 14's compiler-rt)
  openssl  # scripts/make-certs.sh: the certificates of mutual TLS (and the TLS tests)
  hwloc  # lstopo writes test topologies
  elfutils gdb  # eu-stack and gdb: stack dumps of hung workers (optional for mxrun itself)
  etcd-server etcd-client  # the tests' etcd members (rendezvous on etcd)
  iproute2 procps util-linux curl  # what the tests call: ip netns, ps/pkill, unshare/nsenter, curl
  zsh  # the completion tests load `mxrun --print-completion zsh` into a real zsh
  slurm-wlm munge  # tests/slurm_cluster.h: a private slurmctld, two slurmd and munged per test
  prometheus  # the metrics tests scrape a running job with a real Prometheus server
  chromium  # the status page test renders mxrun-master's page in a real headless browser
  patchelf  # scripts/gpu/bundle-mxrun.sh: mxrun with its libraries beside it, for a GPU machine
  dpkg-dev lintian systemd-container  # scripts/build-deb.sh and check-deb.sh: the Debian packages,
                                      # their lint, and a container booted with systemd to install them in
  unicode-data  # scripts/wheel/build-glibc-deps.sh: re2's Unicode tables, generated as Debian does
  debootstrap  # scripts/wheel/older-distro-root.sh: Debian 11, where check-wheel.sh runs the wheel
  libcpp-httplib-dev libcivetweb-dev  # scripts/bench/http_slow_clients.sh: the libraries mxrun's
                                      # HTTP server is compared with (not linked into mxrun)
)
case "${1:-}" in
  --demo) ;;
  "") PACKAGES+=("${TEST_PACKAGES[@]}") ;;
  *) echo "install-deps: unknown argument '$1' (accepted: --demo, or nothing for everything)" >&2; exit 2 ;;
esac

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  "$(dirname "${BASH_SOURCE[0]}")/python-env.sh" cpu >/dev/null
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
"$(dirname "${BASH_SOURCE[0]}")/python-env.sh" cpu >/dev/null
