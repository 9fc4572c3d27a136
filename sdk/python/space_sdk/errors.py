# SPDX-License-Identifier: MIT
"""Exceptions: one class per API error code (the code table of
src/shared/api-error.c), all below SpaceError."""


class SpaceError(Exception):
    """An error answered by spaced (status, code, message) or met on the way."""

    code = "error"

    def __init__(self, message, *, status=None, code=None, retry_after=None, body=None):
        super().__init__(message)
        self.message = message
        self.status = status
        if code:
            self.code = code
        self.retry_after = retry_after
        self.body = body

    def __str__(self):
        where = f"{self.status} {self.code}" if self.status else self.code
        return f"{where}: {self.message}"


class ConnectionFailed(SpaceError):
    """spaced could not be reached, or the connection broke."""
    code = "connection_failed"


class Timeout(SpaceError):
    """A request or stream did not finish in its time (the client's timeout or 504)."""
    code = "timeout"


class BadRequest(SpaceError):
    code = "bad_request"


class InvalidArgument(BadRequest):
    code = "invalid_argument"


class InvalidJson(BadRequest):
    code = "invalid_json"


class UnknownField(BadRequest):
    code = "unknown_field"


class InvalidPath(BadRequest):
    code = "invalid_path"


class Unauthorized(SpaceError):
    code = "unauthorized"


class Forbidden(SpaceError):
    code = "forbidden"


class NotFound(SpaceError):
    code = "not_found"


class MethodNotAllowed(SpaceError):
    code = "method_not_allowed"


class Conflict(SpaceError):
    code = "conflict"


class SandboxNotRunning(Conflict):
    code = "sandbox_not_running"


class SandboxPaused(Conflict):
    code = "sandbox_paused"


class TemplateInUse(Conflict):
    code = "template_in_use"


class AlreadyExists(Conflict):
    code = "already_exists"


class VolumeInUse(Conflict):
    """A volume is mounted (one writer or many readers), or deleted while in use."""
    code = "volume_in_use"


class Unsupported(BadRequest):
    """This host cannot do what was asked (a volume without btrfs quotas, or on the vm runtime)."""
    code = "unsupported"


class PayloadTooLarge(SpaceError):
    code = "payload_too_large"


class UnsupportedMediaType(SpaceError):
    code = "unsupported_media_type"


class TooManyRequests(SpaceError):
    """A rate limit or quota: retry_after says when to try again."""
    code = "too_many_requests"


class Internal(SpaceError):
    code = "internal"


class NotImplementedByServer(SpaceError):
    code = "not_implemented"


class BadGateway(SpaceError):
    code = "bad_gateway"


class Unavailable(SpaceError):
    code = "unavailable"


class WorkerUnavailable(Unavailable):
    code = "worker_unavailable"


class InsufficientStorage(SpaceError):
    code = "insufficient_storage"


class ExecFailed(SpaceError):
    """The command could not be started in the sandbox (an exec stream's error event)."""
    code = "exec_failed"


_BY_CODE = {c.code: c for c in (
    BadRequest, InvalidArgument, InvalidJson, UnknownField, InvalidPath, Unauthorized, Forbidden, NotFound,
    MethodNotAllowed, Conflict, SandboxNotRunning, SandboxPaused, TemplateInUse, AlreadyExists, VolumeInUse,
    Unsupported, PayloadTooLarge,
    UnsupportedMediaType, TooManyRequests, Internal, NotImplementedByServer, BadGateway, Unavailable,
    WorkerUnavailable, Timeout, InsufficientStorage, ExecFailed)}
_BY_STATUS = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: MethodNotAllowed,
              409: Conflict, 413: PayloadTooLarge, 415: UnsupportedMediaType, 429: TooManyRequests,
              500: Internal, 501: NotImplementedByServer, 502: BadGateway, 503: Unavailable, 504: Timeout,
              507: InsufficientStorage}


def error_class(code, status=None):
    """The exception class for an API error code (else by HTTP status)."""
    return _BY_CODE.get(code) or _BY_STATUS.get(status) or SpaceError
