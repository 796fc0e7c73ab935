"""Lambda Cloud (cloud.lambda.ai), API v1: ``adapter.py`` holds the flows,
``_wire.py`` the wire format and error table."""

from gpucloud.providers.lambdalabs.adapter import LambdaProvider

__all__ = ["LambdaProvider"]
