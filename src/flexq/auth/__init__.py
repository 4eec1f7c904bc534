"""Who may do what: bearer tokens for the guide's two roles, and the rules each role is held to.

The guide has a cluster administrator (clusters, node pools, flavors, ClusterQueues, cohorts, admission
checks) and AI developers (jobs and ConfigMaps in their namespace, read access to the queues). A token
names one of them; :func:`authorize` answers for a request's attributes as Kubernetes' RBAC would.
"""

from flexq.auth.identity import ANONYMOUS, Identity, Role
from flexq.auth.rbac import PUBLIC_PATHS, Attributes, authorize, forbidden_message, rules_in
from flexq.auth.requests import request_attributes, resource_path
from flexq.auth.tokens import TokenBook, TokenError, TokenInfo, TokensUnwritable, UnknownToken, read_token

__all__ = [
    "ANONYMOUS",
    "PUBLIC_PATHS",
    "Attributes",
    "Identity",
    "Role",
    "TokenBook",
    "TokenError",
    "TokenInfo",
    "TokensUnwritable",
    "UnknownToken",
    "authorize",
    "forbidden_message",
    "read_token",
    "request_attributes",
    "resource_path",
    "rules_in",
]
