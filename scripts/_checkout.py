"""Imported first by every script: this checkout's ``mbrl`` and ``flows`` ahead of installed
ones, so that a second checkout (a clone, a ``git worktree``) beside an editable install of
another runs its own code. The root goes in just before site-packages, not first: a stray
``random.py`` in it cannot shadow the standard library."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    _site = (i for i, p in enumerate(sys.path) if os.path.basename(p).endswith("-packages"))
    sys.path.insert(next(_site, len(sys.path)), ROOT)
