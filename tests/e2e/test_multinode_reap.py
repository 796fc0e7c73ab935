"""The reaper treats a multi-node job's machines as one: once a node has
ended, the others are ended too, deadline or not (Lambda answered by respx
at the HTTP transport, from the contract fixtures), while a job whose nodes
all run is left alone; a node missing from the listing counts as lost only
once the launch is long over."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gpucloud import Client
from gpucloud.models import Instance, InstanceStatus
from gpucloud.safety import reap as reap_mod
from gpucloud.safety.journal import utcnow

from .test_lambda_client import fake, fixture  # noqa: F401 - a fixture

KEY = "mn-2-0123456789"  # a two-node job's batch key (providers/_batch_mark.job_key)


def _node(fake, rank: int, status: str, launch_id: str, key: str = KEY,
          left: timedelta = timedelta(hours=2)) -> str:
    ident = f"{len(fake.instances) + 1:032x}"
    deadline = (utcnow() + left).strftime("%Y-%m-%dT%H:%M:%SZ")
    fake.instances[ident] = {
        **fixture("get_instance_200.json")["data"], "id": ident, "name": f"pair-node{rank}",
        "status": status, "tags": [{"key": "gpucloud-launch-id", "value": launch_id},
                                   {"key": "gpucloud-batch", "value": key},
                                   {"key": "gpucloud-shutdown-at", "value": deadline}]}
    return ident


def _terminated(fake) -> list[str]:
    import json

    return [i for r in fake.sent if r.url.path == "/api/v1/instance-operations/terminate"
            for i in json.loads(r.content)["instance_ids"]]


def test_one_node_ended_ends_the_other_before_its_deadline(fake):
    _node(fake, 0, "terminated", "gj-aaaaaaaaaa")
    survivor = _node(fake, 1, "active", "gj-bbbbbbbbbb")
    # Another job whose nodes both run: left alone.
    _node(fake, 0, "active", "gj-cccccccccc", key="mn-2-99999999ff")
    _node(fake, 1, "active", "gj-dddddddddd", key="mn-2-99999999ff")

    report = Client(providers=["lambda"], sleep=lambda _s: None).reap(provider="lambda")

    assert _terminated(fake) == [survivor]
    (action,) = report.actions
    assert (action.instance.id, action.action) == (survivor, "terminated")
    assert "is terminated" in action.reason and action.overdue_seconds == 0


def test_the_cli_says_why_a_node_before_its_deadline_is_ended(fake):
    from typer.testing import CliRunner

    from gpucloud.cli import app

    _node(fake, 0, "preempted", "gj-aaaaaaaaaa")  # Lambda: gone, no longer billed
    survivor = _node(fake, 1, "active", "gj-bbbbbbbbbb")
    done = CliRunner().invoke(app, ["reap", "--provider", "lambda"])
    assert done.exit_code == 0, done.output
    assert (f"terminated: lambda/{survivor} (pair-node1), a node of a job that lost one: "
            in done.output) and "is terminated" in done.output


def test_a_dry_run_names_the_node_and_ends_nothing(fake):
    _node(fake, 0, "terminated", "gj-aaaaaaaaaa")
    survivor = _node(fake, 1, "active", "gj-bbbbbbbbbb")
    report = Client(providers=["lambda"], sleep=lambda _s: None).reap(provider="lambda",
                                                                       dry_run=True)
    assert [(a.instance.id, a.action) for a in report.actions] == [(survivor, "would_terminate")]
    assert _terminated(fake) == []


def test_the_deadline_of_one_node_ends_the_whole_job_in_one_pass(fake):
    """Each node's deadline is set as it launched, seconds apart: the first one
    past ends them all, not one node now and the other a pass later."""
    late = _node(fake, 0, "active", "gj-aaaaaaaaaa", left=-timedelta(minutes=1))
    early = _node(fake, 1, "active", "gj-bbbbbbbbbb", left=timedelta(minutes=10))

    report = Client(providers=["lambda"], sleep=lambda _s: None).reap(provider="lambda")

    assert sorted(_terminated(fake)) == sorted([late, early])
    assert {a.instance.id: a.action for a in report.actions} == {
        late: "terminated", early: "terminated"}


def _machine(ident: str, created_ago: timedelta | None,
             status: InstanceStatus = InstanceStatus.RUNNING) -> Instance:
    return Instance(provider="ssh", id=ident, status=status, launch_id="gj-cccccccccc",
                    batch=KEY, created_at=None if created_ago is None else utcnow() - created_ago)


@pytest.mark.parametrize(("created_ago", "lost"), [
    (timedelta(minutes=1), False),  # its batch may still be launching the other node
    (reap_mod.LOST_AFTER + timedelta(minutes=1), True),
    (None, False),  # no creation time: a missing node cannot be told from a slow launch
])
def test_a_missing_node_is_lost_only_once_the_launch_is_long_over(created_ago, lost):
    found = reap_mod.lone_nodes([_machine("box1", created_ago)], utcnow())
    assert [m.id for m, _ in found] == (["box1"] if lost else [])
