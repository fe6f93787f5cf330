#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs every Debian 12 package the build, the tests and the micro Ceph cluster need.
# Idempotent: packages already present are skipped, and `apt-get update` runs at most once per call,
# only when something is missing.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config git
  clang libclang-rt-14-dev          # libFuzzer + sanitizer runtimes (fuzz preset)
  libcmocka-dev                     # unit tests
  librados-dev libisal-dev libjson-c-dev                      # rados backend
  libssl-dev                        # OpenSSL 3: NVMe/TCP TLS (libssl) in libnkv and the daemon, SHA-256 (long names)
  ceph-mon ceph-osd ceph-common     # micro cluster (scripts/ceph-dev.sh)
  procps iproute2 python3           # ceph-dev.sh: pgrep/ss for free ports, json parsing
  scdoc                             # man pages (man/*.scd -> roff; packaging/install.cmake)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler openssl   # control plane (src/control, nkv-ctl); openssl: test certificates
  python3-pytest python3-numpy python3-torch python3-pip python3-setuptools   # python/ (rados_nkv) tests
  python3-tqdm                      # nkv-weights / the vLLM loader: progress bars (and their test)
  libmicrohttpd-dev                 # the daemon's --metrics (Prometheus) endpoint
  python3-prometheus-client         # metrics_* tests: the Prometheus text parser
  libzmq3-dev libmsgpack-dev        # the daemon's --events (ZMQ PUB, msgpack payloads)
  libsystemd-dev                    # the daemon's readiness notification (sd_notify; the unit's Type=notify)
  curl                              # the README's metrics example (test readme_blocks)
  python3-zmq python3-msgpack       # events_* tests: the subscriber and the payload decoder
)

bash "$(dirname "$0")/apt-install.sh" deps "${PKGS[@]}"
