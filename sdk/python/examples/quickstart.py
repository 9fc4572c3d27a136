#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Creates a sandbox, runs `echo hello from space` in it, prints the output,
deletes the sandbox. Reads SPACE_URL and SPACE_API_KEY."""

from space_sdk import Client

with Client() as sp:
    sb = sp.create()
    try:
        print(sb.exec(["echo", "hello from space"], check=True).stdout_text, end="")
    finally:
        sb.delete()
