"""The ``cdc-delta`` command line: :mod:`.main` builds the parser from one module per command group
(:mod:`.stream`, :mod:`.jobs`, :mod:`.demo`, :mod:`.connectors`) and maps errors to exit codes."""
