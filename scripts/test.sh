#!/bin/bash
# Sets up and runs every test: installs the Debian packages, builds with
# ASan/UBSan into ./build, runs the C unit tests, the fuzz corpora and the
# end-to-end suite against a real spaced, and ends with "N passed, N failed".
# Run as root on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

./scripts/install-deps.sh
if [ ! -f build/build.ninja ]; then
        meson setup build -Dsanitize=true >/dev/null
fi
ninja -C build >/dev/null

# the base template, rebuilt when its recipe changes
mkdir -p build/templates
if [ ! -f build/templates/base.tar ] || [ templates/base/build.sh -nt build/templates/base.tar ]; then
        ./templates/base/build.sh build/templates/base.tar
fi
# the debian template (debootstrap from the host's Debian mirror, a few minutes): the
# credential tests run real clients in it (curl, python3, wget, git); SPACE_TEST_NO_DEBIAN=1
# skips building it (those tests then skip, saying why)
if [ -z "${SPACE_TEST_NO_DEBIAN:-}" ] &&
        { [ ! -f build/templates/debian.tar ] || [ templates/debian/build.sh -nt build/templates/debian.tar ]; }; then
        ./templates/debian/build.sh build/templates/debian.tar ||
                echo "test.sh: building the debian template failed: the credential tests will skip" >&2
fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export SPACE_BUILD_DIR="$top/build"

unit_rc=0
meson test -C build --print-errorlogs --num-processes 2 >build/unit.log 2>&1 || unit_rc=$?
if [ "$unit_rc" -ne 0 ]; then
        # the failed binaries' own output (--print-errorlogs), without the passing lines
        grep -Ev '^ *[0-9]+/[0-9]+ .* (OK|EXPECTEDFAIL) ' build/unit.log | tail -n 200
else
        tail -n 25 build/unit.log
fi

# the e2e modules run in SPACE_TEST_JOBS sessions at once (default 2; 1: one
# after another). Each session has its own spaced, state, addresses and names;
# the modules that make host networking run together in one of them.
jobs=${SPACE_TEST_JOBS:-2}
parallel=()
if [ "$jobs" -gt 1 ] && /usr/bin/python3 -c 'import xdist' 2>/dev/null; then
        parallel=(-n "$jobs" --dist loadgroup)
fi
e2e_rc=0
/usr/bin/python3 -m pytest -p no:cacheprovider -q --durations=30 "${parallel[@]}" tests/e2e 2>&1 |
        tee build/e2e.log || e2e_rc=$?

/usr/bin/python3 - "$unit_rc" "$e2e_rc" <<'PY'
import re, sys
unit_rc, e2e_rc = int(sys.argv[1]), int(sys.argv[2])
passed = failed = skipped = 0
# every unit/fuzz binary ends its output with "N passed, N failed[, N skipped]"
for line in open("build/meson-logs/testlog.txt", errors="replace"):
    m = re.match(r"^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?\s*$", line)
    if m:
        passed += int(m.group(1)); failed += int(m.group(2)); skipped += int(m.group(3) or 0)
# pytest's own closing line, e.g. "2 failed, 530 passed, 1 error in 752.49s (0:12:32)"
summary = [l for l in open("build/e2e.log", errors="replace").read().splitlines()
           if re.match(r"^=*\s*(\d+ (passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?)(, )?)+ in [\d.]+s", l)]
if summary:
    for n, what in re.findall(r"(\d+) (passed|failed|errors?|skipped)", summary[-1]):
        if what == "passed": passed += int(n)
        elif what == "skipped": skipped += int(n)
        else: failed += int(n)
elif e2e_rc == 0:
    failed += 1  # no summary at all: count the run as failed
if unit_rc and failed == 0: failed = 1   # a crashed binary printed no summary
if e2e_rc not in (0,) and failed == 0: failed = 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY
