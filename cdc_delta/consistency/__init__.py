"""Reads consistent across tables: the consistent point of source transactions (:mod:`.point`)."""
