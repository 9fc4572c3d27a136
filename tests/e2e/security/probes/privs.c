/* SPDX-License-Identifier: MIT */
/* Privileges of the running process, and file capabilities.
 *   privs show          "uid R E S", "gid R E S", "CapEff: ..." lines of /proc/self/status
 *   privs setfcap PATH  give PATH the file capabilities cap_sys_admin,cap_setuid,cap_dac_read_search
 *                       (+ep) through the security.capability xattr (CAP_SETFCAP is kept inside) */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

int main(int argc, char **argv) {
        if (argc >= 2 && !strcmp(argv[1], "show")) {
                uid_t r, e, s;
                gid_t gr, ge, gs;
                getresuid(&r, &e, &s);
                getresgid(&gr, &ge, &gs);
                printf("uid %u %u %u\ngid %u %u %u\n", r, e, s, gr, ge, gs);
                FILE *f = fopen("/proc/self/status", "r");
                char line[256];
                while (f && fgets(line, sizeof line, f))
                        if (!strncmp(line, "Cap", 3) || !strncmp(line, "NoNewPrivs", 10) || !strncmp(line, "Seccomp", 7))
                                fputs(line, stdout);
                return 0;
        }
        if (argc >= 3 && !strcmp(argv[1], "setfcap")) {
                struct vfs_cap_data d;
                memset(&d, 0, sizeof d);
                d.magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE;
                d.data[0].permitted = (1U << CAP_SYS_ADMIN) | (1U << CAP_SETUID) | (1U << CAP_DAC_READ_SEARCH);
                if (setxattr(argv[2], "security.capability", &d, sizeof d, 0) < 0) {
                        printf("setfcap errno=%d (%s)\n", errno, strerror(errno));
                        return 0;
                }
                printf("setfcap ok\n");
                return 0;
        }
        return 2;
}
