"""Shadeform machines: list and info read the launch id and deadline back, the
SSH endpoint comes from the instance itself, delete is a POST, extend moves
auto_delete (and the tag copy) in one update and returns what it reads back,
errors map through the table, and 429s pace it (no published limits)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from gpucloud.errors import AuthenticationError, InternalServerError, NotFoundError
from gpucloud.models import InstanceStatus
from gpucloud.providers.shadeform.adapter import ShadeformProvider
from tests.adapters._shadeform_support import (  # noqa: F401 (fixtures)
    INSTANCE_ID, KEY, api, body, info_body, paths, provider, reply, run, sent, sleeps,
)

INFO = f"/instances/{INSTANCE_ID}/info"
OLD = "2026-12-01T18:00:00Z"
NEW = datetime(2026, 12, 1, 22, 0, tzinfo=timezone.utc)
OURS = ["tag1", "gpucloud-launch-id=gc-3a1a2245a7", f"gpucloud-shutdown-at={OLD}"]


def listed(**changes):
    data = body("instances_200")
    data["instances"] = [dict(data["instances"][0], **changes)]
    return data


def test_list_reads_the_launch_id_and_the_deadline_tag(api, run, provider):
    api.on("GET", "/instances", reply(200, listed(tags=OURS, status="pending_provider")))

    [machine] = run(provider.list_instances())

    assert machine.launch_id == "gc-3a1a2245a7"
    assert machine.shutdown_at == datetime(2026, 12, 1, 18, tzinfo=timezone.utc)
    assert machine.status is InstanceStatus.PENDING
    assert machine.instance_type == "hyperstack_A6000" and machine.region == "canada-1"


def test_a_machine_without_our_tags_is_nobodys(api, run, provider):
    api.on("GET", "/instances", reply(200, body("instances_200")))  # the example: tag1 only
    assert {(m.launch_id, m.shutdown_at) for m in run(provider.list_instances())} == {
        (None, None)}


def test_info_takes_the_deadline_shadeform_acts_on_and_the_ssh_endpoint(api, run, provider):
    api.on("GET", INFO, reply(200, info_body(
        tags=OURS, ssh_user="ubuntu", ssh_port=2222, ip="203.0.113.7",
        auto_delete={"date_threshold": "2026-12-01T23:00:00+01:00"})))

    machine = run(provider.get(INSTANCE_ID))

    # auto_delete (an RFC 3339 time with its offset) wins over the tag copy.
    assert machine.shutdown_at == datetime(2026, 12, 1, 22, tzinfo=timezone.utc)
    assert machine.connection is not None
    assert (machine.connection.host, machine.connection.port, machine.connection.user) == (
        "203.0.113.7", 2222, "ubuntu")
    assert machine.price_per_hour is not None and str(machine.price_per_hour) == "2.1"


@pytest.mark.parametrize("ip,user", [("", "shadeform"), ("-oProxyCommand=x", "shadeform"),
                                     ("1.0.0.1", "")])
def test_no_usable_address_is_no_connection(api, run, provider, ip, user):
    api.on("GET", INFO, reply(200, info_body(ip=ip, ssh_user=user)))
    assert run(provider.get(INSTANCE_ID)).connection is None


def test_delete_posts_to_the_delete_path_and_a_404_is_not_found(api, run, provider):
    route = api.on("POST", f"/instances/{INSTANCE_ID}/delete", reply(200), reply(404, {
        "error": "instance not found"}))  # CONSTRUCTED body
    assert run(provider.delete(INSTANCE_ID)) is None
    assert route.calls.last.request.content == b""
    with pytest.raises(NotFoundError):
        run(provider.delete(INSTANCE_ID))


def test_extend_moves_auto_delete_and_the_tag_keeping_the_spend_cap_and_user_tags(
        api, run, provider):
    api.on("GET", INFO,
           reply(200, info_body(tags=OURS, auto_delete={"date_threshold": OLD,
                                                        "spend_threshold": "3.14"})),
           reply(200, info_body(tags=["tag1", "gpucloud-launch-id=gc-3a1a2245a7",
                                      "gpucloud-shutdown-at=2026-12-01T22:00:00Z"],
                                auto_delete={"date_threshold": "2026-12-01T22:00:00Z",
                                             "spend_threshold": "3.14"})))
    update = api.on("POST", f"/instances/{INSTANCE_ID}/update", reply(200))
    before = run(provider.get(INSTANCE_ID))
    api.requests.clear()

    after = run(provider.set_deadline(before, NEW))

    assert paths(api) == [f"GET /v1{INFO}", f"POST /v1/instances/{INSTANCE_ID}/update",
                          f"GET /v1{INFO}"]
    assert sent(update) == {
        "auto_delete": {"date_threshold": "2026-12-01T22:00:00Z", "spend_threshold": "3.14"},
        "tags": ["tag1", "gpucloud-launch-id=gc-3a1a2245a7",
                 "gpucloud-shutdown-at=2026-12-01T22:00:00Z"]}
    assert after.shutdown_at == NEW  # as read back


def test_extend_returns_the_deadline_shadeform_still_holds_when_the_update_did_not_take(
        api, run, provider):
    # The update answers 200 but the read-back shows the old date: extend reports
    # that deadline (and the caller refuses to call it extended), never the wish.
    api.on("GET", INFO, reply(200, info_body(tags=OURS, auto_delete={"date_threshold": OLD})))
    update = api.on("POST", f"/instances/{INSTANCE_ID}/update", reply(200))
    before = run(provider.get(INSTANCE_ID))

    after = run(provider.set_deadline(before, NEW))

    assert "spend_threshold" not in sent(update)["auto_delete"]  # none was set
    assert after.shutdown_at == datetime(2026, 12, 1, 18, tzinfo=timezone.utc)


def test_a_bad_key_is_an_authentication_error_that_never_shows_the_key(api, run, provider):
    api.on("GET", "/instances", reply(401, {"error": f"invalid api key {KEY}"}))  # CONSTRUCTED
    with pytest.raises(AuthenticationError) as info:
        run(provider.list_instances())
    assert KEY not in str(info.value) and KEY not in repr(info.value)
    assert "GPUCLOUD_SHADEFORM_API_KEY" in (info.value.hint or "")


def test_a_plain_text_5xx_keeps_its_words(api, run, provider):
    api.on("GET", "/instances", reply(502, text="Bad Gateway from upstream"))
    with pytest.raises(InternalServerError, match="Bad Gateway from upstream"):
        run(provider.list_instances())


def test_no_published_limits_so_a_429_paces_the_retry(api, run, provider, sleeps):
    assert ShadeformProvider.rate_limits == {}
    api.on("GET", "/instances", reply(429, headers={"Retry-After": "7"}),
           reply(200, body("instances_200")))
    assert len(run(provider.list_instances())) == 2
    assert 7 in sleeps or 7.0 in sleeps


def test_verify_is_one_cheap_signed_read(api, run, provider):
    # `gpucloud auth login shadeform` proves the key with this read before keeping it.
    api.on("GET", "/sshkeys", reply(200, body("sshkeys_200")))
    assert run(provider.verify()) is None
    assert paths(api) == ["GET /v1/sshkeys"]


def test_list_reads_the_batch_tag(api, run, provider):
    """The machines of a multi-node job are grouped by the batch tag create set."""
    api.on("GET", "/instances", reply(200, listed(tags=[*OURS, "gpucloud-batch=mn-2-00112233aa"])))
    [machine] = run(provider.list_instances())
    assert machine.batch == "mn-2-00112233aa"
