#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Micro Ceph cluster (1 mon + 1 OSD, or --osds N; no mgr) on 127.0.0.1 (or --addr) for development and CI.
# Run with -h for usage. Needs ceph-mon, ceph-osd, ceph-common (scripts/deps.sh).
set -euo pipefail

usage() {
  cat <<EOF
Usage: $0 <command> [options]

Commands:
  start [--durable] [--dir DIR] [--pool NAME] [--addr IPV4] [--osds N] [--ec-pool NAME]
      Build and start a 1-mon + 1-OSD cluster (no mgr, cephx on) bound to 127.0.0.1
      on a free port block, create the pool and wait (bounded) until a test write
      succeeds. Default store is memstore (RAM, 2 GiB, lost on stop); --durable uses
      bluestore on a 10 GiB sparse file DIR/osd/block.img. Idempotent: if the cluster in DIR
      is already running it only makes sure the pool exists. Dead or half-built clusters
      are wiped and rebuilt; with --durable an intact durable cluster is restarted instead.
      --addr binds mon and OSD to that local IPv4 address instead of 127.0.0.1 (ceph.conf's
      mon host names it): a cluster in a network namespace that other namespaces reach
      through a router. It applies when the cluster is built.
      --osds N (1-9, default 1): N OSDs on this machine, each bluestore on its own 10 GiB sparse
      file (N > 1 implies --durable; osd.0 in DIR/osd, osd.K in DIR/osd.K), CRUSH failure domain
      osd. Pools get size min(N,3) and min_size size-1 (N=3: size 3, min_size 2), so one OSD of
      three may die without stopping I/O. A killed OSD is reported at once by its peers (connection
      refused); heartbeats are tuned so that a hung one (pause) is marked down within about 7 s
      too: osd_heartbeat_interval 1, osd_heartbeat_grace 4, mon_osd_min_down_reporters
      1, mon_osd_reporter_subtree_level osd (every OSD shares one host), mon_osd_adjust_heartbeat_grace
      false; each OSD keeps a 128 MiB BlueStore cache (autotune off, osd_memory_target 512 MiB).
      --ec-pool NAME (needs --osds 3 or more): also an erasure-coded pool, profile nkv-k2m1 (k=2,
      m=1, crush-failure-domain=osd, jerasure), allow_ec_overwrites true and min_size 2 (k), so one
      OSD down leaves it writable. It sits next to the replicated --pool, which holds what needs
      omap (rados-nkv --meta-pool). Recorded in DIR/state: later starts and env use it.
      A start whose --osds differs from the cluster built in DIR rebuilds it.
  stop [--dir DIR]    SIGTERM (then SIGKILL after ${STOP_WAIT:-15}s) the daemons recorded in DIR/run/*.pid,
                      after checking each pid is still a ceph-mon/ceph-osd of this DIR.
                      Data stays in DIR until the next start (memstore: start wipes it).
  status [--dir DIR]  Print running/stopped per daemon; exit 0 if all running, 3 otherwise.
  kill DAEMON [--dir DIR]    SIGKILL one daemon (mon.a or osd.N) and wait until it is gone: a crash,
                      for the fault tests. Its data stays (--durable: bluestore survives it).
  revive DAEMON [--dir DIR]  Start that daemon again (after kill) and wait until its process is up.
  pause DAEMON [--dir DIR]   SIGSTOP one daemon: a hang, its connections open and nothing answered, so
                      only missed heartbeats reveal it (a killed one is reported at once).
  resume DAEMON [--dir DIR]  SIGCONT it (after pause).
  env [--dir DIR]     Print 'export' lines: eval "\$($0 env)"
                      (CEPH_CONF, NKV_CEPH_CONF, NKV_CEPH_KEYRING, NKV_CEPH_USER, NKV_CEPH_POOL, NKV_CEPH_DIR;
                      NKV_CEPH_OSDS and NKV_CEPH_EC_POOL when the cluster has several OSDs / an EC pool)

Environment:
  NKV_CEPH_DIR      default DIR (default /tmp/nkv-ceph)
  NKV_CEPH_POOL     default pool (default nkv)
  NKV_CEPH_TIMEOUT  readiness deadline in seconds (default 90)
  NKV_CEPH_ADDR     default --addr (default 127.0.0.1)

Layout of DIR: ceph.conf, keyring (client.admin), mon/, osd/ (osd.0), osd.K/ (--osds), run/ (pid
files, admin sockets), log/, state (port, pool, store, osds, ec_pool). Clients: rados -c DIR/ceph.conf -p nkv ls
OSD max object size: ceph -c DIR/ceph.conf tell osd.0 config get osd_max_object_size
EOF
}

CMD="${1:-}"; [ $# -gt 0 ] && shift
DIR="${NKV_CEPH_DIR:-/tmp/nkv-ceph}"; POOL="${NKV_CEPH_POOL:-nkv}"; DURABLE=0; POOL_SET=0; NAME=
ADDR="${NKV_CEPH_ADDR:-127.0.0.1}"; NOSDS=; EC_POOL=
while [ $# -gt 0 ]; do
  case "$1" in
    mon.a|osd.[0-9]) NAME=$1; shift ;;
    --osds) NOSDS="${2-}"; shift $(($# > 1 ? 2 : 1))
            [[ "$NOSDS" =~ ^[1-9]$ ]] || { echo "ceph-dev: --osds '$NOSDS' is not a number from 1 to 9" >&2; exit 64; } ;;
    --ec-pool) EC_POOL="${2-}"; shift $(($# > 1 ? 2 : 1))
               [[ "$EC_POOL" =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ ]] || { echo "ceph-dev: --ec-pool '$EC_POOL' is not a pool name" >&2; exit 64; } ;;
    --dir) DIR="${2:?--dir needs a value}"; shift 2 ;;
    --pool) POOL="${2:?--pool needs a value}"; POOL_SET=1; shift 2 ;;
    --durable) DURABLE=1; shift ;;
    --addr) ADDR="${2:?--addr needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "ceph-dev: unknown argument '$1'" >&2; usage >&2; exit 64 ;;
  esac
done
DIR="$(realpath -m "$DIR")"   # absolute: the paths end up in ceph.conf
# The address ends up in ceph.conf and the monmap: a dotted IPv4 address only (no names, no ports).
[[ "$ADDR" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || { echo "ceph-dev: --addr '$ADDR' is not an IPv4 address" >&2; exit 64; }
CONF="$DIR/ceph.conf"; RUN="$DIR/run"
TIMEOUT="${NKV_CEPH_TIMEOUT:-90}"
# The topology: --osds/--ec-pool on start, else what DIR/state recorded (a cluster built earlier).
state_get() { [ -f "$DIR/state" ] || return 0; sed -n "s/^$1=//p" "$DIR/state" | tail -n1; }
BUILT_OSDS="$(state_get osds)"; BUILT_OSDS="${BUILT_OSDS:-1}"
NOSDS="${NOSDS:-$BUILT_OSDS}"
[ -n "$EC_POOL" ] || EC_POOL="$(state_get ec_pool)"
if [ "$CMD" = start ]; then
  [ "$NOSDS" -gt 1 ] && DURABLE=1   # a killed memstore OSD takes its objects along; N x 2 GiB of RAM
  if [ -n "$EC_POOL" ] && [ "$NOSDS" -lt 3 ]; then
    echo "ceph-dev: --ec-pool needs --osds 3 or more (k=2 + m=1 on distinct OSDs)" >&2; exit 64
  fi
fi
osd_daemons() { local i; DAEMONS=(mon.a); for ((i = 0; i < $1; i++)); do DAEMONS+=("osd.$i"); done; }
osd_daemons "$NOSDS"
osd_data() { if [ "$1" = 0 ]; then echo "$DIR/osd"; else echo "$DIR/osd.$1"; fi; }

log() { echo "ceph-dev: $*" >&2; }
# Every CLI call is bounded: a ceph client retries forever when the mon is gone.
cephc() { timeout 20 ceph -c "$CONF" --connect-timeout 15 "$@"; }

# Pid of a daemon if it is alive AND is really our ceph daemon (pid reuse safety).
live_pid() {
  local f="$RUN/$1.pid" pid
  [ -f "$f" ] || return 1
  pid="$(cat "$f" 2>/dev/null)"; [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  local cmd; cmd="$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" || return 1
  [[ "$cmd" == *ceph-${1%%.*}" "* && "$cmd" == *" -c $CONF "* ]] || return 1
  echo "$pid"
}
n_running() { local n=0 d; for d in "${DAEMONS[@]}"; do live_pid "$d" >/dev/null && n=$((n + 1)); done; echo $n; }

# OSDs first: each tells the mon it is going down, and waits ~5 s if the mon is already gone.
stop_all() {
  local d pid end i
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
    d=${DAEMONS[$i]}
    pid="$(live_pid "$d")" || continue
    log "stopping $d (pid $pid)"; kill -TERM "$pid" 2>/dev/null || true
    kill -CONT "$pid" 2>/dev/null || true   # a paused daemon gets its SIGTERM
    end=$((SECONDS + ${STOP_WAIT:-15}))
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && { log "$d ignored SIGTERM, sending SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; }
  done
  rm -f "$RUN"/*.pid
}

# Only ever delete what this script creates (DIR may be a user directory).
wipe() { rm -rf "$DIR"/{mon,osd,run,log,ceph.conf,keyring,mon.keyring,monmap,state} "$DIR"/osd.[1-9]; }

dump_logs() { local f; for f in "$DIR"/log/*; do [ -f "$f" ] && { echo "==> $f <==" >&2; tail -n 25 "$f" >&2; }; done; }
fail() { log "$*"; dump_logs; stop_all; exit 1; }

# Ports: a block of 2 + 10 per OSD (mon v2, mon v1, 10 for each OSD's 8 messenger binds) that no
# socket uses. Below 32768 so outgoing connections' ephemeral ports never collide; the start
# point depends on DIR so clusters in different dirs rarely even probe the same block.
pick_ports() {
  local used base i ok need=$((2 + 10 * NOSDS))
  used=" $(ss -Htan | awk '{n=split($4,a,":"); print a[n]}' | sort -u | tr '\n' ' ') "
  base=$((17000 + ($(echo "$DIR" | cksum | cut -d' ' -f1) % 750) * 20))
  for _ in $(seq 750); do
    ok=1; for i in $(seq 0 $((need - 1))); do [[ "$used" == *" $((base + i)) "* ]] && { ok=0; break; }; done
    [ $ok = 1 ] && { echo $base; return; }
    base=$((base + 20)); [ $((base + need)) -ge 32000 ] && base=17000
  done
  log "no free port block in 17000-32000"; exit 1
}

write_conf() {   # $1 = port base
  local p=$1 store=memstore size=1 min=1 mem=1073741824 i
  [ "$DURABLE" = 1 ] && store=bluestore
  [ "$NOSDS" -gt 1 ] && { size=$((NOSDS < 3 ? NOSDS : 3)); min=$((size - 1)); mem=536870912; }
  cat >"$CONF" <<EOF
[global]
fsid = $FSID
mon host = [v2:$ADDR:$p,v1:$ADDR:$((p + 1))]
public addr = $ADDR
cluster addr = $ADDR
ms bind port min = $((p + 2))
ms bind port max = $((p + 1 + 10 * NOSDS))
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $DIR/keyring
run dir = $RUN
log file = $DIR/log/\$name.log
osd pool default size = $size
osd pool default min size = $min
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon warn on insecure global id reclaim allowed = false
auth allow insecure global id reclaim = false
# daemons only: clients keep the default per-process socket name (no clashes)
[mon]
admin socket = $RUN/\$name.asok
pid file = $RUN/\$name.pid
mon data = $DIR/mon
# no mgr on purpose: never raise MGR_DOWN (warned once the cluster is older than this)
mon mgr mkfs grace = 315360000
keyring = \$mon_data/keyring
[osd]
admin socket = $RUN/\$name.asok
pid file = $RUN/\$name.pid
osd data = $DIR/osd
keyring = \$osd_data/keyring
osd objectstore = $store
osd class load list = *
osd class default list = *
# we place osd.0 in the crush map ourselves (a tiny memstore would get a ~0 weight)
osd crush update on start = false
memstore device bytes = 2147483648
bluestore block path = \$osd_data/block.img
bluestore block size = 10737418240
bluestore block create = true
osd memory target = $mem
EOF
  [ "$NOSDS" -gt 1 ] || return 0
  cat >>"$CONF" <<EOF
# --osds $NOSDS: small OSDs, and a killed one marked down within seconds (ceph-dev.sh -h)
bluestore cache autotune = false
bluestore cache size = 134217728
[global]
osd heartbeat interval = 1
osd heartbeat grace = 4
mon osd min down reporters = 1
mon osd reporter subtree level = osd
mon osd adjust heartbeat grace = false
EOF
  for ((i = 1; i < NOSDS; i++)); do printf '[osd.%s]\nosd data = %s\n' "$i" "$(osd_data "$i")" >>"$CONF"; done
}

start_daemon() {   # $1 = mon.a | osd.N ; both daemonize and write their pid file
  local d=$1 end=$((SECONDS + 20))
  "ceph-${d%%.*}" -c "$CONF" -i "${d#*.}" >>"$DIR/log/$d.out" 2>&1 9>&- || fail "ceph-${d%%.*} failed to start"
  until live_pid "$d" >/dev/null; do [ $SECONDS -lt $end ] || fail "$d did not come up"; sleep 0.2; done
}

wait_mon() {
  local end=$((SECONDS + 30))
  until cephc -s >/dev/null 2>&1; do [ $SECONDS -lt $end ] || fail "mon not reachable"; sleep 0.5; done
}

ensure_pool() {   # idempotent: 'pool create' succeeds if the pool exists
  cephc osd pool create "$POOL" 8 8 replicated >/dev/null 2>&1 || return 1
  cephc osd pool application enable "$POOL" rados >/dev/null 2>&1 || true
  grep -qx "pool=$POOL" "$DIR/state" 2>/dev/null || echo "pool=$POOL" >>"$DIR/state"
  [ -n "$EC_POOL" ] || return 0
  # k=2, m=1 over OSDs; min_size k: one OSD down leaves the pool writable (Ceph's default is k+1).
  # allow_ec_overwrites: partial writes (Exec methods that write at an offset) need it (bluestore).
  cephc osd erasure-code-profile set nkv-k2m1 k=2 m=1 crush-failure-domain=osd >/dev/null 2>&1 || return 1
  cephc osd pool create "$EC_POOL" 8 8 erasure nkv-k2m1 >/dev/null 2>&1 || return 1
  cephc osd pool set "$EC_POOL" allow_ec_overwrites true >/dev/null 2>&1 || return 1
  cephc osd pool set "$EC_POOL" min_size 2 >/dev/null 2>&1 || return 1
  cephc osd pool application enable "$EC_POOL" rados >/dev/null 2>&1 || true
  grep -qx "ec_pool=$EC_POOL" "$DIR/state" 2>/dev/null || echo "ec_pool=$EC_POOL" >>"$DIR/state"
}

# Bounded readiness probe: every OSD up, then a real write through the whole stack, to each pool.
wait_ready() {
  local end=$((SECONDS + TIMEOUT)) p
  until [ "$(cephc osd stat -f json 2>/dev/null | sed -n 's/.*"num_up_osds":\([0-9]*\).*/\1/p')" = "$NOSDS" ]; do
    [ $SECONDS -lt $end ] || return 1; sleep 1
  done
  for p in "$POOL" $EC_POOL; do
    until echo ready | timeout 10 rados -c "$CONF" -p "$p" put .nkv-ready - 2>/dev/null; do
      [ $SECONDS -lt $end ] || return 1; sleep 1
    done
    timeout 10 rados -c "$CONF" -p "$p" rm .nkv-ready 2>/dev/null || true
  done
}

# Register, mkfs and place OSD $1 (the mon is up).
make_osd() {
  local id=$1 data uuid; data="$(osd_data "$id")"; uuid="$(cat /proc/sys/kernel/random/uuid)"
  mkdir -p "$data"
  # The OSD key must be registered before ceph-osd --mkfs (mkfs fetches config from the mon).
  ceph-authtool --create-keyring "$data/keyring" --gen-key -n "osd.$id" >>"$DIR/log/mkfs.out" 2>&1
  cephc auth add "osd.$id" osd 'allow *' mon 'allow profile osd' mgr 'allow profile osd' \
    -i "$data/keyring" >/dev/null 2>&1 || fail "ceph auth add osd.$id failed"
  [ "$(cephc osd new "$uuid" "$id" 2>/dev/null)" = "$id" ] || fail "ceph osd new failed"
  ceph-osd -c "$CONF" -i "$id" --mkfs --osd-uuid "$uuid" >>"$DIR/log/mkfs.out" 2>&1 || fail "ceph-osd --mkfs of osd.$id failed"
  cephc osd crush add "osd.$id" 1.0 host=localhost root=default >/dev/null 2>&1 || fail "crush add failed"
}

build() {
  log "building new $([ "$DURABLE" = 1 ] && echo durable || echo memstore) cluster in $DIR"
  wipe; mkdir -p "$DIR"/{mon,osd,run,log}
  FSID="$(cat /proc/sys/kernel/random/uuid)"; local port; port="$(pick_ports)"
  write_conf "$port"
  local q=(--cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *') port2="[v2:$ADDR:$port,v1:$ADDR:$((port + 1))]"
  { ceph-authtool --create-keyring "$DIR/keyring" --gen-key -n client.admin "${q[@]}"
    ceph-authtool --create-keyring "$DIR/mon.keyring" --gen-key -n mon. --cap mon 'allow *'
    ceph-authtool "$DIR/mon.keyring" --import-keyring "$DIR/keyring"
    monmaptool --create --fsid "$FSID" --addv a "$port2" "$DIR/monmap"
    ceph-mon -c "$CONF" --mkfs -i a --monmap "$DIR/monmap" --keyring "$DIR/mon.keyring"
  } >>"$DIR/log/mkfs.out" 2>&1 || fail "mon mkfs failed"
  start_daemon mon.a; wait_mon
  local i
  for ((i = 0; i < NOSDS; i++)); do make_osd "$i"; start_daemon "osd.$i"; done
  printf 'port=%s\ndurable=%s\nosds=%s\n' "$port" "$DURABLE" "$NOSDS" >"$DIR/state"
}

# start/stop of one DIR are serialized (e.g. parallel test fixtures); daemons get fd 9 closed.
if [ "$CMD" = start ] || [ "$CMD" = stop ]; then
  mkdir -p "$DIR"; exec 9>"$DIR/.lock"; flock -w 300 9 || { log "timed out waiting for $DIR/.lock"; exit 1; }
fi

case "$CMD" in
  start)
    if [ "$NOSDS" != "$BUILT_OSDS" ] && [ -f "$DIR/state" ]; then
      log "the cluster in $DIR has $BUILT_OSDS OSD(s), --osds $NOSDS: rebuilding it"
      osd_daemons "$BUILT_OSDS"; stop_all; rm -f "$DIR/state"; osd_daemons "$NOSDS"
    fi
    if [ "$(n_running)" = ${#DAEMONS[@]} ]; then
      log "cluster in $DIR already running"
      ensure_pool || { log "cannot create pool $POOL"; exit 1; }; exit 0
    fi
    stop_all   # kill survivors of a partial crash before touching their files
    t0=$SECONDS
    # A durable cluster whose daemons died keeps its data: restart it instead of wiping.
    # Subshell: a failure in there (fail -> exit) falls back to a rebuild instead of exiting.
    if [ "$DURABLE" = 1 ] && grep -qx durable=1 "$DIR/state" 2>/dev/null && [ -f "$DIR/osd/block.img" ]; then
      log "restarting existing durable cluster in $DIR"
      if ( mkdir -p "$RUN" "$DIR/log"; start_daemon mon.a; wait_mon
           for ((i = 0; i < NOSDS; i++)); do start_daemon "osd.$i"; done
           ensure_pool && wait_ready ); then
        log "ready after $((SECONDS - t0))s (pool $POOL, conf $CONF)"; exit 0
      fi
      log "WARNING: durable cluster did not come back, wiping and rebuilding"; stop_all
    fi
    build; ensure_pool || fail "cannot create pool $POOL${EC_POOL:+ or $EC_POOL}"
    wait_ready || fail "cluster not ready after ${TIMEOUT}s"
    log "ready after $((SECONDS - t0))s (pool $POOL${EC_POOL:+, EC pool $EC_POOL}, $NOSDS OSD(s), conf $CONF)"
    ;;
  stop) stop_all; log "stopped $DIR" ;;
  status)
    rc=0
    for d in "${DAEMONS[@]}"; do
      if pid="$(live_pid "$d")"; then echo "$d: running (pid $pid)"; else echo "$d: stopped"; rc=3; fi
    done
    exit $rc
    ;;
  env)
    # Pool: --pool, else the one this cluster last created (state), else NKV_CEPH_POOL/nkv.
    if [ "$POOL_SET" = 0 ] && [ -f "$DIR/state" ]; then
      p="$(sed -n 's/^pool=//p' "$DIR/state" | tail -n1)"; POOL="${p:-$POOL}"
    fi
    printf 'export CEPH_CONF=%q\nexport NKV_CEPH_CONF=%q\nexport NKV_CEPH_KEYRING=%q\n' "$CONF" "$CONF" "$DIR/keyring"
    printf 'export NKV_CEPH_USER=admin\nexport NKV_CEPH_POOL=%q\nexport NKV_CEPH_DIR=%q\n' "$POOL" "$DIR"
    [ "$NOSDS" -gt 1 ] && printf 'export NKV_CEPH_OSDS=%q\n' "$NOSDS"
    [ -n "$EC_POOL" ] && printf 'export NKV_CEPH_EC_POOL=%q\n' "$EC_POOL"
    true
    ;;
  kill)
    [ -n "$NAME" ] || { log "kill needs a daemon: mon.a or osd.N"; exit 64; }
    [[ " ${DAEMONS[*]} " == *" $NAME "* ]] || { log "$NAME is not a daemon of the cluster in $DIR (${DAEMONS[*]})"; exit 64; }
    pid="$(live_pid "$NAME")" || { log "$NAME is not running"; exit 1; }
    kill -KILL "$pid"; end=$((SECONDS + 10))
    while kill -0 "$pid" 2>/dev/null; do [ $SECONDS -lt $end ] || { log "$NAME survived SIGKILL"; exit 1; }; sleep 0.1; done
    log "killed $NAME (pid $pid)"
    ;;
  revive)
    [ -n "$NAME" ] || { log "revive needs a daemon: mon.a or osd.N"; exit 64; }
    [[ " ${DAEMONS[*]} " == *" $NAME "* ]] || { log "$NAME is not a daemon of the cluster in $DIR (${DAEMONS[*]})"; exit 64; }
    if pid="$(live_pid "$NAME")"; then log "$NAME already running (pid $pid)"; exit 0; fi
    start_daemon "$NAME"; log "started $NAME (pid $(live_pid "$NAME"))"
    ;;
  pause|resume)
    [ -n "$NAME" ] || { log "$CMD needs a daemon: mon.a or osd.N"; exit 64; }
    [[ " ${DAEMONS[*]} " == *" $NAME "* ]] || { log "$NAME is not a daemon of the cluster in $DIR (${DAEMONS[*]})"; exit 64; }
    pid="$(live_pid "$NAME")" || { log "$NAME is not running"; exit 1; }
    if [ "$CMD" = pause ]; then kill -STOP "$pid"; else kill -CONT "$pid"; fi
    log "${CMD}d $NAME (pid $pid)"
    ;;
  -h|--help|help) usage ;;
  *) usage >&2; echo "ceph-dev: unknown command '$CMD'" >&2; exit 64 ;;
esac
