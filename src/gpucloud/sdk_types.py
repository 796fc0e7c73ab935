"""The argument types the SDK's methods share (see client.py's docstring)."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Literal, Union

if TYPE_CHECKING:  # a forward reference: importing the client must not load pydantic
    from .models import Instance

Duration = Union[timedelta, str]
Money = Union[Decimal, str, int]
Hours = Union[Decimal, int, str, timedelta]
Ref = Union["Instance", str]
Deadline = Union[datetime, str]
Status = Literal["pending", "running", "stopping", "stopped", "terminating", "terminated"]
