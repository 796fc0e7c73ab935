"""Lambda deadlines: extend renames the machine with a marker (tags are
fixed after launch), reads take the later of tag and marker, and the reaper run
through Client terminates exactly the expired machines. Requests validated
against the trimmed OpenAPI 1.8.3 (postInstance included)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from gpucloud import APIResponseValidationError, Client
from gpucloud.errors import InstanceFailedError
from gpucloud.models import InstanceStatus
from tests.adapters._lambda_support import (  # noqa: F401 (fixtures)
    INSTANCE_ID,
    KEY,
    api,
    instance_body,
    provider,
    reply,
    run,
    sleeps,
)

LAUNCH = "gpucloud-launch-id"
SHUTDOWN = "gpucloud-shutdown-at"
PAST = "2020-01-01T00:00:00Z"
FUTURE = "2034-01-01T00:00:00Z"  # within the 10 years a deadline may reach
OURS = "gc-3a1a2245a7"  # a launch id of gpucloud's form (launch_ids.py)


def tags(launch_id: str | None = OURS, deadline: str | None = PAST) -> list[dict[str, str]]:
    out = [{"key": LAUNCH, "value": launch_id}] if launch_id else []
    return out + ([{"key": SHUTDOWN, "value": deadline}] if deadline else [])


def machine(ident: str, name: str = "train-a", status: str = "active", **tag_args) -> dict:
    raw = instance_body(id=ident, name=name, status=status, tags=tags(**tag_args))["data"]
    return raw


def test_extend_posts_only_the_name_with_a_marker(api, run, provider):
    current = instance_body(name="train-a", status="active", tags=tags(deadline=PAST))
    renamed = instance_body(name="train-a gc-until:20261201T180000Z", status="active",
                            tags=tags(deadline=PAST))
    route = api.on("POST", f"/api/v1/instances/{INSTANCE_ID}", reply(200, renamed))
    instance = provider._instance(None, current["data"])  # type: ignore[arg-type]
    target = datetime(2026, 12, 1, 18, 0, tzinfo=timezone.utc)

    updated = run(provider.set_deadline(instance, target))

    assert json.loads(route.calls.last.request.content) == {
        "name": "train-a gc-until:20261201T180000Z"}
    assert updated.shutdown_at == target
    assert updated.name == "train-a"  # the user sees their name, not the marker


def test_extend_cuts_a_long_name_to_64_and_keeps_the_whole_marker(api, run, provider):
    route = api.on("POST", f"/api/v1/instances/{INSTANCE_ID}",
                   reply(200, instance_body(status="active")))
    instance = provider._instance(None, instance_body(name="n" * 64, status="active",  # type: ignore[arg-type]
                                                      tags=tags())["data"])
    run(provider.set_deadline(instance, datetime(2026, 12, 1, 18, tzinfo=timezone.utc)))
    sent = json.loads(route.calls.last.request.content)["name"]
    assert len(sent) == 64 and sent.endswith(" gc-until:20261201T180000Z")
    assert sent.startswith("n" * 38)


def test_client_extend_sends_exactly_this_request(api):
    # The whole path: Client.extend -> GET the machine -> postInstance -> read back.
    now_listed = instance_body(name="train-a", status="active", tags=tags(deadline=FUTURE))
    renamed = instance_body(name="train-a gc-until:20350101T000000Z", status="active",
                            tags=tags(deadline=FUTURE))
    api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(200, now_listed),
           reply(200, renamed))
    route = api.on("POST", f"/api/v1/instances/{INSTANCE_ID}", reply(200, renamed))
    client = Client(["lambda"], credentials={"lambda": KEY}, use_keyring=False,
                    sleep=lambda s: None)
    updated = client.extend(f"lambda/{INSTANCE_ID}", until="2035-01-01T00:00Z")
    assert json.loads(route.calls.last.request.content) == {
        "name": "train-a gc-until:20350101T000000Z"}
    assert updated.shutdown_at == datetime(2035, 1, 1, tzinfo=timezone.utc)


def test_extend_fails_when_the_provider_reads_back_the_old_deadline(api):
    # Lambda answered 200 but dropped the marker: the reaper would act on the old
    # deadline, so reporting success would be a lie.
    listed = instance_body(name="train-a", status="active", tags=tags(deadline=FUTURE))
    api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(200, listed))
    api.on("POST", f"/api/v1/instances/{INSTANCE_ID}", reply(200, listed))
    client = Client(["lambda"], credentials={"lambda": KEY}, use_keyring=False,
                    sleep=lambda s: None)
    with pytest.raises(APIResponseValidationError, match="reads back deadline 2034") as caught:
        client.extend(f"lambda/{INSTANCE_ID}", until="2035-01-01T00:00Z")
    # The retry it suggests names the same absolute deadline: it cannot add time twice.
    assert (f"gpucloud extend lambda/{INSTANCE_ID} --until 2035-01-01T00:00:00Z"
            in (caught.value.hint or ""))


def test_extend_of_a_machine_without_a_deadline_succeeds_at_whole_seconds(api):
    # No deadline yet: the target is now + 2h. Lambda keeps the marker to the
    # second, so a target carrying now's microseconds could never read back.
    listed = instance_body(name="train-a", status="active", tags=tags(deadline=None))
    posted: list[str] = []

    def rename(request):
        posted.append(json.loads(request.content)["name"])
        return reply(200, instance_body(name=posted[-1], status="active",
                                        tags=tags(deadline=None)))(request)

    def current(request):
        name = posted[-1] if posted else "train-a"
        return reply(200, instance_body(name=name, status="active",
                                        tags=tags(deadline=None)))(request)

    api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", current)
    api.on("POST", f"/api/v1/instances/{INSTANCE_ID}", rename)
    client = Client(["lambda"], credentials={"lambda": KEY}, use_keyring=False,
                    sleep=lambda s: None)
    before = datetime.now(timezone.utc)
    updated = client.extend(f"lambda/{INSTANCE_ID}", by="2h")
    assert updated.shutdown_at is not None and updated.shutdown_at.microsecond == 0
    assert abs(updated.shutdown_at - (before + timedelta(hours=2))) < timedelta(seconds=5)
    assert len(posted) == 1 and listed["data"]["name"] == "train-a"


def test_extend_says_when_the_reaper_ended_the_machine_first(api):
    # The reaper's terminate lands between extend's read and its rename: the
    # read-back shows the machine terminating, and that is no extension.
    listed = instance_body(name="train-a", status="active", tags=tags(deadline=PAST))
    ending = instance_body(name="train-a gc-until:20350101T000000Z", status="terminating",
                           tags=tags(deadline=PAST))
    api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(200, listed), reply(200, ending))
    api.on("POST", f"/api/v1/instances/{INSTANCE_ID}", reply(200, ending))
    client = Client(["lambda"], credentials={"lambda": KEY}, use_keyring=False,
                    sleep=lambda s: None)
    with pytest.raises(InstanceFailedError, match="the reaper ended it before the extension"):
        client.extend(f"lambda/{INSTANCE_ID}", until="2035-01-01T00:00Z")


def test_a_stale_tag_and_a_later_marker_read_as_the_later(api, run, provider):
    api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(200, instance_body(
        name="train-a gc-until:20261201T180000Z", tags=tags(deadline="2026-11-30T10:00:00Z"))))
    instance = run(provider.get(INSTANCE_ID))
    assert instance.shutdown_at == datetime(2026, 12, 1, 18, tzinfo=timezone.utc)
    assert instance.name == "train-a"


def test_a_marker_earlier_than_the_tag_never_moves_the_deadline_earlier(api, run, provider):
    api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(200, instance_body(
        name="x gc-until:20200101T000000Z", tags=tags(deadline="2026-11-30T10:00:00Z"))))
    assert run(provider.get(INSTANCE_ID)).shutdown_at == datetime(2026, 11, 30, 10,
                                                                   tzinfo=timezone.utc)


def test_a_garbage_marker_is_ignored(api, run, provider):
    for name in ("x gc-until:tomorrow", "x gc-until:", "gc-until:99999999T999999Z",
                 "x gc-until:2099-01-01T00:00:00Z"):  # not the compact form either
        api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(200, instance_body(
            name=name, tags=tags(deadline="2026-11-30T10:00:00Z"))))
        instance = run(provider.get(INSTANCE_ID))
        assert instance.shutdown_at == datetime(2026, 11, 30, 10, tzinfo=timezone.utc), name


def test_a_garbage_tag_and_a_valid_marker_read_as_the_marker(api, run, provider):
    api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(200, instance_body(
        name="x gc-until:20261201T180000Z", tags=tags(deadline="soon"))))
    assert run(provider.get(INSTANCE_ID)).shutdown_at == datetime(2026, 12, 1, 18,
                                                                   tzinfo=timezone.utc)


# -- the reaper, through Client --------------------------------------------------------


def reap_routes(api):
    listing = {"data": [
        machine("expired"),
        machine("future", deadline=FUTURE),
        machine("moved"),  # extended from elsewhere: only the fresh GET shows it
        machine("foreign", launch_id=None),  # not gpucloud's
        # Look-alike marks: blank, cut short, or an edit; never gpucloud's to end.
        machine("blank", launch_id=" "),
        machine("short", launch_id="gc-1"),
        machine("upper", launch_id="GC-3A1A2245A7"),
        machine("gone", status="terminated"),
    ]}
    api.on("GET", "/api/v1/instances", reply(200, listing))
    api.on("GET", "/api/v1/file-systems", reply(200, {"data": []}))  # reap's volume check
    api.on("GET", "/api/v1/instances/expired", reply(200, {"data": machine("expired")}))
    api.on("GET", "/api/v1/instances/moved", reply(200, {"data": machine(
        "moved", name="train-a gc-until:20990101T000000Z")}))
    return api.on("POST", "/api/v1/instance-operations/terminate",
                  reply(200, {"data": {"terminated_instances": []}}))


def reaper() -> Client:
    return Client(["lambda"], credentials={"lambda": KEY}, use_keyring=False,
                  sleep=lambda s: None)


def test_reap_terminates_exactly_the_expired_machine(api):
    terminate = reap_routes(api)
    report = reaper().reap()
    done = {a.instance.id: a.action for a in report.actions}
    print(f"lambda reap: checked={report.checked} "
          f"terminated={sum(a == 'terminated' for a in done.values())} actions={done}")
    assert [json.loads(c.request.content) for c in terminate.calls] == [
        {"instance_ids": ["expired"]}]
    assert done == {"expired": "terminated", "moved": "extended"}
    assert report.checked == 4  # every machine with gpucloud's launch id, the terminated one too
    fresh = sorted(r.url.path for r in api.requests if r.method == "GET")
    assert fresh == ["/api/v1/file-systems", "/api/v1/instances", "/api/v1/instances/expired",
                     "/api/v1/instances/moved"]


def test_reap_dry_run_terminates_nothing(api):
    terminate = reap_routes(api)
    report = reaper().reap(dry_run=True)
    print(f"lambda reap --dry-run: checked={report.checked} terminated=0")
    assert terminate.call_count == 0
    assert {a.instance.id: a.action for a in report.actions} == {
        "expired": "would_terminate", "moved": "extended"}
    assert report.actions[0].instance.status is InstanceStatus.RUNNING
