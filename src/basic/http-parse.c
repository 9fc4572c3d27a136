/* SPDX-License-Identifier: MIT */
/* HTTP/1.1 message heads (RFC 9112) and chunked framing, for hostile input:
 * strict grammar, every length bounded, framing ambiguities (request
 * smuggling: CL+TE, duplicate CL, unknown TE, obs-fold) refused. */

#include <stdio.h>
#include <strings.h>

#include "alloc-util.h"
#include "http-parse.h"

enum {
        CHUNK_SIZE = 0, /* reading "hex[;ext]\r\n" into d->line */
        CHUNK_DATA,
        CHUNK_DATA_CR,
        CHUNK_DATA_LF,
        CHUNK_TRAILER,    /* skipping trailer lines; d->remaining counts their bytes */
        CHUNK_TRAILER_LF, /* saw '\r' of a trailer line (or of the final empty line) */
        CHUNK_DONE,
};

#define CONTENT_LENGTH_DIGITS_MAX 18 /* fits int64_t */

static bool is_tchar(char c) {
        /* token = 1*tchar (RFC 9110 5.6.2); '_' is a tchar, so "lang_version" is fine. */
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
                return true;
        return c && strchr("!#$%&'*+-.^_`|~", c);
}

static bool is_ctl(unsigned char c) {
        return c < 0x20 || c == 0x7f;
}

/* field-vchar / SP / HTAB; obs-text (>= 0x80) is allowed in values. */
static bool is_field_char(unsigned char c) {
        return c == '\t' || !is_ctl(c);
}

static int unhex(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -EINVAL;
}

void http_head_done(HttpHead *h) {
        if (!h)
                return;
        free(h->target);
        free(h->path);
        free(h->query);
        free(h->reason);
        for (size_t i = 0; i < h->n_headers; i++) {
                free(h->headers[i].name);
                free(h->headers[i].value);
        }
        free(h->headers);
        *h = (HttpHead){ .content_length = -1 };
}

ssize_t http_head_length(const char *p, size_t n) {
        const char *e;

        if (!p)
                return 0;
        e = memmem(p, MIN(n, (size_t) HTTP_HEAD_MAX), "\r\n\r\n", 4);
        if (e)
                return (ssize_t) (e - p) + 4;
        /* The terminator may straddle the limit: allowed only if it ends within it. */
        if (n >= HTTP_HEAD_MAX)
                return -E2BIG;
        return 0;
}

/* Splits (p, n) at the next CRLF: the line excludes it. Bare CR or LF → -EINVAL. */
static int next_line(const char *p, size_t n, size_t *pos, Slice *ret) {
        size_t start = *pos;
        for (size_t i = start; i < n; i++) {
                if (p[i] == '\n')
                        return -EINVAL; /* bare LF */
                if (p[i] != '\r')
                        continue;
                if (i + 1 >= n || p[i + 1] != '\n')
                        return -EINVAL; /* bare CR */
                *ret = (Slice){ p + start, i - start };
                *pos = i + 2;
                return 0;
        }
        return -EINVAL; /* unterminated */
}

static Slice slice_trim_ows(Slice s) {
        while (s.n > 0 && (s.p[0] == ' ' || s.p[0] == '\t')) {
                s.p++;
                s.n--;
        }
        while (s.n > 0 && (s.p[s.n - 1] == ' ' || s.p[s.n - 1] == '\t'))
                s.n--;
        return s;
}

static int parse_content_length(Slice v, int64_t *ret) {
        int64_t x = 0;

        if (v.n == 0 || v.n > CONTENT_LENGTH_DIGITS_MAX)
                return -EINVAL;
        for (size_t i = 0; i < v.n; i++) {
                if (v.p[i] < '0' || v.p[i] > '9')
                        return -EINVAL;
                x = x * 10 + (v.p[i] - '0');
        }
        *ret = x;
        return 0;
}

/* Connection: a comma-separated list of tokens. */
static void parse_connection(Slice v, bool *close, bool *keep_alive) {
        while (v.n > 0) {
                const char *comma = memchr(v.p, ',', v.n);
                size_t l = comma ? (size_t) (comma - v.p) : v.n;
                Slice t = slice_trim_ows((Slice){ v.p, l });

                if (slice_eq_ci(t, "close"))
                        *close = true;
                else if (slice_eq_ci(t, "keep-alive"))
                        *keep_alive = true;
                if (!comma)
                        break;
                v.p += l + 1;
                v.n -= l + 1;
        }
}

static int parse_version(Slice v, int *ret_minor) {
        if (slice_eq(v, "HTTP/1.1"))
                *ret_minor = 1;
        else if (slice_eq(v, "HTTP/1.0"))
                *ret_minor = 0;
        else
                return -EINVAL;
        return 0;
}

/* Parses the header lines after the start line; fills headers, framing and keep-alive. */
static int parse_headers(const char *p, size_t n, size_t pos, bool request, HttpHead *h) {
        bool seen_cl = false, seen_te = false, conn_close = false, conn_keep_alive = false;
        unsigned n_host = 0;
        size_t allocated = 0;
        int r;

        for (;;) {
                Slice line, name, value;
                const char *colon;

                r = next_line(p, n, &pos, &line);
                if (r < 0)
                        return r;
                if (line.n == 0)
                        break;
                if (line.p[0] == ' ' || line.p[0] == '\t')
                        return -EINVAL; /* obs-fold */
                if (h->n_headers >= HTTP_HEADERS_MAX)
                        return -E2BIG;

                colon = memchr(line.p, ':', line.n);
                if (!colon || colon == line.p)
                        return -EINVAL;
                name = (Slice){ line.p, (size_t) (colon - line.p) };
                for (size_t i = 0; i < name.n; i++)
                        if (!is_tchar(name.p[i]))
                                return -EINVAL; /* also refuses whitespace before ':' */
                value = (Slice){ colon + 1, line.n - name.n - 1 };
                for (size_t i = 0; i < value.n; i++)
                        if (!is_field_char((unsigned char) value.p[i]))
                                return -EINVAL;
                value = slice_trim_ows(value);

                if (slice_eq_ci(name, "Content-Length")) {
                        int64_t cl;
                        r = parse_content_length(value, &cl);
                        if (r < 0)
                                return r;
                        if (seen_cl && cl != h->content_length)
                                return -EINVAL;
                        seen_cl = true;
                        h->content_length = cl;
                } else if (slice_eq_ci(name, "Transfer-Encoding")) {
                        /* Only exactly "chunked", once: anything else cannot be framed safely. */
                        if (seen_te || !slice_eq_ci(value, "chunked"))
                                return -EINVAL;
                        seen_te = true;
                        h->chunked = true;
                } else if (slice_eq_ci(name, "Connection"))
                        parse_connection(value, &conn_close, &conn_keep_alive);
                else if (slice_eq_ci(name, "Host"))
                        n_host++;

                if (GREEDY_REALLOC(h->headers, allocated, h->n_headers + 1) < 0)
                        return -ENOMEM;
                h->headers[h->n_headers] = (HttpHeader){
                        .name = memdup_suffix0(name.p, name.n),
                        .value = memdup_suffix0(value.p, value.n),
                };
                h->n_headers++;
                if (!h->headers[h->n_headers - 1].name || !h->headers[h->n_headers - 1].value)
                        return -ENOMEM;
        }
        if (pos != n)
                return -EINVAL; /* bytes after the empty line: not a single head */

        if (seen_cl && seen_te)
                return -EINVAL; /* request smuggling */
        if (seen_te && h->version_minor == 0)
                return -EINVAL; /* RFC 9112 6.1: faulty framing */
        if (request && (n_host > 1 || (h->version_minor == 1 && n_host == 0)))
                return -EINVAL;

        if (h->version_minor == 1)
                h->keep_alive = !conn_close;
        else
                h->keep_alive = conn_keep_alive && !conn_close;
        return 0;
}

static int parse_request_line(Slice line, HttpHead *h) {
        const char *sp1, *sp2, *q;
        Slice method, target, version;
        int r;

        sp1 = memchr(line.p, ' ', line.n);
        if (!sp1)
                return -EINVAL;
        method = (Slice){ line.p, (size_t) (sp1 - line.p) };
        if (method.n == 0)
                return -EINVAL;
        if (method.n >= sizeof(h->method))
                return -EINVAL;
        for (size_t i = 0; i < method.n; i++)
                if (!is_tchar(method.p[i]))
                        return -EINVAL;

        sp2 = memchr(sp1 + 1, ' ', line.n - method.n - 1);
        if (!sp2)
                return -EINVAL;
        target = (Slice){ sp1 + 1, (size_t) (sp2 - sp1 - 1) };
        version = (Slice){ sp2 + 1, line.n - (size_t) (sp2 + 1 - line.p) };

        r = parse_version(version, &h->version_minor);
        if (r < 0)
                return r;
        if (target.n == 0)
                return -EINVAL;
        if (target.n > HTTP_URL_MAX)
                return -ENAMETOOLONG;
        /* origin-form only: absolute-form, authority-form and '*' are not served. */
        if (target.p[0] != '/')
                return -EINVAL;
        for (size_t i = 0; i < target.n; i++) {
                unsigned char c = (unsigned char) target.p[i];
                if (c <= 0x20 || c >= 0x7f || c == '#')
                        return -EINVAL;
        }

        memcpy(h->method, method.p, method.n);
        h->method[method.n] = 0;

        h->target = memdup_suffix0(target.p, target.n);
        if (!h->target)
                return -ENOMEM;
        q = memchr(target.p, '?', target.n);
        if (q) {
                h->query = memdup_suffix0(q + 1, target.n - (size_t) (q + 1 - target.p));
                if (!h->query)
                        return -ENOMEM;
        }
        return http_percent_decode(target.p, q ? (size_t) (q - target.p) : target.n, false, &h->path);
}

int http_parse_request_head(const char *p, size_t n, HttpHead *ret) {
        _cleanup_(http_head_done) HttpHead h = { .content_length = -1 };
        size_t pos = 0;
        Slice line;
        int r;

        if (!p || !ret)
                return -EINVAL;
        *ret = (HttpHead){ .content_length = -1 };
        if (n > HTTP_HEAD_MAX)
                return -E2BIG;

        r = next_line(p, n, &pos, &line);
        if (r < 0)
                return r;
        r = parse_request_line(line, &h);
        if (r < 0)
                return r;
        r = parse_headers(p, n, pos, true, &h);
        if (r < 0)
                return r;

        *ret = h;
        h = (HttpHead){};
        return 0;
}

int http_parse_response_head(const char *p, size_t n, HttpHead *ret) {
        _cleanup_(http_head_done) HttpHead h = { .content_length = -1 };
        size_t pos = 0;
        Slice line, reason;
        int r;

        if (!p || !ret)
                return -EINVAL;
        *ret = (HttpHead){ .content_length = -1 };
        if (n > HTTP_HEAD_MAX)
                return -E2BIG;

        r = next_line(p, n, &pos, &line);
        if (r < 0)
                return r;
        /* "HTTP/1.1 200 OK" or "HTTP/1.1 200" (empty reason, with or without the SP) */
        if (line.n < 12 || line.p[8] != ' ')
                return -EINVAL;
        r = parse_version((Slice){ line.p, 8 }, &h.version_minor);
        if (r < 0)
                return r;
        for (size_t i = 9; i < 12; i++)
                if (line.p[i] < '0' || line.p[i] > '9')
                        return -EINVAL;
        h.status = (line.p[9] - '0') * 100 + (line.p[10] - '0') * 10 + (line.p[11] - '0');
        if (h.status < 100 || h.status > 599)
                return -EINVAL;
        if (line.n > 12 && line.p[12] != ' ')
                return -EINVAL;
        reason = line.n > 13 ? (Slice){ line.p + 13, line.n - 13 } : (Slice){ "", 0 };
        for (size_t i = 0; i < reason.n; i++)
                if (!is_field_char((unsigned char) reason.p[i]))
                        return -EINVAL;
        h.reason = memdup_suffix0(reason.p, reason.n);
        if (!h.reason)
                return -ENOMEM;

        r = parse_headers(p, n, pos, false, &h);
        if (r < 0)
                return r;

        *ret = h;
        h = (HttpHead){};
        return 0;
}

const char *http_head_header(const HttpHead *h, const char *name) {
        if (!h || !name)
                return NULL;
        for (size_t i = 0; i < h->n_headers; i++)
                if (strcasecmp(h->headers[i].name, name) == 0)
                        return h->headers[i].value;
        return NULL;
}

const char *http_head_upgrade(const HttpHead *h) {
        const char *conn = http_head_header(h, "Connection"), *up = http_head_header(h, "Upgrade");

        if (!conn || !up || *up == 0)
                return NULL;
        /* "Connection: keep-alive, Upgrade" */
        for (const char *p = conn; *p;) {
                size_t l;
                p += strspn(p, " \t,");
                l = strcspn(p, " \t,");
                if (l == 7 && strncasecmp(p, "upgrade", 7) == 0)
                        return up;
                p += l;
        }
        return NULL;
}

int http_percent_decode(const char *p, size_t n, bool plus_is_space, char **ret) {
        _cleanup_free_ char *s = NULL;
        size_t k = 0;

        if (!p && n > 0)
                return -EINVAL;
        s = malloc(n + 1);
        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                char c = p[i];
                if (c == '%') {
                        int hi, lo;
                        if (n - i < 3)
                                return -EINVAL;
                        hi = unhex(p[i + 1]);
                        lo = unhex(p[i + 2]);
                        if (hi < 0 || lo < 0)
                                return -EINVAL;
                        c = (char) (hi << 4 | lo);
                        i += 2;
                } else if (c == '+' && plus_is_space)
                        c = ' ';
                if (c == 0)
                        return -EINVAL;
                s[k++] = c;
        }
        s[k] = 0;
        *ret = TAKE_PTR(s);
        return 0;
}

char *http_percent_encode(const char *s) {
        static const char hex[] = "0123456789ABCDEF";
        size_t n;
        char *r, *o;

        if (!s)
                return NULL;
        n = strlen(s);
        if (n > (SIZE_MAX - 1) / 3)
                return NULL;
        r = malloc(n * 3 + 1);
        if (!r)
                return NULL;
        o = r;
        for (const unsigned char *i = (const unsigned char *) s; *i; i++) {
                /* RFC 3986 unreserved characters stay, everything else is escaped */
                if ((*i >= 'a' && *i <= 'z') || (*i >= 'A' && *i <= 'Z') || (*i >= '0' && *i <= '9') ||
                    *i == '-' || *i == '.' || *i == '_' || *i == '~')
                        *o++ = (char) *i;
                else {
                        *o++ = '%';
                        *o++ = hex[*i >> 4];
                        *o++ = hex[*i & 15];
                }
        }
        *o = 0;
        return r;
}

int http_query_get(const char *query, const char *key, char **ret) {
        const char *p;

        if (!key || !ret)
                return -EINVAL;
        if (!query)
                return -ENOENT;
        p = query;
        for (;;) {
                const char *amp = strchr(p, '&');
                size_t l = amp ? (size_t) (amp - p) : strlen(p);
                const char *eq = memchr(p, '=', l);
                size_t kl = eq ? (size_t) (eq - p) : l;

                if (l > 0) {
                        _cleanup_free_ char *k = NULL;
                        int r = http_percent_decode(p, kl, true, &k);
                        if (r < 0)
                                return r;
                        if (streq(k, key)) {
                                if (!eq)
                                        return http_percent_decode("", 0, true, ret);
                                return http_percent_decode(eq + 1, l - kl - 1, true, ret);
                        }
                }
                if (!amp)
                        return -ENOENT;
                p = amp + 1;
        }
}

/* "hex[ \t]*[;ext]" without the CRLF. */
static int parse_chunk_size(const char *line, size_t n, uint64_t *ret) {
        uint64_t v = 0;
        size_t i = 0;

        for (; i < n; i++) {
                int x = unhex(line[i]);
                if (x < 0)
                        break;
                if (v >= HTTP_CHUNK_SIZE_MAX >> 4)
                        return -EINVAL; /* overflow */
                v = v << 4 | (uint64_t) x;
        }
        if (i == 0)
                return -EINVAL;
        while (i < n && (line[i] == ' ' || line[i] == '\t'))
                i++;
        if (i < n) {
                if (line[i] != ';')
                        return -EINVAL;
                for (; i < n; i++)
                        if (!is_field_char((unsigned char) line[i]))
                                return -EINVAL;
        }
        *ret = v;
        return 0;
}

int http_chunk_decode(HttpChunkDecoder *d, const char *in, size_t n, char *out, size_t out_size,
                      size_t *ret_consumed, size_t *ret_produced) {
        size_t i = 0, o = 0;
        int r = 0;

        if (!d || (!in && n > 0) || (!out && out_size > 0))
                return -EINVAL;

        while (d->state != CHUNK_DONE && i < n) {
                char c = in[i];

                switch (d->state) {
                case CHUNK_SIZE:
                        if (c != '\n') {
                                if (d->line_len >= sizeof(d->line))
                                        return -EINVAL;
                                d->line[d->line_len++] = c;
                                i++;
                                break;
                        }
                        i++;
                        if (d->line_len == 0 || d->line[d->line_len - 1] != '\r')
                                return -EINVAL; /* bare LF */
                        r = parse_chunk_size(d->line, d->line_len - 1, &d->remaining);
                        if (r < 0)
                                return r;
                        d->line_len = 0;
                        d->state = d->remaining > 0 ? CHUNK_DATA : CHUNK_TRAILER;
                        break;

                case CHUNK_DATA: {
                        size_t k;
                        if (d->remaining == 0) {
                                d->state = CHUNK_DATA_CR;
                                break;
                        }
                        k = MIN((uint64_t) (n - i), d->remaining);
                        k = MIN(k, out_size - o);
                        if (k == 0)
                                goto out; /* output full */
                        memcpy(out + o, in + i, k);
                        i += k;
                        o += k;
                        d->remaining -= k;
                        if (d->remaining == 0)
                                d->state = CHUNK_DATA_CR;
                        break;
                }

                case CHUNK_DATA_CR:
                        if (c != '\r')
                                return -EINVAL;
                        i++;
                        d->state = CHUNK_DATA_LF;
                        break;

                case CHUNK_DATA_LF:
                        if (c != '\n')
                                return -EINVAL;
                        i++;
                        d->state = CHUNK_SIZE;
                        break;

                case CHUNK_TRAILER:
                        i++;
                        if (c == '\r') {
                                d->state = CHUNK_TRAILER_LF;
                                break;
                        }
                        if (c == '\n' || !is_field_char((unsigned char) c))
                                return -EINVAL;
                        if (d->line_len == 0 && (c == ' ' || c == '\t'))
                                return -EINVAL; /* obs-fold */
                        d->line_len++;
                        if (++d->remaining > HTTP_TRAILERS_MAX)
                                return -EINVAL;
                        break;

                case CHUNK_TRAILER_LF:
                        if (c != '\n')
                                return -EINVAL;
                        i++;
                        if (d->line_len == 0) {
                                d->state = CHUNK_DONE;
                                d->done = true;
                        } else {
                                d->line_len = 0;
                                d->state = CHUNK_TRAILER;
                        }
                        break;

                default:
                        return -EINVAL;
                }
        }
out:
        if (ret_consumed)
                *ret_consumed = i;
        if (ret_produced)
                *ret_produced = o;
        return d->state == CHUNK_DONE;
}

const char *http_status_reason(int status) {
        switch (status) {
        case 100: return "Continue";
        case 101: return "Switching Protocols";
        case 200: return "OK";
        case 201: return "Created";
        case 202: return "Accepted";
        case 204: return "No Content";
        case 206: return "Partial Content";
        case 301: return "Moved Permanently";
        case 302: return "Found";
        case 304: return "Not Modified";
        case 307: return "Temporary Redirect";
        case 308: return "Permanent Redirect";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 409: return "Conflict";
        case 410: return "Gone";
        case 411: return "Length Required";
        case 413: return "Content Too Large";
        case 414: return "URI Too Long";
        case 415: return "Unsupported Media Type";
        case 416: return "Range Not Satisfiable";
        case 417: return "Expectation Failed";
        case 421: return "Misdirected Request";
        case 422: return "Unprocessable Content";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 501: return "Not Implemented";
        case 502: return "Bad Gateway";
        case 503: return "Service Unavailable";
        case 504: return "Gateway Timeout";
        case 505: return "HTTP Version Not Supported";
        case 507: return "Insufficient Storage";
        default: return "Unknown";
        }
}
