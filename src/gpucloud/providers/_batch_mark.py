"""The batch key on a machine, beside its launch id and the same way.

``Client.create_many`` gives every machine of a batch the batch's key (the one
``batch=`` / ``--batch`` names, or a fresh random one). Each provider carries
it where it carries the launch id, under these names:

    sandbox     label  gpucloud-batch
    Lambda      tag    gpucloud-batch (values up to 128 characters, the API's
                RequestedTagEntry.value; a longer key is left off)
    RunPod      env    GPUCLOUD_BATCH (a pod has no labels: its env is what
                the API gives back)
    Vast.ai     env    GPUCLOUD_BATCH (the instance label, one free-text
                string, already holds the launch id, deadline and name)
    Verda       description  ``batch=<key>`` (no labels in the create body;
                characters other than [A-Za-z0-9._-] become "_")
    Kubernetes  label  gpucloud.dev/batch when the key is a valid label value
                (63 characters of [A-Za-z0-9._-], alphanumeric at both
                ends: the API's label syntax), else annotation gpucloud.dev/batch
"""

from __future__ import annotations

import re

LABEL = "gpucloud-batch"  # sandbox labels, Lambda tags
ENV = "GPUCLOUD_BATCH"  # RunPod and Vast.ai container env
KUBERNETES = "gpucloud.dev/batch"
# Kubernetes label values: "Labels and Selectors", kubernetes.io/docs/concepts/
# overview/working-with-objects/labels/#syntax-and-character-set
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def kubernetes_label_value(key: str) -> bool:
    return _LABEL_VALUE.fullmatch(key) is not None


__all__ = ["ENV", "KUBERNETES", "LABEL", "kubernetes_label_value"]
