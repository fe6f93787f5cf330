#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# compare.sh - rados-nkv side by side with what one would use instead, in one run on one micro cluster:
#   rados  raw librados (bench/rados_bench: aio write_full / read)          <- the baseline (ratio 1.00)
#   tcp    rados-nkv over NVMe/TCP           (nkv bench, rados backend)
#   shm    rados-nkv over shared memory      (nkv bench -t shm:..., rados backend)
#   shmpoll the same with NKV_SHM_NOTIFY=off: the host binds no kick or interrupt, so both sides poll
#          as before notifications (only with --systems; an A/B of the notifications in one run)
#   rgw    Ceph RGW S3 on the same cluster   (bench/s3_bench, SigV4)
#   mem    rados-nkv mem backend over TCP    (nkv bench)                    <- compared with redis
#   redis  redis-server                      (bench/redis_bench)
# Every point is read-after-write (store N values, then retrieve the same N, every value verified), for
# each value size and queue depth, with the same byte budget per point (and a time bound per phase).
# Writes bench/results/<date>.md (tables: each figure and its ratio to raw librados), <date>-*.png
# (gnuplot) and <date>.jsonl (every harness's JSON report). See docs/benchmarks.md.
# CPU: every point also records the CPU seconds of the gateway serving it (the rados-nkv daemon, radosgw,
# redis-server; none for raw librados) and of the OSD, per phase (the harness's watch=) and over the whole
# point (/proc/PID/stat before and after), next to the client's own; the page's "CPU per operation" tables.
# Copies: each rados-nkv runs with --metrics, and its copy counters (rados_nkv_copied_bytes_total and
# rados_nkv_data_bytes_total) are read before and after every point: the page's "Copies and gateway CPU
# per MiB" table (bytes copied per byte served, gateway CPU per MiB moved) and the .jsonl's "copies".
#
#   bench/compare.sh [--sizes "4K 256K 4M 32M"] [--qds "1 16 64"] [--systems "rados tcp shm rgw mem redis"]
#                    [--bytes 512M] [--time 2] [--out DIR] [--name NAME] [--smoke] [--no-build] [--keep]
#                    [--memstore] [--reps N]
#   the cluster is bluestore on a sparse file (ceph-dev.sh --durable) unless --memstore
#
#   --reps N  run every point N times (default 1), interleaved: rep 1 of every point and system, then
#             rep 2, ..., each rep starting the systems at a different one of them, so that slow drift of
#             the machine falls on every system alike; N times the measurement time. The report gives the
#             median of every figure over the reps and each ratio to raw librados as the median of the
#             per-rep ratios with its min-max, e.g. `0.86x (0.81-0.92)`, marked with a dagger where that
#             spread is wider than the ratio's distance from 1.00x (the run cannot tell the difference).
#             The .jsonl keeps every rep's report (field "rep"); <date>-summary.jsonl has the medians.
#
#   --smoke   CI: tiny sizes, QD 1 and 16, rados + tcp (+ shm), ~20 s; checks that every point ran and
#             verified its data (exit 1 if not); writes nothing into bench/results.
# A full run first runs scripts/deps.sh and scripts/bench-deps.sh (idempotent apt installs). Environment: NKV_BENCH_CEPH_DIR (/tmp/nkv-ceph-bench), BUILD (build/bench),
# NKV_BENCH_RADOS_NS (bench: the RADOS namespace of every system's objects).
set -euo pipefail
SELF=$(realpath "$0")   # before the cd: --help works from any directory, with any relative path
cd "$(dirname "$SELF")/.."
ROOT=$PWD
CMDLINE="bench/compare.sh${*:+ $*}"

SIZES="4K 256K 4M 32M"; QDS="1 16 64"; SYSTEMS="rados tcp shm rgw mem redis"
BYTES=512M; TIME=2; OUT=bench/results; NAME=""; SMOKE=0; BUILD_IT=1; KEEP=0; STORE=bluestore; REPS=1
while [ $# -gt 0 ]; do
	case "$1" in
	--sizes) SIZES="$2"; shift 2 ;;
	--qds) QDS="$2"; shift 2 ;;
	--systems) SYSTEMS="$2"; shift 2 ;;
	--bytes) BYTES="$2"; shift 2 ;;
	--time) TIME="$2"; shift 2 ;;
	--out) OUT="$2"; shift 2 ;;
	--name) NAME="$2"; shift 2 ;;
	--smoke) SMOKE=1; shift ;;
	--no-build) BUILD_IT=0; shift ;;
	--keep) KEEP=1; shift ;;
	--memstore) STORE=memstore; shift ;;
	--reps) REPS="${2:-}"; shift $(( $# > 1 ? 2 : 1 ))
		[[ "$REPS" =~ ^[1-9][0-9]{0,2}$ ]] || { echo "compare.sh: --reps wants a whole number from 1 to 999, not '$REPS'" >&2; exit 64; } ;;
	-h|--help) sed -n '2,/^set -euo/p' "$SELF" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "compare.sh: unknown argument '$1' (--help)" >&2; exit 64 ;;
	esac
done
if [ "$SMOKE" = 1 ]; then
	SIZES="4K 64K"; QDS="1 16"; SYSTEMS="rados tcp shm"; BYTES=8M; TIME=1
	OUT="${OUT_SMOKE:-$(mktemp -d /tmp/nkv-bench-smoke.XXXXXX)}"; [ -n "${OUT_SMOKE:-}" ] || SMOKE_TMP=$OUT
fi
# A full run installs what it needs (both scripts skip what is already there), so it is one command
# on a fresh machine; the CI smoke relies on scripts/deps.sh having run.
if [ "$SMOKE" = 0 ]; then
	bash scripts/deps.sh
	bash scripts/bench-deps.sh
fi
BUILD=${BUILD:-build/bench}
CDIR=${NKV_BENCH_CEPH_DIR:-/tmp/nkv-ceph-bench}
[ -n "$NAME" ] || NAME=$(date +%Y-%m-%d)
mkdir -p "$OUT"
RUN=$(mktemp -d /tmp/nkv-bench-run.XXXXXX)
JSONL="$OUT/$NAME.jsonl"
: >"$JSONL"
log() { echo "compare: $*" >&2; }
NOTES=()
note() { NOTES+=("$*"); log "$*"; }

# ---- build (release) ---------------------------------------------------------------------------------
if [ "$BUILD_IT" = 1 ]; then
	cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$RUN/cmake.log" 2>&1 || { cat "$RUN/cmake.log"; exit 1; }
	cmake --build "$BUILD" -j"$(nproc)" --target nkv rados-nkv $(
		for t in rados_bench s3_bench redis_bench; do
			grep -q "^$t:" "$BUILD/Makefile" 2>/dev/null && echo "$t"; done) >"$RUN/build.log" 2>&1 ||
		{ tail -30 "$RUN/build.log"; exit 1; }
fi
NKV=$BUILD/nkv; DAEMON=$BUILD/rados-nkv; RB=$BUILD/bench/rados_bench; SB=$BUILD/bench/s3_bench; DB=$BUILD/bench/redis_bench

# ---- services ----------------------------------------------------------------------------------------
PIDS=()
declare -A GW_PID=()   # system -> the pid of the gateway process serving it (CPU per operation)
declare -A GW_MET=()   # system -> its rados-nkv's metrics port (the copy counters), and the transport
declare -A GW_XPORT=([tcp]=tcp [shm]=shm [shmpoll]=shm [mem]=tcp)
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null || true
	done
	if [ "$KEEP" != 1 ]; then
		bash scripts/ceph-dev.sh stop --dir "$CDIR" >/dev/null 2>&1 || true
		# a durable cluster keeps its 10 GiB sparse file: remove what ceph-dev.sh built
		[ "$STORE" = bluestore ] && rm -rf "$CDIR"/{mon,osd,run,log,ceph.conf,keyring,mon.keyring,monmap,state}
	fi
	rm -rf "$RUN" ${SMOKE_TMP:+"$SMOKE_TMP"}
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_tcp() { # port seconds
	local end=$((SECONDS + $2))
	until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
		[ $SECONDS -lt "$end" ] || return 1; sleep 0.2
	done
}
want() { [[ " $SYSTEMS " == *" $1 "* ]]; }

# bluestore (--durable: a 10 GiB sparse file in the cluster dir) by default: memstore's space accounting
# goes negative after many small deletes (Ceph 16), the OSD then engages its full failsafe and every
# write hangs (the smoke test's ~12k small objects are enough). --memstore only for short experiments.
bash scripts/ceph-dev.sh start --dir "$CDIR" $([ "$STORE" = bluestore ] && echo --durable) >&2
eval "$(bash scripts/ceph-dev.sh env --dir "$CDIR")"
CONF=$NKV_CEPH_CONF; KEYRING=$NKV_CEPH_KEYRING; POOL=$NKV_CEPH_POOL
RNS=${NKV_BENCH_RADOS_NS:-bench}   # RADOS namespace for librados and rados-nkv
NQN=nqn.2026-11.io.rados-nkv:bench

if want rados && [ ! -x "$RB" ]; then note "rados: bench/rados_bench not built (librados-dev missing): skipped"; SYSTEMS=${SYSTEMS/rados/}; fi
if want tcp || want shm || want shmpoll; then
	P_TCP=$(free_port); SHM_SOCK=$RUN/nkv.sock; P_MET=$(free_port)
	shm_args=()
	if want shm || want shmpoll; then
		# the help texts are read whole first: piped into grep -q, a help longer than one pipe write gets
		# SIGPIPE when grep stops at the match, and pipefail then made a built shm look absent
		dhelp=$("$DAEMON" --help 2>&1 || true); chelp=$("$NKV" --help 2>&1 || true)
		if [[ "$dhelp" == *"--shm "* && "$chelp" == *"shm:"* ]]; then
			shm_args=(--shm "$SHM_SOCK")
		else
			note "shm: this rados-nkv/libnkv has no shared-memory transport yet: skipped"
			SYSTEMS=${SYSTEMS/shmpoll/}; SYSTEMS=${SYSTEMS/shm/}
		fi
	fi
	"$DAEMON" --backend rados --ceph-conf "$CONF" --keyring "$KEYRING" -l "127.0.0.1:$P_TCP" -d none \
		-s "$NQN" -p "$POOL" --ns "1:$RNS:64M" "${shm_args[@]}" --metrics "127.0.0.1:$P_MET" --log-level warn \
		2>"$RUN/rados-nkv.log" &
	PIDS+=($!); GW_PID[tcp]=$!; GW_PID[shm]=$!; GW_PID[shmpoll]=$!   # one daemon serves every transport
	GW_MET[tcp]=$P_MET; GW_MET[shm]=$P_MET; GW_MET[shmpoll]=$P_MET
	wait_tcp "$P_TCP" 30 || { cat "$RUN/rados-nkv.log"; exit 1; }
fi
if want mem || want redis; then
	P_MEM=$(free_port)
	if want mem; then
		P_MET_MEM=$(free_port)
		"$DAEMON" --backend mem -l "127.0.0.1:$P_MEM" -d none -s "$NQN" --ns 1::64M --log-level warn \
			--metrics "127.0.0.1:$P_MET_MEM" 2>"$RUN/rados-nkv-mem.log" &
		PIDS+=($!); GW_PID[mem]=$!; GW_MET[mem]=$P_MET_MEM
		wait_tcp "$P_MEM" 30 || { cat "$RUN/rados-nkv-mem.log"; exit 1; }
	fi
	if want redis; then
		if command -v redis-server >/dev/null && [ -x "$DB" ]; then
			P_REDIS=$(free_port)
			redis-server --port "$P_REDIS" --bind 127.0.0.1 --save "" --appendonly no --protected-mode no \
				--client-query-buffer-limit 4gb --proto-max-bulk-len 1gb --dir "$RUN" --logfile "$RUN/redis.log" &
			PIDS+=($!); GW_PID[redis]=$!
			wait_tcp "$P_REDIS" 30 || { cat "$RUN/redis.log"; exit 1; }
		else
			note "redis: redis-server or bench/redis_bench missing (scripts/bench-deps.sh): skipped"; SYSTEMS=${SYSTEMS/redis/}
		fi
	fi
fi
if want rgw; then
	if command -v radosgw >/dev/null && [ -x "$SB" ]; then
		P_RGW=$(free_port)
		mkdir -p "$RUN/rgw"
		# tcp_nodelay=1: without it every keep-alive request waits ~40 ms (Nagle + delayed ACK).
		radosgw -f -c "$CONF" -n client.admin --keyring "$KEYRING" \
			--rgw-frontends "beast endpoint=127.0.0.1:$P_RGW tcp_nodelay=1" --rgw-data "$RUN/rgw" \
			--log-file "$RUN/rgw.log" --admin-socket "$RUN/rgw.asok" --rgw-thread-pool-size 256 \
			>"$RUN/rgw.out" 2>&1 &
		PIDS+=($!); GW_PID[rgw]=$!
		if wait_tcp "$P_RGW" 120; then
			timeout 60 radosgw-admin -c "$CONF" --keyring "$KEYRING" user create --uid nkvbench \
				--display-name nkvbench --access-key NKVBENCHAK --secret NKVBENCHSECRET >/dev/null 2>&1 ||
				timeout 60 radosgw-admin -c "$CONF" --keyring "$KEYRING" user info --uid nkvbench >/dev/null
		else
			note "rgw: radosgw did not come up (see its log): skipped"; tail -20 "$RUN/rgw.out" >&2 || true
			SYSTEMS=${SYSTEMS/rgw/}
		fi
	else
		note "rgw: radosgw or bench/s3_bench missing (scripts/bench-deps.sh): skipped"; SYSTEMS=${SYSTEMS/rgw/}
	fi
fi

# ---- CPU time of the gateway and the OSD -------------------------------------------------------------
# The OSD of this cluster: ceph-dev.sh's pid file, trusted only if that pid is a ceph-osd started with this
# cluster's conf (a stale file's pid may be anyone's now); else the ceph-osd whose command line names it.
OSD_PID=$(cat "$CDIR/run/osd.0.pid" 2>/dev/null || true)
osd_cmd=$([[ "$OSD_PID" =~ ^[0-9]+$ ]] && tr '\0' ' ' <"/proc/$OSD_PID/cmdline" 2>/dev/null || true)
if [[ "$osd_cmd" != *ceph-osd" "* || "$osd_cmd" != *" -c $CONF "* ]]; then
	OSD_PID=$(pgrep -f "ceph-osd -c $CONF " | head -1 || true)
fi
[ -n "$OSD_PID" ] || note "cpu: no ceph-osd running with $CONF found: no OSD CPU figures"
CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() { # PID: its utime + stime (every thread) in clock ticks, or nothing when it is gone
	local s f
	[ -n "$1" ] && s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	s=${s##*) }   # the command name (field 2) may hold spaces: fields from 3 (state) on
	read -r -a f <<<"$s"
	echo $((f[11] + f[12]))   # fields 14 (utime) and 15 (stime)
}

# The copy counters of a rados-nkv (its --metrics port) as one JSON object {"tcp": {"h2c": [data, copied],
# "c2h": [...]}, "shm": ...}; nothing when there is no port or no answer (an older daemon without them).
copy_counters() { # port
	[ -n "$1" ] || return 0
	python3 - "$1" <<'EOF' 2>/dev/null || true
import json, re, sys, urllib.request
body = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=10).read().decode()
c = {}
for kind, tr, d, v in re.findall(r'^rados_nkv_(data|copied)_bytes_total\{transport="(\w+)",dir="(\w+)"\} (\d+)', body, re.M):
    c.setdefault(tr, {}).setdefault(d, [0, 0])[kind == "copied"] = int(v)
if c:
    print(json.dumps(c))
EOF
}

# ---- the points --------------------------------------------------------------------------------------
bytes_of() { python3 -c "import sys; s=sys.argv[1].upper(); m={'K':1<<10,'M':1<<20,'G':1<<30}; print(int(s[:-1])*m[s[-1]] if s[-1] in m else int(s))" "$1"; }
TOTAL=$(bytes_of "$BYTES")
FAILS=0
run_point() { # system size qd rep
	local sys=$1 size=$2 qd=$3 rep=$4 sb keys args out rc=0
	sb=$(bytes_of "$size"); keys=$((TOTAL / sb)); [ "$keys" -ge 1 ] || keys=1
	args=(mode=raw "qd=$qd" "size=$size" "keys=$keys" "bytes=$TOTAL" "time=$TIME" cleanup=1 progress=0 "prefix=$sys")
	# per phase: the harness samples the gateway's and the OSD's CPU time around each phase (watch=)
	local gw=${GW_PID[$sys]:-} watch=()
	[ -z "$gw" ] || watch+=("gw:$gw")
	[ -z "$OSD_PID" ] || watch+=("osd:$OSD_PID")
	[ ${#watch[@]} = 0 ] || args+=("watch=$(IFS=,; echo "${watch[*]}")")
	out=$RUN/point.json
	: >"$out"
	# and over the whole point (connect, the three phases, exit): a cross-check of the phases' sum
	local g0 o0 g1 o1 k0 k1
	k0=$(copy_counters "${GW_MET[$sys]:-}")
	g0=$(cpu_ticks "$gw"); o0=$(cpu_ticks "$OSD_PID")
	local T="timeout -k 5 $((TIME * 3 + 120))"
	case "$sys" in
	rados) $T "$RB" -c "$CONF" -k "$KEYRING" -p "$POOL" -N "$RNS" -o json "${args[@]}" >"$out" 2>"$RUN/err" || rc=$? ;;
	tcp) $T "$NKV" -s "$P_TCP" -n "$NQN" -o json bench "${args[@]}" >"$out" 2>"$RUN/err" || rc=$? ;;
	shm) $T "$NKV" -t "shm:$SHM_SOCK" -o json bench "${args[@]}" >"$out" 2>"$RUN/err" || rc=$? ;;
	shmpoll) NKV_SHM_NOTIFY=off $T "$NKV" -t "shm:$SHM_SOCK" -o json bench "${args[@]}" >"$out" 2>"$RUN/err" || rc=$? ;;
	rgw) $T "$SB" -e "http://127.0.0.1:$P_RGW" -b nkvbench -A NKVBENCHAK -S NKVBENCHSECRET -o json "${args[@]}" \
		>"$out" 2>"$RUN/err" || rc=$? ;;
	mem) $T "$NKV" -s "$P_MEM" -n "$NQN" -o json bench "${args[@]}" >"$out" 2>"$RUN/err" || rc=$? ;;
	redis) $T "$DB" -p "$P_REDIS" -o json "${args[@]}" >"$out" 2>"$RUN/err" || rc=$? ;;
	esac
	g1=$(cpu_ticks "$gw"); o1=$(cpu_ticks "$OSD_PID")
	k1=$(copy_counters "${GW_MET[$sys]:-}")
	if [ "$rc" != 0 ] || ! grep -q '"ok":true' "$out"; then
		FAILS=$((FAILS + 1))
		log "FAILED: $sys size=$size qd=$qd${REP_TAG:+ rep $rep} (exit $rc)"; tail -20 "$RUN/err" >&2 || true
		for f in "$RUN"/*.log; do [ -f "$f" ] && { echo "==> $f <==" >&2; tail -20 "$f" >&2; }; done
	fi
	python3 - "$sys" "$size" "$qd" "$rc" "$out" "$rep" "$CLK_TCK" "$gw" "$g0" "$g1" "$OSD_PID" "$o0" "$o1" \
		"${GW_XPORT[$sys]:-}" "$k0" "$k1" >>"$JSONL" <<'EOF'
import json, sys
sysname, size, qd, rc, path, repno, hz, gw, g0, g1, osd, o0, o1, xport, k0, k1 = sys.argv[1:]
try:
    rep = json.load(open(path))
except Exception as e:
    rep = {"ok": False, "error": "no report: %s" % e}
rep.update({"system": sysname, "size_arg": size, "qd_arg": int(qd), "exit": int(rc), "rep": int(repno)})
# CPU seconds over the whole point; null where there is no such process (raw librados has no gateway)
# or it was gone at either end
for key, pid, a, b in (("gw", gw, g0, g1), ("osd", osd, o0, o1)):
    rep[key + "_pid"] = int(pid) if pid else None
    rep[key + "_cpu_s"] = (int(b) - int(a)) / int(hz) if a and b else None
# the gateway's copy counters over the point, for its transport: h2c moves in the store phase, c2h in the
# retrieve phase (the delete phase moves no data); null without a rados-nkv that has them
rep["copies"] = None
if xport and k0 and k1:
    a, b = json.loads(k0).get(xport, {}), json.loads(k1).get(xport, {})
    rep["copies"] = {"transport": xport}
    for d in ("h2c", "c2h"):
        x, y = a.get(d, [0, 0]), b.get(d, [0, 0])
        rep["copies"][d] = {"data": y[0] - x[0], "copied": y[1] - x[1]}
print(json.dumps(rep))
EOF
	# one line of progress for people
	python3 - "$out" "$sys" "$size" "$qd" "${REP_TAG:+rep $rep/$REPS }" >&2 <<'EOF' || true
import json, sys
r = json.load(open(sys.argv[1])); d = {x["phase"]: x for x in r["results"]}
w, g = d.get("write", {}), d.get("read", {})
print("compare: " + sys.argv[5] + "%-5s %5s qd %-2s  store %8.1f MB/s p50 %9.1f us | retrieve %8.1f MB/s p50 %9.1f us  verified %d%s" % (
    sys.argv[2], sys.argv[3], sys.argv[4], w.get("mb_s", 0), w.get("lat_us", {}).get("p50", 0),
    g.get("mb_s", 0), g.get("lat_us", {}).get("p50", 0), r.get("verified", 0), "" if r.get("ok") else "  FAILED"))
EOF
}

# Warm-up, not recorded: a fresh RGW creates its data pools on the first PUT (seconds), and every
# daemon's first requests pay for connections and allocations; each system stores and retrieves 64 small
# values first, so the first measured point does not carry that.
for sys in $SYSTEMS; do
	case "$sys" in
	rados) "$RB" -c "$CONF" -k "$KEYRING" -p "$POOL" -N "$RNS" mode=raw qd=4 keys=64 size=4K progress=0 prefix=warm ;;
	tcp) "$NKV" -s "$P_TCP" -n "$NQN" bench mode=raw qd=4 keys=64 size=4K progress=0 prefix=warm ;;
	shm) "$NKV" -t "shm:$SHM_SOCK" bench mode=raw qd=4 keys=64 size=4K progress=0 prefix=warm ;;
	shmpoll) NKV_SHM_NOTIFY=off "$NKV" -t "shm:$SHM_SOCK" bench mode=raw qd=4 keys=64 size=4K progress=0 prefix=warm ;;
	rgw) "$SB" -e "http://127.0.0.1:$P_RGW" -b nkvbench -A NKVBENCHAK -S NKVBENCHSECRET mode=raw qd=4 keys=64 size=4K progress=0 prefix=warm ;;
	mem) "$NKV" -s "$P_MEM" -n "$NQN" bench mode=raw qd=4 keys=64 size=4K progress=0 prefix=warm ;;
	redis) "$DB" -p "$P_REDIS" mode=raw qd=4 keys=64 size=4K progress=0 prefix=warm ;;
	esac >/dev/null 2>"$RUN/err" || { log "warm-up of $sys failed:"; tail -5 "$RUN/err" >&2; }
done

T0=$SECONDS
REP_TAG=""; [ "$REPS" = 1 ] || REP_TAG=1   # progress and failure lines name the rep only when there are several
log "systems:${SYSTEMS// / } | sizes: $SIZES | qd: $QDS | $BYTES per point, ${TIME}s per phase${REP_TAG:+ | $REPS reps, interleaved}"
# Reps outermost: rep 1 of every point, then rep 2, ..., so drift of a shared machine over the run lands on
# every system alike; within a rep the systems' order rotates by one per rep, so no system is always the
# first (or the last) to run at a point. One rep is the plain order.
read -r -a SYSLIST <<<"$SYSTEMS"
for rep in $(seq 1 "$REPS"); do
	ORDERED=()
	for i in "${!SYSLIST[@]}"; do ORDERED+=("${SYSLIST[$(((i + rep - 1) % ${#SYSLIST[@]}))]}"); done
	for size in $SIZES; do
		for qd in $QDS; do
			for sys in "${ORDERED[@]}"; do run_point "$sys" "$size" "$qd" "$rep"; done
		done
	done
done
ELAPSED=$((SECONDS - T0))

if [ "$SMOKE" = 1 ]; then
	n=$(wc -l <"$JSONL")
	log "smoke: $n points, $FAILS failed, ${ELAPSED}s"
	python3 - "$JSONL" <<'EOF'
import json, sys
bad = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    ok = r.get("ok") and r.get("verified", 0) > 0 and r.get("mismatches", 1) == 0 and r.get("errors", 1) == 0
    # every phase carries the client's CPU per op, and the OSD's (and, but for librados, the gateway's)
    # CPU per phase and over the point
    want = ["osd"] + ([] if r["system"] == "rados" else ["gw"])
    for ph in r.get("results", []):
        cpu_ok = ph.get("cpu_us_per_op", 0) > 0 and all(
            ph.get("watch", {}).get(k, {}).get("cpu_s") is not None for k in want)
        if not cpu_ok:
            print("FAIL %s %s qd %s: phase %s lacks CPU figures: %s" % (
                r["system"], r["size_arg"], r["qd_arg"], ph.get("phase"),
                {k: v for k, v in ph.items() if k.startswith("cpu") or k == "watch"}))
        ok = ok and cpu_ok
    ok = ok and all(r.get(k + "_cpu_s") is not None for k in want)
    # rados-nkv's points carry its copy counters over the point: data both ways, and copies
    if r["system"] != "rados":
        cp = r.get("copies") or {}
        cp_ok = all((cp.get(d) or {}).get("data", 0) > 0 and 0 <= cp[d]["copied"] <= 3 * cp[d]["data"]
                    for d in ("h2c", "c2h"))
        if not cp_ok:
            print("FAIL %s %s qd %s: no copy counters over the point: %s" % (
                r["system"], r["size_arg"], r["qd_arg"], r.get("copies")))
        ok = ok and cp_ok
    if not ok:
        bad += 1
    print("%s %-5s %-4s qd %-2s verified %s%s" % ("ok  " if ok else "FAIL", r["system"], r["size_arg"], r["qd_arg"],
                                               r.get("verified"), " rep %d" % r["rep"] if r.get("rep", 1) > 1 else ""))
sys.exit(1 if bad else 0)
EOF
	exit $(( FAILS > 0 ))
fi

# ---- report ------------------------------------------------------------------------------------------
MACHINE="$(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(free -g | awk '/^Mem:/{print $2}') GiB RAM, $(uname -sr), $(. /etc/os-release; echo "$PRETTY_NAME")"
VERSIONS="ceph $(ceph --version 2>/dev/null | awk '{print $3}'), redis $(redis-server --version 2>/dev/null | sed -n 's/.*v=\([^ ]*\).*/\1/p'), curl $(curl --version 2>/dev/null | awk 'NR==1{print $2}'), rados-nkv $(git rev-parse --short HEAD)"
BENCH_STORE="$([ "$STORE" = bluestore ] && echo "bluestore on a 10 GiB sparse file" || echo "memstore")" python3 bench/report.py "$JSONL" "$OUT/$NAME.md" "$OUT/$NAME" "$CMDLINE" "$MACHINE" "$VERSIONS" "$ELAPSED" \
	"$BYTES" "$TIME" "${NOTES[@]+"${NOTES[@]}"}"
if command -v gnuplot >/dev/null; then
	for g in "$OUT/$NAME"-*.gp; do gnuplot "$g" || note "gnuplot failed on $g"; done
	rm -f "$OUT/$NAME"-*.gp "$OUT/$NAME"-*.dat
else
	note "gnuplot missing (scripts/bench-deps.sh): no charts"
fi
log "wrote $OUT/$NAME.md ($FAILS failed points, ${ELAPSED}s of measurements)"
exit $(( FAILS > 0 ))
