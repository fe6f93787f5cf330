#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# daemon_cli.sh - the rados-nkv daemon and the nkv CLI end to end, as a user runs them.
#
#   bash test/func/daemon_cli.sh PATH/rados-nkv PATH/nkv mem|rados
#
# rados: uses the cluster named by NKV_CEPH_CONF, NKV_CEPH_KEYRING, NKV_CEPH_USER, NKV_CEPH_POOL
# (scripts/ceph-dev.sh env); without NKV_CEPH_CONF it exits 77 (skip), or 1 with NKV_REQUIRE_RADOS=1.
# Every check prints "ok - ..." or "FAIL - ..."; the last line is "N passed, N failed"; exit 1 on
# any failure. Bounded: every command runs under timeout, every daemon start waits for readiness
# with a deadline, and the EXIT trap kills whatever daemon or load loop this script started.
set -u
ulimit -c 0 2>/dev/null # the daemon may abort in a check: no core files

if [ $# -ne 3 ] || { [ "$3" != mem ] && [ "$3" != rados ]; }; then
	echo "usage: $0 PATH/rados-nkv PATH/nkv mem|rados" >&2
	exit 64
fi
DAEMON=$(realpath "$1")
CLI=$(realpath "$2")
BACKEND=$3

if [ "$BACKEND" = rados ] && [ -z "${NKV_CEPH_CONF:-}" ]; then
	if [ "${NKV_REQUIRE_RADOS:-0}" = 1 ]; then
		echo "FAIL - NKV_REQUIRE_RADOS=1 but NKV_CEPH_CONF is not set (scripts/ceph-dev.sh env)"
		exit 1
	fi
	echo "skip: NKV_CEPH_CONF not set (start a cluster: scripts/ceph-dev.sh start; eval \"\$(scripts/ceph-dev.sh env)\")"
	exit 77
fi
for tool in timeout python3 cmp od; do
	if ! command -v "$tool" >/dev/null; then
		echo "skip: $tool not found"
		exit 77
	fi
done
[ -x "$DAEMON" ] || { echo "FAIL - $DAEMON is not executable"; exit 1; }
[ -x "$CLI" ] || { echo "FAIL - $CLI is not executable"; exit 1; }

POOL=${NKV_CEPH_POOL:-nkv}
RUNID="dcli-$$-$RANDOM"
T=$(mktemp -d "${TMPDIR:-/tmp}/nkv-dcli.XXXXXX")
PASS=0
FAILN=0
PIDS=()      # daemons started by this script
LOADPIDS=()  # background load loops
T0=$(date +%s%N)
# The host identity files: none unless a check writes them, so no result depends on /etc/nvme here.
export NKV_HOSTNQN_FILE="$T/no-hostnqn" NKV_HOSTID_FILE="$T/no-hostid"

# ---- bookkeeping ---------------------------------------------------------------------------------

ok() { PASS=$((PASS + 1)); echo "ok - $*"; }
fail() { FAILN=$((FAILN + 1)); echo "FAIL - $*"; }

# Children of a pid (by id: the load loops' current nkv/timeout).
kids() { ps -o pid= --ppid "$1" 2>/dev/null; }

cleanup() {
	local p k end
	for p in "${LOADPIDS[@]}"; do
		for k in $(kids "$p"); do kill -TERM "$k" 2>/dev/null; done
		kill -TERM "$p" 2>/dev/null
	done
	for p in "${PIDS[@]}"; do
		kill -0 "$p" 2>/dev/null || continue
		kill -TERM "$p" 2>/dev/null
		end=$((SECONDS + 5))
		while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
		kill -KILL "$p" 2>/dev/null
	done
	for p in "${LOADPIDS[@]}"; do
		for k in $(kids "$p"); do kill -KILL "$k" 2>/dev/null; done
		kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	if [ "${KEEP_TMP:-0}" = 1 ]; then echo "# kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'echo "FAIL - interrupted"; echo "$PASS passed, $((FAILN + 1)) failed"; exit 1' INT TERM HUP

ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

# run SECS CMD...: run CMD under timeout; stdout in $T/out, stderr in $T/err, exit status in RC.
run() {
	local t=$1
	shift
	timeout -k 2 "$t" "$@" >"$T/out" 2>"$T/err" </dev/null
	RC=$?
}
# run_in FILE SECS CMD...: the same with stdin from FILE.
run_in() {
	local in=$1 t=$2
	shift 2
	timeout -k 2 "$t" "$@" >"$T/out" 2>"$T/err" <"$in"
	RC=$?
}

show() {
	local f
	for f in "$T/out" "$T/err"; do
		[ -s "$f" ] && head -c 1500 "$f" | LC_ALL=C tr -c '[:print:]\n\t' '?' | sed "s/^/#   $(basename "$f"): /"
	done
}

# check DESC WANT_RC [ERE]: the last run exited WANT_RC and (if given) its stdout or stderr matches ERE.
check() {
	local desc=$1 want=$2 re=${3:-}
	if [ "$RC" = "$want" ] && { [ -z "$re" ] || grep -Eqi -- "$re" "$T/out" "$T/err"; }; then
		ok "$desc"
	else
		fail "$desc (exit $RC, want $want${re:+ and a message matching /$re/})"
		show
	fi
}

# check_json DESC: the last run's stdout is JSON.
check_json() {
	if [ "$RC" = 0 ] && python3 -c 'import json,sys; json.load(sys.stdin)' <"$T/out" 2>"$T/jerr"; then
		ok "$1"
	else
		fail "$1 (exit $RC; $(head -c 200 "$T/jerr" 2>/dev/null))"
		show
	fi
}

# check_json_err DESC WANT_RC: the last run exited WANT_RC with a JSON error object on stdout.
check_json_err() {
	if [ "$RC" = "$2" ] && python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["error"] and "errno" in j' <"$T/out" 2>/dev/null; then
		ok "$1"
	else
		fail "$1 (exit $RC, want $2 and a JSON object with \"error\" on stdout)"
		show
	fi
}

# check_one_json DESC WANT_RC ok|err [COMMAND]: the last run exited WANT_RC and its stdout is exactly
# one JSON object (nothing before or after it); err: with "command", a non-empty "error" and a
# "status" string; ok: no "error". COMMAND: its "command" must be that ("null": none known).
check_one_json() {
	local desc=$1 want=$2 kind=$3 cmd=${4:-}
	if [ "$RC" = "$want" ] && python3 -c '
import json, sys
kind, cmd = sys.argv[1], sys.argv[2]
s = sys.stdin.read().lstrip()
o, end = json.JSONDecoder().raw_decode(s)
assert isinstance(o, dict), "not an object"
assert not s[end:].strip(), "more after the object: %r" % s[end:end + 80]
if kind == "err":
    assert "command" in o and isinstance(o.get("error"), str) and o["error"], "no error text"
    assert isinstance(o.get("status"), str) and o["status"], "no status string"
else:
    assert "error" not in o, "an error object: %r" % o
if cmd:
    assert o.get("command") == (None if cmd == "null" else cmd), "command %r" % o.get("command")
' "$kind" "$cmd" <"$T/out" 2>"$T/jerr"; then
		ok "$desc"
	else
		fail "$desc (exit $RC, want $want and one JSON $kind object; $(tail -c 200 "$T/jerr" 2>/dev/null))"
		show
	fi
}

# json_get EXPR: evaluate a Python expression on the last run's JSON (as j).
json_get() { python3 -c "import json,sys; j=json.load(sys.stdin); print($1)" <"$T/out" 2>/dev/null; }

hexof() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }

# N free TCP ports on 127.0.0.1 (all bound at once, so they differ).
free_ports() {
	python3 - "$1" <<'EOF'
import socket, sys
ss = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    ss.append(s)
print(" ".join(str(s.getsockname()[1]) for s in ss))
EOF
}

# ---- daemon start/stop ---------------------------------------------------------------------------

DPID=""
# start_daemon LOG ARGS...: start rados-nkv in the background, wait (bounded) until an identify
# on $PIO answers. Sets DPID. Returns 1 (daemon killed, log shown) if it is not ready in time.
start_daemon() {
	local log=$1 end
	shift
	"$DAEMON" "$@" >"$log" 2>&1 </dev/null &
	DPID=$!
	PIDS+=("$DPID")
	end=$((SECONDS + 20))
	while :; do
		if ! kill -0 "$DPID" 2>/dev/null; then
			wait "$DPID"
			echo "# rados-nkv exited ($?) before it was ready:"
			sed 's/^/#   /' "$log" | tail -20
			return 1
		fi
		if timeout -k 1 3 "$CLI" --timeout 1000 -s "$PIO" -n "$NQN_OPEN" identify >/dev/null 2>&1; then
			return 0
		fi
		if [ $SECONDS -ge $end ]; then
			echo "# rados-nkv not ready after 20 s:"
			sed 's/^/#   /' "$log" | tail -20
			kill -KILL "$DPID" 2>/dev/null
			wait "$DPID" 2>/dev/null
			return 1
		fi
		sleep 0.1
	done
}

# stop_daemon SIG DEADLINE_S: signal $DPID and wait for it. Sets DRC (exit status, or "hung")
# and DMS (milliseconds from the signal to the exit).
stop_daemon() {
	local sig=$1 end=$((SECONDS + $2)) t
	t=$(date +%s%N)
	kill "-$sig" "$DPID" 2>/dev/null
	while kill -0 "$DPID" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.05; done
	DMS=$(ms_since "$t")
	if kill -0 "$DPID" 2>/dev/null; then
		DRC=hung
		kill -KILL "$DPID" 2>/dev/null
	fi
	wait "$DPID" 2>/dev/null
	local rc=$?
	[ "${DRC:-}" = hung ] || DRC=$rc
}

# ---- configuration -------------------------------------------------------------------------------

read -r PIO PDISC PFILE PSPARE < <(free_ports 4)
NQN_OPEN="nqn.2026-11.io.rados-nkv:dcli-open-$$"
NQN_ALLOW="nqn.2026-11.io.rados-nkv:dcli-allow-$$"
HOST_OK="nqn.2014-08.io.rados-nkv:host-ok-$$"
HOST_BAD="nqn.2014-08.io.rados-nkv:host-bad-$$"
NS_A="$RUNID-a"    # open subsystem, nsid 1 (8 MiB values)
NS_L="$RUNID-list" # open subsystem, nsid 2 (list test: only the 50 keys)
NS_B="$RUNID-b"    # allowlisted subsystem: nsid 1 (64 KiB values) and nsid 2 read-only, same RADOS ns
GRACE_MS=3000

if [ "$BACKEND" = rados ]; then
	BACKEND_JSON=$(printf '{"type": "rados", "ceph_conf": "%s", "keyring": "%s", "client_id": "%s", "op_timeout_s": 10}' \
		"$NKV_CEPH_CONF" "${NKV_CEPH_KEYRING:-}" "${NKV_CEPH_USER:-admin}")
	CEPH_FLAGS=(-b rados --ceph-conf "$NKV_CEPH_CONF" --client-id "${NKV_CEPH_USER:-admin}" --run-dir "$T/run-b")
	[ -n "${NKV_CEPH_KEYRING:-}" ] && CEPH_FLAGS+=(--keyring "$NKV_CEPH_KEYRING")
	BFLAGS=("${CEPH_FLAGS[@]}" -p "$POOL" -n "1:$RUNID-inuse")
else
	BACKEND_JSON='{"type": "mem"}'
	CEPH_FLAGS=(-b mem --run-dir "$T/run-b")
	BFLAGS=(-b mem --run-dir "$T/run-b")
fi

# The file says listener $PFILE and a 10 s grace; the flags after -c move the listener to $PIO
# and the grace to 3 s (flags override the file).
CONF="$T/rados-nkv.json"
cat >"$CONF" <<EOF
{
  "backend": $BACKEND_JSON,
  "listeners": [{"address": "127.0.0.1", "port": $PFILE}],
  "discovery": {"address": "127.0.0.1", "port": $PDISC},
  "subsystems": [
    {"nqn": "$NQN_OPEN", "pool": "$POOL",
     "namespaces": [{"nsid": 1, "rados_namespace": "$NS_A", "max_value": "8M"},
                    {"nsid": 2, "rados_namespace": "$NS_L"}]},
    {"nqn": "$NQN_ALLOW", "pool": "$POOL", "allowed_hosts": ["$HOST_OK"],
     "namespaces": [{"nsid": 1, "rados_namespace": "$NS_B", "max_value": 65536},
                    {"nsid": 2, "rados_namespace": "$NS_B", "read_only": true}]}
  ],
  "tcp": {"reactors": 2},
  "log_level": "info",
  "shutdown_grace_ms": 10000
}
EOF
DFLAGS=(-c "$CONF" -l "127.0.0.1:$PIO" --grace-ms "$GRACE_MS" --run-dir "$T/run-d")

echo "# backend $BACKEND, ports io $PIO discovery $PDISC, RADOS namespaces $RUNID-*, tmp $T"

# ---- 1. startup errors ---------------------------------------------------------------------------

run 10 "$DAEMON" --help
check "--help exits 0 with the usage" 0 "usage: rados-nkv"

run 10 "$DAEMON" -b mem --reactors 0 -l "127.0.0.1:$PSPARE" -d none
check "--reactors 0 exits 64 naming the flag" 64 "invalid value for --reactors: '0'"
run 10 "$DAEMON" -b mem --ns 1:x:12Q -l "127.0.0.1:$PSPARE" -d none
check "--ns with a bad size exits 64 naming the flag" 64 "invalid value for --ns: '1:x:12Q'"
run 10 "$DAEMON" -b mem --listen 127.0.0.1:99999 -d none
check "--listen port 99999 exits 64 naming the flag" 64 "invalid value for --listen: '127.0.0.1:99999'"
run 10 "$DAEMON" -b mem --no-such-flag
check "an unknown flag exits 64 naming it" 64 "unrecognized option '--no-such-flag'"
check "and points at --help in two lines, not the whole help ($(wc -l <"$T/err") lines)" 64 "Try 'rados-nkv --help'"
[ "$(wc -l <"$T/err")" -le 2 ] && ok "the error is at most 2 lines" || fail "the error is $(wc -l <"$T/err") lines"
run 10 "$DAEMON" -b mem -l "127.0.0.1:$PSPARE" -d none extra-arg
check "a stray argument exits 64" 64 "unexpected argument 'extra-arg'"

printf '{"backend": {"type": "mem"},\n "listeners": [ {"port": 1 } \n' >"$T/broken.json"
run 10 "$DAEMON" -c "$T/broken.json"
check "a JSON config with a syntax error exits 1 naming the file" 1 "$(basename "$T")/broken\.json"
printf '{"backend": {"type": "mem"}, "listeners": "127.0.0.1:%s"}\n' "$PSPARE" >"$T/badtype.json"
run 10 "$DAEMON" -c "$T/badtype.json" -d none
check "a JSON config with a wrong type (\"listeners\": a string) exits 1 naming the file" 1 "$(basename "$T")/badtype\.json"
run 10 "$DAEMON" -c "$T/does-not-exist.json"
check "a missing config file exits 1 naming the file" 1 "does-not-exist\.json"

if [ "$BACKEND" = rados ]; then
	t=$(date +%s%N)
	run 30 "$DAEMON" "${CEPH_FLAGS[@]}" -p "no-such-pool-$RUNID" -l "127.0.0.1:$PSPARE" -d none
	check "a missing pool exits 1 naming the pool ($(ms_since "$t") ms)" 1 "no-such-pool-$RUNID"

	sed -E 's/^[[:space:]]*mon[ _]host[[:space:]]*=.*/mon host = 127.0.0.1:1/' "$NKV_CEPH_CONF" >"$T/unreachable.conf"
	grep -q '^mon host = 127.0.0.1:1$' "$T/unreachable.conf" || echo "mon host = 127.0.0.1:1" >>"$T/unreachable.conf"
	ucflags=(--ceph-conf "$T/unreachable.conf" --client-id "${NKV_CEPH_USER:-admin}")
	[ -n "${NKV_CEPH_KEYRING:-}" ] && ucflags+=(--keyring "$NKV_CEPH_KEYRING")
	t=$(date +%s%N)
	run 30 "$DAEMON" "${ucflags[@]}" --connect-timeout 3 -p "$POOL" -l "127.0.0.1:$PSPARE" -d none
	el=$(ms_since "$t")
	check "an unreachable cluster (mon_host 127.0.0.1:1) exits 1 about the cluster" 1 "cluster"
	if [ "$el" -ge 2500 ] && [ "$el" -le 10000 ]; then
		ok "an unreachable cluster gives up after --connect-timeout 3 ($el ms)"
	else
		fail "an unreachable cluster with --connect-timeout 3 took $el ms (want 3-10 s)"
	fi
fi

# ---- 2. the daemon from a JSON config file, flags after -c overriding it -------------------------

if ! start_daemon "$T/daemon1.log" "${DFLAGS[@]}" --pid-file "$T/rados-nkv.pid"; then
	fail "rados-nkv starts from $CONF (listening on 127.0.0.1:$PIO)"
	echo "$PASS passed, $((FAILN)) failed"
	exit 1
fi
ok "rados-nkv starts from the JSON config with two subsystems ($(ms_since "$T0") ms since the test began)"
if grep -q "ready: 2 subsystem(s) on the $BACKEND backend" "$T/daemon1.log"; then
	ok "the log says ready with 2 subsystems on the $BACKEND backend"
else
	fail "the log does not say 'ready: 2 subsystem(s) on the $BACKEND backend'"
	sed 's/^/#   /' "$T/daemon1.log" | head -20
fi
if [ "$(cat "$T/rados-nkv.pid" 2>/dev/null)" = "$DPID" ]; then
	ok "--pid-file holds the daemon's pid"
else
	fail "--pid-file $T/rados-nkv.pid does not hold $DPID"
fi
run 10 "$CLI" --timeout 2000 -s "$PFILE" -n "$NQN_OPEN" identify
check "-l after -c replaces the file's listener (port $PFILE refused)" 1 "connection refused"

# Startup errors that need a port in use: the running daemon's ports.
t=$(date +%s%N)
run 30 "$DAEMON" "${BFLAGS[@]}" -l "127.0.0.1:$PIO" -d none
el=$(ms_since "$t")
check "a listener port in use exits 1 naming 127.0.0.1:$PIO ($el ms)" 1 "127\.0\.0\.1:$PIO.*in use"
[ "$el" -le 10000 ] || fail "a listener port in use took $el ms to fail (want < 10 s)"
run 30 "$DAEMON" "${BFLAGS[@]}" -l "127.0.0.1:$PSPARE" -d "127.0.0.1:$PDISC"
check "a discovery port in use exits 1 naming 127.0.0.1:$PDISC" 1 "127\.0\.0\.1:$PDISC.*in use"

# ---- 3. the CLI against it -----------------------------------------------------------------------

nk() { run 30 "$CLI" --timeout 10000 -s "$PIO" "$@"; }
no() { nk -n "$NQN_OPEN" "$@"; }
na() { nk -n "$NQN_ALLOW" -q "$HOST_OK" "$@"; }

# Discovery answers per host: a subsystem with an allowlist is listed only to the hosts on it.
run 20 "$CLI" --timeout 10000 -s "$PDISC" -q "$HOST_OK" discover
check "discover as the allowed host lists 2 records" 0 "Number of Records 2"
if grep -q "subnqn:  $NQN_OPEN\$" "$T/out" && grep -q "subnqn:  $NQN_ALLOW\$" "$T/out" &&
	[ "$(grep -c "trsvcid: $PIO\$" "$T/out")" = 2 ]; then
	ok "discover lists both subsystems on port $PIO"
else
	fail "discover -q $HOST_OK does not list $NQN_OPEN and $NQN_ALLOW on port $PIO"
	show
fi
for h in "$HOST_BAD" ""; do
	run 20 "$CLI" --timeout 10000 -s "$PDISC" ${h:+-q "$h"} discover
	if [ "$RC" = 0 ] && grep -q "Number of Records 1" "$T/out" && grep -q "subnqn:  $NQN_OPEN\$" "$T/out" &&
		! grep -q "$NQN_ALLOW" "$T/out"; then
		ok "discover as ${h:-the default uuid host NQN} (not on the allowlist) lists only the open subsystem"
	else
		fail "discover as ${h:-the default host NQN} (exit $RC) should list $NQN_OPEN only"
		show
	fi
done
run 20 "$CLI" --timeout 10000 -s "$PDISC" -q "$HOST_OK" -o json discover
check_json "discover -o json is JSON"
[ "$(json_get 'sorted(r["subnqn"] for r in j["records"])')" = "$(python3 -c "print(sorted(['$NQN_OPEN','$NQN_ALLOW']))")" ] &&
	ok "discover -o json has both subnqns" || { fail "discover -o json records"; show; }
run 20 "$CLI" --timeout 10000 -s "$PIO" -q "$HOST_OK" discover
check "discover on the I/O port (every listener serves discovery) lists 2 records" 0 "Number of Records 2"
# Without -n, nkv takes the NVM subsystem the discovery log on the -s port lists, when it is the
# only one (the default host sees only the open subsystem); the allowed host sees two: nkv refuses
# (exit 64) and names both, rather than take the first (a new subsystem would change the default).
nk identify
check "without -n, nkv finds the subsystem through discovery on the -s port" 0 "subnqn +: $NQN_OPEN\$"
nk -q "$HOST_OK" exist k
check "without -n and two subsystems in the log, exit 64" 64 "several subsystems"
grep -q "^  $NQN_OPEN (port $PIO)\$" "$T/err" && grep -q "^  $NQN_ALLOW (port $PIO)\$" "$T/err" &&
	ok "the refusal lists both subsystems" || { fail "the refusal does not list both subsystems"; show; }
nk -q "$HOST_OK" -o json exist k; check_one_json "-o json: two subsystems without -n" 64 err exist
run 10 "$CLI" --timeout 2000 -s "$PSPARE" exist k
check "without -n, nothing listening: the message leads with it" 1 "^nkv: nothing listening at 127\.0\.0\.1:$PSPARE"

no list-ns
check "list-ns on the open subsystem" 0 "^\[ *0\]:0x1\$"
grep -q '^\[ *1\]:0x2$' "$T/out" && ok "list-ns shows nsid 2" || { fail "list-ns lacks nsid 2"; show; }
na -o json list-ns
check_json "list-ns -o json is JSON"
[ "$(json_get 'j["nsids"]')" = "[1, 2]" ] && ok "list-ns -o json: nsids [1, 2]" || { fail "list-ns -o json nsids"; show; }

no identify
check "identify shows the controller and its subnqn" 0 "subnqn +: $NQN_OPEN\$"
no -o json identify
check_json "identify -o json is JSON"
[ "$(json_get 'j["subnqn"]')" = "$NQN_OPEN" ] && ok "identify -o json subnqn" || { fail "identify -o json subnqn"; show; }
no identify --ns
check "identify --ns shows KVKML 16 and KVVML 8 MiB (max_value \"8M\")" 0 "kvkml 16, kvvml 8388608 \(8 MiB\)"
na --nsid 2 identify --ns
check "identify --ns of nsid 2 (no max_value): KVVML 64 MiB, the default" 0 "kvvml 67108864 \(64 MiB\)"
grep -q "read-only" "$T/out" && ok "identify --ns marks nsid 2 read-only" || { fail "identify --ns nsid 2 not read-only"; show; }
no --nsid 77 identify --ns
check "identify --ns of an absent namespace names it" 1 "identify failed: no KV namespace 77 \(see nkv list-ns\)"
grep -q "No such file" "$T/err" && { fail "identify of an absent namespace prints strerror noise"; show; } ||
	ok "no strerror text in that message"
na -o json --nsid 1 identify --ns
check_json "identify --ns -o json is JSON"
[ "$(json_get 'j["kvvml"], j["read_only"]')" = "65536 False" ] && ok "identify --ns -o json: kvvml 65536 (a JSON number), not read-only" ||
	{ fail "identify --ns -o json fields"; show; }

# Values from files and pipes.
head -c 1048576 /dev/urandom >"$T/v1m"
no store big1 "$T/v1m"
check "store a 1 MiB file" 0 "stored big1 \(1 MiB\)"
no retrieve big1 "$T/r1m"
check "retrieve to a file" 0
cmp -s "$T/v1m" "$T/r1m" && ok "retrieved file == stored file (1 MiB)" || fail "retrieved 1 MiB file differs"
# Part of a value (--offset: Retrieve Range, vendor F2h), compared with the same bytes cut from the file.
no retrieve big1 "$T/rr" --offset 123457 --max-size 4096
check "retrieve --offset 123457 --max-size 4096: a truncation warning" 0 "only 4 KiB from offset 123457 returned"
tail -c +123458 "$T/v1m" | head -c 4096 >"$T/want"
cmp -s "$T/want" "$T/rr" && ok "--offset 123457: the 4 KiB at that offset" || fail "--offset 123457 bytes differ"
no retrieve big1 "$T/rr" --offset 1048000
check "retrieve --offset 1048000 (default buffer)" 0
tail -c 576 "$T/v1m" >"$T/want"
cmp -s "$T/want" "$T/rr" && ok "--offset near the end: the last 576 bytes" || fail "--offset 1048000 bytes differ"
no retrieve big1 --offset 0x100000
check "retrieve --offset at the end (1 MiB, hex): exit 0 and a warning" 0 "at or past the end of the value"
if [ -s "$T/out" ]; then fail "--offset at the end wrote bytes"; show; else ok "--offset at the end writes nothing"; fi
no retrieve big1 --offset 4096G
check "retrieve --offset 4096G (past any value): exit 0" 0 "at or past the end"
no -o json retrieve big1 "$T/rr" --offset 1048570
check_json "retrieve --offset -o json is JSON"
[ "$(json_get 'j["offset"], j["value_size"], j["bytes"], j["truncated"]')" = "1048570 1048576 6 False" ] &&
	cmp -s <(tail -c 6 "$T/v1m") "$T/rr" && ok "retrieve --offset -o json: offset, value_size, bytes, the last 6 bytes" ||
	{ fail "retrieve --offset -o json fields"; show; }
no retrieve no-such-key --offset 5
check "retrieve --offset of a missing key exits 2" 2 "not exist"
no retrieve big1 --offset x12
check "a bad --offset exits 64" 64 "bad --offset"

printf 'hello\nfrom stdin\0with a NUL' >"$T/small"
run_in "$T/small" 30 "$CLI" --timeout 10000 -s "$PIO" -n "$NQN_OPEN" store piped -
check "store from stdin" 0 "stored piped"
no retrieve piped
check "retrieve to stdout" 0
cmp -s "$T/small" "$T/out" && ok "stdout == stdin bytes (with a NUL)" || { fail "retrieve to stdout differs"; show; }
run_in "$T/small" 30 "$CLI" --timeout 10000 -s "$PIO" -n "$NQN_OPEN" store piped2
check "store with no FILE reads stdin" 0 "stored piped2"

no --hex store 00ff10fe "$T/small"
check "store --hex 00ff10fe" 0 "stored 00ff10fe"
no --hex retrieve 0x00FF10FE "$T/rhex"
check "retrieve --hex 0x00FF10FE (prefix, upper case)" 0
cmp -s "$T/small" "$T/rhex" && ok "--hex key round trip" || fail "--hex key value differs"
no --hex exist 00ff10fe
check "exist --hex prints the key as hex" 0 "^00ff10fe: exists\$"
no --hex store 0g "$T/small"
check "store --hex with a bad hex key exits 64" 64 "hex"
no store 0123456789abcdefX "$T/small"
check "a 17-byte key exits 64" 64 "1 to 16 bytes"

no exist big1
check "exist on a stored key exits 0" 0 "big1: exists"
no exist no-such-key
check "exist on a missing key exits 2" 2 "does not exist"
no -o json exist no-such-key
[ "$RC" = 2 ] && python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["exists"] is False' <"$T/out" 2>/dev/null &&
	ok "exist -o json on a missing key: exit 2, {\"exists\": false}" || { fail "exist -o json missing key (exit $RC)"; show; }
no delete piped2
check "delete" 0 "deleted piped2"
no retrieve piped2
check "retrieve after delete exits 2 (key does not exist)" 2 "not exist"
no -o json retrieve piped2
if [ "$RC" = 2 ] && python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["error"]' <"$T/out" 2>/dev/null; then
	ok "retrieve -o json of a missing key: exit 2 and a JSON error object"
else
	fail "retrieve -o json of a missing key (exit $RC)"
	show
fi
no delete piped2
check "delete of a missing key exits 2" 2 "not exist"
no store big1 "$T/small" --must-not-exist
check "store --must-not-exist on an existing key exits 3" 3 "exists"
no retrieve big1 "$T/r1m"
cmp -s "$T/v1m" "$T/r1m" && ok "the refused --must-not-exist store left the value alone" || fail "--must-not-exist replaced the value"
no store fresh "$T/small" --must-exist
check "store --must-exist on a missing key exits 2" 2 "not exist"
no store big1 "$T/v1m" --must-exist
check "store --must-exist on an existing key exits 0" 0 "stored big1"
no store a b c d
check "store with too many arguments exits 64" 64 "wrong number of arguments"

# The allowlisted subsystem: values up to 64 KiB; nsid 2 is the same RADOS namespace, read-only.
head -c 65536 /dev/urandom >"$T/v64k"
head -c 65537 /dev/urandom >"$T/v64k1"
na store edge "$T/v64k"
check "store of exactly max_value (65536) on the allowlisted subsystem as the allowed host" 0 "stored edge"
na store over "$T/v64k1"
check "store of max_value + 1 fails with Invalid Value Size" 1 "Invalid Value Size"
na --nsid 2 retrieve edge "$T/redge"
check "the read-only namespace reads what nsid 1 stored" 0
cmp -s "$T/v64k" "$T/redge" && ok "read-only namespace value == stored value" || fail "read-only namespace value differs"
na --nsid 2 store ro "$T/small"
check "store on the read-only namespace fails mentioning write protect" 1 "write protect"
na --nsid 2 delete edge
check "delete on the read-only namespace fails mentioning write protect" 1 "write protect"
nk -n "$NQN_ALLOW" -q "$HOST_BAD" exist edge
check "the allowlisted subsystem refuses another host NQN, naming the NQN sent and its source" 1 \
	"refused host NQN $HOST_BAD \(from --hostnqn\)"
nk -n "$NQN_ALLOW" exist edge
check "the allowlisted subsystem refuses the default (uuid) host NQN, naming it" 1 \
	"refused host NQN nqn\.2014-08\.org\.nvmexpress:uuid:[0-9a-f-]{36} \(from generated for this run\)"

# Host identity as nvme-cli finds it: the host NQN and ID files (whitespace trimmed), options over them.
printf '  %s\n\n' "$HOST_OK" >"$T/hostnqn"
HID=0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f0
printf '%s\n' "${HID^^}" >"$T/hostid"
NKV_HOSTNQN_FILE="$T/hostnqn" nk -n "$NQN_ALLOW" exist edge
check "the host NQN file (an allowed NQN, padded with whitespace) gets through the allowlist without -q" 0 "edge: exists"
run 10 "$CLI" -o json --version
check_json "--version -o json is one JSON object"
NKV_HOSTNQN_FILE="$T/hostnqn" NKV_HOSTID_FILE="$T/hostid" run 10 "$CLI" -o json show-host
[ "$(json_get 'j["hostnqn"], j["hostid"], j["hostnqn_source"], j["hostid_source"]')" = "$HOST_OK $HID file file" ] &&
	ok "show-host -o json: NQN and ID from their files, trimmed, ID in lower case" || { fail "show-host from files"; show; }
NKV_HOSTNQN_FILE="$T/hostnqn" NKV_HOSTID_FILE="$T/hostid" run 10 "$CLI" -q "$HOST_BAD" -I 11111111-2222-4333-8444-555555555555 show-host
check "show-host: --hostnqn and --hostid override the files" 0 "hostid  : 11111111-2222-4333-8444-555555555555 \(--hostid\)"
grep -q "hostnqn : $HOST_BAD (--hostnqn)" "$T/out" && ok "show-host names --hostnqn as the NQN's source" || { fail "show-host --hostnqn"; show; }
printf 'nqn.2014-08.org.nvmexpress:uuid:%s\n' "$HID" >"$T/uuidnqn"
NKV_HOSTNQN_FILE="$T/uuidnqn" run 10 "$CLI" -o json show-host
[ "$(json_get 'j["hostid"], j["hostid_source"]')" = "$HID hostnqn" ] &&
	ok "without a host ID file, a uuid host NQN's UUID is the host ID (nvme-cli)" || { fail "host ID from a uuid NQN"; show; }
NKV_HOSTID_FILE="$T/hostid" run 10 "$CLI" -o json show-host
[ "$(json_get 'j["hostnqn"], j["hostnqn_source"]')" = "nqn.2014-08.org.nvmexpress:uuid:$HID hostid" ] &&
	ok "without a host NQN file, the NQN is the uuid NQN of the host ID file" || { fail "NQN from the host ID"; show; }
echo not-a-uuid >"$T/badid"
NKV_HOSTID_FILE="$T/badid" nk -n "$NQN_OPEN" exist edge
check "a malformed host ID file exits 1 naming it" 1 "badid is malformed"
NKV_HOSTID_FILE="$T/badid" nk -n "$NQN_OPEN" -I "$HID" exist edge
check "--hostid replaces a malformed host ID file" 2 "does not exist"
echo "bad nqn with spaces" >"$T/badnqn"
NKV_HOSTNQN_FILE="$T/badnqn" nk -n "$NQN_OPEN" exist edge
check "a malformed host NQN file exits 1 naming it" 1 "badnqn is malformed"
nk -n "$NQN_OPEN" -I not-a-uuid exist edge
check "a malformed --hostid exits 64" 64 "bad --hostid"
nk -n "$NQN_OPEN" -q "no-nqn-prefix" exist edge
check "a malformed --hostnqn exits 64" 64 "bad --hostnqn"
nk -n "nqn.2026-11.io.rados-nkv:no-such-subsys" exist edge
check "an unknown subsystem NQN exits 1 naming it" 1 "no-such-subsys"
nk -o json -n "nqn.2026-11.io.rados-nkv:no-such-subsys" exist edge
check_json_err "-o json: an unknown subsystem gives exit 1 and a JSON error object" 1
no -o json store k "$T/no-such-file"
check_json_err "-o json: store from a missing file gives exit 1 and a JSON error object" 1
run 20 "$CLI" --timeout 5000 -s "$PSPARE" -o json discover
check_json_err "-o json: discover on a closed port gives exit 1 and a JSON error object" 1

# List: 50 keys in their own namespace come back exactly, sorted by bytes, over several pages.
: >"$T/keys"
for i in $(seq 1 50); do
	k=$(printf 'k%x.%d' $((RANDOM * 7 % 4096)) "$i")
	echo "$k" >>"$T/keys"
	if ! timeout -k 1 20 "$CLI" --timeout 10000 -s "$PIO" -n "$NQN_OPEN" --nsid 2 store "$k" "$T/small" >/dev/null 2>"$T/err"; then
		fail "store list key $k"
		show
	fi
done
LC_ALL=C sort "$T/keys" >"$T/keys.sorted"
no --nsid 2 list
check "list exits 0" 0
cmp -s "$T/keys.sorted" "$T/out" && ok "list returns exactly the 50 keys, sorted" ||
	{ fail "list output differs from the 50 sorted keys"; diff "$T/keys.sorted" "$T/out" | head -10 | sed 's/^/#   /'; }
no --nsid 2 list --max 7
head -7 "$T/keys.sorted" | cmp -s - "$T/out" && ok "list --max 7 returns the first 7" || { fail "list --max 7"; show; }
grep -q "max 7 reached; more keys follow" "$T/err" && ok "list --max 7 says more keys follow" || { fail "list --max 7: no note"; show; }
no --nsid 2 list --max 50
grep -q "more keys follow" "$T/err" && { fail "list --max 50 of 50 keys says more follow"; show; } ||
	ok "list --max 50 of 50 keys: no note"
no --nsid 2 -o json list --max 7
[ "$(json_get 'j["count"] == 7 and j["more"] is True')" = True ] && ok "list -o json --max 7: more true" ||
	{ fail "list -o json --max 7"; show; }
start=$(sed -n 20p "$T/keys.sorted")
no --nsid 2 list "$start"
tail -n +20 "$T/keys.sorted" | cmp -s - "$T/out" && ok "list START_KEY returns the keys >= it" || { fail "list $start"; show; }
no --nsid 2 -o json list
check_json "list -o json is JSON"
[ "$(json_get 'j["count"] == 50 and j["keys"] == sorted(j["keys"]) and j["more"] is False')" = True ] &&
	ok "list -o json: count 50, sorted" || { fail "list -o json count/order"; show; }
no --hex list
grep -qx "00ff10fe" "$T/out" && ok "list --hex prints the binary key as hex" || { fail "list --hex lacks 00ff10fe"; show; }
no list
grep -qxF '\x00\xff\x10\xfe' "$T/out" && ok "list prints non-printable key bytes as \\xNN" || { fail "list lacks \\x00\\xff\\x10\\xfe"; show; }

no -o json store jkey "$T/small"
check_json "store -o json is JSON"
no -o json retrieve jkey
check_json "retrieve -o json to stdout is JSON"
[ "$(json_get 'j["value"] == open("'"$T/small"'", "rb").read().decode("latin-1")')" = True ] &&
	ok "retrieve -o json value == stored bytes" || { fail "retrieve -o json value"; show; }
no -o json delete jkey
check_json "delete -o json is JSON"

# Addresses and connection errors: each cause its own message; ports are numbers; "[::1]" and
# "[::1]:PORT" as the daemon's --listen takes them.
for p in abc 0 70000 4420x; do
	nk -n "$NQN_OPEN" -s "$p" identify
	check "-s $p is a usage error (exit 64)" 64 "bad port '$p'"
done
nk -n "$NQN_OPEN" -a "[::1]:http" identify
check "a non-numeric port in -a [::1]:PORT is a usage error" 64 "bad port 'http'"
nk -n "$NQN_OPEN" -a "127.0.0.1:$PSPARE" identify
check "-a HOST:PORT and -s naming different ports is a usage error" 64 "different ports"
run 20 "$CLI" --timeout 5000 -a no-such-host.invalid -n "$NQN_OPEN" identify
check "a name that does not resolve: 'cannot resolve HOST'" 1 "^nkv: cannot resolve no-such-host\.invalid: "
run 10 "$CLI" --timeout 5000 -s "$PSPARE" -n "$NQN_OPEN" identify
check "nothing listening: 'connection refused by HOST:PORT'" 1 "^nkv: connection refused by 127\.0\.0\.1:$PSPARE "
read -r PSILENT < <(free_ports 1)
python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
conns = []
while True:
    c, _ = s.accept(); conns.append(c)  # never answers the ICReq
' "$PSILENT" &
PIDS+=($!)
for _ in $(seq 100); do # until it listens (python starts slowly on a loaded machine)
	(exec 3<>"/dev/tcp/127.0.0.1/$PSILENT") 2>/dev/null && break
	sleep 0.1
done
run 10 "$CLI" --timeout 1500 -s "$PSILENT" -n "$NQN_OPEN" identify
check "a listener that never answers: 'no answer from HOST:PORT within 1500 ms'" 1 \
	"^nkv: no answer from 127\.0\.0\.1:$PSILENT within 1500 ms"
# 2001:db8::/32 is never routed: no route (unreachable) or dropped (no answer), by the machine's
# routes; either way its own message, never the generic one.
run 10 "$CLI" --timeout 1500 -a "[2001:db8::1]" -n "$NQN_OPEN" identify
check "an unroutable address names the cause (unreachable or no answer)" 1 \
	"^nkv: (host \[2001:db8::1\] is unreachable|network unreachable for \[2001:db8::1\]|no answer from \[2001:db8::1\]:4420 within)"
read -r PV6 < <(free_ports 1)
NQN_V6="nqn.2026-11.io.rados-nkv:dcli-v6-$$"
"$DAEMON" "${CEPH_FLAGS[@]}" --run-dir "$T/run-v6" -s "$NQN_V6" -p "$POOL" -l "[::1]:$PV6" -d none >"$T/daemon-v6.log" 2>&1 </dev/null &
PIDS+=($!)
V6PID=$!
for _ in $(seq 100); do
	timeout -k 1 3 "$CLI" --timeout 1000 -a "[::1]" -s "$PV6" -n "$NQN_V6" identify >/dev/null 2>&1 && break
	sleep 0.1
done
nk -a "[::1]" -s "$PV6" -n "$NQN_V6" identify
check "-a [::1] -s PORT reaches a daemon listening on [::1] (as its -l [::1]:PORT)" 0 "subnqn +: $NQN_V6\$"
run 10 "$CLI" --timeout 5000 -a "[::1]:$PV6" -n "$NQN_V6" identify
check "-a [::1]:PORT (the port in the address)" 0 "subnqn +: $NQN_V6\$"
run 10 "$CLI" --timeout 5000 -a "[::1]:$PV6" identify
check "-a [::1]:PORT without -n: discovery on that port finds the subsystem" 0 "subnqn +: $NQN_V6\$"
run 10 "$CLI" --timeout 5000 -a "[::1]" -s "$PV6" discover
check "discover -a [::1] -s PORT" 0 "subnqn: +$NQN_V6"
kill -TERM "$V6PID" 2>/dev/null
wait "$V6PID" 2>/dev/null

# A value above the max value of the namespace it is read through (nsid 2: read-only over nsid 1's
# RADOS namespace, 1 MiB): nkv writes the whole value, over shm, vfio-user and NVMe/TCP, with or
# without --max-size; never its first MiB with "truncated": false.
read -r PBIG < <(free_ports 1)
NQN_BIG="nqn.2026-11.io.rados-nkv:dcli-big-$$"
"$DAEMON" "${CEPH_FLAGS[@]}" --run-dir "$T/run-big" -s "$NQN_BIG" -p "$POOL" -l "127.0.0.1:$PBIG" -d none \
	-S "$T/big.sock" \
	--vfio-user "$T/big.vfu" -n "1:$RUNID-big:64M" -n "2:$RUNID-big:1M:ro" >"$T/daemon-big.log" 2>&1 </dev/null &
PIDS+=($!)
BIGPID=$!
for _ in $(seq 100); do
	[ -S "$T/big.sock" ] && [ -S "$T/big.vfu" ] && timeout -k 1 3 "$CLI" --timeout 1000 -s "$PBIG" -n "$NQN_BIG" identify >/dev/null 2>&1 && break
	sleep 0.1
done
head -c 3145805 /dev/urandom >"$T/big3m"
run 30 "$CLI" --timeout 10000 -t "shm:$T/big.sock" --nsid 1 store big "$T/big3m"
check "store 3 MiB + 77 through nsid 1 (64 MiB) over shm" 0
for tr in "-t shm:$T/big.sock" "-t vfio-user:$T/big.vfu" "-s $PBIG -n $NQN_BIG"; do
	trn=$(case "$tr" in "-t shm"*) echo shm ;; "-t vfio"*) echo vfio-user ;; *) echo tcp ;; esac)
	for ms in "--max-size 4194304" ""; do
		rm -f "$T/bigout"
		# shellcheck disable=SC2086 # the transport and size options are word lists
		run 30 "$CLI" --timeout 10000 $tr --nsid 2 -o json retrieve big "$T/bigout" $ms
		if [ "$RC" = 0 ] && [ "$(json_get '(j["value_size"], j["bytes"], j["truncated"])')" = "(3145805, 3145805, False)" ] &&
			cmp -s "$T/big3m" "$T/bigout"; then
			ok "retrieve through the 1 MiB nsid 2 ($trn, ${ms:-default size}): the whole value"
		else
			fail "retrieve through the 1 MiB nsid 2 ($trn, ${ms:-default size}) (exit $RC)"
			show
			cmp "$T/big3m" "$T/bigout" | sed 's/^/#   /'
		fi
	done
done
run 10 "$CLI" -t "vfio-user:$T/big.vfu" -n "nqn.2026-11.io.rados-nkv:other" exist big
check "vfio-user: a -n other than the socket's subsystem" 1 "serves $NQN_BIG, not nqn.2026-11.io.rados-nkv:other"
kill -TERM "$BIGPID" 2>/dev/null
wait "$BIGPID" 2>/dev/null

# -o json: every command, on success and on failure (usage, connection, target status), prints
# exactly one JSON object on stdout, whatever it also says on stderr.
printf 'v' >"$T/v1"
no -o json discover; check_one_json "-o json discover (the -s port serves discovery)" 0 ok discover
no -o json list-ns; check_one_json "-o json list-ns" 0 ok list-ns
no -o json identify; check_one_json "-o json identify" 0 ok identify
no -o json identify --ns; check_one_json "-o json identify --ns" 0 ok identify
no -o json store jk "$T/v1"; check_one_json "-o json store" 0 ok store
no -o json retrieve jk; check_one_json "-o json retrieve to stdout" 0 ok retrieve
no -o json retrieve jk "$T/rj"; check_one_json "-o json retrieve to a file" 0 ok retrieve
no -o json exist jk; check_one_json "-o json exist (present)" 0 ok exist
no -o json list; check_one_json "-o json list" 0 ok list
no -o json delete jk; check_one_json "-o json delete" 0 ok delete
no -o json exist jk; check_one_json "-o json exist (absent): exit 2, a result, not an error" 2 ok exist
run 10 "$CLI" -o json show-host; check_one_json "-o json show-host" 0 ok show-host
run 10 "$CLI" -o json --help; check_one_json "-o json --help" 0 ok help
run 10 "$CLI" -o json store --help; check_one_json "-o json store --help" 0 ok help
run 10 "$CLI" -o json bench help; check_one_json "-o json bench help" 0 ok help
no -o json bench ops=20 keys=20 size=1K; check_one_json "-o json bench (raw, 20 ops)" 0 ok bench
no --output=json exist jk; check_one_json "--output=json" 2 ok exist
no exist jk -o json; check_one_json "-o json after the command's arguments" 2 ok exist
no -o json retrieve jk; check_one_json "-o json retrieve of an absent key: exit 2, error object" 2 err retrieve
no -o json delete jk; check_one_json "-o json delete of an absent key" 2 err delete
no -o json store big1 "$T/v1" --must-not-exist; check_one_json "-o json store --must-not-exist on a present key" 3 err store
no -o json store jk "$T/no-such-file"; check_one_json "-o json store from a missing file" 1 err store
na -o json --nsid 2 store ro "$T/v1"; check_one_json "-o json store on a read-only namespace" 1 err store
no -o json --nsid 9 identify --ns; check_one_json "-o json identify --ns of an inactive NSID" 1 err identify
nk -o json -n "$NQN_ALLOW" -q "$HOST_BAD" list; check_one_json "-o json list refused by an allowlist" 1 err list
nk -o json -n "nqn.2026-11.io.rados-nkv:nope" list-ns; check_one_json "-o json list-ns on an unknown subsystem" 1 err list-ns
run 10 "$CLI" --timeout 2000 -s "$PSPARE" -n "$NQN_OPEN" -o json identify
check_one_json "-o json identify, connection refused" 1 err identify
run 10 "$CLI" --timeout 2000 -s "$PSPARE" -o json discover; check_one_json "-o json discover, connection refused" 1 err discover
run 10 "$CLI" --timeout 2000 -s "$PSPARE" -o json bench; check_one_json "-o json bench, connection refused" 1 err bench
no -o json bench keys=1 conns=2; check_one_json "-o json bench refused before it runs (keys < conns)" 1 err bench
no -o json bench qd=lots; check_one_json "-o json bench with a bad argument" 64 err bench
run 10 "$CLI" -o json; check_one_json "-o json with no command" 64 err null
run 10 "$CLI" -o json frobnicate; check_one_json "-o json unknown command" 64 err frobnicate
run 10 "$CLI" -o json --frobnicate list; check_one_json "-o json unknown option" 64 err
run 10 "$CLI" -o json list --nsid; check_one_json "-o json option without its argument" 64 err
run 10 "$CLI" --nsid 0 -o json list; check_one_json "-o json bad --nsid (before -o)" 64 err
run 10 "$CLI" -o json store 0123456789abcdefX; check_one_json "-o json a 17-byte key" 64 err store
run 10 "$CLI" -o json --hex exist 0g; check_one_json "-o json a bad hex key" 64 err exist
run 10 "$CLI" -o json store a b c; check_one_json "-o json wrong number of arguments" 64 err store
run 10 "$CLI" -o json -I nope exist k; check_one_json "-o json bad --hostid" 64 err
run 10 "$CLI" -o json -t shm:/nonexistent/sock discover; check_one_json "-o json discover over shm" 64 err discover
run 10 "$CLI" -o json -t vfio-user:/nonexistent/sock discover; check_one_json "-o json discover over vfio-user" 64 err discover
run 10 "$CLI" -o json -t vfio-user: exist k; check_one_json "-o json vfio-user without a path" 64 err
run 10 "$CLI" -o json -t vfio-user:/nonexistent/sock exist k; check_one_json "-o json no vfio-user socket" 1 err exist
NKV_HOSTID_FILE="$T/badid" run 10 "$CLI" -o json exist k; check_one_json "-o json malformed host ID file" 1 err exist
no -o json retrieve jk
[ "$(json_get 'j["status"], j["nvme_status"], j["errno"]')" = "Key Does Not Exist 135 2" ] &&
	ok "-o json error fields: status names the NVMe status, nvme_status its code, errno ENOENT" ||
	{ fail "-o json error fields of an absent key"; show; }
run 10 "$CLI" --timeout 2000 -s "$PSPARE" -n "$NQN_OPEN" -o json identify
[ "$(json_get 'j["status"], j["errno"], "nvme_status" in j')" = "ECONNREFUSED 111 False" ] &&
	ok "-o json error fields: status names the errno when no NVMe status came back" ||
	{ fail "-o json error fields of a refused connection"; show; }

# exec (vendor Exec, issue 13): usage errors are caught before connecting (exit 64); an opcode that
# no namespace allowlists (none here) is Invalid Command Opcode, reported like any NVMe error (exit 1).
run 10 "$CLI" exec k 0x7f; check "exec with an opcode below 0x80 is a usage error" 64 "bad opcode '0x7f'"
run 10 "$CLI" exec k 256; check "exec with an opcode above 0xff is a usage error" 64 "bad opcode '256'"
run 10 "$CLI" exec k 0x83; check "exec with a bidirectional (11b) opcode is a usage error" 64 "direction 11b"
run 10 "$CLI" exec k 0x82 --arg 010203040506070809
check "exec --arg longer than 8 bytes is a usage error" 64 "is 9 bytes; an Exec carries at most 8 inline bytes"
run 10 "$CLI" exec k 0x81 --in "$T/v1" --arg 01; check "exec with both --in and --arg is a usage error" 64 "--in and --arg exclude each other"
run 10 "$CLI" exec k 0x82 --in "$T/v1"; check "exec --in with a 10b opcode is a usage error" 64 "takes no input buffer"
run 10 "$CLI" exec k 0x81 --out "$T/eo"; check "exec --out with a 01b opcode is a usage error" 64 "returns no output data"
run 10 "$CLI" -o json exec k 0x82 --arg 0x0102030405060708ff; check_one_json "-o json exec --arg of 9 bytes" 64 err exec
no exec k 0x82
check "exec of an opcode nothing allowlists: Invalid Command Opcode, exit 1" 1 "^nkv: exec failed: Invalid Command Opcode \(opcode 0x82 is not allowlisted"
no exec k 0x81 --in "$T/v1m"; check "exec 0x81 with 1 MiB of input (R2T): Invalid Command Opcode" 1 "Invalid Command Opcode"
no exec k 128 --arg 00ff; check "exec 128 (decimal, 00b) with inline bytes: Invalid Command Opcode" 1 "Invalid Command Opcode"
no -o json exec k 0x82
check_one_json "-o json exec of an opcode nothing allowlists" 1 err exec
[ "$(json_get 'j["status"], j["nvme_status"], j["errno"]')" = "Invalid Command Opcode 1 95" ] &&
	ok "-o json exec error fields: Invalid Command Opcode, nvme_status 1, errno EOPNOTSUPP" ||
	{ fail "-o json exec error fields"; show; }
no exist big1; check "the connection's subsystem still serves after the Exec refusals" 0

# Digests.
head -c 1048576 /dev/urandom >"$T/vdg"
no --hdgst --ddgst store dgst "$T/vdg"
check "store --hdgst --ddgst (1 MiB)" 0 "stored dgst"
no --hdgst --ddgst retrieve dgst "$T/rdg"
check "retrieve --hdgst --ddgst" 0
cmp -s "$T/vdg" "$T/rdg" && ok "digest round trip (1 MiB)" || fail "digest round trip differs"

# The RADOS object: name = lowercase hex of the key, in the namespace's RADOS namespace.
if [ "$BACKEND" = rados ]; then
	if command -v rados >/dev/null; then
		rargs=(-c "$NKV_CEPH_CONF" -n "client.${NKV_CEPH_USER:-admin}" -p "$POOL")
		[ -n "${NKV_CEPH_KEYRING:-}" ] && rargs+=(--keyring "$NKV_CEPH_KEYRING")
		run 30 rados "${rargs[@]}" -N "$NS_A" get "$(hexof big1)" "$T/robj"
		check "rados get $(hexof big1) in namespace $NS_A" 0
		cmp -s "$T/v1m" "$T/robj" && ok "the RADOS object holds the stored 1 MiB" || fail "RADOS object differs from the stored value"
		run 30 rados "${rargs[@]}" -N "$NS_A" get 00ff10fe "$T/robj2"
		cmp -s "$T/small" "$T/robj2" && ok "binary key 00ff10fe is RADOS object 00ff10fe" || { fail "rados get 00ff10fe (exit $RC)"; show; }
	else
		ok "# skip rados get: no rados CLI"
	fi
fi

# ---- 4. graceful shutdown under load -------------------------------------------------------------

head -c 4194304 /dev/urandom >"$T/v4m"
: >"$T/acked"
for l in 1 2; do
	(
		for i in $(seq 1 100); do
			[ -e "$T/stop-load" ] && break
			if timeout -k 1 20 "$CLI" --timeout 10000 -s "$PIO" -n "$NQN_OPEN" store "load$l-$i" "$T/v4m" >/dev/null 2>>"$T/load$l.err"; then
				echo "load$l-$i" >>"$T/acked"
			fi
		done
	) &
	LOADPIDS+=($!)
done
end=$((SECONDS + 15))
while [ "$(wc -l <"$T/acked")" -lt 4 ] && [ $SECONDS -lt $end ]; do sleep 0.05; done
nacked_before=$(wc -l <"$T/acked")
sleep 0.3 # stores in flight when the signal lands
stop_daemon TERM $((GRACE_MS / 1000 + 5))
if [ "$DRC" = 0 ]; then
	ok "SIGTERM under load ($nacked_before+ stores acknowledged): exit 0 after $DMS ms (grace $GRACE_MS ms)"
else
	fail "SIGTERM under load: exit $DRC after $DMS ms (want 0 within $((GRACE_MS / 1000 + 5)) s)"
	tail -20 "$T/daemon1.log" | sed 's/^/#   /'
fi
grep -q "shutting down (up to $GRACE_MS ms" "$T/daemon1.log" && ok "the log says shutting down with --grace-ms $GRACE_MS (flag over the file's 10000)" ||
	{ fail "the log lacks 'shutting down (up to $GRACE_MS ms'"; tail -5 "$T/daemon1.log" | sed 's/^/#   /'; }
grep -q "daemon: stopped$" "$T/daemon1.log" && ok "the log says stopped" || { fail "the log lacks 'daemon: stopped'"; tail -5 "$T/daemon1.log" | sed 's/^/#   /'; }
[ ! -e "$T/rados-nkv.pid" ] && ok "the pid file is removed on a clean stop" || fail "the pid file $T/rados-nkv.pid is left behind"
touch "$T/stop-load"
end=$((SECONDS + 25))
for p in "${LOADPIDS[@]}"; do
	while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
done
if kill -0 "${LOADPIDS[0]}" 2>/dev/null || kill -0 "${LOADPIDS[1]}" 2>/dev/null; then
	fail "the load clients did not end after the daemon stopped"
else
	ok "the load clients ended after the daemon stopped"
fi
wait "${LOADPIDS[@]}" 2>/dev/null
LOADPIDS=()
if grep -qiE "timed out" "$T"/load*.err; then
	fail "a load client timed out instead of seeing its command finish or the connection close"
	grep -iE "timed out" "$T"/load*.err | head -3 | sed 's/^/#   /'
fi
nacked=$(wc -l <"$T/acked")
echo "# $nacked stores of 4 MiB acknowledged before the stop"

# Restart on the same ports at once (SO_REUSEADDR), then (rados) every acknowledged key is there.
if start_daemon "$T/daemon2.log" "${DFLAGS[@]}"; then
	ok "rados-nkv restarts on the same ports right away"
	if [ "$BACKEND" = rados ]; then
		lost=0
		while read -r k; do
			if ! timeout -k 1 30 "$CLI" --timeout 10000 -s "$PIO" -n "$NQN_OPEN" retrieve "$k" "$T/rload" >/dev/null 2>"$T/err" ||
				! cmp -s "$T/v4m" "$T/rload"; then
				lost=$((lost + 1))
				echo "#   $k: $(head -c 200 "$T/err")"
			fi
		done <"$T/acked"
		[ "$lost" = 0 ] && [ "$nacked" -gt 0 ] && ok "after restart all $nacked acknowledged 4 MiB values are intact" ||
			fail "after restart $lost of $nacked acknowledged values are missing or differ"
		no retrieve big1 "$T/r1m"
		cmp -s "$T/v1m" "$T/r1m" && ok "after restart big1 is intact" || fail "after restart big1 differs (exit $RC)"
	fi
	stop_daemon INT 10
	[ "$DRC" = 0 ] && grep -q "daemon: stopped$" "$T/daemon2.log" && ok "SIGINT when idle: exit 0 after $DMS ms, log says stopped" ||
		{ fail "SIGINT when idle: exit $DRC after $DMS ms"; tail -5 "$T/daemon2.log" | sed 's/^/#   /'; }
else
	fail "rados-nkv restarts on the same ports right away"
fi

echo "# $BACKEND: $(ms_since "$T0") ms"
echo "$PASS passed, $FAILN failed"
[ "$FAILN" = 0 ]
