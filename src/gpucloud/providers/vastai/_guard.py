"""The self-guard Vast machines carry: an ``onstart`` script that destroys the
instance once its deadline plus a grace period has passed.

Why Vast only (docs/deadlines.md, "Who enforces a deadline, per provider"): Vast injects a
per-instance key (``CONTAINER_API_KEY``, with ``CONTAINER_ID``) into every
container, documented for calling the API "from inside the container"
(vast-ai/docs guides/instances/docker-environment.mdx), so no account key goes
onto the machine; and the guard re-reads the label before acting, so an
``extend`` from any other machine is honoured. It destroys, never stops: a
stopped Vast instance still bills its disk.

Not verified live: which calls the per-instance key may make (the docs show
show/stop/destroy of that instance), and that ``onstart`` sees the injected
variables (the guard also looks in PID 1's environment).
"""

from __future__ import annotations

from datetime import timedelta

# How long after its deadline a machine may run before its own guard ends it:
# the reaper gets the first go (it reports what it does); the guard is the
# second line for a machine nobody reaps.
GUARD_GRACE = timedelta(minutes=10)
ONSTART_MAX = 4048  # createInstance's onstart: "limited to 4048 characters"
SCRIPT_PATH = "/var/tmp/gpucloud-guard.py"
_HEREDOC = "GPUCLOUD_GUARD"

# Runs on the machine under python3 (Vast's images carry it). Double quotes
# only: it travels inside a quoted heredoc. It reads the deadline as the reaper
# does: the later of the label's "shutdown:" and GPUCLOUD_SHUTDOWN_AT. Without
# a deadline it keeps looking: an extend may give the machine one later.
GUARD_PY = '''\
import datetime as d, json, os, re, time, urllib.request as u
GRACE = %(grace)d
def env(name):
    if os.environ.get(name):
        return os.environ[name]
    try:
        with open("/proc/1/environ", "rb") as f:
            pairs = [p.split(b"=", 1) for p in f.read().split(b"\\0") if b"=" in p]
        return dict((k.decode(), v.decode()) for k, v in pairs).get(name)
    except OSError:
        return None
def when(text):
    try:
        t = d.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (AttributeError, TypeError, ValueError):
        return None
    return (t if t.tzinfo else t.replace(tzinfo=d.timezone.utc)).timestamp()
def deadline(body):
    inst = body.get("instances") if isinstance(body, dict) else None
    label = inst.get("label") if isinstance(inst, dict) else None
    m = re.match(r"gpucloud:\\S+ shutdown:(\\S+)", label if isinstance(label, str) else "")
    found = [t for t in (when(m and m.group(1)), when(env("GPUCLOUD_SHUTDOWN_AT"))) if t]
    return max(found) if found else None
def call(method):
    url = "https://console.vast.ai/api/v0/instances/%%s/" %% env("CONTAINER_ID")
    req = u.Request(url, method=method, headers={
        "Authorization": "Bearer %%s" %% env("CONTAINER_API_KEY"), "Accept": "application/json"})
    with u.urlopen(req, timeout=30) as r:
        return json.load(r)
def main(now=time.time, sleep=time.sleep):
    while True:
        try:
            due = deadline(call("GET"))
        except Exception:
            due = -1
        if due is not None and due >= 0 and now() >= due + GRACE:
            try:
                call("DELETE")
                return
            except Exception:
                pass
        if due is None:
            sleep(600)
        else:
            sleep(60 if due < 0 else max(30, min(600, due + GRACE - now())))
if __name__ == "__main__" and env("CONTAINER_API_KEY") and env("CONTAINER_ID"):
    main()
'''


def guard_script() -> str:
    """The shell lines that install and start the guard in the background."""
    code = GUARD_PY % {"grace": int(GUARD_GRACE.total_seconds())}
    return (
        "# gpucloud self-guard: destroys this instance at its deadline + "
        f"{int(GUARD_GRACE.total_seconds() // 60)} min,\n"
        "# re-reading the label first (so `gpucloud extend` is honoured), with the\n"
        "# per-instance CONTAINER_API_KEY Vast injects. No account key is on this machine.\n"
        f"cat > {SCRIPT_PATH} <<'{_HEREDOC}'\n{code}{_HEREDOC}\n"
        f"if command -v python3 >/dev/null; then nohup python3 {SCRIPT_PATH} "
        f">>{SCRIPT_PATH[:-3]}.log 2>&1 & else echo 'gpucloud: no python3, the deadline "
        "is left to the reaper' >&2; fi\n")


def onstart(existing: str | None = None) -> str:
    """The guard, then the user's own onstart (the guard goes first and in the
    background: a user script that runs in the foreground would never let it start)."""
    script = guard_script()
    if existing and existing.strip():
        script += existing if existing.endswith("\n") else existing + "\n"
    return script


__all__ = ["GUARD_GRACE", "ONSTART_MAX", "guard_script", "onstart"]
