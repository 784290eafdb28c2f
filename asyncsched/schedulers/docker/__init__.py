"""Private building blocks of :mod:`asyncsched.schedulers.docker_scheduler`.

Pure modules (``render``, ``state``, ``workspace`` tar building) import no
Docker client; the I/O modules (``client``, ``events``, ``logs``, ``errors``)
import aiodocker and are only loaded through ``docker_scheduler``.
"""

from __future__ import annotations
