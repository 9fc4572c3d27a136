/* SPDX-License-Identifier: MIT */
/* The identities restored guests are told (vm-identity.h). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc-util.h"
#include "str-util.h"
#include "vm-identity.h"
#include "vm-restored.h"

/* RESTORED for spec's sandbox: its identity, environment and network. */
static int vm_identity_json(const RuntimeSpec *spec, bool new_machine_id, char **ret) {
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_free_ char *idenv = strjoin("SPACE_SANDBOX_ID=", spec->id);
        char a[INET_ADDRSTRLEN], g[INET_ADDRSTRLEN], mac[18];
        VmRestoredNet net = { .resolv_conf = spec->resolv_conf };

        if (!idenv || strv_extend(&env, idenv) < 0)
                return -ENOMEM;
        for (char **e = spec->env; e && *e; e++)
                if (strv_extend(&env, *e) < 0)
                        return -ENOMEM;
        if (spec->net && inet_ntop(AF_INET, &spec->net_addr, a, sizeof a) &&
            inet_ntop(AF_INET, &spec->net_gateway, g, sizeof g)) {
                snprintf(mac, sizeof mac, "%02x:%02x:%02x:%02x:%02x:%02x", spec->net_mac[0], spec->net_mac[1],
                         spec->net_mac[2], spec->net_mac[3], spec->net_mac[4], spec->net_mac[5]);
                net.address = a;
                net.gateway = g;
                net.mac = mac;
        }
        return vm_restored_json(spec->hostname, env, new_machine_id, &net, ret);
}

int vm_identify(const RuntimeSpec *spec, bool new_machine_id, char *errbuf, size_t errbuf_size) {
        _cleanup_free_ char *json = NULL;
        int r = vm_identity_json(spec, new_machine_id, &json);

        if (r < 0) {
                snprintf(errbuf, errbuf_size, "cannot build the guest's identity: %s", strerror(-r));
                return r;
        }
        r = vm_restored_deliver(spec->agent_socket, json, errbuf, errbuf_size);
        explicit_bzero(json, strlen(json));
        return r;
}

/* Identities to tell restored guests once they answer (vm_finish), by sandbox id. */
typedef struct VmIdentity {
        char id[64];
        char *json;
        bool deferred; /* a neutral boot's: told when the worker has saved it (identify_deferred) */
} VmIdentity;
static VmIdentity *identities;
static size_t n_identities, allocated_identities;

char *vm_identity_take(const char *id, bool deferred) {
        for (size_t i = 0; i < n_identities; i++)
                if (streq(identities[i].id, id) && identities[i].deferred == deferred) {
                        char *j = identities[i].json;
                        identities[i] = identities[--n_identities];
                        return j;
                }
        return NULL;
}

void vm_identity_drop(const char *id) {
        for (int d = 0; d < 2; d++) {
                char *j = vm_identity_take(id, d);
                if (j) {
                        explicit_bzero(j, strlen(j));
                        free(j);
                }
        }
}

int vm_identity_put(const RuntimeSpec *spec) {
        char *json = NULL;
        int r;

        vm_identity_drop(spec->id);
        if (GREEDY_REALLOC(identities, allocated_identities, n_identities + 1) < 0 ||
            strlen(spec->id) >= sizeof identities->id)
                return -ENOMEM;
        r = vm_identity_json(spec, spec->new_identity || spec->neutral, &json);
        if (r < 0)
                return r;
        identities[n_identities] = (VmIdentity){ .json = json, .deferred = spec->neutral };
        (void) strscpy(identities[n_identities].id, sizeof identities[n_identities].id, spec->id);
        n_identities++;
        return 0;
}

