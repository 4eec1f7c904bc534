"""Past one machine: flexq's setup exported to real GKE (:mod:`flexq.export.bundle`), each object cleaned of what
the server added (:func:`clean`)."""

from flexq.export.bundle import ExportError, build, write
from flexq.export.cleaning import clean

__all__ = [
    "ExportError",
    "build",
    "clean",
    "write",
]
