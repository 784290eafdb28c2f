"""Private pieces of the local backend; the public module is ``local_scheduler``.

Modules: ``env`` (environment and PATH), ``gpus`` (nvidia-smi and the CUDA split),
``process`` (spawn, reap, kill, parent-death protection), ``logs`` (pipe readers,
line-time index, reading and tailing), ``records`` (on-disk app records for other
processes), ``state`` (replica/app state rules and retries) and ``supervisor``
(one running app).
"""

from __future__ import annotations
