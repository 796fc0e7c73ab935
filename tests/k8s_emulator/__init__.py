"""An in-process Kubernetes API server emulator for tests: real HTTP on
127.0.0.1, bearer-token auth with expiry, meta/v1 Status errors, a scheduler
that counts nvidia.com/gpu, a kubelet with simulated delays, batch/v1 Jobs
with backoff, deadlines and propagation policies, TokenRequest, and the
``pods/exec`` subresource over a real WebSocket upgrade (execs.py: a few
commands answered deterministically; websocket.py: the RFC 6455 server side),
and list chunking with `limit`/`continue` and expiring tokens (chunks.py),
Indexed Jobs (jobs.py), headless Services and PersistentVolumeClaims
(services.py), coordination.k8s.io/v1 Leases with resourceVersion conflicts
(leases.py), and the garbage collector for what a Job owns.

It serves only the paths gpucloud's Kubernetes adapter uses; see
tests/unit/test_k8s_emulator.py for what it is proven to do.

Not emulated (not used by gpucloud): watch, consistent snapshots across list
pages (chunks.py), JSON patch, server-side apply, taints and tolerations, in-place container
restarts (restartPolicy OnFailure behaves as Never: the Job makes a new pod),
volume binding in the scheduler (a pod naming a missing claim is still placed),
Service endpoints and DNS (env's fieldRefs are resolved by pods.container_env).
"""

from .cluster import Cluster, FakeClock, Knobs, gpu_node
from .kubeconfig import EXEC_PLUGIN, exec_entry, write_kubeconfig
from .objects import ApiError
from .server import KubeEmulator

__all__ = ["ApiError", "Cluster", "EXEC_PLUGIN", "FakeClock", "KubeEmulator", "Knobs",
           "exec_entry", "gpu_node", "write_kubeconfig"]
