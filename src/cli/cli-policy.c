/* SPDX-License-Identifier: MIT */
/* space policy: show or change a sandbox's egress policy (GET the sandbox,
 * edit its "network", PUT /v1/sandboxes/ID/policy); and the rule syntax
 * shared with space create:
 *   --allow HOST[:PORTS][/udp]        HOST is a name or *.suffix
 *   --allow-cidr CIDR[:PORTS][/udp]   e.g. 192.168.7.0/24:5432, 10.0.0.0/8:5000-5010/udp
 *                                     (IPv6: 2001:db8::/32:443)
 *   --deny HOST[:PORTS][/tcp|/udp] / --deny-cidr CIDR[:PORTS][/tcp|/udp]
 * PORTS: comma-separated numbers or LO-HI ranges. An allow rule is TCP unless
 * it ends in /udp (and a UDP rule names its ports); a deny rule without a
 * protocol denies both. The server validates. */

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cli-common.h"
#include "cli-policy.h"
#include "cli-verbs.h"

enum {
        OPT_ALLOW = 1,
        OPT_ALLOW_CIDR,
        OPT_DENY,
        OPT_DENY_CIDR,
        OPT_REMOVE,
        OPT_CLEAR,
        OPT_SHOW,
};

static const CliOption options[] = {
        { "allow", 0, true, OPT_ALLOW },
        { "allow-cidr", 0, true, OPT_ALLOW_CIDR },
        { "deny", 0, true, OPT_DENY },
        { "deny-cidr", 0, true, OPT_DENY_CIDR },
        { "remove", 0, true, OPT_REMOVE },
        { "clear", 0, false, OPT_CLEAR },
        { "show", 0, false, OPT_SHOW },
        {},
};

static int write_ports(JsonWriter *w, const char *s) {
        _cleanup_free_ char *copy = strdup(s);
        char *save = copy; /* strsep: an empty item ("443,,80") stays one, for the server to refuse */
        if (!copy)
                return -ENOMEM;
        json_w_key(w, "ports");
        json_w_array_begin(w);
        for (char *t = strsep(&save, ","); t; t = strsep(&save, ",")) {
                uint64_t v;
                if (strchr(t, '-'))
                        json_w_string(w, t);
                else if (safe_atou64(t, &v) >= 0)
                        json_w_uint(w, v);
                else
                        json_w_string(w, t); /* the server says what is wrong with it */
        }
        json_w_array_end(w);
        return 0;
}

/* "…/udp" or "…/tcp" at the end: the protocol (NULL: none given); *n shortened. */
static const char *proto_suffix(const char *arg, size_t *n) {
        static const char *const protos[] = { "udp", "tcp" };
        for (size_t i = 0; i < ELEMENTSOF(protos); i++)
                if (*n > 4 && arg[*n - 4] == '/' && memcmp(arg + *n - 3, protos[i], 3) == 0) {
                        *n -= 4;
                        return protos[i];
                }
        return NULL;
}

int cli_policy_write_rule(JsonWriter *w, const char *arg, CliRuleKind kind) {
        size_t n = strlen(arg);
        const char *proto = proto_suffix(arg, &n);
        _cleanup_free_ char *rule = strndup(arg, n);
        const char *colon, *slash;
        if (!rule)
                return -ENOMEM;
        /* a CIDR's ports follow its prefix length ("2001:db8::/32:443"); a name's its first ':' */
        slash = kind == CLI_RULE_HOST ? NULL : strchr(rule, '/');
        bool cidr = kind == CLI_RULE_CIDR || slash;
        if (!cidr)
                colon = strchr(rule, ':');
        else if (slash)
                colon = strchr(slash, ':');
        else /* a bare address: IPv4 with a port has one ':', IPv6 more and no port without a prefix */
                colon = strchr(rule, ':') == strrchr(rule, ':') ? strchr(rule, ':') : NULL;
        if (kind == CLI_RULE_AUTO && !colon && !proto) {
                json_w_string(w, rule); /* the server tells hosts and CIDRs apart */
                return 0;
        }
        _cleanup_free_ char *target = colon ? strndup(rule, (size_t) (colon - rule)) : strdup(rule);
        if (!target)
                return -ENOMEM;
        json_w_object_begin(w);
        json_w_kv_string(w, cidr ? "cidr" : "host", target);
        if (proto)
                json_w_kv_string(w, "proto", proto);
        int r = colon ? write_ports(w, colon + 1) : 0;
        json_w_object_end(w);
        return r;
}

/* Whether remove (as the user wrote it: any case, a trailing dot) names the entry's host or CIDR. */
static bool names_entry(const char *target, const char *remove) {
        size_t n = strlen(remove);
        if (n > 1 && remove[n - 1] == '.')
                n--;
        return strlen(target) == n && strncasecmp(target, remove, n) == 0;
}

/* Whether an entry goes: its host or CIDR is one of remove (each one that matched is marked in used). */
static bool entry_removed(const JsonValue *e, char *const *remove, bool *used) {
        const char *t = json_string(json_get(e, "host")) ?: json_string(json_get(e, "cidr")) ?: json_string(e);
        bool hit = false;
        for (size_t i = 0; t && remove && remove[i]; i++)
                if (names_entry(t, remove[i]))
                        hit = used[i] = true;
        return hit;
}

/* Writes list key: the old entries (unless cleared or removed), then the new ones. */
static int write_list(JsonWriter *w, const char *key, const JsonValue *old, char *const *remove, bool *used,
                      char *const *hosts, char *const *cidrs) {
        json_w_key(w, key);
        json_w_array_begin(w);
        for (size_t i = 0; i < json_array_size(old); i++) {
                const JsonValue *e = json_array_at(old, i);
                _cleanup_free_ char *text = NULL;
                if (entry_removed(e, remove, used))
                        continue;
                if (json_serialize(e, &text, NULL) < 0)
                        return -ENOMEM;
                json_w_raw(w, text);
        }
        for (char *const *s = hosts; s && *s; s++)
                if (cli_policy_write_rule(w, *s, CLI_RULE_HOST) < 0)
                        return -ENOMEM;
        for (char *const *s = cidrs; s && *s; s++)
                if (cli_policy_write_rule(w, *s, CLI_RULE_CIDR) < 0)
                        return -ENOMEM;
        json_w_array_end(w);
        return 0;
}

static char *ports_text(const JsonValue *ports, const char *proto) {
        _cleanup_free_ char *s = strdup(ports ? "" : "all");
        for (size_t i = 0; s && i < json_array_size(ports); i++) {
                _cleanup_free_ char *v = cli_value_text(json_array_at(ports, i));
                char *n = strjoin(s, i ? "," : "", v ?: "?");
                free(s);
                s = n;
        }
        if (s && proto) { /* 5000-5010/udp */
                char *n = strjoin(s, "/", proto);
                free(s);
                s = n;
        }
        return TAKE_PTR(s);
}

static int print_policy(const JsonValue *net) {
        static const char *const header[] = { "RULE", "KIND", "TARGET", "PORTS" };
        _cleanup_(cli_table_done) CliTable t = {};
        int r = cli_table_new(&t, header, ELEMENTSOF(header));
        if (r < 0)
                return cli_error_errno(r, "out of memory");
        for (int d = 0; d < 2; d++) {
                const JsonValue *l = json_get(net, d ? "deny" : "allow");
                for (size_t i = 0; i < json_array_size(l); i++) {
                        const JsonValue *e = json_array_at(l, i);
                        const char *h = json_string(json_get(e, "host")), *c = json_string(json_get(e, "cidr"));
                        char *row[] = {
                                strdup(d ? "deny" : "allow"),
                                strdup(h ? "host" : "cidr"),
                                strdup(h ?: c ?: "?"),
                                ports_text(json_get(e, "ports"), json_string(json_get(e, "proto"))),
                        };
                        if (cli_table_add(&t, row) < 0)
                                return -ENOMEM;
                }
        }
        const char *prec = json_string(json_get(net, "precedence")), *def = json_string(json_get(net, "default"));
        bool allow_wins = prec && streq(prec, "allow"), default_allow = def && streq(def, "allow");
        if (json_array_size(json_get(net, "allow")) == 0 && !default_allow)
                printf("no egress is allowed\n");
        if (allow_wins)
                printf("an allow rule wins over a deny rule\n");
        if (default_allow)
                printf("what no rule names is allowed (the host and other sandboxes never are)\n");
        cli_table_print(&t, stdout);
        return 0;
}

int cli_policy(int argc, char **argv) {
        _cleanup_strv_free_ char **allow = NULL, **allow_cidr = NULL, **deny = NULL, **deny_cidr = NULL,
                                 **remove = NULL;
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse cur = {}, resp = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *id = NULL, *path = NULL, *body = NULL;
        _cleanup_free_ bool *used = NULL;
        const char *arg = NULL;
        bool clear = false, show = false;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, options, &arg)) > 0) {
                char ***l = NULL;
                switch (r) {
                case OPT_ALLOW: l = &allow; break;
                case OPT_ALLOW_CIDR: l = &allow_cidr; break;
                case OPT_DENY: l = &deny; break;
                case OPT_DENY_CIDR: l = &deny_cidr; break;
                case OPT_REMOVE: l = &remove; break;
                case OPT_CLEAR: clear = true; break;
                case OPT_SHOW: show = true; break;
                }
                if (l) {
                        if (isempty(arg))
                                return cli_usage_error("option needs a non-empty value");
                        if (strv_extend(l, arg) < 0)
                                return cli_error_errno(-ENOMEM, "out of memory");
                }
        }
        r = cli_parser_end(&p, r, 1, 1);
        if (r <= 0)
                return r;
        id = cli_escape(p.pos[0]);
        path = strjoin("/v1/sandboxes/", id ?: "");
        if (!id || !path)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call("GET", path, NULL, &cur);
        if (r < 0)
                return r;
        const JsonValue *net = json_get(cur.json, "network");
        bool change = clear || allow || allow_cidr || deny || deny_cidr || remove;
        if (!change || show) {
                if (change)
                        return cli_usage_error("--show does not go with changes");
                if (arg_json) {
                        _cleanup_free_ char *text = NULL;
                        if (json_serialize(net, &text, NULL) < 0)
                                return cli_error_errno(-ENOMEM, "out of memory");
                        printf("%s\n", text);
                        return 0;
                }
                return print_policy(net);
        }

        if (clear && remove)
                return cli_usage_error("--remove does not go with --clear (which removes every rule)");
        used = new0(bool, strv_length(remove) + 1);
        if (!used)
                return cli_error_errno(-ENOMEM, "out of memory");
        json_w_init(&w);
        json_w_object_begin(&w);
        if (write_list(&w, "allow", clear ? NULL : json_get(net, "allow"), remove, used, allow, allow_cidr) < 0 ||
            write_list(&w, "deny", clear ? NULL : json_get(net, "deny"), remove, used, deny, deny_cidr) < 0)
                return cli_error_errno(-ENOMEM, "out of memory");
        /* the policy's precedence and default stay as they are (--clear: space's defaults again) */
        for (size_t i = 0; !clear && i < 2; i++) {
                const char *key = i == 0 ? "precedence" : "default", *v = json_string(json_get(net, key));
                if (v)
                        json_w_kv_string(&w, key, v);
        }
        json_w_object_end(&w);
        /* a typo in --remove must not pass for done: nothing is changed */
        for (size_t i = 0; remove && remove[i]; i++)
                if (!used[i])
                        return cli_error("--remove %s: the policy has no allow or deny rule for it (see 'space "
                                         "policy %s')", remove[i], p.pos[0]);
        r = json_w_finish(&w, &body, NULL);
        if (r < 0)
                return cli_error_errno(r, "out of memory");
        char *pp = strjoin(path, "/policy");
        if (!pp)
                return cli_error_errno(-ENOMEM, "out of memory");
        free(path);
        path = pp;
        r = cli_call("PUT", path, body, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        return print_policy(json_get(resp.json, "network"));
}
