"""``python -m cdc_delta.cli``: the same as the ``cdc-delta`` command."""

import sys

from cdc_delta.cli.main import main

sys.exit(main())
