"""Sphinx configuration of lucid's API reference (`make docs`).

The build is offline: nothing is fetched (no intersphinx), and the Swift and C pages are written
from their sources by tools/gen_api_docs.py each time this file is read, so they cannot drift.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The checkout's lucid, whatever else the environment has installed.
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import gen_api_docs  # noqa: E402
import lucid  # noqa: E402

# Where the generated pages go: beside the HTML, never into the source tree.
GENERATED = ROOT / "build" / "docs" / "generated"
gen_api_docs.write_pages(GENERATED)

project = "lucid"
author = "the lucid authors"
copyright = "the lucid authors"
release = version = lucid.__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]

# Docstrings are prose, some with NumPy-style sections (Parameters, Returns, Raises, Examples).
napoleon_google_docstring = False
napoleon_numpy_docstring = True

# Signatures as written (`x: Tensor | None`), members in source order, nothing private.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}
add_module_names = False

# Docstrings write ``code`` explicitly; a single-backquoted span is a reference to a Python name.
default_role = "py:obj"

exclude_patterns = []
templates_path = []
html_theme = "alabaster"
html_static_path = []
html_title = f"lucid {release}"
html_theme_options = {
    "description": "Deep learning on Apple Silicon with a Swift engine",
    "fixed_sidebar": True,
    "show_relbar_bottom": True,
}
