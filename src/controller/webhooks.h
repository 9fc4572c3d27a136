/* SPDX-License-Identifier: MIT */
#pragma once

/* Webhook deliveries: every enabled webhook gets its tenant's events after
 * the last one it got, in order, each signed; a failed one is tried again
 * (1 s doubling to 10 min) before any later event, so a receiver sees
 * every event at least once and in order. A webhook that fails one event
 * for config webhook_give_up_s is disabled (event webhook.disabled).
 * spaced runs the loop in a thread of its own, while its controller is the
 * active one, so a slow receiver never holds up the other controllers. */

#include "config.h"
#include "store.h"

/* Per round: at most this many POSTs, and no new one after this long (each
 * has WEBHOOK_POST_TIMEOUT_MSEC), so that the webhook list is read again
 * soon and every webhook gets its turn (the rounds rotate where they begin). */
#define WEBHOOK_ROUND_DELIVERIES 50U
#define WEBHOOK_ROUND_BUDGET_MSEC 2000
#define WEBHOOK_BACKOFF_MIN_USEC (INT64_C(1000) * 1000)
#define WEBHOOK_BACKOFF_MAX_USEC (INT64_C(600) * 1000 * 1000)
/* PostgreSQL hands out event seqs before the appending transactions
 * commit, so a lower seq may become visible after a higher one: events
 * younger than this are left for a later round, so that the cursor
 * (last_seq) does not pass one still being committed. SQLite's writers are
 * serialised: seq order is commit order there. */
#define WEBHOOK_SETTLE_USEC (INT64_C(2) * 1000 * 1000)

/* The wait after the nth consecutive failure (n >= 1). */
int64_t webhook_backoff_usec(uint64_t failures);
/* The JSON body of ev: {"id","type","e2b_type"?,"time","sandbox_id","reason","data"}. */
int webhook_event_body(const Event *ev, char **ret, size_t *ret_len);
/* The same in E2B's shape, for a webhook made by /events/webhooks:
 * {"version":"v2","id","type":E2B's name (ours where it has none),
 * "eventData":{"sandbox_metadata","execution"?},"sandboxBuildId",
 * "sandboxExecutionId","sandboxId","sandboxTeamId","sandboxTemplateId",
 * "timestamp"}. sb: the event's sandbox, NULL if unknown. */
int webhook_event_body_e2b(const Event *ev, const Sandbox *sb, char **ret, size_t *ret_len);
/* Whether the webhook's events_json names type. */
bool webhook_wants(const Webhook *w, const char *type);

/* One pass at time now, opening sealed secrets with key (NULL: only rows
 * from before sealing deliver); returns how many events it delivered. */
struct CredKey;
int webhooks_run_once(Store *store, const Config *config, const struct CredKey *key, int64_t now);
/* Seals every webhook secret still stored in clear (rows from before
 * sealing) under key; NULL key: nothing. ret_sealed (may be NULL): how many. */
int webhooks_seal_stored(Store *store, const struct CredKey *key, uint64_t *ret_sealed);
