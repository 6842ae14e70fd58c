"""Sensitive values that slipped into the lake in plain text: what they look like (:mod:`.detectors`,
patterns confirmed by checksums) and where they are (:mod:`.scan`, a sample of each string column)."""
