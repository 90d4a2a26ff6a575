"""JSON in and out: request body parsing, field checks and the contract's error bodies.

Every refusal leaves as ``{"error": {"code", "message"}}``. Handlers raise
``ControlPlaneError`` (or call the ``need_*`` helpers, which do); ``error_middleware``
is the one function that turns exceptions into responses, so a malformed request is
a 4xx and even a bug is a 500 with the same shape, never an HTML page or a traceback.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal, overload

from aiohttp import web

from boss_agent.errors import ControlPlaneError

logger = logging.getLogger(__name__)

MAX_WAIT_MS = 60_000  # a long poll longer than this outlives most proxies' idle timeouts
MAX_SLOTS = 64  # matches the most concurrent tasks a device may be configured for
MAX_SHORT_STR = 4096  # ids, names, summaries: anything longer is a client bug

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


def bad_request(message: str, code: str = "invalid_request") -> ControlPlaneError:
    return ControlPlaneError(400, code, message)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ControlPlaneError as exc:
        response = error_response(exc.status, exc.code, exc.message)
        if exc.retry_after_s is not None:
            response.headers["Retry-After"] = str(exc.retry_after_s)
        return response
    except web.HTTPException as exc:
        if exc.status < 400:
            raise  # redirects are answers, not errors
        code = exc.reason.lower().replace(" ", "_") if exc.reason else "http_error"
        return error_response(exc.status, code, exc.reason or "request refused")
    except Exception:
        logger.exception("unexpected error answering %s %s", request.method, request.path)
        return error_response(500, "internal_error", "the control plane failed to answer this request")


async def json_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object, or a 400 ``invalid_json``."""
    try:
        body = json.loads(await request.read())
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the decoder's stack
        raise bad_request("the body is not valid JSON", "invalid_json") from None
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object", "invalid_json")
    return body


@overload
def need_str(body: dict[str, Any], key: str, *, optional: Literal[False] = False,
             limit: int = MAX_SHORT_STR) -> str: ...
@overload
def need_str(body: dict[str, Any], key: str, *, optional: bool, limit: int = MAX_SHORT_STR) -> str | None: ...
def need_str(body: dict[str, Any], key: str, *, optional: bool = False, limit: int = MAX_SHORT_STR) -> str | None:
    value = body.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > limit:
        raise bad_request(f"{key} must be a non-empty string of at most {limit} characters")
    return value


def need_int(body: dict[str, Any], key: str, lo: int, hi: int, default: int | None = None) -> int:
    value = body.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise bad_request(f"{key} must be a whole number between {lo} and {hi}")
    return value


@overload
def need_dict(body: dict[str, Any], key: str, *, optional: Literal[False] = False) -> dict[str, Any]: ...
@overload
def need_dict(body: dict[str, Any], key: str, *, optional: bool) -> dict[str, Any] | None: ...
def need_dict(body: dict[str, Any], key: str, *, optional: bool = False) -> dict[str, Any] | None:
    value = body.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, dict):
        raise bad_request(f"{key} must be a JSON object")
    return value


@overload
def need_choice(body: dict[str, Any], key: str, options: tuple[str, ...], *,
                optional: Literal[False] = False) -> str: ...
@overload
def need_choice(body: dict[str, Any], key: str, options: tuple[str, ...], *, optional: bool) -> str | None: ...
def need_choice(body: dict[str, Any], key: str, options: tuple[str, ...], *, optional: bool = False) -> str | None:
    value = body.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or value not in options:
        raise bad_request(f"{key} must be one of {', '.join(options)}")
    return value


def need_str_list(body: dict[str, Any], key: str, *, optional: bool = False) -> list[str]:
    value = body.get(key)
    if value is None and optional:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and len(v) <= MAX_SHORT_STR for v in value):
        raise bad_request(f"{key} must be a list of strings")
    return value


def wait_seconds(raw: Any, default_ms: int) -> float:
    """A ``waitMs`` value (body int or query string) as seconds, bounded."""
    if raw is None:
        raw = default_ms
    if isinstance(raw, str):
        try:
            raw = int(raw)
        except ValueError:
            raise bad_request("waitMs must be a whole number of milliseconds") from None
    if not isinstance(raw, int) or isinstance(raw, bool) or not 0 <= raw <= MAX_WAIT_MS:
        raise bad_request(f"waitMs must be a whole number between 0 and {MAX_WAIT_MS}")
    return raw / 1000
