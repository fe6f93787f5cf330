/* SPDX-License-Identifier: Apache-2.0 */
/*
 * conn.c - nkv's target address (-a/-s, with the daemon's "[::1]:4420" forms) and the messages for
 * a connection that failed: each cause (name does not resolve, nothing listening, no route, no
 * answer, host not allowed...) gets its own, naming the address and what to check.
 */
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static bool port_ok(const char *s)
{
	char *end;
	if (!*s || *s == '-' || *s == '+' || strspn(s, "0123456789") != strlen(s))
		return false;
	unsigned long v = strtoul(s, &end, 10);
	return v >= 1 && v <= 65535;
}

int cli_addr_settle(struct cli *c)
{
	const char *a = c->traddr, *port = NULL;
	size_t n = strlen(a);

	if (n >= sizeof(c->addr_buf))
		return cli_usage(c, "--traddr '%s' is too long", a);
	if (a[0] == '[') {
		/* "[v6]" or "[v6]:PORT", as rados-nkv --listen takes them */
		const char *rb = strchr(a, ']');
		if (!rb || rb == a + 1 || (rb[1] && rb[1] != ':'))
			return cli_usage(c, "bad --traddr '%s' (an IPv6 address: [::1] or [::1]:4420)", a);
		memcpy(c->addr_buf, a, (size_t)(rb - a + 1));
		c->addr_buf[rb - a + 1] = '\0';
		if (rb[1] == ':')
			port = rb + 2;
	} else if (strchr(a, ':') && strchr(a, ':') == strrchr(a, ':')) {
		/* "HOST:PORT" (one colon: a bare IPv6 address has several) */
		const char *colon = strchr(a, ':');
		memcpy(c->addr_buf, a, (size_t)(colon - a));
		c->addr_buf[colon - a] = '\0';
		port = colon + 1;
	} else {
		return c->trsvcid && !port_ok(c->trsvcid)
			       ? cli_usage(c, "bad port '%s' (--trsvcid: a number, 1 to 65535)", c->trsvcid)
			       : EXIT_OK;
	}
	if (!c->addr_buf[0] || (c->addr_buf[0] == '[' && c->addr_buf[1] == ']'))
		return cli_usage(c, "bad --traddr '%s' (no host)", a);
	c->traddr = c->addr_buf;
	if (port && !port_ok(port))
		return cli_usage(c, "bad port '%s' in --traddr '%s' (a number, 1 to 65535)", port, a);
	if (c->trsvcid && !port_ok(c->trsvcid))
		return cli_usage(c, "bad port '%s' (--trsvcid: a number, 1 to 65535)", c->trsvcid);
	if (port && c->trsvcid && strtoul(port, NULL, 10) != strtoul(c->trsvcid, NULL, 10))
		return cli_usage(c, "--traddr '%s' and --trsvcid %s name different ports", a, c->trsvcid);
	if (port && !c->trsvcid) {
		snprintf(c->port_buf, sizeof(c->port_buf), "%s", port);
		c->trsvcid = c->port_buf;
	}
	return EXIT_OK;
}

static void shm_reason(const struct cli *c, int rc, char *m, size_t cap)
{
	switch (rc) {
	case -ENOENT:
	case -ECONNREFUSED:
		snprintf(m, cap, "cannot connect to %s: %s (is rados-nkv serving --%s there?)", c->shm_addr,
			 strerror(-rc), c->shm_scheme);
		break;
	case -EACCES:
		if (strcmp(c->shm_scheme, "shm") == 0)
			snprintf(m, cap, "%s refused host NQN %s (from %s): not on its --allow-host list; pass -q NQN or set %s",
				 c->shm_addr, c->host.hostnqn, cli_host_src(c, true), c->host.hostnqn_file);
		else /* vfio-user carries no host NQN: the target names its clients */
			snprintf(m, cap, "%s refused this client (the target's socket permissions or host allowlist)",
				 c->shm_addr);
		break;
	case -ECONNRESET:
		snprintf(m, cap, "%s: the target closed the connection%s (run with -v for details)", c->shm_addr,
			 strcmp(c->shm_scheme, "vfio-user") == 0 ? " (a vfio-user socket serves one client at a time)" : "");
		break;
	case -ETIMEDOUT:
		snprintf(m, cap, "%s: no answer or controller not ready in time (see --timeout)", c->shm_addr);
		break;
	case -EPROTO:
	case -EIO:
		snprintf(m, cap, "%s: %s (run with -v for details)", c->shm_addr,
			 rc == -EIO ? "controller fatal status" : "protocol error");
		break;
	default:
		snprintf(m, cap, "cannot connect to %s: %s", c->shm_addr, strerror(-rc));
	}
}

/* Why @host does not resolve, asked again (libnkv returns only -ENXIO). */
static const char *resolve_why(const char *host)
{
	char h[257];
	size_t n = strlen(host);
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < sizeof(h)) {
		memcpy(h, host + 1, n - 2);
		h[n - 2] = '\0';
		host = h;
	}
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	int g = getaddrinfo(host, NULL, &hints, &res);
	if (g == 0) {
		freeaddrinfo(res);
		return "the name did not resolve a moment ago";
	}
	return gai_strerror(g);
}

void cli_connect_error(const struct cli *c, const char *port, const char *nqn, int rc)
{
	char m[640];
	const char *h = c->traddr;
	if (c->shm_path) {
		shm_reason(c, rc, m, sizeof(m));
	} else {
		switch (rc) {
		case -ENXIO:
			snprintf(m, sizeof(m), "cannot resolve %s: %s", h, resolve_why(h));
			break;
		case -ECONNREFUSED:
			snprintf(m, sizeof(m), "connection refused by %s:%s (is rados-nkv running and listening there?)", h,
				 port);
			break;
		case -EHOSTUNREACH:
			snprintf(m, sizeof(m), "host %s is unreachable (no route to it; check the address)", h);
			break;
		case -ENETUNREACH:
			snprintf(m, sizeof(m), "network unreachable for %s (no route to its network; check the address)", h);
			break;
		case -ETIMEDOUT:
			snprintf(m, sizeof(m), "no answer from %s:%s within %d ms (a firewall dropping packets, or not an "
					       "NVMe/TCP target? see --timeout)",
				 h, port, c->opts.timeout_ms ? c->opts.timeout_ms : 30000);
			break;
		case -ENOENT:
			snprintf(m, sizeof(m), "%s:%s has no subsystem %s, or does not serve it (a discovery port serves "
					       "discovery only; nkv discover -a %s lists the subsystems and their ports)", h, port,
				 nqn, h);
			break;
		case -EACCES:
			if (c->opts.dhchap_secret)
				snprintf(m, sizeof(m), "subsystem %s refused host NQN %s (from %s): not on its --allow-host "
						       "list, or the DH-HMAC-CHAP secret (--dhchap-secret) is not the one it "
						       "has for this host",
					 nqn, c->host.hostnqn, cli_host_src(c, true));
			else /* the allowlist is the control plane's (the flags only seed it) */
				snprintf(m, sizeof(m), "subsystem %s refused host NQN %s (from %s): not on its allowlist; the "
						       "gateway's operator adds it with nkv-ctl host allow %s %s (or pass -q "
						       "NQN with an allowed host NQN)",
					 nqn, c->host.hostnqn, cli_host_src(c, true), nqn, c->host.hostnqn);
			break;
		case -ENOKEY:
			snprintf(m, sizeof(m), "subsystem %s requires DH-HMAC-CHAP authentication of host %s: pass its "
					       "secret with --dhchap-secret", nqn, c->host.hostnqn);
			break;
		case -EKEYREJECTED: /* a key refused: the TLS PSK at the handshake, or the controller's DH-HMAC-CHAP
				     * response (with both in use libnkv cannot say which from the errno alone) */
			if (c->opts.tls && !c->opts.dhchap_ctrl_secret)
				snprintf(m, sizeof(m), "TLS handshake with %s:%s failed: the target does not accept this PSK "
						       "for host %s and subsystem %s (check --tls-key and the target's TLS keys)",
					 h, port, c->host.hostnqn, nqn);
			else if (!c->opts.tls)
				snprintf(m, sizeof(m), "the controller of %s at %s:%s failed to authenticate itself: its "
						       "response does not match --dhchap-ctrl-secret (a wrong secret, or not that "
						       "controller)", nqn, h, port);
			else
				snprintf(m, sizeof(m), "%s at %s:%s: a key was rejected: the TLS PSK (--tls-key) or the "
						       "controller's DH-HMAC-CHAP response (--dhchap-ctrl-secret); run with -v",
					 nqn, h, port);
			break;
		case -EPROTO:
			snprintf(m, sizeof(m), "protocol error talking to %s:%s%s (run with -v for details)", h, port,
				 c->opts.tls ? " (over TLS: is it a TLS listener?)" : "");
			break;
		case -ENAMETOOLONG:
			snprintf(m, sizeof(m), "host %s and subsystem %s are too long together for a version 0 TLS PSK "
					       "identity (255 bytes): use --tls-identity 1", c->host.hostnqn, nqn);
			break;
		case -ECONNRESET:
			snprintf(m, sizeof(m), "%s:%s closed the connection %s", h, port,
				 c->opts.tls ? "during the TLS handshake (not a TLS listener? try without --tls)"
					     : "at once (a TLS-only listener? use --tls --tls-key KEY)");
			break;
		default:
			snprintf(m, sizeof(m), "cannot connect to %s at %s:%s: %s", nqn, h, port, strerror(-rc));
		}
	}
	cli_json_error(c, m, rc, 0);
	fprintf(stderr, "nkv: %s\n", m);
}
