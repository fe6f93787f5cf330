#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# control_group.sh - issue 12's gateway-group tests with the real binaries on the micro cluster:
# two rados-nkv daemons of one group (gw-a, gw-b), nkv-ctl against each, nkv as the host.
#   1. a subsystem and a namespace created through gateway A are served by B within 1 s; a value
#      stored through A is retrieved, identical, through B;
#   2. 2 x 20 host allowlist changes through A and B at the same time: all 40 present afterwards;
#   3. a cache namespace added through A (ns add --cache), its policy changed through B
#      (ns cache-policy), run by A within 5 s (usage through A);
#   4. both gateways restarted: `nkv-ctl subsystem list -o json` (the cache policy included) and
#      `listener list -o json` byte for byte the same before and after, B still serves the value and
#      runs the changed policy;
#   5. gateway C joins with a listener on 0.0.0.0 and an allowlist for the subsystem A and B seeded
#      without hosts on loopback: the group's state wins, and C does not serve that subsystem to any
#      host through 0.0.0.0 (Connect refused, an error logged) until it gets an allowlist;
#   6. a non-JSON entry written into the group's object (rados setomapval): changes exit 5 and say
#      how to repair, `group check` lists it, a gateway restarted now starts and serves the rest,
#      `group repair KEY` removes it (a well-formed key: exit 2) and changes are taken again;
#   7. two gateways without --gateway-name (both the host name) in another group: the second
#      exits 1 saying the name is taken, and the first still serves its own listener; killed
#      with SIGKILL, the first restarts under its name (a dead gateway does not answer).
#   control_group.sh PATH/rados-nkv PATH/nkv-ctl PATH/nkv
# Needs NKV_CEPH_CONF (else exit 77, or 1 with NKV_REQUIRE_RADOS=1). Prints ok/FAIL lines, then
# "N passed, N failed".
set -u
D=$1 CTL=$2 NKV=$3
pass=0 fail=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
bad() { echo "FAIL - $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
if [ -z "${NKV_CEPH_CONF:-}" ]; then
	[ "${NKV_REQUIRE_RADOS:-0}" = 1 ] && { echo "FAIL - no cluster (NKV_CEPH_CONF unset)"; echo "0 passed, 1 failed"; exit 1; }
	echo "skip: no cluster (NKV_CEPH_CONF unset)"; exit 77
fi
POOL=${NKV_CEPH_POOL:-nkv}
T=$(mktemp -d "${TMPDIR:-/tmp}/nkv-ctlgroup.XXXXXX")
G=ctlgroup-$$-$(date +%s)
NQN=nqn.2026-12.io.rados-nkv:group-$$
NQN2=nqn.2026-12.io.rados-nkv:group-hosts-$$
SEED=nqn.2026-12.io.rados-nkv:seed-$$
ALLOWED=nqn.2026-12.io.test:group-allowed
STRANGER=nqn.2026-12.io.test:group-stranger
declare -A PID PORT
cleanup() {
	for g in a b c d e f; do [ -n "${PID[$g]:-}" ] && kill -KILL "${PID[$g]}" 2>/dev/null; done
	wait 2>/dev/null
	rados -c "$NKV_CEPH_CONF" ${NKV_CEPH_KEYRING:+--keyring "$NKV_CEPH_KEYRING"} -p "$POOL" rm "rados_nkv.group.$G" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
ceph_args=(--ceph-conf "$NKV_CEPH_CONF" --client-id "${NKV_CEPH_USER:-admin}" ${NKV_CEPH_KEYRING:+--keyring "$NKV_CEPH_KEYRING"})

# start GW: a daemon of the group on a kernel-chosen NVMe/TCP port, gRPC on a Unix socket.
start() {
	local g=$1
	rm -f "$T/$g.pid"
	"$D" "${ceph_args[@]}" --group "$G" --group-pool "$POOL" --gateway-name "gw-$g" -l 127.0.0.1:0 -d none \
		--control "unix:$T/$g.sock" --pid-file "$T/$g.pid" -s "nqn.2026-12.io.rados-nkv:seed-$$" -p "$POOL" \
		--op-timeout 5 >>"$T/$g.log" 2>&1 &
	PID[$g]=$!
	for _ in $(seq 300); do [ -s "$T/$g.pid" ] && break; kill -0 "${PID[$g]}" 2>/dev/null || break; sleep 0.05; done
	PORT[$g]=$(grep -o 'NVMe/TCP on 127\.0\.0\.1:[0-9]*' "$T/$g.log" | tail -1 | sed 's/.*://')
	[ -s "$T/$g.pid" ] && [ -n "${PORT[$g]}" ]
}
stop() { kill -TERM "${PID[$1]}" 2>/dev/null; wait "${PID[$1]}" 2>/dev/null; PID[$1]=""; }
ctl() { local g=$1; shift; "$CTL" --server "unix:$T/$g.sock" "$@"; }

check "gateway A starts" start a
check "gateway B starts (joins the group)" start b
[ "$fail" = 0 ] || { cat "$T"/*.log; echo "$pass passed, $fail failed"; exit 1; }

# 1. A change through A, served by B.
t0=$(date +%s%N)
check "subsystem add through A" ctl a subsystem add "$NQN" --pool "$POOL" --allow-any-host
check "ns add through A" ctl a ns add "$NQN" --nsid 1 --rados-ns "$G"
served=""
for _ in $(seq 250); do
	if "$NKV" --timeout 2000 -s "${PORT[b]}" -n "$NQN" list-ns >/dev/null 2>&1; then served=$((($(date +%s%N) - t0) / 1000000)); break; fi
	sleep 0.02
done
echo "gateway B serves the new namespace ${served:-never} ms after the change through A (two nkv-ctl calls included)"
check "B serves it within 1 s (${served:-never} ms)" test -n "$served" -a "${served:-99999}" -le 1000
head -c 1048576 /dev/urandom >"$T/v"
check "Store through A" "$NKV" -s "${PORT[a]}" -n "$NQN" store k1 "$T/v"
check "Retrieve through B: the same 1 MiB" bash -c "'$NKV' -s ${PORT[b]} -n '$NQN' retrieve k1 '$T/r' && cmp -s '$T/v' '$T/r'"

# 2. Concurrent changes through both gateways (on an allowlist: on the allow-any-host subsystem a
#    host entry would restrict nothing and is refused, exit 5).
ctl a host allow "$NQN" "nqn.2026-12.io.test:a-0" >/dev/null 2>&1; rc=$?
check "host allow on the allow-any-host subsystem: refused (exit $rc)" [ "$rc" = 5 ]
check "subsystem add (an allowlist) through A" ctl a subsystem add "$NQN2" --pool "$POOL"
( for i in $(seq 20); do ctl a host allow "$NQN2" "nqn.2026-12.io.test:a-$i" >/dev/null || echo "a-$i failed"; done ) >"$T/ra" 2>&1 &
ra=$!
( for i in $(seq 20); do ctl b host allow "$NQN2" "nqn.2026-12.io.test:b-$i" >/dev/null || echo "b-$i failed"; done ) >"$T/rb" 2>&1 &
rb=$!
wait $ra $rb
check "40 concurrent host allow calls succeeded" test ! -s "$T/ra" -a ! -s "$T/rb"
n=$(ctl b -o json host list "$NQN2" | grep -o '"host_nqn":"nqn.2026-12.io.test:[ab]-[0-9]*"' | sort -u | wc -l)
check "all 40 hosts are in the group's state ($n)" [ "$n" = 40 ]
check "allow_any_host keeps the host connected: B still serves" "$NKV" -s "${PORT[b]}" -n "$NQN" exist k1

# 3. A cache namespace: added through A, its policy changed through B, run by A.
check "ns add --cache through A" ctl a ns add "$NQN" --nsid 2 --rados-ns "$G-cache" --cache --capacity 32M --eviction fifo
check "ns cache-policy through B" ctl b ns cache-policy "$NQN" 2 --capacity 48M
cap=""
for _ in $(seq 100); do
	cap=$(ctl a -o json usage "$NQN" 2 2>/dev/null | grep -o '"policy":{"capacity_bytes":"[0-9]*"' | grep -o '[0-9]*"$')
	[ "$cap" = '50331648"' ] && break
	sleep 0.05
done
check "A runs B's change: capacity 48 MiB, eviction kept (usage through A: ${cap:-none})" bash -c \
	"[ '$cap' = '50331648\"' ] && '$CTL' --server 'unix:$T/a.sock' usage '$NQN' 2 | grep -q 'eviction        fifo'"

# 4. Restart both gateways.
ctl a -o json subsystem list >"$T/ss.before"
ctl a -o json listener list >"$T/l.before"
stop a
stop b
check "gateway A restarts" start a
check "gateway B restarts" start b
# port 0 gave each restart a new port: the state's listener wins, and the log says so
check "A says its new -l listener is not in the state and closed" grep -q "from the flags is not in the group's state" "$T/a.log"
ctl a -o json subsystem list >"$T/ss.after"
ctl a -o json listener list >"$T/l.after"   # the same gateway: "active" is the answering one's view
ctl b -o json subsystem list >"$T/ss.after.b"
check "subsystem list -o json: the same after the restart" cmp -s "$T/ss.before" "$T/ss.after"
check "listener list -o json: the same after the restart" cmp -s "$T/l.before" "$T/l.after"
check "gateway B lists the same subsystems as A" cmp -s "$T/ss.after" "$T/ss.after.b"
check "B serves the value after the restart" bash -c "'$NKV' -s ${PORT[b]} -n '$NQN' retrieve k1 '$T/r2' && cmp -s '$T/v' '$T/r2'"
check "B runs the cache policy after the restart" bash -c "'$CTL' --server 'unix:$T/b.sock' -o json usage '$NQN' 2 | grep -q '\"policy\":{\"capacity_bytes\":\"50331648\"'"
# 6. A malformed entry in the group's object (before 5: it needs the subsystem 1-4 made).
OBJ=rados_nkv.group.$G
radosc() { rados -c "$NKV_CEPH_CONF" ${NKV_CEPH_KEYRING:+--keyring "$NKV_CEPH_KEYRING"} -p "$POOL" "$@"; }
radosc getomapval "$OBJ" epoch "$T/epoch" >/dev/null 2>&1
e=$(cat "$T/epoch" 2>/dev/null)
radosc setomapval "$OBJ" s/nqn.garbage '{{{not json' && radosc setomapval "$OBJ" epoch "$(printf %020d $((10#${e:-0} + 1)))"
ctl a ns set-ro "$NQN" 1 off >"$T/out" 2>&1
rc=$?
check "a change while the state holds a malformed entry: exit 5 ($rc), naming group check" \
	bash -c "[ $rc = 5 ] && grep -q 'group check' '$T/out'"
check "group check lists the entry" bash -c "'$CTL' --server 'unix:$T/a.sock' group check | grep -q 's/nqn.garbage'"
stop b
check "gateway B restarts on the malformed state" start b
check "and serves the rest of it" "$NKV" -s "${PORT[b]}" -n "$NQN" exist k1
ctl b group repair "s/$NQN" >/dev/null 2>&1
rc=$?
check "group repair refuses a well-formed entry (exit $rc)" [ "$rc" = 2 ]
check "group repair s/nqn.garbage" ctl b group repair s/nqn.garbage
check "group check: no malformed entry left" bash -c "'$CTL' --server 'unix:$T/a.sock' -o json group check | grep -q '\"malformed\":0'"
check "changes are taken again" ctl a ns set-ro "$NQN" 1 off

check "subsystem del through B" ctl b subsystem del "$NQN"
gone=""
for _ in $(seq 250); do
	"$NKV" --timeout 2000 -s "${PORT[a]}" -n "$NQN" list-ns >/dev/null 2>&1 || { gone=1; break; }
	sleep 0.02
done
check "A no longer serves it" [ -n "$gone" ]

# 5. Gateway C joins with a listener off loopback (0.0.0.0, reached here through 127.0.0.1).
check "A and B seeded the subsystem of their flags without hosts: no explicit any-host in the state" \
	bash -c "'$CTL' --server 'unix:$T/a.sock' -o json subsystem get '$SEED' | grep -q '\"allow_any_host\":false.*\"loopback_any_host\":true'"
PC=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
out=$(timeout 60 "$D" "${ceph_args[@]}" --group "$G" --group-pool "$POOL" --gateway-name gw-c -l "0.0.0.0:$PC" -d none \
	--control none -s "$SEED" -p "$POOL" -a "$ALLOWED" --check 2>&1); rc=$?
check "--check of gateway C reads the group's state: it wins, and the seeded subsystem is not served on 0.0.0.0 ($rc)" \
	bash -c "[ $rc = 0 ] && grep -q 'stored state: rados:$POOL/rados_nkv.group.$G, epoch [0-9]*: it wins' <<<'$out' &&
		grep -q 'warning: subsystem $SEED .*not served on 0.0.0.0:$PC' <<<'$out'"
"$D" "${ceph_args[@]}" --group "$G" --group-pool "$POOL" --gateway-name gw-c -l "0.0.0.0:$PC" -d none \
	--control "unix:$T/c.sock" --pid-file "$T/c.pid" -s "$SEED" -p "$POOL" -a "$ALLOWED" --op-timeout 5 >"$T/c.log" 2>&1 &
PID[c]=$!
for _ in $(seq 300); do [ -s "$T/c.pid" ] && break; kill -0 "${PID[c]}" 2>/dev/null || break; sleep 0.05; done
check "gateway C starts (joins with 0.0.0.0:$PC and an allowlist in its flags)" test -s "$T/c.pid"
as() { local q=$1; shift; timeout 30 "$NKV" --timeout 5000 -q "$q" -a 127.0.0.1 -s "$PC" -n "$SEED" "$@" >"$T/out" 2>&1; }
as "$STRANGER" exist k; rc=$?
check "C does not serve the seeded subsystem to a stranger through 0.0.0.0 (exit $rc: $(head -c 200 "$T/out"))" \
	bash -c "[ $rc != 0 ] && [ $rc != 2 ]"
check "C logs why, naming the fix" grep -q "gw-c/0.0.0.0/$PC is not on loopback: its Connects there are refused" "$T/c.log"
check "host allow through C gives it an allowlist" ctl c host allow "$SEED" "$ALLOWED"
as "$ALLOWED" exist k; rc=$?
check "the allowed host uses it through C's 0.0.0.0 (exit $rc: $(head -c 200 "$T/out"))" bash -c "[ $rc = 0 ] || [ $rc = 2 ]"
as "$STRANGER" exist k; rc=$?
check "the stranger is still refused (exit $rc)" bash -c "[ $rc != 0 ] && [ $rc != 2 ]"
ctl a listener add "0.0.0.0:$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')" \
	--gateway gw-c >/dev/null 2>&1; rc=$?
check "a listener off loopback for another gateway is checked against the group's state too: fine now (exit $rc)" [ "$rc" = 0 ]
stop c
stop a
stop b

# 7. Two gateways of one default name (the host name) in another group.
G2=$G-name
for g in e f; do
	rm -f "$T/$g.pid"
	"$D" "${ceph_args[@]}" --group "$G2" --group-pool "$POOL" -l 127.0.0.1:0 -d none --control "unix:$T/$g.sock" \
		--pid-file "$T/$g.pid" -s "$NQN-name" -p "$POOL" --op-timeout 5 >>"$T/$g.log" 2>&1 &
	PID[$g]=$!
	for _ in $(seq 300); do [ -s "$T/$g.pid" ] && break; kill -0 "${PID[$g]}" 2>/dev/null || break; sleep 0.05; done
	PORT[$g]=$(grep -o 'NVMe/TCP on 127\.0\.0\.1:[0-9]*' "$T/$g.log" | head -1 | sed 's/.*://')
done
check "the first gateway of the default name starts" test -s "$T/e.pid"
for _ in $(seq 300); do kill -0 "${PID[f]}" 2>/dev/null || break; sleep 0.05; done
if kill -0 "${PID[f]}" 2>/dev/null; then rc=running; stop f; else wait "${PID[f]}"; rc=$?; PID[f]=""; fi
check "the second exits 1 ($rc)" [ "$rc" = 1 ]
check "saying the name is taken" grep -q "is taken by a live gateway of the group" "$T/f.log"
check "the first still serves its listener" "$NKV" -s "${PORT[e]}" -n "$NQN-name" list-ns
# A gateway killed (its watch lingers in the OSD, unanswered) frees its name for its restart.
kill -KILL "${PID[e]}"; wait "${PID[e]}" 2>/dev/null
rm -f "$T/e.pid"
"$D" "${ceph_args[@]}" --group "$G2" --group-pool "$POOL" -l 127.0.0.1:0 -d none --control "unix:$T/e.sock" \
	--pid-file "$T/e.pid" -s "$NQN-name" -p "$POOL" --op-timeout 5 >>"$T/e2.log" 2>&1 &
PID[e]=$!
for _ in $(seq 300); do [ -s "$T/e.pid" ] && break; kill -0 "${PID[e]}" 2>/dev/null || break; sleep 0.05; done
check "a gateway killed with SIGKILL restarts under its name" test -s "$T/e.pid"
stop e
rados -c "$NKV_CEPH_CONF" ${NKV_CEPH_KEYRING:+--keyring "$NKV_CEPH_KEYRING"} -p "$POOL" rm "rados_nkv.group.$G2" 2>/dev/null
if [ "$fail" != 0 ]; then
	for g in a b c d e f; do [ -f "$T/$g.log" ] && { echo "--- $g.log"; tail -30 "$T/$g.log"; }; done
	diff "$T/ss.before" "$T/ss.after" | head -5
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
