/* SPDX-License-Identifier: MIT */
#pragma once

/* JSON: a strict parser into a read-only tree (hostile input: bounded, UTF-8
 * checked, duplicate keys refused) and a writer that builds JSON text. */

#include "macros.h"

#define JSON_DEPTH_MAX 64
#define JSON_STRING_MAX (16U * 1024U * 1024U)

typedef enum JsonType {
        JSON_NULL,
        JSON_BOOL,
        JSON_NUMBER,
        JSON_STRING,
        JSON_ARRAY,
        JSON_OBJECT,
        _JSON_TYPE_MAX,
        _JSON_TYPE_INVALID = -EINVAL,
} JsonType;

typedef struct JsonValue JsonValue;

/* Parses exactly one JSON value (whitespace around it allowed) from (p, n).
 * On error returns -EINVAL (syntax, bad UTF-8, duplicate key, trailing bytes),
 * -E2BIG (depth or size limits) or -ENOMEM, and if errbuf is given writes a
 * short human-readable reason with the byte offset, e.g. "unexpected '}' at byte 12". */
int json_parse(const char *p, size_t n, JsonValue **ret, char *errbuf, size_t errbuf_size);
JsonValue *json_free(JsonValue *v);
DEFINE_TRIVIAL_CLEANUP_FUNC(JsonValue *, json_free);
#define _cleanup_json_ _cleanup_(json_freep)

JsonType json_type(const JsonValue *v);
const char *json_type_to_string(JsonType t);

/* Objects (keys keep their order). NULL if v is not an object or key missing. */
JsonValue *json_get(const JsonValue *obj, const char *key);
size_t json_object_size(const JsonValue *obj);
const char *json_object_key(const JsonValue *obj, size_t i);
JsonValue *json_object_value(const JsonValue *obj, size_t i);
/* Returns 0 if every key of obj is in allowed (NULL-terminated); else -EINVAL and *ret_unknown. */
int json_check_keys(const JsonValue *obj, const char *const *allowed, const char **ret_unknown);

size_t json_array_size(const JsonValue *arr);
JsonValue *json_array_at(const JsonValue *arr, size_t i);

/* Scalars. Return NULL / -EINVAL if the type differs. */
const char *json_string(const JsonValue *v);    /* NUL-terminated; may embed NULs, see json_string_len */
size_t json_string_len(const JsonValue *v);
int json_bool(const JsonValue *v, bool *ret);
int json_int64(const JsonValue *v, int64_t *ret);   /* -ERANGE if not an exact integer in range */
int json_uint64(const JsonValue *v, uint64_t *ret); /* -ERANGE if negative / fractional / too big */
int json_double(const JsonValue *v, double *ret);
bool json_is_null(const JsonValue *v);

/* Writer. Errors are sticky: after OOM every call is a no-op and finish returns -ENOMEM. */
typedef struct JsonWriter {
        char *buf;
        size_t n, allocated;
        int error;
        unsigned depth;
        uint64_t first_bits; /* per depth: next item is the first in its container */
        bool after_key;
} JsonWriter;

void json_w_init(JsonWriter *w);
void json_w_done(JsonWriter *w); /* frees the buffer */
void json_w_object_begin(JsonWriter *w);
void json_w_object_end(JsonWriter *w);
void json_w_array_begin(JsonWriter *w);
void json_w_array_end(JsonWriter *w);
void json_w_key(JsonWriter *w, const char *key);
void json_w_string(JsonWriter *w, const char *s);                /* NULL writes null */
void json_w_string_n(JsonWriter *w, const char *p, size_t n);    /* invalid UTF-8 → U+FFFD */
void json_w_int(JsonWriter *w, int64_t v);
void json_w_uint(JsonWriter *w, uint64_t v);
void json_w_double(JsonWriter *w, double v);
void json_w_bool(JsonWriter *w, bool v);
void json_w_null(JsonWriter *w);
void json_w_raw(JsonWriter *w, const char *json); /* pre-serialised JSON value, written as is */
/* Convenience: key + value. */
void json_w_kv_string(JsonWriter *w, const char *key, const char *s);
void json_w_kv_int(JsonWriter *w, const char *key, int64_t v);
void json_w_kv_bool(JsonWriter *w, const char *key, bool v);
/* Takes the NUL-terminated text; the writer is reset. */
int json_w_finish(JsonWriter *w, char **ret, size_t *ret_len);

/* Serialises a parsed value back to compact JSON text. */
int json_serialize(const JsonValue *v, char **ret, size_t *ret_len);

/* UTF-8 validity (strict: no overlongs, no surrogates, max U+10FFFF). */
bool utf8_valid(const char *p, size_t n);
