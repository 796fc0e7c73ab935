"""The team database's URL as configured ([state] url, GPUCLOUD_STATE_URL), and
as shown: never with a password, which gpucloud never keeps in a URL."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from gpucloud.errors import ConfigurationError


def display(url: str) -> str:
    """The URL with any password removed: what messages, logs and --debug show."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = (f"{parts.username}@" if parts.username else "") + host + \
        (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


_URL = re.compile(r"^postgres(ql)?://", re.IGNORECASE)


def check_url(url: str, where: str) -> str:
    """A team state URL as configured: postgresql://, and no password in it."""
    if not _URL.match(url):
        raise ConfigurationError(
            f"{where}: the state URL must be a postgresql:// URL, got {display(url)!r}",
            hint='e.g. url = "postgresql://db.example.com:5432/gpucloud"')
    try:
        parts = urlsplit(url)
        has_password = parts.password is not None or bool(
            re.search(r"(^|&)password=", parts.query))
    except ValueError as exc:
        raise ConfigurationError(f"{where}: the state URL cannot be read ({exc})",
                                 hint="postgresql://[user@]host[:port]/dbname") from None
    if has_password:
        raise ConfigurationError(
            f"{where}: the state URL carries a password, which gpucloud never keeps in "
            "a URL or config file", hint="remove it from the URL and give it to libpq: "
            "PGPASSWORD, ~/.pgpass, a service file, or the keyring's gpucloud/state entry")
    return url


__all__ = ["check_url", "display"]
