"""The front doors: the Kubernetes API (for kubectl) and flexq's own HTTP API.

Only the parts that load no web framework are here; import create_app from flexq.server.app, serve from
flexq.server.run, Authenticator from flexq.server.authn and the port-forward session from flexq.server.portforward
(they load fastapi), and ensure_certificates from flexq.server.tls (it loads cryptography).
"""

from flexq.server.listen import ListenError, plan_listeners
from flexq.server.portforward import TUNNEL_PROTOCOL
from flexq.server.spdy import MAX_LENGTH, Data, Decoder, Encoder, GoAway, Ping, RstStream

__all__ = [
    "MAX_LENGTH",
    "TUNNEL_PROTOCOL",
    "Data",
    "Decoder",
    "Encoder",
    "GoAway",
    "ListenError",
    "Ping",
    "RstStream",
    "plan_listeners",
]
