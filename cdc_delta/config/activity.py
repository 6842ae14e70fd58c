"""The activity section: how each table's change rate is learned from its own history, and when a table
that fell silent, or whose rate jumped, is flagged (``status``, the hourly maintenance's metrics)."""

from __future__ import annotations

from pydantic import Field

from cdc_delta.config.common import Frozen


class ActivityConfig(Frozen):
    """Silent tables and rate jumps. The hourly maintenance counts each table's changes per 15 minutes of
    source time (``<storage.root>/_cdc_activity``, kept ``history_days``); a table is judged against the
    same hours of the day on each earlier day it has history for. No source connection is needed."""

    enabled: bool = True
    """Count and judge; false: neither (no ``_cdc_activity`` table is written)."""
    history_days: int = Field(default=28, ge=1)
    """Days of counts kept and compared against."""
    min_days: int = Field(default=3, ge=1)
    """A table with fewer days of history is "learning": neither silent nor jumped."""
    silent_minutes: float = Field(default=60, gt=0)
    """A table is silent once it has had no change for this long and, in the same hours of the day, every
    earlier day had at least ``silent_min_changes`` (or the same weekday of every earlier week did; one
    exception forgiven among four or more), so that a table quiet at night or at weekends is not called
    silent then."""
    silent_min_changes: int = Field(default=20, ge=1)
    """See ``silent_minutes``. A table whose quietest day had fewer in those hours is too quiet to judge."""
    jump_factor: float = Field(default=10, gt=1)
    """A table jumped when its changes in the last hour are this many times the most it had in the same
    hour on any earlier day, and at least ``jump_min_changes``."""
    jump_min_changes: int = Field(default=1000, ge=1)
    """See ``jump_factor``."""
