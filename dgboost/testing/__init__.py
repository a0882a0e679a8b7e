"""Test helpers shipped with dgboost (reference implementations and check_* helpers)."""

__all__ = []
