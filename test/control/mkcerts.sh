#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# mkcerts.sh DIR - throwaway certificates for the control plane's TLS tests (P-256 keys, 2 days):
#   ca.pem/ca.key         the test CA
#   srv.pem/srv.key       server, signed by ca: SAN localhost, 127.0.0.1, ::1
#   name.pem/name.key     server, signed by ca: SAN ctl.test only (for --tls-server-name)
#   cli.pem/cli.key       client (clientAuth), signed by ca
#   rogue-ca.pem          another CA;  rogue.pem/rogue.key: a client signed by it
#   notpem.pem            a file that is not PEM
set -euo pipefail
D=${1:?usage: $0 DIR}
mkdir -p "$D"
cd "$D"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() { # NAME CN
	key "$1.key"
	openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=$2" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
leaf() { # NAME CN CA EXTENSIONS
	key "$1.key"
	openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$2"
	printf '%s\n' "$4" >"$1.ext"
	openssl x509 -req -in "$1.csr" -CA "$3.pem" -CAkey "$3.key" -CAcreateserial -out "$1.pem" -days 2 \
		-extfile "$1.ext" 2>/dev/null
	rm -f "$1.csr" "$1.ext"
}
ca ca "rados-nkv test CA"
ca rogue-ca "another CA"
leaf srv localhost ca "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1
extendedKeyUsage=serverAuth"
leaf name ctl.test ca "subjectAltName=DNS:ctl.test
extendedKeyUsage=serverAuth"
leaf cli nkv-ctl-client ca "extendedKeyUsage=clientAuth"
leaf rogue nkv-ctl-rogue rogue-ca "extendedKeyUsage=clientAuth"
echo "not a certificate" >notpem.pem
