from .entry import Entry

__all__ = ["Entry"]
