/* SPDX-License-Identifier: MIT */
#pragma once

#include "json.h"

typedef enum CliRuleKind {
        CLI_RULE_HOST, /* --allow / --deny: a name (an address is refused: "use a CIDR entry") */
        CLI_RULE_CIDR, /* --allow-cidr / --deny-cidr: an address or CIDR (a name is refused) */
        CLI_RULE_AUTO, /* space create --deny HOST|CIDR: a CIDR if it has a '/' before any ports, or the
                        * server tells (a bare address is a /32) */
} CliRuleKind;

/* One egress rule from "TARGET[:PORTS][/udp|/tcp]": {"host"|"cidr": TARGET, "ports": [...],
 * "proto": ...} (for CLI_RULE_AUTO without ports and protocol: the string, for the server to
 * tell apart). The server validates. */
int cli_policy_write_rule(JsonWriter *w, const char *arg, CliRuleKind kind);
