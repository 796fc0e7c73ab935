"""Verda deadlines: the description cannot change, so extend writes
one of two alternating instance tags (Go SDK: POST /instances/{id}/tags,
DELETE /instances/{id}/tags/{key}); reads take the latest of description and
tags; the reaper run through Client terminates exactly the expired machines.
No OpenAPI exists: request bodies are checked against the Go SDK's TagRequest
{key, value} and the Python SDK's action body."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from gpucloud import Client
from gpucloud.errors import ConflictError
from tests.adapters._verda_support import (  # noqa: F401 (fixtures)
    API,
    CLIENT_ID,
    CLIENT_SECRET,
    INSTANCE_ID,
    api_fixture,
    error,
    instance_body,
    provider_fixture,
    reply,
    run_fixture,
)

PAST = "2020-01-01T00:00:00Z"
FUTURE = "2034-01-01T00:00:00Z"  # within the 10 years a deadline may reach
OURS = "gc-3a1a2245a7"  # a launch id of gpucloud's form (launch_ids.py)
PATH = f"/instances/{INSTANCE_ID}"
TARGET = datetime(2026, 12, 1, 18, tzinfo=timezone.utc)


def machine(ident: str = INSTANCE_ID, deadline: str | None = "2026-11-30T10:00:00Z",
            tags: dict[str, str] | None = None, launch_id: str | None = OURS,
            status: str = "running") -> dict:
    description = "gpucloud " + "; ".join(
        ([f"launch_id={launch_id}"] if launch_id else [])
        + ([f"shutdown_at={deadline}"] if deadline else [])) if launch_id else "my box"
    tag_list = [{"id": f"t-{k}", "key": k, "value": v} for k, v in (tags or {}).items()]
    return instance_body(id=ident, description=description, status=status,
                         tags=tag_list or None)


def calls(api) -> list[tuple[str, str, object]]:
    return [(r.method, r.url.path.removeprefix("/v1"),
             json.loads(r.content) if r.content else None) for r in api.requests]


def test_extend_adds_the_first_tag(api, run, provider):
    api.on("GET", PATH, reply(200, machine()),
           reply(200, machine(tags={"gpucloud-until-a": "2026-12-01T18:00:00Z"})))
    api.on("POST", f"{PATH}/tags", reply(201, {"id": "t1", "key": "gpucloud-until-a",
                                               "value": "2026-12-01T18:00:00Z"}))
    instance = provider._instance(None, machine())  # type: ignore[arg-type]
    updated = run(provider.set_deadline(instance, TARGET))
    assert calls(api) == [
        ("GET", PATH, None),
        ("POST", f"{PATH}/tags", {"key": "gpucloud-until-a", "value": "2026-12-01T18:00:00Z"}),
        ("GET", PATH, None)]
    assert updated.shutdown_at == TARGET


def test_extend_writes_the_free_key_then_deletes_the_old_one(api, run, provider):
    before = machine(tags={"gpucloud-until-a": "2026-12-01T00:00:00Z"})
    api.on("GET", PATH, reply(200, before), reply(200, machine(
        tags={"gpucloud-until-b": "2026-12-01T18:00:00Z"})))
    api.on("POST", f"{PATH}/tags", reply(201, {"id": "t2", "key": "gpucloud-until-b",
                                               "value": "2026-12-01T18:00:00Z"}))
    api.on("DELETE", f"{PATH}/tags/gpucloud-until-a", reply(204))
    run(provider.set_deadline(provider._instance(None, before), TARGET))  # type: ignore[arg-type]
    assert [c[:2] for c in calls(api)] == [
        ("GET", PATH), ("POST", f"{PATH}/tags"), ("DELETE", f"{PATH}/tags/gpucloud-until-a"),
        ("GET", PATH)]
    assert calls(api)[1][2] == {"key": "gpucloud-until-b", "value": "2026-12-01T18:00:00Z"}


def test_with_both_keys_left_over_the_earlier_is_replaced(api, run, provider):
    before = machine(tags={"gpucloud-until-a": "2026-12-01T12:00:00Z",
                           "gpucloud-until-b": "2026-12-01T06:00:00Z"})
    api.on("GET", PATH, reply(200, before))
    api.on("DELETE", f"{PATH}/tags/gpucloud-until-b", reply(404, error("not_found", "gone")))
    api.on("DELETE", f"{PATH}/tags/gpucloud-until-a", reply(204))
    api.on("POST", f"{PATH}/tags", reply(201, {"id": "t3", "key": "gpucloud-until-b",
                                               "value": "x"}))
    run(provider.set_deadline(provider._instance(None, before), TARGET))  # type: ignore[arg-type]
    assert [c[:2] for c in calls(api)] == [
        ("GET", PATH), ("DELETE", f"{PATH}/tags/gpucloud-until-b"), ("POST", f"{PATH}/tags"),
        ("DELETE", f"{PATH}/tags/gpucloud-until-a"), ("GET", PATH)]


def test_a_409_for_our_own_value_is_success_any_other_is_refused(api, run, provider):
    ours = machine(tags={"gpucloud-until-a": "2026-12-01T18:00:00Z"})
    api.on("GET", PATH, reply(200, machine()), reply(200, ours), reply(200, ours))
    api.on("POST", f"{PATH}/tags", reply(409, error("conflict", "tag exists")))
    assert run(provider.set_deadline(provider._instance(None, machine()), TARGET)  # type: ignore[arg-type]
               ).shutdown_at == TARGET

    api.requests.clear()
    api.on("GET", PATH, reply(200, machine()), reply(200, machine(
        tags={"gpucloud-until-a": "2026-11-30T11:00:00Z"})))
    with pytest.raises(ConflictError):
        run(provider.set_deadline(provider._instance(None, machine()), TARGET))  # type: ignore[arg-type]


def test_client_extend_sends_exactly_these_requests(api):
    api.on("GET", PATH, reply(200, machine(deadline=FUTURE)), reply(200, machine(
        deadline=FUTURE)), reply(200, machine(deadline=FUTURE, tags={
            "gpucloud-until-a": "2035-01-01T00:00:00Z"})))  # the last: the adapter's and extend's
    api.on("POST", f"{PATH}/tags", reply(201, {"id": "t", "key": "gpucloud-until-a",
                                               "value": "2035-01-01T00:00:00Z"}))
    client = Client(["verda"], credentials={"verda": f"{CLIENT_ID}:{CLIENT_SECRET}"},
                    use_keyring=False, sleep=lambda s: None)
    updated = client.extend(f"verda/{INSTANCE_ID}", until="2035-01-01T00:00Z")
    assert [c for c in calls(api) if c[0] != "GET"] == [
        ("POST", f"{PATH}/tags", {"key": "gpucloud-until-a", "value": "2035-01-01T00:00:00Z"})]
    assert updated.shutdown_at == datetime(2035, 1, 1, tzinfo=timezone.utc)


def test_a_stale_description_and_a_later_tag_read_as_the_later(api, run, provider):
    api.on("GET", PATH, reply(200, machine(tags={"gpucloud-until-b": "2026-12-01T18:00:00Z",
                                                 "team": "nlp"})))
    assert run(provider.get(INSTANCE_ID)).shutdown_at == TARGET


def test_garbage_tags_are_ignored(api, run, provider):
    stale = datetime(2026, 11, 30, 10, tzinfo=timezone.utc)
    for tags in ([{"key": "gpucloud-until-a", "value": "later"}], "tags?", [17, None],
                 [{"key": "gpucloud-until-b"}], {"gpucloud-until-a": FUTURE}):
        raw = machine()
        raw["tags"] = tags
        api.on("GET", PATH, reply(200, raw))
        instance = run(provider.get(INSTANCE_ID))
        assert instance.shutdown_at == stale and instance.launch_id == OURS, tags


# -- the reaper, through Client --------------------------------------------------------

IDS = {name: f"{n:08x}-a5d2-4972-ae4e-d429115d055b"
       for n, name in enumerate(("expired", "future", "moved", "foreign", "gone"), 1)}


def reap_routes(api):
    listing = [
        machine(IDS["expired"], deadline=PAST),
        machine(IDS["future"], deadline=FUTURE),
        machine(IDS["moved"], deadline=PAST),
        machine(IDS["foreign"], launch_id=None),
        machine(IDS["gone"], deadline=PAST, status="discontinued"),
    ]
    api.on("GET", "/instances", reply(200, listing))
    api.on("GET", "/volumes", reply(200, []))  # reap's volume check
    api.on("GET", "/volume-types", reply(200, []))
    api.on("GET", f"/instances/{IDS['expired']}", reply(200, listing[0]))
    api.on("GET", f"/instances/{IDS['moved']}", reply(200, machine(
        IDS["moved"], deadline=PAST, tags={"gpucloud-until-a": FUTURE})))
    return api.on("PUT", "/instances", reply(202, [{"action": "delete", "status": "ok",
                                                    "instanceId": IDS["expired"]}]))


def reaper() -> Client:
    return Client(["verda"], credentials={"verda": f"{CLIENT_ID}:{CLIENT_SECRET}"},
                  use_keyring=False, sleep=lambda s: None)


def test_reap_terminates_exactly_the_expired_machine(api):
    action = reap_routes(api)
    report = reaper().reap()
    done = {a.instance.id: a.action for a in report.actions}
    print(f"verda reap: checked={report.checked} "
          f"terminated={sum(a == 'terminated' for a in done.values())} actions={done}")
    assert [json.loads(c.request.content) for c in action.calls] == [
        {"id": [IDS["expired"]], "action": "delete", "volume_ids": None,
         "delete_permanently": True}]
    assert [c for c in calls(api) if c[0] != "GET"] == [
        ("PUT", "/instances", json.loads(action.calls.last.request.content))]
    assert done == {IDS["expired"]: "terminated", IDS["moved"]: "extended"}
    assert report.checked == 4


def test_reap_dry_run_terminates_nothing(api):
    action = reap_routes(api)
    report = reaper().reap(dry_run=True)
    print(f"verda reap --dry-run: checked={report.checked} terminated=0")
    assert action.call_count == 0 and all(c[0] == "GET" for c in calls(api))
    assert {a.instance.id: a.action for a in report.actions} == {
        IDS["expired"]: "would_terminate", IDS["moved"]: "extended"}
