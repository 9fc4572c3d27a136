/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <net/if_arp.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "fd-util.h"
#include "tap.h"
#include "veth.h"

#define TUN_DEVICE "/dev/net/tun"

static int tap_open(const char *name, const uint8_t mac[static 6], int *ret_fd) {
        _cleanup_close_ int fd = open(TUN_DEVICE, O_RDWR | O_CLOEXEC | O_NOCTTY);
        struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR };

        if (fd < 0)
                return -errno;
        memcpy(ifr.ifr_name, name, strlen(name) + 1);
        if (ioctl(fd, TUNSETIFF, &ifr) < 0)
                return -errno;
        /* the name we asked for, not a kernel-chosen one */
        if (strncmp(ifr.ifr_name, name, IFNAMSIZ) != 0)
                return -EEXIST;
        /* the slot's own address, the same in every life of the device: a guest resumed
         * from its memory still has it in its neighbour table (a new random one left it
         * probing a gone address for seconds) */
        ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
        memcpy(ifr.ifr_hwaddr.sa_data, mac, 6);
        if (ioctl(fd, SIOCSIFHWADDR, &ifr) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int tap_create(const char *name, uint64_t slot, int *ret_fd) {
        uint8_t mac[6];
        int r;

        if (!veth_name_is_valid(name) || !ret_fd)
                return -EINVAL;
        if (if_nametoindex(name) != 0)
                (void) veth_delete(name); /* a leftover of an earlier life of the slot */
        tap_host_mac(slot, mac);
        r = tap_open(name, mac, ret_fd);
        if (r == -EBUSY || r == -EINVAL || r == -EEXIST) {
                /* someone made a link of that name meanwhile, or it is another kind */
                (void) veth_delete(name);
                r = tap_open(name, mac, ret_fd);
        }
        return r;
}

void tap_guest_mac(uint64_t slot, uint8_t ret_mac[static 6]) {
        ret_mac[0] = 0x52;
        ret_mac[1] = 0x54;
        ret_mac[2] = 0x00;
        ret_mac[3] = (uint8_t) (slot >> 16);
        ret_mac[4] = (uint8_t) (slot >> 8);
        ret_mac[5] = (uint8_t) slot;
}

void tap_host_mac(uint64_t slot, uint8_t ret_mac[static 6]) {
        ret_mac[0] = 0x02; /* locally administered, unicast; never a guest's 52:54:00 */
        ret_mac[1] = 0x53;
        ret_mac[2] = 0x00;
        ret_mac[3] = (uint8_t) (slot >> 16);
        ret_mac[4] = (uint8_t) (slot >> 8);
        ret_mac[5] = (uint8_t) slot;
}
