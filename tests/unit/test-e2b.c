/* SPDX-License-Identifier: MIT */
/* The E2B surface's pure parts: Connect envelopes, proto3-JSON helpers,
 * output formats, the streaming multipart parser, passwd lookups and path
 * resolution; and the agent's FILE_WATCH through the real space-agent. */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "alloc-util.h"
#include "e2b.h"
#include "fd-util.h"
#include "str-util.h"
#include "test.h"

/* ---- envelopes ---- */

TEST(envelope_roundtrip) {
        uint8_t buf[64];
        uint8_t flags = 0xff;
        size_t size = 0;
        Slice msg = {};

        e2b_envelope_header(buf, 0, 2);
        memcpy(buf + 5, "{}", 2);
        ASSERT_EQ(buf[0], 0);
        ASSERT_EQ(buf[4], 2);
        for (size_t n = 0; n < 7; n++)
                ASSERT_EQ(e2b_envelope_decode(buf, n, 100, &flags, &msg, &size), 0); /* needs more */
        ASSERT_EQ(e2b_envelope_decode(buf, 7, 100, &flags, &msg, &size), 1);
        ASSERT_EQ(flags, 0);
        ASSERT_EQ(size, 7);
        ASSERT_EQ(msg.n, 2);
        ASSERT_TRUE(memcmp(msg.p, "{}", 2) == 0);

        e2b_envelope_header(buf, E2B_ENVELOPE_FLAG_END, 0x01020304);
        ASSERT_EQ(buf[1], 1);
        ASSERT_EQ(buf[2], 2);
        ASSERT_EQ(buf[3], 3);
        ASSERT_EQ(buf[4], 4);
        ASSERT_ERRNO(e2b_envelope_decode(buf, 5, 1000, &flags, &msg, &size), EMSGSIZE);
}

TEST(envelope_bad_flags) {
        uint8_t buf[8] = { 0x01, 0, 0, 0, 1, 'x' };
        uint8_t flags;
        size_t size;
        Slice msg;

        ASSERT_ERRNO(e2b_envelope_decode(buf, 6, 100, &flags, &msg, &size), EBADMSG); /* compressed */
        buf[0] = 0x80;
        ASSERT_ERRNO(e2b_envelope_decode(buf, 6, 100, &flags, &msg, &size), EBADMSG); /* unknown bit */
        buf[0] = 0x02;
        ASSERT_EQ(e2b_envelope_decode(buf, 6, 100, &flags, &msg, &size), 1);
        ASSERT_EQ(flags, E2B_ENVELOPE_FLAG_END);
}

TEST(envelope_request) {
        uint8_t buf[32];
        Slice msg;

        e2b_envelope_header(buf, 0, 2);
        memcpy(buf + 5, "{}", 2);
        ASSERT_OK(e2b_envelope_request(buf, 7, &msg));
        ASSERT_EQ(msg.n, 2);
        ASSERT_ERRNO(e2b_envelope_request(buf, 6, &msg), EBADMSG);  /* truncated */
        ASSERT_ERRNO(e2b_envelope_request(buf, 0, &msg), EBADMSG);  /* empty */
        memcpy(buf + 7, buf, 7);
        ASSERT_ERRNO(e2b_envelope_request(buf, 14, &msg), EBADMSG); /* two messages */
        buf[0] = E2B_ENVELOPE_FLAG_END;
        ASSERT_ERRNO(e2b_envelope_request(buf, 7, &msg), EBADMSG);  /* an end-stream envelope */
        e2b_envelope_header(buf, 0, E2B_BODY_MAX + 1);
        ASSERT_ERRNO(e2b_envelope_request(buf, 7, &msg), EMSGSIZE);
}

TEST(connect_codes) {
        ASSERT_STREQ(e2b_connect_code(API_NOT_FOUND), "not_found");
        ASSERT_EQ(e2b_connect_status(API_NOT_FOUND), 404);
        ASSERT_STREQ(e2b_connect_code(API_INVALID_PATH), "invalid_argument");
        ASSERT_EQ(e2b_connect_status(API_INVALID_PATH), 400);
        ASSERT_STREQ(e2b_connect_code(API_UNAUTHORIZED), "unauthenticated");
        ASSERT_EQ(e2b_connect_status(API_UNAUTHORIZED), 401);
        ASSERT_STREQ(e2b_connect_code(API_ALREADY_EXISTS), "already_exists");
        ASSERT_EQ(e2b_connect_status(API_ALREADY_EXISTS), 409);
        ASSERT_STREQ(e2b_connect_code(API_BAD_GATEWAY), "unavailable");
        ASSERT_STREQ(e2b_connect_code(API_WORKER_UNAVAILABLE), "unavailable");
        ASSERT_EQ(e2b_connect_status(API_BAD_GATEWAY), 503);
        ASSERT_STREQ(e2b_connect_code(API_NOT_IMPLEMENTED), "unimplemented");
        ASSERT_EQ(e2b_connect_status(API_NOT_IMPLEMENTED), 501);
        ASSERT_EQ(e2b_connect_status(API_TIMEOUT), 504);
        ASSERT_EQ(e2b_connect_status(API_INTERNAL), 500);
        ASSERT_EQ(e2b_connect_status(API_UNSUPPORTED_MEDIA), 415);
        ASSERT_STREQ(e2b_connect_code(API_INSUFFICIENT_STORAGE), "resource_exhausted");
}

/* ---- proto3 JSON ---- */

static JsonValue *parse(const char *s) {
        JsonValue *v = NULL;
        ASSERT_OK(json_parse(s, strlen(s), &v, NULL, 0));
        return v;
}

TEST(proto3_fields) {
        _cleanup_json_ JsonValue *v = parse("{\"includeEntry\":true,\"allow_network_mounts\":false,\"n\":null}");
        bool b = false;

        ASSERT_OK(json_bool(e2b_field(v, "includeEntry", "include_entry"), &b));
        ASSERT_TRUE(b);
        ASSERT_NOT_NULL(e2b_field(v, "allowNetworkMounts", "allow_network_mounts"));
        ASSERT_NULL(e2b_field(v, "n", NULL)); /* null is absent */
        ASSERT_NULL(e2b_field(v, "missing", "also_missing"));
        ASSERT_NULL(e2b_field(NULL, "x", NULL));
}

TEST(proto3_bytes) {
        _cleanup_json_ JsonValue *v = parse("[\"aGkK\",\"aGk\",\"-_8=\",\"+/8=\",\"a!b\",3,\"\"]");
        void *p = NULL;
        size_t n = 0;

        ASSERT_OK(e2b_bytes_decode(json_array_at(v, 0), &p, &n));
        ASSERT_EQ(n, 3);
        ASSERT_TRUE(memcmp(p, "hi\n", 3) == 0);
        p = mfree(p);
        ASSERT_OK(e2b_bytes_decode(json_array_at(v, 1), &p, &n)); /* unpadded */
        ASSERT_EQ(n, 2);
        p = mfree(p);
        ASSERT_OK(e2b_bytes_decode(json_array_at(v, 2), &p, &n)); /* URL-safe */
        ASSERT_EQ(n, 2);
        ASSERT_EQ(((uint8_t *) p)[0], 0xfb);
        ASSERT_EQ(((uint8_t *) p)[1], 0xff);
        p = mfree(p);
        ASSERT_OK(e2b_bytes_decode(json_array_at(v, 3), &p, &n));
        ASSERT_EQ(((uint8_t *) p)[0], 0xfb);
        p = mfree(p);
        ASSERT_ERRNO(e2b_bytes_decode(json_array_at(v, 4), &p, &n), EINVAL);
        ASSERT_ERRNO(e2b_bytes_decode(json_array_at(v, 5), &p, &n), EINVAL);
        ASSERT_OK(e2b_bytes_decode(json_array_at(v, 6), &p, &n));
        ASSERT_EQ(n, 0);
        free(p);
}

TEST(proto3_numbers_and_enums) {
        static const char *const sig[] = { [0] = "SIGNAL_UNSPECIFIED", [9] = "SIGNAL_SIGKILL", [15] = "SIGNAL_SIGTERM" };
        _cleanup_json_ JsonValue *v = parse("[7,\"8\",-1,4294967296,\"x\",1.5,\"SIGNAL_SIGKILL\",15,3,16,\"SIGKILL\"]");
        uint32_t u = 0;
        int e = -1;

        ASSERT_OK(e2b_uint32(json_array_at(v, 0), &u));
        ASSERT_EQ(u, 7);
        ASSERT_OK(e2b_uint32(json_array_at(v, 1), &u));
        ASSERT_EQ(u, 8);
        ASSERT_TRUE(e2b_uint32(json_array_at(v, 2), &u) < 0);
        ASSERT_ERRNO(e2b_uint32(json_array_at(v, 3), &u), ERANGE);
        ASSERT_TRUE(e2b_uint32(json_array_at(v, 4), &u) < 0);
        ASSERT_TRUE(e2b_uint32(json_array_at(v, 5), &u) < 0);
        ASSERT_OK(e2b_enum(json_array_at(v, 6), sig, ELEMENTSOF(sig), &e));
        ASSERT_EQ(e, 9);
        ASSERT_OK(e2b_enum(json_array_at(v, 7), sig, ELEMENTSOF(sig), &e));
        ASSERT_EQ(e, 15);
        ASSERT_ERRNO(e2b_enum(json_array_at(v, 8), sig, ELEMENTSOF(sig), &e), EINVAL);  /* a hole */
        ASSERT_ERRNO(e2b_enum(json_array_at(v, 9), sig, ELEMENTSOF(sig), &e), EINVAL);  /* out of range */
        ASSERT_ERRNO(e2b_enum(json_array_at(v, 10), sig, ELEMENTSOF(sig), &e), EINVAL); /* not the proto name */
}

TEST(output_formats) {
        char t[E2B_TIME_MAX], m[E2B_MODE_STRING_MAX];

        e2b_time_format(INT64_C(1704164645123456789), t);
        ASSERT_STREQ(t, "2024-01-02T03:04:05.123456789Z");
        e2b_time_format(0, t);
        ASSERT_STREQ(t, "1970-01-01T00:00:00.000000000Z");

        e2b_mode_string(S_IFREG | 0644, m);
        ASSERT_STREQ(m, "-rw-r--r--");
        e2b_mode_string(S_IFDIR | 0755, m);
        ASSERT_STREQ(m, "drwxr-xr-x");
        e2b_mode_string(S_IFLNK | 0777, m);
        ASSERT_STREQ(m, "Lrwxrwxrwx");
        e2b_mode_string(S_IFDIR | S_ISVTX | 0777, m);
        ASSERT_STREQ(m, "dtrwxrwxrwx");
        e2b_mode_string(S_IFREG | S_ISUID | 0755, m);
        ASSERT_STREQ(m, "urwxr-xr-x");
        e2b_mode_string(S_IFCHR | 0666, m);
        ASSERT_STREQ(m, "Dcrw-rw-rw-");
        e2b_mode_string(S_IFIFO | 0600, m);
        ASSERT_STREQ(m, "prw-------");
}

/* ---- multipart ---- */

typedef struct Parts {
        char names[8][64];
        char files[8][128];
        char data[8][256];
        size_t len[8];
        size_t n;
        int fail_at_data; /* > 0: the callback fails on this DATA call */
        int data_calls;
        bool discard;     /* count data only */
        size_t discarded;
} Parts;

static int collect(E2bMultipart *m, E2bMultipartEvent ev, const char *p, size_t n, void *userdata) {
        Parts *ps = userdata;

        switch (ev) {
        case E2B_MULTIPART_PART_BEGIN:
                ASSERT_TRUE(ps->n < 8);
                snprintf(ps->names[ps->n], sizeof ps->names[0], "%s", m->name);
                snprintf(ps->files[ps->n], sizeof ps->files[0], "%s", m->has_filename ? m->filename : "(none)");
                ps->len[ps->n] = 0;
                break;
        case E2B_MULTIPART_DATA:
                if (ps->fail_at_data > 0 && ++ps->data_calls == ps->fail_at_data)
                        return -ENOSPC;
                if (ps->discard) {
                        ps->discarded += n;
                        break;
                }
                ASSERT_TRUE(ps->len[ps->n] + n < sizeof ps->data[0]);
                memcpy(ps->data[ps->n] + ps->len[ps->n], p, n);
                ps->len[ps->n] += n;
                break;
        case E2B_MULTIPART_PART_END:
                ps->data[ps->n][ps->len[ps->n]] = 0;
                ps->n++;
                break;
        }
        return 0;
}

static const char two_parts[] =
        "preamble to ignore\r\n"
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"file\"; filename=\"/tmp/a %22q%22.txt\"\r\n"
        "Content-Type: application/octet-stream\r\n"
        "\r\n"
        "hello\r\n--XyNot-a-delimiter\r\n-- world"
        "\r\n--XyZ\r\n"
        "Content-Disposition: form-data; name=\"other\"\r\n"
        "\r\n"
        "\r\n"
        "\r\n--XyZ--\r\n"
        "epilogue";

/* Feeds body in pieces of step bytes (0: all at once), then the end. */
static int feed_all(const char *ct, const char *body, size_t len, size_t step, Parts *ps) {
        _cleanup_(e2b_multipart_done) E2bMultipart m = {};
        int r = 0;

        ASSERT_OK(e2b_multipart_init(&m, ct));
        for (size_t off = 0; off < len && r == 0;) {
                size_t n = step ? MIN(step, len - off) : len;
                r = e2b_multipart_feed(&m, body + off, n, collect, ps);
                off += n;
        }
        if (r < 0)
                return r;
        return e2b_multipart_feed(&m, NULL, 0, collect, ps);
}

TEST(multipart_parts_any_chunking) {
        size_t steps[] = { 0, 1, 2, 3, 5, 7, 13, 64 };

        for (size_t i = 0; i < ELEMENTSOF(steps); i++) {
                Parts ps = {};
                ASSERT_EQ(feed_all("multipart/form-data; boundary=XyZ", two_parts, strlen(two_parts), steps[i], &ps), 1);
                ASSERT_EQ(ps.n, 2);
                ASSERT_STREQ(ps.names[0], "file");
                ASSERT_STREQ(ps.files[0], "/tmp/a \"q\".txt");
                ASSERT_EQ(ps.len[0], strlen("hello\r\n--XyNot-a-delimiter\r\n-- world"));
                ASSERT_STREQ(ps.data[0], "hello\r\n--XyNot-a-delimiter\r\n-- world");
                ASSERT_STREQ(ps.names[1], "other");
                ASSERT_STREQ(ps.files[1], "(none)");
                ASSERT_STREQ(ps.data[1], "\r\n");
        }
}

TEST(multipart_boundaries_and_bodies) {
        static const char body[] = "--b\r\nContent-Disposition: form-data; name=file; filename=x\r\n\r\n\r\n--b--";
        static const char binary[] = "--b\r\ncontent-disposition: form-data; name=\"file\"; filename=\"a\\\"b\"\r\n\r\n"
                                     "\r\r\n\n--\r\n-b\r\n--b--\r\n";
        _cleanup_(e2b_multipart_done) E2bMultipart m = {};
        Parts ps = {};

        /* the first delimiter may open the body; an empty part; a quoted boundary */
        ASSERT_EQ(feed_all("multipart/form-data; charset=x; boundary=\"b\"", body, strlen(body), 1, &ps), 1);
        ASSERT_EQ(ps.n, 1);
        ASSERT_STREQ(ps.files[0], "x");
        ASSERT_EQ(ps.len[0], 0);
        ps = (Parts){};
        ASSERT_EQ(feed_all("MULTIPART/FORM-DATA;boundary=b", binary, strlen(binary), 4, &ps), 1);
        ASSERT_STREQ(ps.files[0], "a\"b");
        ASSERT_STREQ(ps.data[0], "\r\r\n\n--\r\n-b");

        ASSERT_ERRNO(e2b_multipart_init(&m, "application/octet-stream"), EINVAL);
        ASSERT_ERRNO(e2b_multipart_init(&m, "multipart/form-data"), EINVAL);
        ASSERT_ERRNO(e2b_multipart_init(&m, "multipart/form-data; boundary="), EINVAL);
        ASSERT_ERRNO(e2b_multipart_init(&m, "multipart/form-data; boundary=\"open"), EINVAL);
        ASSERT_ERRNO(e2b_multipart_init(&m, "multipart/form-data; boundary="
                                            "01234567890123456789012345678901234567890123456789012345678901234567890"),
                     EINVAL); /* 71 > 70 */
        ASSERT_ERRNO(e2b_multipart_init(&m, "multipart/form-dataX; boundary=b"), EINVAL);
}

TEST(multipart_malformed) {
        static const char *const bad[] = {
                "--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nno end",  /* truncated */
                "--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--",                /* no disposition */
                "--b\r\nContent-Disposition: attachment; name=\"file\"\r\n\r\nx\r\n--b--",
                "--b\r\nContent-Disposition: form-data; name=\"unterminated\r\n\r\nx\r\n--b--",
                "--bX\r\n",                                                            /* bad after delimiter */
                "--b\r\nno colon here\r\n\r\nx\r\n--b--",
                "no delimiter at all",
                "",
        };
        Parts ps = {};

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                ps = (Parts){};
                ASSERT_ERRNO(feed_all("multipart/form-data; boundary=b", bad[i], strlen(bad[i]), 3, &ps), EBADMSG);
        }
}

TEST(multipart_limits_and_callback_errors) {
        _cleanup_free_ char *big = NULL, *body = NULL;
        size_t n = E2B_MULTIPART_HEADERS_MAX + 100;
        Parts ps = {};

        big = malloc(n + 1);
        ASSERT_NOT_NULL(big);
        memset(big, 'a', n);
        big[n] = 0;
        body = strdup_printf("--b\r\nContent-Disposition: form-data; name=\"file\"\r\nX-Long: %s\r\n\r\nx\r\n--b--", big);
        ASSERT_NOT_NULL(body);
        ASSERT_ERRNO(feed_all("multipart/form-data; boundary=b", body, strlen(body), 4096, &ps), E2BIG);

        /* a body much larger than the buffer passes through in pieces */
        free(body);
        body = malloc(200000);
        ASSERT_NOT_NULL(body);
        {
                _cleanup_(e2b_multipart_done) E2bMultipart m = {};
                static const char head[] = "--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n";
                size_t total = 0;
                int r;

                ASSERT_OK(e2b_multipart_init(&m, "multipart/form-data; boundary=b"));
                ASSERT_EQ(e2b_multipart_feed(&m, head, strlen(head), collect, &ps), 0);
                memset(body, 'z', 200000);
                ps.fail_at_data = 8;
                ps.discard = true;
                for (int i = 0; i < 10; i++) {
                        r = e2b_multipart_feed(&m, body, 200000, collect, &ps);
                        if (r < 0)
                                break;
                        total += 200000;
                }
                ASSERT_ERRNO(r, ENOSPC); /* the callback's error comes back */
                ASSERT_TRUE(total >= 200000);
                ASSERT_TRUE(ps.discarded >= 200000 - 8); /* all but a possible delimiter's start passed */
        }
}

/* ---- users and paths ---- */

static const char passwd[] = "root:x:0:0:root:/root:/bin/bash\n"
                             "broken line\n"
                             "user:x:1000:1000:user:/home/user:/bin/bash\n"
                             "big:x:99999999999:1:x:/home/big:/bin/sh\n"
                             "nohome:x:1001:1001:x::/bin/sh\n"
                             "rel:x:1002:1002:x:home/rel:/bin/sh\n"
                             "last:x:1003:1004:x:/l:/bin/sh";

TEST(passwd_lookup) {
        E2bUser u;
        char name[64];

        ASSERT_OK(e2b_passwd_find(passwd, strlen(passwd), "user", &u));
        ASSERT_EQ(u.uid, 1000);
        ASSERT_EQ(u.gid, 1000);
        ASSERT_STREQ(u.home, "/home/user");
        ASSERT_OK(e2b_passwd_find(passwd, strlen(passwd), "last", &u)); /* no final newline */
        ASSERT_EQ(u.gid, 1004);
        ASSERT_ERRNO(e2b_passwd_find(passwd, strlen(passwd), "big", &u), ENOENT);    /* uid out of range */
        ASSERT_ERRNO(e2b_passwd_find(passwd, strlen(passwd), "nohome", &u), ENOENT); /* no home */
        ASSERT_ERRNO(e2b_passwd_find(passwd, strlen(passwd), "rel", &u), ENOENT);    /* relative home */
        ASSERT_ERRNO(e2b_passwd_find(passwd, strlen(passwd), "us", &u), ENOENT);
        ASSERT_ERRNO(e2b_passwd_find(passwd, strlen(passwd), "", &u), ENOENT);
        ASSERT_ERRNO(e2b_passwd_find(NULL, 0, "root", &u), ENOENT);
        /* the buffer is not NUL-terminated where it ends */
        ASSERT_ERRNO(e2b_passwd_find(passwd, 20, "user", &u), ENOENT);

        ASSERT_OK(e2b_id_name(passwd, strlen(passwd), 1000, name, sizeof name));
        ASSERT_STREQ(name, "user");
        ASSERT_OK(e2b_id_name(passwd, strlen(passwd), 0, name, sizeof name));
        ASSERT_STREQ(name, "root");
        ASSERT_ERRNO(e2b_id_name(passwd, strlen(passwd), 4242, name, sizeof name), ENOENT);
        ASSERT_ERRNO(e2b_id_name(passwd, strlen(passwd), 1000, name, 3), ENOENT); /* does not fit */
        ASSERT_OK(e2b_id_name("wheel:x:10:root\n", 16, 10, name, sizeof name));   /* /etc/group lines */
        ASSERT_STREQ(name, "wheel");
}

static void check_path(const char *in, const char *home, const char *want) {
        _cleanup_free_ char *out = NULL;
        ApiError e = {};

        if (e2b_path_resolve(in, strlen(in), home, &out, &e) < 0)
                test_fail(__FILE__, __LINE__, "'%s' failed: %s", in, e.message);
        if (!streq(out, want))
                test_fail(__FILE__, __LINE__, "'%s' → '%s', expected '%s'", in, out, want);
}

TEST(path_resolve) {
        _cleanup_free_ char *out = NULL, *huge = NULL;
        ApiError e = {};

        check_path("/tmp/a", "/home/user", "/tmp/a");
        check_path("a.txt", "/home/user", "/home/user/a.txt");
        check_path("~", "/home/user", "/home/user");
        check_path("~/", "/home/user", "/home/user");
        check_path("~/x/y", "/home/user", "/home/user/x/y");
        check_path("~x", "/home/user", "/home/user/~x");
        check_path("/a/./b//c/", "/", "/a/b/c");
        check_path("/a/../b", "/", "/b");
        check_path("/../../etc", "/", "/etc");
        check_path("..", "/home/user", "/home");
        check_path("../../../..", "/home/user", "/");
        check_path("x", "/", "/x");
        check_path("/", "/home/user", "/");

        ASSERT_ERRNO(e2b_path_resolve("", 0, "/", &out, &e), EINVAL);
        ASSERT_EQ(e.code, API_INVALID_PATH);
        ASSERT_ERRNO(e2b_path_resolve("a\0b", 3, "/", &out, &e), EINVAL);
        huge = malloc(API_PATH_MAX + 2);
        ASSERT_NOT_NULL(huge);
        memset(huge, 'a', API_PATH_MAX + 1);
        huge[0] = '/';
        ASSERT_ERRNO(e2b_path_resolve(huge, API_PATH_MAX + 1, "/", &out, &e), ENAMETOOLONG);
        /* relative to a long home it may grow past the limit */
        huge[API_PATH_MAX - 10] = 0;
        ASSERT_ERRNO(e2b_path_resolve("some/more/names", 15, huge, &out, &e), ENAMETOOLONG);
        ASSERT_NULL(out);
}

/* ---- FILE_WATCH through the real agent ---- */

static pid_t agent_pid;
static char agent_sock[PATH_MAX];

static void agent_stop(void) {
        if (agent_pid > 0) {
                (void) kill(agent_pid, SIGTERM);
                (void) waitpid(agent_pid, NULL, 0);
                agent_pid = 0;
        }
}

static int agent_connect(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct timeval tv = { .tv_sec = 10 };
        ProtoFrame f = {};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        (void) strscpy(sa.sun_path, sizeof sa.sun_path, agent_sock);
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ASSERT_OK(proto_recv(fd, &f)); /* HELLO */
        ASSERT_EQ(f.type, PROTO_HELLO);
        proto_frame_done(&f);
        return fd;
}

static void agent_start(void) {
        static bool atexit_done;
        char bin[PATH_MAX];
        int fd = -1;

        agent_stop();
        if (!atexit_done) {
                atexit(agent_stop);
                atexit_done = true;
        }
        snprintf(bin, sizeof bin, "%s/src/agent/space-agent", test_build_dir());
        if (access(bin, X_OK) < 0)
                test_skip("space-agent is not built");
        snprintf(agent_sock, sizeof agent_sock, "%s/agent.sock", test_tmpdir());
        agent_pid = fork();
        ASSERT_OK(agent_pid);
        if (agent_pid == 0) {
                char *const envp[] = { (char *) "PATH=/usr/bin:/bin", NULL };
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                execle(bin, "space-agent", "--listen", agent_sock, (char *) NULL, envp);
                _exit(127);
        }
        for (int i = 0; i < 500 && fd < 0; i++) {
                struct timespec ts = { .tv_nsec = 10 * 1000 * 1000 };
                fd = agent_connect();
                if (fd < 0)
                        nanosleep(&ts, NULL);
        }
        ASSERT_OK(fd);
        close(fd);
}

static JsonValue *expect_frame(int fd, ProtoType type, uint32_t stream) {
        ProtoFrame f = {};
        JsonValue *v = NULL;
        int r = proto_recv(fd, &f);

        if (r < 0)
                test_fail(__FILE__, __LINE__, "expected %s: %s", proto_type_to_string(type), strerror(-r));
        if (f.type != type || f.stream != stream)
                test_fail(__FILE__, __LINE__, "expected %s on %u, got %s on %u: %.300s", proto_type_to_string(type),
                          stream, proto_type_to_string(f.type), f.stream, f.payload);
        if (proto_type_is_json(type))
                ASSERT_OK(json_parse(f.payload, f.len, &v, NULL, 0));
        proto_frame_done(&f);
        return v;
}

/* Collects "op:name" of watch events until want appears (or the timeout). */
static bool wait_event(int fd, const char *want, char *log, size_t size) {
        for (int i = 0; i < 50; i++) {
                _cleanup_json_ JsonValue *v = expect_frame(fd, PROTO_RESULT, 7);
                const JsonValue *events = json_get(v, "events");
                for (size_t k = 0; k < json_array_size(events); k++) {
                        const JsonValue *ev = json_array_at(events, k);
                        size_t l = strlen(log);
                        snprintf(log + l, size - l, "%s:%s ", json_string(json_get(ev, "op")),
                                 json_string(json_get(ev, "name")));
                }
                if (strstr(log, want))
                        return true;
        }
        return false;
}

static void write_file(int fd, const char *path) {
        char json[PATH_MAX + 64];
        snprintf(json, sizeof json, "{\"path\":\"%s\",\"parents\":true}", path);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_WRITE, 3, json));
        ASSERT_OK(proto_send(fd, PROTO_DATA, 3, "data", 4));
        ASSERT_OK(proto_send(fd, PROTO_DATA_END, 3, NULL, 0));
        json_free(expect_frame(fd, PROTO_RESULT, 3));
}

TEST(agent_file_watch) {
        _cleanup_close_ int w = -EBADF, op = -EBADF;
        _cleanup_json_ JsonValue *armed = NULL, *err = NULL;
        char dir[PATH_MAX], sub[PATH_MAX + 8], json[PATH_MAX + 64], log[8192] = "";
        int64_t no;

        agent_start();
        snprintf(dir, sizeof dir, "%s/watched", test_tmpdir());
        ASSERT_OK(mkdir(dir, 0755));
        w = agent_connect();
        op = agent_connect();

        snprintf(json, sizeof json, "{\"path\":\"%s\",\"recursive\":true}", dir);
        ASSERT_OK(proto_send_json(w, PROTO_FILE_WATCH, 7, json));
        armed = expect_frame(w, PROTO_RESULT, 7);
        ASSERT_STREQ(json_string(json_get(armed, "watching")), dir);

        /* an upload: its temporary file stays hidden, the target is created and written */
        snprintf(sub, sizeof sub, "%s/a.txt", dir);
        write_file(op, sub);
        ASSERT_TRUE(wait_event(w, "write:a.txt", log, sizeof log));
        ASSERT_NOT_NULL(strstr(log, "create:a.txt"));
        ASSERT_NULL(strstr(log, ".#"));

        /* a new subdirectory is followed */
        snprintf(sub, sizeof sub, "%s/sub", dir);
        ASSERT_OK(mkdir(sub, 0755));
        ASSERT_TRUE(wait_event(w, "create:sub ", log, sizeof log));
        snprintf(sub, sizeof sub, "%s/sub/deep", dir);
        write_file(op, sub);
        ASSERT_TRUE(wait_event(w, "write:sub/deep", log, sizeof log));

        snprintf(sub, sizeof sub, "%s/a.txt", dir);
        ASSERT_OK(chmod(sub, 0600));
        ASSERT_TRUE(wait_event(w, "chmod:a.txt", log, sizeof log));
        ASSERT_OK(unlink(sub));
        ASSERT_TRUE(wait_event(w, "remove:a.txt", log, sizeof log));

        /* the stream is busy: a second request on it is refused */
        ASSERT_OK(proto_send_json(w, PROTO_FILE_WATCH, 7, json));
        err = expect_frame(w, PROTO_ERROR, 7);
        ASSERT_OK(json_int64(json_get(err, "errno"), &no));
        ASSERT_EQ(no, EBUSY);
        err = json_free(err);

        /* the watched directory goes away: ERROR ENOENT ends the watch */
        ASSERT_OK(rm_rf(dir));
        for (int i = 0; i < 50 && !err; i++) {
                ProtoFrame f = {};
                ASSERT_OK(proto_recv(w, &f));
                ASSERT_EQ(f.stream, 7);
                if (f.type == PROTO_ERROR)
                        ASSERT_OK(json_parse(f.payload, f.len, &err, NULL, 0));
                else
                        ASSERT_EQ(f.type, PROTO_RESULT);
                proto_frame_done(&f);
        }
        ASSERT_NOT_NULL(err);
        ASSERT_OK(json_int64(json_get(err, "errno"), &no));
        ASSERT_EQ(no, ENOENT);
        agent_stop();
}

TEST(agent_file_watch_errors) {
        _cleanup_close_ int fd = -EBADF;
        char json[PATH_MAX + 64], file[PATH_MAX];
        static const struct {
                const char *body;
                int err;
        } cases[] = {
                { "{}", EINVAL },
                { "{\"path\":\"/x\",\"depth\":1}", EINVAL },
                { "{\"path\":\"/x\",\"recursive\":\"yes\"}", EINVAL },
                { "{\"path\":\"/does/not/exist\"}", ENOENT },
                { "{\"path\":\"rel\",\"user\":\"nobody-at-all\"}", ENOENT },
        };

        agent_start();
        fd = agent_connect();
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_json_ JsonValue *v = NULL;
                int64_t no;
                ASSERT_OK(proto_send_json(fd, PROTO_FILE_WATCH, 1, cases[i].body));
                v = expect_frame(fd, PROTO_ERROR, 1);
                ASSERT_OK(json_int64(json_get(v, "errno"), &no));
                if (no != cases[i].err)
                        test_fail(__FILE__, __LINE__, "%s: errno %lld, expected %d", cases[i].body, (long long) no,
                                  cases[i].err);
        }
        snprintf(file, sizeof file, "%s/plain", test_tmpdir());
        ASSERT_OK(write_file_atomic(file, "x", 1, 0644));
        snprintf(json, sizeof json, "{\"path\":\"%s\"}", file);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_WATCH, 2, json));
        json_free(expect_frame(fd, PROTO_ERROR, 2));
        agent_stop();
}
