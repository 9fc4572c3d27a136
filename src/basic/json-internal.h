/* SPDX-License-Identifier: MIT */
#pragma once

/* What json.c (the parser and the tree) and json-writer.c share. */
#include <stddef.h>
#include <stdint.h>

#include "json.h"

struct JsonValue {
        JsonType type;
        bool boolean;
        size_t n;          /* string/number: bytes of text; array: items; object: keys */
        JsonValue **items; /* array: items; object: key0, value0, key1, value1, ... */
        char text[];       /* string/number, NUL-terminated */
};

/* Bytes of the valid UTF-8 sequence at s (at most n), 0 if none. */
size_t utf8_char_len(const uint8_t *s, size_t n);

/* Two-character escapes: '\\' + json_escape_chars[i] stands for json_escape_values[i]. */
static const char json_escape_chars[] = "\"\\/bfnrt";
static const char json_escape_values[] = "\"\\/\b\f\n\r\t";
