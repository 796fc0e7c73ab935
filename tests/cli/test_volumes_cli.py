"""`gpucloud volumes list|create|delete` and a job that mounts a volume, in
the real CLI's own process on the sandbox: the round trip, the refusals and
their exit codes (docs/errors.md)."""

from __future__ import annotations

import json

from tests.cli._subprocess import gpucloud

JOB = """name: reads-data
image: busybox
command: [sh, -c, "ls /data"]
resources: {gpu: h100, gpu_count: 1}
max_runtime: 1h
volumes:
  - {name: data, mount: /data}
"""
# A job long enough to still run while its volume is asked about.
SLOW = {"GPUCLOUD_SANDBOX_BOOT_SECONDS": "0", "GPUCLOUD_SANDBOX_JOB_SECONDS": "600"}


def test_create_list_mount_delete_round_trip(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    made = gpucloud("volumes", "create", "data", "--size-gb", "100", "--region", "sim-east-1",
                    "--provider", "sandbox", "--yes", "--json", home=tmp_path, **SLOW)
    assert made.returncode == 0, made.stderr
    volume = json.loads(made.stdout)["volume"]
    assert volume["name"] == "data" and volume["size_gb"] == 100
    assert volume["price_per_month"] == "7.00"  # 100 GB x the sandbox's simulated $0.07

    listed = json.loads(gpucloud("volumes", "list", "--json", home=tmp_path, **SLOW).stdout)
    assert [v["ref"] for v in listed["volumes"]] == [volume["ref"]]
    assert listed["volumes"][0]["attached_to"] == []

    submitted = gpucloud("submit", str(job), "--provider", "sandbox", "--region", "sim-east-1",
                         "--yes", "--json", home=tmp_path, **SLOW)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    machine = json.loads(submitted.stdout)["job"]["instance"]["id"]
    logs = gpucloud("jobs", "logs", "reads-data", home=tmp_path, **SLOW).stdout
    assert f"mounted volume data ({volume['id']}, 100 GB) at /data" in logs

    table = gpucloud("volumes", "list", home=tmp_path, **SLOW).stdout
    assert "REF" in table and "$/GB-MONTH" in table and "$7.00" in table and machine in table

    refused = gpucloud("volumes", "delete", "data", "--yes", home=tmp_path, **SLOW)
    assert refused.returncode == 2 and machine in refused.stderr and "--force" in refused.stderr
    unasked = gpucloud("volumes", "delete", "data", "--force", home=tmp_path, **SLOW)
    assert unasked.returncode == 8  # no terminal to ask on, no --yes
    deleted = gpucloud("volumes", "delete", "data", "--force", "--yes", "--json",
                       home=tmp_path, **SLOW)
    assert deleted.returncode == 0 and json.loads(deleted.stdout)["deleted"] == volume["ref"]
    assert json.loads(gpucloud("volumes", "list", "--json", home=tmp_path,
                               **SLOW).stdout)["volumes"] == []


def test_create_shows_the_monthly_cost_before_it_asks(tmp_path):
    asked = gpucloud("volumes", "create", "data", "--size-gb", "250", "--region", "sim-eu-1",
                     "--provider", "sandbox", home=tmp_path)
    assert asked.returncode == 8  # not a terminal: refused, nothing created
    assert "$17.50 a month" in asked.stderr and "simulated" in asked.stderr
    assert json.loads(gpucloud("volumes", "list", "--provider", "sandbox", "--json",
                               home=tmp_path).stdout)["volumes"] == []


def test_refusals_are_one_line_with_a_hint_and_their_exit_code(tmp_path):
    def run(*args: str) -> tuple[int, str]:
        done = gpucloud("volumes", *args, home=tmp_path)
        assert "Traceback" not in done.stderr
        return done.returncode, done.stderr

    code, err = run("create", "x", "--size-gb", "10", "--provider", "fluidstack", "--yes")
    assert code == 2 and "fluidstack has no network volumes" in err and "sandbox" in err
    # Vast's volumes are listed and deleted, never created: why, and where to rent one.
    code, err = run("create", "x", "--size-gb", "10", "--provider", "vastai", "--yes")
    assert code == 2 and "one host's volume offer" in err and "vastai search volumes" in err
    assert len(err.strip().splitlines()) == 2  # the error and its hint
    code, err = run("create", "x", "--size-gb", "10", "--provider", "sandbox",
                    "--region", "mars", "--yes")
    assert code == 2 and "no region 'mars'" in err and "sim-east-1" in err
    assert run("create", "x", "--size-gb", "10", "--provider", "sandbox", "--region",
               "sim-east-1", "--yes")[0] == 0
    code, err = run("create", "x", "--size-gb", "10", "--provider", "sandbox", "--region",
                    "sim-east-1", "--yes")
    assert code == 2 and "a volume named 'x' exists" in err and "hint:" in err
    code, err = run("delete", "nope", "--yes")
    assert code == 5 and "no volume 'nope'" in err and "gpucloud volumes list" in err


def test_a_volume_in_another_region_is_refused_at_plan_time(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    assert gpucloud("volumes", "create", "data", "--size-gb", "10", "--region", "sim-eu-1",
                    "--provider", "sandbox", "--yes", home=tmp_path).returncode == 0
    planned = gpucloud("submit", str(job), "--provider", "sandbox", "--region", "sim-east-1",
                       "--dry-run", home=tmp_path)
    assert planned.returncode == 2, planned.stdout + planned.stderr
    assert "volume data is in sim-eu-1" in planned.stderr
    assert "--region sim-eu-1" in planned.stderr
    missing = tmp_path / "missing.yaml"
    missing.write_text(JOB.replace("name: data", "name: other"))
    planned = gpucloud("submit", str(missing), "--provider", "sandbox", "--dry-run",
                       home=tmp_path)
    assert planned.returncode == 2 and "gpucloud volumes create other" in planned.stderr
