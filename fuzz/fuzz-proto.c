/* SPDX-License-Identifier: MIT */
/* Agent frames as they arrive from a hostile peer: the incremental reader (fed
 * in chunks whose sizes come from the input), then each frame's JSON through
 * the strict parser and the request parser of its type. */
#include <stddef.h>
#include <stdint.h>

#include "proto-msg.h"
#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_frame(const ProtoFrame *f) {
        JsonValue *v = NULL;
        char err[256];

        if (!proto_type_to_string(f->type) || f->len > PROTO_PAYLOAD_MAX || f->payload[f->len] != 0)
                __builtin_trap();
        if (!proto_type_is_json(f->type) || f->len > PROTO_JSON_MAX)
                return;
        if (json_parse(f->payload, f->len, &v, err, sizeof err) < 0)
                return;
        switch (f->type) {
        case PROTO_EXEC: {
                ProtoExecRequest req = {};
                if (proto_exec_request_parse(v, &req, err, sizeof err) >= 0 && (!req.argv || !req.argv[0]))
                        __builtin_trap();
                proto_exec_request_done(&req);
                break;
        }
        case PROTO_FILE_READ:
        case PROTO_FILE_WRITE:
        case PROTO_FILE_LIST:
        case PROTO_FILE_STAT:
        case PROTO_FILE_MKDIR:
        case PROTO_FILE_REMOVE:
        case PROTO_FILE_RENAME: {
                ProtoFileRequest req = {};
                if (proto_file_request_parse(f->type, v, &req, err, sizeof err) >= 0 && !req.path)
                        __builtin_trap();
                proto_file_request_done(&req);
                break;
        }
        case PROTO_SIGNAL:
        case PROTO_RESIZE:
        case PROTO_ATTACH:
        case PROTO_PS:
        case PROTO_PING: {
                ProtoControlRequest req = {};
                (void) proto_control_request_parse(f->type, v, &req, err, sizeof err);
                proto_control_request_done(&req);
                break;
        }
        default:
                break;
        }
        json_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        ProtoReader r;
        size_t off = 0;
        unsigned step = 0;

        if (size >= PROTO_HEADER_SIZE) {
                ProtoType t;
                uint32_t stream, len;
                if (proto_header_decode(data, &t, &stream, &len) >= 0 && !proto_type_to_string(t))
                        __builtin_trap();
        }

        proto_reader_init(&r);
        while (off < size) {
                /* chunk sizes 1..64 from the input itself, so splits vary */
                size_t chunk = (size_t) (data[step++ % size] & 63) + 1, used = 0;
                ProtoFrame f = {};
                int k;

                chunk = chunk > size - off ? size - off : chunk;
                k = proto_reader_feed(&r, data + off, chunk, &used, &f);
                if (used > chunk)
                        __builtin_trap();
                off += used;
                if (k < 0)
                        break;
                if (k > 0) {
                        check_frame(&f);
                        proto_frame_done(&f);
                } else if (used == 0)
                        break;
        }
        proto_reader_done(&r);
        return 0;
}
