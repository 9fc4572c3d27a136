/* SPDX-License-Identifier: MIT */
#pragma once

#include "proto-msg.h"

/* The exec defaults of a template imported from an OCI or docker image,
 * written at its root by the import: {"env":["K=V"...],"cwd":"/dir",
 * "user":"name|uid[:group]",...}. */
#define AGENT_IMAGE_DEFAULTS_PATH "/.space-image.json"
#define AGENT_IMAGE_DEFAULTS_MAX (256U * 1024U)

/* Fills what req leaves out from the file at path: the user (when neither
 * user nor uid is given), the cwd, and the environment (the image's first,
 * the request's over it). A missing or malformed file changes nothing. */
int agent_image_defaults_apply(const char *path, ProtoExecRequest *req);
