"""Do one thing on every host at once: the kit's one fan-out.

    results = on_all(hosts, probe_one)           # {host name: Outcome}, in the hosts' order
    for name, out in results.items():
        out.value if out.ok else out.error       # the function's return value, or the exception it raised

One thread per host (up to MAX_WORKERS); every host is tried even when others fail; an exception
is kept with its host, never raised from here. Ctrl-C (KeyboardInterrupt) still interrupts the caller.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
H = TypeVar("H")
MAX_WORKERS = 64


@dataclass(frozen=True)
class Outcome(Generic[T]):
    value: T | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def get(self) -> T:
        """The value, or the host's exception raised here."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


def _name(host) -> str:
    return getattr(host, "name", None) or str(host)


def on_all(hosts: Iterable[H], fn: Callable[[H], T], *, workers: int | None = None) -> dict[str, Outcome[T]]:
    """fn(host) for every host concurrently -> {host name: Outcome}, in the order the hosts were given."""
    hosts = list(hosts)
    if not hosts:
        return {}
    results: dict[str, Outcome[T]] = {}
    size = max(1, min(workers or len(hosts), MAX_WORKERS))
    with cf.ThreadPoolExecutor(max_workers=size) as pool:
        futures = [(host, pool.submit(fn, host)) for host in hosts]
        for host, future in futures:
            try:
                results[_name(host)] = Outcome(value=future.result())
            except Exception as exc:  # kept with its host; KeyboardInterrupt propagates
                results[_name(host)] = Outcome(error=exc)
    return results


def values(results: dict[str, Outcome[T]]) -> list[T]:
    """Every host's value in order; the first host's error raised if any failed (for all-or-nothing work)."""
    return [out.get() for out in results.values()]
