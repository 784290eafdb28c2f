"""Shared pytest configuration: every async test runs on asyncio (pytest-asyncio, auto mode)."""

from __future__ import annotations
