/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control.c - the daemon's side of the control plane: its configuration as the state's seed, the
 * listener hooks, and the gRPC server (docs/control-plane.md).
 *
 * Precedence: flags over the file, as everywhere; then, once a group (or a state file) holds a
 * state, that state over both for subsystems, namespaces and hosts. The flags and file seed an
 * empty state, and a gateway joining a group adds its own listeners the first time. Exec allowlists,
 * TLS PSKs and DH-HMAC-CHAP hash/group lists stay per gateway (flags and file).
 */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#define NKV_LOG_COMPONENT "daemon"
#include "common/exposure.h"
#include "common/log.h"
#include "common/unix_sock.h"
#include "control/cache_policy.h"
#include "control/ctl.h"
#include "daemon.h"
#include "nkv/nkv_version.h"

struct daemon_control {
	const struct daemon_conf *c;
	struct nkv_target *tgt;
	struct nkv_tcp *tcp;
	struct nkv_shm **shm;
	struct nkv_ctl *ctl;
	struct nkv_ctl_server *srv;
};

static int hook_listen(void *arg, const char *addr, unsigned port, bool tls)
{
	struct daemon_control *dc = arg;
	char p[16];
	snprintf(p, sizeof(p), "%u", port);
	int rc = tls ? nkv_tcp_listen_tls(dc->tcp, addr, p, true) : nkv_tcp_listen(dc->tcp, addr, p, true);
	if (rc >= 0)
		NKV_INFO("NVMe/TCP%s on %s:%d (control plane)", tls ? " with TLS" : "", addr, rc);
	return rc;
}

static int hook_unlisten(void *arg, const char *addr, unsigned port)
{
	struct daemon_control *dc = arg;
	int rc = nkv_tcp_unlisten(dc->tcp, addr, (int)port);
	if (rc == -ENOENT && strcmp(addr, "0.0.0.0") == 0) /* a flag's "PORT" alone listens on "" */
		rc = nkv_tcp_unlisten(dc->tcp, "", (int)port);
	if (rc == 0)
		NKV_INFO("NVMe/TCP on %s:%u closed (control plane)", addr, port);
	return rc;
}

static bool hook_tls_ready(void *arg)
{
	struct daemon_control *dc = arg;
	for (unsigned i = 0; i < dc->c->nsubsys; i++)
		if (dc->c->subsys[i].npsks)
			return true;
	return false;
}

/* A socket the control plane names is made only directly in --shm-dir, a directory no one else can
 * change (the control core refuses other paths before committing; a group's state may hold another
 * gateway's). @what names the kind of socket in the message. @return 0 or -errno. */
static int socket_path_ok(struct daemon_control *dc, const char *nqn, const char *path, const char *what)
{
	const char *dir = dc->c->shm_dir, *name = strlen(path) > strlen(dir) ? path + strlen(dir) + 1 : "";
	char why[512];
	int rc;

	if (strncmp(path, dir, strlen(dir)) != 0 || path[strlen(dir)] != '/' || !*name || strchr(name, '/') ||
	    strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		NKV_ERR("%s: %s socket %s refused: not directly in --shm-dir %s", nqn, what, path, dir);
		return -EINVAL;
	}
	if ((rc = nkv_dir_check_private(dir, false, 0, why, sizeof(why))) < 0) {
		NKV_ERR("%s: %s socket %s refused: %s", nqn, what, path, why);
		return rc;
	}
	return 0;
}

static int hook_shm(void *arg, const char *nqn, const char *path)
{
	struct daemon_control *dc = arg;
	int rc = socket_path_ok(dc, nqn, path, "shared-memory");
	return rc ? rc : daemon_shm_serve(dc->c, dc->tgt, dc->shm, nqn, path);
}

static int hook_vfu(void *arg, const char *nqn, const char *path, const char *hostnqn)
{
	struct daemon_control *dc = arg;
	int rc = socket_path_ok(dc, nqn, path, "vfio-user");
	return rc ? rc : daemon_vfu_serve(dc->c, dc->tgt, dc->shm, nqn, path, hostnqn);
}

/* The configuration the daemon runs now, as the control plane's state (src/control/ctl_int.h). */
static char *seed(const struct daemon_conf *c)
{
	json_object *st = json_object_new_object(), *subs = json_object_new_object(), *ls = json_object_new_object();
	char key[512];

	json_object_object_add(st, "epoch", json_object_new_int64(0));
	for (unsigned i = 0; i < c->nsubsys; i++) {
		const struct conf_subsys *s = &c->subsys[i];
		json_object *o = json_object_new_object(), *hosts = json_object_new_object(), *nss = json_object_new_object();
		json_object_object_add(o, "nqn", json_object_new_string(s->nqn));
		json_object_object_add(o, "pool", json_object_new_string(s->pool));
		json_object_object_add(o, "max_namespaces", json_object_new_int64(0));
		/* No allowlist and no --allow-any-host: any host, through loopback listeners only; never an
		 * explicit "any host" in a state other gateways (with other listeners) apply. */
		json_object_object_add(o, "allow_any_host", json_object_new_boolean(s->allow_any_host));
		json_object_object_add(o, "loopback_any_host", json_object_new_boolean(!s->nhosts && !s->allow_any_host));
		json_object_object_add(o, "shm_socket", json_object_new_string(s->shm_path));
		if (*s->vfu_path) {
			json_object_object_add(o, "vfio_user_socket", json_object_new_string(s->vfu_path));
			json_object_object_add(o, "vfio_user_host", json_object_new_string(s->vfu_host));
		}
		for (unsigned h = 0; h < s->nhosts; h++) {
			json_object *ho = json_object_new_object();
			json_object_object_add(ho, "host_nqn", json_object_new_string(s->hosts[h]));
			json_object_object_add(ho, "dhchap_key", json_object_new_string(s->auth[h] ? s->auth[h]->key : ""));
			json_object_object_add(ho, "dhchap_ctrl_key", json_object_new_string(s->auth[h] ? s->auth[h]->ctrl_key : ""));
			json_object_object_add(hosts, s->hosts[h], ho);
		}
		for (unsigned n = 0; n < s->nns; n++) {
			json_object *no = json_object_new_object();
			json_object_object_add(no, "nsid", json_object_new_int64(s->ns[n].nsid));
			json_object_object_add(no, "rados_namespace", json_object_new_string(s->rados_ns[n]));
			json_object_object_add(no, "max_value", json_object_new_uint64(s->ns[n].max_value));
			json_object_object_add(no, "read_only", json_object_new_boolean(s->ns[n].read_only));
			if (s->has_cache[n])
				json_object_object_add(no, "cache", ctl_cache_policy_to_json(&s->cache[n]));
			snprintf(key, sizeof(key), "%u", s->ns[n].nsid);
			json_object_object_add(nss, key, no);
		}
		json_object_object_add(o, "hosts", hosts);
		json_object_object_add(o, "namespaces", nss);
		json_object_object_add(subs, s->nqn, o);
	}
	for (unsigned i = 0; i < c->nlisteners; i++) {
		const struct conf_listener *l = &c->listeners[i];
		json_object *o = json_object_new_object();
		const char *addr = *l->addr ? l->addr : "0.0.0.0";
		int port = l->bound > 0 ? l->bound : atoi(l->port); /* port 0 asked the kernel: what it gave */
		snprintf(key, sizeof(key), "%s/%s/%d", c->gateway_name, addr, port);
		json_object_object_add(o, "gateway", json_object_new_string(c->gateway_name));
		json_object_object_add(o, "address", json_object_new_string(addr));
		json_object_object_add(o, "port", json_object_new_int64(port));
		json_object_object_add(o, "tls", json_object_new_boolean(l->tls));
		json_object_object_add(ls, key, o);
	}
	json_object_object_add(st, "subsystems", subs);
	json_object_object_add(st, "listeners", ls);
	char *txt = strdup(json_object_to_json_string_ext(st, JSON_C_TO_STRING_PLAIN));
	json_object_put(st);
	return txt;
}

/* The control plane's view of @c's state store (group or state file), for nkv_ctl_create() and --check. */
static struct nkv_ctl_conf store_conf(const struct daemon_conf *c)
{
	return (struct nkv_ctl_conf){.gateway = c->gateway_name, .group = c->group, .group_pool = c->group_pool,
				     .ceph_conf = c->ceph_conf, .keyring = c->keyring,
				     .client_id = *c->client_id ? c->client_id : NULL, .state_file = c->state_file};
}

int daemon_control_range(const struct daemon_conf *c, struct nkv_target *tgt)
{
	struct nkv_ctl_conf cc = store_conf(c);
	uint16_t lo, hi;
	int rc;

	if (!*c->group)
		return 0;
	if ((rc = nkv_ctl_group_range(&cc, &lo, &hi)) < 0) {
		NKV_ERR("group %s: cannot give gateway %s a controller ID range: %s", c->group, c->gateway_name,
			rc == -ENOSPC ? "all 32 ranges are held by other gateway names (a group has at most 32)"
				      : strerror(-rc));
		return -1;
	}
	return nkv_target_set_cntlid_range(tgt, lo, hi) < 0 ? -1 : 0;
}

static json_object *jget(json_object *o, const char *k)
{
	json_object *v = NULL;
	return json_object_object_get_ex(o, k, &v) ? v : NULL;
}

static bool jtrue(json_object *o, const char *k)
{
	return json_object_get_boolean(jget(o, k));
}

/* Print this gateway's listeners in stored state @st (or, before it joins, its flags'), and each
 * stored subsystem that admits any host by default and that one of them would expose. */
static void check_listeners(const struct daemon_conf *c, json_object *st)
{
	char key[600];
	bool joined = false;
	json_object_object_foreach(jget(st, "listeners"), k, l) {
		(void)k;
		joined |= strcmp(json_object_get_string(jget(l, "gateway")), c->gateway_name) == 0;
	}
	for (unsigned i = 0; !joined && i < c->nlisteners; i++)
		printf("  listener of this gateway (%s): %s:%s%s (from the flags: added to the state when it joins)\n",
		       c->gateway_name, *c->listeners[i].addr ? c->listeners[i].addr : "0.0.0.0", c->listeners[i].port,
		       c->listeners[i].tls ? " (TLS)" : "");
	json_object_object_foreach(jget(st, "listeners"), k2, l2) {
		(void)k2;
		printf("  listener of gateway %s: %s:%s%s\n", json_object_get_string(jget(l2, "gateway")),
		       json_object_get_string(jget(l2, "address")), json_object_get_string(jget(l2, "port")),
		       jtrue(l2, "tls") ? " (TLS)" : "");
	}
	json_object_object_foreach(jget(st, "subsystems"), nqn, ss) {
		if (jtrue(ss, "allow_any_host") || !jtrue(ss, "loopback_any_host") ||
		    json_object_object_length(jget(ss, "hosts")))
			continue;
		for (unsigned i = 0; !joined && i < c->nlisteners; i++)
			if (nkv_listener_exposes(c->listeners[i].addr, c->listeners[i].tls))
				printf("  warning: subsystem %s has no allowlist and was not opened to any host explicitly: not "
				       "served on %s:%s (its Connects there are refused); nkv-ctl host allow %s HOSTNQN, or "
				       "host allow %s '*'\n", nqn, *c->listeners[i].addr ? c->listeners[i].addr : "0.0.0.0",
				       c->listeners[i].port, nqn, nqn);
		json_object_object_foreach(jget(st, "listeners"), k3, l3) {
			(void)k3;
			if (!joined || strcmp(json_object_get_string(jget(l3, "gateway")), c->gateway_name) != 0 ||
			    !nkv_listener_exposes(json_object_get_string(jget(l3, "address")), jtrue(l3, "tls")))
				continue;
			snprintf(key, sizeof(key), "%s:%s", json_object_get_string(jget(l3, "address")),
				 json_object_get_string(jget(l3, "port")));
			printf("  warning: subsystem %s has no allowlist and was not opened to any host explicitly: not "
			       "served on %s (its Connects there are refused); nkv-ctl host allow %s HOSTNQN, or host "
			       "allow %s '*'\n", nqn, key, nqn, nqn);
		}
	}
}

int daemon_control_check(const struct daemon_conf *c)
{
	struct nkv_ctl_conf cc = store_conf(c);
	char where[4352], *txt = NULL;
	int rc;

	if (!*c->group && !*c->state_file)
		return 0; /* memory: the flags and file are the whole story */
	if ((rc = nkv_ctl_stored_state(&cc, &txt, where, sizeof(where))) < 0) {
		fprintf(stderr, "rados-nkv: the stored state (%s) cannot be read: %s; the daemon would not start\n",
			*c->group ? c->group : c->state_file, strerror(-rc));
		return -1;
	}
	if (!txt) {
		printf("stored state: %s holds none yet: the configuration above seeds it\n", where);
		return 0;
	}
	json_object *st = json_tokener_parse(txt);
	free(txt);
	printf("stored state: %s, epoch %s: it wins over the subsystems, namespaces and hosts above; served:\n", where,
	       json_object_get_string(jget(st, "epoch")));
	json_object_object_foreach(jget(st, "subsystems"), nqn, ss) {
		size_t nh = json_object_object_length(jget(ss, "hosts"));
		printf("  subsystem %s: pool %s; may connect: ", nqn, json_object_get_string(jget(ss, "pool")));
		if (jtrue(ss, "allow_any_host"))
			printf("any host (allow-any-host)\n");
		else if (!nh && jtrue(ss, "loopback_any_host"))
			printf("any host (loopback and TLS listeners only)\n");
		else if (!nh)
			printf("nobody (an empty allowlist)\n");
		else {
			printf("only %zu host(s):", nh);
			json_object_object_foreach(jget(ss, "hosts"), h, hv) {
				(void)hv;
				printf(" %s", h);
			}
			putchar('\n');
		}
		json_object_object_foreach(jget(ss, "namespaces"), n, ns)
			printf("    nsid %s: RADOS namespace '%s'%s%s\n", n, json_object_get_string(jget(ns, "rados_namespace")),
			       jtrue(ns, "read_only") ? ", read-only" : "", jget(ns, "cache") ? ", cache" : "");
	}
	check_listeners(c, st);
	json_object_put(st);
	return 0;
}

/*
 * Who may call the control plane (docs/control-plane.md, "Who may call the control plane"). A Unix socket: the
 * daemon's user, root and --control-group, in a directory only the daemon's user (or root) may
 * change; the default's directory is made if missing. TCP: anyone who reaches the port, so only with
 * client certificates (--control-client-ca), unless --control-insecure-tcp says otherwise (warned).
 * The address cannot change while running. @return 0, 1 (the default address is unusable: serve
 * without it, warned) or -1 (refused, logged).
 */
static int control_access(const struct daemon_conf *c)
{
	char why[512];

	if (*c->control_group && !getgrnam(c->control_group)) {
		NKV_ERR("--control-group: no group named '%s'", c->control_group);
		return -1;
	}
	if (strncmp(c->control_addr, "unix:", 5) != 0) {
		if (*c->control_ca)
			return 0;
		if (!c->control_insecure_tcp) {
			NKV_ERR("control plane: %s is TCP without client certificates: any local user (or host) could "
				"reconfigure this gateway. Use a Unix socket (the default), add --control-client-ca, or "
				"accept it with --control-insecure-tcp", c->control_addr);
			return -1;
		}
		NKV_WARN("control plane: %s without client certificates (--control-insecure-tcp): anyone who can "
			 "reach it can reconfigure this gateway and read its tenants' configuration", c->control_addr);
		return 0;
	}
	char dir[256];
	const char *path = c->control_addr + 5, *slash = strrchr(path, '/');
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1, slash ? path : ".");
	if (nkv_dir_check_private(dir, !c->control_set, 0755, why, sizeof(why)) == 0)
		return 0;
	if (c->control_set) {
		NKV_ERR("control plane: refused %s: %s", c->control_addr, why);
		return -1;
	}
	NKV_WARN("control plane: no gRPC server on the default %s: %s (give --run-dir DIR or --control unix:PATH)",
		 c->control_addr, why);
	return 1;
}

int daemon_control_start(const struct daemon_conf *c, struct nkv_target *tgt, struct nkv_tcp *tcp,
			 struct nkv_shm **shm, struct daemon_control **out)
{
	struct daemon_control *dc = calloc(1, sizeof(*dc));
	char *s = seed(c);
	int rc;

	if (!dc || !s) {
		free(dc);
		free(s);
		return -1;
	}
	*dc = (struct daemon_control){.c = c, .tgt = tgt, .tcp = tcp, .shm = shm};
	struct nkv_ctl_conf cc = {
		.tgt = tgt,
		.hooks = {.arg = dc, .tcp_listen = hook_listen, .tcp_unlisten = hook_unlisten, .shm_listen = hook_shm, .vfu_listen = hook_vfu,
			  .tls_ready = hook_tls_ready},
		.gateway = c->gateway_name,
		.group = c->group,
		.group_pool = c->group_pool,
		.ceph_conf = c->ceph_conf,
		.keyring = c->keyring,
		.client_id = *c->client_id ? c->client_id : NULL,
		.state_file = c->state_file,
		.backend = c->backend_name,
		.version = NKV_VERSION_STRING,
		.drain_ms = c->backend.op_timeout_s ? c->backend.op_timeout_s * 1000 + 2000 : 32000,
		.shm_dir = c->shm_dir,
	};
	rc = nkv_ctl_create(&cc, s, &dc->ctl);
	free(s);
	if (rc < 0) {
		NKV_ERR("control plane: cannot start (state %s): %s", *c->group ? c->group : *c->state_file ? c->state_file : "memory",
			strerror(-rc));
		free(dc);
		return -1;
	}
	bool serve = strcmp(c->control_addr, "none") != 0;
	if (serve && (rc = control_access(c)) != 0) {
		if (rc < 0) {
			nkv_ctl_destroy(dc->ctl);
			free(dc);
			return -1;
		}
		serve = false; /* the default's directory is not usable: no server (said why) */
	}
	if (serve) {
#ifdef NKV_HAVE_CONTROL
		struct nkv_ctl_server_conf sc = {.addr = c->control_addr,
						 .tls_cert = *c->control_cert ? c->control_cert : NULL,
						 .tls_key = *c->control_key ? c->control_key : NULL,
						 .client_ca = *c->control_ca ? c->control_ca : NULL};
		if (*c->control_group) {
			struct group *g = getgrnam(c->control_group);
			sc.peer_group_set = true;
			sc.peer_gid = g ? (unsigned)g->gr_gid : 0; /* checked by control_access() */
		}
		rc = nkv_ctl_server_start(dc->ctl, &sc, &dc->srv);
		if (rc == -EADDRINUSE && !c->control_set) {
			/* The default address, taken (another daemon on this machine): serve without it. */
			NKV_WARN("control plane: %s is in use: no gRPC server (give --run-dir DIR or --control unix:PATH)",
				 c->control_addr);
			rc = 0;
		} else if (rc < 0) {
			NKV_ERR("control plane: cannot serve gRPC on %s: %s%s", c->control_addr, strerror(-rc),
				rc == -EADDRINUSE ? " (another daemon has it: --control unix:PATH, or --control none)" : "");
			nkv_ctl_destroy(dc->ctl);
			free(dc);
			return -1;
		}
		if (dc->srv)
			NKV_INFO("control plane: gRPC on %s%s", c->control_addr,
				 *c->control_ca ? " (mutual TLS)" : *c->control_cert ? " (TLS)" : "");
#else
		NKV_WARN("control plane: built without grpc++, so no gRPC server on %s", c->control_addr);
#endif
	}
	*out = dc;
	return 0;
}

void daemon_control_stop(struct daemon_control *dc)
{
	if (!dc)
		return;
#ifdef NKV_HAVE_CONTROL
	if (dc->srv)
		nkv_ctl_server_stop(dc->srv, 2000);
#endif
	nkv_ctl_destroy(dc->ctl);
	free(dc);
}
