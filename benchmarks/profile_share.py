"""Where the CPU that tracing adds goes, from the py-spy profiles of ``service_cpu.py``.

``benchmarks/service_cpu.py --py-spy DIR`` records each service of the traced and the
untraced chain during one run (``DIR/traced/<service>.txt``, ``DIR/untraced/...``; raw
collapsed stacks, ``--gil``, 500 samples a second). Each sample is charged to the
deepest frame of a package (anything under ``site-packages`` or this checkout; the
standard library's frames are charged to the package that called them), grouped as
``opentelemetry/sdk``, ``opentelemetry/instrumentation/asgi``, ``tracer``, ``h11``...
Printed per service and package: milliseconds of GIL-holding CPU per request traced
and untraced, and the difference (what tracing added there).

    python benchmarks/profile_share.py DIR [--requests 300] [--rate 500] [--top 12]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_FRAME = re.compile(r"(.+?) \((.*?):\d+\)$")


def owner(path: str) -> str | None:
    """The package a frame's file belongs to, or None for the standard library."""
    for root in ("site-packages/", "/hoptrace/", "/work/main/"):
        if root in path:
            parts = path.split(root, 1)[1].split("/")
            break
    else:
        return None
    if parts[0] == "opentelemetry" and len(parts) > 2:
        depth = 3 if parts[1] in ("instrumentation", "sdk", "exporter") and len(parts) > 3 else 2
        return "/".join(parts[:depth])
    return parts[0].removesuffix(".py")


def charge(collapsed: Path) -> Counter[str]:
    """Samples per package (see the module docstring)."""
    by: Counter[str] = Counter()
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        who = "(standard library)"
        for frame in reversed(stack.split(";")):
            m = _FRAME.match(frame)
            if m is not None and (found := owner(m.group(2))) is not None:
                who = found
                break
        by[who] += int(count)
    return by


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--requests", type=int, default=300, help="requests of the run")
    parser.add_argument("--rate", type=int, default=500, help="py-spy samples a second")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    ms = 1000 / args.rate / args.requests  # one sample, in ms of CPU per request
    for traced_file in sorted((args.dir / "traced").glob("*.txt")):
        untraced_file = args.dir / "untraced" / traced_file.name
        if not untraced_file.exists():
            continue
        t, u = charge(traced_file), charge(untraced_file)
        added = sum(t.values()) - sum(u.values())
        print(
            f"{traced_file.stem}: {sum(t.values()) * ms:.2f} ms a request traced, "
            f"{sum(u.values()) * ms:.2f} untraced, {added * ms:+.2f} added"
        )
        rows = sorted(set(t) | set(u), key=lambda k: u[k] - t[k])[: args.top]
        for k in rows:
            print(f"  {k:<42}{t[k] * ms:8.3f}{u[k] * ms:8.3f}{(t[k] - u[k]) * ms:+9.3f}")


if __name__ == "__main__":
    main()
