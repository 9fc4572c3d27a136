/* SPDX-License-Identifier: MIT */
#include <stdio.h>

#include "fd-util.h"
#include "runtime.h"

static const RuntimeOps *const runtimes[] = {
        &ns_runtime_ops,
        &vm_runtime_ops,
};
_Static_assert(ELEMENTSOF(runtimes) == RUNTIMES_MAX, "RUNTIMES_MAX counts the runtimes");

const RuntimeOps *runtime_nth(size_t i) {
        return i < ELEMENTSOF(runtimes) ? runtimes[i] : NULL;
}

size_t runtime_index(const RuntimeOps *rt) {
        for (size_t i = 0; i < ELEMENTSOF(runtimes); i++)
                if (runtimes[i] == rt)
                        return i;
        return SIZE_MAX;
}

const RuntimeOps *runtime_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(runtimes); i++)
                if (streq(runtimes[i]->name, name))
                        return runtimes[i];
        return NULL;
}

int proc_starttime(pid_t pid, uint64_t *ret) {
        char path[64], *p;
        _cleanup_free_ char *buf = NULL;
        unsigned long long v;
        int r;

        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        r = read_full_file(path, 4096, &buf, NULL);
        if (r < 0)
                return r;
        /* comm may contain spaces and parens: skip to the last ')' */
        p = strrchr(buf, ')');
        if (!p)
                return -EINVAL;
        /* after ") " come fields 3.. ; starttime is field 22 → the 20th after comm */
        p++;
        for (int field = 3; field <= 22; field++) {
                while (*p == ' ')
                        p++;
                if (field == 22)
                        break;
                p = strchr(p, ' ');
                if (!p)
                        return -EINVAL;
        }
        if (sscanf(p, "%llu", &v) != 1)
                return -EINVAL;
        *ret = v;
        return 0;
}
