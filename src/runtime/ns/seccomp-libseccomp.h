/* SPDX-License-Identifier: MIT */
#pragma once

/* libseccomp's <seccomp.h>. The runtime's own "seccomp.h" comes first on the
 * include path (runtime_inc), so <seccomp.h> would find ours: include this
 * header with angle brackets, <seccomp-libseccomp.h>, so that it is found
 * through the include path and #include_next continues the search after this
 * directory, reaching the system's copy. */
#include_next <seccomp.h>
