/* SPDX-License-Identifier: MIT */
/* Mutual TLS 1.3 under the worker protocol: handshake, then a relay thread
 * per connection between the TLS connection and a socketpair. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"
#include "time-util.h"
#include "cluster-tls.h"
#include "cluster-net.h"

#define TLS_RELAY_BUF 16384U
#define TLS_PEERS_MAX 64U          /* the client's cache: its last session with each of that many peers */
#define TLS_PEER_KEY_MAX 320U      /* "worker\naddress" */
#define CLUSTER_TLS_SESSION_S 3600 /* a ticket's lifetime, and a chain of resumptions' since its full handshake */

static char *tls_cert, *tls_key, *tls_ca;
static atomic_uint_fast64_t handshakes[2]; /* as a client: [0] full, [1] resumed */

typedef struct Relay {
        SSL_CTX *ctx;
        SSL *ssl;
        int net;   /* the TLS connection */
        int plain; /* our end of the socketpair */
        uint64_t gen;                /* a client's: its context's generation */
        char peer[TLS_PEER_KEY_MAX]; /* a client's: the cache's key, "" = not cached */
        int64_t verified;            /* a client's: when its session's full handshake was (mono_msec) */
} Relay;

/* The client's sessions: the last ticket of each peer (worker name and
 * address, so a session is offered only to the name it was verified for),
 * the least recently used one replaced when full. Dropped with the client's
 * context (its certificate, key or CA changed): gen is that context's. */
static struct {
        pthread_mutex_t lock;
        uint64_t gen;
        uint64_t clock;
        struct {
                char key[TLS_PEER_KEY_MAX];
                SSL_SESSION *session;
                uint64_t used;
                int64_t verified; /* its chain's full handshake (mono_msec) */
        } slots[TLS_PEERS_MAX];
} peers = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Under client_holder.lock: every session goes, later tickets of the old context are ignored. */
static void peers_reset(uint64_t gen) {
        pthread_mutex_lock(&peers.lock);
        for (size_t i = 0; i < TLS_PEERS_MAX; i++) {
                SSL_SESSION_free(peers.slots[i].session);
                peers.slots[i].session = NULL;
                peers.slots[i].key[0] = 0;
        }
        peers.gen = gen;
        pthread_mutex_unlock(&peers.lock);
}

/* The session to offer key (a reference of the caller's), NULL: none. A
 * session whose chain of resumptions started CLUSTER_TLS_SESSION_S ago is
 * not: a full handshake verifies both certificates again (an expiry). */
static SSL_SESSION *peers_get(const char *key, uint64_t gen, int64_t *ret_verified) {
        int64_t now = mono_msec();
        SSL_SESSION *s = NULL;

        pthread_mutex_lock(&peers.lock);
        if (peers.gen == gen)
                for (size_t i = 0; i < TLS_PEERS_MAX; i++)
                        if (peers.slots[i].session && streq(peers.slots[i].key, key)) {
                                if (now - peers.slots[i].verified >= CLUSTER_TLS_SESSION_S * INT64_C(1000)) {
                                        SSL_SESSION_free(peers.slots[i].session);
                                        peers.slots[i].session = NULL;
                                        peers.slots[i].key[0] = 0;
                                } else if (SSL_SESSION_up_ref(peers.slots[i].session) == 1) {
                                        s = peers.slots[i].session;
                                        *ret_verified = peers.slots[i].verified;
                                }
                                peers.slots[i].used = ++peers.clock;
                                break;
                        }
        pthread_mutex_unlock(&peers.lock);
        return s;
}

/* Takes session (NULL: forgets key's): 1 if taken, 0 if not (another context's). */
static int peers_put(const char *key, uint64_t gen, SSL_SESSION *session, int64_t verified) {
        size_t pick = TLS_PEERS_MAX;
        int taken = 0;

        pthread_mutex_lock(&peers.lock);
        if (peers.gen == gen) {
                for (size_t i = 0; i < TLS_PEERS_MAX; i++)
                        if (peers.slots[i].session && streq(peers.slots[i].key, key)) {
                                pick = i;
                                break;
                        }
                if (pick == TLS_PEERS_MAX && session)
                        for (size_t i = 0; i < TLS_PEERS_MAX; i++)
                                if (pick == TLS_PEERS_MAX || !peers.slots[i].session ||
                                    (peers.slots[pick].session && peers.slots[i].used < peers.slots[pick].used))
                                        pick = i;
                if (pick < TLS_PEERS_MAX) {
                        SSL_SESSION_free(peers.slots[pick].session);
                        peers.slots[pick].session = session;
                        peers.slots[pick].used = ++peers.clock;
                        peers.slots[pick].verified = verified;
                        (void) strscpy(peers.slots[pick].key, sizeof peers.slots[pick].key, key);
                        taken = session ? 1 : 0;
                }
        }
        pthread_mutex_unlock(&peers.lock);
        return taken;
}

/* A TLS 1.3 ticket, after the handshake (in the relay thread): 1 = kept. */
static int new_session(SSL *ssl, SSL_SESSION *session) {
        Relay *t = SSL_get_app_data(ssl);

        if (!t || !t->peer[0] || !SSL_SESSION_is_resumable(session))
                return 0;
        return peers_put(t->peer, t->gen, session, t->verified);
}

static void why_ssl(char *why, size_t why_size, const char *what) {
        unsigned long e = ERR_get_error();
        char buf[256] = "";

        if (e)
                ERR_error_string_n(e, buf, sizeof buf);
        ERR_clear_error();
        if (why && why_size)
                snprintf(why, why_size, "%s%s%s", what, buf[0] ? ": " : "", buf);
}

/* A fresh context from the files. A server's issues one TLS 1.3 ticket per
 * connection, sealed under keys OpenSSL makes for this context alone (in
 * memory, never written): a new context (the files changed) cannot open
 * the old tickets, so every client's next handshake is a full one. A
 * client's keeps no sessions of its own: the peers' cache below does. */
static SSL_CTX *context_new(bool server, char *why, size_t why_size) {
        static const unsigned char sid_ctx[] = "space cluster tls";
        SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());

        if (!ctx) {
                why_ssl(why, why_size, "cannot make a TLS context");
                return NULL;
        }
        if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 ||
            SSL_CTX_use_certificate_chain_file(ctx, tls_cert) != 1 ||
            SSL_CTX_use_PrivateKey_file(ctx, tls_key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1 ||
            SSL_CTX_load_verify_locations(ctx, tls_ca, NULL) != 1) {
                why_ssl(why, why_size, "cannot load cluster_tls_cert, cluster_tls_key or cluster_tls_ca");
                SSL_CTX_free(ctx);
                return NULL;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | (server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), NULL);
        SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        /* no early data (0-RTT: replayable), either way */
        SSL_CTX_set_max_early_data(ctx, 0);
        SSL_CTX_set_recv_max_early_data(ctx, 0);
        SSL_CTX_set_timeout(ctx, CLUSTER_TLS_SESSION_S);
        if (server) {
                /* stateless tickets: nothing is kept per session on the server */
                SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER | SSL_SESS_CACHE_NO_INTERNAL);
                SSL_CTX_set_num_tickets(ctx, 1);
                /* required for a resumption with client certificates */
                if (SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof sid_ctx - 1) != 1) {
                        why_ssl(why, why_size, "cannot set the TLS session context");
                        SSL_CTX_free(ctx);
                        return NULL;
                }
        } else {
                SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
                SSL_CTX_sess_set_new_cb(ctx, new_session);
                SSL_CTX_set_num_tickets(ctx, 0);
        }
        return ctx;
}

/* What a file was when the context was made: any change, a new context. */
typedef struct FileId {
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtim, ctim;
} FileId;

static void file_id(const char *path, FileId *ret) {
        struct stat st;

        if (stat(path, &st) < 0) {
                *ret = (FileId){}; /* missing: the load below says why */
                return;
        }
        *ret = (FileId){ .dev = st.st_dev, .ino = st.st_ino, .size = st.st_size, .mtim = st.st_mtim,
                         .ctim = st.st_ctim };
}

static bool file_id_equal(const FileId *a, const FileId *b) {
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtim.tv_sec == b->mtim.tv_sec &&
               a->mtim.tv_nsec == b->mtim.tv_nsec && a->ctim.tv_sec == b->ctim.tv_sec &&
               a->ctim.tv_nsec == b->ctim.tv_nsec;
}

/* The process's long-lived context of one side, rebuilt when a file changed. */
typedef struct Holder {
        pthread_mutex_t lock;
        SSL_CTX *ctx;      /* one reference of its own; each connection has one more */
        FileId files[3];   /* cert, key, CA */
        uint64_t gen;      /* bumped with every new context */
} Holder;

static Holder server_holder = { .lock = PTHREAD_MUTEX_INITIALIZER };
static Holder client_holder = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The current context (a reference of the caller's, SSL_CTX_free), and its
 * generation. A context that cannot be made is an error, never the old one
 * kept: a changed CA file that does not load trusts nothing. */
static SSL_CTX *context_get(bool server, uint64_t *ret_gen, char *why, size_t why_size) {
        Holder *h = server ? &server_holder : &client_holder;
        FileId now[3];
        SSL_CTX *ctx = NULL;

        pthread_mutex_lock(&h->lock); /* the files looked at under it: no older look wins */
        file_id(tls_cert, &now[0]);
        file_id(tls_key, &now[1]);
        file_id(tls_ca, &now[2]);
        if (!h->ctx || !file_id_equal(&now[0], &h->files[0]) || !file_id_equal(&now[1], &h->files[1]) ||
            !file_id_equal(&now[2], &h->files[2])) {
                SSL_CTX_free(h->ctx);
                h->ctx = context_new(server, why, why_size);
                memcpy(h->files, now, sizeof now);
                h->gen++;
                if (!server)
                        peers_reset(h->gen); /* sessions of the old files: none is offered again */
                if (h->ctx)
                        log_debug("Cluster TLS: a new %s context (%s, %s, %s)", server ? "server" : "client",
                                  tls_cert, tls_key, tls_ca);
        }
        if (h->ctx && SSL_CTX_up_ref(h->ctx) == 1)
                ctx = h->ctx;
        else if (h->ctx)
                why_ssl(why, why_size, "cannot reference the TLS context");
        *ret_gen = h->gen;
        pthread_mutex_unlock(&h->lock);
        return ctx;
}

int cluster_tls_setup(const char *cert, const char *key, const char *ca) {
        char why[320];
        uint64_t gen;
        SSL_CTX *ctx;

        if (isempty(cert) && isempty(key) && isempty(ca))
                return 0;
        if (isempty(cert) || isempty(key) || isempty(ca))
                return log_error_errno(EINVAL,
                                       "Cluster TLS needs cluster_tls_cert, cluster_tls_key and cluster_tls_ca");
        tls_cert = strdup(cert);
        tls_key = strdup(key);
        tls_ca = strdup(ca);
        if (!tls_cert || !tls_key || !tls_ca)
                return -ENOMEM;
        ctx = context_get(true, &gen, why, sizeof why);
        if (!ctx) {
                free(tls_cert);
                tls_cert = NULL;
                return log_error_errno(EINVAL, "Cluster TLS: %s (%s, %s, %s)", why, cert, key, ca);
        }
        SSL_CTX_free(ctx);
        log_info("Cluster connections: mutual TLS 1.3 (certificate %s, CA %s)", cert, ca);
        return 0;
}

bool cluster_tls_enabled(void) {
        return tls_cert != NULL;
}

static void relay_free(Relay *t) {
        SSL_free(t->ssl);
        SSL_CTX_free(t->ctx);
        safe_close(t->net);
        safe_close(t->plain);
        free(t);
}

/* Both ways until both ended: a close_notify is passed on as a
 * shutdown(SHUT_WR) of the plaintext end, its EOF as a close_notify. Any
 * error or a TCP close without close_notify (a truncation) ends both. */
static void *relay_thread(void *userdata) {
        Relay *t = userdata;
        _cleanup_free_ char *down = malloc(TLS_RELAY_BUF), *up = malloc(TLS_RELAY_BUF);
        size_t down_len = 0, down_off = 0, up_len = 0, up_off = 0; /* down: net → plain, up: plain → net */
        bool net_open = true, plain_open = true, shut_sent = false;

        if (!down || !up || fd_nonblock(t->net, true) < 0 || fd_nonblock(t->plain, true) < 0)
                goto done;
        for (;;) {
                short net_ev = 0, plain_ev = 0;
                bool progress = false;
                struct pollfd p[2];
                int k;

                if (net_open && down_len == 0) {
                        k = SSL_read(t->ssl, down, TLS_RELAY_BUF);
                        if (k > 0) {
                                down_len = (size_t) k, down_off = 0, progress = true;
                        } else {
                                int e = SSL_get_error(t->ssl, k);
                                if (e == SSL_ERROR_WANT_READ)
                                        net_ev |= POLLIN;
                                else if (e == SSL_ERROR_WANT_WRITE)
                                        net_ev |= POLLOUT;
                                else if (e == SSL_ERROR_ZERO_RETURN) {
                                        net_open = false, progress = true;
                                        (void) shutdown(t->plain, SHUT_WR);
                                } else
                                        goto done;
                        }
                }
                if (down_len > 0) {
                        ssize_t w = send(t->plain, down + down_off, down_len, MSG_NOSIGNAL);
                        if (w > 0) {
                                down_off += (size_t) w, down_len -= (size_t) w, progress = true;
                        } else if (w < 0 && (errno == EAGAIN || errno == EINTR))
                                plain_ev |= POLLOUT;
                        else
                                goto done;
                }
                if (plain_open && up_len == 0) {
                        ssize_t r = read(t->plain, up, TLS_RELAY_BUF);
                        if (r > 0)
                                up_len = (size_t) r, up_off = 0, progress = true;
                        else if (r == 0)
                                plain_open = false, progress = true;
                        else if (errno == EAGAIN || errno == EINTR)
                                plain_ev |= POLLIN;
                        else
                                goto done;
                }
                if (up_len > 0) {
                        k = SSL_write(t->ssl, up + up_off, (int) up_len);
                        if (k > 0) {
                                up_off += (size_t) k, up_len -= (size_t) k, progress = true;
                        } else {
                                int e = SSL_get_error(t->ssl, k);
                                if (e == SSL_ERROR_WANT_READ)
                                        net_ev |= POLLIN;
                                else if (e == SSL_ERROR_WANT_WRITE)
                                        net_ev |= POLLOUT;
                                else
                                        goto done;
                        }
                }
                if (!plain_open && up_len == 0 && !shut_sent) {
                        k = SSL_shutdown(t->ssl);
                        if (k >= 0)
                                shut_sent = true, progress = true;
                        else {
                                int e = SSL_get_error(t->ssl, k);
                                if (e == SSL_ERROR_WANT_WRITE)
                                        net_ev |= POLLOUT;
                                else if (e == SSL_ERROR_WANT_READ)
                                        net_ev |= POLLIN;
                                else
                                        goto done;
                        }
                }
                if (!net_open && down_len == 0 && shut_sent)
                        break;
                if (progress)
                        continue;
                p[0] = (struct pollfd){ .fd = net_ev ? t->net : -1, .events = net_ev };
                p[1] = (struct pollfd){ .fd = plain_ev ? t->plain : -1, .events = plain_ev };
                /* no deadline of its own (as net_splice_both): the code above
                 * the socketpair has its deadlines and closes its end */
                k = poll(p, 2, -1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        goto done;
        }
done:
        ERR_clear_error();
        relay_free(t);
        return NULL;
}

/* SO_RCVTIMEO/SO_SNDTIMEO on the blocking fd: the handshake's deadline. */
static void handshake_deadline(int fd, int msec) {
        struct timeval tv = { .tv_sec = msec / 1000, .tv_usec = (msec % 1000) * 1000 };
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* A resumed session: its certificate was verified when it was made, for
 * the same peer name (the cache's key); checked again all the same. */
static bool resumed_peer_ok(SSL *ssl, const char *worker) {
        X509 *peer = SSL_get0_peer_certificate(ssl);

        if (!peer || SSL_get_verify_result(ssl) != X509_V_OK)
                return false;
        return isempty(worker) ||
               X509_check_host(peer, worker, 0, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS, NULL) == 1;
}

static int wrap(bool server, int fd, const char *worker, const char *address, int *ret_fd, char *why,
                size_t why_size) {
        Relay *t = new0(Relay, 1);
        int sp[2] = { -EBADF, -EBADF }, one = 1, r;
        int64_t offered = 0;
        pthread_attr_t attr;
        pthread_t th;

        if (!t) {
                safe_close(fd);
                return -ENOMEM;
        }
        *t = (Relay){ .net = fd, .plain = -EBADF };
        /* a listener's accepted fd too: else the reply after a ticket waits for its ACK */
        (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        t->ctx = context_get(server, &t->gen, why, why_size);
        if (!t->ctx) {
                relay_free(t);
                return -EIO;
        }
        t->ssl = SSL_new(t->ctx);
        if (!t->ssl || SSL_set_fd(t->ssl, fd) != 1) {
                why_ssl(why, why_size, "cannot make a TLS connection");
                relay_free(t);
                return -ENOMEM;
        }
        if (!server && !isempty(worker)) {
                /* the worker's certificate must name it */
                SSL_set_hostflags(t->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
                if (SSL_set1_host(t->ssl, worker) != 1) {
                        why_ssl(why, why_size, "bad worker name");
                        relay_free(t);
                        return -EINVAL;
                }
        }
        if (!server && address && snprintf(t->peer, sizeof t->peer, "%s\n%s", strempty(worker), address) <
                                                  (int) sizeof t->peer) {
                SSL_SESSION *session = peers_get(t->peer, t->gen, &offered);

                SSL_set_app_data(t->ssl, t);
                if (session) {
                        (void) SSL_set_session(t->ssl, session); /* a full handshake if refused */
                        SSL_SESSION_free(session);
                }
        } else
                t->peer[0] = 0;
        handshake_deadline(fd, WORKER_HELLO_TIMEOUT_MSEC);
        r = server ? SSL_accept(t->ssl) : SSL_connect(t->ssl);
        if (r == 1 && !server && SSL_session_reused(t->ssl) && !resumed_peer_ok(t->ssl, worker)) {
                snprintf(why, why_size, "TLS handshake refused: the resumed session's certificate does not name %s",
                         strna(worker));
                r = -1;
        } else if (r != 1) {
                long v = SSL_get_verify_result(t->ssl);
                if (v != X509_V_OK && why && why_size) {
                        ERR_clear_error();
                        snprintf(why, why_size, "TLS handshake refused: the peer's certificate: %s",
                                 X509_verify_cert_error_string(v));
                } else
                        why_ssl(why, why_size, "TLS handshake failed");
        }
        if (r != 1) {
                if (t->peer[0])
                        (void) peers_put(t->peer, t->gen, NULL, 0);
                relay_free(t);
                return -EPROTO;
        }
        if (!server) {
                bool resumed = SSL_session_reused(t->ssl);
                t->verified = resumed ? offered : mono_msec(); /* the tickets to come inherit it */
                atomic_fetch_add(&handshakes[resumed ? 1 : 0], 1);
                log_debug("Worker %s (%s): TLS session %s", strna(worker), strna(address),
                          resumed ? "resumed" : "made (a full handshake)");
        }
        handshake_deadline(fd, 0);
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
                r = negative_errno();
                relay_free(t);
                return r;
        }
        t->plain = sp[0];
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = pthread_create(&th, &attr, relay_thread, t);
        pthread_attr_destroy(&attr);
        if (r != 0) {
                relay_free(t);
                safe_close(sp[1]);
                return -r;
        }
        *ret_fd = sp[1];
        return 0;
}

int cluster_tls_client(int fd, const char *worker, const char *address, int *ret_fd, char *why, size_t why_size) {
        return wrap(false, fd, worker, address, ret_fd, why, why_size);
}

int cluster_tls_server(int fd, int *ret_fd, char *why, size_t why_size) {
        return wrap(true, fd, NULL, NULL, ret_fd, why, why_size);
}

void cluster_tls_handshakes(uint64_t *ret_full, uint64_t *ret_resumed) {
        *ret_full = atomic_load(&handshakes[0]);
        *ret_resumed = atomic_load(&handshakes[1]);
}
