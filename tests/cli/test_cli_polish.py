"""The command line's edges, each through a real `python -m gpucloud` process:
a closed pipe, shell completion, usage errors in the shape of every error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def gpucloud(*args: str, stdout: int | None = subprocess.PIPE,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpucloud", *args], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def into_closed_pipe(*args):
    """The CLI with its stdout a pipe whose reader is gone before the first
    write, as when `head -3` has had its lines."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return gpucloud(*args, stdout=write_end)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", [["gpus"], ["gpus", "--json"], ["--help"], ["list", "--help"]])
def test_a_closed_pipe_ends_quietly_with_141(args):
    result = into_closed_pipe(*args)
    assert result.returncode == 141, result.stderr
    assert result.stderr == ""  # no traceback, no "Exception ignored", no "internal error"


@pytest.mark.parametrize("args,code", [
    (["get", "sandbox/sbx-000000000000", "--json"], 5),
    (["bogus", "--json"], 2),
])
def test_an_error_into_a_closed_pipe_keeps_its_exit_code(args, code):
    result = into_closed_pipe(*args)
    assert result.returncode == code, result.stderr
    assert result.stderr == ""


@pytest.mark.skipif(shutil.which("head") is None, reason="needs head(1)")
def test_a_pipe_into_head_shows_the_first_lines_only():
    pipeline = subprocess.run(
        f"{sys.executable} -m gpucloud gpus | head -1; exit ${{PIPESTATUS[0]}}",
        shell=True, executable=shutil.which("bash"), capture_output=True, text=True,
        timeout=60)
    assert pipeline.stdout.split() == ["GPU", "VENDOR", "MEMORY"]
    assert pipeline.returncode in (0, 141)  # 0 when all of it fitted the pipe's buffer
    assert pipeline.stderr == ""


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script_naming_gpucloud(shell):
    result = gpucloud("completion", shell)
    assert result.returncode == 0, result.stderr
    assert "gpucloud" in result.stdout and "_GPUCLOUD_COMPLETE=complete_" in result.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_bash_completion_script_is_valid_bash_and_completes(tmp_path):
    script = tmp_path / "gpucloud.bash"
    script.write_text(gpucloud("completion", "bash").stdout)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    # Drive the completion function as bash would on <TAB>, with `gpucloud` on PATH.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "gpucloud"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gpucloud "$@"\n')
    shim.chmod(0o755)
    drive = (f'source "{script}"; COMP_WORDS=(gpucloud list --pro); COMP_CWORD=2; '
             '_gpucloud_completion gpucloud; printf "%s\\n" "${COMPREPLY[@]}"')
    done = subprocess.run(["bash", "-c", drive], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert done.stdout.split() == ["--provider"], done.stderr


def test_completion_of_an_unknown_shell_is_a_usage_error():
    result = gpucloud("completion", "tcsh")
    assert result.returncode == 2
    assert result.stderr == ("error: no completion for shell 'tcsh'\n"
                             "hint: SHELL is one of bash, zsh, fish\n")


@pytest.mark.parametrize("args, message, hint", [
    (["list", "--bogus"], "No such option: --bogus", "`gpucloud list --help` shows the options"),
    (["get"], "Missing argument 'REF'.", "`gpucloud get --help` shows the options"),
    (["offers", "--count", "abc"], "Invalid value for '--count' / '-c'",
     "`gpucloud offers --help` shows the options"),
    (["lst"], "No such command 'lst'. Did you mean 'list'?",
     "`gpucloud --help` shows the commands"),
    (["--bogus"], "No such option: --bogus", "`gpucloud --help` shows the commands"),
    (["jobs", "get"], "Missing argument 'JOB'.", "`gpucloud jobs get --help` shows the options"),
])
def test_usage_errors_read_like_every_other_error(args, message, hint):
    result = gpucloud(*args)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and "Usage:" not in result.stderr
    assert lines[0].startswith(f"error: {message}")
    assert lines[1] == f"hint: {hint}"
    as_json = gpucloud(*args, "--json")
    assert as_json.returncode == 2 and as_json.stderr == ""
    error = json.loads(as_json.stdout)["error"]
    assert error["code"] == "usage" and error["exit_code"] == 2
    assert error["message"].startswith(message) and error["hint"] == hint


def test_ctrl_c_during_create_names_gpucloud_reconcile():
    import signal

    # The sandbox commits the machine, then holds its answer: Ctrl-C lands while
    # the launch is in flight, so the machine may exist without being recorded.
    process = subprocess.Popen(
        [sys.executable, "-m", "gpucloud", "create", "--gpu", "h100", "--count", "1",
         "--provider", "sandbox", "--yes"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "GPUCLOUD_SANDBOX_HANG_AFTER_CREATE": "30"})
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if line.startswith("launching on"):
            break
    import time

    time.sleep(1)  # the request is on its way
    process.send_signal(signal.SIGINT)
    _, rest = process.communicate(timeout=60)
    lines = ("".join(seen) + rest).splitlines()
    assert process.returncode == 130, lines
    assert any(line.startswith("may exist: sandbox") for line in lines)
    hint = next(line for line in lines if line.startswith("hint: "))
    assert "`gpucloud reconcile`" in hint and "launch id gc-" in hint


def test_an_unknown_job_file_field_gets_a_did_you_mean(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: train\nimage: pytorch/pytorch:2.4.0\nresources:\n  gpu: h100\n"
                   "  gpu_cont: 8\n")
    result = gpucloud("submit", str(job), "--provider", "sandbox", "--dry-run")
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == (
        f"error: {job}:5: resources.gpu_cont: unknown field, did you mean gpu_count? "
        "(`gpucloud schema job` lists the fields)")


JOB = "name: train\nimage: pytorch/pytorch:2.4.0\nresources:\n  gpu: h100\n"


def _submit(job: Path, seconds: int) -> str:
    result = gpucloud("submit", str(job), "--provider", "sandbox", "--yes", "--json",
                      env={"GPUCLOUD_SANDBOX_JOB_SECONDS": str(seconds)})
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)["job"]["ref"])


def test_a_name_of_several_ended_jobs_picks_the_newest_and_says_so(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    older, newer = _submit(job, 0), _submit(job, 0)
    import time

    for _ in range(50):  # the sandbox ends a job of 0 seconds on its next look
        listed = json.loads(gpucloud("jobs", "list", "--json").stdout)["jobs"]
        if all(j["status"] in ("succeeded", "failed", "cancelled") for j in listed):
            break
        time.sleep(0.2)
    got = gpucloud("jobs", "get", "train", "--json")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["ref"] == newer != older
    assert got.stderr == (f"warning: 'train' matches 2 jobs that have all ended: using the "
                          f"newest, {newer} (succeeded, created "
                          f"{json.loads(got.stdout)['created_at'][:19]}Z); name another by its "
                          "provider/id (REF in `gpucloud jobs list`)\n")
    # One run of the name still running: that one, as before, and nothing to say.
    running = _submit(job, 600)
    got = gpucloud("jobs", "get", "train", "--json")
    assert json.loads(got.stdout)["ref"] == running and got.stderr == ""
    # Two running: ambiguous, as before.
    _submit(job, 600)
    got = gpucloud("jobs", "get", "train")
    assert got.returncode == 2 and "matches 4 jobs" in got.stderr


REDRAW = "\x1b[{}A\r\x1b[J"  # cursor up over the last sample, clear below (ECMA-48 CSI A, CSI J)


def _on_a_terminal(args: list[str]) -> str:
    """What a command writes to a terminal (a pty), as bytes decoded."""
    import pty

    parent, child = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "gpucloud", *args], stdin=child,
                               stdout=child, stderr=subprocess.DEVNULL,
                               env={**os.environ, "COLUMNS": "120"})
    os.close(child)
    chunks = []
    while True:
        try:
            chunk = os.read(parent, 65536)
        except OSError:  # EIO: the command closed the terminal's other end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(parent)
    assert process.wait(timeout=60) == 0
    return b"".join(chunks).decode()


def test_top_redraws_in_place_on_a_terminal_and_prints_lines_to_a_pipe():
    from gpucloud import Client

    Client().create(gpu="h100", count=2, provider="sandbox", name="topbox", auto_shutdown="2h")
    args = ["top", "topbox", "--count", "3", "--interval", "1s"]
    screen = _on_a_terminal(args).replace("\r\n", "\n")  # the pty's own newline translation
    samples = screen.count("cost so far")
    assert samples == 3
    # Every sample after the first moves up over the last one (its lines) and clears.
    first = screen.split("cost so far")[1]
    height = first.count("\n")
    assert screen.count(REDRAW.format(height)) == 2, repr(screen)
    piped = gpucloud(*args)
    assert piped.returncode == 0
    assert "\x1b" not in piped.stdout and piped.stdout.count("cost so far") == 3


@pytest.mark.parametrize("args, sdk_call, cli_hint, sdk_hint", [
    (["create", "--gpu", "h100", "--provider", "sandbox", "--max-cost", "-5", "--dry-run"],
     lambda c: c.plan(gpu="h100", provider="sandbox", max_cost=-5),
     "USD for the whole run, e.g. --max-cost 200", "USD for the whole run, e.g. max_cost=200"),
    (["costs", "--month", "2026-13"], lambda c: c.costs(month="2026-13"),
     "give it as YYYY-MM, e.g. --month 2026-11", "give it as YYYY-MM, e.g. month='2026-11'"),
])
def test_hints_name_flags_on_the_command_line_and_arguments_in_the_sdk(
        args, sdk_call, cli_hint, sdk_hint):
    from gpucloud import Client
    from gpucloud.errors import GpuCloudError

    result = gpucloud(*args)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == f"hint: {cli_hint}"
    with pytest.raises(GpuCloudError) as caught:
        sdk_call(Client())
    assert caught.value.hint == sdk_hint


def test_the_cli_leaves_the_sdk_speaking_its_own_words():
    # The CLI run inside a program (a test runner, a notebook) gives the words back.
    from typer.testing import CliRunner

    from gpucloud.cli import app
    from gpucloud.errors import option

    CliRunner().invoke(app, ["costs", "--month", "2026-13"])
    assert option("max_cost", "--max-cost", "200") == "max_cost=200"


def test_a_batch_says_where_each_machine_landed_and_why_it_moved():
    # One machine per type and region: each launch after the first finds the
    # cheapest region full and fails over to the next.
    result = gpucloud("create", "--gpu", "h100", "--count", "1", "--provider", "sandbox",
                      "--instances", "3", "--concurrency", "1", "--yes", "--batch", "exp1",
                      env={"GPUCLOUD_SANDBOX_CAPACITY": "1"})
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "] machine " in line]
    assert len(lines) == 3
    regions = [line.split(" in ")[1].split(" ")[0] for line in lines]
    assert len(set(regions)) == 3  # three regions, each named
    assert lines[0].endswith("(sandbox sim.1xH100)")  # the first took the first offer
    assert lines[1].endswith(f"(sandbox sim.1xH100); moved: no capacity in {regions[0]}")
    assert lines[2].endswith(f"; moved: no capacity in {regions[0]}, "
                             f"no capacity in {regions[1]}")
    made = [line for line in result.stdout.splitlines() if line.startswith("created ")]
    assert [line.split(" in ")[1].split(" ")[0] for line in made] == regions


@pytest.mark.parametrize("args", [[], ["jobs"]])
def test_a_group_without_a_command_still_shows_its_help(args):
    result = gpucloud(*args)
    text = result.stdout + result.stderr
    assert "Usage:" in text and "Commands:" in text and "error:" not in text
