"""The one exception tree of boss-agent.

Every error the daemon raises on purpose is a ``BossAgentError``. Third-party
exceptions (OSError, httpx, websockets, redis) are mapped once, at the boundary
that meets them, and chained with ``raise ... from exc``.

    BossAgentError
    ├── ConfigError                 bad config file / value / flag  (CLI exit 2)
    ├── StateError                  state dir unusable, lock held by another process
    │   └── AlreadyRunning          a second daemon on the same state dir
    ├── AppServerError              anything between us and `codex app-server`
    │   ├── AppServerUnavailable    binary missing, spawn failed, listener unreachable
    │   │   └── CodexTooOld         a codex release below the supported range (CLI exit 2)
    │   ├── TransportError          the byte/frame layer failed
    │   │   ├── ConnectionClosed    the peer went away; every pending request gets this
    │   │   └── AuthRejected        the WebSocket handshake was refused (401/403)
    │   ├── RequestTimeout          no response within the request's deadline
    │   ├── TurnNotStarted          the app-server failed before a turn began (``cause``):
    │   │                           the runner may still fall back to another backend
    │   └── RpcError                a JSON-RPC error response (``code``, ``message``)
    │       └── ServerOverloaded    code -32001; retryable with backoff
    ├── TaskFailed                  one task cannot run or finished badly (``code``)
    │   ├── TaskRejected            malformed / not allowed; nothing ran
    │   └── TurnNotActive           steer of a turn that is not active
    ├── BossApiError                the Boss control plane answered an error (``status``, ``code``)
    │   ├── Unauthorized            401: the device token was revoked
    │   ├── TaskGone                404/409 on a task: it was taken away
    │   └── BossUnreachable         network error or timeout: no answer at all (``status`` 0)
    ├── GatewayError                Redis Streams gateway
    │   ├── DuplicateWorker         another process holds this worker id's lease
    │   ├── BadCommand              a stream entry that is not a valid command (poison)
    │   └── RedisFailure            a Redis command failed (redis-py's errors, mapped once in
    │       │                       ``sources/gateway/redis_errors.py``; ``reply``: Redis's own word)
    │       ├── RedisUnavailable    no answer: refused, dropped, timed out, loading, read-only,
    │       │                       failing over; the retry policy retries exactly these
    │       ├── MissingGroup        NOGROUP (or UNBLOCKED: the stream went while a read waited)
    │       ├── GroupExists         BUSYGROUP: the consumer group is there already
    │       └── WrongType           WRONGTYPE: the key holds another kind of value
    ├── ServiceError                `service install/uninstall`: systemctl/launchctl failed
    ├── IllegalTransition           a status moved where its lifecycle table has no move (a bug;
    │                               ``lifecycles.py``): ``lifecycle``, ``old``, ``new``
    ├── UnknownCardField            ``Card.evolve`` given a field the card does not have (a bug:
    │                               never swallowed as a message shape codex did not promise)
    └── ControlPlaneError           the embedded control plane refuses a request
                                    (``status``, ``code``: the HTTP error it answers)

``TaskFailed.code`` is the snake_case error code the device API reports in
``complete.error.code``; its message is always sanitized before it leaves the device.
"""

from __future__ import annotations

from typing import Any

# JSON-RPC 2.0 error codes, and the one codex adds. Pinned by tests/unit/test_errors.py.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_OVERLOADED = -32001


class BossAgentError(Exception):
    """Root of every error boss-agent raises on purpose."""


class ConfigError(BossAgentError):
    """The configuration (file, environment or flag) is invalid."""


class StateError(BossAgentError):
    """The state directory cannot be used."""


class AlreadyRunning(StateError):
    """Another daemon holds the state directory's lock."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        who = f"pid {pid}" if pid else "another process"
        super().__init__(f"the daemon is already running ({who}) on this state dir")


class AppServerError(BossAgentError):
    """Talking to `codex app-server` failed."""


class AppServerUnavailable(AppServerError):
    """The app-server cannot be started or reached at all."""


class CodexTooOld(AppServerUnavailable):
    """The codex release is below the supported range (``codexversion.py``)."""


class TransportError(AppServerError):
    """The transport (pipe, WebSocket, unix socket) failed."""


class ConnectionClosed(TransportError):
    """The connection ended; pending requests fail with this."""


class AuthRejected(TransportError):
    """The app-server refused the WebSocket handshake."""

    def __init__(self, status: int, reason: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(f"app-server refused the connection: HTTP {status} {reason}".strip())


class RequestTimeout(AppServerError):
    """A request got no response in time (codex may drop replies under overload)."""


class TurnNotStarted(AppServerError):
    """The app-server failed before a turn started, so no turn ran and a fallback may.

    Raised and caught inside the runner; ``cause`` is the error that stopped it.
    """

    def __init__(self, cause: BaseException) -> None:
        self.cause = cause
        super().__init__(cause.__class__.__name__)


class RpcError(AppServerError):
    """A JSON-RPC error response."""

    def __init__(self, code: int, message: str, data: object = None) -> None:
        self.code = code
        self.message = message
        self.data = data
        super().__init__(f"JSON-RPC error {code}: {message}")


class ServerOverloaded(RpcError):
    """codex answered -32001 "Server overloaded; retry later."."""


def rpc_error_from_wire(error: dict[str, Any]) -> RpcError:
    """Build the typed error for a wire ``{"code", "message", "data"}`` object."""
    code = error.get("code")
    code = code if isinstance(code, int) else INTERNAL_ERROR
    message = str(error.get("message", ""))
    cls = ServerOverloaded if code == SERVER_OVERLOADED else RpcError
    return cls(code, message, error.get("data"))


class TaskFailed(BossAgentError):
    """A task ends failed with a device-API error code."""

    code = "task_failed"

    def __init__(self, message: str, code: str | None = None) -> None:
        if code is not None:
            self.code = code
        super().__init__(message)


class TaskRejected(TaskFailed):
    """The task is malformed or not allowed here; nothing ran."""

    code = "invalid_task"


class TurnNotActive(TaskFailed):
    """A steer named a turn that is not the thread's active turn."""

    code = "turn_not_active"


class BossApiError(BossAgentError):
    """The Boss control plane answered with an error body."""

    retry_after: float | None = None  # seconds, from a Retry-After header

    def __init__(self, status: int, code: str, message: str) -> None:
        self.status = status
        self.code = code
        super().__init__(f"HTTP {status} {code}: {message}")


class Unauthorized(BossApiError):
    """401: the device token is no longer valid."""


class TaskGone(BossApiError):
    """404/409 on a task: the server took it away."""


class BossUnreachable(BossApiError):
    """No answer from the control plane (connection refused, reset, timed out)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "unreachable", message)


class GatewayError(BossAgentError):
    """The Redis Streams gateway failed."""


class DuplicateWorker(GatewayError):
    """Another live process holds this worker id's lease."""


class BadCommand(GatewayError):
    """A gateway stream entry is not a valid command; it is acked as failed, never retried.

    ``header`` is the command's header when it was valid (so the failure can be
    reported on the session's stream), else None.
    """

    def __init__(self, message: str, header: object = None) -> None:
        self.header = header
        super().__init__(message)


class RedisFailure(GatewayError):
    """A Redis command failed; ``reply`` is Redis's error word (``NOGROUP``…) or ''."""

    def __init__(self, message: str, reply: str = "") -> None:
        self.reply = reply
        super().__init__(message)


class RedisUnavailable(RedisFailure):
    """Redis gave no usable answer now; a later attempt may get one."""


class MissingGroup(RedisFailure):
    """The consumer group (or its stream) is not there: Redis restarted without its data."""


class GroupExists(RedisFailure):
    """Creating a consumer group that exists already: the only tolerable XGROUP error."""


class WrongType(RedisFailure):
    """The key holds a value of another type (someone wrote over one of our keys)."""


class ServiceError(BossAgentError):
    """Installing or removing the system service failed (a file or a manager command)."""


class IllegalTransition(BossAgentError):
    """A status moved where its lifecycle's transition table has no move: a bug, loudly."""

    def __init__(self, lifecycle: str, old: str, new: str) -> None:
        self.lifecycle = lifecycle
        self.old = old
        self.new = new
        super().__init__(f"{lifecycle}: no move from {old!r} to {new!r}")


class UnknownCardField(BossAgentError):
    """``Card.evolve`` was given a field the card does not have: a typo in our code."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        super().__init__(f"the progress card has no field {', '.join(map(repr, names))}")


class ControlPlaneError(BossAgentError):
    """The embedded control plane refuses a request; carries its HTTP status and code."""

    def __init__(self, status: int, code: str, message: str, *, retry_after_s: int | None = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s  # sent as Retry-After (a 429 says when to try again)
        super().__init__(f"{code}: {message}")
