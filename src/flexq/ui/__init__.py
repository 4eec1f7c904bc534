"""The web dashboard's pages, styles and scripts (``static/``), served by ``flexq server`` under ``/ui/``."""

__all__: list[str] = []
