#!/bin/sh
# SPDX-License-Identifier: MIT
# check-exit.sh CODE PROGRAM [ARGS...]: runs it and fails unless it exits with CODE.
want=$1
shift
"$@"
rc=$?
if [ "$rc" != "$want" ]; then
        echo "check-exit: '$*' exited $rc, expected $want" >&2
        exit 1
fi
exit 0
