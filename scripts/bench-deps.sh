#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian 12 packages the benchmark suite (bench/compare.sh) needs on top of
# scripts/deps.sh: Ceph RGW, Redis, the S3 and Redis client headers, gnuplot for the charts.
# Kept apart from scripts/deps.sh so CI stays lean (bench_smoke needs none of these).
# Idempotent: packages already present are skipped; `apt-get update` runs only when one is missing.
set -euo pipefail

PKGS=(
  radosgw                 # Ceph RGW S3 gateway (and radosgw-admin from ceph-common)
  redis-server            # Redis, the in-memory baseline
  libhiredis-dev          # bench/redis_bench.c
  libcurl4-openssl-dev    # bench/s3_bench.c (CURLOPT_AWS_SIGV4, curl >= 7.75)
  gnuplot-nox             # PNG charts
)

bash "$(dirname "$0")/apt-install.sh" bench-deps "${PKGS[@]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# The Debian packages start their own system services; the suite runs private instances instead.
for s in redis-server radosgw ceph-radosgw@*; do
  $SUDO systemctl disable --now "$s" >/dev/null 2>&1 || true
done
