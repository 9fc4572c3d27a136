/* SPDX-License-Identifier: MIT */
/* space rm ID...: DELETE /v1/sandboxes/{id} for each; goes on after a failure. */

#include "cli-common.h"
#include "cli-verbs.h"

int cli_rm(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        int r;

        r = cli_parser_positionals(&p, argc, argv, 1, SIZE_MAX);
        if (r <= 0)
                return r;
        return cli_call_each(&p, 0, "DELETE", "/v1/sandboxes/", true);
}
