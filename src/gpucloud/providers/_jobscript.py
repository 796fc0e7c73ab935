"""The shell that runs a job on a machine, shared by the VM and container clouds.

One runner, two ways to start the job and one end action per provider:

* ``vm_script`` (Lambda, Verda): the machine's start-up script runs the job's
  image with ``docker run --gpus all``; CHECKPOINT_DIR is a host directory
  mounted at the same path.
* ``container_script`` (RunPod, Vast.ai): the job already lives in its image,
  so the script runs the job's command itself. The image's own entrypoint/CMD
  cannot be seen from inside, hence a job on these clouds needs a command.

Either way the job runs under ``timeout`` for what is left of max_runtime
(retries share that budget), its exit status is written to
``$GC_STATE/exit-status`` (124: max_runtime passed) and its output to
``$GC_STATE/job.log``; then the provider's end action runs (power off, stop
the pod, destroy the instance). A script that finds an exit status already
written does not run the job again: container clouds restart an exited
container, and a job must never run twice by accident.

No provider account key is ever put here: the end actions use what the
provider scopes to that one machine (RunPod's pod key, Vast's per-instance
key) or need no key at all (power off).

Secrets: on a VM the values are exported by the script itself (the launch
request carries the script); on a container cloud they travel in the
container's env and the script only names them.

Checkpoint sync (a job with checkpoint_url): before the job the directory is
restored from the URL, a background loop saves it every
checkpoint_sync_seconds, and once more after the job ended (however it
ended, max_runtime included). The tool follows the URL's scheme (``s3://``:
aws, ``gs://``: gsutil, else an rclone remote) and must exist where the runner
runs: the VM host on Lambda/Verda, the job's image on RunPod/Vast. It reads
its credentials from the job's env (secrets referenced by name). Nothing is
ever deleted at the URL (``sync``/``rsync`` without delete, rclone ``copy``),
so a save after a failed restore cannot wipe the saved checkpoints.
"""

from __future__ import annotations

import base64
import gzip
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from gpucloud.errors import SpecError
from gpucloud.models import JobRun

STATE_DIR = "/var/lib/gpucloud"
CONTAINER_NAME = "gpucloud-job"
KILL_AFTER = 30  # seconds between timeout's TERM and KILL
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Names the runner itself uses; a job env of the same name would break it.
_RESERVED = {"GC_STATE", "GC_LIMIT", "GC_RETRIES", "GC_DEADLINE", "GC_LEFT", "GC_TRY",
             "GC_SYNC", "GC_SYNCER", "GPUCLOUD_STATE_DIR", "PATH"}
SYNC_SECONDS = 600  # checkpoint save interval when the job file gives none


@dataclass(frozen=True)
class EndAction:
    """What a machine does once its job ended. ``hold`` keeps a container's main
    process alive when the action could not end it, so that the cloud does not
    restart the container (the reaper ends it at the deadline)."""

    description: str
    shell: str
    hold: bool = False
    imports: tuple[str, ...] = ()  # variables the action reads, from PID 1 if unset


POWER_OFF = EndAction(
    "powers the machine off",
    "sync\nshutdown -h now || poweroff")
# RunPod's docs: runpodctl comes with a pod-scoped key; the older verb-first
# syntax is the one seen to work [obs], the newer one is the fallback.
RUNPOD_STOP = EndAction(
    "stops this pod with the pod-scoped key RunPod injects",
    'runpodctl stop pod "$RUNPOD_POD_ID" || runpodctl pod stop "$RUNPOD_POD_ID"',
    hold=True, imports=("RUNPOD_POD_ID", "RUNPOD_API_KEY"))
# Destroy, never stop: a stopped Vast instance still bills its disk.
VAST_DESTROY = EndAction(
    "destroys this instance with the per-instance key Vast injects",
    'gc_url="https://console.vast.ai/api/v0/instances/$CONTAINER_ID/"\n'
    'if command -v curl >/dev/null 2>&1; then\n'
    '  curl -fsS -X DELETE -H "Authorization: Bearer $CONTAINER_API_KEY" "$gc_url"\n'
    'else\n'
    '  python3 -c \'import os,sys,urllib.request as u; u.urlopen(u.Request(sys.argv[1], '
    'method="DELETE", headers={"Authorization": "Bearer " + os.environ["CONTAINER_API_KEY"]}), '
    'timeout=30)\' "$gc_url"\n'
    'fi',
    imports=("CONTAINER_ID", "CONTAINER_API_KEY"))


def checked_env(job: JobRun) -> None:
    for name in [*job.env, *job.secret_env]:
        if not _ENV_NAME.fullmatch(name) or name in _RESERVED:
            raise SpecError(f"job {job.name!r}: {name!r} cannot be an environment variable name",
                            hint="use letters, digits and '_', not starting with a digit")


def job_env(job: JobRun) -> dict[str, str]:
    """The job's plain env plus what gpucloud adds (never the secrets)."""
    env = dict(job.env)
    if job.checkpoint_dir:
        env["CHECKPOINT_DIR"] = job.checkpoint_dir
    if job.checkpoint_url:
        env["CHECKPOINT_URL"] = job.checkpoint_url
    return env


def container_env(job: JobRun) -> dict[str, str]:
    """Everything the container's env must hold, secrets' values included: only
    for the launch request of a container cloud."""
    checked_env(job)
    env = job_env(job)
    env.update({k: v.get_secret_value() for k, v in job.secret_env.items()})
    return env


def secret_values(job: JobRun) -> list[str]:
    """The values a request must be marked with (base.SECRETS_EXTENSION)."""
    return [v.get_secret_value() for v in job.secret_env.values() if v.get_secret_value()]


def vm_script(job: JobRun, end: EndAction = POWER_OFF,
              mounts: Sequence[tuple[str, str]] = (), setup: Sequence[str] = ()) -> str:
    """A VM's start-up script: the job's container with all GPUs, then ``end``.
    ``mounts``: (host path, container path) pairs bound into the container, for
    network volumes mounted on the host; ``setup``: shell lines run first (where
    the host must mount them itself)."""
    checked_env(job)
    env = job_env(job)
    exports = [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    # Secrets are exported here and handed to docker by name only (-e NAME), so
    # that no value shows in the process list.
    exports += [f"export {k}={shlex.quote(v.get_secret_value())}"
                for k, v in job.secret_env.items()]
    exports += setup
    argv = ["docker", "run", "--rm", "--name", CONTAINER_NAME, "--gpus", "all"]
    for name in [*env, *job.secret_env]:
        argv += ["-e", name]
    if job.checkpoint_dir:
        argv += ["-v", f"{job.checkpoint_dir}:{job.checkpoint_dir}"]
    for host, inside in mounts:
        argv += ["-v", f"{host}:{inside}"]
    if job.nodes > 1:
        # The nodes reach each other at the machines' own addresses and ports
        # (MASTER_ADDR:MASTER_PORT, NCCL's sockets): the host's network, not
        # docker's private bridge.
        argv += ["--network", "host"]
    if job.command:
        argv += ["--entrypoint", job.command[0], job.image, *job.command[1:], *job.args]
    else:
        argv += [job.image, *job.args]
    cleanup = f"docker rm -f {CONTAINER_NAME} >/dev/null 2>&1"  # timeout killed the client only
    return _runner(job, exports, argv, end, cleanup, "runs the job's container (docker run)")


def container_script(job: JobRun, end: EndAction, provider: str) -> str:
    """A container cloud's wrapper: the job's command in this container, then ``end``."""
    checked_env(job)
    if not job.command:
        raise SpecError(
            f"job {job.name!r}: {provider} runs the job inside its container, where the "
            "image's own entrypoint cannot be seen; give the job a command",
            hint="set command (e.g. [\"python\", \"train.py\"]) in the job file")
    imports = [*end.imports, *job_env(job), *job.secret_env]
    prelude = [f"gc_import {' '.join(dict.fromkeys(imports))}"] if imports else []
    return _runner(job, prelude, [*job.command, *job.args], end, None,
                   "runs the job's command in this container")


def sync_commands(url: str) -> tuple[str, str, str]:
    """(tool, restore, save) shell for a checkpoint URL, by its scheme; both
    commands read $CHECKPOINT_DIR and $CHECKPOINT_URL."""
    here, there = '"$CHECKPOINT_DIR"', '"$CHECKPOINT_URL"'
    if url.startswith("s3://"):
        cmd = "aws s3 sync --only-show-errors"
        return "aws", f"{cmd} {there} {here}", f"{cmd} {here} {there}"
    if url.startswith("gs://"):
        cmd = "gsutil -m -q rsync -r"
        return "gsutil", f"{cmd} {there} {here}", f"{cmd} {here} {there}"
    if ":" not in url:
        raise SpecError(f"checkpoint url {url!r} names no object storage",
                        hint="use s3://bucket/path, gs://bucket/path or an rclone remote:path")
    # copy, not sync: rclone sync would delete what the directory lacks.
    return "rclone", f"rclone copy {there} {here}", f"rclone copy {here} {there}"


def sync_shell(job: JobRun, log: str = '"$GC_STATE/job.log"') -> str:
    """gc_ckpt restore|save and gc_syncer: the checkpoint sync functions (shared
    with the Kubernetes Job's restore and sync containers), writing to ``log``."""
    tool, restore, save = sync_commands(job.checkpoint_url or "")
    every = job.checkpoint_sync_seconds or SYNC_SECONDS
    return f"""GC_SYNC={every}
gc_ckpt() {{
  if ! command -v {tool} >/dev/null 2>&1; then
    echo "gpucloud: checkpoint $1 skipped: {tool} is not installed where the job runs" \
      "(needed for $CHECKPOINT_URL)" >>{log}
    return 1
  fi
  echo "gpucloud: checkpoint $1 ($CHECKPOINT_URL)" >>{log}
  if [ "$1" = restore ]; then {restore} >>{log} 2>&1
  else {save} >>{log} 2>&1; fi
  gc_rc=$?
  [ "$gc_rc" -eq 0 ] || echo "gpucloud: checkpoint $1 failed with status $gc_rc" >>{log}
  return "$gc_rc"
}}
gc_syncer() {{
  # TERM waits for a save in progress, then saves no more (the runner's final
  # save follows): two saves never overlap.
  trap 'kill "$gc_nap" 2>/dev/null; exit 0' TERM
  while :; do
    sleep "$GC_SYNC" & gc_nap=$!
    wait "$gc_nap"
    gc_ckpt save
  done
}}"""


def compressed(script: str) -> str:
    """A script as one line that unpacks and runs it (gzip+base64, Vast's advice
    for onstart scripts over its length limit)."""
    packed = base64.b64encode(gzip.compress(script.encode(), mtime=0)).decode()
    return f"echo {packed} | base64 -d | gunzip | sh\n"


_IMPORT = r'''gc_import() {
  for gc_n in "$@"; do
    eval "gc_v=\${$gc_n:-}"
    if [ -z "$gc_v" ] && [ -r /proc/1/environ ]; then
      gc_v=$(tr '\0' '\n' </proc/1/environ | sed -n "s/^$gc_n=//p" | head -n 1)
      [ -n "$gc_v" ] && export "$gc_n=$gc_v"
    fi
  done
}
'''


def _runner(job: JobRun, prelude: list[str], argv: list[str], end: EndAction,
            cleanup: str | None, what: str) -> str:
    limit = job.max_runtime_seconds
    command = " ".join(shlex.quote(a) for a in argv)
    hold = "while :; do sleep 3600; done\n" if end.hold else ""
    lines = [
        "#!/bin/sh",
        f"# gpucloud job runner for {job.name!r}: {what} under max_runtime,",
        f"# records its exit status, then {end.description}.",
        "# No provider account key is on this machine.",
        'GC_STATE="${GPUCLOUD_STATE_DIR:-' + STATE_DIR + '}"',
        'mkdir -p "$GC_STATE"',
        *([_IMPORT.rstrip("\n")] if any(p.startswith("gc_import") for p in prelude) else []),
        # Before the restart check: the end action may need what they set.
        *prelude,
        "gc_end() {",
        end.shell,
        "}",
        'if [ -f "$GC_STATE/exit-status" ]; then',
        "  # Started again after the job ended: never run it twice.",
        '  gc_end\n  ' + (hold or "exit 0\n").rstrip("\n"),
        "fi",
    ]
    syncing = bool(job.checkpoint_dir and job.checkpoint_url)
    if job.checkpoint_dir:
        lines.append('mkdir -p "$CHECKPOINT_DIR"')
    if syncing:
        # No stdio for the syncer: a sleep it leaves behind must not hold the
        # caller's output open (its saves write to the job log anyway).
        lines += [sync_shell(job), "gc_ckpt restore", "gc_syncer </dev/null >/dev/null 2>&1 &",
                  "GC_SYNCER=$!"]
    lines += [
        f"GC_LIMIT={limit if limit else ''}",
        f"GC_RETRIES={job.retries}",
        'if [ -n "$GC_LIMIT" ]; then GC_DEADLINE=$(( $(date +%s) + GC_LIMIT )); fi',
        "GC_TRY=0",
        "while :; do",
        "  set --",
        '  if [ -n "$GC_LIMIT" ]; then',
        '    GC_LEFT=$(( GC_DEADLINE - $(date +%s) ))',
        '    if [ "$GC_LEFT" -le 0 ]; then status=124; break; fi',
        '    if command -v timeout >/dev/null 2>&1; then '
        f'set -- timeout -k {KILL_AFTER} "$GC_LEFT"; '
        'else echo "gpucloud: no timeout command, max_runtime is left to the reaper" '
        '>>"$GC_STATE/job.log"; fi',
        "  fi",
        '  echo running >"$GC_STATE/status"',
        f'  "$@" {command} >>"$GC_STATE/job.log" 2>&1',
        "  status=$?",
        *([f"  {cleanup}"] if cleanup else []),
        '  if [ "$status" -eq 0 ] || [ "$status" -eq 124 ] || [ "$GC_TRY" -ge "$GC_RETRIES" ]; '
        "then break; fi",
        "  GC_TRY=$((GC_TRY + 1))",
        "done",
        'echo "$status" >"$GC_STATE/exit-status"',
        *(['kill "$GC_SYNCER" 2>/dev/null', 'wait "$GC_SYNCER"', "gc_ckpt save"]
          if syncing else []),
        'echo ended >"$GC_STATE/status"',
        'echo "gpucloud: the job ended with status $status" >>"$GC_STATE/job.log"',
        "gc_end",
    ]
    return "\n".join(lines) + "\n" + hold


__all__ = ["EndAction", "POWER_OFF", "RUNPOD_STOP", "STATE_DIR", "VAST_DESTROY", "compressed",
           "container_env", "container_script", "job_env", "secret_values", "sync_commands",
           "sync_shell", "vm_script"]
