/* SPDX-License-Identifier: MIT */
/* A minimal ustar writer (test-tar.h). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "test-tar.h"
#include "test.h"


static void tar_octal(char *field, size_t n, uint64_t v) {
        snprintf(field, n, "%0*llo", (int) n - 1, (unsigned long long) v);
}

void test_tar_write(const char *path, const TarEntry *e, size_t n_entries) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        static const char zero[1024];

        ASSERT_TRUE(fd >= 0);
        for (size_t i = 0; i < n_entries; i++) {
                char h[512] = {};
                unsigned sum = 0;
                size_t size = e[i].type == '0' ? (e[i].data ? strlen(e[i].data) : e[i].size) : 0;

                ASSERT_TRUE(strlen(e[i].name) < 100);
                memcpy(h, e[i].name, strlen(e[i].name));
                tar_octal(h + 100, 8, e[i].mode);
                tar_octal(h + 108, 8, e[i].uid);
                tar_octal(h + 116, 8, e[i].gid);
                tar_octal(h + 124, 12, size);
                tar_octal(h + 136, 12, 1700000000);
                h[156] = e[i].type;
                if (e[i].link)
                        memcpy(h + 157, e[i].link, strlen(e[i].link));
                tar_octal(h + 329, 8, e[i].major);
                tar_octal(h + 337, 8, e[i].minor);
                memcpy(h + 257, "ustar", 6);
                memcpy(h + 263, "00", 2);
                memset(h + 148, ' ', 8);
                for (size_t k = 0; k < sizeof h; k++)
                        sum += (unsigned char) h[k];
                snprintf(h + 148, 8, "%06o", sum);
                ASSERT_OK(loop_write(fd, h, sizeof h));
                if (size > 0) {
                        size_t padded = (size + 511) / 512 * 512;
                        _cleanup_free_ char *body = calloc(1, padded);
                        ASSERT_NOT_NULL(body);
                        if (e[i].data)
                                memcpy(body, e[i].data, size);
                        else
                                memset(body, 'x', size);
                        ASSERT_OK(loop_write(fd, body, padded));
                }
        }
        ASSERT_OK(loop_write(fd, zero, sizeof zero));
}
