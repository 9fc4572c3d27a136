/* SPDX-License-Identifier: MIT */
/* space port ID PORT / space open ID PORT: the ingress URL of a sandbox's
 * port (GET /v1/sandboxes/{id}/ports/{port}). port prints the URL, the
 * one-time link for a browser and the traffic token for scripts; open
 * prints the link alone (to paste into a browser or hand to xdg-open). */

#include "cli-common.h"
#include "cli-verbs.h"

static int port_call(int argc, char **argv, bool link_only) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *id = NULL, *port = NULL, *target = NULL;
        const char *url, *link, *token, *header;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 2, 2);
        if (r <= 0)
                return r;
        id = cli_escape(p.pos[0]);
        port = cli_escape(p.pos[1]);
        target = id && port ? strjoin("/v1/sandboxes/", id, "/ports/", port) : NULL;
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call("GET", target, NULL, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        url = json_string(json_get(resp.json, "url"));
        link = json_string(json_get(resp.json, "link"));
        token = json_string(json_get(resp.json, "token"));
        header = json_string(json_get(resp.json, "token_header"));
        if (!url || !link || !token || !header)
                return cli_error("the server's answer lacks url, link or token");
        if (link_only) {
                printf("%s\n", link);
                return 0;
        }
        printf("%s\n", url);
        printf("link: %s   (once, sets a cookie in a browser; expires %s)\n", link,
               strna(json_string(json_get(resp.json, "link_expires_at"))));
        printf("token: %s   (as header %s: %s)\n", token, header, token);
        return 0;
}

int cli_port(int argc, char **argv) {
        return port_call(argc, argv, false);
}

int cli_open(int argc, char **argv) {
        return port_call(argc, argv, true);
}
