# SPDX-License-Identifier: MIT
"""space: secure, disposable Linux sandboxes for AI agents.

    from space_sdk import Client
    with Client() as sp:                      # SPACE_URL, SPACE_API_KEY
        sb = sp.create()
        print(sb.exec("echo hello").stdout_text)
        sb.delete()

AsyncClient (space_sdk.aio) has the same calls as coroutines."""

from .aio import AsyncClient, AsyncProcess
from .client import Client, Process
from .errors import *  # noqa: F401,F403 (the exception classes)
from .errors import SpaceError
from .models import Checkpoint, Credential, Event, ExecEvent, ExecResult, FileEntry, Key, Sandbox, Template, TemplateVersion

__version__ = "0.1.0"
__all__ = ["AsyncClient", "AsyncProcess", "Checkpoint", "Client", "Credential", "Event", "ExecEvent", "ExecResult",
           "FileEntry", "Key", "Process", "Sandbox", "SpaceError", "Template", "TemplateVersion"]
