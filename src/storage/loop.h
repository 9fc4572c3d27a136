/* SPDX-License-Identifier: MIT */
#pragma once

/* Loop devices for the pool image: attach via /dev/loop-control and
 * LOOP_CONFIGURE (read-write, buffered I/O, autoclear), find the device that
 * already backs an image, detach. */

#include "macros.h"

#define LOOP_ATTACH_ATTEMPTS 16
#define LOOP_DETACH_TIMEOUT_MSEC 5000

/* Attaches image_fd (opened O_RDWR) to a free loop device with
 * LO_FLAGS_AUTOCLEAR: the device detaches itself once its last user (the
 * returned fd, then a mount of it) goes away. */
int loop_attach(int image_fd, int *ret_fd, char **ret_devpath);
/* The loop device ("/dev/loopN") currently backed by the file at image
 * (same device and inode), or -ENOENT. */
int loop_find_backing(const char *image, char **ret_devpath);
/* Whether devpath is bound to the file with image's device and inode. */
bool loop_backs(const char *devpath, const char *image);
/* Whether devpath ("/dev/loopN") is bound to any file (sysfs backing_file). */
bool loop_is_bound(const char *devpath);
/* Detaches devpath (LOOP_CLR_FD; with other users it goes on their last
 * close) and waits up to LOOP_DETACH_TIMEOUT_MSEC until it is unbound;
 * -EBUSY if it is still bound then. An unbound device is fine. */
int loop_detach(const char *devpath);
/* Waits up to timeout_msec until devpath no longer backs image (unbound, or
 * reused for another file); -ETIMEDOUT if it still does. */
int loop_wait_released(const char *devpath, const char *image, unsigned timeout_msec);
/* Waits up to timeout_msec until devpath is unbound; -ETIMEDOUT if not. */
int loop_wait_unbound(const char *devpath, unsigned timeout_msec);
