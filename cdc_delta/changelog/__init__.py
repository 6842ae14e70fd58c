"""The multi-table changelog (phase 1 lands in it, phase 2 merges from it): its table and landing
numbers, the landing of a micro-batch, reading changes back, and what it holds for status."""
