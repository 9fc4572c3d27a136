/* SPDX-License-Identifier: MIT */
/* The decoder of worker request lines (src/worker/worker-proto.c: op lookup
 * and basic shape), as the worker process and the cluster listener use it
 * on what a peer sends. For the whole input and for each of its lines:
 *  - the decoder answers 0, -EBADMSG or -EOPNOTSUPP, a failure with a
 *    NUL-terminated reason;
 *  - a request it accepts is a JSON object whose "op" is exactly the name
 *    of its op in the table (no embedded NUL) and that has every key the
 *    op's row asks for, with its type; serialised again it decodes to the
 *    same op. */
#include <errno.h>
#include <string.h>

#include "fuzz-check.h"
#include "alloc-util.h"
#include "json.h"
#include "worker-proto.h"

#define FUZZ_INPUT_MAX (256U * 1024U)

static void check_accepted(const WorkerRequest *req) {
        const WorkerOp *op;
        const JsonValue *name;

        CHECK(req->kind >= 0 && req->kind < _WORKER_OP_MAX);
        op = worker_op(req->kind);
        CHECK(json_type(req->json) == JSON_OBJECT);
        name = json_get(req->json, "op");
        CHECK(json_type(name) == JSON_STRING);
        CHECK(json_string_len(name) == strlen(op->name) && strcmp(json_string(name), op->name) == 0);
        for (size_t i = 0; i < WORKER_OP_STRINGS_MAX && op->strings[i]; i++)
                CHECK(json_type(json_get(req->json, op->strings[i])) == JSON_STRING);
        if (op->object)
                CHECK(json_type(json_get(req->json, op->object)) == JSON_OBJECT);
        if (op->array)
                CHECK(json_type(json_get(req->json, op->array)) == JSON_ARRAY);
}

static void check_line(const char *p, size_t n) {
        _cleanup_(worker_request_done) WorkerRequest req = { .kind = _WORKER_OP_INVALID };
        char err[192];
        int r;

        memset(err, 'x', sizeof err);
        r = worker_request_decode(p, n, &req, err, sizeof err);
        if (r < 0) {
                CHECK(r == -EBADMSG || r == -EOPNOTSUPP);
                CHECK(memchr(err, 0, sizeof err) && err[0]);
                CHECK(!req.json);
                return;
        }
        check_accepted(&req);
        {
                _cleanup_(worker_request_done) WorkerRequest again = { .kind = _WORKER_OP_INVALID };
                _cleanup_free_ char *text = NULL;
                size_t len;

                CHECK(json_serialize(req.json, &text, &len) == 0);
                CHECK(worker_request_decode(text, len, &again, err, sizeof err) == 0);
                CHECK(again.kind == req.kind);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *p = (const char *) data, *end = p + size;

        if (size > FUZZ_INPUT_MAX)
                return 0;
        check_line(p, size);
        while (p < end) { /* as the worker and the listener split what they read */
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t n = (size_t) ((nl ?: end) - p);
                check_line(p, n);
                p += n + 1;
        }
        return 0;
}
