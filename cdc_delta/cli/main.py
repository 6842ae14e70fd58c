"""The ``cdc-delta`` command line."""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import NoReturn

from cdc_delta import __version__
from cdc_delta.cli import (
    check_config,
    connectors,
    demo,
    jobs,
    jvm,
    merge,
    repair,
    scan_pii,
    sql,
    status,
    stream,
    tables,
)
from cdc_delta.cli.common import logger
from cdc_delta.exceptions import CdcDeltaError, exit_code_for, one_line

EPILOG = """\
examples:
  cdc-delta demo                               apply generated Debezium events to local Delta tables
  cdc-delta check-config --config cdc.yaml     validate a config file and print what it resolves to
  cdc-delta stream --config cdc.yaml          land every batch in the changelog, merge tables on schedule
  cdc-delta status --config cdc.yaml          lag, pending changes and merge lag per table, stopped tables
  cdc-delta snapshot --config cdc.yaml        publish yesterday's Hive partition (nightly)
  cdc-delta check --config cdc.yaml           compare the source database with Delta, per table
  cdc-delta sql --config cdc.yaml "SELECT count(*) FROM inventory.orders WHERE NOT _cdc_deleted"

Config: one YAML file (see streaming/example-config.yaml); any field can be overridden with an
environment variable CDC_DELTA__SECTION__FIELD, e.g. CDC_DELTA__KAFKA__BOOTSTRAP_SERVERS=host:9092.
"""


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""Every command's log lines on stderr."""


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format=LOG_FORMAT, stream=sys.stderr)
    for noisy in ("py4j", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # PySpark logs every SQL error it raises, as JSON with the JVM's trace: the command says it in one line.
    for noisy in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose else logging.CRITICAL)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdc-delta",
        description="Replicate MySQL/MariaDB tables into Delta Lake from Debezium change events.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"cdc-delta {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging, with tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for group in (check_config, stream, merge, tables, repair, sql, status, jobs, scan_pii, connectors, demo, jvm):
        group.add_commands(sub)
    _verbose_anywhere(parser)
    return parser


def _verbose_anywhere(parser: argparse.ArgumentParser) -> None:
    """Accept ``-v`` after the command too (``cdc-delta stream --config c.yaml -v``), at every level."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                verbose = "debug logging, with tracebacks"
                command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=verbose)
                _verbose_anywhere(command)


class Stopped(BaseException):
    """A stop signal (SIGTERM, SIGINT) outside the stream, which handles its own: the command ends at
    once with one line. A BaseException, so that no ``except Exception`` on the way (py4j's) turns it
    into an error of its own."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signum)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.verbose)
    main_thread = threading.current_thread() is threading.main_thread()  # signals go to the main thread only
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)} if main_thread else {}
    try:
        return int(args.func(args))
    except CdcDeltaError as exc:
        logger.debug("failed", exc_info=True)
        print(f"cdc-delta: error: {exc}", file=sys.stderr)
        return exit_code_for(exc)
    except Stopped as stopped:
        print(f"cdc-delta: stopped by {stopped}", file=sys.stderr)
        return 128 + stopped.signum
    except Exception as exc:  # noqa: BLE001 (the unexpected: one line too; the trace is -v's)
        logger.debug("failed", exc_info=True)
        print(f"cdc-delta: error: {one_line(exc)} (unexpected: run again with -v for the trace)", file=sys.stderr)
        return exit_code_for(exc)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run() -> NoReturn:
    """The ``cdc-delta`` command: :func:`main`, then the process ends once its output is flushed and the
    exit handlers have run, without the interpreter's teardown, where a native thread of Arrow's still
    alive (a Delta table scanned through pyarrow datasets: `check`) aborts a command that succeeded
    ("terminate called without an active exception", exit -6)."""
    code = main()
    atexit._run_exitfuncs()  # logging's among them: its handlers flushed
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
