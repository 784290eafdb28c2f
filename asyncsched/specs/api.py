"""TorchX's ``torchx.specs.api`` module path: the same names as :mod:`asyncsched.specs`.

TorchX code often imports the app model from ``torchx.specs.api`` rather than
``torchx.specs``; after renaming ``torchx`` to ``asyncsched`` those imports
keep working. Every name here is the object :mod:`asyncsched.specs` exports
(no copies), so ``isinstance`` checks and enum comparisons agree.

Example:
    >>> from asyncsched.specs.api import AppDef, AppState, parse_app_handle
    >>> parse_app_handle("local_cwd://demo/hello-x1").app_id
    'hello-x1'
    >>> import asyncsched.specs
    >>> AppDef is asyncsched.specs.AppDef
    True
"""

from __future__ import annotations

import asyncsched.specs as _specs
from asyncsched.specs import *

__all__ = _specs.__all__
