"""The ``gossipsim`` command line: its argument parser (every command and its options) and
:func:`main`, which hands each command to the module that does it (:mod:`~gossipsim.cli.run`,
:mod:`~gossipsim.cli.scenarios`, :mod:`~gossipsim.cli.walks`, :mod:`~gossipsim.cli.folders`).

User errors print one line, ``gossipsim: error: <key>: <what is allowed>``, on stderr and exit with
status 2; nothing is written. A failure after the runs (theory, figures, writing the tables) prints
one line saying what failed and what to do, and exits with status 1; the tables are kept. Ctrl-C
prints one line and exits with status 130 (:mod:`gossipsim.cli.exits`).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from gossipsim.cli.exits import EXIT_INTERRUPTED, EXIT_USAGE, error_line
from gossipsim.cli.folders import compare_command, plot_command, status_command
from gossipsim.cli.run import run_command
from gossipsim.cli.scenarios import list_command, validate_command
from gossipsim.cli.walks import covertime_command, hitting_command
from gossipsim.core.version import __version__
from gossipsim.errors import ConfigError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints usage too)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _positive_int(name: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} must be an integer >= 1 (got {text!r})"
            ) from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{name} must be an integer >= 1 (got {text})")
        return value

    return parse


def _nonnegative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seed must be an integer >= 0 (got {text!r})") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"--seed must be an integer >= 0 (got {text})")
    return value


def _param(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--param must be key=value (got {text!r})")
    key, value = text.split("=", 1)
    return key.strip(), _scalar(value.strip())


def _scalar(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _figure_options(parser: argparse.ArgumentParser, *, formats: bool = True) -> None:
    """The figure options shared by run, plot and compare: --format (not for compare, whose
    --out names its file) and --statistic."""
    if formats:
        parser.add_argument(
            "--format", choices=("png", "pdf", "svg"), default="png",
            help="figure format (default png)",
        )  # fmt: skip
    parser.add_argument(
        "--statistic",
        choices=("median", "mean"),
        default="median",
        help="centre line of the curves over runs (KL or KSD, held-out metrics): the median "
        "with the 12.5-87.5th percentile band (default) or the mean with its 95%% confidence "
        "interval",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gossipsim",
        description="Bayesian federated learning and unlearning over decentralized networks.",
    )
    parser.add_argument("--version", action="version", version=f"gossipsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="run a scenario file and write a results folder")
    run.add_argument("file", help="scenario TOML file")
    run.add_argument("--out", help="results folder (default: results/<scenario name>)")
    run.add_argument("--runs", type=_positive_int("--runs"), help="override [scenario] runs")
    run.add_argument("--seed", type=_nonnegative_int, help="override [scenario] seed")
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a dotted key, e.g. topology.nodes=50 (VALUE is a TOML value; a bare word is a "
        "string); repeatable",
    )
    run.add_argument(
        "--workers",
        type=_positive_int("--workers"),
        default=None,
        help="local worker processes (default 1; results identical for any number)",
    )
    run.add_argument(
        "--cluster",
        help="run on Dask: a scheduler address tcp://host:8786, or local:N for a local cluster of N workers (not with --workers)",
    )
    run.add_argument(
        "--engine",
        choices=("auto", "event", "vectorized"),
        default="auto",
        help="auto (default: for each variant the vectorized engine when it can run the variant, "
        "the variant has at least 16 runs (fewer run faster one at a time) and its runs fit in "
        "memory 16 at a time, else the event engine; the output says which ran and why) | event | "
        "vectorized (the same tables)",
    )
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted sweep in --out, skipping finished runs (of a finished "
        "sweep nothing is run: its figures are drawn again)",
    )
    run.add_argument(
        "--allow-code-change",
        action="store_true",
        help="with --resume: resume even though the code that made the finished runs has changed "
        "since (gossipsim's version or source, a plug-in's source); the tables then mix both",
    )
    _figure_options(run)
    run.add_argument(
        "--no-plots",
        action="store_true",
        help="write the tables only (from Python: gs.run(..., out=DIR, plots=False))",
    )
    run.add_argument(
        "--tables",
        choices=("auto", "csv", "parquet", "both"),
        default="auto",
        help="files of the tables: auto (default: CSV, plus Parquet copies when pyarrow is "
        "installed) | csv | parquet (Parquet only: a fraction of the size and time for large "
        "studies; needs pyarrow) | both",
    )
    run.add_argument(
        "--progress",
        choices=("auto", "on", "off"),
        default="auto",
        help="progress bar on stderr (auto: when stderr is a terminal)",
    )

    val = sub.add_parser("validate", help="check a scenario file without running it")
    val.add_argument(
        "file", help="scenario TOML file: every key, graph, data file and target is checked"
    )

    for name, helptext in (
        ("covertime", "cover time of the token walk on a graph"),
        ("hitting", "expected unlearning latency of one node"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--topology", required=True, help="topology kind (see `gossipsim list`)")
        p.add_argument("--nodes", type=_positive_int("--nodes"), help="number of nodes K")
        p.add_argument(
            "--param",
            type=_param,
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="topology parameter, e.g. p=0.2 (repeatable)",
        )
        p.add_argument("--path", help="graph file for --topology edgelist/graphml")
        p.add_argument(
            "--scheduler",
            default="metropolis-hastings",
            help="metropolis-hastings | simple-random-walk | uniform",
        )
        p.add_argument(
            "--runs",
            type=_positive_int("--runs"),
            default=1000,
            help="Monte Carlo runs (default 1000)",
        )
        p.add_argument(
            "--seed",
            type=_nonnegative_int,
            default=0,
            help="draws the graph as a scenario with this seed does, and the walks (default 0)",
        )
        p.add_argument("--exact", action="store_true", help="also compute the exact expectation")
        p.add_argument("--json", action="store_true", help="print one JSON object")
        if name == "covertime":
            p.add_argument("--bounds", action="store_true", help="also compute Matthews' bounds")
        else:
            p.add_argument("--node", required=True, help="the node asking to be forgotten")
            p.add_argument(
                "--at-slot",
                type=_positive_int("--at-slot"),
                help="the request arrives before this slot of a walk started by --start: its "
                "removal latency as a run measures it (0 if the node had not held the token). "
                "Default: the latency from a holder drawn from the stationary distribution",
            )
            p.add_argument(
                "--start",
                default="uniform",
                help="with --at-slot: the first holder, uniform (default), stationary or a node",
            )

    pl = sub.add_parser("plot", help="(re)draw the figures of a results folder")
    pl.add_argument("dir", help="a results folder (written by gossipsim run)")
    _figure_options(pl)
    pl.add_argument(
        "--figure",
        action="append",
        metavar="NAME",
        help="draw only this figure (repeat for several; default: all that apply): kl_vs_iteration, "
        "kl_vs_time, unlearning_kl, latency, cover_time, kl_vs_local_iterations, evaluation, "
        "unlearning_accuracy, particles, visits, accuracy_vs_ece, time_map (the kl_ figures draw "
        "the KSD of particle protocols; time_map, where the walk spends its time, is drawn by "
        "default only where links differ by edge or lose messages)",
    )
    pl.add_argument(
        "--x",
        choices=("iteration", "bits", "time"),
        default="iteration",
        help="x axis of the figures with a slot axis (kl_vs_iteration, evaluation, unlearning_kl, "
        "unlearning_accuracy): iteration (default), or cumulative bits or simulated time, written "
        "as kl_vs_bits, evaluation_vs_bits, ... (kl_vs_iteration against time is kl_vs_time); "
        "the other figures are not drawn then",
    )

    sub.add_parser(
        "list", help="topologies, models, schedulers and protocols with their parameters"
    )

    st = sub.add_parser("status", help="runs done, failed and remaining of a results folder")
    st.add_argument("dir", help="a results folder (finished, interrupted or still running)")
    st.add_argument(
        "--json", action="store_true", help="print one JSON object (name, runs, done, failed, ...)"
    )

    cmp_ = sub.add_parser(
        "compare",
        help="overlay the KL (or KSD) curves of several results folders in one figure",
    )
    cmp_.add_argument(
        "dirs", nargs="+", metavar="DIR", help="results folders; their variants share one figure"
    )
    cmp_.add_argument(
        "--out",
        default="compare.png",
        help="figure file (default compare.png; .pdf/.svg by extension)",
    )
    _figure_options(cmp_, formats=False)
    cmp_.add_argument(
        "--x",
        choices=("iteration", "bits", "time"),
        default="iteration",
        help="x axis: iteration (default), cumulative bits or simulated time",
    )
    return parser


def _one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    from gossipsim.core.libwarnings import HELD, meaning

    if HELD.take(message, category):  # said only where a table holds such numbers
        return
    print(f"gossipsim: warning: {meaning(message, category)}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # the process is this command (the console script): not a caller's objects
        # everything imported so far lives as long as the process: out of the garbage collector's
        # reach, it is not examined by every collection of the run nor again at exit (about
        # 0.1-0.2 s of a whole command)
        gc.freeze()
    warnings.showwarning = _one_line_warning
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse: --help, --version, or a usage error already printed
        return int(exc.code or 0)
    args.own_process = argv is None  # the process ends with the command
    try:
        handler = {
            "run": run_command,
            "validate": validate_command,
            "covertime": covertime_command,
            "hitting": hitting_command,
            "plot": plot_command,
            "list": list_command,
            "status": status_command,
            "compare": compare_command,
        }[args.command]
        return handler(args)
    except ConfigError as exc:
        error_line(str(exc))
        return EXIT_USAGE
    except BrokenPipeError:  # e.g. `gossipsim list | head`: stop quietly
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - stays open until exit
        return 0
    except KeyboardInterrupt:
        print(
            "gossipsim: interrupted; finished runs are kept: continue with the same command and --resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
