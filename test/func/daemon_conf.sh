#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# daemon_conf.sh - the daemon is hard to deploy wrongly (issue 17: flag order, secure defaults,
# signals and the pid file, config errors, the demo's own daemon), mem backend, no cluster.
#
#   bash test/func/daemon_conf.sh BUILD_DIR      # BUILD_DIR holds rados-nkv and nkv
#
# Every check prints "ok - ..." or "FAIL - ..."; the last line is "N passed, N failed"; exit 1 on
# any failure. Every command runs under timeout; the EXIT trap kills the daemons it started.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(realpath "${1:?usage: $0 BUILD_DIR}")
D="$BUILD/rados-nkv"
T=$(mktemp -d "${TMPDIR:-/tmp}/nkv-dconf.XXXXXX")
PASS=0 FAILN=0 PIDS=()
NQN=nqn.2026-11.io.rados-nkv:conf-test
HOST=nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555

ok() { PASS=$((PASS + 1)); echo "ok - $*"; }
fail() { FAILN=$((FAILN + 1)); echo "FAIL - $*"; }
cleanup() {
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT

# run SECS CMD...: output (stdout+stderr) in $OUT, status in $RC
run() { local s=$1; shift; OUT=$(timeout "$s" "$@" 2>&1); RC=$?; }
# check NAME RC REGEX: the last run() exited RC and its output matches REGEX
check() {
	if [ "$RC" = "$2" ] && grep -qE -- "$3" <<<"$OUT"; then ok "$1"; else fail "$1 (exit $RC, output: $(head -c 400 <<<"$OUT"))"; fi
}
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# start_daemon LOG ARGS...: start in the background and wait (10 s) for its pid file ($T/pid)
start_daemon() {
	local log=$1; shift
	rm -f "$T/pid"
	"$D" "$@" --pid-file "$T/pid" 2>"$log" &
	DPID=$!; PIDS+=("$DPID")
	for _ in $(seq 100); do
		[ "$(cat "$T/pid" 2>/dev/null)" = "$DPID" ] && return 0
		kill -0 "$DPID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
P=$(free_port)

echo "# finding 1: per-subsystem flags before the first -s"
run 10 "$D" -b mem -a "$HOST" -s "$NQN" -p nkv --check
check "-a before -s is a usage error naming the flag" 64 "--allow-host comes before the first --subsys"
run 10 "$D" -b mem --ns 1:x -s "$NQN" --check
check "--ns before -s is a usage error" 64 "--ns comes before the first --subsys"
run 10 "$D" -b mem -s "$NQN" -a "$HOST" --check
check "-s then -a: the allowlist is on the named subsystem" 0 "subsystem $NQN: pool nkv; may connect: only 1 host\(s\): $HOST"
[ "$(grep -c '^subsystem ' <<<"$OUT")" = 1 ] && ok "no implicit default subsystem beside it" || fail "implicit subsystem: $OUT"
cat >"$T/two.json" <<EOF
{"backend": {"type": "mem"}, "subsystems": [{"nqn": "$NQN:a"}, {"nqn": "$NQN:b"}]}
EOF
run 10 "$D" -c "$T/two.json" -a "$HOST" --check
check "a loose -a with two subsystems in the file is ambiguous" 64 "ambiguous: the configuration file defines 2 subsystems"
cat >"$T/one.json" <<EOF
{"backend": {"type": "mem"}, "subsystems": [{"nqn": "$NQN:one"}]}
EOF
run 10 "$D" -c "$T/one.json" -a "$HOST" --check
check "a loose -a with one subsystem in the file applies to it" 0 "subsystem $NQN:one: .*only 1 host"

echo "# finding 2: secure defaults"
run 10 "$D" -b mem --check
check "default listener is loopback" 0 "NVMe/TCP listener: 127.0.0.1:4420"
check "default discovery is loopback" 0 "discovery: 127.0.0.1:8009"
run 10 "$D" -b mem -l "0.0.0.0:$P" -d none
check "any-host subsystem on 0.0.0.0 is refused, naming the way out" 1 "would be open to any host on 0.0.0.0:$P.*--allow-any-host"
run 10 "$D" -b mem -l "[::]:$P" -d none
check "the same on [::]" 1 "would be open to any host on ::"
run 10 "$D" -b mem -l "0.0.0.0:$P" -s "$NQN" --allow-any-host --check
check "--allow-any-host makes it explicit" 0 "may connect: any host \(allow-any-host\)"
# "shm": {"socket_dir"} is the JSON form of --shm-dir: accepted, and a relative path refused by name
printf '{"backend": {"type": "mem"}, "shm": {"socket_dir": "%s"}}\n' "$T" >"$T/shmdir.json"
run 10 "$D" -c "$T/shmdir.json" --check
check "shm.socket_dir (--shm-dir) is a known JSON key" 0 "backend: mem"
printf '{"backend": {"type": "mem"}, "shm": {"socket_dir": "relative/dir"}}\n' >"$T/shmdir-rel.json"
run 10 "$D" -c "$T/shmdir-rel.json" --check
check "shm.socket_dir must be absolute" 1 'shm.*socket_dir.*absolute path'
run 10 "$D" -b mem -l "0.0.0.0:$P" -s "$NQN" -a "$HOST" --check
check "an allowlist needs no --allow-any-host" 0 "may connect: only 1 host"
run 10 "$D" -b mem -s "$NQN" -a "$HOST" --allow-any-host --check
check "allowlist and allow-any-host together are refused" 1 "both an allowlist and allow-any-host"
cat >"$T/open.json" <<EOF
{"backend": {"type": "mem"}, "listeners": [{"address": "0.0.0.0", "port": $P}], "discovery": false,
 "subsystems": [{"nqn": "$NQN", "allow_any_host": true}]}
EOF
run 10 "$D" -c "$T/open.json" --check
check "JSON allow_any_host" 0 "may connect: any host \(allow-any-host\)"
if start_daemon "$T/d1.log" -b mem -l "127.0.0.1:$P" -d none -s "$NQN" -S "$T/a.sock" -s "$NQN:2" -a "$HOST"; then
	ok "daemon with two subsystems started"
	grep -q "subsystem $NQN may be used by any host (listeners on loopback only)" "$T/d1.log" &&
		ok "startup log says who may connect (open subsystem)" || fail "no access line: $(cat "$T/d1.log")"
	grep -q "subsystem $NQN:2 may be used by only 1 host(s): $HOST" "$T/d1.log" &&
		ok "startup log says who may connect (allowlist)" || fail "no allowlist line: $(cat "$T/d1.log")"
	[ "$(stat -c %a "$T/a.sock")" = 660 ] && ok "shm socket mode 0660 by default" || fail "shm socket mode $(stat -c %a "$T/a.sock")"
	kill -TERM "$DPID"; wait "$DPID"
else
	fail "daemon did not start: $(cat "$T/d1.log")"
fi
if getent group nogroup >/dev/null && start_daemon "$T/d2.log" -b mem -l "127.0.0.1:$P" -d none -s "$NQN" \
	-S "$T/b.sock" --shm-mode 0600 --shm-group nogroup; then
	[ "$(stat -c '%a %G' "$T/b.sock")" = "600 nogroup" ] && ok "--shm-mode 0600 --shm-group nogroup" ||
		fail "shm socket is $(stat -c '%a %G' "$T/b.sock")"
	kill -TERM "$DPID"; wait "$DPID"
else
	fail "daemon with --shm-group did not start: $(cat "$T/d2.log" 2>/dev/null)"
fi
run 10 "$D" -b mem -l "127.0.0.1:$P" -s "$NQN" -S "$T/c.sock" --shm-group no-such-group-xyz
check "an unknown --shm-group is an error naming it" 1 "no group named 'no-such-group-xyz'"

echo "# vfio-user: --vfio-user / --vfio-user-host and their JSON keys"
run 10 "$D" -b mem -s "$NQN" --vfio-user "$T/vfu/cntrl" --vfio-user-host "$HOST" --check
check "--vfio-user with a host NQN" 0 "vfio-user: $T/vfu/cntrl .*clients act as $HOST"
run 10 "$D" -b mem -s "$NQN" --vfio-user-host "$HOST" --check
check "--vfio-user-host without --vfio-user is refused" 1 "vfio-user host NQN .* without a vfio-user socket"
run 10 "$D" -b mem -s "$NQN" --vfio-user "$T/x" --vfio-user-host not-an-nqn --check
check "--vfio-user-host must be an NQN" 64 "--vfio-user-host: an NQN"
printf '{"backend": {"type": "mem"}, "subsystems": [{"nqn": "%s", "vfio_user_socket": "%s/j.sock", "vfio_user_host": "%s"}]}\n' \
	"$NQN" "$T" "$HOST" >"$T/vfu.json"
run 10 "$D" -c "$T/vfu.json" --check
check "JSON vfio_user_socket and vfio_user_host" 0 "vfio-user: $T/j.sock .*clients act as $HOST"
printf '{"backend": {"type": "mem"}, "subsystems": [{"nqn": "%s", "vfio_user_host": "bad"}]}\n' "$NQN" >"$T/vfu-bad.json"
run 10 "$D" -c "$T/vfu-bad.json" --check
check "JSON vfio_user_host must be an NQN" 1 "vfio_user_host.*must be an NQN"
mkdir -p "$T/vfu"
if start_daemon "$T/d3.log" -b mem -l "127.0.0.1:$P" -d none -s "$NQN" --vfio-user "$T/vfu/cntrl"; then
	[ "$(stat -c %a "$T/vfu/cntrl")" = 660 ] && ok "vfio-user socket mode 0660 (--shm-mode)" ||
		fail "vfio-user socket mode $(stat -c %a "$T/vfu/cntrl")"
	# VERSION 0.0 over the stream socket: a reply (type 1, no error bit) with major 0
	/usr/bin/python3 - "$T/vfu/cntrl" <<'PY' && ok "the daemon answers vfio-user VERSION" || fail "no VERSION reply"
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(5); s.connect(sys.argv[1])
s.sendall(struct.pack("<HHIII", 7, 1, 20, 0, 0) + struct.pack("<HH", 0, 0))
h = b""
while len(h) < 16: h += s.recv(16 - len(h))
mid, cmd, size, flags, err = struct.unpack("<HHIII", h)
body = b""
while len(body) < size - 16: body += s.recv(size - 16 - len(body))
sys.exit(0 if (mid, cmd, flags & 0x2f) == (7, 1, 1) and body[:4] == b"\0\0\0\0" and b"max_msg_fds" in body else 1)
PY
	kill -TERM "$DPID"; wait "$DPID"
	[ ! -e "$T/vfu/cntrl" ] && ok "the vfio-user socket is removed at exit" || fail "socket left behind"
else
	fail "daemon with --vfio-user did not start: $(cat "$T/d3.log")"
fi

echo "# finding 4: signals and the pid file"
cat >"$T/hup.json" <<EOF
{"backend": {"type": "mem"}, "listeners": [{"address": "127.0.0.1", "port": $P}], "discovery": false,
 "log_level": "info"}
EOF
if start_daemon "$T/d3.log" -c "$T/hup.json"; then
	kill -HUP "$DPID"; sleep 1
	kill -0 "$DPID" 2>/dev/null && ok "SIGHUP does not kill the daemon" || fail "SIGHUP killed it"
	grep -q "SIGHUP: re-read $T/hup.json: log level info and" "$T/d3.log" && ok "SIGHUP re-reads the file and says what applies (the level by name)" ||
		fail "no SIGHUP line: $(cat "$T/d3.log")"
	echo '{"backend": {"type": "mem"}, broken' >"$T/hup.json"
	kill -HUP "$DPID"; sleep 1
	kill -0 "$DPID" 2>/dev/null && grep -q "is not valid; the running configuration stays" "$T/d3.log" &&
		ok "SIGHUP with a broken file keeps running and says so" || fail "broken-file SIGHUP: $(tail -3 "$T/d3.log")"
	run 10 "$D" -b mem -l "127.0.0.1:$(free_port)" -d none --pid-file "$T/pid"
	check "a second daemon refuses a pid file a live daemon owns" 1 "belongs to a running rados-nkv \(pid $DPID\)"
	kill -PIPE "$DPID"; sleep 0.3
	kill -0 "$DPID" 2>/dev/null && ok "SIGPIPE does not kill the daemon" || fail "SIGPIPE killed it"
	kill -TERM "$DPID"; wait "$DPID"; rc=$?
	[ "$rc" = 0 ] && [ ! -e "$T/pid" ] && ok "SIGTERM: exit 0 and the pid file is removed" ||
		fail "SIGTERM: exit $rc, pid file $(ls "$T/pid" 2>&1)"
else
	fail "daemon did not start: $(cat "$T/d3.log")"
fi
# Two daemons started at once with one pid file: exactly one runs, every time; the other exits 1
# saying why and leaves the winner's file alone.
race_ok=0
for trial in 1 2 3 4 5; do
	rm -f "$T/rpid"
	"$D" -b mem -l "127.0.0.1:0" -d none --control none --pid-file "$T/rpid" 2>"$T/r1.log" & r1=$!
	"$D" -b mem -l "127.0.0.1:0" -d none --control none --pid-file "$T/rpid" 2>"$T/r2.log" & r2=$!
	PIDS+=("$r1" "$r2")
	alive=2
	for _ in $(seq 100); do
		alive=0
		kill -0 "$r1" 2>/dev/null && alive=$((alive + 1))
		kill -0 "$r2" 2>/dev/null && alive=$((alive + 1))
		[ "$alive" -le 1 ] && [ -s "$T/rpid" ] && break
		sleep 0.1
	done
	sleep 0.5
	alive=0 win="" lose=""
	kill -0 "$r1" 2>/dev/null && { alive=$((alive + 1)); win=$r1; lose=$r2; llog=$T/r2.log; }
	kill -0 "$r2" 2>/dev/null && { alive=$((alive + 1)); win=$r2; lose=$r1; llog=$T/r1.log; }
	if [ "$alive" = 1 ]; then
		wait "$lose"; lrc=$?
		if [ "$lrc" = 1 ] && grep -q "belongs to a r" "$llog" && [ "$(cat "$T/rpid" 2>/dev/null)" = "$win" ]; then
			race_ok=$((race_ok + 1))
		else
			echo "# trial $trial: loser exit $lrc, pid file '$(cat "$T/rpid" 2>/dev/null)' (winner $win): $(tail -1 "$llog")"
		fi
	else
		echo "# trial $trial: $alive daemons running"
	fi
	kill -TERM "$r1" "$r2" 2>/dev/null; wait "$r1" "$r2" 2>/dev/null
done
[ "$race_ok" = 5 ] && ok "two daemons started at once on one pid file: one runs, the other exits 1 (5 of 5)" ||
	fail "pid file race: $race_ok of 5 trials had exactly one daemon, the loser refused and the file intact"
ln -s "$T/elsewhere" "$T/lpid"
run 10 "$D" -b mem -l "127.0.0.1:0" -d none --control none --pid-file "$T/lpid"
check "a pid file that is a symbolic link is refused" 1 "symbolic link"
[ ! -e "$T/elsewhere" ] && ok "and nothing is created through it" || fail "$T/elsewhere was created"
echo 999999 >"$T/pid"
if start_daemon "$T/d4.log" -b mem -l "127.0.0.1:$P" -d none; then
	ok "a stale pid file (dead pid) is taken over"
	kill -TERM "$DPID"; wait "$DPID"
else
	fail "stale pid file: $(cat "$T/d4.log")"
fi

echo "# finding 6: a live shm socket is never taken over, and only its owner removes it"
P2=$(free_port)
if start_daemon "$T/s1.log" -b mem -l "127.0.0.1:$P" -d none -S "$T/live.sock"; then
	A=$DPID
	run 10 "$D" -b mem -l "127.0.0.1:$P2" -d none -S "$T/live.sock"
	check "a second daemon refuses a socket a live daemon answers on" 1 "live.sock: Address already in use \(another live daemon"
	timeout 10 "$BUILD/nkv" -t "shm:$T/live.sock" identify >/dev/null 2>&1 && ok "the first daemon still serves its socket" ||
		fail "the first daemon's socket is gone or dead"
	rm -f "$T/live.sock"   # an operator removed it; a new daemon may take the path now
	mv "$T/pid" "$T/pid.a"
	if start_daemon "$T/s2.log" -b mem -l "127.0.0.1:$P2" -d none -S "$T/live.sock"; then
		kill -TERM "$A"; wait "$A"
		[ -S "$T/live.sock" ] && ok "the first daemon's exit leaves the successor's socket alone" ||
			fail "the first daemon removed the successor's socket"
		kill -KILL "$DPID"; wait "$DPID" 2>/dev/null
		if start_daemon "$T/s3.log" -b mem -l "127.0.0.1:$P2" -d none -S "$T/live.sock"; then
			ok "a dead daemon's stale socket is taken over"
			kill -TERM "$DPID"; wait "$DPID"
			[ ! -e "$T/live.sock" ] && ok "a clean exit removes its own socket" || fail "socket left after exit"
		else
			fail "stale socket not taken over: $(cat "$T/s3.log")"
		fi
	else
		fail "successor did not start: $(cat "$T/s2.log")"
	fi
else
	fail "shm daemon did not start: $(cat "$T/s1.log")"
fi
echo "not a socket" >"$T/file.sock"
run 10 "$D" -b mem -l "127.0.0.1:$P2" -d none -S "$T/file.sock"
check "a regular file at the socket path is refused" 1 "is not a socket: not removed"
[ "$(cat "$T/file.sock")" = "not a socket" ] && ok "and left intact" || fail "the file was changed"

echo "# finding 13: smaller ones"
run 10 "$D" -b mem --in-capsule 1000 --check
check "--in-capsule below 1 KiB is a usage error" 64 "invalid value for --in-capsule"
run 10 "$D" -b mem --in-capsule 8200 --check
check "--in-capsule not a multiple of 16 is a usage error" 64 "invalid value for --in-capsule"
run 20 "$D" -b mem -l "127.0.0.1:$P" -d none --ns 1::1G
check "a max value above the backend's largest is refused naming it" 1 "above the largest the backend stores, 134217728"
run 10 "$D" -c "$T/one.json" -c "$T/two.json" --check
check "-c twice is a usage error" 64 "given twice"
printf '{\n  "backend": {"type": "mem"},\n  "listeners": [\n    {"address": "127.0.0.1" "port": 1}\n  ]\n}\n' >"$T/syntax.json"
run 10 "$D" -c "$T/syntax.json" --check
check "a JSON syntax error names line and column" 1 "syntax.json:4:29: invalid JSON"
printf '{"backend": {"type": "mem"}' >"$T/trunc.json"
run 10 "$D" -c "$T/trunc.json" --check
check "a truncated JSON file says so, with the position" 1 "trunc.json:1:28: invalid JSON: unexpected end of file"
run 10 bash "$ROOT/scripts/ceph-dev.sh" no-such-command
check "ceph-dev.sh exits 64 on an unknown command" 64 "unknown command 'no-such-command'"
run 10 bash "$ROOT/scripts/ceph-dev.sh" start --bogus
check "ceph-dev.sh exits 64 on an unknown argument" 64 "unknown argument '--bogus'"
# Topology options: refused before anything is built (nothing appears in the directory).
for bad in 0 10 x -1 ''; do
	run 10 bash "$ROOT/scripts/ceph-dev.sh" start --osds "$bad" --dir "$T/cdev"
	check "ceph-dev.sh start --osds '$bad' exits 64" 64 "is not a number from 1 to 9"
done
for bad in 'a b' '../x' '-x' '' "$(printf 'p%.0s' $(seq 70))"; do
	run 10 bash "$ROOT/scripts/ceph-dev.sh" start --osds 3 --ec-pool "$bad" --dir "$T/cdev"
	check "ceph-dev.sh start --ec-pool '${bad:0:10}' exits 64" 64 "is not a pool name"
done
run 10 bash "$ROOT/scripts/ceph-dev.sh" start --osds 2 --ec-pool ec --dir "$T/cdev"
check "ceph-dev.sh --ec-pool with 2 OSDs exits 64 (k=2 + m=1 needs 3)" 64 "needs --osds 3 or more"
run 10 bash "$ROOT/scripts/ceph-dev.sh" kill osd.5 --dir "$T/cdev"
check "ceph-dev.sh kill of an OSD the cluster does not have exits 64" 64 "osd.5 is not a daemon of the cluster"
run 10 bash "$ROOT/scripts/ceph-dev.sh" pause osd.3 --dir "$T/cdev"
check "ceph-dev.sh pause of an OSD the cluster does not have exits 64" 64 "osd.3 is not a daemon of the cluster"
[ -e "$T/cdev/ceph.conf" ] && fail "a refused start left a ceph.conf" || ok "the refused starts built nothing"
OUT=$(cd "$T" && timeout 10 bash "$(realpath --relative-to="$T" "$ROOT/bench/compare.sh")" --help 2>&1); RC=$?
check "bench/compare.sh --help by a relative path from another directory" 0 "^compare.sh - rados-nkv side by side"
grep -q "set -euo" <<<"$OUT" && fail "compare.sh --help prints script lines" || ok "compare.sh --help is only the help"

if start_daemon "$T/b.log" -b mem -l "127.0.0.1:$P" -d none; then
	N="$BUILD/nkv"
	run 30 "$N" -s "$P" bench mode=mix keys=64 time=1 warmup=0 prefix=mx
	LEFT=$(timeout 10 "$N" -s "$P" list 2>/dev/null | grep -c '^mx')
	[ "$RC" = 0 ] && [ "$LEFT" = 0 ] && ok "nkv bench mode=mix deletes its keys" || fail "mix left $LEFT keys (exit $RC)"
	run 30 "$N" -s "$P" bench mode=mix keys=64 time=1 warmup=0 prefix=mk cleanup=0
	check "cleanup=0 says the keys stay" 0 "kept the 64 keys written \(prefix 'mk'\)"
	LEFT=$(timeout 10 "$N" -s "$P" list 2>/dev/null | grep -c '^mk')
	[ "$LEFT" = 64 ] && ok "and they do" || fail "cleanup=0 left $LEFT keys"
	kill -TERM "$DPID"; wait "$DPID"
else
	fail "daemon for bench did not start: $(cat "$T/b.log")"
fi
echo "# scheduling: every thread SCHED_BATCH by default (3), SCHED_OTHER (0) with --sched normal"
# policies PID: the distinct policies (stat field 41) of the process's threads, then the thread count
policies() {
	local t pol=() n=0
	for t in /proc/"$1"/task/*/stat; do
		pol+=("$(sed 's/.*) //' "$t" | awk '{print $39}')"); n=$((n + 1))
	done
	echo "$(printf '%s\n' "${pol[@]}" | sort -u | tr '\n' ' ')threads=$n"
}
for mode in default normal file-normal; do
	case $mode in
	default) args=() want="3 " ;;
	normal) args=(--sched normal) want="0 " ;;
	file-normal) printf '{"backend": {"type": "mem"}, "sched": "normal"}\n' >"$T/sched.json"
		args=(-c "$T/sched.json") want="0 " ;;
	esac
	[ $mode = file-normal ] || args+=(-b mem)
	if start_daemon "$T/s.log" "${args[@]}" -l "127.0.0.1:$P" -d none -s "$NQN" -S "$T/sched.sock"; then
		GOT=$(policies "$DPID")
		# main, 2 reactors, the watchdog, the shm socket thread and its poller at least
		[[ "$GOT" == "${want}threads="* ]] && [ "${GOT##*=}" -ge 6 ] && ok "$mode: thread policies $GOT" ||
			fail "$mode: thread policies $GOT, want only $want"
		kill -TERM "$DPID"; wait "$DPID"
	else
		fail "$mode: daemon did not start: $(cat "$T/s.log")"
	fi
done
run 10 "$D" -b mem --sched fifo --check
check "--sched fifo is a usage error naming the flag" 64 "invalid value for --sched: 'fifo'"
printf '{"backend": {"type": "mem"}, "sched": "idle"}\n' >"$T/sched.json"
run 10 "$D" -c "$T/sched.json" --check
check "\"sched\": \"idle\" is refused naming the key" 1 "sched.*must be \"batch\" or \"normal\""

echo "# cut-through: on from 2 MiB by default, a flag and a key to move or turn it off"
run 10 "$D" -b rados -s "$NQN" --check
check "cut-through is on from 2 MiB by default" 0 "cut-through: Retrieves into buffers of 2 MiB or more"
run 10 "$D" -b rados --cut-through 16 -s "$NQN" --check
check "--cut-through 16 moves the threshold" 0 "cut-through: Retrieves into buffers of 16 MiB or more"
run 10 "$D" -b rados --cut-through 0 -s "$NQN" --check
check "--cut-through 0 turns it off" 0 "cut-through: off"
printf '{"backend": {"type": "rados", "cut_through_mb": 0}}\n' >"$T/ct.json"
run 10 "$D" -c "$T/ct.json" -s "$NQN" --check
check "\"cut_through_mb\": 0 turns it off" 0 "cut-through: off"
run 10 "$D" -b mem --tcp-poll-us 200 -s "$NQN" --check
check "--tcp-poll-us 200 polls the reactors" 0 "NVMe/TCP reactors: poll 200 us after work"
printf '{"backend": {"type": "mem"}, "tcp": {"poll_us": 50}}\n' >"$T/poll.json"
run 10 "$D" -c "$T/poll.json" -s "$NQN" --check
check "\"tcp\": {\"poll_us\": 50} polls the reactors" 0 "NVMe/TCP reactors: poll 50 us after work"
run 10 "$D" -b mem --tcp-poll-us 10001 --check
check "--tcp-poll-us 10001 is a usage error naming the flag" 64 "invalid value for --tcp-poll-us: '10001'"
printf '{"backend": {"type": "mem"}, "tcp": {"poll_us": -1}}\n' >"$T/poll.json"
run 10 "$D" -c "$T/poll.json" --check
check "\"poll_us\": -1 is refused naming the key" 1 "poll_us"
run 10 "$D" -b rados --cut-through 5000 --check
check "--cut-through 5000 is a usage error naming the flag" 64 "invalid value for --cut-through: '5000'"
printf '{"backend": {"type": "rados", "cut_through_mb": "on"}}\n' >"$T/ct.json"
run 10 "$D" -c "$T/ct.json" --check
check "\"cut_through_mb\": \"on\" is refused naming the key" 1 "cut_through_mb"

run 10 "$BUILD/nkv" --help
check "nkv --help lists bench" 0 "bench \[KEY=VALUE"
run 10 "$D" -c "$ROOT/conf/rados-nkv.json" --check
check "the shipped example configuration is valid and names its hosts" 0 "may connect: only 2 host"

echo "# finding 8: the demo talks to its own daemon or fails"
/usr/bin/python3 -c 'import socket,sys,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(60)' "$P" &
SQUAT=$!; PIDS+=("$SQUAT"); sleep 0.5
DP=$(free_port)
OUT=$(cd "$ROOT" && BACKEND=mem BUILD="$BUILD" NKV_PORT=$P NKV_DISC_PORT=$DP timeout 60 bash scripts/demo.sh 2>&1); RC=$?
check "demo fails when its port is taken, and says why" 1 "127.0.0.1:$P is already in use"
kill "$SQUAT" 2>/dev/null; wait "$SQUAT" 2>/dev/null
OUT=$(cd "$ROOT" && BACKEND=mem BUILD="$BUILD" NKV_PORT=$(free_port) NKV_DISC_PORT=$DP timeout 60 bash scripts/demo.sh 2>&1); RC=$?
check "demo passes with free ports" 0 "1 MiB value identical"

echo "$PASS passed, $FAILN failed"
[ "$FAILN" = 0 ]
