"""What the host gives a load model: its busy CPU time and the cores a process may use
(``docs/whatif.md``, what the traces carry)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["HOST_CPUS", "host_cpu_busy_ns", "host_cpus", "record_client_load"]

_TICK_NS = 1_000_000_000 // (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def host_cpu_busy_ns() -> int | None:
    """The host's CPU time spent busy since boot, all cores together (``/proc/stat``:
    user, nice, system, irq, softirq and steal; not idle or iowait), or None where the
    system does not tell. Its resolution is the kernel's tick (10 ms)."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 8 or fields[0] != b"cpu":
        return None
    try:
        ticks = [int(x) for x in fields[1:]]
    except ValueError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = ticks[:7]
    steal = ticks[7] if len(ticks) > 7 else 0
    return (user + nice + system + irq + softirq + steal) * _TICK_NS


def host_cpus() -> float:
    """The cores this process may use: its CPU affinity, capped by a cgroup v2 quota
    (``cpu.max``) when one is set."""
    try:
        cores: float = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        cores = float(os.cpu_count() or 1)
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, int(quota) / int(period))
    except (OSError, ValueError):
        pass
    return cores


HOST_CPUS = host_cpus()


def record_client_load(span: Any, cpu_at_start_ns: int) -> None:
    """On a load client's request span (``hoptrace bench``, the demo's client): this
    process's CPU over it and in all, and the host's busy CPU and cores; never raises."""
    from tracer import attributes as attrs
    from tracer.instrument.load import set_process_cpu

    set_process_cpu(span, cpu_at_start_ns)
    busy = host_cpu_busy_ns()
    if busy is not None:
        try:
            span.set_attributes({attrs.HOST_CPU_BUSY: busy, attrs.HOST_CPUS: HOST_CPUS})
        except Exception:  # telemetry never breaks the app
            pass
