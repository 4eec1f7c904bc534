"""The root of flexq's own errors.

Every exception flexq defines derives from :class:`FlexqError`, so a caller can catch all of them at once; a
user-facing error carries a message fit for the CLI, shown as it is.
"""

__all__ = ["FlexqError"]


class FlexqError(Exception):
    """An error of flexq's own; its message is fit for the CLI when the error is a user's to fix."""
