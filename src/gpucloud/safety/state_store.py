"""Which store holds this computer's state: the team database when one is
configured ([state] url, GPUCLOUD_STATE_URL), else the home's local file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucloud.config import settings
from gpucloud.safety.journal import Journal

if TYPE_CHECKING:
    from gpucloud.config.settings import Config


def open_journal(config: Config) -> Journal:
    """The journal (and with it the ledger and the budget's records) of `config`."""
    url = settings.state_url(config)
    if url is None:
        return Journal(settings.state_db_path())
    from gpucloud.safety.store_postgres import PostgresStore  # psycopg only in team mode

    return Journal(settings.state_db_path(), PostgresStore(url))


__all__ = ["open_journal"]
