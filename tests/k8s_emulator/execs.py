"""What the emulator's pods answer through ``pods/exec``. There are no
containers: ``sh -c SCRIPT`` runs a few commands deterministically, statements
separated by ``;`` or ``&&``:

* ``echo WORDS`` (``>&2`` at the end writes to stderr), ``true``, ``false``,
  ``exit N``, ``sleep S`` (real seconds: timeouts are tested with it);
* ``nvidia-smi -L``: one line per GPU the pod holds, of its node's
  ``nvidia.com/gpu.product``; a pod without GPUs has no nvidia-smi (as a
  container without the NVIDIA runtime);
* anything else: ``sh: 1: WORD: not found`` on stderr, exit 127 (dash's words).

The last frame is the error channel's meta/v1 Status, as the kubelet writes it
for v4 and v5: Success, or Failure/NonZeroExitCode with the code in
details.causes[ExitCode].
"""

from __future__ import annotations

import json
import re
import shlex
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterator

from . import websocket
from .objects import bad_request, failure

STDOUT, STDERR, ERROR = 1, 2, 3


@dataclass
class ExecRun:
    argv: list[str]
    gpus: int = 0
    product: str | None = None
    pod_uid: str = ""
    sleeps: list[float] = field(default_factory=list)

    def frames(self) -> Iterator[tuple[int, bytes]]:
        """(channel, data) as the command produces them, then the Status."""
        code, exited = 0, False
        if self.argv[:2] == ["sh", "-c"] and len(self.argv) == 3:
            script = self.argv[2]
        else:
            script = shlex.join(self.argv)
        for chain in re.split(r"\s*;\s*", script.strip()):
            for statement in re.split(r"\s*&&\s*", chain):
                if not statement:
                    continue
                code, out, exited = yield from self._one(statement)
                if exited or code != 0:
                    break
            if exited:
                break
        yield ERROR, json.dumps(status(code, self.argv)).encode()

    def _one(self, statement: str) -> Any:
        words = shlex.split(statement)
        name, args = words[0], words[1:]
        if name == "exit":
            return int(args[0]) if args else 0, b"", True
        if name in ("true", ":"):
            return 0, b"", False
        if name == "false":
            return 1, b"", False
        if name == "echo":
            to_err = args[-1:] == [">&2"]
            text = (" ".join(args[:-1] if to_err else args) + "\n").encode()
            yield (STDERR if to_err else STDOUT), text
            return 0, text, False
        if name == "sleep":
            self.sleeps.append(float(args[0]))
            time.sleep(float(args[0]))
            return 0, b"", False
        if name == "nvidia-smi" and self.gpus > 0 and args == ["-L"]:
            model = (self.product or "NVIDIA-GPU").replace("-", " ")
            lines = "".join(
                f"GPU {i}: {model} "
                f"(UUID: GPU-{uuid.uuid5(uuid.NAMESPACE_OID, f'{self.pod_uid}/{i}')})\n"
                for i in range(self.gpus))
            yield STDOUT, lines.encode()
            return 0, b"", False
        yield STDERR, f"sh: 1: {name}: not found\n".encode()
        return 127, b"", False


def status(code: int, argv: list[str]) -> dict[str, Any]:
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing command "
                       f"{argv}, exit code {code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


@dataclass
class Upgrade:
    """An accepted exec: the handshake's answer and the run behind it."""
    headers: list[tuple[str, str]]
    protocol: str
    run: ExecRun
    channels: tuple[int, ...]  # the output channels the client asked for


def upgrade(cluster: Any, ns: str, name: str, queries: dict[str, list[str]],
            headers: dict[str, str]) -> Upgrade:
    """Check an exec request as the API server does, in its order."""
    pod = cluster.pod(ns, name)
    if not websocket.is_upgrade(headers):
        raise bad_request("Upgrade request required")
    argv = queries.get("command") or []
    if not argv:
        raise bad_request("you must specify at least one command for the container")
    flags = {k: (queries.get(k) or ["false"])[-1] == "true" for k in ("stdout", "stderr", "stdin")}
    if not any(flags.values()):
        raise bad_request("you must specify at least 1 of stdin, stdout, stderr")
    containers = [c.get("name") for c in pod["spec"].get("containers") or []]
    container = (queries.get("container") or [None])[-1]
    if container is None and len(containers) > 1:
        raise bad_request(f"a container name must be specified for pod {name}, choose one of: "
                          f"[{' '.join(containers)}]")
    container = container or containers[0]
    if container not in containers:
        raise bad_request(f"container {container} is not valid for pod {name}")
    if not pod["spec"].get("nodeName"):
        raise bad_request(f"pod {name} does not have a host assigned")
    if pod["status"].get("phase") != "Running":
        raise bad_request(f"unable to upgrade connection: container not found (\"{container}\")")
    problem = websocket.handshake_problem(headers)
    if problem:
        raise bad_request(problem)
    chosen = next((p for p in websocket.offered(headers) if p in cluster.knobs.exec_protocols),
                  None)
    if chosen is None:
        raise failure(400, "BadRequest", "requested protocol(s) are not supported: "
                      f"{websocket.offered(headers)}; "
                      f"supports {list(cluster.knobs.exec_protocols)}")
    node = cluster.nodes.get(pod["spec"]["nodeName"]) or {}
    run = ExecRun(argv=argv, gpus=int(sum(_gpus(c) for c in pod["spec"]["containers"])),
                  product=(node.get("metadata", {}).get("labels") or {}).get(
                      "nvidia.com/gpu.product"), pod_uid=pod["metadata"].get("uid", ""))
    channels = tuple(ch for ch, flag in ((STDOUT, flags["stdout"]), (STDERR, flags["stderr"]))
                     if flag)
    return Upgrade(websocket.accept_headers(headers["sec-websocket-key"], chosen), chosen, run,
                   channels)


def _gpus(container: dict[str, Any]) -> int:
    limits = (container.get("resources") or {}).get("limits") or {}
    return int(str(limits.get("nvidia.com/gpu", 0)))
