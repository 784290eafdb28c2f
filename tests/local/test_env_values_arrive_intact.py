"""Environment values reach a local replica byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppDef, AppState, Role

HOSTILE = {
    "COMMA": "a,INJ=evil",
    "EQUALS": "k=v=w",
    "QUOTES": 'it\'s "quoted"',
    "DOLLAR": "$HOME ${PATH} $(id)",
    "BACKTICK": "`id`",
    "NEWLINE": "line1\nline2\n",
    "SPACES": "  lead and trail  ",
    "UNICODE": "Grüße ✓",
}


@pytest.mark.anyio
async def test_hostile_env_values_arrive_byte_for_byte(
    tmp_path: Path, anyio_backend: str
) -> None:
    out = tmp_path / "env"
    script = (
        "; ".join(f'printf "%s" "${name}" > "{out}.{name}"' for name in HOSTILE)
        + f'; env | grep -c "^INJ=" > "{out}.injected" || true'
    )
    role = Role("r", image="", entrypoint="sh", args=["-c", script], env=HOSTILE)
    async with LocalScheduler("env", state_dir=str(tmp_path / "state")) as sched:
        app_id = await sched.submit(AppDef("env", roles=[role]), {})
        desc = await sched.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    for name, value in HOSTILE.items():
        assert Path(f"{out}.{name}").read_bytes() == value.encode(), name
    assert Path(f"{out}.injected").read_text().strip() == "0"
