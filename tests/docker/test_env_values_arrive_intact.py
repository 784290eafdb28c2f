"""Environment values reach a Docker replica byte for byte (real engine)."""

from __future__ import annotations

from pathlib import Path

from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppState, BindMount
from tests.local.test_env_values_arrive_intact import HOSTILE

from .helpers import sh_app


async def test_hostile_env_values_arrive_byte_for_byte(
    sched: DockerScheduler, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    script = "; ".join(f'printf "%s" "${name}" > /out/{name}' for name in HOSTILE)
    script += '; env | grep -c "^INJ=" > /out/injected || true'
    app = sh_app(
        script,
        env=HOSTILE,
        mounts=[BindMount(src_path=str(out), dst_path="/out")],
    )
    app_id = await sched.submit(app, {})
    desc = await sched.wait(app_id, timeout=60)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED, desc.msg
    for name, value in HOSTILE.items():
        assert (out / name).read_bytes() == value.encode(), name
    assert (out / "injected").read_text().strip() == "0"
