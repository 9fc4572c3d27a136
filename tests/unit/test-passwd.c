/* SPDX-License-Identifier: MIT */
/* Name lookups in an image's /etc/passwd and /etc/group (passwd-util.h), hostile files included. */
#include <stdlib.h>

#include "passwd-util.h"
#include "test.h"

#define PASSWD "root:x:0:0:root:/root:/bin/sh\n" \
               "# a comment\n" \
               "\n" \
               "+nis::0:0::/:\n" \
               "app:x:1000:2000:App:/home/app:/bin/sh\n" \
               "nobody:x:65534:65534:nobody:/nonexistent:/bin/false"

static int pw(const char *buf, const char *name, uint32_t *uid, uint32_t *gid) {
        return passwd_lookup(buf, strlen(buf), name, uid, gid);
}

TEST(passwd_names) {
        ASSERT_TRUE(passwd_name_valid("app"));
        ASSERT_TRUE(passwd_name_valid("a.b_c-d9"));
        ASSERT_TRUE(passwd_name_valid("12345678901234567890123456789012"));
        ASSERT_FALSE(passwd_name_valid("123456789012345678901234567890123"));
        ASSERT_FALSE(passwd_name_valid(""));
        ASSERT_FALSE(passwd_name_valid(NULL));
        ASSERT_FALSE(passwd_name_valid("-app"));
        ASSERT_FALSE(passwd_name_valid("a:b"));
        ASSERT_FALSE(passwd_name_valid("a b"));
        ASSERT_FALSE(passwd_name_valid("a/b"));
        ASSERT_FALSE(passwd_name_valid("+nis"));
        ASSERT_FALSE(passwd_name_valid("#x"));
        ASSERT_FALSE(passwd_name_valid("\xc3\xa9t\xc3\xa9"));
}

TEST(passwd_lookup_found) {
        uint32_t uid = 7, gid = 7;

        ASSERT_EQ(pw(PASSWD, "app", &uid, &gid), 1);
        ASSERT_EQ(uid, 1000);
        ASSERT_EQ(gid, 2000);
        ASSERT_EQ(pw(PASSWD, "root", &uid, &gid), 1);
        ASSERT_EQ(uid, 0);
        ASSERT_EQ(gid, 0);
        /* the last line without its newline */
        ASSERT_EQ(pw(PASSWD, "nobody", &uid, NULL), 1);
        ASSERT_EQ(uid, 65534);
        /* a prefix or an extension of a name is another name */
        ASSERT_EQ(pw(PASSWD, "ap", &uid, &gid), 0);
        ASSERT_EQ(pw(PASSWD, "appx", &uid, &gid), 0);
        ASSERT_EQ(pw(PASSWD, "nis", &uid, &gid), 0);
        ASSERT_EQ(pw("", "app", &uid, &gid), 0);
        ASSERT_EQ(passwd_lookup(NULL, 0, "app", &uid, &gid), 0);
        ASSERT_ERRNO(pw(PASSWD, "a:b", &uid, &gid), EINVAL);
        ASSERT_ERRNO(pw(PASSWD, "", &uid, &gid), EINVAL);
        /* the first well-formed line wins; CRLF leaves the id fields alone */
        ASSERT_EQ(pw("app:x:1:2\napp:x:3:4\n", "app", &uid, &gid), 1);
        ASSERT_EQ(uid, 1);
        ASSERT_EQ(pw("app:x:5:6:\r\n", "app", &uid, &gid), 1);
        ASSERT_EQ(gid, 6);
}

TEST(passwd_lookup_malformed) {
        uint32_t uid = 7, gid = 7;

        /* missing fields, ids that are not numbers or out of range */
        ASSERT_ERRNO(pw("app\n", "app", &uid, &gid), EBADMSG);
        ASSERT_ERRNO(pw("app:x:1000\n", "app", &uid, &gid), EBADMSG);
        ASSERT_ERRNO(pw("app:x::1000:::\n", "app", &uid, &gid), EBADMSG);
        ASSERT_ERRNO(pw("app:x:1000::::\n", "app", &uid, &gid), EBADMSG);
        ASSERT_ERRNO(pw("app:x:-1:0:::\n", "app", &uid, &gid), EBADMSG);
        ASSERT_ERRNO(pw("app:x:+1:0:::\n", "app", &uid, &gid), EBADMSG);
        ASSERT_ERRNO(pw("app:x: 1:0:::\n", "app", &uid, &gid), EBADMSG);
        ASSERT_ERRNO(pw("app:x:0x10:0:::\n", "app", &uid, &gid), EBADMSG);
        ASSERT_ERRNO(pw("app:x:4294967295:0:::\n", "app", &uid, &gid), EBADMSG);
        ASSERT_ERRNO(pw("app:x:99999999999:0:::\n", "app", &uid, &gid), EBADMSG);
        ASSERT_ERRNO(pw("app:x:1000:2000\r\n", "app", &uid, &gid), EBADMSG);
        ASSERT_EQ(uid, 7); /* untouched on failure */
        ASSERT_EQ(gid, 7);
        ASSERT_EQ(pw("app:x:4294967294:0:::\n", "app", &uid, &gid), 1);
        ASSERT_EQ(uid, 4294967294U);
        /* a malformed line does not hide a later good one */
        ASSERT_EQ(pw("app:x:bad:0\napp:x:12:34\n", "app", &uid, &gid), 1);
        ASSERT_EQ(uid, 12);
        /* other names' broken lines are not its business */
        ASSERT_EQ(pw("junk\n:::\n::\n:\nother:x:zz\napp:x:1:2\n", "app", &uid, &gid), 1);
}

TEST(passwd_lookup_hostile) {
        uint32_t uid = 0, gid = 0;
        size_t n = 4 * 1024 * 1024;
        char *buf = malloc(n + 64);

        ASSERT_NOT_NULL(buf);
        /* one very long line, no newline anywhere, then the entry */
        memset(buf, 'a', n);
        ASSERT_EQ(passwd_lookup(buf, n, "app", &uid, &gid), 0);
        memcpy(buf + n, "\napp:x:3:4", 10);
        ASSERT_EQ(passwd_lookup(buf, n + 10, "app", &uid, &gid), 1);
        ASSERT_EQ(uid, 3);
        /* a long line of colons; the name as a long line's prefix */
        memset(buf, ':', n);
        ASSERT_EQ(passwd_lookup(buf, n, "app", &uid, &gid), 0);
        memcpy(buf, "app:x:5:6:", 10);
        ASSERT_EQ(passwd_lookup(buf, n, "app", &uid, &gid), 1);
        ASSERT_EQ(gid, 6);
        /* NUL bytes are bytes: no C string ends the file early, none makes a name */
        memcpy(buf, "x\0\nap\0:x:1:1\napp:x:8:9\n", 24);
        ASSERT_EQ(passwd_lookup(buf, 24, "app", &uid, &gid), 1);
        ASSERT_EQ(uid, 8);
        /* the buffer ends inside a line: never read past n */
        memcpy(buf, "app:x:12", 8);
        ASSERT_ERRNO(passwd_lookup(buf, 8, "app", &uid, &gid), EBADMSG);
        ASSERT_EQ(passwd_lookup(buf, 2, "app", &uid, &gid), 0);
        free(buf);
}

TEST(group_lookup) {
        const char *g = "root:x:0:\nstaff:x:50:app,other\nempty:x:\nbad:x:z:\nlast:x:77";
        uint32_t gid = 1;

        ASSERT_EQ(group_lookup(g, strlen(g), "staff", &gid), 1);
        ASSERT_EQ(gid, 50);
        ASSERT_EQ(group_lookup(g, strlen(g), "root", &gid), 1);
        ASSERT_EQ(gid, 0);
        ASSERT_EQ(group_lookup(g, strlen(g), "last", &gid), 1);
        ASSERT_EQ(gid, 77);
        ASSERT_EQ(group_lookup(g, strlen(g), "nosuch", &gid), 0);
        ASSERT_ERRNO(group_lookup(g, strlen(g), "empty", &gid), EBADMSG);
        ASSERT_ERRNO(group_lookup(g, strlen(g), "bad", &gid), EBADMSG);
        ASSERT_ERRNO(group_lookup("staff:x\n", 8, "staff", &gid), EBADMSG);
        ASSERT_ERRNO(group_lookup(g, strlen(g), "st aff", &gid), EINVAL);
        ASSERT_EQ(gid, 77);
}
