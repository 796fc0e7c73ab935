#!/usr/bin/env python3
"""Exec credential plugin for kubeconfig `users[].user.exec` (client.authentication.k8s.io/v1).

Asks the emulator's admin endpoint for a fresh short-lived token and prints an
ExecCredential with status.token and status.expirationTimestamp, as cloud CLIs
(`aws eks get-token`, `gke-gcloud-auth-plugin`) do. Standard library only.

Environment (set through the kubeconfig exec entry's `env`):
  KEMU_URL        the emulator's URL
  KEMU_ADMIN_KEY  the emulator's admin key
  KEMU_TTL        token lifetime in seconds (optional; the emulator's exec_ttl otherwise)
  KEMU_CA_FILE    CA bundle when the emulator serves TLS (optional)
  KEMU_CALLS      a file this plugin appends one line to per run (optional)
"""

import json
import os
import ssl
import sys
import urllib.request


def main() -> int:
    info = os.environ.get("KUBERNETES_EXEC_INFO")
    if info:  # the client says which API version it speaks; only v1 is served here
        version = json.loads(info).get("apiVersion")
        if version != "client.authentication.k8s.io/v1":
            print(f"exec plugin: unsupported apiVersion {version}", file=sys.stderr)
            return 1
    body: dict[str, object] = {"user": "exec-user"}
    if os.environ.get("KEMU_TTL"):
        body["ttl"] = float(os.environ["KEMU_TTL"])
    request = urllib.request.Request(
        os.environ["KEMU_URL"].rstrip("/") + "/_emulator/tokens",
        data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json",
                 "X-Emulator-Admin": os.environ["KEMU_ADMIN_KEY"]})
    context = None
    if os.environ.get("KEMU_CA_FILE"):
        context = ssl.create_default_context(cafile=os.environ["KEMU_CA_FILE"])
    with urllib.request.urlopen(request, timeout=10, context=context) as reply:
        token = json.load(reply)
    if os.environ.get("KEMU_CALLS"):
        with open(os.environ["KEMU_CALLS"], "a", encoding="utf-8") as calls:
            calls.write(token["expirationTimestamp"] + "\n")
    json.dump({"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1",
               "spec": {"interactive": False},
               "status": {"token": token["token"],
                          "expirationTimestamp": token["expirationTimestamp"]}}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
