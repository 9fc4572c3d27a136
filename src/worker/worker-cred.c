/* SPDX-License-Identifier: MIT */
/* Credentials of the sandboxes on this host. A sandbox that holds a grant
 * gets its own CA (tls-ca.h) for the life of its processes: the key and
 * certificate stay on the host (<run>/sandboxes/<id>/gateway-ca.pem, 0600,
 * gone with the sandbox's run directory), the certificate goes into the
 * sandbox's trust store, and both go to the gateway with the sandbox's
 * granted credentials, still sealed (the gateway opens them). Whenever a
 * grant, a value, an expiry or a revocation changes, the set is sent again:
 * in effect for the next request.
 *
 * The trust store (written from the host into the sandbox's root, every
 * path resolved inside the root with openat2(RESOLVE_IN_ROOT)):
 *   /etc/ssl/certs/ca-certificates.crt   the system bundle (OpenSSL, curl,
 *                                        wget, git, python; /usr/lib/ssl/cert.pem
 *                                        links to it) with our block appended
 *                                        between markers (replaced, not stacked)
 *   /etc/ssl/certs/space-sandbox-ca.pem  the CA alone (NODE_EXTRA_CA_CERTS)
 *   /etc/ssl/certs/<subject hash>.0      → space-sandbox-ca.pem (CApath lookups)
 *   /usr/local/share/ca-certificates/space-sandbox-ca.crt
 *                                        so update-ca-certificates keeps it
 * The API sets SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE,
 * GIT_SSL_CAINFO and NODE_EXTRA_CA_CERTS in granted sandboxes. */
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/crypto.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "gateway-client.h"
#include "log.h"
#include "str-util.h"
#include "tls-ca.h"
#include "worker-internal.h"

#define WORKER_CA_FILE "gateway-ca.pem"
#define TRUST_BUNDLE_MAX (8U * 1024U * 1024U) /* a bundle larger than this is not read back (replaced) */
#define TRUST_BEGIN "# space sandbox CA (written by space; replaced at every start)\n"
#define TRUST_END "# end of space sandbox CA\n"
#define TRUST_CA_NAME "space-sandbox-ca.pem"

static int open_in_root(int rootfd, const char *rel, int flags, mode_t mode) {
        struct open_how how = {
                .flags = (uint64_t) (flags | O_CLOEXEC | O_NOFOLLOW),
                .mode = (flags & O_CREAT) ? mode : 0,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        int fd = (int) syscall(SYS_openat2, rootfd, rel, &how, sizeof how);
        return fd < 0 ? -errno : fd;
}

/* The directory rel (made, 0755, where missing) inside the root. */
static int dir_in_root(int rootfd, const char *rel) {
        char path[256];
        int fd = -EBADF;

        if (strlen(rel) >= sizeof path)
                return -ENAMETOOLONG;
        memcpy(path, rel, strlen(rel) + 1);
        for (char *p = path;; p++) {
                if (*p != '/' && *p != 0)
                        continue;
                char save = *p;
                *p = 0;
                safe_close(fd);
                fd = open_in_root(rootfd, path, O_DIRECTORY | O_RDONLY, 0);
                if (fd == -ENOENT) {
                        char *slash = strrchr(path, '/');
                        _cleanup_close_ int parent = slash ? (*slash = 0, open_in_root(rootfd, path, O_DIRECTORY | O_RDONLY, 0))
                                                           : open_in_root(rootfd, ".", O_DIRECTORY | O_RDONLY, 0);
                        if (slash)
                                *slash = '/';
                        if (parent < 0)
                                return parent;
                        if (mkdirat(parent, slash ? slash + 1 : path, 0755) < 0 && errno != EEXIST)
                                return -errno;
                        struct stat st;
                        if (fstat(parent, &st) >= 0 &&
                            fchownat(parent, slash ? slash + 1 : path, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
                                log_debug("Cannot give %s the owner of its parent: %m", path);
                        fd = open_in_root(rootfd, path, O_DIRECTORY | O_RDONLY, 0);
                }
                if (fd < 0)
                        return fd;
                *p = save;
                if (save == 0)
                        return fd;
        }
}

/* Writes name in dirfd atomically (a temporary name, then rename), owned like the directory. */
static int write_in_dir(int dirfd, const char *name, const void *data, size_t n) {
        char tmp[128];
        struct stat st;
        int r;

        snprintf(tmp, sizeof tmp, ".%s.space-tmp", name);
        (void) unlinkat(dirfd, tmp, 0);
        _cleanup_close_ int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        r = loop_write(fd, data, n);
        if (r >= 0 && fstat(dirfd, &st) >= 0 && fchown(fd, st.st_uid, st.st_gid) < 0)
                log_debug("Cannot give %s the owner of its directory: %m", name);
        if (r >= 0 && fchmod(fd, 0644) < 0)
                r = -errno;
        if (r >= 0 && renameat(dirfd, tmp, dirfd, name) < 0)
                r = -errno;
        if (r < 0)
                (void) unlinkat(dirfd, tmp, 0);
        return r;
}

/* The bundle old[0..n) (NUL-terminated, modified) without an earlier block
 * of ours, then the new block. */
static int bundle_compose(char *old, size_t n, const char *cert_pem, char **ret, size_t *ret_n) {
        if (old) {
                if (memchr(old, 0, n))
                        n = 0; /* not a text bundle: replaced */
                old[n] = 0;
                char *b = strstr(old, TRUST_BEGIN), *e = b ? strstr(b, TRUST_END) : NULL;
                if (b && e) {
                        e += STRLEN(TRUST_END);
                        memmove(b, e, strlen(e) + 1);
                        n = strlen(old);
                } else if (b)
                        n = (size_t) (b - old), old[n] = 0;
        } else
                n = 0;
        char *s = strjoin(n ? old : "", n && old[n - 1] != '\n' ? "\n" : "", TRUST_BEGIN, cert_pem, TRUST_END);
        if (!s)
                return -ENOMEM;
        *ret_n = strlen(s);
        *ret = s;
        return 0;
}

static int bundle_with(int dirfd, const char *cert_pem, char **ret, size_t *ret_n) {
        _cleanup_free_ char *old = NULL;
        size_t n = 0;
        _cleanup_close_ int fd = openat(dirfd, "ca-certificates.crt", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        struct stat st;

        if (fd >= 0 && fstat(fd, &st) >= 0 && S_ISREG(st.st_mode) && (uint64_t) st.st_size <= TRUST_BUNDLE_MAX) {
                old = malloc((size_t) st.st_size + 1);
                if (!old)
                        return -ENOMEM;
                ssize_t k = loop_read(fd, old, (size_t) st.st_size);
                n = k > 0 ? (size_t) k : 0;
                old[n] = 0;
        }
        return bundle_compose(old, n, cert_pem, ret, ret_n);
}

static int trust_install(const char *root, const char *cert_pem, X509 *cert) {
        _cleanup_close_ int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int certs = -EBADF, local = -EBADF;
        _cleanup_free_ char *bundle = NULL;
        char hash[32];
        size_t n;
        int r;

        if (rootfd < 0)
                return -errno;
        certs = dir_in_root(rootfd, "etc/ssl/certs");
        if (certs < 0)
                return certs;
        r = bundle_with(certs, cert_pem, &bundle, &n);
        if (r >= 0)
                r = write_in_dir(certs, "ca-certificates.crt", bundle, n);
        if (r >= 0)
                r = write_in_dir(certs, TRUST_CA_NAME, cert_pem, strlen(cert_pem));
        if (r < 0)
                return r;
        snprintf(hash, sizeof hash, "%08lx.0", X509_subject_name_hash(cert));
        if (symlinkat(TRUST_CA_NAME, certs, hash) < 0 && errno != EEXIST)
                log_debug("Cannot link %s in the sandbox's /etc/ssl/certs: %m", hash);
        local = dir_in_root(rootfd, "usr/local/share/ca-certificates");
        if (local >= 0)
                (void) write_in_dir(local, "space-sandbox-ca.crt", cert_pem, strlen(cert_pem));
        return 0;
}

/* The same files in a running sandbox through its agent (vm: its files are
 * in its disk image, which only the guest may write while it runs); the
 * subject-hash name is a copy (the agent writes files, not links). */
static int trust_install_agent(Worker *w, const char *id, const char *cert_pem, X509 *cert) {
        _cleanup_free_ char *old = NULL, *bundle = NULL;
        _cleanup_(worker_agent_file_close) AgentFile fd = { .fd = -EBADF };
        char hash[64];
        size_t n = 0;
        int r;

        r = worker_agent_file_open(w, id, &fd);
        if (r < 0)
                return r;
        r = worker_agent_file_read(&fd, "/etc/ssl/certs/ca-certificates.crt", TRUST_BUNDLE_MAX, &old, &n);
        if (r < 0 && r != -ENOENT && r != -EFBIG)
                return r;
        r = bundle_compose(r < 0 ? NULL : old, n, cert_pem, &bundle, &n);
        if (r >= 0)
                r = worker_agent_file_write(&fd, "/etc/ssl/certs/ca-certificates.crt", bundle, n, 0644);
        if (r >= 0)
                r = worker_agent_file_write(&fd, "/etc/ssl/certs/" TRUST_CA_NAME, cert_pem, strlen(cert_pem), 0644);
        if (r < 0)
                return r;
        snprintf(hash, sizeof hash, "/etc/ssl/certs/%08lx.0", X509_subject_name_hash(cert));
        (void) worker_agent_file_write(&fd, hash, cert_pem, strlen(cert_pem), 0644);
        (void) worker_agent_file_write(&fd, "/usr/local/share/ca-certificates/space-sandbox-ca.crt", cert_pem,
                                       strlen(cert_pem), 0644);
        return 0;
}

static int ca_path(Worker *w, const char *id, char *buf, size_t n) {
        int k = snprintf(buf, n, "%s/%s/" WORKER_CA_FILE, w->agent_dir, id);
        return k < 0 || (size_t) k >= n ? -ENAMETOOLONG : 0;
}

void worker_cred_forget(Worker *w, const char *id) {
        char p[PATH_MAX];
        if (ca_path(w, id, p, sizeof p) >= 0)
                (void) unlink(p);
}

static int copy_secret_file(const char *from, const char *to) {
        _cleanup_free_ char *all = NULL;
        size_t n = 0;
        int r;

        r = read_full_file(from, 2 * TLS_CA_PEM_MAX, &all, &n);
        if (r < 0)
                return r;
        r = write_file_atomic(to, all, n, 0600);
        OPENSSL_cleanse(all, n);
        return r;
}

int worker_cred_save(Worker *w, const char *id, const char *path) {
        char p[PATH_MAX];
        int r;

        r = ca_path(w, id, p, sizeof p);
        if (r < 0)
                return r;
        (void) unlink(path);
        r = copy_secret_file(p, path);
        return r == -ENOENT ? 0 : r;
}

int worker_cred_copy_saved(const char *from, const char *to) {
        int r;

        (void) unlink(to);
        r = copy_secret_file(from, to);
        return r == -ENOENT ? 0 : r;
}

int worker_cred_load_saved(Worker *w, const char *id, const char *path, bool consume) {
        char p[PATH_MAX];
        int r;

        r = ca_path(w, id, p, sizeof p);
        if (r < 0)
                return r;
        r = copy_secret_file(path, p);
        if (consume)
                (void) unlink(path);
        return r;
}

/* The sandbox's CA: loaded from its file, or made (and its certificate
 * installed into its trust store: into a tree root from here, into an image
 * root through its agent) when there is none. ret_file: cert PEM then key
 * PEM, wiped by the caller. */
static int ca_get(Worker *w, const char *id, RuntimeRoot root_kind, char **ret_file, size_t *ret_n,
                  size_t *ret_cert_n) {
        _cleanup_(tls_ca_freep) TlsCa *ca = NULL;
        _cleanup_free_ char *cert = NULL, *key = NULL, *root = NULL, *all = NULL;
        size_t cn = 0, kn = 0, n = 0;
        char p[PATH_MAX], cn_text[96];
        int r;

        r = ca_path(w, id, p, sizeof p);
        if (r < 0)
                return r;
        r = read_full_file(p, 2 * TLS_CA_PEM_MAX, &all, &n);
        if (r >= 0) {
                const char *k = strstr(all, "-----BEGIN PRIVATE KEY-----");
                if (!k) {
                        OPENSSL_cleanse(all, n);
                        return -EBADMSG;
                }
                *ret_cert_n = (size_t) (k - all);
                *ret_n = n;
                *ret_file = TAKE_PTR(all);
                return 0;
        }
        if (r != -ENOENT)
                return r;
        snprintf(cn_text, sizeof cn_text, "space sandbox %s", id);
        r = tls_ca_new(cn_text, &ca);
        if (r >= 0)
                r = tls_ca_cert_pem(ca, &cert, &cn);
        if (r >= 0)
                r = tls_ca_key_pem(ca, &key, &kn);
        if (r < 0)
                goto finish;
        all = strjoin(cert, key);
        if (!all) {
                r = -ENOMEM;
                goto finish;
        }
        n = cn + kn;
        if (root_kind == RUNTIME_ROOT_IMAGE) /* its files are the guest's to write */
                r = trust_install_agent(w, id, cert, tls_ca_cert(ca));
        else {
                r = pool_sandbox_root_path(w->pool, id, &root);
                if (r >= 0)
                        r = trust_install(root, cert, tls_ca_cert(ca));
        }
        if (r < 0) {
                log_warning_errno(r, "Sandbox %s: cannot install its CA into its trust store: %m", id);
                goto finish;
        }
        r = write_file_atomic(p, all, n, 0600);
        if (r < 0)
                goto finish;
        *ret_cert_n = cn;
        *ret_n = n;
        *ret_file = TAKE_PTR(all);
finish:
        if (key)
                OPENSSL_cleanse(key, kn);
        if (all)
                OPENSSL_cleanse(all, n);
        return r;
}

int worker_cred_sync(Worker *w, const char *id, bool registered_now, ApiError *e) {
        LiveSandbox *l = worker_live_find(w, id);
        Credential *list = NULL;
        _cleanup_free_ GatewayCred *gc = NULL;
        _cleanup_free_ char *file = NULL;
        char err[512] = "";
        size_t n = 0, file_n = 0, cert_n = 0;
        int r;

        if (!w->gateway || !l || !l->net)
                return 0; /* not here, no network (vm), or gateway = off: nothing goes out anyway */
        r = store_grant_list(w->store, id, &list, &n);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "cannot list the credentials of sandbox %s: %s", id, strerror(-r));
        if (n == 0 && registered_now)
                return 0; /* its registration holds none */
        if (n > 0) {
                r = ca_get(w, id, l->rt->root, &file, &file_n, &cert_n);
                if (r < 0) {
                        credential_array_free(list, n);
                        return worker_storage_error(w, r, e, API_INTERNAL,
                                                    "cannot set up the TLS authority of sandbox %s: %s", id,
                                                    strerror(-r));
                }
                file[cert_n - 1] = 0; /* cert PEM ends with '\n': it becomes the cert's end */
        }
        gc = new0(GatewayCred, n ?: 1);
        if (!gc) {
                r = api_error(e, -ENOMEM, API_INTERNAL, "out of memory");
                goto finish;
        }
        for (size_t i = 0; i < n; i++) {
                const Credential *c = &list[i];
                gc[i] = (GatewayCred){
                        .id = c->id, .tenant = c->tenant_id, .name = c->name, .hosts_json = c->hosts_json,
                        .apply = c->apply == CRED_APPLY_BASIC ? "basic" : "header",
                        .header_name = c->header_name, .header_format = c->header_format, .basic_user = c->basic_user,
                        .ciphertext = c->ciphertext, .nonce = c->nonce, .key_id = c->key_id,
                        .expires_usec = c->expires_usec, .revoked_usec = c->revoked_usec,
                };
        }
        /* the cert PEM lost its final newline above; the key PEM follows it */
        r = gateway_client_set_credentials(w->gateway, id, n ? file : NULL, n ? file + cert_n : NULL, gc, n, err,
                                           sizeof err);
        if (r < 0) {
                Sandbox sb = {};
                (void) strscpy(sb.id, sizeof sb.id, id);
                (void) store_sandbox_get(w->store, NULL, id, &sb);
                worker_event(w, &sb, "credential.unavailable", err[0] ? err : strerror(-r), NULL);
                sandbox_done(&sb);
                r = api_error(e, r, API_INTERNAL, "the gateway cannot apply the credentials of %s: %s", id,
                              err[0] ? err : strerror(-r));
        }
finish:
        if (file)
                OPENSSL_cleanse(file, file_n);
        credential_array_free(list, n);
        return r;
}

/* {"op":"set_credentials","id":ID}: the sandbox's grants (from the store) to its gateway. */
void worker_op_set_credentials(Worker *w, const JsonValue *req, JsonWriter *jw) {
        const char *id = json_string(json_get(req, "id"));
        ApiError e = {};

        if (!id || !id_valid(id)) {
                api_error(&e, -EINVAL, API_INVALID_ARGUMENT, "set_credentials needs a sandbox id");
                return worker_reply_error(jw, &e);
        }
        if (worker_cred_sync(w, id, false, &e) < 0)
                return worker_reply_error(jw, &e);
        worker_reply_ok(jw);
}
