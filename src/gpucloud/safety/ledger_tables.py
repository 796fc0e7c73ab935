"""The cost ledger's tables (ledger.py, ledger_volumes.py use them), apart
from the code that writes them so that the team database's schema
(store_schema.py) reads the same definitions without importing that code."""

from __future__ import annotations

RUNNING, STOPPED, ENDED = "running", "stopped", "ended"

TABLES = (
    """CREATE TABLE IF NOT EXISTS ledger (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    at            TEXT NOT NULL,     -- ISO-8601 UTC: from this moment on ...
    provider      TEXT NOT NULL,
    instance_id   TEXT NOT NULL,
    event         TEXT NOT NULL,     -- started | stopped | terminated | observed | first_seen
    source        TEXT NOT NULL,     -- launch | delete | reap | power | list | job
    state         TEXT NOT NULL,     -- ... the machine is running | stopped | ended
    price_per_hour TEXT,             -- ... at this price (NULL: unknown)
    stopped_price_per_hour TEXT,     -- what it bills while stopped (NULL: unknown)
    shutdown_at   TEXT,
    name          TEXT,
    instance_type TEXT,
    region        TEXT,
    launch_id     TEXT,
    simulated     INTEGER NOT NULL DEFAULT 0
)""",
    "CREATE INDEX IF NOT EXISTS ledger_machine ON ledger (provider, instance_id, seq)",
    # in_flight: is a launch's machine in the ledger yet?
    "CREATE INDEX IF NOT EXISTS ledger_launch ON ledger (launch_id)",
    # costs: the machines with a row in or after the month asked.
    "CREATE INDEX IF NOT EXISTS ledger_at ON ledger (at)",
    # costs: the machines whose latest row is not `ended`, kept by a trigger as
    # rows are written, so a month's report never reads all of history.
    """CREATE TABLE IF NOT EXISTS ledger_live (
    provider      TEXT NOT NULL,
    instance_id   TEXT NOT NULL,
    PRIMARY KEY (provider, instance_id)
) WITHOUT ROWID""",
)

# Columns added after the first release (ALTER TABLE on ledgers made before,
# journal.add_columns): the queue task that launched the machine (or submitted
# the job), carried forward like its name, so `gpucloud costs --by task` sums a
# task's machines; the machine's owner, whose launch made it, and the launch's
# project, which the per-user and per-project budgets and reports count by.
ADDED_COLUMNS = {
    "task_id": "TEXT",
    "user_name": "TEXT", "host": "TEXT", "project": "TEXT",
}

VOLUME_TABLES = ("""CREATE TABLE IF NOT EXISTS volume_ledger (
    provider        TEXT NOT NULL,
    volume_id       TEXT NOT NULL,
    name            TEXT NOT NULL,
    region          TEXT,
    size_gb         INTEGER NOT NULL,
    price_per_gb_month TEXT,          -- NULL: unknown
    hours_per_month INTEGER NOT NULL,
    created_at      TEXT NOT NULL,    -- ISO-8601 UTC: billed from here ...
    deleted_at      TEXT,             -- ... to here (NULL: still there)
    last_attached_at TEXT,            -- the last listing that showed a machine on it
    source          TEXT NOT NULL,    -- create | job | list
    job_ref         TEXT,             -- delete_with_job: the job that made it
    simulated       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (provider, volume_id)
)""",)
# The volume's owner and project, added the same way.
VOLUME_ADDED_COLUMNS = {"user_name": "TEXT", "host": "TEXT", "project": "TEXT"}

__all__ = ["ADDED_COLUMNS", "ENDED", "RUNNING", "STOPPED", "TABLES", "VOLUME_ADDED_COLUMNS",
           "VOLUME_TABLES"]
