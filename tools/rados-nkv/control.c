/*
 * control.c - the daemon's side of the control plane: its configuration as the state's seed, the
 * listener hooks, and the gRPC server (README "Control plane").
 *
 * Precedence: flags over the file, as everywhere; then, once a group (or a state file) holds a
 * state, that state over both for subsystems, namespaces and hosts. The flags and file seed an
 * empty state, and a gateway joining a group adds its own listeners the first time. Exec allowlists,
 * TLS PSKs and DH-HMAC-CHAP hash/group lists stay per gateway (flags and file).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#define NKV_LOG_COMPONENT "daemon"
#include "common/log.h"
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

static int hook_shm(void *arg, const char *nqn, const char *path)
{
	struct daemon_control *dc = arg;
	return daemon_shm_serve(dc->c, dc->tgt, dc->shm, nqn, path);
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
		json_object_object_add(o, "allow_any_host", json_object_new_boolean(s->nhosts == 0));
		json_object_object_add(o, "shm_socket", json_object_new_string(s->shm_path));
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
		.hooks = {.arg = dc, .tcp_listen = hook_listen, .tcp_unlisten = hook_unlisten, .shm_listen = hook_shm},
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
	};
	rc = nkv_ctl_create(&cc, s, &dc->ctl);
	free(s);
	if (rc < 0) {
		NKV_ERR("control plane: cannot start (state %s): %s", *c->group ? c->group : *c->state_file ? c->state_file : "memory",
			strerror(-rc));
		free(dc);
		return -1;
	}
	if (strcmp(c->control_addr, "none") != 0) {
#ifdef NKV_HAVE_CONTROL
		struct nkv_ctl_server_conf sc = {.addr = c->control_addr,
						 .tls_cert = *c->control_cert ? c->control_cert : NULL,
						 .tls_key = *c->control_key ? c->control_key : NULL,
						 .client_ca = *c->control_ca ? c->control_ca : NULL};
		rc = nkv_ctl_server_start(dc->ctl, &sc, &dc->srv);
		if (rc == -EADDRINUSE && !c->control_set) {
			/* The default address, taken (another daemon on this machine): serve without it. */
			NKV_WARN("control plane: %s is in use: no gRPC server (give --control ADDR:PORT)", c->control_addr);
			rc = 0;
		} else if (rc < 0) {
			NKV_ERR("control plane: cannot serve gRPC on %s: %s%s", c->control_addr, strerror(-rc),
				rc == -EADDRINUSE ? " (another daemon has it: --control ADDR:PORT, or --control none)" : "");
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
