"""The ssh provider's wire: the adapter's requests, carried out over OpenSSH.

The adapter stays sans-I/O like every other: it yields requests to a small
API of its own (below), and this transport answers them by running the
scripts of _remote.py on the hosts with the system `ssh` client. The
engine's policy applies unchanged: reads are retried, an allocation (kind
``launch``) is never sent twice, and a timeout after sending is resolved by
looking for the launch id.

    GET  /hosts                   every host's lock, read at once: {"hosts": [host]}
    GET  /hosts/{name}            host: {"name", "state": "free"|"locked", "info"}
    POST /hosts/{name}/allocate   {info}: 200 host + {"gpus", "smi_exit"}; 409 held
    POST /hosts/{name}/release    {"launch_id"?, "deadline"?}: 200; 409 other/moved
    PUT  /hosts/{name}/deadline   {"launch_id", "deadline"}: 200 host; 409 other
    POST /hosts/{name}/job        {"launch_id", "script"}: 200; 409 other
    errors: {"error": {"code", "message", "hint"}}: 401 auth_failed, 403 host_key,
            503 unreachable (ssh's exit 255, with its own words), 404 unknown host

In `GET /hosts` a host that cannot be read is {"state": "unreachable",
"error": {...}}, so that one switched-off host never hides the others.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from gpucloud.errors import ConfigurationError
from gpucloud.providers.ssh import _remote
from gpucloud.providers.ssh._settings import Host

CONNECT_TIMEOUT = 15  # seconds; a host that does not answer fails fast
COMMAND_TIMEOUT = 90.0  # a release may wait 20 s for a job to end
SSH_FAILED = 255  # ssh(1) exits 255 on its own errors
_REFUSED = re.compile(r"Permission denied|Too many authentication failures|"
                      r"no mutual signature|Authentication failed", re.IGNORECASE)
_HOST_KEY = re.compile(r"Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED")
_ROUTE = re.compile(r"^/hosts(?:/([^/]+)(?:/(allocate|release|deadline|job))?)?$")

Runner = Callable[[list[str], "str | None", float], "subprocess.CompletedProcess[str]"]


def host_key_alias(name: str) -> str:
    """The known_hosts name of a host: the one `gpucloud ssh ssh/NAME` uses too
    (machine/ssh.py: gpucloud-<provider>-<id>)."""
    return f"gpucloud-ssh-{name}"


def ssh_argv(host: Host, command: str, binary: str = "ssh") -> list[str]:
    """The OpenSSH command line for `command` on `host`: the same options as
    machine/ssh.py's ssh_args (never prompt, accept a new host key once and
    hold it under the host's alias, ssh's own notices off stderr), with the
    configured key."""
    args = [binary]
    if host.port != 22:
        args += ["-p", str(host.port)]
    if host.identity:
        args += ["-i", host.identity.replace("%", "%%"), "-o", "IdentitiesOnly=yes"]
    args += ["-o", "StrictHostKeyChecking=accept-new",
             "-o", f"HostKeyAlias={host_key_alias(host.name)}",
             "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
             "-o", "LogLevel=ERROR", f"{host.user}@{host.host}", "--", command]
    return args


def run_subprocess(argv: list[str], stdin: str | None,
                   timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, input=stdin, stdin=None if stdin is not None else
                          subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                          check=False, errors="replace")


def message_line(stderr: str, stdout: str = "") -> str:
    """The first line that says something (OpenSSH frames its loudest errors in
    lines of '@')."""
    for line in (stderr or stdout).splitlines():
        words = line.strip().strip("@").strip()
        if words and not words.startswith("Warning: Permanently added"):
            return words[:300]
    return "no message"


def _error(status: int, code: str, message: str, hint: str | None = None) -> httpx.Response:
    return httpx.Response(status, json={"error": {"code": code, "message": message,
                                                   "hint": hint}})


def ssh_failure(host: Host, stderr: str) -> httpx.Response:
    """ssh's own failure (exit 255) as an error reply, in ssh's words."""
    line = f"{host.name} ({host.user}@{host.host}:{host.port}): {message_line(stderr)}"
    if _REFUSED.search(stderr):
        return _error(401, "auth_failed", line,
                      f"the host refused the login: check user and identity of host "
                      f"{host.name!r} in config.toml [[providers.ssh.hosts]], and that its "
                      "public key is in the host's ~/.ssh/authorized_keys")
    if _HOST_KEY.search(stderr):
        return _error(403, "host_key", line,
                      f"the host's key is not the one recorded for it: if the machine was "
                      f"reinstalled, `ssh-keygen -R {host_key_alias(host.name)}` forgets the "
                      "old key")
    return _error(503, "unreachable", line,
                  f"is {host.host} up and its sshd listening on port {host.port}? "
                  f"`ssh -p {host.port} {host.user}@{host.host}` shows ssh's own messages")


class SshTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Answers the adapter's requests by running commands on the hosts."""

    def __init__(self, hosts: Sequence[Host], run: Runner | None = None) -> None:
        self.hosts = {h.name: h for h in hosts}
        self._run = run or run_subprocess
        self._binary: str | None = None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        return self.answer(request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        import asyncio  # the async path only

        await request.aread()
        response: httpx.Response = await asyncio.to_thread(self.answer, request)
        return response

    # -- the API --------------------------------------------------------------------

    def answer(self, request: httpx.Request) -> httpx.Response:
        match = _ROUTE.match(request.url.path)
        if match is None:
            return _error(404, "no_route", f"no such path {request.url.path}")
        name, action = match.group(1), match.group(2)
        if name is None:
            return self._all(request)
        host = self.hosts.get(name)
        if host is None:
            return _error(404, "unknown_host", f"no host named {name!r} in config.toml",
                          "the hosts are listed in config.toml [[providers.ssh.hosts]]")
        body: dict[str, Any] = json.loads(request.content or b"{}")
        if action is None:
            return self._host_reply(host, self._ssh(request, host, _remote.read(host.dir)))
        if action == "allocate":
            return self._allocate(request, host, body)
        if action == "release":
            done = self._ssh(request, host, _remote.release(
                host.dir, body.get("launch_id"), body.get("deadline")))
            return self._host_reply(host, done)
        if action == "deadline":
            done = self._ssh(request, host, _remote.set_deadline(
                host.dir, str(body["launch_id"]), str(body["deadline"])))
            return self._host_reply(host, done)
        done = self._ssh(request, host, _remote.start_job(host.dir, str(body["launch_id"])),
                         stdin=str(body["script"]))
        return self._host_reply(host, done)

    def _all(self, request: httpx.Request) -> httpx.Response:
        from concurrent.futures import ThreadPoolExecutor

        hosts = list(self.hosts.values())

        def one(host: Host) -> dict[str, Any]:
            reply = self._host_reply(host, self._ssh(request, host, _remote.read(host.dir)))
            body = reply.json()
            if reply.is_error:
                return {"name": host.name, "state": "unreachable", "status": reply.status_code,
                        **body}
            return dict(body)

        if not hosts:
            return httpx.Response(200, json={"hosts": []})
        with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
            return httpx.Response(200, json={"hosts": list(pool.map(one, hosts))})

    def _allocate(self, request: httpx.Request, host: Host, body: dict[str, Any]
                  ) -> httpx.Response:
        done = self._ssh(request, host, _remote.allocate(host.dir, body))
        if isinstance(done, httpx.Response):
            return done
        state, info = _remote.parse_info(done.stdout)
        if done.returncode == _remote.HELD:
            return httpx.Response(409, json={"error": {
                "code": "held", "message": f"{host.name} is allocated"}, "info": info})
        if done.returncode != 0 or state != "locked":
            return _error(500, "failed", f"{host.name}: {message_line(done.stderr, done.stdout)}")
        gpus, _, rest = done.stdout.partition("state=locked\n")[2].rpartition(_remote.SMI_EXIT)
        smi_exit = int(rest.strip()) if rest.strip().isdigit() else None
        return httpx.Response(200, json={"name": host.name, "state": state, "info": info,
                                         "gpus": gpus, "smi_exit": smi_exit})

    def _host_reply(self, host: Host, done: subprocess.CompletedProcess[str] | httpx.Response
                    ) -> httpx.Response:
        if isinstance(done, httpx.Response):
            return done
        state, info = _remote.parse_info(done.stdout)
        if done.returncode in (_remote.OTHER, _remote.MOVED):
            return httpx.Response(409, json={"error": {
                "code": state or "other",
                "message": f"{host.name}: the allocation is no longer the one asked about"},
                "info": info})
        if done.returncode != 0 or not state:
            return _error(500, "failed", f"{host.name}: {message_line(done.stderr, done.stdout)}")
        return httpx.Response(200, json={"name": host.name, "state": state, "info": info})

    def _ssh(self, request: httpx.Request, host: Host, command: str, stdin: str | None = None
             ) -> subprocess.CompletedProcess[str] | httpx.Response:
        if self._binary is None:
            found = shutil.which("ssh")
            if found is None:
                raise ConfigurationError("no `ssh` client on this machine (OpenSSH is needed "
                                         "for the ssh provider)",
                                         hint="install OpenSSH: apt install openssh-client, "
                                              "brew install openssh")
            self._binary = found
        if host.identity and not os.path.isfile(host.identity):
            # ssh would only warn and then fail the login: say which file is missing.
            raise ConfigurationError(f"ssh host {host.name}: identity file not found: "
                                     f"{host.identity}",
                                     hint="fix identity in config.toml [[providers.ssh.hosts]] "
                                          "(the private key's path), or remove it to let ssh "
                                          "choose")
        try:
            done = self._run(ssh_argv(host, command, self._binary), stdin, COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise httpx.ReadTimeout(f"{host.name}: no answer in {COMMAND_TIMEOUT:g} s",
                                    request=request) from None
        if done.returncode == SSH_FAILED:
            return ssh_failure(host, done.stderr)
        return done


__all__ = ["SshTransport", "host_key_alias", "message_line", "ssh_argv", "ssh_failure"]
