/* SPDX-License-Identifier: MIT */
/* API objects → JSON. What comes from the agent (file entries, processes,
 * exit statuses) is hostile and re-serialised field by field after checks. */

#include <stdio.h>
#include <time.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "base64.h"
#include "egress-policy.h"

#define AGENT_NAME_MAX 4096U        /* a file name or link target from the agent */
#define AGENT_REASON_MAX 32U
#define AGENT_EXEC_ID_MAX 64U

void json_out_time(int64_t usec, char buf[static JSON_OUT_TIME_MAX]) {
        int64_t sec = usec / 1000000, ms;
        struct tm tm;
        time_t t;

        if (usec % 1000000 < 0)
                sec--;
        ms = (usec - sec * 1000000) / 1000;
        t = (time_t) sec;
        if (!gmtime_r(&t, &tm) || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 0) {
                snprintf(buf, JSON_OUT_TIME_MAX, "1970-01-01T00:00:00.000Z");
                return;
        }
        snprintf(buf, JSON_OUT_TIME_MAX, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int) ms);
}

static void kv_time(JsonWriter *w, const char *key, int64_t usec) {
        char buf[JSON_OUT_TIME_MAX];

        json_w_key(w, key);
        if (usec == 0) {
                json_w_null(w);
                return;
        }
        json_out_time(usec, buf);
        json_w_string(w, buf);
}

/* A stored JSON object (ours, but from the store): written as is if it parses, else {}. */
static void kv_json_object(JsonWriter *w, const char *key, const char *text) {
        _cleanup_json_ JsonValue *v = NULL;

        json_w_key(w, key);
        if (text && json_parse(text, strlen(text), &v, NULL, 0) >= 0 && json_type(v) == JSON_OBJECT)
                json_w_raw(w, text);
        else
                json_w_raw(w, "{}");
}

/* The stored (canonical) egress policy; none (older rows) or unreadable: no egress. */
static void kv_network(JsonWriter *w, const char *text) {
        _cleanup_(egress_policy_freep) EgressPolicy *p = NULL;

        json_w_key(w, "network");
        if (!text || egress_policy_parse(text, strlen(text), &p, NULL, 0) < 0) {
                json_w_raw(w, "{\"allow\":[],\"deny\":[]}");
                return;
        }
        egress_policy_write_json(p, w);
}

static void kv_string_or_null(JsonWriter *w, const char *key, const char *s) {
        json_w_kv_string(w, key, isempty(s) ? NULL : s);
}

void json_out_error(JsonWriter *w, const ApiError *e) {
        json_w_object_begin(w);
        json_w_key(w, "error");
        json_w_object_begin(w);
        json_w_kv_string(w, "code", api_error_code_to_string(e->code) ?: "internal");
        json_w_kv_string(w, "message", e->message);
        json_w_object_end(w);
        json_w_object_end(w);
}

void json_out_sandbox(JsonWriter *w, const Sandbox *sb, const char *tenant_name) {
        json_w_object_begin(w);
        json_w_kv_string(w, "id", sb->id);
        json_w_kv_string(w, "tenant", tenant_name);
        json_w_kv_string(w, "state", sandbox_state_to_string(sb->state) ?: "error");
        json_w_kv_string(w, "reason", sb->reason);
        json_w_kv_string(w, "template", sb->template_name);
        json_w_key(w, "template_version");
        json_w_uint(w, sb->template_version);
        json_w_kv_string(w, "runtime", sb->runtime);
        json_w_kv_string(w, "worker", sb->worker);
        json_w_key(w, "cpu");
        json_w_double(w, sb->cpu_millis / 1000.0);
        json_w_kv_int(w, "memory_mb", (int64_t) sb->memory_mb);
        json_w_kv_int(w, "disk_mb", (int64_t) sb->disk_mb);
        json_w_kv_int(w, "pids_max", (int64_t) sb->pids_max);
        json_w_kv_int(w, "io_weight", (int64_t) sb->io_weight);
        json_w_kv_int(w, "timeout_s", (int64_t) sb->timeout_s);
        kv_time(w, "created_at", sb->created_usec);
        kv_time(w, "expires_at", sb->expires_usec);
        kv_json_object(w, "env", sb->env_json);
        kv_json_object(w, "metadata", sb->metadata_json);
        kv_string_or_null(w, "parent", sb->parent_id);
        kv_string_or_null(w, "parent_checkpoint", sb->parent_checkpoint);
        json_w_kv_bool(w, "processes_preserved", sb->processes_preserved);
        json_w_kv_int(w, "idle_s", (int64_t) sb->idle_s);
        kv_string_or_null(w, "idle_action", idle_action_to_string(sb->idle_action));
        json_w_kv_int(w, "checkpoint_every_s", (int64_t) sb->checkpoint_every_s);
        json_w_kv_int(w, "checkpoints_max", (int64_t) sb->checkpoints_max);
        json_w_kv_int(w, "checkpoints_mb", (int64_t) sb->checkpoints_mb);
        json_w_kv_int(w, "checkpoints", sb->checkpoints);
        json_w_kv_bool(w, "auto_resume", sb->auto_resume);
        json_w_kv_bool(w, "public_traffic", sb->public_traffic);
        kv_time(w, "last_activity_at", sb->last_activity_usec);
        kv_network(w, sb->network_json);
        json_w_object_end(w);
}

void json_out_checkpoint(JsonWriter *w, const Checkpoint *c) {
        json_w_object_begin(w);
        json_w_kv_string(w, "id", c->id);
        json_w_kv_string(w, "sandbox", c->sandbox_id);
        kv_string_or_null(w, "name", c->name);
        kv_time(w, "created_at", c->created_usec);
        json_w_key(w, "size_bytes");
        json_w_uint(w, c->size_bytes);
        json_w_kv_bool(w, "auto", c->automatic);
        json_w_kv_bool(w, "with_memory", c->memory);
        json_w_object_end(w);
}

void json_out_template(JsonWriter *w, const Template *t, uint64_t in_use) {
        json_out_template_with(w, t, in_use, NULL, NULL, NULL, NULL);
}

void json_out_template_pulled(JsonWriter *w, const Template *t, uint64_t in_use, const char *ref,
                              const char *digest) {
        json_out_template_with(w, t, in_use, ref, digest, NULL, NULL);
}

void json_out_template_with(JsonWriter *w, const Template *t, uint64_t in_use, const char *ref, const char *digest,
                            const char *runtime, const char *start_json) {
        _cleanup_json_ JsonValue *start = NULL;

        json_w_object_begin(w);
        json_w_kv_string(w, "name", t->name);
        json_w_kv_string(w, "state", template_state_to_string(t->state) ?: "importing");
        json_w_key(w, "size_bytes");
        json_w_uint(w, t->size_bytes);
        kv_time(w, "created_at", t->created_usec);
        json_w_key(w, "in_use");
        json_w_uint(w, in_use);
        if (ref)
                json_w_kv_string(w, "ref", ref);
        if (digest)
                json_w_kv_string(w, "digest", digest);
        /* its settings (PATCH /v1/templates/{name}); null: the default */
        kv_string_or_null(w, "runtime", runtime);
        json_w_key(w, "start");
        if (start_json && json_parse(start_json, strlen(start_json), &start, NULL, 0) >= 0)
                json_w_raw(w, start_json);
        else
                json_w_null(w);
        json_w_object_end(w);
}

void json_out_event(JsonWriter *w, const Event *ev, const char *tenant_name) {
        json_w_object_begin(w);
        json_w_kv_int(w, "seq", ev->seq);
        kv_time(w, "time", ev->time_usec);
        json_w_kv_string(w, "tenant", tenant_name);
        kv_string_or_null(w, "sandbox", ev->sandbox_id);
        json_w_kv_string(w, "type", ev->type);
        json_w_kv_string(w, "actor", ev->actor);
        json_w_kv_string(w, "reason", ev->reason);
        kv_json_object(w, "data", ev->data_json);
        json_w_object_end(w);
}

void json_out_key(JsonWriter *w, const ApiKey *k, const char *tenant_name) {
        json_w_object_begin(w);
        json_w_kv_string(w, "id", k->id);
        json_w_kv_string(w, "tenant", tenant_name);
        json_w_kv_string(w, "name", k->name);
        json_w_kv_bool(w, "admin", k->admin);
        kv_time(w, "created_at", k->created_usec);
        json_w_object_end(w);
}

/* ---- what the agent says (hostile) ---- */

static const char *get_str(const JsonValue *o, const char *key, size_t max) {
        JsonValue *v = json_get(o, key);
        if (json_type(v) != JSON_STRING || json_string_len(v) > max || memchr(json_string(v), 0, json_string_len(v)))
                return NULL;
        return json_string(v);
}

static int get_u64(const JsonValue *o, const char *key, uint64_t max, uint64_t *ret) {
        JsonValue *v = json_get(o, key);
        uint64_t u;
        if (json_type(v) != JSON_NUMBER || json_uint64(v, &u) < 0 || u > max)
                return -EBADMSG;
        *ret = u;
        return 0;
}

int json_out_file_entry(JsonWriter *w, const JsonValue *entry) {
        static const char *const types[] = { "file", "dir", "symlink", "other" };
        const char *name, *path, *type, *target = NULL, *out_type = "other";
        uint64_t size, mode, uid, gid;
        int64_t mtime_ns = 0;
        JsonValue *v;

        if (json_type(entry) != JSON_OBJECT)
                return -EBADMSG;
        name = get_str(entry, "name", AGENT_NAME_MAX);
        path = get_str(entry, "path", API_PATH_MAX);
        type = get_str(entry, "type", 16);
        if (!name || !path || !type || get_u64(entry, "size", INT64_MAX, &size) < 0 ||
            get_u64(entry, "mode", 07777777, &mode) < 0 || get_u64(entry, "uid", UINT32_MAX, &uid) < 0 ||
            get_u64(entry, "gid", UINT32_MAX, &gid) < 0)
                return -EBADMSG;
        v = json_get(entry, "mtime_ns");
        if (v && json_int64(v, &mtime_ns) < 0)
                return -EBADMSG;
        v = json_get(entry, "target");
        if (v && !json_is_null(v)) {
                target = get_str(entry, "target", AGENT_NAME_MAX);
                if (!target)
                        return -EBADMSG;
        }
        for (size_t i = 0; i < ELEMENTSOF(types); i++)
                if (streq(type, types[i]))
                        out_type = types[i];

        json_w_object_begin(w);
        json_w_kv_string(w, "name", name);
        json_w_kv_string(w, "path", path);
        json_w_kv_string(w, "type", out_type);
        json_w_key(w, "size");
        json_w_uint(w, size);
        json_w_key(w, "mode");
        json_w_uint(w, mode & 07777);
        kv_time(w, "mtime", mtime_ns / 1000);
        json_w_key(w, "uid");
        json_w_uint(w, uid);
        json_w_key(w, "gid");
        json_w_uint(w, gid);
        if (target)
                json_w_kv_string(w, "target", target);
        json_w_object_end(w);
        return 0;
}

int json_out_agent_list(JsonWriter *w, const JsonValue *result, const char *key,
                        int (*out)(JsonWriter *w, const JsonValue *v)) {
        const JsonValue *list = json_get(result, key);

        if (json_type(list) != JSON_ARRAY)
                return -EBADMSG;
        json_w_object_begin(w);
        json_w_key(w, key);
        json_w_array_begin(w);
        for (size_t i = 0; i < json_array_size(list); i++)
                if (out(w, json_array_at(list, i)) < 0)
                        return -EBADMSG;
        json_w_array_end(w);
        json_w_object_end(w);
        return 0;
}

int json_out_process(JsonWriter *w, const JsonValue *proc) {
        const char *exec_id;
        JsonValue *argv, *v;
        uint64_t pid;
        bool pty = false;
        size_t n;

        if (json_type(proc) != JSON_OBJECT)
                return -EBADMSG;
        exec_id = get_str(proc, "exec_id", AGENT_EXEC_ID_MAX);
        argv = json_get(proc, "argv");
        n = json_array_size(argv);
        if (!exec_id || get_u64(proc, "pid", INT32_MAX, &pid) < 0 || json_type(argv) != JSON_ARRAY ||
            n > API_ARGV_MAX)
                return -EBADMSG;
        v = json_get(proc, "pty");
        if (v && json_bool(v, &pty) < 0)
                return -EBADMSG;
        for (size_t i = 0; i < n; i++)
                if (json_type(json_array_at(argv, i)) != JSON_STRING)
                        return -EBADMSG;

        json_w_object_begin(w);
        json_w_kv_string(w, "exec_id", exec_id);
        json_w_kv_int(w, "pid", (int64_t) pid);
        json_w_key(w, "argv");
        json_w_array_begin(w);
        for (size_t i = 0; i < n; i++) {
                JsonValue *a = json_array_at(argv, i);
                json_w_string_n(w, json_string(a), json_string_len(a));
        }
        json_w_array_end(w);
        json_w_kv_bool(w, "pty", pty);
        json_w_object_end(w);
        return 0;
}

static bool signal_name_ok(const char *s) {
        size_t n;
        if (!s || !startswith(s, "SIG"))
                return false;
        n = strlen(s);
        if (n < 4 || n > 16)
                return false;
        for (size_t i = 3; i < n; i++)
                if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '+'))
                        return false;
        return true;
}

static bool reason_ok(const char *s) {
        if (!s || !*s)
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || *s == '_'))
                        return false;
        return true;
}

int json_out_exit(JsonWriter *w, const JsonValue *x) {
        const char *signal = NULL, *reason = NULL;
        JsonValue *v;
        int64_t code;

        if (json_type(x) != JSON_OBJECT)
                return -EBADMSG;
        v = json_get(x, "code");
        if (!v || json_int64(v, &code) < 0 || code < 0 || code > 255)
                return -EBADMSG;
        if (json_get(x, "signal")) {
                signal = get_str(x, "signal", 16);
                if (!signal_name_ok(signal))
                        return -EBADMSG;
        }
        if (json_get(x, "reason")) {
                reason = get_str(x, "reason", AGENT_REASON_MAX);
                if (!reason_ok(reason))
                        return -EBADMSG;
        }
        json_w_object_begin(w);
        json_w_kv_string(w, "type", "exit");
        json_w_kv_int(w, "code", code);
        if (signal)
                json_w_kv_string(w, "signal", signal);
        if (reason)
                json_w_kv_string(w, "reason", reason);
        json_w_object_end(w);
        return 0;
}

void json_out_exec_data(JsonWriter *w, const char *type, const char *p, size_t n) {
        json_w_object_begin(w);
        json_w_kv_string(w, "type", type);
        if (utf8_valid(p, n)) {
                json_w_key(w, "data");
                json_w_string_n(w, p, n);
        } else {
                _cleanup_free_ char *b64 = NULL;
                if (base64_encode(p, n, &b64, NULL) < 0)
                        w->error = -ENOMEM;
                json_w_kv_string(w, "data_b64", b64 ?: "");
        }
        json_w_object_end(w);
}

size_t utf8_incomplete_tail(const char *p, size_t n) {
        /* Look back at most 3 bytes for the lead byte of the last sequence. */
        for (size_t back = 1; back <= 3 && back <= n; back++) {
                unsigned char c = (unsigned char) p[n - back];
                size_t need;

                if ((c & 0xC0) == 0x80)
                        continue; /* continuation byte: keep looking */
                if ((c & 0xE0) == 0xC0)
                        need = 2;
                else if ((c & 0xF0) == 0xE0)
                        need = 3;
                else if ((c & 0xF8) == 0xF0)
                        need = 4;
                else
                        return 0; /* ASCII or invalid lead: nothing to hold back */
                return need > back ? back : 0;
        }
        return 0;
}
