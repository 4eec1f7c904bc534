"""Past one machine: flexq's setup exported to real GKE (:mod:`flexq.export.bundle`).

Import ``clean`` from flexq.export.clean (the name is its module's).
"""

from flexq.export.bundle import ExportError, build, write

__all__ = [
    "ExportError",
    "build",
    "write",
]
