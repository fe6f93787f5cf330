#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# log_daemon.sh - issue 17 finding 11 through the rados-nkv binary (mem backend): every line has the
# one format (ISO-8601 UTC time, rados-nkv[pid], level, component); --log-level error prints nothing
# on a clean start and stop; a startup failure is one error line, not two; 200 port-scanner probes
# are rate limited with a count; --log-syslog leaves stderr empty.
# Usage: log_daemon.sh PATH/rados-nkv. Exit 0 pass, 1 fail.
set -uo pipefail
DAEMON=$1
T=$(mktemp -d)
PIDS=()
NRUN=0
cleanup() {
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
pass=0 fail=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
bad() { echo "FAIL - $*"; fail=$((fail + 1)); }
show() { sed 's/^/#   /' "$1" | head -"${2:-20}"; }
FORMAT='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z rados-nkv\[[0-9]+\] (error|warn|info|debug) [a-z-]+: .'

# start LOG ARGS...: the daemon on a kernel-chosen port; PID and PORT once its pid file exists.
start() {
	local log=$1
	shift
	rm -f "$T/pid"
	# its own runtime directory: the default one's control socket may be another test's right now
	NRUN=$((NRUN + 1))
	"$DAEMON" --backend mem --listen 127.0.0.1:0 --discovery none --run-dir "$T/run$NRUN" --pid-file "$T/pid" \
		"$@" >"$log" 2>&1 </dev/null &
	PID=$!
	PIDS+=("$PID")
	for _ in $(seq 200); do [ -s "$T/pid" ] || ! kill -0 "$PID" 2>/dev/null && break; sleep 0.05; done
}
stop() { kill -TERM "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; }

# 1. default level: the startup and shutdown lines, each in the format
start "$T/info.log"
PORT=$(sed -n 's/.* info daemon: NVMe\/TCP on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$T/info.log")
stop
if [ -n "$PORT" ] && grep -q ' info daemon: ready: 1 subsystem(s) on the mem backend$' "$T/info.log" &&
	grep -q ' info daemon: stopped$' "$T/info.log"; then
	ok "info: NVMe/TCP on, ready and stopped lines"
else
	bad "info lines missing:"; show "$T/info.log"
fi
n=$(grep -cvE "$FORMAT" "$T/info.log")
[ "$n" = 0 ] && ok "every line ($(wc -l <"$T/info.log")) has the format" || { bad "$n lines without the format:"; grep -vE "$FORMAT" "$T/info.log" | head -5; }
[ -z "$(sort "$T/info.log" | cut -d' ' -f3- | uniq -d)" ] && ok "no duplicate lines" || { bad "duplicates:"; sort "$T/info.log" | cut -d' ' -f3- | uniq -d; }

# 2. --log-level error: nothing on a clean start and stop
start "$T/err.log" --log-level error
stop
[ ! -s "$T/err.log" ] && ok "--log-level error: no output on a clean run" || { bad "--log-level error printed:"; show "$T/err.log"; }

# 3. a startup failure (address in use): exactly one error line, in the format
start "$T/hold.log"
HOLD=$PID
HPORT=$(sed -n 's/.* NVMe\/TCP on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$T/hold.log")
"$DAEMON" --backend mem --listen "127.0.0.1:$HPORT" --discovery none --run-dir "$T/run-inuse" --log-level error \
	>"$T/inuse.log" 2>&1 </dev/null
rc=$?
if [ "$rc" = 1 ] && [ "$(wc -l <"$T/inuse.log")" = 1 ] &&
	grep -qE "${FORMAT%.}cannot listen on 127\.0\.0\.1:$HPORT: Address already in use$" "$T/inuse.log"; then
	ok "address in use: exit 1 and one error line"
else
	bad "address in use: exit $rc, output:"; show "$T/inuse.log"
fi

# 4. a port scanner: 200 connections opened and closed; at most NKV_LOG_BURST (10) lines print, then a count
PID=$HOLD
for _ in $(seq 200); do exec 3<>"/dev/tcp/127.0.0.1/$HPORT" && exec 3>&-; done
sleep 0.5
stop # the count of a window still open prints at exit
closed=$(grep -c 'qid 0 closed: peer closed$' "$T/hold.log")
if [ "$closed" -le 10 ] &&
	grep -qE ' info transport: tcp 127\.0\.0\.1:[0-9]+: qid 0 closed: peer closed \(the last of [0-9]+ similar messages suppressed in the last [0-9]+ s\)$' "$T/hold.log"; then
	ok "200 probes: $closed lines and one count line"
else
	bad "200 probes: $closed plain lines; log tail:"; tail -5 "$T/hold.log"
fi

# 5. --log-syslog: the lines go to syslog (journald), none to stderr
start "$T/syslog.log" --log-syslog
stop
[ ! -s "$T/syslog.log" ] && ok "--log-syslog: nothing on stderr" || { bad "--log-syslog printed on stderr:"; show "$T/syslog.log"; }

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
