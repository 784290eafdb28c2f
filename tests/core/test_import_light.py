from __future__ import annotations

import subprocess
import sys


def _python(code: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (nothing imported yet)."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=check
    )


def test_import_asyncsched_does_not_import_heavy_clients() -> None:
    code = (
        "import sys, asyncsched, asyncsched.specs, asyncsched.schedulers, "
        "asyncsched.schedulers.api\n"
        "heavy = [m for m in ('aiohttp', 'aiodocker', 'kubernetes_asyncio') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = _python(code).stdout.strip()
    assert out == ""


def test_public_all_is_sorted_and_resolvable() -> None:
    import asyncsched

    assert list(asyncsched.__all__) == sorted(asyncsched.__all__)
    for name in asyncsched.__all__:
        assert getattr(asyncsched, name) is not None


def test_cli_start_up_reads_no_package_metadata_and_loads_no_yaml() -> None:
    # both cost a fifth of every command's start-up; the version is read for
    # --version only, PyYAML loaded for app files, --dryrun and describe only
    code = (
        "import sys\n"
        "from asyncsched.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "slow = [m for m in ('importlib.metadata', 'yaml', 'difflib') if m in sys.modules]\n"
        "print(','.join(slow), file=sys.stderr)\n"
    )
    ran = _python(code)
    assert ran.stderr.strip() == ""
    assert "--version" in ran.stdout


def test_version_is_read_when_asked_for() -> None:
    import importlib.metadata

    import asyncsched

    assert asyncsched.__version__ == importlib.metadata.version("asyncsched")
    code = "from asyncsched.cli import main; main(['--version'])"
    ran = _python(code, check=False)
    assert (ran.returncode, ran.stdout) == (0, f"asyncsched {asyncsched.__version__}\n")
