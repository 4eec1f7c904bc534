"""The front doors: the Kubernetes API (for kubectl) and flexq's own HTTP API.

A face that imports a name when it is first used (:func:`flexq.faces.lazy_face`): most of the server loads a web
framework (fastapi) or cryptography, which a command that only talks to a server, or only reads a port plan, does
not need. The app itself, the authenticator and the port-forward session stay in their modules
(:mod:`flexq.server.app`, :mod:`flexq.server.authn`, :mod:`flexq.server.portforward`), which only the server's own
modules use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flexq.faces import lazy_face

if TYPE_CHECKING:
    from flexq.server.kueue_families import render_kueue
    from flexq.server.listen import ListenError, plan_listeners
    from flexq.server.portforward import TUNNEL_PROTOCOL
    from flexq.server.run import CapacityFile, serve
    from flexq.server.spdy import MAX_LENGTH, Data, Decoder, Encoder, GoAway, Ping, RstStream
else:
    __getattr__, __dir__ = lazy_face(__name__, __file__)

__all__ = [
    "MAX_LENGTH",
    "TUNNEL_PROTOCOL",
    "CapacityFile",
    "Data",
    "Decoder",
    "Encoder",
    "GoAway",
    "ListenError",
    "Ping",
    "RstStream",
    "plan_listeners",
    "render_kueue",
    "serve",
]
