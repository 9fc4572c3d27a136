/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "firewall.h"
#include "str-util.h"
#include "veth.h"

/* The one place nft is looked for: never $PATH. */
static const char *const nft_paths[] = { "/usr/sbin/nft", "/sbin/nft" };

static bool table_name_is_valid(const char *t) {
        size_t n = t ? strnlen(t, FIREWALL_TABLE_NAME_MAX + 1) : 0;
        if (n == 0 || n > FIREWALL_TABLE_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = t[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
                        return false;
        }
        return true;
}

/* A growing text buffer; the first failure sticks. */
typedef struct Text {
        char *s;
        size_t n, allocated;
        int error;
} Text;

_printf_(2, 3) static void text_printf(Text *t, const char *fmt, ...) {
        va_list ap;
        if (t->error < 0)
                return;
        for (;;) {
                size_t room = t->allocated - t->n;
                va_start(ap, fmt);
                int k = t->s ? vsnprintf(t->s + t->n, room, fmt, ap) : -1;
                va_end(ap);
                if (k >= 0 && (size_t) k < room) {
                        t->n += (size_t) k;
                        return;
                }
                if (greedy_realloc((void **) &t->s, &t->allocated, t->n + (k > 0 ? (size_t) k : 0) + 256, 1) < 0) {
                        t->error = -ENOMEM;
                        return;
                }
        }
}

static int text_take(Text *t, char **ret) {
        if (t->error < 0) {
                free(t->s);
                return t->error;
        }
        *ret = t->s;
        return 0;
}

int firewall_format_setup(const char *table, const char *link_prefix, char **ret) {
        Text t = {};
        if (!table_name_is_valid(table) || !veth_name_is_valid(link_prefix))
                return -EINVAL;
        text_printf(&t,
                "add table inet %1$s\n"
                "add map inet %1$s sandboxes { type ifname : verdict; }\n"
                "add chain inet %1$s input { type filter hook input priority filter - 10; policy accept; }\n"
                "flush chain inet %1$s input\n"
                "add rule inet %1$s input iifname vmap @sandboxes\n"
                "add rule inet %1$s input iifname \"%2$s*\" counter drop\n"
                "add chain inet %1$s forward { type filter hook forward priority filter - 10; policy accept; }\n"
                "flush chain inet %1$s forward\n"
                "add rule inet %1$s forward iifname \"%2$s*\" counter drop\n"
                "add rule inet %1$s forward oifname \"%2$s*\" counter drop\n",
                table, link_prefix);
        return text_take(&t, ret);
}

static void text_ports(Text *t, const char *proto, const uint16_t *ports, size_t n,
                       const char *table, const char *link, const char *addr, const char *gw) {
        if (n == 0)
                return;
        text_printf(t, "add rule inet %s sb-%s ip saddr %s ip daddr %s %s dport { ", table, link, addr, gw, proto);
        for (size_t i = 0; i < n; i++)
                text_printf(t, "%s%u", i > 0 ? ", " : "", (unsigned) ports[i]);
        text_printf(t, " } accept\n");
}

static int ports_are_valid(const uint16_t *ports, size_t n) {
        if (n > FIREWALL_PORTS_MAX || (n > 0 && !ports))
                return false;
        for (size_t i = 0; i < n; i++)
                if (ports[i] == 0)
                        return false;
        return true;
}

int firewall_format_add(const char *table, const FirewallSandbox *s, char **ret) {
        char addr[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN];
        Text t = {};

        if (!table_name_is_valid(table) || !s || !veth_name_is_valid(s->link) ||
            !ports_are_valid(s->tcp_ports, s->n_tcp_ports) || !ports_are_valid(s->udp_ports, s->n_udp_ports) ||
            s->addr.s_addr == INADDR_ANY || s->gateway.s_addr == INADDR_ANY)
                return -EINVAL;
        if (!inet_ntop(AF_INET, &s->addr, addr, sizeof addr) || !inet_ntop(AF_INET, &s->gateway, gw, sizeof gw))
                return -EINVAL;

        /* One transaction: the chain is rebuilt before the map points at it. */
        text_printf(&t,
                "add chain inet %1$s sb-%2$s\n"
                "flush chain inet %1$s sb-%2$s\n",
                table, s->link);
        text_ports(&t, "tcp", s->tcp_ports, s->n_tcp_ports, table, s->link, addr, gw);
        text_ports(&t, "udp", s->udp_ports, s->n_udp_ports, table, s->link, addr, gw);
        text_printf(&t,
                "add rule inet %1$s sb-%2$s counter drop\n"
                "add element inet %1$s sandboxes { \"%2$s\" : jump sb-%2$s }\n",
                table, s->link);
        return text_take(&t, ret);
}

int firewall_format_remove(const char *table, const char *link, char **ret) {
        Text t = {};
        if (!table_name_is_valid(table) || !veth_name_is_valid(link))
                return -EINVAL;
        /* nft refuses to delete what is absent, so first make sure it exists
         * (add is idempotent), then delete: removal is idempotent too. */
        text_printf(&t,
                "add chain inet %1$s sb-%2$s\n"
                "add element inet %1$s sandboxes { \"%2$s\" : jump sb-%2$s }\n"
                "delete element inet %1$s sandboxes { \"%2$s\" }\n"
                "flush chain inet %1$s sb-%2$s\n"
                "delete chain inet %1$s sb-%2$s\n",
                table, link);
        return text_take(&t, ret);
}

int firewall_apply(const char *script) {
        const char *nft = NULL;
        int pipefd[2], status;

        for (size_t i = 0; i < ELEMENTSOF(nft_paths); i++)
                if (access(nft_paths[i], X_OK) == 0) {
                        nft = nft_paths[i];
                        break;
                }
        if (!nft)
                return -ENOENT;
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_close_ int rfd = pipefd[0], wfd = pipefd[1];

        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                char *const argv[] = { (char *) nft, (char *) "-f", (char *) "-", NULL };
                char *const envp[] = { (char *) "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
                if (dup2(rfd, STDIN_FILENO) < 0)
                        _exit(127);
                execve(nft, argv, envp);
                _exit(127);
        }
        rfd = safe_close(rfd);

        /* nft may exit early and close its stdin: a write error is reported
         * through its exit status, not as SIGPIPE here. */
        struct sigaction ign = { .sa_handler = SIG_IGN }, old;
        sigaction(SIGPIPE, &ign, &old);
        int w = loop_write(wfd, script, strlen(script));
        sigaction(SIGPIPE, &old, NULL);
        wfd = safe_close(wfd);

        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (!WIFEXITED(status))
                return -EPROTO;
        if (WEXITSTATUS(status) == 127)
                return -ENOENT;
        if (WEXITSTATUS(status) != 0)
                return -EPROTO;
        return w < 0 ? w : 0;
}

static int format_and_apply(int r, char *script) {
        _cleanup_free_ char *s = script;
        if (r < 0)
                return r;
        return firewall_apply(s);
}

int firewall_setup(const char *table, const char *link_prefix) {
        char *s = NULL;
        int r = firewall_format_setup(table, link_prefix, &s);
        return format_and_apply(r, s);
}

int firewall_add_sandbox(const char *table, const FirewallSandbox *s) {
        char *script = NULL;
        int r = firewall_format_add(table, s, &script);
        return format_and_apply(r, script);
}

int firewall_remove_sandbox(const char *table, const char *link) {
        char *s = NULL;
        int r = firewall_format_remove(table, link, &s);
        return format_and_apply(r, s);
}

int firewall_teardown(const char *table) {
        _cleanup_free_ char *s = NULL;
        if (!table_name_is_valid(table))
                return -EINVAL;
        /* add-then-delete: an absent table is fine */
        s = strdup_printf("add table inet %1$s\ndelete table inet %1$s\n", table);
        if (!s)
                return -ENOMEM;
        return firewall_apply(s);
}
