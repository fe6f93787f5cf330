/* SPDX-License-Identifier: Apache-2.0 */
/* fake_ctl.c - the fake nkv_ctl_call() of the glue tests (fake_ctl.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control/ctl.h"
#include "fake_ctl.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_rc;
static char *g_resp, *g_err;
static int g_delay_ms;
static unsigned g_entered, g_returned;
static char *g_method, *g_req;
static struct nkv_ctl *g_ctl;
static char *g_out_method, *g_out_req; /* what fake_last_*() handed out */

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

void fake_answer(int rc, const char *resp, const char *err)
{
	pthread_mutex_lock(&g_mu);
	free(g_resp);
	free(g_err);
	g_rc = rc;
	g_resp = dup_or_null(resp);
	g_err = dup_or_null(err);
	pthread_mutex_unlock(&g_mu);
}

void fake_delay_next(int ms)
{
	pthread_mutex_lock(&g_mu);
	g_delay_ms = ms;
	pthread_mutex_unlock(&g_mu);
}

int nkv_ctl_call(struct nkv_ctl *ctl, const char *method, const char *req_json, char **resp_json, char **err_msg)
{
	pthread_mutex_lock(&g_mu);
	g_entered++;
	free(g_method);
	free(g_req);
	g_method = dup_or_null(method);
	g_req = dup_or_null(req_json);
	g_ctl = ctl;
	int rc = g_rc, delay = g_delay_ms;
	char *resp = dup_or_null(g_resp), *err = dup_or_null(g_err);
	g_delay_ms = 0;
	pthread_cond_broadcast(&g_cv);
	pthread_mutex_unlock(&g_mu);
	if (delay)
		usleep((useconds_t)delay * 1000);
	if (rc < 0) {
		*err_msg = err;
		free(resp);
	} else {
		*resp_json = resp;
		free(err);
	}
	pthread_mutex_lock(&g_mu);
	g_returned++;
	pthread_cond_broadcast(&g_cv);
	pthread_mutex_unlock(&g_mu);
	return rc;
}

static unsigned counter(const unsigned *c)
{
	pthread_mutex_lock(&g_mu);
	unsigned v = *c;
	pthread_mutex_unlock(&g_mu);
	return v;
}

unsigned fake_entered(void)
{
	return counter(&g_entered);
}

unsigned fake_returned(void)
{
	return counter(&g_returned);
}

static bool wait_for(const unsigned *c, unsigned n, int timeout_ms)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&g_mu);
	int rc = 0;
	while (*c < n && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&g_cv, &g_mu, &dl);
	bool ok = *c >= n;
	pthread_mutex_unlock(&g_mu);
	return ok;
}

bool fake_wait_entered(unsigned n, int timeout_ms)
{
	return wait_for(&g_entered, n, timeout_ms);
}

bool fake_wait_returned(unsigned n, int timeout_ms)
{
	return wait_for(&g_returned, n, timeout_ms);
}

const char *fake_last_method(void)
{
	pthread_mutex_lock(&g_mu);
	free(g_out_method);
	g_out_method = strdup(g_method ? g_method : "");
	pthread_mutex_unlock(&g_mu);
	return g_out_method;
}

const char *fake_last_req(void)
{
	pthread_mutex_lock(&g_mu);
	free(g_out_req);
	g_out_req = strdup(g_req ? g_req : "");
	pthread_mutex_unlock(&g_mu);
	return g_out_req;
}

struct nkv_ctl *fake_last_ctl(void)
{
	pthread_mutex_lock(&g_mu);
	struct nkv_ctl *c = g_ctl;
	pthread_mutex_unlock(&g_mu);
	return c;
}
