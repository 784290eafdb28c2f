"""The README's main-job command runs: its script, as the README invokes it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()


def _main_job_script() -> Path:
    """The script the README's first shell block runs with ``.venv/bin/python``."""
    first_sh = re.search(r"```sh\n(.*?)```", README, flags=re.DOTALL)
    assert first_sh is not None, "the README has no ```sh block"
    script = re.search(r"\.venv/bin/python (\S+)", first_sh.group(1))
    assert script is not None, f"no `.venv/bin/python SCRIPT` in {first_sh.group(1)!r}"
    return ROOT / script.group(1)


def test_readme_main_job_runs_every_replica_to_success(tmp_path: Path) -> None:
    script = _main_job_script()
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "ASYNCSCHED_STATE_DIR": str(tmp_path)},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    handle = re.search(r"^submitted (local_cwd://quickstart/(\S+))$", out, re.MULTILINE)
    assert handle is not None, out
    partials = {}
    for rank in range(3):
        ids = f"worker/{rank} replica {rank}/3 of {handle.group(2)} (job {handle.group(1)})"
        assert ids in out.splitlines()
        part = re.search(
            rf"^worker/{rank} partial sum of squares: (\d+)$", out, re.MULTILINE
        )
        assert part is not None, out
        partials[rank] = int(part.group(1))
    n = 1_000_000  # the replicas' slices add up to the sum of squares below n
    assert sum(partials.values()) == (n - 1) * n * (2 * n - 1) // 6
    assert out.rstrip().endswith("final state: SUCCEEDED")
