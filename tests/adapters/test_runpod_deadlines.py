"""RunPod deadlines: extend PATCHes the pod's name only (an env change
restarts the pod), reads take the later of env and the name marker, and the
reaper run through Client terminates exactly the expired pods. Requests
validated against the trimmed OpenAPI v2 (updatePod included)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from gpucloud import Client
from tests.adapters._runpod_support import (  # noqa: F401 (fixtures)
    KEY,
    POD,
    POD_ID,
    api,
    pod_body,
    provider,
    reply,
    run,
    sleeps,
)

PAST = "2020-01-01T00:00:00Z"
FUTURE = "2034-01-01T00:00:00Z"  # within the 10 years a deadline may reach
OURS = "gc-3a1a2245a7"  # a launch id of gpucloud's form (launch_ids.py)


def env(launch_id: str | None = OURS, deadline: str | None = PAST) -> dict[str, str]:
    out = {"MODEL_NAME": "llama-3"}
    if launch_id:
        out["GPUCLOUD_LAUNCH_ID"] = launch_id
    if deadline:
        out["GPUCLOUD_SHUTDOWN_AT"] = deadline
    return out


def pod(ident: str = POD_ID, name: str = "train-a", status: str = "RUNNING", **env_args):
    return pod_body(id=ident, name=name, status=status, env=env(**env_args))


def test_extend_patches_the_name_and_never_env(api, run, provider):
    route = api.on("PATCH", POD, reply(200, pod(name="train-a gc-until:20261201T180000Z")))
    instance = provider._instance(None, pod())  # type: ignore[arg-type]
    target = datetime(2026, 12, 1, 18, tzinfo=timezone.utc)

    updated = run(provider.set_deadline(instance, target))

    assert json.loads(route.calls.last.request.content) == {
        "name": "train-a gc-until:20261201T180000Z"}
    assert updated.shutdown_at == target and updated.name == "train-a"


def test_extend_twice_replaces_the_marker(api, run, provider):
    route = api.on("PATCH", POD, reply(200, pod(name="train-a gc-until:20270101T000000Z")))
    instance = provider._instance(None, pod(name="train-a gc-until:20261201T180000Z"))  # type: ignore[arg-type]
    run(provider.set_deadline(instance, datetime(2027, 1, 1, tzinfo=timezone.utc)))
    assert json.loads(route.calls.last.request.content) == {
        "name": "train-a gc-until:20270101T000000Z"}


def test_client_extend_sends_exactly_this_request(api):
    renamed = pod(name="train-a gc-until:20350101T000000Z", deadline=FUTURE)
    api.on("GET", POD, reply(200, pod(deadline=FUTURE)), reply(200, renamed))
    route = api.on("PATCH", POD, reply(200, renamed))
    client = Client(["runpod"], credentials={"runpod": KEY}, use_keyring=False,
                    sleep=lambda s: None)
    updated = client.extend(f"runpod/{POD_ID}", until="2035-01-01T00:00Z")
    # The read after the update: a reaper may have ended the pod in between.
    assert [(r.method, r.url.path) for r in api.requests] == [
        ("GET", POD), ("PATCH", POD), ("GET", POD)]
    assert json.loads(route.calls.last.request.content) == {
        "name": "train-a gc-until:20350101T000000Z"}
    assert updated.shutdown_at == datetime(2035, 1, 1, tzinfo=timezone.utc)


def test_stale_env_and_a_later_marker_read_as_the_later(api, run, provider):
    api.on("GET", POD, reply(200, pod(name="train-a gc-until:20261201T180000Z",
                                      deadline="2026-11-30T10:00:00Z")))
    instance = run(provider.get(POD_ID))
    assert instance.shutdown_at == datetime(2026, 12, 1, 18, tzinfo=timezone.utc)
    assert instance.name == "train-a"


def test_a_garbage_marker_is_ignored(api, run, provider):
    for name in ("train-a gc-until:never", "gc-until:20261301T000000Z", "a gc-until:"):
        api.on("GET", POD, reply(200, pod(name=name, deadline="2026-11-30T10:00:00Z")))
        assert run(provider.get(POD_ID)).shutdown_at == datetime(
            2026, 11, 30, 10, tzinfo=timezone.utc), name


def test_garbage_env_and_no_marker_have_no_deadline(api, run, provider):
    api.on("GET", POD, reply(200, pod(deadline="whenever")))
    assert run(provider.get(POD_ID)).shutdown_at is None


# -- the reaper, through Client --------------------------------------------------------


def reap_routes(api):
    listing = {"pods": [
        pod("expired"),
        pod("future", deadline=FUTURE),
        pod("moved"),  # extended from elsewhere: only the fresh GET shows it
        pod("foreign", launch_id=None),
        # Look-alike marks (an env anyone with the account can edit): never ours.
        pod("short", launch_id="gc-1"),
        pod("html", launch_id="gc-<html>"),
        pod("gone", status="TERMINATED"),
    ]}
    api.on("GET", "/v2/pods", reply(200, listing))
    api.on("GET", "/v2/network-volumes", reply(200, []))  # reap's volume check
    api.on("GET", "/v2/pods/expired", reply(200, pod("expired")))
    api.on("GET", "/v2/pods/moved", reply(200, pod("moved",
                                                   name="train-a gc-until:20990101T000000Z")))
    return api.on("DELETE", "/v2/pods/expired", reply(204))


def reaper() -> Client:
    return Client(["runpod"], credentials={"runpod": KEY}, use_keyring=False,
                  sleep=lambda s: None)


def test_reap_terminates_exactly_the_expired_pod(api):
    delete = reap_routes(api)
    report = reaper().reap()
    done = {a.instance.id: a.action for a in report.actions}
    print(f"runpod reap: checked={report.checked} "
          f"terminated={sum(a == 'terminated' for a in done.values())} actions={done}")
    assert delete.call_count == 1
    assert [(r.method, r.url.path) for r in api.requests if r.method != "GET"] == [
        ("DELETE", "/v2/pods/expired")]
    assert done == {"expired": "terminated", "moved": "extended"}
    assert report.checked == 4


def test_reap_dry_run_terminates_nothing(api):
    delete = reap_routes(api)
    report = reaper().reap(dry_run=True)
    print(f"runpod reap --dry-run: checked={report.checked} terminated=0")
    assert delete.call_count == 0
    assert all(r.method == "GET" for r in api.requests)
    assert {a.instance.id: a.action for a in report.actions} == {
        "expired": "would_terminate", "moved": "extended"}
