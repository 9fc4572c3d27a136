/* SPDX-License-Identifier: MIT */
/* A template from an image archive: an OCI layout packed in a tar (oci-layout
 * + index.json + blobs/sha256/...) or what docker/podman save write
 * (manifest.json), anything else a plain root file system tar. The blobs are
 * read in place from the archive; every blob's sha256 and size are checked
 * against the manifest (docker: each layer against the config's diff_ids).
 * On btrfs each layer becomes a read-only subvolume layers/<key>, key the
 * sha256 of the parent's key and the layer's digest, made as a snapshot of its
 * parent: images sharing a base share its blocks, and a layer already there
 * is neither read nor written again. The template is a read-only snapshot of
 * the top layer. */

#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "alloc-util.h"
#include "btrfs.h"
#include "fd-util.h"
#include "log.h"
#include "oci.h"
#include "pool-internal.h"
#include "str-util.h"

#define BLOB_CHUNK (256U * 1024U)
#define IMPORT_TMP_SUFFIX_LEN 8U

/* --- a blob: a region of the archive, maybe gzip'd, hashed as it is read --- */

typedef struct Blob {
        int fd;
        uint64_t off, size, pos; /* of the raw bytes */
        OciCompression compression;
        z_stream z;
        bool zinit, zend;
        uint8_t *in;
        EVP_MD_CTX *sha; /* over the bytes delivered (uncompressed) */
} Blob;

static void blob_done(Blob *b) {
        if (b->zinit)
                inflateEnd(&b->z);
        free(b->in);
        EVP_MD_CTX_free(b->sha);
        *b = (Blob){ .fd = -EBADF };
}

static int blob_raw(Blob *b, void *buf, size_t n, size_t *ret) {
        ssize_t k;

        if (b->pos >= b->size) {
                *ret = 0;
                return 0;
        }
        if (n > b->size - b->pos)
                n = (size_t) (b->size - b->pos);
        k = pread(b->fd, buf, n, (off_t) (b->off + b->pos));
        if (k < 0)
                return negative_errno();
        if (k == 0)
                return -EBADMSG;
        b->pos += (uint64_t) k;
        *ret = (size_t) k;
        return 0;
}

/* Up to n bytes of the (uncompressed) stream: *ret 0 at its end. */
static int blob_some(Blob *b, uint8_t *buf, size_t n, size_t *ret) {
        int r;

        if (b->compression == OCI_COMPRESSION_NONE)
                return blob_raw(b, buf, n, ret);
        if (b->zend) {
                *ret = 0;
                return 0;
        }
        b->z.next_out = buf;
        b->z.avail_out = (uInt) n;
        while (b->z.avail_out == n) {
                if (b->z.avail_in == 0) {
                        size_t got;
                        r = blob_raw(b, b->in, BLOB_CHUNK, &got);
                        if (r < 0)
                                return r;
                        if (got == 0)
                                return -EBADMSG; /* truncated gzip */
                        b->z.next_in = b->in;
                        b->z.avail_in = (uInt) got;
                }
                r = inflate(&b->z, Z_NO_FLUSH);
                if (r == Z_STREAM_END) {
                        b->zend = true;
                        break;
                }
                if (r != Z_OK && r != Z_BUF_ERROR)
                        return -EBADMSG;
        }
        *ret = n - b->z.avail_out;
        return 0;
}

static int blob_read_exact(void *u, void *buf, size_t n) {
        Blob *b = u;
        size_t done = 0;

        while (done < n) {
                size_t got;
                int r = blob_some(b, (uint8_t *) buf + done, n - done, &got);
                if (r < 0)
                        return r;
                if (got == 0)
                        return -EBADMSG;
                if (b->sha && EVP_DigestUpdate(b->sha, (uint8_t *) buf + done, got) != 1)
                        return -EIO;
                done += got;
        }
        return 0;
}

static int blob_skip_raw(void *u, uint64_t n) {
        Blob *b = u;
        if (n > b->size - b->pos)
                return -EBADMSG;
        b->pos += n;
        return 0;
}

static int blob_open(Blob *b, int fd, uint64_t off, uint64_t size, OciCompression c, bool hash) {
        *b = (Blob){ .fd = fd, .off = off, .size = size, .compression = c };
        if (c == OCI_COMPRESSION_GZIP) {
                b->in = malloc(BLOB_CHUNK);
                if (!b->in)
                        return -ENOMEM;
                if (inflateInit2(&b->z, 16 + MAX_WBITS) != Z_OK)
                        return -ENOMEM;
                b->zinit = true;
        }
        if (hash) {
                b->sha = EVP_MD_CTX_new();
                if (!b->sha || EVP_DigestInit_ex(b->sha, EVP_sha256(), NULL) != 1)
                        return -ENOMEM;
        }
        return 0;
}

/* Reads the rest of the stream into the hash; "sha256:<hex>" of it. */
static int blob_finish_digest(Blob *b, char ret[static 72]) {
        _cleanup_free_ uint8_t *buf = malloc(BLOB_CHUNK);
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned mdlen = 0;

        if (!buf)
                return -ENOMEM;
        for (;;) {
                size_t got;
                int r = blob_some(b, buf, BLOB_CHUNK, &got);
                if (r < 0)
                        return r;
                if (got == 0)
                        break;
                if (EVP_DigestUpdate(b->sha, buf, got) != 1)
                        return -EIO;
        }
        if (EVP_DigestFinal_ex(b->sha, md, &mdlen) != 1 || mdlen != 32)
                return -EIO;
        memcpy(ret, "sha256:", 7);
        for (unsigned i = 0; i < 32; i++)
                snprintf(ret + 7 + 2 * i, 3, "%02x", md[i]);
        return 0;
}

/* --- the archive's members --- */

typedef struct Member {
        char *path; /* clean */
        uint64_t off, size;
} Member;

typedef struct Archive {
        int fd;
        Member *m;
        size_t n, allocated;
} Archive;

static void archive_done(Archive *a) {
        for (size_t i = 0; i < a->n; i++)
                free(a->m[i].path);
        free(a->m);
        safe_close(a->fd);
        *a = (Archive){ .fd = -EBADF };
}

static int archive_index(Archive *a, char *err, size_t errlen) {
        Blob b = {};
        struct stat st;
        TarStream s;
        int r;

        if (fstat(a->fd, &st) < 0)
                return negative_errno();
        r = blob_open(&b, a->fd, 0, (uint64_t) st.st_size, OCI_COMPRESSION_NONE, false);
        if (r < 0)
                return r;
        s = (TarStream){ .read = blob_read_exact, .skip = blob_skip_raw, .userdata = &b };
        for (;;) {
                _cleanup_(tar_entry_done) TarEntry t = {};
                char *clean = NULL;

                r = tar_next(&s, &t, err, errlen);
                if (r <= 0)
                        break;
                if (t.type != TAR_FILE || oci_path_clean(t.path, &clean) < 0)
                        continue;
                if (a->n >= OCI_OUTER_ENTRIES_MAX) {
                        free(clean);
                        r = -E2BIG;
                        break;
                }
                if (GREEDY_REALLOC(a->m, a->allocated, a->n + 1) < 0) {
                        free(clean);
                        r = -ENOMEM;
                        break;
                }
                a->m[a->n++] = (Member){ .path = clean, .off = s.offset, .size = t.size };
        }
        blob_done(&b);
        return r;
}

static const Member *archive_find(const Archive *a, const char *path) {
        _cleanup_free_ char *clean = NULL;

        if (oci_path_clean(path, &clean) < 0)
                return NULL;
        for (size_t i = a->n; i > 0; i--) /* the last one wins, as tar extracts */
                if (streq(a->m[i - 1].path, clean))
                        return &a->m[i - 1];
        return NULL;
}

int oci_detect_format(int fd, OciFormat *ret) {
        _cleanup_(archive_done) Archive a = { .fd = -EBADF };
        char err[64];

        a.fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (a.fd < 0)
                return negative_errno();
        *ret = OCI_FORMAT_ROOTFS;
        if (archive_index(&a, err, sizeof err) < 0)
                return 0; /* not a tar this reader takes (e.g. compressed): a root fs for GNU tar */
        if (archive_find(&a, "oci-layout") && archive_find(&a, "index.json"))
                *ret = OCI_FORMAT_OCI;
        else if (archive_find(&a, "manifest.json"))
                *ret = OCI_FORMAT_DOCKER;
        return 0;
}

/* A blob by digest, its size and sha256 checked. */
static int blob_member(const Archive *a, const OciDescriptor *d, const char *what, const Member **ret, ApiError *e) {
        char path[96];
        const Member *m;

        snprintf(path, sizeof path, "blobs/sha256/%s", d->digest + 7);
        m = archive_find(a, path);
        if (!m)
                return api_error(e, -ENOENT, API_BAD_REQUEST, "the image's %s (%s) is missing from the archive", what,
                                 d->digest);
        if (m->size != d->size)
                return api_error(e, -EBADMSG, API_BAD_REQUEST,
                                 "the image's %s (%s) is %llu bytes, the manifest declares %llu", what, d->digest,
                                 (unsigned long long) m->size, (unsigned long long) d->size);
        *ret = m;
        return 0;
}

static int member_digest(const Archive *a, const Member *m, char ret[static 72]) {
        Blob b;
        int r = blob_open(&b, a->fd, m->off, m->size, OCI_COMPRESSION_NONE, true);
        if (r >= 0)
                r = blob_finish_digest(&b, ret);
        blob_done(&b);
        return r;
}

static int verify(const Archive *a, const Member *m, const char *digest, const char *what, ApiError *e) {
        char got[72];
        int r = member_digest(a, m, got);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "cannot read the image's %s: %s", what, strerror(-r));
        if (!streq(got, digest))
                return api_error(e, -EBADMSG, API_BAD_REQUEST, "the image's %s does not match its digest %s (it is %s)",
                                 what, digest, got);
        return 0;
}

static int member_json(const Archive *a, const Member *m, const char *what, char **ret, ApiError *e) {
        _cleanup_free_ char *buf = NULL;
        Blob b;
        int r;

        if (!m)
                return api_error(e, -ENOENT, API_BAD_REQUEST, "the image's %s is missing from the archive", what);
        if (m->size > OCI_JSON_MAX)
                return api_error(e, -E2BIG, API_BAD_REQUEST, "the image's %s is larger than %u bytes", what, OCI_JSON_MAX);
        buf = malloc((size_t) m->size + 1);
        if (!buf)
                return -ENOMEM;
        r = blob_open(&b, a->fd, m->off, m->size, OCI_COMPRESSION_NONE, false);
        if (r >= 0)
                r = blob_read_exact(&b, buf, (size_t) m->size);
        blob_done(&b);
        if (r < 0)
                return api_error(e, r, API_BAD_REQUEST, "cannot read the image's %s", what);
        buf[m->size] = '\0';
        *ret = TAKE_PTR(buf);
        return 0;
}

/* --- the layers --- */

typedef struct Layer {
        const Member *m;
        OciCompression compression;
        char digest[72];      /* checked against the raw blob (OCI) */
        char diff_id[72];     /* checked against the uncompressed stream (docker), or "" */
        char key[65];
} Layer;

static int layer_apply_passes(Pool *p, const Archive *a, const Layer *l, int root_fd, const char *what, ApiError *e) {
        for (int pass = 0; pass < 2; pass++) {
                Blob b;
                TarStream s;
                int r;

                r = blob_open(&b, a->fd, l->m->off, l->m->size, l->compression, pass == 0 && l->diff_id[0]);
                if (r < 0) {
                        blob_done(&b);
                        return r;
                }
                s = (TarStream){ .read = blob_read_exact, .userdata = &b,
                                 .skip = l->compression == OCI_COMPRESSION_NONE && !b.sha ? blob_skip_raw : NULL };
                r = oci_layer_apply(p, root_fd, &s, pass == 0, what, e);
                if (r >= 0 && b.sha) {
                        char got[72];
                        r = blob_finish_digest(&b, got);
                        if (r < 0)
                                (void) api_error(e, r, API_BAD_REQUEST, "%s: cannot read it to the end", what);
                        else if (!streq(got, l->diff_id))
                                r = api_error(e, -EBADMSG, API_BAD_REQUEST,
                                              "%s does not match its diff_id %s (it is %s)", what, l->diff_id, got);
                }
                blob_done(&b);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int tmp_name(const char *prefix, char **ret) {
        char suffix[IMPORT_TMP_SUFFIX_LEN + 1];
        int r = random_alnum(suffix, IMPORT_TMP_SUFFIX_LEN);
        if (r < 0)
                return r;
        *ret = strjoin(prefix, ".", suffix);
        return *ret ? 0 : -ENOMEM;
}

/* Builds the layers (btrfs: those not cached) and commits the template. */
/* The image config's exec defaults at the template's root (OCI_DEFAULTS_FILE),
 * where space-agent reads them. "{}" writes nothing. */
static int defaults_write(int tmp_fd, const char *work, const char *defaults) {
        _cleanup_close_ int root = -EBADF, fd = -EBADF;

        if (!defaults || streq(defaults, "{}"))
                return 0;
        root = openat(tmp_fd, work, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
                return negative_errno();
        if (unlinkat(root, OCI_DEFAULTS_FILE, 0) < 0 && errno != ENOENT)
                return negative_errno();
        fd = openat(root, OCI_DEFAULTS_FILE, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return negative_errno();
        return loop_write(fd, defaults, strlen(defaults));
}

static int import_layers(Pool *p, const char *name, const Archive *a, Layer *layers, size_t n, const char *defaults,
                         uint64_t *ret_size, ApiError *e) {
        _cleanup_close_ int tmp_fd = -EBADF, tpl_fd = -EBADF, lay_fd = -EBADF;
        _cleanup_free_ char *work = NULL, *tpath = NULL;
        bool btrfs = p->kind == POOL_BTRFS;
        unsigned cached = 0;
        int r;

        tmp_fd = pool_open_subdir(p, POOL_TMP_DIR);
        tpl_fd = tmp_fd >= 0 ? pool_open_subdir(p, POOL_TEMPLATES_DIR) : tmp_fd;
        lay_fd = tpl_fd >= 0 ? pool_open_subdir(p, POOL_LAYERS_DIR) : tpl_fd;
        if (lay_fd < 0)
                return api_error(e, lay_fd, API_INTERNAL, "cannot open the pool: %s", strerror(-lay_fd));

        for (size_t i = 0; i < n; i++) {
                char what[128];
                struct stat st;

                snprintf(what, sizeof what, "layer %zu (%s)", i + 1, layers[i].digest[0] ? layers[i].digest : layers[i].diff_id);
                if (btrfs && fstatat(lay_fd, layers[i].key, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                        cached++;
                        continue;
                }
                if (layers[i].compression == OCI_COMPRESSION_ZSTD)
                        return api_error(e, -EOPNOTSUPP, API_BAD_REQUEST,
                                         "%s is zstd-compressed; this server applies uncompressed and gzip layers", what);
                if (layers[i].digest[0]) {
                        r = verify(a, layers[i].m, layers[i].digest, what, e);
                        if (r < 0)
                                return r;
                }
                if (!work || btrfs) {
                        free(work);
                        work = NULL;
                        r = tmp_name(btrfs ? layers[i].key : name, &work);
                        if (r < 0)
                                return r;
                        if (btrfs && i > 0) {
                                _cleanup_close_ int pfd = openat(lay_fd, layers[i - 1].key,
                                                                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                                r = pfd < 0 ? negative_errno() : btrfs_subvol_snapshot(pfd, tmp_fd, work, false);
                        } else if (btrfs)
                                r = btrfs_subvol_create(tmp_fd, work);
                        else
                                r = mkdirat(tmp_fd, work, 0755) < 0 ? negative_errno() : 0;
                        if (r < 0)
                                return api_error(e, r, r == -ENOSPC ? API_INSUFFICIENT_STORAGE : API_INTERNAL,
                                                 "cannot create the layer's subvolume: %s", strerror(-r));
                }
                _cleanup_close_ int root_fd = openat(tmp_fd, work, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                r = root_fd < 0 ? negative_errno() : layer_apply_passes(p, a, &layers[i], root_fd, what, e);
                if (r >= 0 && btrfs) {
                        r = btrfs_subvol_snapshot(root_fd, lay_fd, layers[i].key, true);
                        if (r == -EEXIST)
                                r = 0; /* a concurrent import made it */
                }
                if (r < 0 || btrfs) {
                        int k = pool_remove_entry(p, tmp_fd, work);
                        if (k < 0)
                                log_debug_errno(k, "Failed to remove the layer's work tree '%s': %m", work);
                        free(work);
                        work = NULL;
                }
                if (r < 0) {
                        if (e->code == API_OK)
                                (void) api_error(e, r, r == -ENOSPC || r == -EDQUOT ? API_INSUFFICIENT_STORAGE
                                                                                     : API_INTERNAL,
                                                 "%s: %s", what, strerror(-r));
                        return r;
                }
        }

        /* the template: a writable snapshot of the top layer with the image's
         * exec defaults, committed read-only */
        if (!work) {
                r = tmp_name(name, &work);
                if (r < 0)
                        return r;
                if (btrfs && n > 0) {
                        _cleanup_close_ int top = openat(lay_fd, layers[n - 1].key,
                                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        r = top < 0 ? negative_errno() : btrfs_subvol_snapshot(top, tmp_fd, work, false);
                } else if (btrfs)
                        r = btrfs_subvol_create(tmp_fd, work);
                else
                        r = mkdirat(tmp_fd, work, 0755) < 0 ? negative_errno() : 0;
                if (r < 0)
                        return api_error(e, r, r == -ENOSPC ? API_INSUFFICIENT_STORAGE : API_INTERNAL,
                                         "cannot create the template's subvolume: %s", strerror(-r));
        }
        r = defaults_write(tmp_fd, work, defaults);
        if (r >= 0)
                r = pool_template_commit(p, tmp_fd, work, tpl_fd, name);
        if (r < 0) {
                int k = pool_remove_entry(p, tmp_fd, work);
                if (k < 0)
                        log_debug_errno(k, "Failed to remove the template's work tree '%s': %m", work);
        }
        if (r == -EEXIST)
                return api_error(e, r, API_ALREADY_EXISTS, "template '%s' exists", name);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "cannot make the template: %s", strerror(-r));
        tpath = pool_subpath(p, POOL_TEMPLATES_DIR, name, NULL);
        if (!tpath || pool_template_scan(tpath, ret_size) < 0)
                *ret_size = 0;
        log_info("Imported template %s from an image: %zu layers, %u from the layer cache", name, n, cached);
        return 0;
}


static int import_oci(Pool *p, const char *name, const Archive *a, const char *tag, uint64_t *ret_size,
                      OciConfig *ret_cfg, ApiError *e) {
        _cleanup_free_ char *doc = NULL, *mdoc = NULL, *cdoc = NULL;
        _cleanup_free_ OciManifest *man = NULL;
        _cleanup_free_ Layer *layers = NULL;
        const char *arch = oci_host_arch();
        const Member *m;
        OciDescriptor d;
        int r;

        m = archive_find(a, "index.json");
        r = member_json(a, m, "index.json", &doc, e);
        if (r < 0)
                return r;
        r = oci_index_pick(doc, strlen(doc), tag, arch, &d, e);
        for (unsigned depth = 1; r >= 0 && d.is_index; depth++) {
                if (depth >= OCI_INDEX_DEPTH_MAX)
                        return api_error(e, -ELOOP, API_BAD_REQUEST, "the image's indexes nest too deep");
                free(doc);
                doc = NULL;
                r = blob_member(a, &d, "index", &m, e);
                if (r >= 0)
                        r = verify(a, m, d.digest, "index", e);
                if (r >= 0)
                        r = member_json(a, m, "index", &doc, e);
                if (r >= 0)
                        r = oci_index_pick(doc, strlen(doc), NULL, arch, &d, e);
        }
        if (r < 0)
                return r;
        r = blob_member(a, &d, "manifest", &m, e);
        if (r >= 0)
                r = verify(a, m, d.digest, "manifest", e);
        if (r >= 0)
                r = member_json(a, m, "manifest", &mdoc, e);
        if (r < 0)
                return r;
        man = new0(OciManifest, 1);
        if (!man)
                return -ENOMEM;
        r = oci_manifest_parse(mdoc, strlen(mdoc), man, e);
        if (r < 0)
                return r;
        r = blob_member(a, &man->config, "config", &m, e);
        if (r >= 0)
                r = verify(a, m, man->config.digest, "config", e);
        if (r >= 0)
                r = member_json(a, m, "config", &cdoc, e);
        if (r >= 0)
                r = oci_config_parse(cdoc, strlen(cdoc), arch, ret_cfg, e);
        if (r < 0)
                return r;

        layers = new0(Layer, man->n_layers ?: 1);
        if (!layers)
                return -ENOMEM;
        for (size_t i = 0; i < man->n_layers; i++) {
                char what[32];
                snprintf(what, sizeof what, "layer %zu", i + 1);
                r = blob_member(a, &man->layers[i], what, &layers[i].m, e);
                if (r < 0)
                        return r;
                layers[i].compression = man->layers[i].compression;
                (void) strscpy(layers[i].digest, sizeof layers[i].digest, man->layers[i].digest);
                oci_layer_key(i ? layers[i - 1].key : NULL, layers[i].digest, layers[i].key);
        }
        return import_layers(p, name, a, layers, man->n_layers, ret_cfg->defaults_json, ret_size, e);
}

static bool docker_named_digest(const char *path, char ret[static 72]) {
        const char *base = strrchr(path, '/');
        size_t n;

        base = base ? base + 1 : path;
        n = strlen(base);
        if (n == 64 + 5 && streq(base + 64, ".json"))
                n = 64;
        if (n != 64)
                return false;
        memcpy(ret, "sha256:", 7);
        memcpy(ret + 7, base, 64);
        ret[71] = '\0';
        return oci_digest_valid(ret);
}

static int import_docker(Pool *p, const char *name, const Archive *a, const char *tag, uint64_t *ret_size,
                         OciConfig *ret_cfg, ApiError *e) {
        _cleanup_free_ char *doc = NULL, *cpath = NULL, *cdoc = NULL;
        _cleanup_strv_free_ char **paths = NULL;
        _cleanup_free_ Layer *layers = NULL;
        const Member *m;
        char digest[72];
        size_t n = 0;
        int r;

        r = member_json(a, archive_find(a, "manifest.json"), "manifest.json", &doc, e);
        if (r >= 0)
                r = oci_docker_manifest_parse(doc, strlen(doc), tag, &cpath, &paths, &n, e);
        if (r < 0)
                return r;
        m = archive_find(a, cpath);
        if (!m)
                return api_error(e, -ENOENT, API_BAD_REQUEST, "the image's config '%.200s' is missing from the archive",
                                 cpath);
        if (docker_named_digest(cpath, digest)) {
                r = verify(a, m, digest, "config", e);
                if (r < 0)
                        return r;
        }
        r = member_json(a, m, "config", &cdoc, e);
        if (r >= 0)
                r = oci_config_parse(cdoc, strlen(cdoc), oci_host_arch(), ret_cfg, e);
        if (r < 0)
                return r;
        if (ret_cfg->n_diff_ids != n)
                return api_error(e, -EBADMSG, API_BAD_REQUEST,
                                 "the image's config lists %zu diff_ids for %zu layers", ret_cfg->n_diff_ids, n);
        layers = new0(Layer, n ?: 1);
        if (!layers)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                uint8_t magic[2] = {};
                layers[i].m = archive_find(a, paths[i]);
                if (!layers[i].m)
                        return api_error(e, -ENOENT, API_BAD_REQUEST, "layer %zu ('%.200s') is missing from the archive",
                                         i + 1, paths[i]);
                if (layers[i].m->size >= 2 && pread(a->fd, magic, 2, (off_t) layers[i].m->off) == 2 &&
                    magic[0] == 0x1f && magic[1] == 0x8b)
                        layers[i].compression = OCI_COMPRESSION_GZIP;
                (void) strscpy(layers[i].diff_id, sizeof layers[i].diff_id, ret_cfg->diff_ids[i]);
                oci_layer_key(i ? layers[i - 1].key : NULL, layers[i].diff_id, layers[i].key);
        }
        return import_layers(p, name, a, layers, n, ret_cfg->defaults_json, ret_size, e);
}

int pool_template_import(Pool *p, const char *name, const char *path, const char *tag, uint64_t *ret_size_bytes,
                         char **ret_defaults, ApiError *reterr) {
        _cleanup_(archive_done) Archive a = { .fd = -EBADF };
        _cleanup_(oci_config_done) OciConfig cfg = {};
        ApiError e = {};
        OciFormat fmt;
        char err[160] = "";
        uint64_t size = 0;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return api_error(reterr, r, API_UNAVAILABLE, "the pool is not usable: %s", strerror(-r));
        if (!pool_template_name_valid(name) || isempty(path))
                return api_error(reterr, -EINVAL, API_INVALID_ARGUMENT, "invalid template name");
        if (pool_template_exists(p, name))
                return api_error(reterr, -EEXIST, API_ALREADY_EXISTS, "template '%s' exists", name);
        a.fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (a.fd < 0)
                return api_error(reterr, negative_errno(), API_INTERNAL, "cannot open the archive: %m");
        r = oci_detect_format(a.fd, &fmt);
        if (r < 0)
                return api_error(reterr, r, API_INTERNAL, "cannot read the archive: %s", strerror(-r));
        if (fmt == OCI_FORMAT_ROOTFS) {
                if (tag)
                        return api_error(reterr, -EINVAL, API_BAD_REQUEST,
                                         "a tag was given but the archive is a root file system, not an image");
                r = pool_template_import_tar(p, name, path, ret_size_bytes);
                if (r < 0)
                        return api_error(reterr, r,
                                         r == -EEXIST ? API_ALREADY_EXISTS
                                         : r == -ENOSPC || r == -EDQUOT ? API_INSUFFICIENT_STORAGE
                                                                        : API_BAD_REQUEST,
                                         "cannot import template '%s': %s", name, strerror(-r));
                if (ret_defaults)
                        *ret_defaults = NULL;
                return 0;
        }
        r = archive_index(&a, err, sizeof err);
        if (r < 0)
                return api_error(reterr, r, API_BAD_REQUEST, "the image archive is not a valid tar: %s", err);
        r = fmt == OCI_FORMAT_OCI ? import_oci(p, name, &a, tag, &size, &cfg, &e)
                                  : import_docker(p, name, &a, tag, &size, &cfg, &e);
        if (r < 0) {
                if (e.code == API_OK)
                        (void) api_error(&e, r, API_INTERNAL, "importing the image failed: %s", strerror(-r));
                *reterr = e;
                return r;
        }
        *ret_size_bytes = size;
        if (ret_defaults)
                *ret_defaults = TAKE_PTR(cfg.defaults_json);
        return 0;
}

int pool_layer_cached(Pool *p, const char *key) {
        _cleanup_close_ int lay_fd = -EBADF;
        struct stat st;

        if (p->kind != POOL_BTRFS)
                return 0;
        if (strlen(key) != 64 || strspn(key, "0123456789abcdef") != 64)
                return -EINVAL;
        lay_fd = pool_open_subdir(p, POOL_LAYERS_DIR);
        if (lay_fd < 0)
                return lay_fd;
        return fstatat(lay_fd, key, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}
