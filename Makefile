# Wrappers over the CMake presets and the scripts; see README.md.
JOBS ?= $(shell nproc)
BACKEND ?= mem

.PHONY: all build debug asan test unit fuzz demo cluster-start cluster-stop deps clean

all: build

deps:
	bash scripts/deps.sh

build:            ## release build (after make deps)
	cmake --preset release >/dev/null && cmake --build --preset release -j$(JOBS)

debug:
	cmake --preset debug >/dev/null && cmake --build --preset debug -j$(JOBS)

asan:
	cmake --preset asan >/dev/null && cmake --build --preset asan -j$(JOBS)

test:             ## deps, asan build, micro cluster, every test (what CI runs)
	bash scripts/test.sh

unit: asan        ## tests that need no cluster
	ctest --preset asan -LE rados

fuzz:             ## libFuzzer on the SQE parser for 60 s (clang)
	cmake --preset fuzz >/dev/null && cmake --build --preset fuzz -j$(JOBS) --target fuzz_sqe
	mkdir -p build/fuzz/corpus && cp test/fuzz/corpus/* build/fuzz/corpus/
	build/fuzz/test/fuzz_sqe -max_total_time=60 build/fuzz/corpus

demo: deps build  ## store, retrieve and list a key (BACKEND=rados uses the micro cluster)
	@if [ "$(BACKEND)" = rados ]; then bash scripts/ceph-dev.sh start; fi
	@eval "$$(bash scripts/ceph-dev.sh env)"; build/release/nkv-demo $(BACKEND)

cluster-start:
	bash scripts/ceph-dev.sh start

cluster-stop:
	bash scripts/ceph-dev.sh stop

clean:
	rm -rf build
