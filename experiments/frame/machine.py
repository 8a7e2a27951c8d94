"""What the benchmark scripts print about the machine they ran on."""

from __future__ import annotations

import os
import platform


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else what platform knows."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def load_line() -> str:
    """The 1-minute load average against the CPU count: other work on the machine slows runs
    that use every core the most, and fine-grained work (many small ops) more than coarse."""
    if not hasattr(os, "getloadavg"):
        return "load average: unknown on this platform"
    return f"load average (1 min): {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
