/* SPDX-License-Identifier: MIT */
/* space info: GET /v1/info as "key: value" lines. */

#include "cli-common.h"
#include "cli-verbs.h"

int cli_info(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        int r;

        r = cli_parser_positionals(&p, argc, argv, 0, 0);
        if (r <= 0)
                return r;

        r = cli_call("GET", "/v1/info", NULL, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        if (json_type(resp.json) != JSON_OBJECT)
                return cli_error("the server's answer is not an object");
        printf("url: %s\n", cli_url());
        cli_print_object(resp.json, NULL);
        return 0;
}
