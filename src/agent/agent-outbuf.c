/* SPDX-License-Identifier: MIT */
/* The output buffer of one exec: the newest bytes of its stdout and stderr, as
 * a list of chunks in the order they were read. Every byte has an offset
 * (both streams counted together); the buffer holds [start, end). Memory is
 * bounded by the limit (plus the newest chunk): appending drops the oldest
 * chunks, and readers that had not read them learn how much they missed. */
#include "agent.h"
#include "alloc-util.h"

#define OUTBUF_CHUNK_MIN 256U
#define OUTBUF_CHUNK_MAX PROTO_DATA_CHUNK
#define OUTBUF_CHUNK_OVERHEAD 64U /* charged per chunk besides its data */

struct OutChunk {
        OutChunk *next;
        uint64_t pos;  /* offset of data[0] */
        uint32_t len, cap;
        bool err;      /* stderr */
        char data[];
};

void agent_outbuf_init(OutBuf *b, size_t limit) {
        *b = (OutBuf){ .limit = limit, .tail_link = &b->head };
}

void agent_outbuf_done(OutBuf *b) {
        while (b->head) {
                OutChunk *c = b->head;
                b->head = c->next;
                free(c);
        }
        b->tail_link = &b->head;
        b->charged = 0;
}

static OutChunk *outbuf_tail(OutBuf *b) {
        /* tail_link points at the pointer to the tail chunk (or at head when empty) */
        return *b->tail_link;
}

/* Drops the oldest chunks while over the limit; the newest always stays. */
static void outbuf_trim(OutBuf *b) {
        while (b->charged > b->limit && b->head && b->head->next) {
                OutChunk *c = b->head;
                b->head = c->next;
                if (b->tail_link == &c->next)
                        b->tail_link = &b->head;
                b->charged -= c->cap + OUTBUF_CHUNK_OVERHEAD;
                b->start = b->head->pos;
                free(c);
        }
}

int agent_outbuf_append(OutBuf *b, bool err, const void *p, size_t n) {
        OutChunk *t = outbuf_tail(b);

        if (n == 0)
                return 0;
        if (n > OUTBUF_CHUNK_MAX)
                return -EMSGSIZE;
        if (t && t->err == err && t->len + n <= OUTBUF_CHUNK_MAX) {
                if (t->len + n > t->cap) { /* grow the tail chunk in place */
                        uint32_t cap = (uint32_t) MIN(MAX((size_t) t->cap * 2, t->len + n), (size_t) OUTBUF_CHUNK_MAX);
                        OutChunk *g = realloc(t, sizeof(OutChunk) + cap);
                        if (!g)
                                return -ENOMEM;
                        b->charged += cap - g->cap;
                        g->cap = cap;
                        *b->tail_link = g;
                        t = g;
                }
                memcpy(t->data + t->len, p, n);
                t->len += (uint32_t) n;
        } else {
                uint32_t cap = (uint32_t) MAX(n, (size_t) OUTBUF_CHUNK_MIN);
                OutChunk *c = malloc(sizeof(OutChunk) + cap);
                if (!c)
                        return -ENOMEM;
                *c = (OutChunk){ .pos = b->end, .len = (uint32_t) n, .cap = cap, .err = err };
                memcpy(c->data, p, n);
                if (t) {
                        t->next = c;
                        b->tail_link = &t->next;
                } else
                        b->head = c; /* tail_link stays &b->head */
                b->charged += cap + OUTBUF_CHUNK_OVERHEAD;
                if (!t)
                        b->start = c->pos;
        }
        b->end += n;
        outbuf_trim(b);
        return 0;
}

size_t agent_outbuf_peek(const OutBuf *b, uint64_t pos, bool *ret_err, const char **ret_data) {
        for (const OutChunk *c = b->head; c; c = c->next)
                if (pos >= c->pos && pos < c->pos + c->len) {
                        *ret_err = c->err;
                        *ret_data = c->data + (pos - c->pos);
                        return (size_t) (c->pos + c->len - pos);
                }
        return 0;
}
