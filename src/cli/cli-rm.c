/* SPDX-License-Identifier: MIT */
/* space rm ID...: DELETE /v1/sandboxes/{id} for each; goes on after a failure. */

#include "cli-common.h"
#include "cli-verbs.h"

int cli_rm(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        const char *arg = NULL;
        int r, ret = 0;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        r = cli_parser_next(&p, NULL, &arg);
        if (r == CLI_OPT_HELP)
                return 0;
        if (r < 0)
                return r;
        r = cli_parser_want(&p, 1, SIZE_MAX);
        if (r < 0)
                return r;

        for (size_t i = 0; i < p.n_pos; i++) {
                _cleanup_(cli_response_done) CliResponse resp = {};
                _cleanup_free_ char *id = cli_escape(p.pos[i]);
                _cleanup_free_ char *target = id ? strjoin("/v1/sandboxes/", id) : NULL;

                if (!target)
                        return cli_error_errno(-ENOMEM, "out of memory");
                r = cli_call("DELETE", target, NULL, &resp);
                if (r < 0) {
                        ret = r;
                        continue;
                }
                if (arg_json)
                        (void) cli_print_raw(resp.body, resp.body_len);
                else
                        printf("%s\n", p.pos[i]);
                fflush(stdout);
        }
        return ret;
}
