/* SPDX-License-Identifier: MIT */
/* space tenant ls | show T | set T ...: /v1/tenants (quotas and usage). */

#include <inttypes.h>
#include <stdio.h>

#include "cli-common.h"
#include "cli-verbs.h"

/* The options of set, in the API's quota names; --cpu is in CPUs. */
static const struct {
        const char *option;
        const char *field;
} quota_options[] = {
        { "sandboxes", "sandboxes" }, { "cpu", "cpu_millis" },        { "memory", "memory_mb" },
        { "disk", "disk_mb" },        { "checkpoints", "checkpoints" }, { "rps", "rps" },
        { "streams", "streams" },
};

static const CliOption set_options[] = {
        { "sandboxes", 0, true, 1 }, { "cpu", 0, true, 2 },  { "memory", 0, true, 3 },  { "disk", 0, true, 4 },
        { "checkpoints", 0, true, 5 }, { "rps", 0, true, 6 }, { "streams", 0, true, 7 },
        { "default-runtime", 0, true, 8 }, {},
};

/* "used/limit", the limit "-" when unlimited; cpu in CPUs. */
static char *use_text(const JsonValue *t, const char *field, bool cpu) {
        uint64_t used = 0, limit = 0;
        bool has_use = json_uint64(json_get(json_get(t, "usage"), field), &used) >= 0;
        char buf[96], l[32];

        (void) json_uint64(json_get(json_get(t, "quotas"), field), &limit);
        if (limit == 0)
                snprintf(l, sizeof l, "-");
        else if (cpu)
                snprintf(l, sizeof l, "%g", (double) limit / 1000);
        else
                snprintf(l, sizeof l, "%" PRIu64, limit);
        if (!has_use)
                snprintf(buf, sizeof buf, "%s", l);
        else if (cpu)
                snprintf(buf, sizeof buf, "%g/%s", (double) used / 1000, l);
        else
                snprintf(buf, sizeof buf, "%" PRIu64 "/%s", used, l);
        return strdup(buf);
}

static void tenant_row(const JsonValue *x, char **c) {
        c[0] = cli_field_text(x, "name");
        c[1] = use_text(x, "sandboxes", false);
        c[2] = use_text(x, "cpu_millis", true);
        c[3] = use_text(x, "memory_mb", false);
        c[4] = use_text(x, "disk_mb", false);
        c[5] = use_text(x, "checkpoints", false);
        c[6] = use_text(x, "rps", false);
        c[7] = use_text(x, "streams", false);
}

static int tenant_ls(int argc, char **argv) {
        static const char *const header[] = { "NAME", "SANDBOXES", "CPU", "MEMORY_MB", "DISK_MB", "CHECKPOINTS",
                                              "RPS", "STREAMS" };
        return cli_list_verb(argc, argv, "/v1/tenants", "tenants", "tenant", header, ELEMENTSOF(header), tenant_row,
                             "(used/limit; '-' = unlimited)");
}

static int tenant_show(int argc, char **argv) {
        return cli_object_verb(argc, argv, "GET", "/v1/tenants/", NULL, NULL);
}

static int tenant_set(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *body = NULL, *target = NULL, *name = NULL;
        const char *arg = NULL;
        unsigned given = 0;
        size_t n;
        int r;

        json_w_init(&w);
        json_w_object_begin(&w);
        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, set_options, &arg)) > 0) {
                const char *option, *field;
                uint64_t v;

                if (r == 8) { /* not a quota */
                        if (!streq(arg, "ns") && !streq(arg, "vm") && !streq(arg, "auto") && !streq(arg, "default"))
                                return cli_error("--default-runtime must be ns, vm, auto or default (the host's)");
                        json_w_key(&w, "default_runtime");
                        if (streq(arg, "default"))
                                json_w_null(&w);
                        else
                                json_w_string(&w, arg);
                        given++;
                        continue;
                }
                option = quota_options[r - 1].option;
                field = quota_options[r - 1].field;

                json_w_key(&w, field);
                given++;
                if (streq(arg, "default")) {
                        json_w_null(&w);
                        continue;
                }
                if (streq(option, "cpu")) {
                        double cpus;
                        int k = cli_parse_double("--cpu", arg, &cpus);
                        if (k < 0)
                                return k;
                        if (!(cpus >= 0) || cpus > 1e9)
                                return cli_error("--cpu must be a number of CPUs >= 0 (0 = unlimited) or 'default'");
                        v = (uint64_t) (cpus * 1000 + 0.5);
                } else {
                        char o[32];
                        snprintf(o, sizeof o, "--%s", option);
                        int k = cli_parse_u64(o, arg, &v);
                        if (k < 0)
                                return k;
                }
                json_w_uint(&w, v);
        }
        r = cli_parser_end(&p, r, 1, 1);
        if (r <= 0)
                return r;
        if (given == 0)
                return cli_error("give at least one of --sandboxes, --cpu, --memory, --disk, --checkpoints, --rps, "
                                 "--streams (N, 0 = unlimited, or 'default') or --default-runtime ns|vm|auto|default");
        json_w_object_end(&w);
        if (json_w_finish(&w, &body, &n) < 0)
                return cli_error_errno(-ENOMEM, "out of memory");

        name = cli_escape(p.pos[0]);
        if (!name)
                return cli_error_errno(-ENOMEM, "out of memory");
        target = strdup_printf("/v1/tenants/%s", name);
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call("PUT", target, body, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        cli_print_object(resp.json, NULL);
        return 0;
}

int cli_tenant(int argc, char **argv) {
        static const CliSubcommand sub[] = {
                { "ls", tenant_ls },
                { "show", tenant_show },
                { "set", tenant_set },
        };

        return cli_run_subcommand("tenant", sub, ELEMENTSOF(sub), argc, argv);
}
