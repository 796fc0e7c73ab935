"""Vast.ai deadlines: extend rewrites the label (manageInstance),
reads take the later of label and env, and the reaper run through Client
terminates exactly the expired machines. Requests validated against the trimmed
official OpenAPI document. The self-guard is in test_vastai_guard.py."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone

import pytest

from gpucloud import Client
from tests.adapters._vastai_support import (  # noqa: F401 (fixtures)
    KEY,
    LIST,
    SHOWN,
    api_fixture,
    body,
    provider_fixture,
    reply,
    run_fixture,
    show,
    sleeps_fixture,
)

PAST = "2020-01-01T00:00:00Z"
FUTURE = "2034-01-01T00:00:00Z"
INSTANCE = f"/api/v0/instances/{SHOWN}/"


def raw(ident: int, label: str | None, env_deadline: str | None = None,
        status: str = "running") -> dict:
    data = copy.deepcopy(body("list_instances_v1_200_from_schema_examples")["instances"][0])
    extra = [["GPUCLOUD_SHUTDOWN_AT", env_deadline]] if env_deadline else []
    data.update(id=ident, label=label, actual_status=status, intended_status="running",
                extra_env=extra)
    return data


def test_extend_puts_the_whole_label_back_with_the_new_deadline(api, run, provider):
    label = "gpucloud:gc-7f3a9c0000 shutdown:2026-11-30T10:00:00Z train a"
    put = api.on("PUT", INSTANCE, reply(200, {"success": True}))
    moved = "gpucloud:gc-7f3a9c0000 shutdown:2026-12-01T18:00:00Z train a"
    api.on("GET", INSTANCE, reply(200, show(SHOWN, label=moved)))
    instance = provider._instance(None, show(SHOWN, label=label)["instances"])  # type: ignore[arg-type]
    target = datetime(2026, 12, 1, 18, tzinfo=timezone.utc)

    updated = run(provider.set_deadline(instance, target))

    assert json.loads(put.calls.last.request.content) == {"label": moved}
    assert (updated.shutdown_at, updated.launch_id, updated.name) == (target, "gc-7f3a9c0000",
                                                                      "train a")


def test_client_extend_sends_exactly_this_request(api):
    label = f"gpucloud:gc-a000000001 shutdown:{FUTURE} train-a"
    moved = "gpucloud:gc-a000000001 shutdown:2035-01-01T00:00:00Z train-a"
    api.on("GET", INSTANCE, reply(200, show(SHOWN, label=label)),
           reply(200, show(SHOWN, label=moved)))  # the adapter's read-back, then extend's
    put = api.on("PUT", INSTANCE, reply(200, {"success": True}))
    client = Client(["vastai"], credentials={"vastai": KEY}, use_keyring=False,
                    sleep=lambda s: None)
    updated = client.extend(f"vastai/{SHOWN}", until="2035-01-01T00:00Z")
    assert json.loads(put.calls.last.request.content) == {"label": moved}
    assert [r.method for r in api.requests] == ["GET", "PUT", "GET", "GET"]
    assert updated.shutdown_at == datetime(2035, 1, 1, tzinfo=timezone.utc)


def test_extend_refuses_a_machine_that_is_not_gpucloud_s(api, run, provider):
    from gpucloud.errors import SpecError

    instance = provider._instance(None, show(SHOWN, label="someone else's")["instances"])  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="launch id"):
        run(provider.set_deadline(instance, datetime(2099, 1, 1, tzinfo=timezone.utc)))
    assert api.requests == []


def test_stale_env_and_a_later_label_read_as_the_later(api, run, provider):
    shown = show(SHOWN, label="gpucloud:gc-a000000001 shutdown:2026-12-01T18:00:00Z train-a",
                 extra_env=[["GPUCLOUD_SHUTDOWN_AT", "2026-11-30T10:00:00Z"]])
    api.on("GET", INSTANCE, reply(200, shown))
    assert run(provider.get(SHOWN)).shutdown_at == datetime(2026, 12, 1, 18,
                                                            tzinfo=timezone.utc)


def test_a_label_earlier_than_env_never_moves_the_deadline_earlier(api, run, provider):
    shown = show(SHOWN, label="gpucloud:gc-a000000001 shutdown:2020-01-01T00:00:00Z train-a",
                 extra_env=[["GPUCLOUD_SHUTDOWN_AT", "2026-11-30T10:00:00Z"]])
    api.on("GET", INSTANCE, reply(200, shown))
    assert run(provider.get(SHOWN)).shutdown_at == datetime(2026, 11, 30, 10,
                                                            tzinfo=timezone.utc)


def test_a_garbage_label_deadline_is_ignored(api, run, provider):
    for label in ("gpucloud:gc-a000000001 shutdown:someday train-a",
                  "gpucloud:gc-a000000001 shutdown: x",
                  "gpucloud:gc-a000000001 shutdown:2026-13-45T99:00:00Z"):
        api.on("GET", INSTANCE, reply(200, show(SHOWN, label=label, extra_env=[
            ["GPUCLOUD_SHUTDOWN_AT", "2026-11-30T10:00:00Z"]])))
        instance = run(provider.get(SHOWN))
        assert instance.shutdown_at == datetime(2026, 11, 30, 10, tzinfo=timezone.utc), label
        assert instance.launch_id == "gc-a000000001"


# -- the reaper, through Client --------------------------------------------------------


def reap_routes(api):
    # Vast lists no destroyed machine: there is no "terminated" row to show.
    listing = body("list_instances_v1_200_from_schema_examples")
    listing["next_token"] = None
    listing["instances"] = [
        raw(101, f"gpucloud:gc-a000000001 shutdown:{PAST} expired", PAST),
        raw(102, f"gpucloud:gc-a000000002 shutdown:{FUTURE} future", FUTURE),
        raw(103, f"gpucloud:gc-a000000003 shutdown:{PAST} moved", PAST),
        raw(104, "my own box", PAST),  # not gpucloud's (no launch id anywhere)
        raw(105, f"gpucloud:gc-1 shutdown:{PAST} lookalike", PAST),  # not gpucloud's form
    ]
    api.on("GET", LIST, reply(200, listing))
    api.on("GET", "/api/v0/volumes/", reply(200, {"volumes": []}))  # reap's volume check
    api.on("GET", "/api/v0/instances/101/", reply(200, show("101", label=(
        f"gpucloud:gc-a000000001 shutdown:{PAST} expired"))))
    api.on("GET", "/api/v0/instances/103/", reply(200, show("103", label=(
        f"gpucloud:gc-a000000003 shutdown:{FUTURE} moved"))))
    return api.on("DELETE", "/api/v0/instances/101/", reply(200, body(
        "destroy_instance_200_from_schema_examples")))


def reaper() -> Client:
    return Client(["vastai"], credentials={"vastai": KEY}, use_keyring=False,
                  sleep=lambda s: None)


def test_reap_destroys_exactly_the_expired_machine(api):
    delete = reap_routes(api)
    report = reaper().reap()
    done = {a.instance.id: a.action for a in report.actions}
    print(f"vastai reap: checked={report.checked} "
          f"terminated={sum(a == 'terminated' for a in done.values())} actions={done}")
    assert delete.call_count == 1
    assert [(r.method, r.url.path) for r in api.requests if r.method != "GET"] == [
        ("DELETE", "/api/v0/instances/101/")]
    assert done == {"101": "terminated", "103": "extended"}
    assert report.checked == 3


def test_reap_dry_run_destroys_nothing(api):
    delete = reap_routes(api)
    report = reaper().reap(dry_run=True)
    print(f"vastai reap --dry-run: checked={report.checked} terminated=0")
    assert delete.call_count == 0 and all(r.method == "GET" for r in api.requests)
    assert {a.instance.id: a.action for a in report.actions} == {
        "101": "would_terminate", "103": "extended"}


def test_reap_destroys_an_exited_machine_past_its_deadline(api):
    listing = body("list_instances_v1_200_from_schema_examples")
    listing["next_token"] = None
    listing["instances"] = [raw(201, f"gpucloud:gc-a000000009 shutdown:{PAST} crashed", PAST,
                                status="exited")]
    api.on("GET", LIST, reply(200, listing))
    api.on("GET", "/api/v0/volumes/", reply(200, {"volumes": []}))  # reap's volume check
    api.on("GET", "/api/v0/instances/201/", reply(200, show(
        "201", actual_status="exited", label=f"gpucloud:gc-a000000009 shutdown:{PAST} x")))
    delete = api.on("DELETE", "/api/v0/instances/201/", reply(200, body(
        "destroy_instance_200_from_schema_examples")))
    reaper().reap()
    assert delete.call_count == 1
