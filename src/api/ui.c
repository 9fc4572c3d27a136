/* SPDX-License-Identifier: MIT */
/* /ui: the web dashboard's static files, from the table embedded at build
 * time (ui-assets.h). Nothing is read from the file system, so a path can
 * only name an entry of the table: no traversal by construction, and the
 * name is also checked to be one plain file name. The page needs no auth of
 * its own: it asks for an API key and calls /v1 with it (Bearer, no cookies,
 * so no CSRF). Every answer carries a strict Content-Security-Policy: scripts
 * only from here, requests only to here. Styles allow 'unsafe-inline'
 * because xterm.js writes its measured cell sizes and theme into <style>
 * elements; a style cannot run code. */

#include <stdio.h>

#include "api-internal.h"
#include "str-util.h"
#include "ui-assets.h"

#define UI_NAME_MAX 64U

#define UI_HEADERS                                                                                      \
        "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self' "            \
        "'unsafe-inline'; connect-src 'self'; img-src 'self' data:; font-src 'self'; base-uri 'none'; " \
        "form-action 'none'; frame-ancestors 'none'\r\n"                                                \
        "X-Content-Type-Options: nosniff\r\n"                                                           \
        "X-Frame-Options: DENY\r\n"                                                                     \
        "Referrer-Policy: no-referrer\r\n"                                                              \
        "Cross-Origin-Opener-Policy: same-origin\r\n"                                                   \
        "Cache-Control: no-cache\r\n"

bool api_ui_path(const char *path) {
        return path && (streq(path, "/ui") || startswith(path, "/ui/"));
}

/* One file name of the table: letters, digits, '.', '-', '_', not starting with a dot. */
static bool name_valid(const char *name) {
        size_t n = strlen(name);

        if (n == 0 || n > UI_NAME_MAX || name[0] == '.')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_", name[i]))
                        return false;
        return true;
}

static const UiAsset *lookup(const char *path) {
        const char *name = path[3] == 0 || streq(path, "/ui/") ? "index.html" : path + 4;

        if (!name_valid(name))
                return NULL;
        for (size_t i = 0; i < ui_assets_count; i++)
                if (streq(ui_assets[i].name, name))
                        return &ui_assets[i];
        return NULL;
}

static int respond(ApiRequest *r, int status, const char *content_type, const void *body, size_t n,
                   const char *more) {
        char hdr[1024];

        /* a body we did not read would be parsed as the next request */
        if (r->head->content_length > 0 || r->head->chunked)
                http_conn_set_close(r->conn);
        snprintf(hdr, sizeof hdr, "X-Request-Id: %s\r\n" UI_HEADERS "%s", r->req_id, strempty(more));
        r->status = status;
        return http_conn_respond(r->conn, status, content_type, body, n, hdr);
}

int api_ui_serve(ApiRequest *r) {
        static const char not_found[] = "not found\n";
        const UiAsset *a;
        const char *inm;
        char more[96];

        if (!streq(r->head->method, "GET") && !streq(r->head->method, "HEAD")) {
                static const char msg[] = "only GET and HEAD\n";
                return respond(r, 405, "text/plain; charset=utf-8", msg, STRLEN(msg), "Allow: GET, HEAD\r\n");
        }
        a = lookup(r->head->path);
        if (!a)
                return respond(r, 404, "text/plain; charset=utf-8", not_found, STRLEN(not_found), NULL);

        snprintf(more, sizeof more, "ETag: %s\r\n", a->etag);
        inm = http_head_header(r->head, "If-None-Match");
        if (inm && streq(inm, a->etag))
                return respond(r, 304, NULL, NULL, 0, more);
        return respond(r, 200, a->content_type, a->data, a->size, more);
}
