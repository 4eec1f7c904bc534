"""Sphinx configuration of flexq's docs: Markdown pages (MyST) in the Furo theme.

Built strictly (``make docs``, and ``make test``): every warning fails the build, so a link to a page or anchor
that does not exist, or a page in no table of contents, breaks it. The reference pages that hold only
``<!-- generated -->`` are written from the code while the site builds (``reference_pages.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "src"))

import reference_pages

project = "flexq"
author = "the flexq authors"
copyright = "the flexq authors"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 4
myst_enable_extensions = ["attrs_inline", "colon_fence", "deflist"]
nitpicky = True
html_theme = "furo"
html_title = "flexq"
html_static_path: list[str] = []
html_show_sourcelink = False


def setup(app: Any) -> None:
    app.connect("source-read", reference_pages.fill)
