/* SPDX-License-Identifier: MIT */
/* The pure parts of the lifecycle controllers: the retention rule of
 * automatic checkpoints, the timeout warning's lead, controller ids, and the
 * warm_pool configuration value. (The store side is in test-store.c, the
 * whole in tests/e2e/test_lifecycle.py.) */

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "checkpointer.h"
#include "config.h"
#include "controller-util.h"
#include "cred-crypt.h"
#include "policy.h"
#include "str-util.h"
#include "test.h"
#include "webhook.h"
#include "webhooks.h"

#define SEC INT64_C(1000000)
#define HOUR (3600 * SEC)
#define DAY (24 * HOUR)

/* A fixed "now" at a quarter past an hour, so that minutes ago is the same hour. */
#define NOW (INT64_C(1795914000) * SEC + 15 * 60 * SEC)

static void retain(const int64_t *ages, size_t n, uint64_t keep_last, bool *keep) {
        Checkpoint a[32] = {};
        ASSERT_TRUE(n <= ELEMENTSOF(a));
        for (size_t i = 0; i < n; i++) {
                a[i].created_usec = NOW - ages[i];
                a[i].automatic = a[i].restorable = true;
                if (i > 0)
                        ASSERT_TRUE(ages[i] >= ages[i - 1]); /* newest first */
        }
        checkpointer_retain(a, n, keep_last, NOW, keep);
}

TEST(retention_keeps_the_newest) {
        static const int64_t ages[] = { 1 * SEC, 2 * SEC, 3 * SEC, 4 * SEC, 5 * SEC, 6 * SEC, 7 * SEC };
        bool keep[ELEMENTSOF(ages)];

        retain(ages, ELEMENTSOF(ages), 5, keep);
        for (size_t i = 0; i < 5; i++)
                ASSERT_TRUE(keep[i]);
        /* the same hour as kept ones: pruned */
        ASSERT_FALSE(keep[5]);
        ASSERT_FALSE(keep[6]);

        retain(ages, ELEMENTSOF(ages), 100, keep);
        for (size_t i = 0; i < ELEMENTSOF(ages); i++)
                ASSERT_TRUE(keep[i]);
        retain(ages, 0, 5, keep); /* none: nothing to do */
}

TEST(retention_hourly_then_daily) {
        static const int64_t ages[] = {
                1 * SEC,                      /* 0 keep_last */
                2 * SEC,                      /* 1 keep_last */
                1 * HOUR,                     /* 2 the previous hour: kept */
                1 * HOUR + 5 * 60 * SEC,      /* 3 the same previous hour: pruned */
                5 * HOUR,                     /* 4 another hour: kept */
                23 * HOUR,                    /* 5 still within 24 h: kept */
                2 * DAY,                      /* 6 a day within 7: kept */
                2 * DAY + 60 * SEC,           /* 7 the same day: pruned */
                3 * DAY,                      /* 8 another day: kept */
                6 * DAY + 23 * HOUR,          /* 9 just within 7 days: kept */
                8 * DAY,                      /* 10 older than 7 days: pruned */
                30 * DAY,                     /* 11 pruned */
        };
        static const bool want[] = { true, true, true, false, true, true, true, false, true, true, false, false };
        bool keep[ELEMENTSOF(ages)];

        retain(ages, ELEMENTSOF(ages), 2, keep);
        for (size_t i = 0; i < ELEMENTSOF(ages); i++)
                if (keep[i] != want[i])
                        test_fail(__FILE__, __LINE__, "checkpoint %zu (age %lld s): keep %d, want %d", i,
                                  (long long) (ages[i] / SEC), keep[i], want[i]);
}

TEST(retention_old_ones_alone_go) {
        /* keep_last covers them, whatever their age */
        static const int64_t ages[] = { 10 * DAY, 20 * DAY, 30 * DAY };
        bool keep[ELEMENTSOF(ages)];

        retain(ages, ELEMENTSOF(ages), 5, keep);
        ASSERT_TRUE(keep[0] && keep[1] && keep[2]);
        retain(ages, ELEMENTSOF(ages), 1, keep);
        ASSERT_TRUE(keep[0]);
        ASSERT_FALSE(keep[1]);
        ASSERT_FALSE(keep[2]);
}

TEST(timeout_warning_lead) {
        ASSERT_EQ(policy_warn_lead_usec(4), 400000);        /* 10 % of a short timeout */
        ASSERT_EQ(policy_warn_lead_usec(600), 60 * SEC);    /* 10 % = 60 s */
        ASSERT_EQ(policy_warn_lead_usec(3600), 60 * SEC);   /* at most 60 s */
        ASSERT_EQ(policy_warn_lead_usec(0), 60 * SEC);      /* an expiry without a timeout */
        ASSERT_EQ(policy_warn_lead_usec(UINT64_MAX), 60 * SEC);
}

TEST(controller_ids) {
        char id[CONTROLLER_ID_LEN + 1], other[CONTROLLER_ID_LEN + 1];

        ASSERT_OK(controller_id_generate(id));
        ASSERT_OK(controller_id_generate(other));
        ASSERT_EQ(strlen(id), CONTROLLER_ID_LEN);
        ASSERT_TRUE(id[0] >= 'a' && id[0] <= 'z');
        ASSERT_EQ(strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789"), CONTROLLER_ID_LEN);
        ASSERT_TRUE(strcmp(id, other) != 0);
}

static int pools(const char *s, ConfigWarmPool *p, size_t *n, char *err) {
        return config_warm_pools(s, p, n, err, 256);
}

TEST(warm_pool_config) {
        ConfigWarmPool p[CONFIG_WARM_POOLS_MAX];
        char err[256], many[1024] = "";
        size_t n = 99;

        ASSERT_OK(pools("", p, &n, err));
        ASSERT_EQ(n, 0);
        ASSERT_OK(pools("base:2", p, &n, err));
        ASSERT_EQ(n, 1);
        ASSERT_STREQ(p[0].template_name, "base");
        ASSERT_EQ(p[0].count, 2);
        ASSERT_OK(pools("base:2,debian-12.1:0,x_y:64", p, &n, err));
        ASSERT_EQ(n, 3);
        ASSERT_STREQ(p[1].template_name, "debian-12.1");
        ASSERT_EQ(p[1].count, 0);
        ASSERT_EQ(p[2].count, 64);

        ASSERT_ERRNO(pools("base", p, &n, err), EINVAL);
        ASSERT_STREQ(err, "'base' is not TEMPLATE:COUNT");
        ASSERT_ERRNO(pools("base:", p, &n, err), EINVAL);
        ASSERT_ERRNO(pools(":2", p, &n, err), EINVAL);
        ASSERT_ERRNO(pools("Base:2", p, &n, err), EINVAL);
        ASSERT_ERRNO(pools("-x:2", p, &n, err), EINVAL);
        ASSERT_ERRNO(pools("base:65", p, &n, err), EINVAL);
        ASSERT_STREQ(err, "count '65' of template 'base' is not in [0, 64]");
        ASSERT_ERRNO(pools("base:-1", p, &n, err), EINVAL);
        ASSERT_ERRNO(pools("base:2x", p, &n, err), EINVAL);
        ASSERT_ERRNO(pools("base:99999999999999999999999", p, &n, err), EINVAL);
        ASSERT_ERRNO(pools("base:1,base:2", p, &n, err), EINVAL);
        ASSERT_STREQ(err, "template 'base' is named twice");
        ASSERT_ERRNO(pools("base:1,", p, &n, err), EINVAL);
        ASSERT_ERRNO(pools(",base:1", p, &n, err), EINVAL);
        ASSERT_ERRNO(pools("base:1,,x:1", p, &n, err), EINVAL);
        for (unsigned i = 0; i <= CONFIG_WARM_POOLS_MAX; i++) {
                size_t l = strlen(many);
                snprintf(many + l, sizeof many - l, "%st%u:1", i ? "," : "", i);
        }
        ASSERT_ERRNO(pools(many, p, &n, err), E2BIG);
        char long_name[CONFIG_WARM_POOL_NAME_MAX + 8];
        memset(long_name, 'a', CONFIG_WARM_POOL_NAME_MAX + 1);
        memcpy(long_name + CONFIG_WARM_POOL_NAME_MAX + 1, ":1", 3);
        ASSERT_ERRNO(pools(long_name, p, &n, err), EINVAL);
        ASSERT_ERRNO(config_warm_pools(NULL, p, &n, err, sizeof err), EINVAL);

        /* the configuration refuses a bad value at start */
        Config c;
        config_defaults(&c);
        ASSERT_STREQ(c.warm_pool, "");
        ASSERT_EQ(c.max_branch, 16);
        ASSERT_EQ(c.checkpoint_keep_last, 5);
        ASSERT_EQ(c.auto_resume_paused, 0);
        ASSERT_OK(config_set(&c, "warm_pool", "base:3", err, sizeof err));
        ASSERT_OK(config_finish(&c, err, sizeof err));
        ASSERT_OK(config_set(&c, "warm_pool", "base", err, sizeof err));
        ASSERT_ERRNO(config_finish(&c, err, sizeof err), EINVAL);
        ASSERT_STREQ(err, "warm_pool: 'base' is not TEMPLATE:COUNT");
        ASSERT_ERRNO(config_set(&c, "max_branch", "65", err, sizeof err), ERANGE);
        ASSERT_ERRNO(config_set(&c, "max_branch", "0", err, sizeof err), ERANGE);
        ASSERT_ERRNO(config_set(&c, "auto_resume_paused", "2", err, sizeof err), ERANGE);
}

TEST(webhook_backoff_doubles_to_ten_minutes) {
        ASSERT_EQ(webhook_backoff_usec(1), WEBHOOK_BACKOFF_MIN_USEC);
        ASSERT_EQ(webhook_backoff_usec(2), 2 * WEBHOOK_BACKOFF_MIN_USEC);
        ASSERT_EQ(webhook_backoff_usec(4), 8 * WEBHOOK_BACKOFF_MIN_USEC);
        ASSERT_EQ(webhook_backoff_usec(11), WEBHOOK_BACKOFF_MAX_USEC);
        ASSERT_EQ(webhook_backoff_usec(UINT64_MAX), WEBHOOK_BACKOFF_MAX_USEC);
}

TEST(webhook_event_body_and_filter) {
        Event ev = { .seq = 42, .time_usec = INT64_C(1700000000123456) };
        char data[] = "{\"a\":1}";
        char *body = NULL;
        size_t n = 0;
        Webhook w = {};

        (void) strscpy(ev.type, sizeof ev.type, "sandbox.deleted");
        (void) strscpy(ev.sandbox_id, sizeof ev.sandbox_id, "sb1");
        (void) strscpy(ev.reason, sizeof ev.reason, "by \"me\"");
        ev.data_json = data;
        ASSERT_OK(webhook_event_body(&ev, &body, &n));
        ASSERT_STREQ(body, "{\"id\":\"42\",\"type\":\"sandbox.deleted\",\"e2b_type\":\"sandbox.lifecycle.killed\","
                           "\"time\":\"2023-11-14T22:13:20.123Z\",\"sandbox_id\":\"sb1\",\"reason\":\"by \\\"me\\\"\","
                           "\"data\":{\"a\":1}}");
        free(body);
        /* no sandbox, no E2B name, data that is not an object */
        (void) strscpy(ev.type, sizeof ev.type, "key.created");
        ev.sandbox_id[0] = 0;
        ev.data_json = NULL;
        ASSERT_OK(webhook_event_body(&ev, &body, &n));
        ASSERT_TRUE(strstr(body, "\"sandbox_id\":null") && strstr(body, "\"data\":null") && !strstr(body, "e2b_type"));
        free(body);

        /* E2B's shape, with the sandbox and without */
        {
                Sandbox sb = { .cpu_millis = 1500, .memory_mb = 512, .created_usec = INT64_C(1700000000000000) };
                char meta[] = "{\"k\":\"v\"}";

                (void) strscpy(ev.type, sizeof ev.type, "sandbox.deleted");
                (void) strscpy(ev.sandbox_id, sizeof ev.sandbox_id, "sb1");
                (void) strscpy(ev.tenant_id, sizeof ev.tenant_id, "tn_a");
                (void) strscpy(sb.template_name, sizeof sb.template_name, "base");
                sb.metadata_json = meta;
                ASSERT_OK(webhook_event_body_e2b(&ev, &sb, &body, &n));
                ASSERT_STREQ(body, "{\"version\":\"v2\",\"id\":\"42\",\"type\":\"sandbox.lifecycle.killed\","
                                   "\"eventData\":{\"sandbox_metadata\":{\"k\":\"v\"},\"execution\":{"
                                   "\"started_at\":\"2023-11-14T22:13:20.000Z\",\"vcpu_count\":2,\"memory_mb\":512,"
                                   "\"execution_time\":123}},\"sandboxBuildId\":\"\",\"sandboxExecutionId\":\"sb1\","
                                   "\"sandboxId\":\"sb1\",\"sandboxTeamId\":\"tn_a\",\"sandboxTemplateId\":\"base\","
                                   "\"timestamp\":\"2023-11-14T22:13:20.123Z\"}");
                free(body);
                (void) strscpy(ev.type, sizeof ev.type, "sandbox.created");
                ASSERT_OK(webhook_event_body_e2b(&ev, NULL, &body, &n));
                ASSERT_TRUE(strstr(body, "\"type\":\"sandbox.lifecycle.created\"") &&
                            strstr(body, "\"sandbox_metadata\":{}") && !strstr(body, "execution"));
                free(body);
        }

        (void) strscpy(w.events_json, sizeof w.events_json, "[\"sandbox.created\",\"sandbox.lifecycle.killed\"]");
        ASSERT_TRUE(webhook_wants(&w, "sandbox.created"));
        ASSERT_TRUE(webhook_wants(&w, "sandbox.deleted"));
        ASSERT_FALSE(webhook_wants(&w, "sandbox.paused"));
        (void) strscpy(w.events_json, sizeof w.events_json, "not json");
        ASSERT_FALSE(webhook_wants(&w, "sandbox.created"));
}

/* A 127.0.0.1 port nothing listens on (bound, then closed). */
static uint16_t closed_port(void) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof sa;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ASSERT_TRUE(fd >= 0);
        ASSERT_TRUE(bind(fd, (struct sockaddr *) &sa, sizeof sa) == 0);
        ASSERT_TRUE(getsockname(fd, (struct sockaddr *) &sa, &len) == 0);
        close(fd);
        return ntohs(sa.sin_port);
}

static void append(Store *s, const char *tenant, const char *type, int64_t *ret_seq) {
        Event ev = {};

        (void) strscpy(ev.tenant_id, sizeof ev.tenant_id, tenant);
        (void) strscpy(ev.type, sizeof ev.type, type);
        (void) strscpy(ev.sandbox_id, sizeof ev.sandbox_id, "sb1");
        ASSERT_OK(store_event_append(s, &ev));
        if (ret_seq)
                *ret_seq = ev.seq;
}

/* The delivery loop against a real store: filtered events move the cursor,
 * a failure stops there and backs off, the guard refuses again at delivery,
 * and a webhook failing longer than webhook_give_up_s is disabled. */
TEST(webhook_loop_backs_off_and_gives_up) {
        char dir[] = "/tmp/test-webhook-loop-XXXXXX", url[PATH_MAX + 16];
        _cleanup_(store_closep) Store *s = NULL;
        Webhook w = { .enabled = true }, v = { .enabled = true }, got;
        Event *evs = NULL;
        size_t n = 0;
        int64_t skipped, now = now_usec();
        EventFilter f = { .tenant_id = "tn_w", .type = "webhook." };
        Config c;
        static const uint8_t key_bytes[32] = { 7 };
        _cleanup_(cred_key_freep) CredKey *key = NULL;

        ASSERT_NOT_NULL(mkdtemp(dir));
        snprintf(url, sizeof url, "sqlite:%s/space.db", dir);
        ASSERT_OK(store_open(url, &s));
        ASSERT_OK(cred_key_from_bytes(key_bytes, sizeof key_bytes, &key));
        config_defaults(&c);
        c.webhook_allow_private = 1;

        (void) strscpy(w.id, sizeof w.id, "wh_a");
        (void) strscpy(w.tenant_id, sizeof w.tenant_id, "tn_w");
        snprintf(w.url, sizeof w.url, "http://127.0.0.1:%u/hook", closed_port());
        (void) strscpy(w.events_json, sizeof w.events_json, "[\"sandbox.created\"]");
        (void) strscpy(w.secret, sizeof w.secret, "whsec_0123456789abcdef");
        ASSERT_OK(store_webhook_insert(s, &w));
        ASSERT_OK(webhooks_seal_stored(s, key, NULL)); /* as spaced does at start */
        append(s, "tn_w", "key.created", &skipped);
        append(s, "tn_w", "sandbox.created", NULL);
        append(s, "tn_other", "sandbox.created", NULL);

        ASSERT_EQ(webhooks_run_once(s, &c, key, now), 0);
        ASSERT_OK(store_webhook_get(s, "tn_w", "wh_a", &got));
        ASSERT_EQ(got.last_seq, skipped); /* past the filtered one, not past the failed one */
        ASSERT_EQ(got.failures, 1U);
        ASSERT_EQ(got.next_usec, now + WEBHOOK_BACKOFF_MIN_USEC);
        ASSERT_EQ(got.failing_since_usec, now);
        ASSERT_TRUE(strstr(got.last_error, "connect") != NULL);
        /* not before next_usec */
        ASSERT_EQ(webhooks_run_once(s, &c, key, now + 1), 0);
        ASSERT_OK(store_webhook_get(s, "tn_w", "wh_a", &got));
        ASSERT_EQ(got.failures, 1U);
        ASSERT_TRUE(got.enabled);
        /* then again, doubling */
        ASSERT_EQ(webhooks_run_once(s, &c, key, now + WEBHOOK_BACKOFF_MIN_USEC), 0);
        ASSERT_OK(store_webhook_get(s, "tn_w", "wh_a", &got));
        ASSERT_EQ(got.failures, 2U);
        ASSERT_EQ(got.next_usec, now + 3 * WEBHOOK_BACKOFF_MIN_USEC);
        ASSERT_TRUE(got.enabled);
        /* failing for longer than webhook_give_up_s: disabled, with an event */
        ASSERT_EQ(webhooks_run_once(s, &c, key, now + (int64_t) c.webhook_give_up_s * SEC), 0);
        ASSERT_OK(store_webhook_get(s, "tn_w", "wh_a", &got));
        ASSERT_FALSE(got.enabled);
        ASSERT_EQ(got.failures, 3U);
        ASSERT_OK(store_event_list(s, &f, &evs, &n));
        ASSERT_EQ(n, 1U);
        ASSERT_STREQ(evs[0].type, "webhook.disabled");
        event_array_free(evs, n);
        /* disabled: no more attempts */
        ASSERT_EQ(webhooks_run_once(s, &c, key, now + 2 * (int64_t) c.webhook_give_up_s * SEC), 0);
        ASSERT_OK(store_webhook_get(s, "tn_w", "wh_a", &got));
        ASSERT_EQ(got.failures, 3U);

        /* the guard at delivery: without webhook_allow_private a loopback URL in the store is refused */
        c.webhook_allow_private = 0;
        v = w;
        (void) strscpy(v.id, sizeof v.id, "wh_b");
        v.enabled = true;
        ASSERT_OK(store_webhook_insert(s, &v));
        ASSERT_OK(webhooks_seal_stored(s, key, NULL));
        append(s, "tn_w", "sandbox.created", NULL);
        ASSERT_EQ(webhooks_run_once(s, &c, key, now), 0);
        ASSERT_OK(store_webhook_get(s, "tn_w", "wh_b", &got));
        ASSERT_EQ(got.failures, 1U);
        ASSERT_TRUE(strstr(got.last_error, "loopback") && strstr(got.last_error, "refused"));

        s = store_close(s);
        static const char *const files[] = { "space.db", "space.db-wal", "space.db-shm", "space.db-journal" };
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                snprintf(url, sizeof url, "%s/%s", dir, files[i]);
                (void) unlink(url);
        }
        ASSERT_EQ(rmdir(dir), 0);
}

/* Webhook secrets at rest: sealed under the master key, bound to their row,
 * rows from before sealing sealed by webhooks_seal_stored() (and they still
 * open as themselves until then). */
TEST(webhook_secrets_are_sealed) {
        static const uint8_t key_a[CRED_KEY_BYTES] = { 1, 2, 3 }, key_b[CRED_KEY_BYTES] = { 9 };
        char dir[] = "/tmp/test-webhook-seal-XXXXXX", url[PATH_MAX + 16], sealed[WEBHOOK_SEALED_MAX],
             plain[WEBHOOK_SECRET_MAX + 1];
        _cleanup_(cred_key_freep) CredKey *k = NULL, *other = NULL;
        _cleanup_(store_closep) Store *s = NULL;
        Webhook w = { .enabled = true }, got;
        uint64_t n = 0;

        ASSERT_OK(cred_key_from_bytes(key_a, sizeof key_a, &k));
        ASSERT_OK(cred_key_from_bytes(key_b, sizeof key_b, &other));
        ASSERT_OK(webhook_secret_seal(k, "wh_1", "tn_1", "whsec_0123456789abcdef", sealed));
        ASSERT_TRUE(webhook_secret_sealed(sealed));
        ASSERT_NULL(strstr(sealed, "whsec_0123456789abcdef"));
        ASSERT_OK(webhook_secret_open(k, "wh_1", "tn_1", sealed, plain));
        ASSERT_STREQ(plain, "whsec_0123456789abcdef");
        /* another row, another tenant, another key, no key, a damaged value */
        ASSERT_ERRNO(webhook_secret_open(k, "wh_2", "tn_1", sealed, plain), EBADMSG);
        ASSERT_ERRNO(webhook_secret_open(k, "wh_1", "tn_2", sealed, plain), EBADMSG);
        ASSERT_ERRNO(webhook_secret_open(other, "wh_1", "tn_1", sealed, plain), EKEYREJECTED);
        ASSERT_ERRNO(webhook_secret_open(NULL, "wh_1", "tn_1", sealed, plain), ENOKEY);
        ASSERT_ERRNO(webhook_secret_seal(NULL, "wh_1", "tn_1", "x", sealed), ENOKEY);
        sealed[strlen(sealed) - 3] ^= 1;
        ASSERT_TRUE(webhook_secret_open(k, "wh_1", "tn_1", sealed, plain) < 0);
        ASSERT_ERRNO(webhook_secret_open(k, "wh_1", "tn_1", WEBHOOK_SEALED_PREFIX "nocolons", plain), EBADMSG);
        /* the longest secret fits */
        memset(plain, 'x', WEBHOOK_SECRET_MAX);
        plain[WEBHOOK_SECRET_MAX] = 0;
        ASSERT_OK(webhook_secret_seal(k, "wh_1", "tn_1", plain, sealed));

        /* a row stored in clear: delivers as itself, then sealed in place once */
        ASSERT_NOT_NULL(mkdtemp(dir));
        snprintf(url, sizeof url, "sqlite:%s/space.db", dir);
        ASSERT_OK(store_open(url, &s));
        (void) strscpy(w.id, sizeof w.id, "wh_old");
        (void) strscpy(w.tenant_id, sizeof w.tenant_id, "tn_w");
        (void) strscpy(w.url, sizeof w.url, "http://127.0.0.1:9/hook");
        (void) strscpy(w.events_json, sizeof w.events_json, "[\"sandbox.*\"]");
        (void) strscpy(w.secret, sizeof w.secret, "whsec_in_clear_0123");
        ASSERT_OK(store_webhook_insert(s, &w));
        ASSERT_OK(store_webhook_get(s, "tn_w", "wh_old", &got));
        ASSERT_OK(webhook_secret_open(NULL, got.id, got.tenant_id, got.secret, plain));
        ASSERT_STREQ(plain, "whsec_in_clear_0123");
        ASSERT_OK(webhooks_seal_stored(s, NULL, &n));
        ASSERT_EQ(n, 0U);
        ASSERT_OK(webhooks_seal_stored(s, k, &n));
        ASSERT_EQ(n, 1U);
        ASSERT_OK(store_webhook_get(s, "tn_w", "wh_old", &got));
        ASSERT_TRUE(webhook_secret_sealed(got.secret));
        ASSERT_NULL(strstr(got.secret, "whsec_in_clear"));
        ASSERT_OK(webhook_secret_open(k, got.id, got.tenant_id, got.secret, plain));
        ASSERT_STREQ(plain, "whsec_in_clear_0123");
        ASSERT_OK(webhooks_seal_stored(s, k, &n)); /* again: nothing left in clear */
        ASSERT_EQ(n, 0U);
        ASSERT_ERRNO(store_webhook_set_secret(s, "wh_old", "not what it holds", "x"), ESTALE);

        s = store_close(s);
        static const char *const files[] = { "space.db", "space.db-wal", "space.db-shm", "space.db-journal" };
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                snprintf(url, sizeof url, "%s/%s", dir, files[i]);
                (void) unlink(url);
        }
        ASSERT_EQ(rmdir(dir), 0);
}
