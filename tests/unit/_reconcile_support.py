"""Journals in the states a crash leaves them in, on the shared sandbox cloud."""

from __future__ import annotations

import sqlite3
from datetime import timedelta

from gpucloud import Client, Instance
from gpucloud.config.settings import state_db_path
from gpucloud.providers.launch_ids import new_launch_id
from gpucloud.safety.journal import Journal, utcnow


def sql(statement: str, *args: object) -> None:
    db = sqlite3.connect(state_db_path())
    with db:
        db.execute(statement, args)
    db.close()


def create(**kwargs: object) -> Instance:
    return Client().create(gpu="h100", count=8, provider="sandbox", **kwargs)  # type: ignore[arg-type]


def crashed(**kwargs: object) -> Instance:
    """A machine the cloud made whose create died before journaling it."""
    machine = create(**kwargs)
    sql("UPDATE launches SET status = 'intent', instance_id = NULL WHERE launch_id = ?",
        machine.launch_id)
    return machine


def journaled_as(machine: Instance, status: str) -> None:
    sql("UPDATE launches SET status = ? WHERE launch_id = ?", status, machine.launch_id)


def phantom(provider: str = "sandbox", age_seconds: float = 0) -> str:
    """An intent whose request never reached the provider (killed before sending)."""
    launch_id = new_launch_id()
    Journal(state_db_path()).record_intent(
        launch_id=launch_id, provider=provider, instance_type="sim.8xH100",
        region="sim-east-1", name=None, price_per_hour="19.92", shutdown_at=None)
    if age_seconds:
        age(launch_id, age_seconds)
    return launch_id


def age(launch_id: str, seconds: float) -> None:
    sql("UPDATE launches SET created_at = ? WHERE launch_id = ?",
        (utcnow() - timedelta(seconds=seconds)).isoformat(), launch_id)


def status(launch_id: str) -> tuple[str, str | None]:
    record = Journal(state_db_path()).get(launch_id)
    assert record is not None
    return record.status, record.instance_id


def live(client: Client | None = None) -> set[str]:
    return {i.ref for i in (client or Client()).list(provider="sandbox")
            if i.status.value not in ("terminating", "terminated")}
