/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli_test.c - nkv-ctl as a user runs it, against the glue's gRPC server in this process with the
 * fake nkv_ctl_call() of fake_ctl.c: for every command, the request that reaches the C core (method
 * and exact JSON), the readable output and -o json (the response as is); every error status and its
 * exit code (2-6, 69, 70) with its message, -o json error objects; usage errors (64) that never reach
 * the server; --server, $NKV_CTL_SERVER and unix: addresses; TLS and mTLS flags; --timeout; an
 * absent server; --help, --version.
 *
 *   cli_test NKV_CTL MKCERTS_SCRIPT
 *
 * Every check counts; the last line is "N passed, N failed"; exit 0 when none failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "control/glue.h"
#include "fake_ctl.h"

extern char **environ;

unsigned h_pass, h_fail;
static struct nkv_ctl *const g_cookie = (struct nkv_ctl *)(uintptr_t)0xc11;
static const char *g_ctl; /* the nkv-ctl binary */
static char g_dir[80];

#define NQN "nqn.2026-11.io.rados-nkv:cli"
#define HOST1 "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555"

static char *jq(const char *s)
{
	char *d = strdup(s);
	for (char *p = d; *p; p++)
		if (*p == '\'')
			*p = '"';
	return d;
}

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

struct run {
	int exit; /* exit status; -1: killed or not run */
	char *out, *err;
	long ms;
};

static void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
}

/* Run nkv-ctl with @args (split on spaces; "\x01" stands for a space inside one), 30 s at most. */
static void run_ctl(const char *args, struct run *r)
{
	char *copy = strdup(args), *argv[64];
	int argc = 0;
	argv[argc++] = (char *)g_ctl;
	for (char *tok = strtok(copy, " "); tok && argc < 63; tok = strtok(NULL, " ")) {
		for (char *p = tok; *p; p++)
			if (*p == '\x01')
				*p = ' ';
		argv[argc++] = tok;
	}
	argv[argc] = NULL;
	int po[2], pe[2];
	memset(r, 0, sizeof(*r));
	r->exit = -1;
	if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) {
		free(copy);
		return;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
	pid_t pid;
	long t0 = now_ms();
	int rc = posix_spawn(&pid, g_ctl, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(po[1]);
	close(pe[1]);
	size_t lo = 0, le = 0;
	FILE *fo = open_memstream(&r->out, &lo), *fe = open_memstream(&r->err, &le);
	struct pollfd p[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
	int open_fds = 2;
	while (rc == 0 && open_fds > 0) {
		long left = 30000 - (now_ms() - t0);
		if (left <= 0 || poll(p, 2, (int)left) <= 0) {
			kill(pid, SIGKILL);
			break;
		}
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			char buf[4096];
			ssize_t n = read(p[i].fd, buf, sizeof(buf));
			if (n <= 0) {
				close(p[i].fd);
				p[i].fd = -1;
				open_fds--;
			} else {
				fwrite(buf, 1, (size_t)n, i ? fe : fo);
			}
		}
	}
	for (int i = 0; i < 2; i++)
		if (p[i].fd >= 0)
			close(p[i].fd);
	fclose(fo);
	fclose(fe);
	int st;
	if (rc == 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st))
		r->exit = WEXITSTATUS(st);
	r->ms = now_ms() - t0;
	free(copy);
}

/* Each '|'-separated part of @want is in @have ("=TEXT": @have is exactly TEXT), as written or with
 * its ' turned into " (JSON written readably). */
static bool has_all(const char *have, const char *want, char *missing, size_t len)
{
	if (!want)
		return true;
	char *raw = strdup(want), *w = jq(want);
	bool ok = true;
	if (w[0] == '=') {
		ok = strcmp(have, w + 1) == 0 || strcmp(have, raw + 1) == 0;
		if (!ok)
			snprintf(missing, len, "exactly %s", w + 1);
	} else {
		char *sr, *sw;
		char *tr = strtok_r(raw, "|", &sr), *tw = strtok_r(w, "|", &sw);
		for (; tr && tw && ok; tr = strtok_r(NULL, "|", &sr), tw = strtok_r(NULL, "|", &sw))
			if (!strstr(have, tr) && !strstr(have, tw)) {
				ok = false;
				snprintf(missing, len, "%s", tr);
			}
	}
	free(raw);
	free(w);
	return ok;
}

struct cli_case {
	const char *args;
	int rc;           /* the fake's answer: 0 or -errno */
	const char *resp; /* with rc 0 ('' quotes) */
	const char *msg;  /* with rc < 0 */
	int exit;
	const char *method; /* the RPC that must reach nkv_ctl_call; NULL: none may */
	const char *req;    /* its exact request JSON ('' quotes); NULL: not checked */
	const char *out;    /* what stdout holds (has_all) */
	const char *err;    /* what stderr holds */
};

static void check_case(const struct cli_case *t)
{
	char *resp = t->resp ? jq(t->resp) : NULL;
	fake_answer(t->rc, resp, t->msg);
	free(resp);
	unsigned before = fake_entered();
	struct run r;
	run_ctl(t->args, &r);
	char miss[512] = "";
	CHECK(r.exit == t->exit, "nkv-ctl %s: exit %d, want %d\nstdout: %s\nstderr: %s", t->args, r.exit, t->exit, r.out,
	      r.err);
	unsigned calls = fake_entered() - before;
	if (t->method) {
		CHECK(calls == 1 && strcmp(fake_last_method(), t->method) == 0, "nkv-ctl %s: %u calls, last %s, want %s",
		      t->args, calls, fake_last_method(), t->method);
		CHECK(fake_last_ctl() == g_cookie, "nkv-ctl %s: the ctl pointer", t->args);
		if (t->req) {
			char *want = jq(t->req);
			CHECK(strcmp(fake_last_req(), want) == 0, "nkv-ctl %s: request\n  %s\nwant\n  %s", t->args,
			      fake_last_req(), want);
			free(want);
		}
	} else {
		CHECK(calls == 0, "nkv-ctl %s: %u calls reached the server, want none", t->args, calls);
	}
	CHECK(has_all(r.out, t->out, miss, sizeof(miss)), "nkv-ctl %s: stdout lacks '%s':\n%s", t->args, miss, r.out);
	CHECK(has_all(r.err, t->err, miss, sizeof(miss)), "nkv-ctl %s: stderr lacks '%s':\n%s", t->args, miss, r.err);
	run_free(&r);
}

#define NS1                                                                                                  \
	"{'nqn':'" NQN "','nsid':1,'rados_namespace':'tenant-a','max_value':'67108864','read_only':false,"   \
	"'nguid':'0123456789abcdef0123456789abcdef','ana_group':1}"
#define NS2                                                                                                  \
	"{'nqn':'" NQN "','nsid':2,'rados_namespace':'tenant-b','max_value':'1572864','read_only':true,"     \
	"'nguid':'fedcba9876543210fedcba9876543210','ana_group':2}"
#define SUB                                                                                                  \
	"{'nqn':'" NQN "','pool':'kv','max_namespaces':16,'allow_any_host':false,'hosts':['" HOST1 "'],"     \
	"'namespaces':[" NS1 "," NS2 "],'serial_number':'5e7a1c0ffee','shm_socket':'/run/kv.sock',"    \
	"'loopback_any_host':false,'vfio_user_socket':'','vfio_user_host':''}"
#define SUB_ANY                                                                                              \
	"{'nqn':'nqn.2026-11.io.rados-nkv:b','pool':'other','max_namespaces':0,'allow_any_host':true,"       \
	"'hosts':[],'namespaces':[],'serial_number':'','shm_socket':'','loopback_any_host':false,"        \
	"'vfio_user_socket':'','vfio_user_host':''}"
#define LST1 "{'gateway':'gw-a','address':'10.0.0.1','port':4420,'tls':false,'active':true}"
#define LST2 "{'gateway':'gw-b','address':'fd00::2','port':4421,'tls':true,'active':false}"
#define CONN1                                                                                                \
	"{'nqn':'" NQN "','host_nqn':'" HOST1 "','cntlid':7,'io_queues':4,'transport':'tcp','authenticated':true}"
#define STATS                                                                                                \
	"{'nqn':'" NQN "','nsid':1,'gateway':'gw-a','stores':'11','retrieves':'22','deletes':'3','exists':'4',"  \
	"'lists':'5','bytes_written':'1048576','bytes_read':'18446744073709551615','errors':'8','in_flight':'9'," \
	"'used_bytes':'4096'}"
#define POLICY_FULL                                                                                          \
	"{'capacity_bytes':'67108864','capacity_keys':'1000','pin_quota_bytes':'1048576','default_ttl_s':60,"  \
	"'max_ttl_s':3600,'bytes_per_token':'131072','eviction':'fifo','low_watermark_pct':80,'overshoot_pct':5," \
	"'touch_interval_ms':500,'reap_interval_s':2,'reap_rate':100,'lease_ms':3000}"
/* a policy message with the fields @f1 and @f2 (given as 'name':value) and zeros elsewhere */
#define POLICY_ZERO                                                                                          \
	"{'capacity_bytes':'0','capacity_keys':'0','pin_quota_bytes':'0','default_ttl_s':0,'max_ttl_s':0,"     \
	"'bytes_per_token':'0','eviction':'','low_watermark_pct':0,'overshoot_pct':0,'touch_interval_ms':0,"    \
	"'reap_interval_s':0,'reap_rate':0,'lease_ms':0}"
#define NS_CACHE                                                                                             \
	"{'nqn':'" NQN "','nsid':3,'rados_namespace':'cache','max_value':'67108864','read_only':false,"      \
	"'nguid':'00112233445566778899aabbccddeeff','cache':" POLICY_FULL ",'ana_group':1}"
#define NS_CACHE0                                                                                            \
	"{'nqn':'" NQN "','nsid':4,'rados_namespace':'','max_value':'67108864','read_only':false,"           \
	"'nguid':'','cache':{'eviction':'lru'},'ana_group':1}"
#define USAGE3                                                                                               \
	"{'nqn':'" NQN "','nsid':3,'gateway':'gw-a','policy':" POLICY_FULL ",'used_bytes':'50331648',"         \
	"'keys':'700','pinned_bytes':'1048576','pinned_keys':'2','evictions':'12','evicted_bytes':'12582912',"  \
	"'expirations':'5','expired_bytes':'4096','byte_hours':1048576,'token_hours':8,"                       \
	"'capacity_bytes':'67108864','capacity_keys':'1000','evicting':true,'gateways':2}"
#define USAGE4                                                                                               \
	"{'nqn':'" NQN "','nsid':4,'gateway':'gw-a','policy':" POLICY_ZERO ",'used_bytes':'0','keys':'0',"     \
	"'pinned_bytes':'0','pinned_keys':'0','evictions':'0','evicted_bytes':'0','expirations':'0',"           \
	"'expired_bytes':'0','byte_hours':0,'token_hours':0,'capacity_bytes':'0','capacity_keys':'0',"         \
	"'evicting':false,'gateways':1}"
#define GWINFO                                                                                               \
	"{'name':'gw-a','version':'0.1.0','group':'g1','epoch':'42','uptime_s':'93784','backend':'rados',"   \
	"'listeners':[" LST1 "," LST2 "],'connections':[" CONN1 "],'state_store':'rados:kv/rados-nkv.state',"      \
	"'cntlid_min':2041,'cntlid_max':4080}"

#define REPORT1                                                                                              \
	"{'state_store':'rados:kv/rados_nkv.group.g1','epoch':'5','applied_epoch':'4','malformed':1,"            \
	"'malformed_entries':[{'key':'s/nqn.bad\\\\x00','reason':'the value is not a JSON object'}]}"
#define REPORT0                                                                                              \
	"{'state_store':'rados:kv/rados_nkv.group.g1','epoch':'6','applied_epoch':'6','malformed':0,"            \
	"'malformed_entries':[]}"

static const struct cli_case g_cases[] = {
	/* subsystems */
	{"subsystem add " NQN " --pool kv", 0, SUB, NULL, 0, "CreateSubsystem",
	 "{'nqn':'" NQN "','pool':'kv','max_namespaces':0,'allow_any_host':false,'shm_socket':'',"
	 "'vfio_user_socket':'','vfio_user_host':''}",
	 "subsystem       " NQN "|pool            kv|serial number   5e7a1c0ffee|max namespaces  16|hosts           " HOST1
	 "|shm socket      /run/kv.sock|namespaces      2|  NSID  RADOS NAMESPACE  MAX VALUE  MODE  NGUID|"
	 "  1     tenant-a         64 MiB     rw    0123456789abcdef0123456789abcdef|"
	 "  2     tenant-b         1.5 MiB    ro    fedcba9876543210fedcba9876543210",
	 NULL},
	{"subsystem add " NQN " --pool=kv --max-namespaces 16 --allow-any-host --shm /run/kv.sock", 0, SUB_ANY, NULL, 0,
	 "CreateSubsystem",
	 "{'nqn':'" NQN "','pool':'kv','max_namespaces':16,'allow_any_host':true,'shm_socket':'/run/kv.sock',"
	 "'vfio_user_socket':'','vfio_user_host':''}",
	 "hosts           any host may connect|max namespaces  the target's limit (1024)|shm socket      -|namespaces      0",
	 NULL},
	{"subsystem add " NQN " --pool kv --vfio-user /run/kv/cntrl --vfio-user-host " HOST1, 0, SUB, NULL, 0,
	 "CreateSubsystem",
	 "{'nqn':'" NQN "','pool':'kv','max_namespaces':0,'allow_any_host':false,'shm_socket':'',"
	 "'vfio_user_socket':'/run/kv/cntrl','vfio_user_host':'" HOST1 "'}",
	 "subsystem       " NQN, NULL},
	{"subsystem add " NQN " --pool kv --vfio-user-host " HOST1, 0, "{}", NULL, 64, NULL, NULL, NULL,
	 "--vfio-user-host needs --vfio-user PATH"},
	{"subsystem add " NQN, 0, "{}", NULL, 64, NULL, NULL, NULL, "--pool POOL is required"},
	{"subsystem add " NQN " --pool kv --max-namespaces -1", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad --max-namespaces"},
	{"subsystem add " NQN " --pool kv --max-namespaces 4294967296", 0, "{}", NULL, 64, NULL, NULL, NULL,
	 "bad --max-namespaces"},
	{"subsystem del " NQN, 0, "{}", NULL, 0, "DeleteSubsystem", "{'nqn':'" NQN "'}", "=deleted subsystem " NQN "\n",
	 NULL},
	{"subsystem list", 0, "{'subsystems':[" SUB "," SUB_ANY "]}", NULL, 0, "ListSubsystems", "{}",
	 "NQN                           POOL   NAMESPACES  HOSTS  SHM SOCKET|" NQN "  kv     2           1      /run/kv.sock|"
	 "nqn.2026-11.io.rados-nkv:b    other  0           any    -",
	 NULL},
	{"subsystem list", 0, "{}", NULL, 0, "ListSubsystems", "{}", "=no subsystems\n", NULL},
	{"subsystem get " NQN, 0, SUB, NULL, 0, "GetSubsystem", "{'nqn':'" NQN "'}", "pool            kv", NULL},
	{"-o json subsystem get " NQN, 0, SUB, NULL, 0, "GetSubsystem", "{'nqn':'" NQN "'}", "=" SUB "\n", NULL},
	{"subsystem get " NQN " extra", 0, "{}", NULL, 64, NULL, NULL, NULL, "wrong number of arguments"},
	/* namespaces */
	{"ns add " NQN, 0, NS1, NULL, 0, "AddNamespace",
	 "{'nqn':'" NQN "','nsid':0,'rados_namespace':'','max_value':'0','read_only':false,'ana_group':0}",
	 "namespace       1 of " NQN "|rados namespace tenant-a|max value       64 MiB (67108864 bytes)|"
	 "mode            read-write|nguid           0123456789abcdef0123456789abcdef|ana group       1",
	 NULL},
	{"ns add " NQN " --nsid 2 --rados-ns tenant-b --max-value 1536K --read-only", 0, NS2, NULL, 0, "AddNamespace",
	 "{'nqn':'" NQN "','nsid':2,'rados_namespace':'tenant-b','max_value':'1572864','read_only':true,'ana_group':0}",
	 "max value       1.5 MiB (1572864 bytes)|mode            read-only", NULL},
	{"ns add " NQN " --max-value 16EiB", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad --max-value"},
	{"ns add " NQN " --max-value 15E", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad --max-value"},
	{"ns add " NQN " --max-value 64X", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad --max-value '64X'"},
	{"ns add " NQN " --max-value 16T", 0, NS1, NULL, 0, "AddNamespace",
	 "{'nqn':'" NQN "','nsid':0,'rados_namespace':'','max_value':'17592186044416','read_only':false,'ana_group':0}",
	 NULL, NULL},
	{"ns add " NQN " --ana-group 2", 0, NS2, NULL, 0, "AddNamespace",
	 "{'nqn':'" NQN "','nsid':0,'rados_namespace':'','max_value':'0','read_only':false,'ana_group':2}",
	 "ana group       2", NULL},
	{"ns add " NQN " --ana-group 0", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad --ana-group '0' (1 to 32)"},
	{"ns add " NQN " --ana-group 33", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad --ana-group '33' (1 to 32)"},
	{"ns add " NQN " --nsid 4294967295", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad --nsid"},
	{"ns add " NQN " --pool kv", 0, "{}", NULL, 64, NULL, NULL, NULL, "ns add: --pool does not apply"},
	{"ns del " NQN " 2", 0, "{}", NULL, 0, "RemoveNamespace", "{'nqn':'" NQN "','nsid':2}",
	 "=removed namespace 2 from " NQN "\n", NULL},
	{"ns del " NQN " 0", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad NSID '0'"},
	{"ns del " NQN " 0x2", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad NSID"},
	{"ns del " NQN " 4294967295", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad NSID"},
	{"ns list " NQN, 0, "{'namespaces':[" NS1 "," NS2 "]}", NULL, 0, "ListNamespaces", "{'nqn':'" NQN "'}",
	 "NSID  RADOS NAMESPACE  MAX VALUE  MODE  NGUID|2     tenant-b         1.5 MiB    ro", NULL},
	{"ns list " NQN, 0, "{}", NULL, 0, "ListNamespaces", NULL, "=no namespaces in " NQN "\n", NULL},
	{"ns set-ro " NQN " 2 on", 0, NS2, NULL, 0, "SetNamespaceReadOnly", "{'nqn':'" NQN "','nsid':2,'read_only':true}",
	 "mode            read-only", NULL},
	{"ns set-ro " NQN " 1 off", 0, NS1, NULL, 0, "SetNamespaceReadOnly",
	 "{'nqn':'" NQN "','nsid':1,'read_only':false}", "mode            read-write", NULL},
	{"ns set-ro " NQN " 1 maybe", 0, "{}", NULL, 64, NULL, NULL, NULL, "'maybe' is not on or off"},
	{"ns set-max-value " NQN " 1 1G", 0, NS1, NULL, 0, "SetNamespaceMaxValue",
	 "{'nqn':'" NQN "','nsid':1,'max_value':'1073741824'}", NULL, NULL},
	{"ns set-max-value " NQN " 1 18446744073709551615", 0, NS1, NULL, 0, "SetNamespaceMaxValue",
	 "{'nqn':'" NQN "','nsid':1,'max_value':'18446744073709551615'}", NULL, NULL},
	{"ns set-max-value " NQN " 1 18446744073709551616", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad SIZE"},
	{"ns set-max-value " NQN " 1 -5", 0, "{}", NULL, 64, NULL, NULL, NULL, NULL},
	{"ns stats " NQN " 1", 0, STATS, NULL, 0, "GetNamespaceStats", "{'nqn':'" NQN "','nsid':1}",
	 "gateway         gw-a|stores          11|retrieves       22|in flight       9|"
	 "bytes written   1048576 (1 MiB)|bytes read      18446744073709551615 (16.0 EiB)|used            4096 (4 KiB)",
	 NULL},
	{"-o json ns stats " NQN " 1", 0, STATS, NULL, 0, "GetNamespaceStats", NULL, "=" STATS "\n", NULL},
	{"ns", 0, "{}", NULL, 64, NULL, NULL, NULL,
	 "ns: which one? add, del, list, set-ro, set-max-value, stats, cache-policy"},
	/* cache namespaces: policies, live changes, usage */
	{"ns add " NQN " --nsid 3 --rados-ns cache --cache --capacity 64M --capacity-keys 1000 --pin-quota 1M "
	 "--default-ttl 60 --max-ttl 3600 --bytes-per-token 128K --eviction fifo --low-watermark 80 --overshoot 5 "
	 "--touch-interval 500 --reap-interval 2 --reap-rate 100 --lease 3000", 0, NS_CACHE, NULL, 0, "AddNamespace",
	 "{'nqn':'" NQN "','nsid':3,'rados_namespace':'cache','max_value':'0','read_only':false,'cache':" POLICY_FULL
	 ",'ana_group':0}",
	 "cache           yes|capacity        64 MiB, 1000 keys|pin quota       1 MiB|default ttl     60 s|"
	 "max ttl         3600 s|bytes per token 131072|eviction        fifo|low watermark   80%|overshoot       5%|"
	 "touch interval  500 ms|reap interval   2 s|reap rate       100/s|eviction lease  3000 ms", NULL},
	{"namespace add " NQN " --cache", 0, NS_CACHE0, NULL, 0, "AddNamespace",
	 "{'nqn':'" NQN "','nsid':0,'rados_namespace':'','max_value':'0','read_only':false,'cache':" POLICY_ZERO
	 ",'ana_group':0}",
	 "cache           yes|capacity        no byte limit, no key limit|pin quota       no quota|"
	 "default ttl     never expire|max ttl         no limit|eviction        lru|low watermark   90% (default)|"
	 "eviction lease  10000 ms (default)", NULL},
	{"ns add " NQN, 0, NS1, NULL, 0, "AddNamespace", NULL, "cache           no", NULL},
	{"ns add " NQN " --capacity 1M", 0, "{}", NULL, 64, NULL, NULL, NULL, "options (--capacity, ...) need --cache"},
	{"ns add " NQN " --cache --capacity 1Q", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad --capacity '1Q'"},
	{"ns add " NQN " --cache --default-ttl 4294967295", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad --default-ttl"},
	{"ns cache-policy " NQN " 3 --capacity 128M --eviction off", 0, NS_CACHE, NULL, 0, "SetCachePolicy",
	 "{'nqn':'" NQN "','nsid':3,'policy':{'capacity_bytes':'134217728','capacity_keys':'0','pin_quota_bytes':'0',"
	 "'default_ttl_s':0,'max_ttl_s':0,'bytes_per_token':'0','eviction':'off','low_watermark_pct':0,"
	 "'overshoot_pct':0,'touch_interval_ms':0,'reap_interval_s':0,'reap_rate':0,'lease_ms':0},"
	 "'fields':['capacity_bytes','eviction']}",
	 "namespace       3 of " NQN "|cache           yes|capacity        64 MiB", NULL},
	{"namespace cache-policy " NQN " 3 --replace --default-ttl 30", 0, NS_CACHE, NULL, 0, "SetCachePolicy",
	 "{'nqn':'" NQN "','nsid':3,'policy':{'capacity_bytes':'0','capacity_keys':'0','pin_quota_bytes':'0',"
	 "'default_ttl_s':30,'max_ttl_s':0,'bytes_per_token':'0','eviction':'','low_watermark_pct':0,"
	 "'overshoot_pct':0,'touch_interval_ms':0,'reap_interval_s':0,'reap_rate':0,'lease_ms':0},'fields':[]}", NULL, NULL},
	{"ns cache-policy " NQN " 3 --replace", 0, NS_CACHE0, NULL, 0, "SetCachePolicy",
	 "{'nqn':'" NQN "','nsid':3,'policy':" POLICY_ZERO ",'fields':[]}", NULL, NULL},
	{"ns cache-policy " NQN " 3", 0, "{}", NULL, 64, NULL, NULL, NULL, "nothing to change"},
	{"ns cache-policy " NQN, 0, "{}", NULL, 64, NULL, NULL, NULL, "wrong number of arguments"},
	{"ns cache-policy " NQN " 3 --low-watermark 100", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad --low-watermark '100' (0 to 99)"},
	{"ns cache-policy " NQN " 3 --overshoot 101", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad --overshoot"},
	{"ns cache-policy " NQN " 3 --eviction lfu", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad --eviction 'lfu' (lru, fifo or off)"},
	{"ns cache-policy " NQN " 3 --lease -1", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad --lease"},
	{"ns cache-policy " NQN " 3 --cache", 0, "{}", NULL, 64, NULL, NULL, NULL, "ns cache-policy: --cache does not apply"},
	{"ns set-ro " NQN " 3 on --capacity 1M", 0, "{}", NULL, 64, NULL, NULL, NULL, "ns set-ro: --capacity does not apply"},
	{"ns cache-policy " NQN " 2 --capacity 1M", -EPERM, NULL, "namespace 2 has no cache", 5, "SetCachePolicy", NULL, NULL,
	 "namespace 2 has no cache (FAILED_PRECONDITION)"},
	{"ns cache-policy " NQN " 9 --capacity 1M", -ENOENT, NULL, "no namespace 9", 2, "SetCachePolicy", NULL, NULL,
	 "(NOT_FOUND)"},
	{"ns cache-policy " NQN " 3 --default-ttl 100 --max-ttl 10", -EINVAL, NULL, "default_ttl_s 100 is above max_ttl_s 10", 4,
	 "SetCachePolicy", NULL, NULL, "(INVALID_ARGUMENT)"},
	{"ns list " NQN, 0, "{'namespaces':[" NS1 "," NS_CACHE "]}", NULL, 0, "ListNamespaces", NULL,
	 "NSID  RADOS NAMESPACE  MAX VALUE  MODE  NGUID                             CACHE|"
	 "1     tenant-a         64 MiB     rw    0123456789abcdef0123456789abcdef  -|"
	 "3     cache            64 MiB     rw    00112233445566778899aabbccddeeff  64 MiB", NULL},
	{"usage " NQN " 3", 0, "{'namespaces':[" USAGE3 "]}", NULL, 0, "GetUsage", "{'nqn':'" NQN "','nsid':3}",
	 "namespace       3 of " NQN "|gateway         gw-a (holds the eviction lease)|gateways        2 reporting usage|"
	 "used            50331648 (48 MiB) of 64 MiB|keys            700|key limit       1000|"
	 "pinned          1048576 (1 MiB) in 2 keys|evictions       12 (12 MiB)|expirations     5 (4 KiB)|"
	 "byte-hours      1048576.0|token-hours     8.000|policy:|eviction        fifo", NULL},
	{"-o json usage " NQN " 3", 0, "{'namespaces':[" USAGE3 "]}", NULL, 0, "GetUsage", NULL,
	 "={'namespaces':[" USAGE3 "]}\n", NULL},
	{"usage " NQN, 0, "{'namespaces':[" USAGE3 "," USAGE4 "]}", NULL, 0, "GetUsage", "{'nqn':'" NQN "','nsid':0}",
	 "NSID  USED     CAPACITY  KEYS  PINNED   EVICTIONS  EXPIRATIONS  BYTE-HOURS  TOKEN-HOURS  LEASE|"
	 "3     48 MiB   64 MiB    700   1 MiB    12         5            1048576.0   8.000        yes|"
	 "4     0 bytes  no limit  0     0 bytes  0          0            0.0         0.000        no", NULL},
	{"usage " NQN, 0, "{}", NULL, 0, "GetUsage", NULL,
	 "=no cache namespaces of " NQN " served by the answering gateway\n", NULL},
	{"usage " NQN " 2", -EPERM, NULL, "namespace 2 has no cache", 5, "GetUsage", NULL, NULL, "(FAILED_PRECONDITION)"},
	{"usage", 0, "{}", NULL, 64, NULL, NULL, NULL, "usage: wrong number of arguments"},
	{"usage " NQN " 0", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad NSID '0'"},
	{"ns frob", 0, "{}", NULL, 64, NULL, NULL, NULL, "unknown subcommand 'frob'"},
	/* hosts */
	{"host allow " NQN " " HOST1, 0, "{'nqn':'" NQN "','host_nqn':'" HOST1 "'}", NULL, 0, "AllowHost",
	 "{'nqn':'" NQN "','host_nqn':'" HOST1 "','dhchap_key':'','dhchap_ctrl_key':''}",
	 "=allowed " HOST1 " on " NQN " (authentication: none)\n", NULL},
	{"host allow " NQN " " HOST1 " --dhchap-key DHHC-1:00:c2VjcmV0:", 0,
	 "{'nqn':'" NQN "','host_nqn':'" HOST1 "','dhchap':true}", NULL, 0, "AllowHost",
	 "{'nqn':'" NQN "','host_nqn':'" HOST1 "','dhchap_key':'DHHC-1:00:c2VjcmV0:','dhchap_ctrl_key':''}",
	 "(authentication: DH-HMAC-CHAP)", NULL},
	{"host allow " NQN " " HOST1 " --dhchap-ctrl-key DHHC-1:00:c2VjcmV0:", 0, "{}", NULL, 64, NULL, NULL, NULL,
	 "--dhchap-ctrl-key needs --dhchap-key"},
	{"host allow " NQN " " HOST1 " --dhchap-key DHHC-1:00:bm9wZQ==:", -EINVAL, NULL, "malformed DH-HMAC-CHAP key", 4,
	 "AllowHost", NULL, NULL, "host allow: malformed DH-HMAC-CHAP key (INVALID_ARGUMENT)"},
	{"host allow " NQN " " HOST1 " --dhchap-key @/nonexistent/key", 0, "{}", NULL, 64, NULL, NULL, NULL,
	 "--dhchap-key @/nonexistent/key: No such file or directory"},
	{"host disallow " NQN " " HOST1, 0, "{'disconnected':2}", NULL, 0, "DisallowHost",
	 "{'nqn':'" NQN "','host_nqn':'" HOST1 "'}",
	 "=disallowed " HOST1 " on " NQN "; 2 controllers disconnected by the answering gateway\n", NULL},
	{"host disallow " NQN, 0, "{}", NULL, 64, NULL, NULL, NULL, "wrong number of arguments (1)"},
	/* host '*': allow_any_host on and off */
	{"host allow " NQN " *", 0, "{'nqn':'" NQN "','host_nqn':'*'}", NULL, 0, "AllowHost",
	 "{'nqn':'" NQN "','host_nqn':'*','dhchap_key':'','dhchap_ctrl_key':''}",
	 "=" NQN " admits any host now, through every listener\n", NULL},
	{"host disallow " NQN " *", 0, "{'disconnected':1}", NULL, 0, "DisallowHost", "{'nqn':'" NQN "','host_nqn':'*'}",
	 "=" NQN " admits only the hosts on its allowlist now; 1 controller disconnected by the answering gateway\n", NULL},
	{"host allow " NQN " " HOST1, -EPERM, NULL, NQN " admits any host (allow_any_host)", 5, "AllowHost", NULL, NULL,
	 "admits any host (allow_any_host) (FAILED_PRECONDITION)"},
	{"subsystem get " NQN, 0,
	 "{'nqn':'" NQN "','pool':'kv','max_namespaces':0,'allow_any_host':false,'loopback_any_host':true,'hosts':[],"
	 "'namespaces':[],'serial_number':'','shm_socket':''}", NULL, 0, "GetSubsystem", "{'nqn':'" NQN "'}",
	 "hosts           any host, through loopback and TLS listeners only", NULL},
	{"host list " NQN, 0, "{'hosts':[{'nqn':'" NQN "','host_nqn':'" HOST1 "','dhchap':true,'dhchap_bidirectional':true}]}",
	 NULL, 0, "ListHosts", "{'nqn':'" NQN "'}", "HOST NQN|" HOST1 "  DH-HMAC-CHAP, bidirectional", NULL},
	{"host list " NQN, 0, "{}", NULL, 0, "ListHosts", NULL, "=no hosts on the allowlist of " NQN "\n", NULL},
	/* connections */
	{"connections", 0, "{'connections':[" CONN1 "]}", NULL, 0, "ListConnections", "{'nqn':''}",
	 "SUBSYSTEM|CNTLID  IO QUEUES  TRANSPORT  AUTHENTICATED|" HOST1 "  7       4          tcp        yes", NULL},
	{"connections " NQN, 0, "{}", NULL, 0, "ListConnections", "{'nqn':'" NQN "'}", "=no connections to " NQN "\n",
	 NULL},
	{"connections a b", 0, "{}", NULL, 64, NULL, NULL, NULL, "wrong number of arguments (2)"},
	/* listeners */
	{"listener add 10.0.0.1:4420", 0, LST1, NULL, 0, "AddListener",
	 "{'gateway':'','address':'10.0.0.1','port':4420,'tls':false}", "=listener 10.0.0.1:4420 on gateway gw-a, active\n",
	 NULL},
	{"listener add [fd00::2]:4421 --gateway gw-b --tls", 0, LST2, NULL, 0, "AddListener",
	 "{'gateway':'gw-b','address':'fd00::2','port':4421,'tls':true}",
	 "=listener [fd00::2]:4421 on gateway gw-b (TLS), not active yet\n", NULL},
	{"listener add 10.0.0.1", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad listener '10.0.0.1'"},
	{"listener add fd00::2:4420", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad listener"},
	{"listener add gw.example:4420", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad listener"},
	{"listener add 10.0.0.1:0", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad listener"},
	{"listener add 10.0.0.1:65536", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad listener"},
	{"listener del 10.0.0.1:4420 --gateway gw-a", 0, "{}", NULL, 0, "RemoveListener",
	 "{'gateway':'gw-a','address':'10.0.0.1','port':4420}", "=removed listener 10.0.0.1:4420 from gateway gw-a\n", NULL},
	{"listener del 10.0.0.1:4420 --tls", 0, "{}", NULL, 64, NULL, NULL, NULL, "listener del: --tls does not apply"},
	{"listener list", 0, "{'listeners':[" LST1 "," LST2 "]}", NULL, 0, "ListListeners", "{'gateway':''}",
	 "GATEWAY  LISTENER        TLS  ACTIVE|gw-a     10.0.0.1:4420   no   yes|gw-b     [fd00::2]:4421  yes  no",
	 NULL},
	{"listener list --gateway gw-b", 0, "{}", NULL, 0, "ListListeners", "{'gateway':'gw-b'}", "=no listeners\n", NULL},
	/* the gateway */
	{"gateway info", 0, GWINFO, NULL, 0, "GetGatewayInfo", "{}",
	 "gateway         gw-a|version         0.1.0|group           g1|state epoch     42|"
	 "state store     rados:kv/rados-nkv.state|backend         rados|uptime          1d 02:03:04 (93784 s)|"
	 "listeners       2|  gw-b     [fd00::2]:4421  yes  no|connections     1|  " NQN "  " HOST1,
	 NULL},
	{"-o json gateway info", 0, GWINFO, NULL, 0, "GetGatewayInfo", "{}", "=" GWINFO "\n", NULL},
	{"gateway info", 0, GWINFO, NULL, 0, "GetGatewayInfo", "{}", "controller IDs  2041-4080", NULL},
	/* ANA states */
	{"ana set 2 non-optimized --gateway gw-a", 0, "{'gateway':'gw-a','ana_group':2,'state':'non-optimized'}", NULL,
	 0, "SetAnaState", "{'gateway':'gw-a','ana_group':2,'state':'non-optimized'}",
	 "=gateway gw-a: ANA group 2 non-optimized\n", NULL},
	{"ana set 1 inaccessible", 0, "{'gateway':'gw-b','ana_group':1,'state':'inaccessible'}", NULL, 0, "SetAnaState",
	 "{'gateway':'','ana_group':1,'state':'inaccessible'}", "gateway gw-b: ANA group 1 inaccessible", NULL},
	{"ana set 0 optimized", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad ANA group '0' (1 to 32)"},
	{"ana set 1 drained", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad state 'drained'"},
	{"ana get", 0, "{'states':[{'gateway':'gw-a','ana_group':1,'state':'optimized'}]}", NULL, 0, "GetAnaState",
	 "{'gateway':''}", "GATEWAY                  ANA GROUP STATE|gw-a                     1         optimized", NULL},
	{"--output=json gateway info", 0, "{'name':'gw-a'}", NULL, 0, "GetGatewayInfo", NULL,
	 "={'name':'gw-a','version':'','group':'','epoch':'0','uptime_s':'0','backend':'','listeners':[],"
	 "'connections':[],'state_store':'','cntlid_min':0,'cntlid_max':0}\n",
	 NULL},
	/* the group's state */
	{"group check", 0, REPORT1, NULL, 0, "CheckState", "{}",
	 "state store     rados:kv/rados_nkv.group.g1|stored epoch    5|applied epoch   4|malformed       1 (changes are "
	 "refused until they are removed: group repair)|  s/nqn.bad\\x00|    the value is not a JSON object", NULL},
	{"-o json group check", 0, REPORT1, NULL, 0, "CheckState", "{}", "=" REPORT1 "\n", NULL},
	{"group repair s/nqn.bad\\x00 l/x", 0, REPORT0, NULL, 0, "RepairState", "{'keys':['s/nqn.bad\\\\x00','l/x'],'all':false}",
	 "stored epoch    6|malformed       0", NULL},
	{"group repair --all", 0, REPORT0, NULL, 0, "RepairState", "{'keys':[],'all':true}", "malformed       0", NULL},
	{"group repair", 0, "{}", NULL, 64, NULL, NULL, NULL, "name the malformed entries"},
	{"group repair s/x --all", 0, "{}", NULL, 64, NULL, NULL, NULL, "not both"},
	{"group check --all", 0, "{}", NULL, 64, NULL, NULL, NULL, "--all"},
	/* every error status and its exit code */
	{"subsystem get " NQN, -ENOENT, NULL, "no subsystem " NQN, 2, "GetSubsystem", NULL, "=",
	 "nkv-ctl: subsystem get: no subsystem " NQN " (NOT_FOUND)"},
	{"-o json subsystem get " NQN, -ENOENT, NULL, "no subsystem " NQN, 2, "GetSubsystem", NULL,
	 "={'command':'subsystem get','error':'no subsystem " NQN "','status':'NOT_FOUND','errno':2}\n", NULL},
	{"subsystem add " NQN " --pool kv", -EEXIST, NULL, "subsystem " NQN " exists", 3, "CreateSubsystem", NULL, "=",
	 "(ALREADY_EXISTS)"},
	{"subsystem add bad-nqn --pool kv", -EINVAL, NULL, "malformed NQN 'bad-nqn'", 4, "CreateSubsystem", NULL, "=",
	 "malformed NQN 'bad-nqn' (INVALID_ARGUMENT)"},
	{"ns add " NQN, -EPERM, NULL, "max_namespaces reached", 5, "AddNamespace", NULL, "=", "(FAILED_PRECONDITION)"},
	{"-o json ns add " NQN, -EAGAIN, NULL, "retry", 6, "AddNamespace", NULL,
	 "={'command':'ns add','error':'retry','status':'ABORTED','errno':11}\n", NULL},
	{"subsystem list", -EIO, NULL, "cannot read the group state", 69, "ListSubsystems", NULL, "=",
	 "nkv-ctl: subsystem list: cannot read the group state (UNAVAILABLE)"},
	{"-o json subsystem list", -ETIMEDOUT, NULL, "the cluster timed out", 69, "ListSubsystems", NULL,
	 "={'command':'subsystem list','error':'the cluster timed out','status':'UNAVAILABLE','errno':110}\n", NULL},
	{"gateway info", -ENOSYS, NULL, "not implemented", 70, "GetGatewayInfo", NULL, "=", "(UNIMPLEMENTED)"},
	{"gateway info", -ENOMEM, NULL, "out of memory", 70, "GetGatewayInfo", NULL, "=", "out of memory (INTERNAL)"},
	{"gateway info", 0, "{'name':'gw','bogus':1}", NULL, 70, "GetGatewayInfo", NULL, "=", "bogus|(INTERNAL)"},
	/* usage */
	{"", 0, "{}", NULL, 64, NULL, NULL, NULL, "no command given|commands:"},
	{"frobnicate", 0, "{}", NULL, 64, NULL, NULL, NULL, "unknown command 'frobnicate'"},
	{"--bogus subsystem list", 0, "{}", NULL, 64, NULL, NULL, NULL, "unknown option '--bogus'"},
	{"subsystem list -x", 0, "{}", NULL, 64, NULL, NULL, NULL, "unknown option '-x'"},
	{"subsystem list --server", 0, "{}", NULL, 64, NULL, NULL, NULL, "option '--server' needs an argument"},
	{"-o yaml subsystem list", 0, "{}", NULL, 64, NULL, NULL, NULL, "unknown output format 'yaml'"},
	{"--timeout 0 subsystem list", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad --timeout"},
	{"--server 127.0.0.1 subsystem list", 0, "{}", NULL, 64, NULL, NULL, NULL, "bad --server"},
	{"--server ::1:5500 subsystem list", 0, "{}", NULL, 64, NULL, NULL, NULL, "in brackets"},
	{"--tls-cert /x subsystem list", 0, "{}", NULL, 64, NULL, NULL, NULL, "--tls-cert and --tls-key go together"},
	{"--tls-server-name x subsystem list", 0, "{}", NULL, 64, NULL, NULL, NULL, "--tls-server-name needs --tls-ca"},
	{"--tls-ca /nonexistent/ca.pem subsystem list", 0, "{}", NULL, 64, NULL, NULL, NULL,
	 "cannot read --tls-ca /nonexistent/ca.pem"},
	{"-o json frobnicate", 0, "{}", NULL, 64, NULL, NULL,
	 "{'command':null,'error':|unknown command|'status':'usage','errno':22}", NULL},
	{"-o json subsystem add " NQN, 0, "{}", NULL, 64, NULL, NULL, "'command':'subsystem add'|'status':'usage'", NULL},
	{"--bogus -o json x", 0, "{}", NULL, 64, NULL, NULL, "'status':'usage'", NULL},
	/* help, version */
	{"--help", 0, "{}", NULL, 0, NULL, NULL, "usage: nkv-ctl|subsystem add NQN --pool POOL|exit status:", NULL},
	{"help", 0, "{}", NULL, 0, NULL, NULL, "usage: nkv-ctl", NULL},
	{"ns add --help", 0, "{}", NULL, 0, NULL, NULL, "usage: nkv-ctl ns add NQN [--nsid N]", NULL},
	{"host -h", 0, "{}", NULL, 0, NULL, NULL, "nkv-ctl host allow|nkv-ctl host disallow|nkv-ctl host list", NULL},
	{"-o json --help", 0, "{}", NULL, 0, NULL, NULL, "{'command':'help','usage':'usage: nkv-ctl", NULL},
	{"--version", 0, "{}", NULL, 0, NULL, NULL, "nkv-ctl ", NULL},
};

static void test_cases(void)
{
	for (size_t i = 0; i < sizeof(g_cases) / sizeof(g_cases[0]); i++)
		check_case(&g_cases[i]);
}

static const char *path_in(const char *name)
{
	static char buf[8][160];
	static unsigned n;
	char *b = buf[n++ % 8];
	snprintf(b, 160, "%s/%s", g_dir, name);
	return b;
}

/* The secret never shows: not in a refusal from the server, not in a bad-usage message. */
static void test_secrets(void)
{
	static const char key[] = "DHHC-1:00:c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTIzNA==:";
	const char *kf = path_in("host.key");
	FILE *f = fopen(kf, "w");
	fprintf(f, "  %s\n\n", key);
	fclose(f);
	char args[512];
	snprintf(args, sizeof(args), "host allow " NQN " " HOST1 " --dhchap-key @%s --dhchap-ctrl-key %s", kf, key);
	fake_answer(-EINVAL, NULL, "the controller key must differ from the host key");
	struct run r;
	run_ctl(args, &r);
	char *want = jq("{'nqn':'" NQN "','host_nqn':'" HOST1 "','dhchap_key':'DHHC-1:00:c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"
			"MTIzNA==:','dhchap_ctrl_key':'DHHC-1:00:c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTIzNA==:'}");
	CHECK(r.exit == 4 && strcmp(fake_last_req(), want) == 0, "@FILE key (trimmed): exit %d, request %s", r.exit,
	      fake_last_req());
	free(want);
	CHECK(!strstr(r.err, "c2VjcmV0") && !strstr(r.out, "c2VjcmV0"), "the secret was echoed: %s %s", r.out, r.err);
	run_free(&r);
	f = fopen(kf, "w");
	fclose(f);
	snprintf(args, sizeof(args), "host allow " NQN " " HOST1 " --dhchap-key @%s", kf);
	run_ctl(args, &r);
	CHECK(r.exit == 64 && strstr(r.err, "empty key"), "an empty key file: %d %s", r.exit, r.err);
	run_free(&r);
}

/* --server, $NKV_CTL_SERVER, unix:, an absent server, --timeout */
static void test_servers(const char *addr)
{
	char args[256], bad[64];
	struct run r;
	/* a port nothing listens on */
	struct nkv_ctl_server_conf sc = {.addr = "127.0.0.1:0"};
	struct nkv_ctl_server *s = NULL;
	CHECK(nkv_ctl_server_start(g_cookie, &sc, &s) == 0, "a server to stop");
	snprintf(bad, sizeof(bad), "127.0.0.1:%d", nkv_ctl_server_port(s));
	nkv_ctl_server_stop(s, 0);

	setenv("NKV_CTL_SERVER", bad, 1);
	fake_answer(0, "{}", NULL);
	unsigned before = fake_entered();
	run_ctl("subsystem list", &r);
	CHECK(r.exit == 69 && strstr(r.err, "cannot reach the control server at") && strstr(r.err, bad) &&
		      strstr(r.err, "Connection refused") && strstr(r.err, "--control"),
	      "no server at $NKV_CTL_SERVER: %d %s", r.exit, r.err);
	run_free(&r);
	run_ctl("-o json subsystem list", &r);
	CHECK(r.exit == 69 && strstr(r.out, "\"status\":\"UNAVAILABLE\",\"errno\":111}"), "no server, -o json: %d %s",
	      r.exit, r.out);
	run_free(&r);
	snprintf(args, sizeof(args), "--server %s subsystem list", addr);
	run_ctl(args, &r);
	CHECK(r.exit == 0 && fake_entered() == before + 1, "--server wins over $NKV_CTL_SERVER: %d %s", r.exit, r.err);
	run_free(&r);
	setenv("NKV_CTL_SERVER", addr, 1);
	run_ctl("subsystem list", &r);
	CHECK(r.exit == 0 && fake_entered() == before + 2, "$NKV_CTL_SERVER: %d %s", r.exit, r.err);
	run_free(&r);
	setenv("NKV_CTL_SERVER", "nonsense", 1);
	run_ctl("subsystem list", &r);
	CHECK(r.exit == 64 && strstr(r.err, "bad $NKV_CTL_SERVER"), "a bad $NKV_CTL_SERVER: %d %s", r.exit, r.err);
	run_free(&r);
	setenv("NKV_CTL_SERVER", addr, 1);

	/* the deadline */
	fake_delay_next(2000);
	unsigned ret = fake_returned();
	run_ctl("--timeout 300 gateway info", &r);
	CHECK(r.exit == 69 && strstr(r.err, "no answer from") && strstr(r.err, "within 300 ms") && r.ms < 1900,
	      "--timeout 300 against a 2 s call: %d in %ld ms: %s", r.exit, r.ms, r.err);
	run_free(&r);
	CHECK(fake_wait_returned(ret + 1, 5000), "the slow call returned");

	/* a Unix socket */
	char ua[128];
	snprintf(ua, sizeof(ua), "unix:%s", path_in("ctl.sock"));
	sc.addr = ua;
	s = NULL;
	CHECK(nkv_ctl_server_start(g_cookie, &sc, &s) == 0, "a server on %s", ua);
	snprintf(args, sizeof(args), "--server %s ns list " NQN, ua);
	fake_answer(0, "{'namespaces':[]}", NULL);
	before = fake_entered();
	run_ctl(args, &r);
	CHECK(r.exit == 0 && fake_entered() == before + 1 && strstr(r.out, "no namespaces"), "--server %s: %d %s", ua, r.exit,
	      r.err);
	run_free(&r);
	nkv_ctl_server_stop(s, 1000);
}

static void test_tls(void)
{
	struct nkv_ctl_server_conf sc = {.addr = "127.0.0.1:0", .tls_cert = path_in("srv.pem"),
					 .tls_key = path_in("srv.key"), .client_ca = path_in("ca.pem")};
	struct nkv_ctl_server *s = NULL;
	CHECK(nkv_ctl_server_start(g_cookie, &sc, &s) == 0, "an mTLS server");
	char addr[64], args[1024];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", nkv_ctl_server_port(s));
	struct run r;
	fake_answer(0, "{'name':'gw-tls'}", NULL);
	unsigned before = fake_entered();
	snprintf(args, sizeof(args), "--server %s --tls-ca %s --tls-cert %s --tls-key %s gateway info", addr,
		 path_in("ca.pem"), path_in("cli.pem"), path_in("cli.key"));
	run_ctl(args, &r);
	CHECK(r.exit == 0 && strstr(r.out, "gw-tls") && fake_entered() == before + 1, "mTLS: %d %s", r.exit, r.err);
	run_free(&r);
	snprintf(args, sizeof(args), "--server %s --tls-ca %s gateway info", addr, path_in("ca.pem"));
	run_ctl(args, &r);
	CHECK(r.exit == 69 && fake_entered() == before + 1, "mTLS without a client certificate: %d %s", r.exit, r.err);
	run_free(&r);
	snprintf(args, sizeof(args), "--server %s gateway info", addr);
	run_ctl(args, &r);
	CHECK(r.exit == 69 && strstr(r.err, "--tls-ca"), "plaintext against TLS: %d %s", r.exit, r.err);
	run_free(&r);
	snprintf(args, sizeof(args), "--server %s --tls-ca %s --tls-cert %s --tls-key %s gateway info", addr,
		 path_in("ca.pem"), path_in("notpem.pem"), path_in("cli.key"));
	run_ctl(args, &r);
	CHECK(r.exit == 64 && strstr(r.err, "is not PEM"), "a client certificate that is not PEM: %d %s", r.exit, r.err);
	run_free(&r);
	nkv_ctl_server_stop(s, 1000);

	sc = (struct nkv_ctl_server_conf){.addr = "127.0.0.1:0", .tls_cert = path_in("name.pem"),
					  .tls_key = path_in("name.key")};
	s = NULL;
	CHECK(nkv_ctl_server_start(g_cookie, &sc, &s) == 0, "a TLS server for ctl.test");
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", nkv_ctl_server_port(s));
	snprintf(args, sizeof(args), "--server %s --tls-ca %s --tls-server-name ctl.test gateway info", addr,
		 path_in("ca.pem"));
	run_ctl(args, &r);
	CHECK(r.exit == 0 && strstr(r.out, "gw-tls"), "--tls-server-name ctl.test: %d %s", r.exit, r.err);
	run_free(&r);
	snprintf(args, sizeof(args), "--server %s --tls-ca %s gateway info", addr, path_in("ca.pem"));
	run_ctl(args, &r);
	CHECK(r.exit == 69, "a certificate for another name: %d %s", r.exit, r.err);
	run_free(&r);
	nkv_ctl_server_stop(s, 1000);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s NKV_CTL MKCERTS_SCRIPT\n", argv[0]);
		return 2;
	}
	g_ctl = argv[1];
	snprintf(g_dir, sizeof(g_dir), "%s/nkv-ctl-cli.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(g_dir)) {
		perror("mkdtemp");
		return 1;
	}
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "bash '%s' '%s'", argv[2], g_dir);
	if (system(cmd) != 0) {
		fprintf(stderr, "cannot make the test certificates (%s)\n", cmd);
		return 1;
	}
	unsetenv("http_proxy");
	unsetenv("https_proxy");
	struct nkv_ctl_server_conf sc = {.addr = "127.0.0.1:0"};
	struct nkv_ctl_server *s = NULL;
	if (nkv_ctl_server_start(g_cookie, &sc, &s)) {
		fprintf(stderr, "cannot start the server\n");
		return 1;
	}
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", nkv_ctl_server_port(s));
	setenv("NKV_CTL_SERVER", addr, 1);
	printf("# commands, output, errors, usage (%zu cases)\n", sizeof(g_cases) / sizeof(g_cases[0]));
	test_cases();
	printf("# secrets\n");
	test_secrets();
	printf("# servers\n");
	test_servers(addr);
	printf("# TLS\n");
	test_tls();
	nkv_ctl_server_stop(s, 1000);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", g_dir);
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail ? 1 : 0;
}
