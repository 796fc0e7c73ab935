"""The argument types the SDK's methods share (see client.py's docstring)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Literal, Union

if TYPE_CHECKING:  # a forward reference: importing the client must not load pydantic
    from gpucloud.models import Instance, InstanceStatus

Duration = Union[timedelta, str]
Money = Union[Decimal, str, int]
Hours = Union[Decimal, int, str, timedelta]
Ref = Union["Instance", str]
Deadline = Union[datetime, str]
Status = Literal["pending", "running", "stopping", "stopped", "terminating", "terminated"]
# Client.list(status=...): a status, "running,stopped", or several of either.
StatusFilter = Union[str, "InstanceStatus", Iterable[Union[str, "InstanceStatus"]]]
