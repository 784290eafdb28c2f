"""Building blocks every backend shares.

Backends and plugins take the general ones from :mod:`asyncsched.schedulers.kit`
(the public face of ``changes``, ``factory``, ``follow``, ``lifecycle``,
``lines``, ``replica_limits``, ``taskhost`` and ``undo``); the others serve
families of backends.

Modules: ``lines`` (linear, capped line assembly; regex filter),
``replicas`` (one role into N replica specs: macros and identity),
``identity`` (the replica identity environment variables), ``labels`` (the
``asyncsched.io/*`` label keys and a replica's identity in them), ``ids``
(unique app ids), ``taskhost`` (a task group owned by a scheduler that
contains its tasks' failures), ``lifecycle`` (``async with`` and a bounded,
shielded ``aclose``), ``changes`` (change events), ``factory`` (the keyword
arguments a registry factory passes on),
``state_dir`` (where local state lives), ``undo`` (all-or-nothing submit:
shielded, bounded undo), ``follow`` (follow a file being written),
``run_options`` (run options every backend declares the same way, e.g.
``fail_fast``), ``mounts`` (a role's mounts checked once for the container
backends). For the local Docker engine:
``docker_daemon`` (daemon address, registry credentials), ``docker_errors``
(aiodocker errors into asyncsched errors) and ``images`` (workspace image
build and push, used by the Docker and Kubernetes backends; these two need the
``docker`` extra).
"""

from __future__ import annotations

__all__: list[str] = []
