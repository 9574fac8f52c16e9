"""The keys of the spans a store wrote last, to skip spans sent again."""

from __future__ import annotations

__all__ = ["RecentKeys"]


class RecentKeys:
    """The keys of the last ``capacity // 2`` to ``capacity`` spans written.

    Two generations of sets: when the newer one is full, the older one is dropped
    whole. Adding and looking up cost the same however many keys came before (a
    FIFO dict evicted one key at a time from its front costs time proportional to
    the keys already evicted, which made ingest collapse after ``capacity`` spans).
    A key is (trace id, span id) as 24 raw bytes: a third of the memory of the hex pair.
    """

    def __init__(self, capacity: int):
        self._generation = max(1, capacity // 2)
        self.new: set[bytes] = set()
        self.old: set[bytes] = set()

    def __len__(self) -> int:
        return len(self.new) + len(self.old)

    def update(self, keys: dict[bytes, None]) -> None:
        """Remember ``keys`` (in their order: the last ones are kept longest)."""
        if len(self.new) + len(keys) < self._generation:
            self.new.update(keys)
            return
        pending = list(keys)
        while pending:
            room = self._generation - len(self.new)
            self.new.update(pending[:room])
            pending = pending[room:]
            if len(self.new) >= self._generation:
                self.old, self.new = self.new, set()
