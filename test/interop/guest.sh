#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs inside the QEMU guest (busybox sh, Linux 6.1 nvme-tcp, nvme-cli 2.3), started by /init.
# /interop/env (written by run.sh): HOST (10.0.2.2 = the host's 127.0.0.1), PORT, DPORT, NQN, SUITE
# (kv: the KV checks below on 6.1; auth: the DH-HMAC-CHAP checks, on 6.12; mpath: native multipath
# on 6.1, gateway A at HOST:PORT, B at HOST:PB, HOST the machine's address; DRAIN: 1 when run.sh can
# run nkv-ctl, else why not), and the DH-HMAC-CHAP
# secrets KA (with controller secret KAC) for $NQN-a, KB/KBC for $NQN-b, KC for $NQN-c, KW (wrong).
# Each check prints "ok - ..." or "FAIL - ..." (then its output, indented); exit 1 if any failed.
# KV commands go through `nvme io-passthru` on the generic char device /dev/ngXnY, with the SQE
# fields of docs/nvme-kv-wire.md A.2: key bytes 0-7 in CDW2/CDW3 and 8-15 in CDW14/CDW15 (byte 0 = CDW2 bits
# 7:0), CDW10 = value size / host buffer size, CDW11 = KL (7:0) | options (15:8).
. /interop/env
NSID=1
NFAIL=0
NPASS=0
T=/tmp/kv
mkdir -p $T

ok() { echo "ok - $*"; NPASS=$((NPASS + 1)); }
fail() { echo "FAIL - $*"; NFAIL=$((NFAIL + 1)); }
# check DESC CMD...: ok when CMD succeeds; otherwise FAIL with the output of CMD and of the last
# nvme command ($T/out).
check() {
	desc=$1; shift
	if "$@" >$T/check 2>&1; then ok "$desc"; else
		fail "$desc"
		cat $T/check $T/out 2>/dev/null | tail -n 15 | sed 's/^/    /'
	fi
}

# Key as hex (2 to 32 digits, any bytes) -> --cdw2/--cdw3/--cdw14/--cdw15 (little-endian dwords).
# Substring expansion, no forks: under TCG every process costs ~30 ms.
kargs() {
	h=$1
	while [ ${#h} -lt 32 ]; do h=${h}0; done
	echo "--cdw2=0x${h:6:2}${h:4:2}${h:2:2}${h:0:2} --cdw3=0x${h:14:2}${h:12:2}${h:10:2}${h:8:2}" \
		"--cdw14=0x${h:22:2}${h:20:2}${h:18:2}${h:16:2} --cdw15=0x${h:30:2}${h:28:2}${h:26:2}${h:24:2}"
}
khex() { printf '%s' "$1" | od -An -v -tx1 | tr -d ' \n'; }

# kv OPC KEY(text) KL OPTIONS CDW10 DATALEN [nvme-cli data args]
# Sets RESULT (CQE DW0 as 0x........, empty on error) and STATUS (the NVMe status nvme-cli printed,
# e.g. 0x4087 = DNR | SCT 0 | SC 87h; empty on success). Returns nvme-cli's exit status.
kv() {
	opc=$1 key=$2 kl=$3 opts=$4 c10=$5 dlen=$6
	shift 6
	nvme io-passthru $NG --opcode=$opc --namespace-id=$NSID $(kargs "$(khex "$key")") \
		--cdw10=$c10 --cdw11=$(((opts << 8) | kl)) --data-len=$dlen "$@" >$T/out 2>&1
	rc=$?
	RESULT=$(sed -n 's/.*result: *\(0x[0-9a-fA-F]*\).*/\1/p' $T/out | head -n 1)
	STATUS=$(sed -n 's/.*NVMe [Ss]tatus:.*(\(0x[0-9a-fA-F]*\)).*/\1/p' $T/out | head -n 1)
	return $rc
}
store() { kv 0x01 "$1" ${#1} ${3:-0} $(wc -c <"$2") $(wc -c <"$2") --write --input-file="$2"; }
retrieve() { rm -f "$3"; kv 0x02 "$1" ${#1} 0 "$2" "$2" --read --input-file="$3"; } # KEY HBS OUTFILE
exist() { kv 0x14 "$1" ${2:-${#1}} 0 0 0; }
delete() { kv 0x10 "$1" ${#1} 0 0 0; }
# The status is SC (with SCT 0 = generic / I/O command set specific, docs/nvme-kv-wire.md A.6), DNR allowed.
is_status() { [ -n "$STATUS" ] && [ $((STATUS & 0x7ff)) -eq $(($1)) ]; }
is_result() { [ -n "$RESULT" ] && [ $((RESULT)) -eq $(($1)) ]; }
# List data (docs/nvme-kv-wire.md A.4) -> one key per line: "count N" first, then the keys as text.
parse_list() {
	od -An -v -tu1 "$1" | awk '
	{ for (i = 1; i <= NF; i++) b[n++] = $i }
	END {
		nrk = b[0] + b[1] * 256 + b[2] * 65536 + b[3] * 16777216; print "count " nrk; o = 4
		for (k = 0; k < nrk; k++) {
			kl = b[o] + b[o + 1] * 256; s = ""
			for (j = 0; j < kl; j++) s = s sprintf("%c", b[o + 2 + j])
			print s; o += 2 + kl; o += (4 - o % 4) % 4
		}
	}'
}

# The generic device (/dev/ngXnY) of NSID $1, or nothing. Y is the kernel's namespace instance,
# not the NSID (namespaces are scanned concurrently), so ask each device for its NSID.
ng_of() {
	for d in /dev/ng*n*; do
		[ -c "$d" ] || continue
		[ "$(nvme get-ns-id $d 2>/dev/null | sed -n 's/.*namespace-id: *\([0-9]*\).*/\1/p')" = "$1" ] && { echo $d; return 0; }
	done
	return 1
}

# The controller and generic namespace devices of the current connection: NG for NSID 1, NG2 for
# NSID 2 (a second view of the same RADOS namespace, run.sh).
find_dev() {
	CTRL="" NG="" NG2=""
	for i in $(seq 50); do
		for c in /sys/class/nvme/nvme*; do
			[ -e "$c/subsysnqn" ] || continue
			[ "$(cat $c/subsysnqn)" = "$NQN" ] && [ "$(cat $c/state)" = live ] && CTRL=$(basename $c)
		done
		if [ -n "$CTRL" ]; then
			NG=$(ng_of $NSID) NG2=$(ng_of 2)
			[ -n "$NG" ] && [ -n "$NG2" ] && return 0
		fi
		sleep 0.1
	done
	[ -n "$NG" ] # NSID 2 missing is t_two_ns's failure, not the connection's
}

# ---- DH-HMAC-CHAP (SUITE=auth on 6.12; the refusals also on 6.1) ----
live_ctrl() { # NQN: prints the live controller of that subsystem
	for c in /sys/class/nvme/nvme*; do
		[ -e "$c/subsysnqn" ] && [ "$(cat $c/subsysnqn)" = "$1" ] && [ "$(cat $c/state)" = live ] && { basename $c; return 0; }
	done
	return 1
}
t_refused() { # NQN [nvme connect args]: the connect fails and leaves no controller of NQN
	n=$1; shift
	if nvme connect -t tcp -a $HOST -s $PORT -n $n "$@" >$T/out 2>&1; then
		cat $T/out; nvme disconnect -n $n >/dev/null 2>&1; return 1
	fi
	sed 's/^/nvme-cli: /' $T/out
	dmesg | tail -n 4 | sed 's/^/kernel: /'
	sleep 0.3
	! live_ctrl $n >/dev/null
}
aconnect() { # NQN [nvme connect args]: connect with authentication; CTRL, NG, NG2 of that subsystem
	dmesg -c >/dev/null
	nvme connect -t tcp -a $HOST -s $PORT -n "$@" >$T/out 2>&1 || return 1
	o=$NQN; NQN=$1; find_dev; r=$?; NQN=$o
	return $r
}
adisconnect() { nvme disconnect -n $1 >$T/out 2>&1 && grep -q 'disconnected 1 controller' $T/out; }
t_kauth() { # HASH GROUP [controller]: the kernel says how it authenticated (and the controller)
	dmesg >$T/dmesg
	grep -E "$CTRL: qid 0: (authenticated|controller)" $T/dmesg
	grep -q "$CTRL: qid 0: authenticated with hash hmac($1) dhgroup $2" $T/dmesg || return 1
	[ -z "$3" ] || grep -q "$CTRL: qid 0: controller authenticated" $T/dmesg
}
t_reauth() { # the same secret written to sysfs: a new transaction on every queue, I/O keeps working
	printf '%s' "$1" >/sys/class/nvme/$CTRL/dhchap_secret || return 1
	for i in $(seq 100); do
		[ $(dmesg | grep -c "$CTRL: qid 0: authenticated with hash") -ge 2 ] && break
		sleep 0.1
	done
	dmesg | grep -E "$CTRL: (re-auth|qid)" | tail -n 4
	dmesg | grep -q "$CTRL: re-authenticating controller" &&
		[ $(dmesg | grep -c "$CTRL: qid 0: authenticated with hash") -ge 2 ] && ! dmesg | grep -q "$CTRL: qid [0-9]*: authentication failed" &&
		[ "$(cat /sys/class/nvme/$CTRL/state)" = live ] && t_store_retrieve kre $T/v4k && delete kre
}
auth_suite() {
	A=$NQN-a B=$NQN-b C=$NQN-c
	check "[auth] $A requires authentication: nvme connect without a secret is refused" t_refused $A
	check "[auth] a wrong --dhchap-secret is refused" t_refused $A --dhchap-secret=$KW
	check "[auth] nvme connect --dhchap-secret (unidirectional): /dev/ngXnY appears" aconnect $A --dhchap-secret=$KA
	if [ -n "$NG" ]; then
		check "[auth] the kernel authenticated with hmac(sha256), ffdhe2048" t_kauth sha256 ffdhe2048
		check "[auth] Store + Retrieve 4 KiB over the authenticated queues" t_store_retrieve k4k $T/v4k
		check "[auth] Store + Retrieve 1 MiB (R2T/H2CData, C2HData)" t_store_retrieve k1m $T/v1m
		check "[auth] re-authentication (the secret written to sysfs dhchap_secret), then Store + Retrieve" t_reauth $KA
		delete k4k; delete k1m
	fi
	check "[auth] disconnect" adisconnect $A
	check "[auth] --dhchap-secret + --dhchap-ctrl-secret (bidirectional)" aconnect $A --dhchap-secret=$KA --dhchap-ctrl-secret=$KAC
	if [ -n "$NG" ]; then
		check "[auth] the kernel authenticated the controller too" t_kauth sha256 ffdhe2048 controller
		check "[auth] Store + Retrieve 4 KiB (bidirectional)" t_store_retrieve k4k $T/v4k
		delete k4k
	fi
	check "[auth] disconnect (bidirectional)" adisconnect $A
	check "[auth] a wrong --dhchap-ctrl-secret: the kernel refuses the controller" \
		t_refused $A --dhchap-secret=$KA --dhchap-ctrl-secret=$KW
	check "[auth] $B (SHA-512, null DH group, hh 03 secret), bidirectional" aconnect $B --dhchap-secret=$KB --dhchap-ctrl-secret=$KBC
	if [ -n "$NG" ]; then
		check "[auth] the kernel authenticated with hmac(sha512), null, and the controller" t_kauth sha512 null controller
		check "[auth] Store + Retrieve 1 MiB on $B" t_store_retrieve k1m $T/v1m
		delete k1m
	fi
	check "[auth] disconnect $B" adisconnect $B
	check "[auth] $C (SHA-384, ffdhe3072, hh 02 secret)" aconnect $C --dhchap-secret=$KC
	if [ -n "$NG" ]; then
		check "[auth] the kernel authenticated with hmac(sha384), ffdhe3072" t_kauth sha384 ffdhe3072
		check "[auth] Store + Retrieve 4 KiB on $C" t_store_retrieve k4k $T/v4k
		delete k4k
	fi
	check "[auth] disconnect $C" adisconnect $C
	check "[auth] $C with $A's secret is refused" t_refused $C --dhchap-secret=$KA
}

# ---- checks against one connected controller ----
t_idctrl() {
	nvme id-ctrl /dev/$CTRL >$T/out 2>&1 || return 1
	f() { sed -n "s/^$1 *: *//p" $T/out | head -n 1; }
	cntlid=$(f cntlid) subnqn=$(f subnqn) kas=$(f kas) ioccsz=$(f ioccsz) iorcsz=$(f iorcsz)
	echo "cntlid=$cntlid sysfs=$(cat /sys/class/nvme/$CTRL/cntlid) subnqn=$subnqn kas=$kas ioccsz=$ioccsz iorcsz=$iorcsz"
	[ $((cntlid)) -ne 0 ] && [ $((cntlid)) -eq $(cat /sys/class/nvme/$CTRL/cntlid) ] &&
		[ "$subnqn" = "$NQN" ] && [ "$kas" -gt 0 ] && [ "$ioccsz" -ge 4 ] && [ "$iorcsz" -ge 1 ]
}
t_subsys() {
	nvme list-subsys >$T/out 2>&1 || return 1
	cat $T/out
	grep -q "NQN=$NQN" $T/out && grep -q "tcp traddr=$HOST,trsvcid=$PORT" $T/out && grep -q live $T/out
}
t_nsdescs() { nvme ns-descs /dev/$CTRL -n $NSID >$T/out 2>&1 && grep -Eq '^csi *: *(0x)?1$' $T/out; }
t_effects() { # Commands Supported and Effects, CSI 1 (the log the kernel reads for the namespace):
	# CSUPP (bit 0) for each KV opcode in the I/O part (dword 256 + opcode)
	nvme effects-log /dev/$CTRL --csi=1 -b >$T/eff 2>$T/out || return 1
	[ $(wc -c <$T/eff) -ge 2048 ] || return 1
	for o in 1 2 6 16 20 242; do # ... and F2h, rados-nkv's built-in Retrieve Range
		v=$(od -An -v -tu4 -j $((1024 + o * 4)) -N 4 $T/eff | tr -d ' ')
		echo "io opcode $o: effects $v"
		[ $((v & 1)) -eq 1 ] || return 1
	done
}
t_noblock() { # the char device is there; no nvme block device node (6.1 keeps a 0-sector disk in sysfs)
	: >$T/out
	ls -l /dev/ng* /dev/nvme*
	for b in /sys/block/nvme*; do [ -e "$b" ] && echo "$b size $(cat $b/size) hidden $(cat $b/hidden 2>/dev/null)"; done
	[ -c "$NG" ] && ! ls /dev | grep -Eq '^nvme[0-9]+n[0-9]+$'
}
t_store_retrieve() { # KEY FILE
	n=$(wc -c <"$2")
	store "$1" "$2" || return 1
	retrieve "$1" $n $T/got || return 1
	is_result $n && cmp "$2" $T/got
}
t_truncated() { # KEY FILE: a 100-byte buffer gets the first 100 bytes and DW0 = the full size
	retrieve "$1" 100 $T/got || return 1
	head -c 100 "$2" >$T/want
	is_result $(wc -c <"$2") && [ $(wc -c <$T/got) -eq 100 ] && cmp $T/want $T/got
}
t_probe() { kv 0x02 "$1" ${#1} 0 0 0 && is_result $2; } # HBS 0: size only
t_absent() { ! "$@" && is_status 0x87; }
t_badkl() { ! "$@" && is_status 0x86; }
t_list() { # keys expected in order, from KL 0
	kv 0x06 "" 0 0 4096 4096 --read --input-file=$T/list || return 1
	parse_list $T/list >$T/keys
	printf 'count %s\n' $# >$T/want
	for k in "$@"; do echo "$k" >>$T/want; done
	cat $T/keys
	cmp $T/want $T/keys
}
t_list_from() { # START then the keys expected in order
	s=$1; shift
	kv 0x06 "$s" ${#s} 0 4096 4096 --read --input-file=$T/list || return 1
	parse_list $T/list >$T/keys
	printf 'count %s\n' $# >$T/want
	for k in "$@"; do echo "$k" >>$T/want; done
	cat $T/keys
	cmp $T/want $T/keys
}
t_keepalive() { # idle longer than KATO, then the controller is still live and a command works
	sleep 5
	[ "$(cat /sys/class/nvme/$CTRL/state)" = live ] && exist ka-key
}

# Two NSIDs on one RADOS namespace: the kernel attaches a namespace only if its IDs (EUI64, NGUID,
# UUID) differ from every other namespace's ("duplicate IDs"), so both must show up.
t_two_ns() {
	ls -l /dev/ng*
	dmesg | grep -i 'duplicate' && return 1
	[ -c "$NG" ] && [ -c "$NG2" ] && [ "$NG" != "$NG2" ]
}
t_ids_differ() { # ns-descs of NSIDs 1 and 2: each has an NGUID and a UUID, and no ID is shared
	nvme ns-descs /dev/$CTRL -n 1 >$T/d1 2>&1 || return 1
	nvme ns-descs /dev/$CTRL -n 2 >$T/d2 2>&1 || return 1
	cat $T/d1 $T/d2 >$T/out
	grep -E '^(eui64|nguid|uuid)' $T/d1 | sed 's/^/ns1 /'
	grep -E '^(eui64|nguid|uuid)' $T/d2 | sed 's/^/ns2 /'
	for f in nguid uuid; do grep -q "^$f" $T/d1 && grep -q "^$f" $T/d2 || return 1; done
	for v in $(sed -n 's/^\(eui64\|nguid\|uuid\) *: *//p' $T/d1); do grep -q "$v" $T/d2 && return 1; done
	return 0
}
t_same_rados_ns() { # a key stored through NSID 1 exists through NSID 2, which is read-only (20h)
	store shared $T/v100 || return 1
	(NSID=2 NG=$NG2; exist shared && ! store shared2 $T/v100 && is_status 0x20) || return 1
	delete shared
}

# Vendor Exec (nkv_spec.h): run.sh's configuration allowlists 82h = hello.say_hello (read, bound input
# "rados-") on NSID 1. Inline "nkv" = CDW12 0x00766b6e with its length 3 in CDW11 bits 11:8; CDW10 =
# the 64-byte host buffer. RADOS runs read methods only on existing objects: the key is stored first.
# rados: "Hello, rados-nkv!" and DW0 17; mem (no object classes): C0h. 9Ah is allowlisted nowhere: 01h.
exec82() { kv 0x82 exkey 5 3 64 64 --cdw12=0x00766b6e --read --input-file=$T/got; }
t_exec() {
	rm -f $T/got
	if [ "$BACKEND" = mem ]; then ! exec82 && is_status 0xc0; return; fi
	exec82 && is_result 17 && [ "$(head -c 17 $T/got)" = "Hello, rados-nkv!" ]
}
t_exec_free() { ! kv 0x9a exkey 5 0 64 64 --read --input-file=$T/got && is_status 0x01; }

# Retrieve Range (F2h, nkv_spec.h): Retrieve's layout plus the byte offset in CDW12 (low) / CDW13.
range() { rm -f "$4"; kv 0xf2 "$1" ${#1} 0 "$3" "$3" --cdw12=$2 --read --input-file="$4"; } # KEY OFF HBS OUT
t_range() { # KEY FILE OFF HBS: the bytes at OFF, DW0 = the full size
	n=$(wc -c <"$2")
	range "$1" $3 $4 $T/got || return 1
	tail -c +$(($3 + 1)) "$2" | head -c $4 >$T/want
	echo "range $3+$4 of $n: $(wc -c <$T/want) bytes expected"
	is_result $n && cmp $T/want $T/got
}

# Namespace notices (control plane): run.sh watches the console for NKV-AEN-ADD / NKV-AEN-DEL and
# runs `nkv-ctl ns add $NQN --nsid 3` / `ns del $NQN 3`; the target completes an Asynchronous Event
# Request with Namespace Attribute Changed (log 04h) and the kernel rescans ("rescanning namespaces."
# in dmesg, once per notice). The guest cannot hear back, so it polls for the device (globs and
# /proc/uptime: no process per poll but `sleep`) for 20 s at most.
NG3=""
now() { read -r up _ </proc/uptime; echo "$up"; }
rescans() { dmesg | grep -c "$CTRL: rescanning namespaces"; }
aen_wait() { # add|del: NSID 3's /dev/ngXnY appears (NG3) / goes, after one more rescan than R0 (updated)
	read -r a _ </proc/uptime
	while :; do
		if [ $1 = add ]; then
			for d in /dev/ng*n*; do
				[ -c "$d" ] && [ "$d" != "$NG" ] && [ "$d" != "$NG2" ] || continue
				[ "$(nvme get-ns-id $d 2>/dev/null | sed -n 's/.*namespace-id: *\([0-9]*\).*/\1/p')" = 3 ] && NG3=$d
			done
			[ -n "$NG3" ] && break
		elif [ ! -e "$NG3" ]; then
			break
		fi
		read -r b _ </proc/uptime
		[ ${b%.*} -lt $((${a%.*} + 20)) ] || break
		sleep 0.1
	done
	AEN_T=$(awk -v a=$a -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
	r=$(rescans)
	echo "NSID 3 $1: ${NG3:-no device} after $AEN_T s; kernel rescans: $R0 before, $r now"
	ls /dev/ng*
	r0=$R0 R0=$r
	if [ $1 = add ]; then [ -n "$NG3" ]; else [ ! -e "$NG3" ]; fi && [ $r -eq $((r0 + 1)) ]
}
on3() { # CMD...: CMD with NSID 3 through $NG3
	o=$NG; NSID=3; NG=$NG3; "$@"; r=$?; NSID=1; NG=$o
	return $r
}
t_others_live() { # NSIDs 1 and 2 are still attached and NSID 1 serves Store + Retrieve
	[ -c "$NG" ] && [ -c "$NG2" ] && t_store_retrieve k1 $T/v100 && delete k1
}
# After the removal the host cannot address NSID 3 at all: the 6.1 kernel refuses a passthrough
# command whose NSID is not its device's ("nsid (3) in cmd does not match nsid (1) of namespace"),
# and the controller node takes I/O commands only with a single namespace (a kernel that sent it would
# get Invalid Namespace, 0Bh). What the target says is the controller's active NSID list (CNS 02h).
t_gone_ns() {
	NSID=3; exist k3; r=$?; NSID=1
	[ $r -ne 0 ] && { [ -z "$STATUS" ] || is_status 0x0b; } || return 1 # the kernel's refusal, or 0Bh
	nvme list-ns /dev/$CTRL >$T/out 2>&1 || return 1
	cat $T/out
	[ "$(sed -n 's/^\[ *[0-9]*\]: *\(0x[0-9a-f]*\).*/\1/p' $T/out | tr '\n' ' ')" = "0x1 0x2 " ]
}
aen_suite() {
	f=$NFAIL
	read -r t0 _ </proc/uptime
	R0=$(rescans)
	echo NKV-AEN-ADD
	check "[aen] nkv-ctl ns add NSID 3 while connected: one kernel rescan, /dev/ngXnY of NSID 3 appears" aen_wait add
	echo "# NSID 3 attached as ${NG3:-nothing} after $AEN_T s"
	if [ -n "$NG3" ]; then
		check "[aen] Store + Retrieve 4 KiB through NSID 3 ($NG3): identical, DW0 = 4096" on3 t_store_retrieve k3 $T/v4k
		check "[aen] NSID 1 unaffected, its own RADOS namespace: NSID 3's key absent there (87h)" t_absent exist k3
		on3 delete k3
	fi
	echo NKV-AEN-DEL
	if [ -n "$NG3" ]; then
		check "[aen] nkv-ctl ns del 3: one kernel rescan, $NG3 goes away" aen_wait del
		echo "# NSID 3 detached after $AEN_T s"
		check "[aen] NSID 3 is gone from the controller: active NSID list (nvme list-ns) 1 2, I/O to 3 refused" t_gone_ns
		check "[aen] NSIDs 1 and 2 still attached, NSID 1 serves Store + Retrieve" t_others_live
	fi
	echo "# NSID 3 checks took $(awk -v a=$t0 -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s of guest time"
	if [ $NFAIL -gt $f ]; then
		echo "---- guest dmesg, nvme lines (last 20) ----"
		dmesg | grep -i nvme | tail -n 20
	fi
}

suite() { # TAG: the KV checks on the current connection
	tag=$1
	check "[$tag] id-ctrl: CNTLID matches the connection, SUBNQN, KAS, IOCCSZ, IORCSZ" t_idctrl
	check "[$tag] list-subsys shows $NQN live over tcp to $HOST:$PORT" t_subsys
	check "[$tag] ns-descs: namespace $NSID reports CSI 1 (KV)" t_nsdescs
	check "[$tag] KV namespace is $NG only (no block device)" t_noblock
	check "[$tag] effects log CSI 1: CSUPP for Store, Retrieve, List, Delete, Exist, Retrieve Range (F2h)" t_effects
	check "[$tag] Store (01h) + Retrieve (02h) 4 KiB: data identical, DW0 = 4096" t_store_retrieve k4k $T/v4k
	check "[$tag] Retrieve into a 100-byte buffer: first 100 bytes, DW0 = 4096" t_truncated k4k $T/v4k
	check "[$tag] Retrieve with host buffer 0: DW0 = 4096" t_probe k4k 4096
	check "[$tag] Store + Retrieve 1 MiB (R2T/H2CData, C2HData): identical, DW0 = 1048576" t_store_retrieve k1m $T/v1m
	check "[$tag] Store + Retrieve 4 MiB - 304 (on rados: C2HData PDUs sent as the value is read): identical" eval 't_store_retrieve k4m $T/v4m && delete k4m'
	check "[$tag] Store + Retrieve a zero-length value: DW0 = 0" t_store_retrieve k0 $T/v0
	check "[$tag] Store + Retrieve a 16-byte key (CDW14/CDW15)" t_store_retrieve 0123456789abcdef $T/v100
	check "[$tag] Exist (14h) of a stored key: success" exist k4k
	check "[$tag] Exist of an absent key: 87h (SCT 0)" t_absent exist nokey
	check "[$tag] Retrieve of an absent key: 87h" t_absent retrieve nokey 4096 $T/got
	check "[$tag] Delete (10h) of an absent key: 87h" t_absent delete nokey
	check "[$tag] Store only-if-exists (option bit 8) on an absent key: 87h" t_absent store nokey $T/v100 1
	check "[$tag] Exist with KL 17: 86h" t_badkl exist k4k 17
	check "[$tag] Exist with KL 0: 86h" t_badkl exist "" 0
	check "[$tag] Store only-if-absent (option bit 9) on a present key: 89h" eval '! store k4k $T/v100 2 && is_status 0x89'
	check "[$tag] List (06h) from the first key: 4 keys in ascending order" t_list 0123456789abcdef k0 k1m k4k
	check "[$tag] List from k1m (inclusive): k1m k4k" t_list_from k1m k1m k4k
	check "[$tag] Delete (10h) of a stored key, then Exist: 87h" eval 'delete k4k && ! exist k4k && is_status 0x87'
	for k in k1m k0 0123456789abcdef; do delete $k; done
	check "[$tag] List after deleting every key: 0 keys" t_list
}

connect() { # extra nvme connect args
	nvme connect -t tcp -a $HOST -s $PORT -n $NQN "$@" >$T/out 2>&1 && find_dev
}
disconnect() {
	nvme disconnect -n $NQN >$T/out 2>&1 && grep -q 'disconnected 1 controller' $T/out || return 1
	sleep 0.2
	! ls /dev/ng*n$NSID >/dev/null 2>&1
}

# ---- Linux native multipath (SUITE=mpath): gateways A ($HOST:$PORT) and B ($HOST:$PB) of one group ----
# Two controllers are one subsystem when they report the same SUBNQN, CMIC bit 1 (several
# controllers) and different CNTLIDs (6.1: "Duplicate cntlid ... rejecting" otherwise); a namespace
# is one multipath head when both report it with NMIC bit 0 (shared) and the same EUI64/NGUID/UUID
# ("IDs don't match for shared namespace" otherwise). With nvme_core.multipath=Y (the default) the
# head gets the only /dev/ngXnY (X: the subsystem's instance); commands on it go to one live path.
# Passthrough commands are not requeued by the kernel on a path failure (REQ_FAILFAST_DRIVER): they
# fail, and the loop below retries them.
ctrl_at() { # PORT: the controller of $NQN whose address has trsvcid=PORT
	for c in /sys/class/nvme/nvme*; do
		[ -e "$c/subsysnqn" ] || continue
		read -r n <$c/subsysnqn
		read -r a <$c/address
		[ "$n" = "$NQN" ] || continue
		case "$a," in *trsvcid=$1,*) echo ${c##*/}; return 0 ;; esac
	done
	return 1
}
state_of() { read -r s </sys/class/nvme/$1/state; echo $s; }
t_mdiscover() { # gateway A's discovery log: $NQN at $HOST on both ports
	nvme discover -t tcp -a $HOST -s $PORT >$T/disc 2>&1 || { cat $T/disc; return 1; }
	awk -v nqn=$NQN '
		function flush() { if (snqn == nqn) print addr ":" port; snqn = "" }
		/^=====Discovery Log Entry/ { flush() }
		/^trsvcid:/ { port = $2 }
		/^traddr:/ { addr = $2 }
		/^subnqn:/ { snqn = $2 }
		END { flush() }' $T/disc | sort >$T/got
	printf '%s\n' $HOST:$PORT $HOST:$PB | sort >$T/want
	echo "entries for $NQN: $(tr '\n' ' ' <$T/got)"
	cmp $T/want $T/got
}
t_connect_all() { # both paths live, and the head's /dev/ngXnY
	nvme connect-all -t tcp -a $HOST -s $PORT --reconnect-delay=2 --ctrl-loss-tmo=60 >$T/out 2>&1 || return 1
	CA="" CB="" NG=""
	for i in $(seq 100); do
		CA=$(ctrl_at $PORT) && CB=$(ctrl_at $PB) && [ "$(state_of $CA)" = live ] && [ "$(state_of $CB)" = live ] &&
			NG=$(ng_of 1) && break
		sleep 0.1
	done
	echo "A: ${CA:-none} B: ${CB:-none} head: ${NG:-none}"
	[ -n "$NG" ]
}
t_paths() { # list-subsys: $NQN once, both paths under it live
	nvme list-subsys >$T/subsys 2>&1 || return 1
	cat $T/subsys
	[ $(grep -c "NQN=$NQN\$" $T/subsys) -eq 1 ] &&
		grep -q "^ +- $CA tcp traddr=$HOST,trsvcid=$PORT.* live" $T/subsys &&
		grep -q "^ +- $CB tcp traddr=$HOST,trsvcid=$PB.* live" $T/subsys
}
t_cntlid() { # the kernel took both: CNTLIDs differ, CMIC bit 1
	read -r a </sys/class/nvme/$CA/cntlid
	read -r b </sys/class/nvme/$CB/cntlid
	nvme id-ctrl /dev/$CA >$T/out 2>&1 || return 1
	cmic=$(sed -n 's/^cmic *: *//p' $T/out)
	echo "cntlid A $a, B $b; cmic $cmic"
	[ "$a" != "$b" ] && [ $((cmic & 2)) -eq 2 ] && ! dmesg | grep -Ei 'duplicate|IDs don.t match'
}
t_head() { # one /dev/ngXnY, the subsystem's (not a controller's); a hidden path disk per controller
	SUBSYS=""
	for s in /sys/class/nvme-subsystem/nvme-subsys*; do
		[ -e $s/$CA ] && [ -e $s/$CB ] && SUBSYS=${s##*/}
	done
	n=0
	for d in /dev/ng*; do [ -c $d ] && n=$((n + 1)); done
	dev=$(readlink /sys/class/nvme-generic/${NG#/dev/}/device)
	echo "subsystem ${SUBSYS:-none}; char devices: $(ls /dev/ng* | tr '\n' ' '); ${NG#/dev/} -> ${dev##*/}"
	echo "disks: $(ls /sys/block | tr '\n' ' ')"
	p=$(ls -d /sys/block/nvme*c*n1 2>/dev/null | wc -l)
	[ -n "$SUBSYS" ] && [ $n -eq 1 ] && [ "${dev##*/}" = "$SUBSYS" ] && [ $p -eq 2 ]
}
t_rr() { # round-robin: 8 Stores and Retrieves alternate over the paths; each value read back
	echo round-robin >/sys/class/nvme-subsystem/$SUBSYS/iopolicy || return 1
	read -r pol </sys/class/nvme-subsystem/$SUBSYS/iopolicy
	echo "iopolicy $pol"
	for i in 1 2 3 4; do
		store rr$i $T/v4k && retrieve rr$i 4096 $T/got && is_result 4096 && cmp $T/v4k $T/got || return 1
	done
	t_store_retrieve rr1m $T/v1m
}
# ANA (CMIC bit 3): the kernel reads each controller's log 0Ch and keeps a state per path, the
# ana_state of the path's hidden disk. nvme-cli 2.3's list-subsys cannot print it for a KV namespace:
# libnvme 1.3 skips a namespace it cannot open as /dev/nvmeXnY, and the head has /dev/ngXnY only.
ana_of() { for d in /sys/class/nvme/$1/nvme*c*n1; do read -r a <$d/ana_state; echo $a; done; }
ana_wait() { # CTRL STATE: that path's ANA state becomes STATE (10 s at most)
	for i in $(seq 100); do [ "$(ana_of $1)" = $2 ] && return 0; sleep 0.1; done
	return 1
}
ana_paths() { echo "ANA states: A ($CA) $(ana_of $CA), B ($CB) $(ana_of $CB)"; }
t_ana() { ana_paths; [ "$(ana_of $CA)" = optimized ] && [ "$(ana_of $CB)" = optimized ]; }
# The drain: NKV-MPATH-DRAIN makes run.sh set gateway B's state of ANA group 1 to non-optimized
# through A's control plane (nkv-ctl ana set); B sends its controller an ANA Change notice and the
# kernel rereads B's log 0Ch. Then 4 x Store/Retrieve/Delete go to A only (run.sh counts B's
# Stores), round-robin notwithstanding; NKV-MPATH-UNDRAIN sets optimized again.
t_drain() {
	echo NKV-MPATH-DRAIN >/dev/console
	read -r t0 _ </proc/uptime
	ana_wait $CB non-optimized || { ana_paths; return 1; }
	read -r t1 _ </proc/uptime
	echo "B's path non-optimized $(awk -v a=$t0 -v b=$t1 'BEGIN { printf "%.1f", b - a }') s after the marker"
	ana_paths
	[ "$(ana_of $CA)" = optimized ] || return 1
	for i in 1 2 3 4; do
		store dr$i $T/v4k && retrieve dr$i 4096 $T/got && is_result 4096 && delete dr$i || return 1
	done
	echo NKV-MPATH-UNDRAIN >/dev/console
	ana_wait $CB optimized || { ana_paths; return 1; }
	echo "after the undrain: $(ana_paths)"
}
# now_cs: /proc/uptime in centiseconds (no fork).
now_cs() { read -r u _ </proc/uptime; f=${u#*.}; echo $((${u%.*} * 100 + ${f#0})); }
# mp_cmd CMD...: the KV command through the head, retried at once until it succeeds (30 s at most).
# Counts the failures (MP_FAILED), the longest time from a failure to the success of its retry
# (MP_SWITCH) and between two successful commands (MP_GAP), in centiseconds.
mp_cmd() {
	f=""
	while ! "$@"; do
		MP_FAILED=$((MP_FAILED + 1))
		[ -n "$f" ] || { f=$(now_cs); echo "failure at guest uptime $(cs $f) s"; }
		echo "retry $MP_FAILED: $1 $2 failed (${STATUS:+status $STATUS, }$(tail -n 1 $T/out))"
		[ $(($(now_cs) - MP_LAST)) -lt 3000 ] || return 1
	done
	t=$(now_cs)
	[ $((t - MP_LAST)) -lt 100 ] || echo "pause: $1 $2 succeeded $(cs $((t - MP_LAST))) s after the previous success"
	[ $((t - MP_LAST)) -le $MP_GAP ] || MP_GAP=$((t - MP_LAST))
	[ -z "$f" ] || [ $((t - f)) -le $MP_SWITCH ] || MP_SWITCH=$((t - f))
	MP_LAST=$t MP_OK=$((MP_OK + 1))
}
cs() { echo "$(($1 / 100)).$(printf %02d $(($1 % 100)))"; }
t_loop() { # Store + Retrieve; B stopped then killed by run.sh from round 4; 8 rounds after B's path left live
	MP_FAILED=0 MP_GAP=0 MP_SWITCH=0 MP_OK=0 MP_LAST=$(now_cs) down=""
	t0=$MP_LAST
	i=0
	while [ $i -lt 100 ]; do
		i=$((i + 1))
		if [ $i -eq 4 ]; then
			# run.sh stops B within the second (it polls the console every 0.2 s), so that B cannot
			# read the next command routed to it before it is stopped; then kills it
			echo NKV-MPATH-KILL >/dev/console
			sleep 1
			MP_LAST=$(now_cs)
		fi
		mp_cmd store mp$i $T/v4k || return 1
		mp_cmd retrieve mp$i 4096 $T/got || return 1
		is_result 4096 || return 1
		[ -n "$down" ] || [ "$(state_of $CB)" = live ] || down=$i
		[ -n "$down" ] && [ $i -ge $((down + 8)) ] && break
	done
	MP_ROUNDS=$i
	dmesg | grep " $CB: " | grep -Ev 'Reconnecting|failed to connect socket|Failed reconnect' | tail -n 3 | sed 's/^/kernel: /'
	echo "loop: $i rounds, $MP_OK commands in $(cs $(($(now_cs) - t0))) s; B's path left live in round ${down:-never}"
	echo "failed commands (retried): $MP_FAILED; from a failure to its retry's success: $(cs $MP_SWITCH) s at most;" \
		"longest time between two successful commands: $(cs $MP_GAP) s (B stopped, then killed, in it)"
	[ -n "$down" ]
}
t_readback() { # every value the loop stored, through the remaining path
	for i in $(seq $MP_ROUNDS); do
		retrieve mp$i 4096 $T/got && cmp $T/v4k $T/got && delete mp$i || { echo "mp$i"; return 1; }
	done
}
t_after() { # list-subsys: A live, B not
	nvme list-subsys >$T/subsys 2>&1 || return 1
	cat $T/subsys
	grep -q "^ +- $CA tcp .*trsvcid=$PORT.* live" $T/subsys && grep -q "^ +- $CB tcp .*trsvcid=$PB" $T/subsys &&
		! grep -q "^ +- $CB tcp .* live" $T/subsys
}
t_mdisconnect() {
	nvme disconnect -n $NQN >$T/out 2>&1 && grep -q 'disconnected 2 controller' $T/out
}
show() { sed 's/^/# [mpath] /' $T/check; } # the output of the last check
mpath_suite() {
	check "[mpath] nvme discover at gateway A: $NQN on both gateways ($HOST:$PORT and :$PB)" t_mdiscover
	sed 's/^/# [mpath] discover: /' $T/disc
	check "[mpath] nvme connect-all: a controller per gateway, both live, and the head's /dev/ngXnY" t_connect_all
	[ -n "$NG" ] || return
	check "[mpath] list-subsys: one subsystem, two live tcp paths" t_paths
	sed 's/^/# [mpath] list-subsys: /' $T/subsys
	check "[mpath] the kernel took both controllers: CNTLIDs differ, CMIC multi-controller" t_cntlid
	show
	check "[mpath] NSID 1 is one multipath head: $NG belongs to the subsystem, a hidden disk per path" t_head
	show
	check "[mpath] iopolicy round-robin: Store + Retrieve 4 x 4 KiB and 1 MiB through the head" t_rr
	for k in rr1 rr2 rr3 rr4 rr1m; do delete $k; done
	check "[mpath] ANA: the kernel reads both paths as optimized (log 0Ch)" t_ana
	show
	if [ "$DRAIN" = 1 ]; then
		check "[mpath] ANA drain: gateway B non-optimized (nkv-ctl ana set), I/O through A only, then optimized again" t_drain
		show
	else
		echo "# [mpath] ANA drain skipped: $DRAIN"
	fi
	check "[mpath] gateway B killed (SIGKILL) during a Store/Retrieve loop: the loop goes on through A" t_loop
	show
	check "[mpath] list-subsys after the kill: A's path live, B's not" t_after
	sed 's/^/# [mpath] list-subsys after the kill: /' $T/subsys
	check "[mpath] every value the loop stored reads back through the head (then deleted)" t_readback
	check "[mpath] nvme disconnect -n $NQN: both controllers" t_mdisconnect
}

# ---- main ----
head -c 4096 /dev/urandom >$T/v4k
head -c 1048576 /dev/urandom >$T/v1m
head -c 4194000 /dev/urandom >$T/v4m
head -c 100 /dev/urandom >$T/v100
: >$T/v0

t_discover() {
	nvme discover -t tcp -a $HOST -s $DPORT >$T/out 2>&1 || return 1
	cat $T/out
	grep -q "subnqn: *$NQN" $T/out && grep -q "trsvcid: *$PORT" $T/out && grep -q 'trtype: *tcp' $T/out
}
if [ "$SUITE" = mpath ]; then
	echo "# [mpath] kernel $(uname -r), nvme_core.multipath=$(cat /sys/module/nvme_core/parameters/multipath)"
	mpath_suite
	if [ $NFAIL -gt 0 ]; then
		echo "---- guest dmesg, nvme lines (last 30) ----"
		dmesg | grep -i nvme | tail -n 30
	fi
	echo "guest: $NPASS passed, $NFAIL failed"
	[ $NFAIL -eq 0 ]
	exit
fi
if [ "$SUITE" = auth ]; then
	echo "# kernel $(uname -r)"
	auth_suite
	if [ $NFAIL -gt 0 ]; then
		echo "---- guest dmesg (last 40 lines) ----"
		dmesg | tail -n 40
	fi
	echo "guest: $NPASS passed, $NFAIL failed"
	[ $NFAIL -eq 0 ]
	exit
fi

check "nvme discover -t tcp -a $HOST -s $DPORT: log lists $NQN on port $PORT" t_discover

check "nvme connect -t tcp -a $HOST -s $PORT -n $NQN; /dev/ngXnY appears" connect
echo "# controller $CTRL, namespace $NG, NSID 2 $NG2"
check "both NSIDs on one RADOS namespace attach (/dev/ngXnY each, no duplicate-ID error)" t_two_ns
[ -n "$NG2" ] && check "NSIDs 1 and 2 report different EUI64/NGUID/UUID (ns-descs)" t_ids_differ
[ -n "$NG2" ] && check "NSID 2 sees NSID 1's keys (same RADOS namespace) and is read-only" t_same_rados_ns
[ -n "$NG" ] && suite plain
if [ -n "$NG" ]; then
	want="'Hello, rados-nkv!', DW0 17"
	[ "$BACKEND" = mem ] && want="C0h (no object classes in memory)"
	check "Store the key the read method runs on" store exkey $T/v100
	check "vendor Exec 82h (allowlisted hello.say_hello, inline 'nkv'): $want" t_exec
	check "vendor opcode 9Ah (not allowlisted): 01h" t_exec_free
	delete exkey
	check "Store 1 MiB for Retrieve Range" store k1m $T/v1m
	check "Retrieve Range (F2h) 4 KiB at offset 123457 of 1 MiB: those bytes, DW0 = 1048576" t_range k1m $T/v1m 123457 4096
	check "Retrieve Range straddling the end (offset 1048000, buffer 4096): the last 576 bytes" \
		eval 'range k1m 1048000 4096 $T/got && is_result 1048576 && tail -c 576 $T/v1m >$T/want && head -c 576 $T/got | cmp $T/want -'
	check "Retrieve Range of an absent key: 87h" t_absent range nokey 0 4096 $T/got
	check "Retrieve Range with CDW11 bit 8 set: 02h" \
		eval '! kv 0xf2 k1m 3 1 4096 4096 --read --input-file=$T/got && is_status 0x02'
	delete k1m
	dmesg | grep -i 'effects' | sed 's/^/# kernel: /'
fi
if [ -n "$NG" ] && [ "$AEN" = 1 ]; then
	aen_suite
elif [ -n "$NG" ]; then
	echo "# namespace notice checks skipped: $AEN"
fi
check "nvme disconnect -n $NQN; the namespace device goes away" disconnect

check "nvme connect with header and data digests (-g -G)" connect -g -G
[ -n "$NG" ] && suite digest
check "disconnect (digests)" disconnect

check "nvme connect with KATO 2 s and SQ flow control disabled (-k 2 --disable-sqflow)" connect -k 2 --disable-sqflow
if [ -n "$NG" ]; then
	printf x >$T/vka
	store ka-key $T/vka
	check "SQ flow control disabled: Store + Retrieve 1 MiB" t_store_retrieve k1m $T/v1m
	delete k1m
	check "keep alive: idle 5 s (> KATO), controller still live, Exist works" t_keepalive
	delete ka-key
fi
check "disconnect (keep alive)" disconnect

# DH-HMAC-CHAP: $NQN-auth requires it of this host; 6.1 (Debian: CONFIG_NVME_AUTH unset) cannot.
check "DH-HMAC-CHAP: $NQN-auth, which requires authentication, refuses nvme connect without a secret" \
	t_refused $NQN-auth
check "DH-HMAC-CHAP: and refuses this 6.1 host (no in-band authentication) even with --dhchap-secret" \
	t_refused $NQN-auth --dhchap-secret=$KA

if [ $NFAIL -gt 0 ]; then
	echo "---- guest dmesg (last 40 lines) ----"
	dmesg | tail -n 40
fi
echo "guest: $NPASS passed, $NFAIL failed"
[ $NFAIL -eq 0 ]
