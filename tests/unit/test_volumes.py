"""Volumes on the sandbox through the SDK: the cost ledger's GB-month bill,
a job's storage lines, the unattached warnings, delete_with_job and a failed
launch that leaves no volume behind."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from gpucloud import Client
from gpucloud.config import settings
from gpucloud.errors import BudgetExceededError, GpuCloudError, SpecError
from gpucloud.safety.costs import compute
from gpucloud.safety.journal import Journal
from gpucloud.safety.ledger_volumes import VolumeLedger, VolumeRecord

UTC = timezone.utc


def job(*volumes: dict, max_runtime: str = "10h", **more: object) -> dict:
    return {"name": "trainer", "image": "busybox", "resources": {"gpu": "h100", "gpu_count": 1},
            "max_runtime": max_runtime, "volumes": list(volumes), **more}


@pytest.fixture
def client():
    with Client(["sandbox"]) as made:
        yield made


def ledger() -> VolumeLedger:
    return VolumeLedger(Journal(settings.state_db_path()))


def _age(volume_ref: str, days: int = 0, hours: int = 0) -> None:
    """The ledger's record of the volume, made `days` and `hours` earlier."""
    volume_id = volume_ref.split("/")[1]
    when = (datetime.now(UTC) - timedelta(days=days, hours=hours)).isoformat()
    with ledger()._db() as db:
        db.execute("UPDATE volume_ledger SET created_at = ? WHERE volume_id = ?",
                   (when, volume_id))


# -- money ------------------------------------------------------------------------


def record(**fields: object) -> VolumeRecord:
    base = dict(provider="sandbox", volume_id="sbv-1", name="data", region="sim-east-1",
                size_gb=250, price_per_gb_month=Decimal("0.10"), hours_per_month=730,
                created_at=datetime(2026, 11, 10, tzinfo=UTC),
                deleted_at=datetime(2026, 11, 20, 6, tzinfo=UTC), last_attached_at=None,
                source="create", job_ref=None, simulated=False)
    base.update(fields)
    return VolumeRecord(**base)  # type: ignore[arg-type]


def test_a_month_bills_size_times_rate_times_hours_over_730_to_the_cent():
    # 250 GB x $0.10/GB-month x 246 h / 730 h = $8.4246... -> $8.42
    report = compute((), "2026-11", now=datetime(2026, 12, 3, tzinfo=UTC), volumes=[record()])
    (line,) = report.volumes
    assert line.hours == Decimal("246.00") and line.spent == Decimal("8.42")
    assert line.projected == Decimal("0.00") and line.status == "deleted"
    assert report.spent == Decimal("8.42") and report.total == Decimal("8.42")


def test_a_live_volume_is_projected_to_the_end_of_the_month_and_clipped_to_it():
    # Created before the month: only November counts. 100 GB x $0.07 = $7.00 a month;
    # 2026-11-16 00:00 is 360 h in (spent $3.45), 360 h to go (projected $3.45).
    live = record(size_gb=100, price_per_gb_month=Decimal("0.07"), deleted_at=None,
                  created_at=datetime(2026, 10, 1, tzinfo=UTC))
    report = compute((), "2026-11", now=datetime(2026, 11, 16, tzinfo=UTC), volumes=[live])
    (line,) = report.volumes
    assert (line.spent, line.projected, line.total) == (
        Decimal("3.45"), Decimal("3.45"), Decimal("6.90"))
    assert report.total == Decimal("6.90")


def test_an_unknown_rate_is_unknown_never_zero():
    unknown = record(volume_id="sbv-2", price_per_gb_month=None)
    report = compute((), "2026-11", now=datetime(2026, 12, 3, tzinfo=UTC),
                     volumes=[record(), unknown])
    assert [v.spent for v in report.volumes] == [Decimal("8.42"), None]
    assert report.spent is None and report.total is None
    assert report.spent_known == Decimal("8.42") and report.unknown == ("sandbox/sbv-2",)


def test_the_ledger_records_creation_and_deletion_and_costs_reports_them(client):
    volume = client.create_volume("data", 100, "sim-east-1", provider="sandbox")
    (kept,) = ledger().records()
    assert (kept.ref, kept.size_gb, kept.price_per_gb_month, kept.deleted_at) == (
        volume.ref, 100, Decimal("0.07"), None)
    _age(volume.ref, hours=1)
    client.delete_volume(volume.ref)
    (gone,) = ledger().records()
    assert gone.deleted_at is not None and gone.deleted_at >= gone.created_at
    (line,) = client.costs().volumes
    # An hour of 100 GB at $0.07/GB-month: $0.0096 -> $0.01; nothing projected once deleted.
    assert (line.ref, line.status, line.hours) == (volume.ref, "deleted", Decimal("1.00"))
    assert (line.spent, line.projected) == (Decimal("0.01"), Decimal("0.00"))


def test_a_volume_first_seen_in_a_listing_is_billed_from_its_creation(client):
    made = client.create_volume("seen", 10, "sim-west-1", provider="sandbox")
    with ledger()._db() as db:  # as if made elsewhere: the ledger never saw it
        db.execute("DELETE FROM volume_ledger")
    client.volumes()
    (seen,) = ledger().records()
    assert seen.ref == made.ref and seen.source == "list"
    assert seen.created_at == made.created_at


def test_a_volume_first_seen_in_use_is_not_idle_since_its_creation(client):
    from gpucloud.models import Volume
    from gpucloud.safety.ledger_volumes import unattached

    now = datetime.now(timezone.utc)
    old = now - timedelta(days=5)
    in_use = Volume(provider="sandbox", id="sbv-inuse", name="inuse", size_gb=10,
                    created_at=old, attached_to=("sbx-1",))
    idle = Volume(provider="sandbox", id="sbv-idle", name="idle", size_gb=10, created_at=old)
    ledger().seen("sandbox", [in_use, idle], 730, now=now)
    records = {r.volume_id: r for r in ledger().records()}
    assert records["sbv-inuse"].created_at == old  # billed from its creation
    assert records["sbv-inuse"].last_attached_at == now
    assert [r.volume_id for r in unattached(records.values(), now)] == ["sbv-idle"]


# -- a job's estimate ----------------------------------------------------------------


def test_a_jobs_plan_has_one_storage_line_per_volume_and_totals_the_new_ones(client):
    plain = client.plan_job(job(), provider="sandbox", region="sim-east-1")
    client.create_volume("data", 100, "sim-east-1", provider="sandbox")
    planned = client.plan_job(job({"name": "data", "mount": "/data"},
                                  {"name": "scratch", "mount": "/scratch", "size_gb": 50}),
                              provider="sandbox", region="sim-east-1")
    lines = {line.component: line for line in planned.estimate.breakdown}
    existing = lines["volume data (100 GB, existing, billed anyway)"]
    new = lines["volume scratch (50 GB, new)"]
    # 100 GB x $0.07 / 730 h x 10 h = $0.0959 -> $0.10; 50 GB: $0.0479 -> $0.05
    assert existing.total == Decimal("0.10") and new.total == Decimal("0.05")
    assert new.price_per_hour == Decimal(50) * Decimal("0.07") / Decimal(730)
    # Only the new volume is in the total: the existing one bills anyway.
    assert plain.total == Decimal("24.90")
    assert planned.total == Decimal("24.95")
    assert all(o.region == "sim-east-1" for o in planned.alternatives)


def test_max_cost_counts_the_new_volumes(client):
    client.plan_job(job(max_cost="24.92"), provider="sandbox", region="sim-east-1")
    with pytest.raises(BudgetExceededError, match="new volumes"):
        client.plan_job(job({"name": "big", "mount": "/big", "size_gb": 5000},
                            max_cost="24.92"), provider="sandbox", region="sim-east-1")


def test_a_provider_without_volumes_is_refused_for_a_job_that_mounts_one(client):
    with pytest.raises(SpecError, match="has no network volumes"):
        client.create_volume("x", 1, provider="fluidstack")


# -- warnings ------------------------------------------------------------------------


def test_list_and_reap_warn_about_a_volume_with_no_machine_for_over_a_day(client):
    old = client.create_volume("old", 100, "sim-east-1", provider="sandbox")
    client.create_volume("new", 100, "sim-east-1", provider="sandbox")
    client.list()
    assert not [w for w in client.warnings if "volume" in w]  # nothing a day old yet
    _age(old.ref, 3)
    client.list()
    (line,) = [w for w in client.warnings if "volume" in w]
    assert old.ref in line and "$7.00/month" in line and "3 day(s)" in line
    assert f"gpucloud volumes delete {old.ref}" in line
    report = client.reap(dry_run=True)
    assert [w for w in report.warnings if "volume" in w] == [line]


def test_a_volume_seen_attached_is_not_warned_about(client, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_JOB_SECONDS", "600")
    volume = client.create_volume("data", 10, "sim-east-1", provider="sandbox")
    _age(volume.ref, 3)
    client.submit(job({"name": "data", "mount": "/data"}), provider="sandbox",
                  region="sim-east-1")
    client.volumes()  # a listing sees it attached: the ledger stamps it
    client.list()
    assert not [w for w in client.warnings if "volume" in w]


# -- a job's own volumes -------------------------------------------------------------


def test_delete_with_job_deletes_only_the_volume_the_job_made(client, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_JOB_SECONDS", "600")
    client.create_volume("data", 10, "sim-east-1", provider="sandbox")
    # "data" exists already: the job would have made it, but did not, so it stays.
    submitted = client.submit(job({"name": "data", "mount": "/data", "size_gb": 10,
                                   "delete_with_job": True},
                                  {"name": "scratch", "mount": "/scratch", "size_gb": 20,
                                   "delete_with_job": True}),
                              provider="sandbox", region="sim-east-1")
    volumes = {v.name: v for v in client.volumes()}
    assert volumes["scratch"].region == "sim-east-1" and volumes["scratch"].size_gb == 20
    assert volumes["scratch"].attached_to == (submitted.instance.id,)
    client.cancel(submitted)
    assert [v.name for v in client.volumes()] == ["data"]


def test_a_job_that_ends_by_itself_takes_its_volume_when_it_is_seen_ended(client, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_JOB_SECONDS", "0.2")
    client.submit(job({"name": "scratch", "mount": "/scratch", "size_gb": 20,
                       "delete_with_job": True}), provider="sandbox", region="sim-east-1")
    assert [v.name for v in client.volumes()] == ["scratch"]
    time.sleep(0.4)
    assert client.jobs()[0].status.value == "succeeded"
    assert client.volumes() == []


def test_a_failed_launch_deletes_the_volume_it_made(client, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_ON", "create")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_5XX", "1")
    with Client(["sandbox"]) as failing:
        with pytest.raises(GpuCloudError):
            failing.submit(job({"name": "scratch", "mount": "/scratch", "size_gb": 20}),
                           provider="sandbox", region="sim-east-1")
    assert client.volumes() == []
    (gone,) = ledger().records()
    assert gone.deleted_at is not None


def test_reap_deletes_the_volume_of_a_job_that_ended_unseen(client, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_JOB_SECONDS", "0.2")
    client.submit(job({"name": "scratch", "mount": "/scratch", "size_gb": 20,
                       "delete_with_job": True}), provider="sandbox", region="sim-east-1")
    time.sleep(0.4)
    client.reap(dry_run=True)
    assert [v.name for v in client.volumes()] == ["scratch"]  # a dry run deletes nothing
    client.reap()
    assert client.volumes() == []


# -- the monthly budget ----------------------------------------------------------------


def _month_hours_left() -> Decimal:
    now = datetime.now(UTC)
    end = datetime(now.year + now.month // 12, now.month % 12 + 1, 1, tzinfo=UTC)
    return Decimal(int((end - now).total_seconds())) / 3600


@pytest.fixture
def budget_of(tmp_path):
    def write(amount: str) -> None:
        path = settings.config_dir() / "config.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'[budget]\nmonthly = "{amount}"\n')
    return write


BIG = 20000  # GB: $1,400 a month at the sandbox's rate, $1.92 an hour


@pytest.mark.skipif(_month_hours_left() < 24, reason="the month's last day: too little left "
                                                     "of it to tell the figures apart")
def test_the_monthly_budget_counts_volumes_and_a_jobs_new_ones(budget_of):
    hours = _month_hours_left()
    to_month_end = Decimal(BIG) * Decimal("0.07") / 730 * hours  # >= $46
    # Room for the job (10 h: $24.90) and half of the big volume to the month's end.
    budget_of(str((Decimal("24.90") + to_month_end / 2).quantize(Decimal("0.01"))))
    with Client(["sandbox"]) as client:
        client.plan_job(job(), provider="sandbox", region="sim-east-1")  # fits
        with pytest.raises(BudgetExceededError, match="over the monthly budget") as refused:
            client.plan_job(job({"name": "big", "mount": "/big", "size_gb": BIG}),
                            provider="sandbox", region="sim-east-1")
        assert "the job's new volumes bill" in (refused.value.hint or "")
        # Deleted with the job, it bills its 10 hours only ($19.18): that fits.
        client.plan_job(job({"name": "big", "mount": "/big", "size_gb": BIG,
                             "delete_with_job": True}), provider="sandbox", region="sim-east-1")
        # Once it exists, the ledger counts it to the month's end for every plan.
        client.create_volume("big", BIG, "sim-east-1", provider="sandbox")
        with pytest.raises(BudgetExceededError, match="over the monthly budget"):
            client.plan_job(job(), provider="sandbox", region="sim-east-1")
