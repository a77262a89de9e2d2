"""Live solving held off while a bake or a script steps through frames itself.

``live.py``'s frame handler solves every frame change; a bake reads the animated pose at each
frame it steps to, which must not be the live solution (a bake with Live on would then differ
from one without). ``with suspended():`` around such ``frame_set`` calls makes the handlers
return at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

_depth = 0


@contextmanager
def suspended() -> Iterator[None]:
    """Hold live solving off inside the block (nestable)."""
    global _depth
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1


def is_suspended() -> bool:
    """Whether live solving is held off now."""
    return _depth > 0
