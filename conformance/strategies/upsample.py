"""Signatures of upsample ops (being written)."""

from __future__ import annotations
