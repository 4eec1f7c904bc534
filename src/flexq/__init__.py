"""flexq: a job queue for AI training that places every job on the first capacity that can take it.

Kueue's admission semantics, DWS queued provisioning, node pools and an emulated cloud, real execution
on Ray, and one scheduling core for real and virtual time. The guide's Kueue and KubeRay manifests are
its API; ``flexq server`` speaks the Kubernetes API so that the real kubectl works against it.
"""

from flexq.errors import FlexqError

__version__ = "0.1.0"

__all__ = ["FlexqError", "__version__"]
