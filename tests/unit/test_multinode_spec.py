"""The job file's multi-node and volume fields, and the rendezvous env every
node is given."""

from __future__ import annotations

import pytest

from gpucloud.errors import SpecError
from gpucloud.jobs.multinode import node_env
from gpucloud.jobs.ops import job_run
from gpucloud.jobs.spec import loads, schema

BASE = "name: t\nimage: img\nresources: {gpu: h100, gpu_count: 8}\n"


def test_a_two_node_job_with_volumes_reaches_the_adapter():
    spec = loads(BASE + "nodes: 2\nplacement: {interconnect: infiniband}\nvolumes:\n"
                 "  - {name: data, mount: /data}\n"
                 "  - {name: scratch, size_gb: 500, mount: /scratch, delete_with_job: true}\n")
    run = job_run(spec, {})
    assert (run.nodes, run.interconnect, run.gpu_count) == (2, "infiniband", 8)
    assert [(v.name, v.mount, v.size_gb, v.delete_with_job) for v in run.volumes] == [
        ("data", "/data", None, False), ("scratch", "/scratch", 500, True)]


def test_one_node_and_no_volumes_by_default():
    spec = loads(BASE)
    assert (spec.nodes, spec.placement.same_region, spec.placement.interconnect,
            spec.volumes) == (1, True, "any", [])


@pytest.mark.parametrize("extra, words", [
    ("nodes: 0\n", "nodes"),
    ("nodes: 65\n", "nodes"),
    ("placement: {same_region: false}\n", "one region"),
    ("placement: {interconnect: nvlink}\n", "interconnect"),
    ("volumes: [{name: data, mount: data}]\n", "absolute path"),
    ("volumes: [{name: data, mount: /}]\n", "absolute path"),
    ("volumes: [{name: Data!, mount: /d}]\n", "lower-case"),
    ("volumes: [{name: d, mount: /d, delete_with_job: true}]\n", "size_gb"),
    ("volumes: [{name: d, mount: /d}, {name: d, mount: /e}]\n", "given twice"),
    ("volumes: [{name: d, mount: /d}, {name: e, mount: /d/}]\n", "given twice"),
    ("nodes: 2\nenv: {MASTER_ADDR: x}\n", "set by gpucloud"),
])
def test_bad_multinode_and_volume_fields_are_refused_with_the_line(extra, words):
    with pytest.raises(SpecError) as err:
        loads(BASE + extra, "job.yaml")
    assert words in str(err.value) and "job.yaml:" in str(err.value)


def test_a_one_node_job_may_set_master_port_itself():
    assert loads(BASE + "env: {MASTER_PORT: '1234'}\n").env == {"MASTER_PORT": "1234"}


def test_every_node_gets_torchruns_names():
    addrs = ["10.0.0.5", "10.0.0.6"]
    env0, env1 = node_env(0, addrs, 8), node_env(1, addrs, 8)
    assert env0["MASTER_ADDR"] == env1["MASTER_ADDR"] == "10.0.0.5"
    assert (env0["NODE_RANK"], env1["NODE_RANK"]) == ("0", "1")
    assert env1 | {"NODE_RANK": "0"} == env0
    assert (env1["NNODES"], env1["WORLD_SIZE"], env1["GPUS_PER_NODE"]) == ("2", "16", "8")
    assert env1["MASTER_PORT"] == "29500"
    assert env1["GPUCLOUD_NODE_ADDRS"] == "10.0.0.5,10.0.0.6"
    with pytest.raises(ValueError):
        node_env(2, addrs, 8)


def test_the_schema_describes_nodes_placement_and_volumes():
    out = schema()
    props = out["properties"]
    assert {"nodes", "placement", "volumes"} <= set(props)
    assert "NODE_RANK" in props["nodes"]["description"]


def test_the_planner_never_picks_a_runpod_community_type_for_several_nodes():
    """RunPod's Instant Clusters run on its secure cloud only: a community offer
    is dropped while planning, not refused at submit after it was chosen."""
    from decimal import Decimal

    from gpucloud.jobs.placement import offer_filter
    from gpucloud.models import Offer

    def offer(instance_type: str) -> Offer:
        return Offer(provider="runpod", instance_type=instance_type, region="US-KS-2",
                     gpu="H100", gpu_count=8, price_per_hour=Decimal("20"))

    secure, community = offer("8x NVIDIA H100 80GB HBM3"), \
        offer("8x NVIDIA H100 80GB HBM3 (community)")
    refused: set[str] = set()
    fits = offer_filter(loads(BASE + "nodes: 2\n"), refused)
    assert (fits(secure), fits(community), refused) == (True, False, set())


@pytest.mark.parametrize("extra, place", [
    ("volumes:\n  - {name: d, mount: /d}\n  - {name: d, mount: /e}\n", "volumes.1.name"),
    ("volumes:\n  - {name: d, mount: /d}\n  - {name: e, mount: /d/}\n", "volumes.1.mount"),
    ("nodes: 2\nenv:\n  FOO: bar\n  MASTER_ADDR: x\n", "env.MASTER_ADDR"),
])
def test_a_clash_between_fields_names_the_field_and_its_line(extra, place):
    """Checks across fields name the entry at fault and its line, not the top."""
    with pytest.raises(SpecError) as err:
        loads(BASE + extra, "job.yaml")
    line = len(BASE.splitlines()) + len(extra.splitlines())  # the clash is the last line
    assert str(err.value).startswith(f"job.yaml:{line}: {place}: ")
