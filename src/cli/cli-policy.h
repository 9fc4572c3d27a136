/* SPDX-License-Identifier: MIT */
#pragma once

#include "json.h"

/* One egress rule from "HOST[:PORTS]" or (cidr) "CIDR[:PORTS]": a string, or
 * {"host"|"cidr": ..., "ports": [...]} when ports are given. */
int cli_policy_write_rule(JsonWriter *w, const char *arg, bool cidr);
