#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# control_multipath.sh - two gateways of one group as two paths to one NVM subsystem, with the real
# binaries on the micro cluster (rados-nkv gw-a and gw-b, nkv-ctl, nkv as the host):
#   1. controller IDs: each gateway gives IDs from a range of its own (gateway info), hosts
#      connected through A and through B get CNTLIDs inside their gateway's range, never the same;
#      B restarted under its name keeps its range;
#   2. the namespace: NMIC shared and the same NGUID through both gateways;
#   3. ANA: nkv-ctl ana get/set through either gateway; gateway A drained to inaccessible for ANA
#      group 1: I/O through A fails (path error 0302h), through B it goes on; bad states, groups
#      and gateways are refused; optimized again, A serves again;
#   4. the discovery log of either gateway lists the subsystem on both gateways' listeners, one
#      entry per port, and drops B's once B's listener is removed.
#   control_multipath.sh PATH/rados-nkv PATH/nkv-ctl PATH/nkv
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
T=$(mktemp -d "${TMPDIR:-/tmp}/nkv-mp.XXXXXX")
G=mp-$$-$(date +%s)
NQN=nqn.2026-12.io.rados-nkv:mp-$$
declare -A PID PORT
cleanup() {
	for g in a b; do [ -n "${PID[$g]:-}" ] && kill -KILL "${PID[$g]}" 2>/dev/null; done
	wait 2>/dev/null
	rados -c "$NKV_CEPH_CONF" ${NKV_CEPH_KEYRING:+--keyring "$NKV_CEPH_KEYRING"} -p "$POOL" rm "rados_nkv.group.$G" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
ceph_args=(--ceph-conf "$NKV_CEPH_CONF" --client-id "${NKV_CEPH_USER:-admin}" ${NKV_CEPH_KEYRING:+--keyring "$NKV_CEPH_KEYRING"})

# start GW [PORT]: a daemon of the group on 127.0.0.1:PORT (default: a kernel-chosen one).
start() {
	local g=$1 p=${2:-0}
	rm -f "$T/$g.pid"
	"$D" "${ceph_args[@]}" --group "$G" --group-pool "$POOL" --gateway-name "gw-$g" -l "127.0.0.1:$p" -d none \
		--control "unix:$T/$g.sock" --pid-file "$T/$g.pid" -p "$POOL" --op-timeout 5 >>"$T/$g.log" 2>&1 &
	PID[$g]=$!
	for _ in $(seq 300); do [ -s "$T/$g.pid" ] && break; kill -0 "${PID[$g]}" 2>/dev/null || break; sleep 0.05; done
	PORT[$g]=$(grep -o 'NVMe/TCP on 127\.0\.0\.1:[0-9]*' "$T/$g.log" | tail -1 | sed 's/.*://')
	[ -s "$T/$g.pid" ] && [ -n "${PORT[$g]}" ]
}
stop() { kill -TERM "${PID[$1]}" 2>/dev/null; wait "${PID[$1]}" 2>/dev/null; PID[$1]=""; }
ctl() { local g=$1; shift; "$CTL" --server "unix:$T/$g.sock" "$@"; }
# range GW: "MIN MAX" of the gateway's controller IDs (gateway info -o json).
range() { ctl "$1" -o json gateway info | python3 -c 'import json,sys; o=json.load(sys.stdin); print(o.get("cntlid_min",0), o.get("cntlid_max",0))'; }
cntlid() { "$NKV" --timeout 5000 -s "${PORT[$1]}" -n "$NQN" -o json identify | grep -o '"cntlid":[0-9]*' | cut -d: -f2; }

check "gateway A starts" start a
check "gateway B starts (joins the group)" start b
[ "$fail" = 0 ] || { cat "$T"/*.log; echo "$pass passed, $fail failed"; exit 1; }
check "subsystem add through A" ctl a subsystem add "$NQN" --pool "$POOL" --allow-any-host
check "ns add through A" ctl a ns add "$NQN" --nsid 1 --rados-ns "$G"
for _ in $(seq 250); do "$NKV" --timeout 2000 -s "${PORT[b]}" -n "$NQN" list-ns >/dev/null 2>&1 && break; sleep 0.02; done

# 1. Controller IDs.
read -r amin amax <<<"$(range a)"
read -r bmin bmax <<<"$(range b)"
echo "controller ID ranges: gw-a ${amin:-?}-${amax:-?}, gw-b ${bmin:-?}-${bmax:-?}"
check "each gateway has a range, and they do not overlap" \
	bash -c "[ '${amin:-0}' -ge 1 ] && [ '${bmin:-0}' -ge 1 ] && { [ '${amax:-0}' -lt '${bmin:-0}' ] || [ '${bmax:-0}' -lt '${amin:-0}' ]; }"
ids_a="" ids_b=""
for _ in 1 2 3; do ids_a="$ids_a $(cntlid a)"; ids_b="$ids_b $(cntlid b)"; done
echo "CNTLIDs through gw-a:$ids_a; through gw-b:$ids_b"
inside() { local lo=$1 hi=$2; shift 2; [ $# = 3 ] || return 1; for i; do [ "$i" -ge "$lo" ] && [ "$i" -le "$hi" ] || return 1; done; }
check "CNTLIDs through A are in A's range" inside "${amin:-1}" "${amax:-0}" $ids_a
check "CNTLIDs through B are in B's range" inside "${bmin:-1}" "${bmax:-0}" $ids_b
dup=$(printf '%s\n' $ids_a $ids_b | sort | uniq -d | head -1)
check "no CNTLID through A is one through B (${dup:-none shared})" test -z "$dup"
stop b
check "gateway B restarts" start b "${PORT[b]}"
check "B keeps its range across the restart ($(range b))" [ "$(range b)" = "$bmin $bmax" ]

# 2. The namespace through both.
ida=$("$NKV" -s "${PORT[a]}" -n "$NQN" -o json identify --ns --nsid 1)
idb=$("$NKV" -s "${PORT[b]}" -n "$NQN" -o json identify --ns --nsid 1)
nga=$(grep -o '"nguid":"[0-9a-f]*"' <<<"$ida") ngb=$(grep -o '"nguid":"[0-9a-f]*"' <<<"$idb")
echo "NGUID through gw-a: ${nga:-none}; through gw-b: ${ngb:-none}"
check "the same NGUID through both gateways" bash -c "[ -n '$nga' ] && [ '$nga' = '$ngb' ] && [ '$nga' != '\"nguid\":\"00000000000000000000000000000000\"' ]"
check "NMIC shared through both" bash -c "grep -q '\"nmic\":1' <<<'$ida' && grep -q '\"nmic\":1' <<<'$idb'"

# 3. ANA states through the control plane.
ctl a -o json ana get >"$T/ana.json" 2>&1
check "ana get: both gateways, group 1 optimized ($(head -c 300 "$T/ana.json"))" bash -c \
	"grep -q '{\"gateway\":\"gw-a\",\"ana_group\":1,\"state\":\"optimized\"}' '$T/ana.json' &&
	 grep -q '{\"gateway\":\"gw-b\",\"ana_group\":1,\"state\":\"optimized\"}' '$T/ana.json'"
head -c 4096 /dev/urandom >"$T/v"
check "Store through A while optimized" "$NKV" -s "${PORT[a]}" -n "$NQN" store ana-k "$T/v"
check "ana set 1 inaccessible --gateway gw-a, through B" ctl b ana set 1 inaccessible --gateway gw-a
ctl a ana get
out=""
for _ in $(seq 100); do
	out=$("$NKV" --timeout 5000 -s "${PORT[a]}" -n "$NQN" retrieve ana-k "$T/r" 2>&1) || break
	sleep 0.05
done
echo "Retrieve through the drained gateway A: $out"
check "Retrieve through A fails with the path error (0302h: asymmetric access inaccessible)" \
	bash -c "grep -qi 'inaccessible\|0x302\|302h' <<<'$out'"
check "Retrieve through B: the value stored through A" bash -c "'$NKV' -s ${PORT[b]} -n '$NQN' retrieve ana-k '$T/r' && cmp -s '$T/v' '$T/r'"
ctl a ana set 1 drained --gateway gw-a >"$T/out" 2>&1; rc=$?
check "a bad state name: exit 64 ($rc: $(head -c 120 "$T/out"))" [ "$rc" = 64 ]
ctl a ana set 33 optimized >"$T/out" 2>&1; rc=$?
check "ANA group 33: exit 64 ($rc)" [ "$rc" = 64 ]
ctl a ana set 1 optimized --gateway gw-nobody >"$T/out" 2>&1; rc=$?
check "an unknown gateway: exit 2, NOT_FOUND ($rc: $(head -c 120 "$T/out"))" [ "$rc" = 2 ]
check "ana set 1 optimized --gateway gw-a" ctl a ana set 1 optimized --gateway gw-a
ok=""
for _ in $(seq 100); do "$NKV" --timeout 5000 -s "${PORT[a]}" -n "$NQN" exist ana-k >/dev/null 2>&1 && { ok=1; break; }; sleep 0.05; done
check "A serves ns 1 again" test -n "$ok"

# 4. The discovery log of each gateway lists both gateways' listeners (one entry per port).
disc() { "$NKV" --timeout 5000 -s "${PORT[$1]}" -o json discover | python3 -c '
import json, sys
n = sys.argv[1]
print(" ".join(sorted(r["trsvcid"] for r in json.load(sys.stdin)["records"] if r["subnqn"] == n)))' "$NQN"; }
want=$(printf '%s\n' "${PORT[a]}" "${PORT[b]}" | sort | tr '\n' ' ' | sed 's/ $//')
da=$(disc a) db=$(disc b)
echo "discovery log through gw-a: ports [$da]; through gw-b: [$db]; listeners: [$want]"
check "A's discovery log lists the subsystem on A's and B's listener, once each" [ "$da" = "$want" ]
check "B's discovery log lists the subsystem on A's and B's listener, once each" [ "$db" = "$want" ]
"$NKV" --timeout 5000 -s "${PORT[a]}" discover >"$T/disc.txt" 2>&1
sed -n '1,40p' "$T/disc.txt"
check "listener del of B's listener through A" ctl a listener del "127.0.0.1:${PORT[b]}" --gateway gw-b
for _ in $(seq 100); do [ "$(disc a)" = "${PORT[a]}" ] && break; sleep 0.05; done
check "A's discovery log then lists A's listener only ($(disc a))" [ "$(disc a)" = "${PORT[a]}" ]

stop a
stop b
if [ "$fail" != 0 ]; then
	for g in a b; do [ -f "$T/$g.log" ] && { echo "--- $g.log"; tail -20 "$T/$g.log"; }; done
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
