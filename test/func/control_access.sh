#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# control_access.sh - who may call the control plane, and the files it makes (mem backend, no cluster):
#   - the default control address is a Unix socket in --run-dir (made 0755 if missing), mode 0660;
#     the daemon's user works; `nobody` is refused by the socket's mode and, with the socket opened up
#     to everyone by hand, by its uid (SO_PEERCRED); --control-group admits that group (primary or
#     supplementary), its socket file is in that group
#   - hostile directories: a symbolic link, a directory another user owns, a world-writable one
#   - TCP without mutual TLS is refused at startup; --control-insecure-tcp starts with a warning
#   - shm sockets created through the control plane only directly in --shm-dir (../, a linked
#     directory, another directory refused; a path another subsystem uses or a non-socket file lies
#     on refused before the commit); mode and group set before the path is visible: a thread
#     swapping each new socket path for a link to a 0600 file never changes that file (200 tries)
#   control_access.sh PATH/rados-nkv PATH/nkv-ctl [RACE_ONLY]
# Needs root (CI runs as root) to act as another user; exit 77 otherwise. RACE_ONLY=1 runs the race
# alone, with no flag the daemon may not know.
set -u
D=$1 CTL=$2 RACE_ONLY=${3:-0}
[ "$(id -u)" = 0 ] || { echo "skip: needs root (to run clients as nobody)"; exit 77; }
command -v setpriv >/dev/null || { echo "skip: no setpriv"; exit 77; }
pass=0 fail=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
bad() { echo "FAIL - $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
has() { grep -qF -- "$1" <<<"$2"; } # has TEXT STRING
T=$(mktemp -d "${TMPDIR:-/tmp}/nkv-ctlacc.XXXXXX")
chmod 0755 "$T" # nobody may reach the sockets' directories; only their own modes stop it
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
NQN=nqn.2026-12.io.rados-nkv:acc-$$
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }

# start NAME ARGS...: a daemon logging to $T/NAME.log; DPID; waits for its pid file (10 s)
start() {
	local n=$1; shift
	rm -f "$T/$n.pid"
	"$D" -b mem -l 127.0.0.1:0 -d none --pid-file "$T/$n.pid" "$@" >"$T/$n.log" 2>&1 &
	DPID=$!; PIDS+=("$DPID")
	for _ in $(seq 200); do [ -s "$T/$n.pid" ] && return 0; kill -0 "$DPID" 2>/dev/null || return 1; sleep 0.05; done
	return 1
}
stop() { kill -TERM "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; }

race() { # race EXTRA_ARGS...: the symlink-swap race against CreateSubsystem's shm_socket
	local dir=$T/shm
	mkdir -p "$dir"
	if ! start race --control "unix:$T/race.sock" --shm-group nogroup "$@"; then
		bad "race daemon started: $(tail -3 "$T/race.log")"
		return
	fi
	echo secret >"$T/target"
	chmod 0600 "$T/target"
	/usr/bin/python3 - "$CTL" "unix:$T/race.sock" "$dir" "$T/target" "$NQN" <<'EOF'
import os, subprocess, sys, threading
ctl, server, d, target, nqn = sys.argv[1:6]
before = os.stat(target)
changed = None
for i in range(200):
    sock, link = os.path.join(d, "s%d" % i), os.path.join(d, "l%d" % i)
    os.symlink(target, link)
    stop = threading.Event()
    def swap():
        while not stop.is_set():
            try:
                if os.path.exists(sock) or os.path.islink(sock):
                    os.replace(link, sock)  # the socket's name now a link to the target
                    return
            except OSError:
                pass
    t = threading.Thread(target=swap)
    t.start()
    subprocess.run([ctl, "--server", server, "subsystem", "add", "%s-%d" % (nqn, i), "--pool", "nkv",
                    "--allow-any-host", "--shm", sock], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stop.set()
    t.join()
    st = os.stat(target)
    if (st.st_mode, st.st_uid, st.st_gid) != (before.st_mode, before.st_uid, before.st_gid):
        changed = "attempt %d: target mode %o gid %d (was %o gid %d)" % (i, st.st_mode & 0o7777, st.st_gid,
                                                                         before.st_mode & 0o7777, before.st_gid)
        break
print(changed or "the target kept mode %o and group %d over 200 attempts" % (before.st_mode & 0o7777, before.st_gid))
sys.exit(1 if changed else 0)
EOF
	check "symlink swap at each new shm socket never changes the target's mode or group" [ $? = 0 ]
	stop
}

if [ "$RACE_ONLY" = 1 ]; then
	race
	echo "$pass passed, $fail failed"
	[ "$fail" = 0 ]
	exit
fi

# ---- the default: a Unix socket in the runtime directory ------------------------------------------
if start a --run-dir "$T/run"; then
	S=$T/run/control.sock
	check "the default control socket is in --run-dir" test -S "$S"
	check "the socket is mode 0660 ($(stat -c %a "$S"))" [ "$(stat -c %a "$S")" = 660 ]
	check "the runtime directory was made 0755, owned by the daemon ($(stat -c '%a %U' "$T/run"))" \
		[ "$(stat -c '%a %U' "$T/run")" = "755 root" ]
	check "the daemon's user calls it" "$CTL" --server "unix:$S" gateway info
	out=$(as_nobody "$CTL" --server "unix:$S" subsystem add "$NQN:evil" --pool nkv --allow-any-host 2>&1)
	check "nobody is refused by the socket's mode ($out)" has "Permission denied" "$out"
	chmod 0666 "$S"
	out=$(as_nobody "$CTL" --server "unix:$S" subsystem add "$NQN:evil" --pool nkv --allow-any-host 2>&1)
	check "with the socket opened to everyone, nobody is still refused (its uid: $out)" has UNAVAILABLE "$out"
	check "and the daemon logs the refused uid" grep -q "refused a connection from uid 65534" "$T/a.log"
	check "nothing changed: no subsystem $NQN:evil" bash -c "! '$CTL' --server 'unix:$S' subsystem list | grep -q evil"
	stop
	check "the socket is removed on exit" test ! -e "$S"
else
	bad "the daemon starts with the default control socket: $(tail -3 "$T/a.log")"
fi

# --control-group: that group's members may call (primary or supplementary group)
if start g --run-dir "$T/rung" --control-group nogroup; then
	S=$T/rung/control.sock
	check "with --control-group the socket's group is it ($(stat -c '%a %G' "$S"))" [ "$(stat -c '%a %G' "$S")" = "660 nogroup" ]
	check "a member (primary group) calls it" as_nobody "$CTL" --server "unix:$S" gateway info
	check "a member (supplementary group) calls it" \
		setpriv --reuid=nobody --regid=daemon --groups=nogroup "$CTL" --server "unix:$S" gateway info
	chmod 0666 "$S"
	out=$(setpriv --reuid=nobody --regid=daemon --clear-groups "$CTL" --server "unix:$S" gateway info 2>&1)
	check "a non-member is refused ($out)" has UNAVAILABLE "$out"
	stop
else
	bad "the daemon starts with --control-group: $(tail -3 "$T/g.log")"
fi
out=$(timeout 20 "$D" -b mem -l 127.0.0.1:0 -d none --run-dir "$T/rx" --control-group no-such-group-xyz 2>&1); rc=$?
check "an unknown --control-group exits 1 naming it ($rc)" has "no group named 'no-such-group-xyz'" "$rc $out"
check "(exit 1)" [ "$rc" = 1 ]

# ---- hostile directories ---------------------------------------------------------------------------
mkdir -p "$T/real" "$T/foreign" "$T/open"
ln -s "$T/real" "$T/link"
chown nobody "$T/foreign"
chmod 1777 "$T/open"
for d in link foreign open; do
	out=$(timeout 20 "$D" -b mem -l 127.0.0.1:0 -d none --control "unix:$T/$d/ctl.sock" 2>&1); rc=$?
	check "a control socket in $d/ is refused at startup ($rc: $(grep -o 'refused.*' <<<"$out" | head -1))" \
		bash -c "[ $rc = 1 ] && [ ! -e '$T/$d/ctl.sock' ]"
done
if start l --run-dir "$T/link"; then
	check "the default socket in a linked --run-dir: no server, and the log says why" \
		grep -q "no gRPC server on the default .*symbolic link" "$T/l.log"
	check "nothing made in the link's target" test ! -e "$T/real/control.sock"
	stop
else
	bad "a linked --run-dir: the daemon runs without its control socket: $(tail -3 "$T/l.log")"
fi

# ---- TCP needs mutual TLS, or a forced choice ------------------------------------------------------
out=$(timeout 20 "$D" -b mem -l 127.0.0.1:0 -d none --control 127.0.0.1:0 2>&1); rc=$?
check "a TCP control address without client certificates is refused at startup, naming the way out ($rc)" \
	has "--control-insecure-tcp" "$out"
check "(exit 1)" [ "$rc" = 1 ]
if start t --control 127.0.0.1:0 --control-insecure-tcp; then
	check "--control-insecure-tcp starts, with a warning" grep -q "warn.*without client certificates (--control-insecure-tcp)" "$T/t.log"
	stop
else
	bad "--control-insecure-tcp: $(tail -3 "$T/t.log")"
fi

# ---- shm sockets named over the control plane: only in --shm-dir ------------------------------------
mkdir -p "$T/shmd" "$T/elsewhere"
ln -s "$T/elsewhere" "$T/shmd/sub"
if start s --control "unix:$T/s.sock" --shm-dir "$T/shmd"; then
	c() { "$CTL" --server "unix:$T/s.sock" "$@" 2>&1; }
	for p in "$T/elsewhere/x.sock" "$T/shmd/../elsewhere/x.sock" "$T/shmd/sub/x.sock" "$T/shmd/" "$T/shmd/.."; do
		out=$(c subsystem add "$NQN:p$RANDOM" --pool nkv --allow-any-host --shm "$p")
		check "shm socket $p refused ($(tail -1 <<<"$out"))" has INVALID_ARGUMENT "$out"
	done
	check "nothing made outside it" test -z "$(ls -A "$T/elsewhere")"
	out=$(c subsystem add "$NQN:in" --pool nkv --allow-any-host --shm "$T/shmd/in.sock")
	check "a socket directly in --shm-dir is served ($(tail -1 <<<"$out"))" test -S "$T/shmd/in.sock"
	check "with mode 0660 ($(stat -c %a "$T/shmd/in.sock"))" [ "$(stat -c %a "$T/shmd/in.sock")" = 660 ]
	# a path the daemon could not serve is refused before the commit, never reported served
	out=$(c subsystem add "$NQN:two" --pool nkv --allow-any-host --shm "$T/shmd/in.sock")
	check "a socket another subsystem serves is refused ($(tail -1 <<<"$out"))" has ALREADY_EXISTS "$out"
	echo data >"$T/shmd/file.sock"
	out=$(c subsystem add "$NQN:file" --pool nkv --allow-any-host --shm "$T/shmd/file.sock")
	check "a path that is a regular file is refused ($(tail -1 <<<"$out"))" has ALREADY_EXISTS "$out"
	check "and the file is left alone" grep -qx data "$T/shmd/file.sock"
	out=$(c subsystem list)
	check "neither subsystem was committed" bash -c "! grep -q -e '$NQN:two' -e '$NQN:file' <<<'$out'"
	# vfio-user sockets follow the same rules
	out=$(c subsystem add "$NQN:vx" --pool nkv --allow-any-host --vfio-user "$T/elsewhere/v")
	check "vfio-user socket outside --shm-dir refused ($(tail -1 <<<"$out"))" has INVALID_ARGUMENT "$out"
	out=$(c subsystem add "$NQN:vs" --pool nkv --allow-any-host --vfio-user "$T/shmd/in.sock")
	check "another subsystem's shm socket as a vfio-user socket refused ($(tail -1 <<<"$out"))" has ALREADY_EXISTS "$out"
	out=$(c subsystem add "$NQN:v" --pool nkv --allow-any-host --vfio-user "$T/shmd/cntrl" --vfio-user-host "$NQN:vm1")
	check "a vfio-user socket directly in --shm-dir is served ($(tail -1 <<<"$out"))" test -S "$T/shmd/cntrl"
	check "and the subsystem says so" has "vfio-user       $T/shmd/cntrl (clients act as $NQN:vm1)" "$out"
	stop
else
	bad "daemon with --shm-dir: $(tail -3 "$T/s.log")"
fi
race --shm-dir "$T/shm"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
