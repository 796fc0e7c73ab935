"""Redis failures as gpucloud errors (exit 10), with the URL's password never shown.

redis-py raises its own exceptions, whose text may hold the URL it was given
(password and all); a queue operation raises gpucloud's errors instead: a
server that cannot be reached, or one that refused (too old for streams).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Protocol, TypeVar

from gpucloud.errors import APIConnectionError, APIError

T = TypeVar("T")


class _Connected(Protocol):
    """What the errors are written with: the URL without its password, and a
    way to take the password out of redis-py's text."""

    @property
    def safe_url(self) -> str: ...

    def _scrub(self, text: str) -> str: ...


def redis_errors(method: Callable[..., T]) -> Callable[..., T]:
    """``method`` of a queue, raising gpucloud errors for redis-py's."""

    @functools.wraps(method)
    def wrapper(self: _Connected, *args: Any, **kwargs: Any) -> T:
        import redis

        try:
            return method(self, *args, **kwargs)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise APIConnectionError(f"cannot reach Redis at {self.safe_url}: "
                                     f"{self._scrub(str(exc))}", provider="redis",
                                     hint="is the server up? check --redis / "
                                          "GPUCLOUD_REDIS_URL") from None
        except redis.RedisError as exc:
            raise APIError(f"Redis at {self.safe_url} refused: {self._scrub(str(exc))}",
                           provider="redis",
                           hint="the queue needs Redis 6.2 or later (streams, XAUTOCLAIM)"
                           ) from None
    return wrapper
