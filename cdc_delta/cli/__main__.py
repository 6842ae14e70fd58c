"""``python -m cdc_delta.cli``: the same as the ``cdc-delta`` command."""

from cdc_delta.cli.main import run

run()
