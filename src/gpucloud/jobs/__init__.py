"""Jobs: the portable job spec, the job operations (submit, list, get, cancel,
logs), and jobs without a machine of their own in the cost ledger."""

from gpucloud.compat import forward

__getattr__ = forward(__name__)  # gpucloud.jobs was a module in 0.1.0
