#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Linux kernel interop: the Debian 6.1 kernel's NVMe/TCP host (nvme-tcp + nvme-cli, in a QEMU TCG
# guest) attaches to rados-nkv and drives KV commands through /dev/ngXnY (test/interop/guest.sh).
#   test/interop/run.sh mem|rados [RADOS_NKV_BINARY]
#   test/interop/run.sh auth [RADOS_NKV_BINARY]
#   test/interop/run.sh mpath [RADOS_NKV_BINARY]
# mem|rados also serve a subsystem that requires DH-HMAC-CHAP from the guest's host NQN: Debian's 6.1
# has no in-band authentication (CONFIG_NVME_AUTH unset), so it must be refused, secret or not.
# auth boots Debian 12's other kernel, 6.12 (linux-image-6.12-amd64, CONFIG_NVME_HOST_AUTH), against
# three subsystems that require DH-HMAC-CHAP (mem backend): nvme connect --dhchap-secret (and
# --dhchap-ctrl-secret), every hash function, DH groups null, ffdhe2048 and ffdhe3072, Store/Retrieve,
# re-authentication through sysfs, and a wrong secret, a wrong controller secret and no secret refused.
# mpath (rados backend, needs the cluster) starts two gateways of one group (--group, state in RADOS)
# on this machine's IPv4 address (the default route's source), which the guest reaches through
# QEMU's user network (the discovery log gives each listener's own address, and 127.0.0.1 would be
# the guest's own):
# Linux native multipath on 6.1. The guest runs `nvme connect-all` against gateway A's discovery
# log, finds both paths under one subsystem, drives KV commands through the multipath head's
# /dev/ngXnY; on NKV-MPATH-DRAIN / NKV-MPATH-UNDRAIN this script sets B's ANA state of group 1 to
# non-optimized / optimized (nkv-ctl ana set, through A). Then a Store/Retrieve loop: on
# NKV-MPATH-KILL (the guest then waits 1 s) this script stops gateway B (SIGSTOP) until a command of
# the guest is in flight on it, then kills it (SIGKILL), and the loop, retrying each failed
# command, goes on through gateway A.
# mem|rados also check namespace notices: the daemon serves its control plane on a Unix socket in the
# run's directory; when the guest, connected, prints NKV-AEN-ADD / NKV-AEN-DEL on the console, this
# script runs `nkv-ctl ns add NQN --nsid 3` / `nkv-ctl ns del NQN 3`, and the guest waits for the
# kernel to rescan (Namespace Attribute Changed, log 04h) and /dev/ngXnY of NSID 3 to come and go.
# Environment:
#   NKV_DAEMON            rados-nkv binary (default: build/interop/rados-nkv, then build/*/rados-nkv)
#   NKV_CTL               nkv-ctl binary (default: next to the daemon, or its build tree's
#                         tools/nkv-ctl/nkv-ctl); none there: the namespace notice checks are skipped
#   NKV_CEPH_CONF, NKV_CEPH_KEYRING, NKV_CEPH_USER, NKV_CEPH_POOL   the cluster (rados backend)
#   NKV_REQUIRE_RADOS=1   rados without a cluster fails instead of skipping (77)
#   NKV_REQUIRE_INTEROP=1 a failed preparation (no apt, no QEMU) fails instead of skipping (77)
#   NKV_INTEROP_TIMEOUT   hard limit for the guest in seconds (default 180)
#   NKV_INTEROP_KEEP=DIR  keep the logs (serial console, daemon) in DIR
# Prints each guest check as "ok - ..." / "FAIL - ...", then "N passed, N failed". Exit 0/1/77.
# Everything it starts (daemon, QEMU) is killed on exit.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BACKEND="${1:-}"
case "$BACKEND" in
  mem|rados) SUITE=kv ;;
  auth) SUITE=auth; BACKEND=mem ;;
  mpath) SUITE=mpath; BACKEND=rados ;;
  *) echo "usage: $0 mem|rados|auth|mpath" >&2; exit 64 ;;
esac
[ "$SUITE" = auth ] && export NKV_INTEROP_KERNEL_PKG="${NKV_INTEROP_KERNEL_PKG:-linux-image-6.12-amd64}"
TIMEOUT="${NKV_INTEROP_TIMEOUT:-180}"
t_start=$(date +%s.%N)
elapsed() { awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "interop[${SUITE/#kv/$BACKEND}]: $*"; }
skip_or_fail() { # $1 = variable that turns a skip into a failure
  if [ "${!1:-0}" = 1 ]; then say "$2 (and $1=1): FAIL"; echo "0 passed, 1 failed"; exit 1; fi
  say "$2: skipped"; exit 77
}

# The daemon.
DAEMON="${2:-${NKV_DAEMON:-}}"
if [ -z "$DAEMON" ]; then
  for d in "$ROOT/build/interop/rados-nkv" "$ROOT"/build/*/rados-nkv; do
    [ -x "$d" ] && { DAEMON="$d"; break; }
  done
fi
[ -x "$DAEMON" ] || { say "no rados-nkv binary (set NKV_DAEMON)"; echo "0 passed, 1 failed"; exit 1; }

# nkv-ctl, for the namespace notice checks (builds without grpc++ have none: skipped, not failed).
CTL="${NKV_CTL:-}"
if [ -z "$CTL" ]; then
  for c in "$(dirname "$DAEMON")/nkv-ctl" "$(dirname "$DAEMON")/tools/nkv-ctl/nkv-ctl"; do
    [ -x "$c" ] && { CTL="$c"; break; }
  done
fi
[ -z "$CTL" ] || [ -x "$CTL" ] || { say "NKV_CTL=$CTL is not executable"; echo "0 passed, 1 failed"; exit 1; }
AEN=1   # or why the checks are skipped (the guest prints it)
[ -n "$CTL" ] || AEN="no nkv-ctl next to $DAEMON (set NKV_CTL)"
[ "$SUITE" = kv ] || AEN="not in this suite"

if [ "$BACKEND" = rados ] && [ -z "${NKV_CEPH_CONF:-}" ]; then
  skip_or_fail NKV_REQUIRE_RADOS "no cluster (NKV_CEPH_CONF unset)"
fi

# Kernel + initramfs (cached; a no-op after the first time).
prep_out="$(bash "$HERE/prepare.sh" 2>&1)" || { echo "$prep_out" >&2; skip_or_fail NKV_REQUIRE_INTEROP "preparation failed"; }
IDIR="$(echo "$prep_out" | sed -n 's/^NKV_INTEROP_DIR=//p' | tail -1)"
t_prep=$(elapsed)

# mpath: the gateways' address, one the guest can reach by the discovery log's TRADDR: the source
# address of the default route (a route lookup, nothing is sent), else the first global address
# (other tests add and remove addresses of their own, on veth pairs, say, at any time).
HOSTIP=""
if [ "$SUITE" = mpath ]; then
  HOSTIP=$(ip -4 -o route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
  [ -n "$HOSTIP" ] || HOSTIP=$(ip -4 -o addr show scope global 2>/dev/null | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
  [ -n "$HOSTIP" ] || skip_or_fail NKV_REQUIRE_INTEROP "no global IPv4 address on this machine for the gateways"
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/nkv-interop-$BACKEND.XXXXXX")"
DAEMON_PID=""
GWB_PID=""   # mpath: gateway B (DAEMON_PID is gateway A)
GROUP=""     # mpath: the group, whose state object is removed at the end
QEMU_PID=""
cleanup() {
  local p
  for p in $QEMU_PID $DAEMON_PID $GWB_PID; do
    kill -TERM "$p" 2>/dev/null || continue
    kill -CONT "$p" 2>/dev/null   # mpath: gateway B may be stopped
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  if [ -n "$GROUP" ]; then
    rados -c "$NKV_CEPH_CONF" --id "${NKV_CEPH_USER:-admin}" ${NKV_CEPH_KEYRING:+--keyring "$NKV_CEPH_KEYRING"} \
      -p "$POOL" rm "rados_nkv.group.$GROUP" 2>/dev/null
  fi
  if [ -n "${NKV_INTEROP_KEEP:-}" ]; then
    mkdir -p "$NKV_INTEROP_KEEP" && cp "$WORK"/*.log "$NKV_INTEROP_KEEP"/ 2>/dev/null
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# NSID 2 is a second, read-only view of NSID 1's RADOS namespace (the README's `--ns 1:tenant-a:64M
# --ns 2:tenant-a::ro`): the kernel must accept both, which needs distinct namespace IDs.
# Free ports: ask the kernel for two ephemeral ports, then let the daemon bind them (retried if
# somebody else took one in between).
free_port() { python3 -c 'import socket, sys; s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1])' "${1:-127.0.0.1}"; }
NQN="nqn.2026-11.io.rados-nkv:interop-$BACKEND"
[ "$SUITE" = mpath ] && NQN="$NQN-mpath"
RADOS_NS=""
[ "$BACKEND" = rados ] && RADOS_NS="interop-$$-$(date +%s)"
# The subsystem comes from a JSON configuration, the only place Exec allowlists live (issue 13): NSID 1
# allowlists vendor opcode 82h = hello.say_hello (read, bound input "rados-", the host's appended);
# the guest sends 82h with inline "nkv" and 9Ah, which is not allowlisted. Flags still set the rest
# (and would override).
# DH-HMAC-CHAP: secrets for the guest's host NQN, made by nvme-cli (`nvme gen-dhchap-key`, the tool
# an operator uses), with each transformation hash (hh 00 to 03). The subsystems that require them
# (allowed_hosts objects) have two namespaces like the main one, so find_dev sees both.
GNQN="$(cat "$IDIR/hostnqn")"
key() { nvme gen-dhchap-key --hmac="$1" --nqn="$GNQN"; }
KA=$(key 1) KAC=$(key 0) KB=$(key 3) KBC=$(key 2) KC=$(key 2) KW=$(key 1)
for k in "$KA" "$KAC" "$KB" "$KBC" "$KC" "$KW"; do
  case "$k" in DHHC-1:*) ;; *) say "nvme gen-dhchap-key failed: $k"; echo "0 passed, 1 failed"; exit 1 ;; esac
done
POOL="${NKV_CEPH_POOL:-nkv}"
two_ns() { echo "\"namespaces\": [ { \"nsid\": 1, \"rados_namespace\": \"$RADOS_NS\", \"max_value\": \"4M\" },
    { \"nsid\": 2, \"rados_namespace\": \"$RADOS_NS\", \"max_value\": \"4M\", \"read_only\": true } ]"; }
if [ "$SUITE" = auth ]; then
  # a: defaults (SHA-256 first, ffdhe2048 first), controller secret for bidirectional; b: SHA-512 and
  # the null group; c: SHA-384 and ffdhe3072, no controller secret.
  cat >"$WORK/rados-nkv.json" <<EOF
{ "subsystems": [
  { "nqn": "$NQN-a", "pool": "$POOL", "allowed_hosts": [ { "nqn": "$GNQN", "dhchap_key": "$KA", "dhchap_ctrl_key": "$KAC" } ], $(two_ns) },
  { "nqn": "$NQN-b", "pool": "$POOL", "allowed_hosts": [ { "nqn": "$GNQN", "dhchap_key": "$KB", "dhchap_ctrl_key": "$KBC",
      "dhchap_hash": "sha512", "dhchap_dhgroup": "null" } ], $(two_ns) },
  { "nqn": "$NQN-c", "pool": "$POOL", "allowed_hosts": [ { "nqn": "$GNQN", "dhchap_key": "$KC",
      "dhchap_hash": ["sha384"], "dhchap_dhgroup": ["ffdhe3072"] } ], $(two_ns) } ] }
EOF
elif [ "$SUITE" = mpath ]; then
  # Both gateways read this file; the first seeds the group's state with it, the second finds that
  # state and serves it. Off loopback, a subsystem needs an allowlist: the guest's host NQN.
  cat >"$WORK/rados-nkv.json" <<EOF
{ "subsystems": [ { "nqn": "$NQN", "pool": "$POOL", "allowed_hosts": [ "$GNQN" ], "namespaces": [
    { "nsid": 1, "rados_namespace": "$RADOS_NS", "max_value": "4M" } ] } ] }
EOF
else
  cat >"$WORK/rados-nkv.json" <<EOF
{ "subsystems": [ { "nqn": "$NQN", "pool": "$POOL", "namespaces": [
    { "nsid": 1, "rados_namespace": "$RADOS_NS", "max_value": "4M",
      "exec": [ { "opcode": "0x82", "class": "hello", "method": "say_hello", "mode": "read", "input": "rados-",
                  "append_host_input": true } ] },
    { "nsid": 2, "rados_namespace": "$RADOS_NS", "max_value": "4M", "read_only": true } ] },
  { "nqn": "$NQN-auth", "pool": "$POOL", "allowed_hosts": [ { "nqn": "$GNQN", "dhchap_key": "$KA" } ], $(two_ns) } ] }
EOF
fi
chmod 600 "$WORK/rados-nkv.json"   # it holds secrets
args=(-c "$WORK/rados-nkv.json" --backend "$BACKEND" --log-level debug --grace-ms 2000)
[ "$AEN" = 1 ] && args+=(--control "unix:$WORK/ctl.sock")
if [ "$BACKEND" = rados ]; then
  args+=(--ceph-conf "$NKV_CEPH_CONF" --client-id "${NKV_CEPH_USER:-admin}" --op-timeout 20)
  [ -n "${NKV_CEPH_KEYRING:-}" ] && args+=(--keyring "$NKV_CEPH_KEYRING")
fi
# start_daemon NAME ADDR DISCOVERY ARGS...: the daemon with ARGS on a free port of ADDR (SPORT),
# with a discovery listener on another (SDPORT) when DISCOVERY is 1, else none; log and pid file
# WORK/NAME.log, WORK/NAME.pid. Retried when somebody took a port in between. Sets SPID; 1 when the
# daemon did not start (its log says why).
start_daemon() {
  local name=$1 addr=$2 disc=$3 d
  shift 3
  for _ in 1 2 3 4 5; do
    SPORT=$(free_port "$addr") SDPORT="" d=none
    if [ "$disc" = 1 ]; then
      SDPORT=$(free_port "$addr")
      [ "$SPORT" != "$SDPORT" ] || continue
      d="$addr:$SDPORT"
    fi
    rm -f "$WORK/$name.pid"
    "$DAEMON" "$@" --listen "$addr:$SPORT" --discovery "$d" --pid-file "$WORK/$name.pid" >"$WORK/$name.log" 2>&1 &
    SPID=$!
    for _ in $(seq 400); do
      [ -s "$WORK/$name.pid" ] && return 0
      kill -0 "$SPID" 2>/dev/null || break
      sleep 0.05
    done
    kill -KILL "$SPID" 2>/dev/null
    wait "$SPID" 2>/dev/null; SPID=""
    grep -qi 'in use' "$WORK/$name.log" || return 1
  done
  return 1
}
if [ "$SUITE" = mpath ]; then
  # Gateway A (DAEMON_PID, daemon.log) first: it seeds the group's state; then B joins and adds its
  # listener to that state. Each serves discovery on its NVMe/TCP listener.
  GROUP="interop-$$-$(date +%s)"
  args+=(--group "$GROUP" --group-pool "$POOL")
  bargs=("${args[@]}")
  [ -n "$CTL" ] && args+=(--control "unix:$WORK/ctl.sock") && bargs+=(--control "unix:$WORK/ctl-b.sock")
  if start_daemon daemon "$HOSTIP" 0 "${args[@]}" --gateway-name gw-a; then DAEMON_PID=$SPID PORT=$SPORT; fi
  if [ -z "$DAEMON_PID" ]; then
    say "gateway A did not start:"; cat "$WORK/daemon.log"; echo "0 passed, 1 failed"; exit 1
  fi
  if start_daemon gw-b "$HOSTIP" 0 "${bargs[@]}" --gateway-name gw-b; then GWB_PID=$SPID PB=$SPORT; fi
  if [ -z "$GWB_PID" ]; then
    say "gateway B did not start:"; cat "$WORK/gw-b.log"; echo "0 passed, 1 failed"; exit 1
  fi
  DPORT=$PORT
  say "group $GROUP (pool $POOL): gateway A on $HOSTIP:$PORT, gateway B on $HOSTIP:$PB, $NQN"
  # The listeners are off loopback: a host not on the allowlist must neither see nor reach the
  # subsystem there (nkv, next to the daemon, as that host).
  NKVCLI="$(dirname "$DAEMON")/nkv" STRANGER=nqn.2026-12.io.test:interop-stranger
  if [ -x "$NKVCLI" ]; then
    "$NKVCLI" -a "$HOSTIP" -s "$PB" -q "$STRANGER" discover >"$WORK/stranger.disc" 2>&1
    "$NKVCLI" -a "$HOSTIP" -s "$PORT" -n "$NQN" -q "$STRANGER" exist k >"$WORK/stranger.conn" 2>&1
    echo "exit $?" >>"$WORK/stranger.conn"
  fi
else
  if start_daemon daemon 127.0.0.1 1 "${args[@]}"; then DAEMON_PID=$SPID PORT=$SPORT DPORT=$SDPORT; fi
  if [ -z "$DAEMON_PID" ]; then
    say "rados-nkv did not start:"; cat "$WORK/daemon.log"; echo "0 passed, 1 failed"; exit 1
  fi
  say "rados-nkv ($BACKEND) on 127.0.0.1:$PORT, discovery :$DPORT, $NQN (guest sees 10.0.2.2)"
fi
if [ "$AEN" = 1 ]; then say "control plane on unix:$WORK/ctl.sock, nkv-ctl $CTL"
elif [ "$SUITE" = kv ]; then say "namespace notice checks skipped: $AEN"; fi

# A second cpio archive after the cached initramfs carries this run's guest script and parameters.
mkdir -p "$WORK/ov/interop"
cp "$HERE/guest.sh" "$WORK/ov/interop/guest.sh"
cat >"$WORK/ov/interop/env" <<EOF
HOST=${HOSTIP:-10.0.2.2}
PORT=$PORT
PB=${PB:-}
DRAIN=$([ -n "$CTL" ] && echo 1 || echo "no nkv-ctl next to $DAEMON (set NKV_CTL)")
DPORT=$DPORT
NQN=$NQN
BACKEND=$BACKEND
SUITE=$SUITE
AEN='$AEN'
KA='$KA'
KAC='$KAC'
KB='$KB'
KBC='$KBC'
KC='$KC'
KW='$KW'
EOF
( cd "$WORK/ov" && find . | cpio -o -H newc --quiet ) | gzip -1 >"$WORK/ov.cpio.gz"
cat "$IDIR/initramfs.cpio.gz" "$WORK/ov.cpio.gz" >"$WORK/initrd.img"

# The guest, under TCG (no KVM here), bounded. PVH entry through the uncompressed vmlinux.
SERIAL="$WORK/serial.log"
t_boot=$(elapsed)
qemu-system-x86_64 -nodefaults -display none -no-reboot -accel tcg -m 768 -smp 1 \
  -kernel "$IDIR/vmlinux" -initrd "$WORK/initrd.img" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 nkv_script=/interop/guest.sh" \
  -serial "file:$SERIAL" -monitor none \
  -netdev user,id=n0 -device virtio-net-pci,netdev=n0 >"$WORK/qemu.log" 2>&1 &
QEMU_PID=$!
# Namespace notices: each marker the guest prints runs one nkv-ctl command, once. aen_add/aen_del
# hold "EXIT-STATUS MILLISECONDS OUTPUT" of the command once it ran.
AEN_NS="${RADOS_NS:-interop}-aen"   # NSID 3's RADOS namespace, not NSID 1's
aen_add="" aen_del=""
aen_ctl() {
  local a b out rc
  a=$(date +%s%N)
  out=$("$CTL" --server "unix:$WORK/ctl.sock" "$@" 2>&1); rc=$?
  b=$(date +%s%N)
  echo "$rc $(( (b - a) / 1000000 )) $(echo "$out" | tr '\n' ' ')"
}
aen_poll() {
  [ "$AEN" = 1 ] && [ -z "$aen_del" ] || return 0
  if [ -z "$aen_add" ] && grep -aq '^NKV-AEN-ADD' "$SERIAL" 2>/dev/null; then
    aen_add=$(aen_ctl ns add "$NQN" --nsid 3 --rados-ns "$AEN_NS")
  fi
  if [ -n "$aen_add" ] && grep -aq '^NKV-AEN-DEL' "$SERIAL" 2>/dev/null; then
    aen_del=$(aen_ctl ns del "$NQN" 3)
  fi
}
# mpath: NKV-MPATH-KILL on the console stops gateway B (SIGSTOP), so that the guest's next command
# routed to it stays in flight; once one of B's I/O queue connections holds unread bytes (ss: the
# command arrived, B cannot answer), or after 10 s, B is killed with SIGKILL. mp_stopped/mp_killed:
# when (seconds into the run); mp_inflight: whether a command was in flight at the kill.
mp_stopped="" mp_killed="" mp_inflight=no
mp_io_peers() { # the peers (ADDR:PORT) of B's I/O queues, from its log
  sed -n 's/.* tcp \([0-9.]*:[0-9]*\): qid [1-9][0-9]* .*/\1/p' "$WORK/gw-b.log" | sort -u
}
mp_poll() {
  [ "$SUITE" = mpath ] && [ -z "$mp_killed" ] || return 0
  if [ -z "$mp_stopped" ]; then
    grep -aq '^NKV-MPATH-KILL' "$SERIAL" 2>/dev/null || return 0
    kill -STOP "$GWB_PID" 2>/dev/null
    mp_stopped=$(elapsed)
    return 0
  fi
  local q p
  for p in $(mp_io_peers); do
    q=$(ss -Htn state established "( sport = :$PB )" 2>/dev/null | awk -v p="$p" '$4 == p { print $1 }')
    [ "${q:-0}" -gt 0 ] && mp_inflight=yes
  done
  [ "$mp_inflight" = yes ] || awk -v a="$mp_stopped" -v b="$(elapsed)" 'BEGIN { exit !(b - a > 10) }' || return 0
  kill -KILL "$GWB_PID" 2>/dev/null && mp_killed=$(elapsed)
  wait "$GWB_PID" 2>/dev/null
  GWB_PID=""
  say "gateway B stopped (SIGSTOP) at ${mp_stopped}s, killed (SIGKILL) at ${mp_killed:-never}s; a guest command in flight on it: $mp_inflight"
}
# mpath, ANA: NKV-MPATH-DRAIN sets gateway B's state of ANA group 1 to non-optimized through A's
# control plane, NKV-MPATH-UNDRAIN to optimized again; B's and A's Store counts are taken after the
# first and before the second (ana_drain/ana_undrain: "EXIT-STATUS MILLISECONDS OUTPUT").
ana_drain="" ana_undrain="" sa0="" sb0="" sa1="" sb1=""
stores() { grep -c ' qid [1-9][0-9]* cid [0-9]* cmd opc 01h ' "$1"; }
ana_poll() {
  [ "$SUITE" = mpath ] && [ -n "$CTL" ] && [ -z "$ana_undrain" ] || return 0
  if [ -z "$ana_drain" ] && grep -aq '^NKV-MPATH-DRAIN' "$SERIAL" 2>/dev/null; then
    ana_drain=$(aen_ctl ana set 1 non-optimized --gateway gw-b)
    sa0=$(stores "$WORK/daemon.log") sb0=$(stores "$WORK/gw-b.log")
  fi
  if [ -n "$ana_drain" ] && grep -aq '^NKV-MPATH-UNDRAIN' "$SERIAL" 2>/dev/null; then
    sa1=$(stores "$WORK/daemon.log") sb1=$(stores "$WORK/gw-b.log")
    ana_undrain=$(aen_ctl ana set 1 optimized --gateway gw-b)
  fi
}
deadline=$(( $(date +%s) + TIMEOUT ))
timed_out=0
while kill -0 "$QEMU_PID" 2>/dev/null; do
  if [ "$(date +%s)" -ge "$deadline" ]; then timed_out=1; break; fi
  aen_poll
  mp_poll
  ana_poll
  sleep 0.2
done
if [ "$timed_out" = 1 ]; then
  kill -KILL "$QEMU_PID" 2>/dev/null
fi
wait "$QEMU_PID" 2>/dev/null
qrc=$?
QEMU_PID=""
t_end=$(elapsed)
# mpath: the group's listeners as gateway A serves them, while it runs.
[ "$SUITE" = mpath ] && [ -n "$CTL" ] && "$CTL" --server "unix:$WORK/ctl.sock" listener list >"$WORK/listeners" 2>&1

# Results.
tr -d '\r' <"$SERIAL" >"$WORK/console.log" 2>/dev/null
pass=$(grep -c '^ok - ' "$WORK/console.log")
fail=$(grep -c '^FAIL - ' "$WORK/console.log")
exitline="$(grep -a '^NKV-INTEROP-EXIT ' "$WORK/console.log" | tail -1)"
grc="${exitline#NKV-INTEROP-EXIT }"
bad=0
if [ "$timed_out" = 1 ]; then
  say "FAIL: the guest did not finish within ${TIMEOUT}s"; bad=1
elif [ -z "$exitline" ]; then
  say "FAIL: no exit marker on the console (qemu exit $qrc)"; bad=1
elif [ "$grc" != 0 ]; then
  say "guest script exit status $grc"; bad=1
fi
if [ "$bad" = 1 ] || [ "$fail" -gt 0 ] || [ "$pass" -eq 0 ] || [ -n "${NKV_INTEROP_VERBOSE:-}" ]; then
  echo "---- guest console ----"; cat "$WORK/console.log"
  echo "---- qemu ----"; cat "$WORK/qemu.log"
  echo "---- rados-nkv log (last 80 lines) ----"; tail -n 80 "$WORK/daemon.log"
  if [ "$SUITE" = mpath ]; then echo "---- gateway B log (last 40 lines) ----"; tail -n 40 "$WORK/gw-b.log"; fi
  echo "----"
fi
# The daemon must still be alive and stop cleanly.
if kill -0 "$DAEMON_PID" 2>/dev/null; then
  kill -TERM "$DAEMON_PID"; wait "$DAEMON_PID"; drc=$?; DAEMON_PID=""
  if [ "$drc" -ne 0 ]; then echo "FAIL - rados-nkv exited $drc on SIGTERM"; fail=$((fail + 1)); else echo "ok - rados-nkv stopped cleanly"; pass=$((pass + 1)); fi
else
  echo "FAIL - rados-nkv died during the run"; fail=$((fail + 1)); DAEMON_PID=""
fi
grep -E '^(ok|FAIL) - |^# NSID 3 |^# \[mpath\]' "$WORK/console.log" | sed 's/^/  guest: /'

# Host-side checks on the target's debug log (one "cmd" line per command received).
DL="$WORK/daemon.log"
hcheck() {
  if eval "$2"; then echo "ok - target: $1"; pass=$((pass + 1)); else echo "FAIL - target: $1"; fail=$((fail + 1)); fi
}
if [ "$SUITE" = mpath ]; then
  BL="$WORK/gw-b.log"
  cid() { sed -n "s/.*$NQN: controller \([0-9]*\) for host $GNQN\$/\1/p" "$1" | head -n 1; }
  ca=$(cid "$DL") cb=$(cid "$BL")
  hcheck "gateways A and B each made an I/O controller for the guest, CNTLIDs differ (A ${ca:-none}, B ${cb:-none})" \
    '[ -n "$ca" ] && [ -n "$cb" ] && [ "$ca" != "$cb" ]'
  sa=$(grep -c ' qid [1-9][0-9]* cid [0-9]* cmd opc 01h ' "$DL") sb=$(grep -c ' qid [1-9][0-9]* cid [0-9]* cmd opc 01h ' "$BL")
  hcheck "both paths carried the guest's Stores (A $sa, B $sb)" '[ "$sa" -gt 0 ] && [ "$sb" -gt 0 ]'
  if [ -x "$NKVCLI" ]; then
    cat "$WORK/stranger.disc" "$WORK/stranger.conn" | sed 's/^/# another host: /'
    hcheck "a host not on the allowlist: no entry for $NQN in B's discovery log, Connect to A refused" \
      '! grep -q "$NQN" "$WORK/stranger.disc" && grep -q "Number of Records 0" "$WORK/stranger.disc" &&
       ! grep -q "^exit 0" "$WORK/stranger.conn"'
  fi
  hcheck "gateway B was killed with SIGKILL while the guest's loop ran, a command of the guest in flight on it" \
    '[ -n "$mp_killed" ] && [ "$mp_inflight" = yes ]'
  if [ -n "$CTL" ]; then
    read -r rc ms out <<<"$ana_drain"
    hcheck "nkv-ctl ana set 1 non-optimized --gateway gw-b through A when the guest asked (exit ${rc:-none}, ${ms:-0} ms)" '[ "$rc" = 0 ]'
    hcheck "B drained: no Store reached B (B $sb0 -> $sb1), A took them (A $sa0 -> $sa1)" \
      '[ -n "$sb1" ] && [ "$sb1" = "$sb0" ] && [ "$sa1" -gt "$sa0" ]'
    read -r rc ms out <<<"$ana_undrain"
    hcheck "nkv-ctl ana set 1 optimized --gateway gw-b afterwards (exit ${rc:-none}, ${ms:-0} ms)" '[ "$rc" = 0 ]'
    sed 's/^/# group listeners: /' "$WORK/listeners"
    hcheck "the group's state lists both gateways' listeners (nkv-ctl listener list on A)" \
      'grep -q "gw-a.*$PORT" "$WORK/listeners" && grep -q "gw-b.*$PB" "$WORK/listeners"'
  fi
  say "timings: prepare ${t_prep}s, boot+guest $(awk -v a="$t_boot" -v b="$t_end" 'BEGIN { printf "%.1f", b - a }')s, total $(elapsed)s"
  [ "$bad" = 1 ] && fail=$((fail + 1))
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
  exit
fi
if [ "$SUITE" = auth ]; then
  # One line per queue that authenticated (admin and I/O), and one per refusal.
  na=$(grep -c "$NQN-a: controller [0-9]* qid [0-9]*: host [^ ]* authenticated (DH-HMAC-CHAP, sha256, ffdhe2048" "$DL")
  hcheck "queues authenticated on $NQN-a with SHA-256 + ffdhe2048, admin and I/O ($na, want >= 4)" "[ $na -ge 4 ]"
  hcheck "the controller authenticated itself too on $NQN-a (bidirectional)" \
    "grep -q '$NQN-a: .* authenticated (DH-HMAC-CHAP, sha256, ffdhe2048, controller authenticated too)' '$DL'"
  hcheck "the kernel re-authenticated a live controller, admin queue (sysfs dhchap_secret)" \
    "grep -q '$NQN-a: controller [0-9]* qid 0: host .* re-authenticated' '$DL'"
  hcheck "... and its I/O queue" "grep -q '$NQN-a: controller [0-9]* qid [1-9][0-9]*: host .* re-authenticated' '$DL'"
  hcheck "SHA-512 + null DH on $NQN-b, bidirectional" "grep -q '$NQN-b: .* authenticated (DH-HMAC-CHAP, sha512, null, controller authenticated too)' '$DL'"
  hcheck "SHA-384 + ffdhe3072 on $NQN-c" "grep -q '$NQN-c: .* authenticated (DH-HMAC-CHAP, sha384, ffdhe3072)' '$DL'"
  hcheck "a wrong host secret was refused (AUTH_Failure1 after a wrong response)" "grep -q 'failed: wrong response' '$DL'"
  hcheck "the kernel ended the transaction with the wrong controller secret (AUTH_Failure2)" "grep -q 'ended authentication with AUTH_Failure2' '$DL'"
  say "timings: prepare ${t_prep}s, boot+guest $(awk -v a="$t_boot" -v b="$t_end" 'BEGIN { printf "%.1f", b - a }')s, total $(elapsed)s"
  [ "$bad" = 1 ] && fail=$((fail + 1))
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
  exit
fi
hcheck "no controller of $NQN-auth ever authenticated the 6.1 host" \
  "! grep -q '$NQN-auth: controller [0-9]* qid 0: host .* authenticated' '$DL'"
hcheck "an ICReq asked for header and data digests and got them" "grep -q 'ICReq hpda [0-9]* digests HD' '$DL'"
hcheck "an admin Connect carried KATO 2000 ms (nvme connect -k 2)" "grep -q 'fctype 01h .* cdw12 000007d0h' '$DL'"
hcheck "that Connect asked for SQ flow control off (CATTR bit 2, --disable-sqflow)" "grep -q 'fctype 01h .* cdw11 0004001fh cdw12 000007d0h' '$DL'"
ka=$(awk '/fctype 01h .* cdw12 000007d0h/ { on = 1 } on && / cmd opc 18h / { n++ } END { print n + 0 }' "$DL")
hcheck "Keep Alive (18h) every KATO/2 on that controller ($ka seen, want >= 3)" "[ $ka -ge 3 ]"
# Vendor Exec: the kernel passed both vendor opcodes through (it refuses none host-side).
hcheck "vendor opcodes 82h (allowlisted) and 9Ah (not) reached the target from the kernel" \
  "grep -q ' cmd opc 82h ' '$DL' && grep -q ' cmd opc 9ah ' '$DL'"

# Namespace notices: both nkv-ctl commands ran when the guest asked, and the kernel answered each
# notice by reading the Changed Namespace List (log 04h) on an admin queue with RAE clear (CDW10
# bit 15), which unmasks the next notice.
if [ "$AEN" = 1 ]; then
  aen_hcheck() { # WHAT "EXIT-STATUS MILLISECONDS OUTPUT"
    local rc ms out
    read -r rc ms out <<<"$2"
    if [ -z "$2" ]; then echo "FAIL - target: $1: the guest never asked for it"; fail=$((fail + 1))
    elif [ "$rc" = 0 ]; then echo "ok - target: $1 while the host was connected ($ms ms)"; pass=$((pass + 1))
    else echo "FAIL - target: $1: exit $rc: $out"; fail=$((fail + 1)); fi
  }
  aen_hcheck "nkv-ctl ns add $NQN --nsid 3 --rados-ns $AEN_NS" "$aen_add"
  aen_hcheck "nkv-ctl ns del $NQN 3" "$aen_del"
  n04=$(grep -c ' qid 0 cid [0-9]* cmd opc 02h nsid [0-9a-f]*h cdw10 [0-9a-f]\{4\}[0-7][0-9a-f]04h' "$DL")
  hcheck "the kernel read log 04h with RAE clear after the notices ($n04 reads, want >= 2)" "[ $n04 -ge 2 ]"
fi

# The kernel's attach sequence on the admin queue of the first I/O controller, decoded.
attach_sequence() {
  local peer line opc fct c10 c11 c12 c14 nsid what
  peer=$(sed -n "s/.*tcp \([0-9.:]*\): $NQN qid 0, .*/\1/p" "$DL" | head -n 1)
  [ -n "$peer" ] || return 0
  echo "# attach sequence of the first controller (admin queue, as rados-nkv saw it):"
  grep -F "tcp $peer: qid 0 cid " "$DL" | grep ' cmd opc ' | while read -r line; do
    opc=$(sed -n 's/.* cmd opc \([0-9a-f]*\)h.*/\1/p' <<<"$line")
    fct=$(sed -n 's/.* fctype \([0-9a-f]*\)h.*/\1/p' <<<"$line")
    nsid=$(sed -n 's/.* nsid \([0-9a-f]*\)h.*/\1/p' <<<"$line")
    c10=$((16#$(sed -n 's/.* cdw10 \([0-9a-f]*\)h.*/\1/p' <<<"$line")))
    c11=$((16#$(sed -n 's/.* cdw11 \([0-9a-f]*\)h.*/\1/p' <<<"$line")))
    c12=$((16#$(sed -n 's/.* cdw12 \([0-9a-f]*\)h.*/\1/p' <<<"$line")))
    c14=$((16#$(sed -n 's/.* cdw14 \([0-9a-f]*\)h.*/\1/p' <<<"$line")))
    case "$opc/$fct" in
      7f/01) what=$(printf 'Connect qid %d sqsize %d KATO %d ms' $((c10 >> 16)) $((c11 & 0xffff)) "$c12") ;;
      7f/04) what=$(printf 'Property Get %s (%d bytes)' "$(case $c11 in 0) echo CAP;; 8) echo VS;; 20) echo CC;; 28) echo CSTS;; *) printf '%xh' $c11;; esac)" $(( (c10 & 7) ? 8 : 4 ))) ;;
      7f/00) what=$(printf 'Property Set %s = %08xh' "$(case $c11 in 20) echo CC;; *) printf '%xh' $c11;; esac)" "$c12") ;;
      06/) what=$(printf 'Identify CNS %02xh CSI %d NSID %s' $((c10 & 0xff)) $((c11 >> 24)) "$nsid") ;;
      02/) what=$(printf 'Get Log Page LID %02xh %d bytes CSI %d NSID %s' $((c10 & 0xff)) $(( ((c10 >> 16) + 1) * 4 )) $((c14 >> 24)) "$nsid") ;;
      09/) what=$(printf 'Set Features FID %02xh CDW11 %08xh' $((c10 & 0xff)) "$c11") ;;
      0a/) what=$(printf 'Get Features FID %02xh' $((c10 & 0xff))) ;;
      0c/) what="Asynchronous Event Request" ;;
      18/) what="Keep Alive" ;;
      *) what="opcode ${opc}h" ;;
    esac
    echo "#   $what"
    [ "$opc" = 18 ] && break   # the attach is over once keep alive runs
  done
}
attach_sequence
[ "$AEN" = 1 ] || say "namespace notice checks skipped: $AEN"
say "timings: prepare ${t_prep}s, boot+guest $(awk -v a="$t_boot" -v b="$t_end" 'BEGIN { printf "%.1f", b - a }')s, total $(elapsed)s"
[ "$bad" = 1 ] && fail=$((fail + 1))
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
