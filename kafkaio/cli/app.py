"""The ``kafkaio`` command: argument parsing, the per-command context, exit codes and
error reporting (a message on stderr; a traceback only with ``--debug``)."""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import anyio

from kafkaio.admin import Admin
from kafkaio.errors import KafkaConfigError, KafkaError
from kafkaio.net.config import ConnectionConfig

EXIT_OK = 0
EXIT_KAFKA_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup  # type: ignore[import-not-found]

Command = Callable[["Context"], Awaitable[int]]


class UsageError(KafkaConfigError):
    """Arguments that make no sense together (exit code 2)."""


@dataclass(slots=True)
class Context:
    """What a command runs with: its arguments, connection options and output streams."""

    args: argparse.Namespace
    out: TextIO
    err: TextIO
    options: dict[str, Any] = field(default_factory=dict)
    # -X settings that are not connection options: for the producer or consumer only
    client_options: dict[str, Any] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        from kafkaio.cli.settings import resolve_bootstrap

        return resolve_bootstrap(self.args.bootstrap)

    @property
    def json(self) -> bool:
        return bool(getattr(self.args, "json", False))

    @property
    def timeout_ms(self) -> int:
        return int(self.args.timeout_ms)

    def admin(self) -> Admin:
        return Admin(
            self.bootstrap,
            default_api_timeout_ms=self.timeout_ms,
            request_timeout_ms=min(self.timeout_ms, 30_000),
            **self.options,
        )

    def connection_config(self) -> ConnectionConfig:
        options = dict(self.options)
        options.setdefault("client_id", "kafkaio-cli")
        options.setdefault("request_timeout_ms", min(self.timeout_ms, 30_000))
        return ConnectionConfig(**options)

    def note(self, message: str) -> None:
        """A human note on stderr (never mixed into the data on stdout)."""
        self.err.write(message + "\n")
        self.err.flush()


class _VersionAction(argparse.Action):
    """``--version``: the installation report of kafkaio.about (first line: the version)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from kafkaio.about import installation

        sys.stdout.write("\n".join(installation().lines()) + "\n")
        parser.exit()


def _common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    default: Any = None if top else argparse.SUPPRESS
    parser.add_argument(
        "-b",
        "--bootstrap",
        metavar="HOST:PORT[,...]",
        default=default,
        help="bootstrap servers (default: $KAFKAIO_BOOTSTRAP_SERVERS)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=default,
        help="properties file: security_protocol, sasl_mechanism, sasl_plain_username, "
        "sasl_plain_password, ssl_cafile, ssl_certfile, ssl_keyfile, client_id...",
    )
    parser.add_argument(
        "-X",
        dest="settings",
        action="append",
        metavar="KEY=VALUE",
        default=[] if top else argparse.SUPPRESS,
        help="any client setting, e.g. -X linger_ms=20 -X security.protocol=SSL "
        "(dots or underscores; repeatable; overrides --config)",
    )
    parser.add_argument(
        "--timeout-ms",
        type=int,
        metavar="MS",
        default=30_000 if top else argparse.SUPPRESS,
        help="deadline of each admin call (default 30000)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="show tracebacks and client logs",
    )


def build_parser() -> argparse.ArgumentParser:
    from kafkaio.cli import bench, cluster, consume, groups, produce, topics

    parser = argparse.ArgumentParser(
        prog="kafkaio",
        description="Produce, consume and administer Kafka from the command line.",
        epilog="Exit codes: 0 ok, 1 Kafka error, 2 usage error, 130 interrupted.",
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        help="show the version, the record codec, Python and the optional features, and exit",
    )
    _common(parser, top=True)
    common = argparse.ArgumentParser(add_help=False)
    _common(common, top=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (produce, consume, topics, groups, cluster, bench):
        module.register(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kafkaio`` with `argv` (default: sys.argv[1:]); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    _setup_logging(debug=args.debug)
    ctx = Context(args, sys.stdout, sys.stderr)
    command: Command = args.run
    try:
        if args.config:
            from kafkaio.cli.settings import client_options, read_properties

            ctx.options = client_options(read_properties(args.config))
        if args.settings:
            from kafkaio.cli.settings import split_settings

            connection, own = split_settings(args.settings)
            ctx.options.update(connection)
            ctx.client_options.update(own)
        return _run(command, ctx)
    except KeyboardInterrupt:
        ctx.note("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `kafkaio consume t | head`
        _silence_stdout()
        return EXIT_OK
    except KafkaConfigError as exc:
        return _fail(ctx, exc, EXIT_USAGE, parser.prog)
    except KafkaError as exc:
        return _fail(ctx, exc, EXIT_KAFKA_ERROR, parser.prog)
    except Exception as exc:  # a bug, or an OS error such as a missing --file
        if isinstance(exc, OSError) and not args.debug:
            return _fail(ctx, exc, EXIT_USAGE, parser.prog)
        ctx.note(f"{parser.prog}: internal error: {exc!r}")
        traceback.print_exc(file=ctx.err)
        return EXIT_KAFKA_ERROR


def _setup_logging(*, debug: bool) -> None:
    """Client logs on stderr with --debug only. Without it, a NullHandler on the "kafkaio"
    logger keeps its records (retry warnings...) from Python's last-resort handler, so an
    error stays the one line ``kafkaio: error: ...``."""
    client = logging.getLogger("kafkaio")
    quiet = [h for h in client.handlers if isinstance(h, _Quiet)]
    if debug:
        for handler in quiet:
            client.removeHandler(handler)
        logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    elif not quiet:
        client.addHandler(_Quiet())


class _Quiet(logging.NullHandler):
    """The CLI's NullHandler on the "kafkaio" logger (told apart from a user's own)."""


def _run(command: Command, ctx: Context) -> int:
    try:
        return anyio.run(command, ctx)
    except BaseExceptionGroup as group:  # a task group's failure: report its first cause
        raise _first_leaf(group) from None


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _fail(ctx: Context, exc: BaseException, code: int, prog: str) -> int:
    if ctx.args.debug:
        traceback.print_exception(exc, file=ctx.err)
    message = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        message = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    ctx.note(f"{prog}: error: {message}")
    return code


def _silence_stdout() -> None:
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
