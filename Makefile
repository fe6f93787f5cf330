# SPDX-License-Identifier: Apache-2.0
# Wrappers over the CMake presets and the scripts; see README.md.
JOBS ?= $(shell nproc)
BACKEND ?= rados
PORT ?= 4420

.PHONY: all build build-all debug asan test unit fuzz demo run cluster-start cluster-stop deps clean

all: build

deps:
	bash scripts/deps.sh

build:            ## the tools only, in build/release: rados-nkv, nkv, nkv-ctl, libnkv, man pages (after make deps)
	cmake --preset release >/dev/null && cmake --build --preset tools -j$(JOBS)

build-all:        ## the whole release build: the tools and every test, fuzz replay and benchmark program
	cmake --preset release >/dev/null && cmake --build --preset release -j$(JOBS)

debug:
	cmake --preset debug >/dev/null && cmake --build --preset debug -j$(JOBS)

asan:
	cmake --preset asan >/dev/null && cmake --build --preset asan -j$(JOBS)

test:             ## deps, asan build, micro cluster, every test (what CI runs)
	bash scripts/test.sh

unit: asan        ## tests that need no cluster
	ctest --preset asan -LE "rados|netem|topology"

fuzz:             ## libFuzzer on the SQE parser for 60 s (clang)
	cmake --preset fuzz >/dev/null && cmake --build --preset fuzz -j$(JOBS) --target fuzz_sqe
	mkdir -p build/fuzz/corpus && cp test/fuzz/corpus/* build/fuzz/corpus/
	build/fuzz/test/fuzz_sqe -max_total_time=60 build/fuzz/corpus

demo: deps       ## micro cluster + rados-nkv daemon + nkv CLI walk-through (BACKEND=mem: no cluster)
	cmake --preset release >/dev/null && cmake --build --preset release -j$(JOBS) --target rados-nkv nkv
	BACKEND=$(BACKEND) bash scripts/demo.sh

run: deps         ## the daemon in the foreground on 127.0.0.1:$(PORT) (+ discovery on 8009); Ctrl-C stops it
	cmake --preset release >/dev/null && cmake --build --preset release -j$(JOBS) --target rados-nkv
	@if [ "$(BACKEND)" = rados ]; then bash scripts/ceph-dev.sh start; fi
	@if [ "$(BACKEND)" = rados ]; then eval "$$(bash scripts/ceph-dev.sh env)"; \
	  exec build/release/rados-nkv --backend rados --ceph-conf "$$NKV_CEPH_CONF" --keyring "$$NKV_CEPH_KEYRING" \
	    --client-id "$$NKV_CEPH_USER" --pool "$$NKV_CEPH_POOL" --listen 127.0.0.1:$(PORT); \
	else exec build/release/rados-nkv --backend mem --listen 127.0.0.1:$(PORT); fi

cluster-start:
	bash scripts/ceph-dev.sh start

cluster-stop:
	bash scripts/ceph-dev.sh stop

clean:
	rm -rf build
