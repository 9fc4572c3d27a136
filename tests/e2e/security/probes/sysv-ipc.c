/* SPDX-License-Identifier: MIT */
/* SysV IPC across sandboxes.
 *   sysv-ipc create KEY   a shm segment and a message queue with KEY; print their ids
 *   sysv-ipc lookup KEY   look both up without IPC_CREAT: "shm errno=E" / "shm id=N", same for msg
 *   sysv-ipc remove KEY */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/shm.h>

static void show(const char *what, int id) {
        if (id < 0)
                printf("%s errno=%d (%s)\n", what, errno, strerror(errno));
        else
                printf("%s id=%d\n", what, id);
}

int main(int argc, char **argv) {
        key_t key;
        if (argc < 3)
                return 2;
        key = (key_t) strtol(argv[2], NULL, 0);
        if (!strcmp(argv[1], "create")) {
                show("shm", shmget(key, 4096, IPC_CREAT | IPC_EXCL | 0666));
                show("msg", msgget(key, IPC_CREAT | IPC_EXCL | 0666));
        } else if (!strcmp(argv[1], "lookup")) {
                show("shm", shmget(key, 0, 0));
                show("msg", msgget(key, 0));
        } else if (!strcmp(argv[1], "remove")) {
                int s = shmget(key, 0, 0), m = msgget(key, 0);
                if (s >= 0)
                        shmctl(s, IPC_RMID, NULL);
                if (m >= 0)
                        msgctl(m, IPC_RMID, NULL);
                printf("removed\n");
        } else
                return 2;
        return 0;
}
