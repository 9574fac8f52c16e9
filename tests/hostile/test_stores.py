"""A damaged or read-only store gets one clear line in every command; the analysis
opens stores read-only, so a store in a read-only folder is read; the collector
refuses to start on a store it cannot write."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from collector import SpanStore
from tests.conftest import free_port
from tests.helpers import hoptrace, skip_or_fail
from tracer.spans.model import Span

T0 = 1_700_000_000_000_000_000


def _spans(n_traces: int) -> list[Span]:
    return [
        Span(
            f"{t:032x}", f"{i + 1:016x}", None if i == 0 else f"{1:016x}", "svc", f"op{i}", 2,
            T0 + t * 10_000, T0 + t * 10_000 + 5_000, attributes={"pad": "v" * 50},
        )
        for t in range(1, n_traces + 1)
        for i in range(3)
    ]  # fmt: skip


def _store(path: Path, n_traces: int = 1000) -> Path:
    with SpanStore(path, create=True) as store:
        store.write(_spans(n_traces))
    return path


@contextmanager
def _read_only(path: Path) -> Iterator[None]:
    """``path`` (a file or a folder) cannot be written, for root too (chattr +i)."""
    if os.geteuid() == 0:
        chattr = shutil.which("chattr")
        if chattr is None or subprocess.run([chattr, "+i", str(path)]).returncode:
            skip_or_fail("running as root, and chattr +i does not work here")
        try:
            yield
        finally:
            subprocess.run([chattr, "-i", str(path)], check=True)  # type: ignore[list-item]
    else:
        mode = path.stat().st_mode
        path.chmod(mode & ~0o222)
        try:
            yield
        finally:
            path.chmod(mode)


def _scramble_last_page(path: Path, share: float = 1.0) -> None:
    """Random bytes over the last page of ``path`` (its last ``share`` of it)."""
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(16)  # the page size, in the file's header
        page = int.from_bytes(fh.read(2), "big")
        page = int((65536 if page == 1 else page) * share)
        fh.seek(size - page)
        fh.write(os.urandom(page))


@pytest.mark.parametrize("share", [1.0, 0.25])
@pytest.mark.parametrize(
    "command",
    [["analyze"], ["whatif", "--stage", "other", "--speedup", "2"], ["report", "-o", "r.html"]],
)
def test_a_store_with_a_scrambled_late_page_gets_one_clear_line(tmp_path: Path, command, share):
    store = _store(tmp_path / "spans.db")
    _scramble_last_page(store, share)  # a quarter: found by the read, not on opening
    result = hoptrace(*command, str(store), cwd=tmp_path)
    assert result.returncode == 2
    assert "is damaged" in result.stderr and ".recover" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_the_collector_refuses_to_start_on_a_damaged_store(tmp_path: Path):
    store = _store(tmp_path / "spans.db")
    _scramble_last_page(store)
    result = hoptrace("collect", "--store", str(store), "--port", str(free_port()), timeout=30)
    assert result.returncode == 2
    assert "is damaged" in result.stderr and "Traceback" not in result.stderr


def test_a_store_in_a_read_only_folder_is_analysed(tmp_path: Path):
    folder = tmp_path / "ro"
    folder.mkdir()
    store = _store(folder / "spans.db", 20)
    with _read_only(folder):
        result = hoptrace("analyze", str(store), "--format", "json")
        assert sorted(p.name for p in folder.iterdir()) == ["spans.db"]  # nothing written
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["traces"] == 20


def test_a_store_being_written_is_analysed_read_only_beside_its_writer(tmp_path: Path):
    store = tmp_path / "spans.db"
    with SpanStore(store, create=True) as writer:
        writer.write(_spans(10))
        mtime = store.stat().st_mtime_ns
        result = hoptrace("analyze", str(store))
        assert result.returncode == 0, result.stderr
        writer.write(_spans(12)[30:])  # the writer goes on after the reader
        assert writer.count() == 36
    assert store.stat().st_mtime_ns >= mtime


def test_the_collector_refuses_to_start_on_a_store_it_cannot_write(tmp_path: Path):
    store = _store(tmp_path / "spans.db", 5)
    with _read_only(store):
        result = hoptrace("collect", "--store", str(store), "--port", str(free_port()), timeout=30)
    assert result.returncode == 2
    assert "cannot write the span store" in result.stderr
    assert "Traceback" not in result.stderr
