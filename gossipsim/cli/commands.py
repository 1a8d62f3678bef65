"""The ``gossipsim`` command line.

User errors print one line, ``gossipsim: error: <key>: <what is allowed>``, on stderr and exit with
status 2; nothing is written. A failure after the runs (theory, figures, writing the tables) prints
one line saying what failed and what to do, and exits with status 1; the tables are kept. Ctrl-C
prints one line and exits with status 130.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import json
import math
import os
import re
import sys
import tomllib
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from gossipsim import __version__
from gossipsim.core.textfiles import checked_path
from gossipsim.errors import ConfigError

EXIT_USAGE = 2
EXIT_FAILED = 1  # runs failed, or the runs are done but a step after them failed
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
# OS errors that mean the results folder cannot be written (not a bug): one line, not a traceback
DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO}


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


_BARE_WORD = re.compile(r"[^\s\"'\[\]{}=#,]+")


def parse_set(text: str) -> tuple[str, Any]:
    """``--set KEY=VALUE``: the dotted key and its value, read as a TOML value (``50``, ``0.5``,
    ``true``, ``"ring"``, ``[1, 2]``, ``{ a = 1 }``); a bare word that is no TOML value
    (``uniform``, ``per-run``) is that string."""
    key, eq, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not eq or not key:
        raise ConfigError("--set", f"must be KEY=VALUE, e.g. topology.nodes=50 (got {text!r})")
    try:
        return key, tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        if _BARE_WORD.fullmatch(value):
            return key, value
        raise ConfigError(
            "--set",
            f"{key}: {value!r} is not a TOML value (quote strings with spaces or symbols: "
            f"{key}='\"...\"')",
        ) from None


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
        "unlearning_accuracy, visits (the kl_ figures draw the KSD of particle protocols)",
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


def _warn_nonfinite(lines: list[str], held: list[str]) -> None:
    """One warning per table holding infinite or NaN numbers (``lines``), with the floating-point
    warnings ``held`` back while they were computed as the likely cause; nothing otherwise."""
    from gossipsim.core.libwarnings import nonfinite_warning

    for line in lines:
        print(f"gossipsim: warning: {nonfinite_warning(line, held)}", file=sys.stderr)


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
            "run": _cmd_run,
            "validate": _cmd_validate,
            "covertime": _cmd_covertime,
            "hitting": _cmd_hitting,
            "plot": _cmd_plot,
            "list": _cmd_list,
            "status": _cmd_status,
            "compare": _cmd_compare,
        }[args.command]
        return handler(args)
    except ConfigError as exc:
        print(f"gossipsim: error: {exc}", file=sys.stderr)
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


def _error_line(message: str) -> None:
    print(f"gossipsim: error: {message}", file=sys.stderr)


def _cmd_run(args: argparse.Namespace) -> int:
    from gossipsim.api import run, standard_figures
    from gossipsim.results.results import PostProcessingError
    from gossipsim.results.writing import table_formats
    from gossipsim.study.scenario import load_scenario

    if args.out is not None and not args.out.strip():
        raise ConfigError("--out", "must name a folder (got an empty name)")
    if args.cluster is not None and args.workers is not None:
        raise ConfigError(
            "--cluster",
            "cannot be combined with --workers: the cluster's workers run the sweep; give one of them",
        )
    table_formats(args.tables, key="--tables")  # pyarrow, before anything runs
    study = load_scenario(args.file)
    if args.set:
        study = study.replace(dict(parse_set(text) for text in args.set))
    out = checked_path(args.out, "--out") if args.out else Path("results") / study.name
    # auto: a bar when stderr is a terminal (decided here, so that a piped run never imports tqdm)
    progress = {"auto": sys.stderr.isatty(), "on": True, "off": False}[args.progress]

    from gossipsim.core.libwarnings import HELD

    try:
        with HELD.holding() as held:
            results = run(
                study, runs=args.runs, seed=args.seed, workers=args.workers or 1,
                cluster=args.cluster, engine=args.engine, out=out, resume=args.resume,
                make_plots=None if args.no_plots else standard_figures(args.format, args.statistic),
                plots=not args.no_plots, progress=progress, tables=args.tables,
                allow_code_change=args.allow_code_change,
            )  # fmt: skip
    except PostProcessingError as exc:
        _warn_nonfinite(exc.results.nonfinite_values(), held)
        _report(exc.results, out, tables_written=exc.tables_written)
        _error_line(str(exc))
        return EXIT_INTERRUPTED if exc.interrupted else EXIT_FAILED
    except OSError as exc:  # the disk filled up (or became read-only) while committing runs
        if exc.errno not in DISK_ERRORS:
            raise
        kept = _runs_kept(out)
        if kept:
            _error_line(
                f"cannot write {out}/ ({exc.strerror or exc}); the {kept} finished run(s) committed "
                "so far are kept: fix the cause and continue with the same command and --resume"
            )
        else:
            _error_line(
                f"cannot write {out}/ ({exc.strerror or exc}); no finished run could be kept: fix "
                "the cause and run the same command again"
            )
        return EXIT_FAILED
    _warn_nonfinite(results.nonfinite_values(), held)
    return _report(results, out)


def _runs_kept(out: Path) -> int:
    """Runs done or failed committed in ``out`` (0 where it cannot be read)."""
    from gossipsim.results.status import status

    try:
        info = status(out)
    except (ConfigError, OSError):
        return 0
    return int(info["done"]) + int(info["failed"])


def _report(results: Any, out: Path, *, tables_written: bool = True) -> int:
    """Print what a run wrote (``tables_written``: whether the tables are in ``out``) and its
    summary; status 1 if runs failed. A failure while summarising is one line, never a
    traceback."""
    try:
        _print_summary(results, out, tables_written=tables_written)
    except BrokenPipeError:  # `gossipsim run ... | head`: main() stops quietly
        raise
    except Exception as exc:  # a bug here must not hide the written tables
        from gossipsim.execution.executors import describe_error

        where = f"the tables are in {out}/" if tables_written else "the runs are done"
        _error_line(f"{where}, but summarising them failed ({describe_error(exc)})")
        return EXIT_FAILED
    failed = len(results.failures)
    if failed:
        which = f"all {failed} runs failed" if not len(results.runs) else f"{failed} run(s) failed"
        print(
            f"gossipsim: {which}; their errors and seeds are in {out}/failures.csv",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return 0


def _print_summary(results: Any, out: Path, *, tables_written: bool = True) -> None:
    runs = results.runs
    size = f"{len(runs)} runs, {len(results.variants)} variant(s)"
    if tables_written:  # said once it is true: a failed write must not read as a success
        print(f"wrote {out}/ ({size})")
    else:
        print(f"the tables were NOT written to {out}/ ({size} finished and kept there)")
    engines = list(results.engines.values())
    print(
        "engine: "
        + "; ".join(f"{e} for {engines.count(e)} variant(s)" for e in sorted(set(engines)))
    )
    from gossipsim.results.summary import cover_summary, walks

    kinds = results.divergences  # what "converged" and the unlearning latency were judged on
    scenarios = {v.label: v.scenario for v in results.study.variants}
    for label, part in runs.groupby("variant", sort=False, observed=True):
        conv = part["convergence_iteration"].astype(float)
        cover = (
            _censored_text("cover iteration", cover_summary(part), "runs")
            if walks(scenarios[str(label)])
            else "no walk (centralised)"
        )
        line = f"  {label}: {cover}"
        line += f"; converged in {conv.notna().sum()}/{len(part)} runs"
        if conv.notna().any():
            line += f", mean convergence iteration {conv.mean():.2f}"
        print(line)
        req = results.requests[results.requests["variant"] == label]
        name = kinds[str(label)].name if str(label) in kinds else "KL"
        for entry in results.request_entries(str(label)):
            print(_request_line(entry, req[req["request"] == entry["request"]], name))


def _censored_text(what: str, summary: dict[str, Any], unit: str) -> str:
    """ "mean X m over k/n runs" and, when some runs are censored, the Kaplan–Meier median and the
    restricted mean (a lower bound of the mean) beside it."""
    observed, total = summary["observed"], summary["total"]
    if observed == 0:
        return f"{what} not reached in any of {total} {unit}"
    text = f"mean {what} {summary['mean_of_observed']:.2f}"
    if observed == total:
        return f"{text} ({observed}/{total} {unit})"
    median = summary["km_median"]
    shown = f"{median:.0f}" if math.isfinite(median) else f"> {summary['restricted_to'] - 1:.0f}"
    return (
        f"{text} over the {observed}/{total} {unit} that reached it (biased low); Kaplan–Meier "
        f"median {shown}, mean >= {summary['restricted_mean']:.2f} counting the others at their end"
    )


def _request_line(entry: dict[str, Any], rows: Any, divergence: str = "KL") -> str:
    """One request's summary (never pooled with other nodes' requests): removal latency against the
    exact expectation of what the runs measure at this request's slot (or, where that is not
    computed, the value from a stationary holder, named so), the latency judged on the
    ``divergence`` (KL, or the KSD of particle protocols) against retraining (without a baseline,
    no retrain figure), each with its served count and a censoring-aware estimate when not every
    run served it."""
    at = entry["request_iteration"]
    when = f"slot {at:.0f}" if isinstance(at, float) else "its arrival"
    if entry["arrived"] < entry["runs"]:
        when += f" (arrived in {entry['arrived']}/{entry['runs']} runs)"
    line = f"    request for node {entry['node']} at {when}:"
    if entry["arrived"] == 0:
        return line + " never arrived"
    parts = []
    for column, name in (
        ("removal_latency", "removal latency"),
        ("latency", "unlearning latency"),
        ("retrain_latency", "retrain latency"),
    ):
        if column in entry:
            text = _censored_text(name, entry[column], "runs")
            if column == "removal_latency":
                text += _expected_text(entry)
            parts.append(text)
    line += " " + "; ".join(parts)
    settled = rows["settled_at_request"].dropna()
    unsettled = int((~settled.astype(bool)).sum())
    if unsettled:
        line += (
            f"\n      note: in {unsettled}/{len(rows)} runs the {divergence} was not within the "
            "tolerance before the request; their unlearning latency times learning or estimator "
            "noise"
        )
    both = rows.reindex(columns=["latency", "removal_latency"]).dropna()
    early = int((both["latency"] < both["removal_latency"]).sum())
    if early:
        line += (
            f"\n      note: in {early}/{len(rows)} runs the {divergence} to the posterior without "
            "the node was within the tolerance before the node's data left the state (unlearning "
            "latency < removal latency): at this tolerance it does not tell the posteriors with "
            "and without the node apart"
        )
    return line


def _expected_text(entry: dict[str, Any]) -> str:
    """What the simulated removal latency is compared with, named for what it is: the exact
    expectation at the request's slot and, when some runs ended before serving it, the exact
    counterpart of the restricted mean (runs see latencies up to τ − 1)."""
    exact = entry.get("expected_removal_latency") or {}
    if exact.get("value") is not None:
        text = f"{exact['label']}: {exact['value']:.2f}"
        seen = entry.get("removal_latency") or {}
        if seen.get("observed", 0) < seen.get("total", 0) and exact.get("restricted_value"):
            tau = exact["restricted_to"]
            text += (
                f"; within the run E[min(L, {tau:,})] = {exact['restricted_value']:.2f}, served "
                f"with probability {exact['served_within_run']:.2f}"
            )
        return f" ({text})"
    if entry.get("next_visit_latency") is not None:
        return (
            f" (no exact expectation at this request; from a stationary holder with the node "
            f"visited: {entry['next_visit_latency']:.2f})"
        )
    return ""


def _cmd_status(args: argparse.Namespace) -> int:
    from gossipsim.results.status import status

    info = status(args.dir)
    damaged_tables = bool(info["complete"] and info["damaged"])
    if args.json:
        print(json.dumps(info))
    else:
        if info["running"] is not None:
            state = f"running: process {info['running']}" if info["running"] else "running"
        else:
            state = "complete" if info["complete"] else "interrupted"
        line = (
            f"{args.dir}: {info['name']} ({state}): {info['done']} done, {info['failed']} failed, "
            f"{info['remaining']} remaining of {info['runs']} runs"
        )
        damaged = info["damaged"]
        shown = "; ".join(damaged[:3]) + (
            f"; and {len(damaged) - 3} more" if len(damaged) > 3 else ""
        )
        if damaged_tables and info.get("repairable"):
            line += (
                f"; damaged: {shown}; --resume rewrites them from their intact copies (or run "
                "the scenario again)"
            )
        elif damaged_tables:
            line += f"; damaged: {shown}; run the scenario again"
        elif damaged:
            line += f"; not counted, damaged: {shown} (--resume runs their runs again)"
        if info["duplicate_parts"]:
            line += (
                f"; {info['duplicate_parts']} part(s) hold runs of other parts (two commands "
                "wrote the folder at once): each run counted once, merged once by --resume"
            )
        print(line)
    return EXIT_FAILED if damaged_tables else 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from gossipsim.figures.compare import plot_comparison
    from gossipsim.figures.standard import FORMATS
    from gossipsim.results.folderfiles import check_output_folder
    from gossipsim.results.results import load_results

    out = Path(args.out)
    if not args.out.strip() or out.suffix.lstrip(".").lower() not in FORMATS:
        raise ConfigError(
            "--out",
            f"a figure file ending in {', '.join('.' + f for f in FORMATS)} (got {args.out!r})",
        )
    checked_path(args.out, "--out")  # a name the file system can take
    if out.is_dir():
        raise ConfigError("--out", f"{args.out!r} is a folder; give a figure file")
    check_output_folder(out.parent, "--out")
    studies = []
    for folder in args.dirs:
        res = load_results(folder)
        studies.append((Path(folder).name, res.metrics, res.requests, res.summary()))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        plot_comparison(studies, out, statistic=args.statistic)
    except Exception as exc:  # one line, never a traceback
        from gossipsim.execution.executors import describe_error

        _error_line(f"drawing {args.out} failed ({describe_error(exc)})")
        return EXIT_FAILED
    print(out)
    return 0


def _graphs(study: Any) -> dict[str, Any]:
    from gossipsim.execution.runner import build_world

    graphs = {}
    for variant in study.variants:
        if variant.scenario.topology.nodes is not None and variant.scenario.topology.nodes > 500:
            continue
        graphs[variant.label] = build_world(variant.scenario).graph
    return graphs


def _cmd_validate(args: argparse.Namespace) -> int:
    from gossipsim.api import check, check_memory, choose_engines, warn_long_study
    from gossipsim.study.scenario import load_scenario

    study = load_scenario(args.file)
    worlds = check(study)
    check_memory(study, worlds, "scenario.runs")  # what `run` refuses, refused here too
    choose_engines(study, worlds, "auto")  # e.g. drawn stays the vectorised engine cannot draw
    warn_long_study(study, worlds)  # what `run` warns of on one worker
    runs = sum(v.scenario.run.runs for v in study.variants)
    print(f"{args.file}: valid ({len(study.variants)} variant(s), {runs} runs in all)")
    for variant, world in zip(study.variants, worlds, strict=True):
        drawn = world.model.fixed_data is None and variant.scenario.data.draw == "per-run"
        observations = (
            "observations drawn per run" if drawn else f"{sum(world.points)} observations"
        )
        print(
            f"  {variant.label}: {world.nodes} nodes, {world.indexed.indices.size // 2} edges, "
            f"{observations}, {len(world.requests)} unlearning request(s)"
        )
    return 0


def _graph_from_args(args: argparse.Namespace) -> Any:
    """The graph of --topology/--nodes/--param/--path/--seed in CSR form (as the simulator builds
    it: Erdős–Rényi and random geometric graphs of millions of nodes without NetworkX), drawn from
    the same seed stream as a scenario's graph, so ``--seed S`` gives the graph of a scenario with
    ``seed = S`` (or ``[topology] seed = S``)."""
    import numpy as np

    from gossipsim.core.streams import TOPOLOGY_TAG
    from gossipsim.topology import build_indexed

    if args.topology in ("ring", "path") and not args.param and args.path is None:
        return _line_graph(args.topology, args.nodes)
    seed = np.random.SeedSequence([args.seed, TOPOLOGY_TAG])
    indexed, _ = build_indexed(
        args.topology, args.nodes, dict(args.param), path=args.path, seed=seed
    )
    return indexed


def _line_graph(kind: str, nodes: int | None) -> Any:
    """A ring or a path of ``nodes`` nodes straight into CSR arrays: the CSR of NetworkX's
    ``cycle_graph`` / ``path_graph`` (tested), without building it (NetworkX took 25 s for a ring
    of 5,000,000 nodes, before ``hitting`` could refuse its walks as too long)."""
    import numpy as np

    from gossipsim.core.memory import check_graph
    from gossipsim.scheduling import IndexedGraph
    from gossipsim.topology.registry import validate

    _, n, _ = validate(kind, nodes, {}, None)
    assert n is not None  # ring and path need nodes (validate says so)
    edges = n if kind == "ring" else n - 1
    check_graph(n, float(edges), networkx=False)  # key topology.nodes, as for the other kinds
    first = np.arange(edges, dtype=np.int64)
    return IndexedGraph.from_edges(n, first, (first + 1) % n)


_T = TypeVar("_T")


def _sized(
    compute: Callable[[Any, str], _T], graph: Any, args: argparse.Namespace, flag: str
) -> _T:
    """``compute(graph, scheduler)`` for the option ``flag``; a graph too large for it is refused
    as that option's error (the library names ``nodes`` and suggests what a Python user can do)."""
    try:
        return compute(graph, args.scheduler)
    except ConfigError as exc:
        if exc.key != "nodes":
            raise
        limit = exc.message.split("; ")[0]
        raise ConfigError(
            flag, f"{limit}; drop {flag} (the Monte Carlo runs still apply)"
        ) from None


#: what --json says instead of a 95% interval of fewer than two finished runs
UNDEFINED_INTERVAL = "undefined: fewer than two finished runs, whose spread is unknown"


def _cmd_covertime(args: argparse.Namespace) -> int:
    import numpy as np

    from gossipsim import cover as ct
    from gossipsim.core.memory import check_monte_carlo
    from gossipsim.scheduling import check_scheduler

    check_scheduler(args.scheduler, "--scheduler")
    check_monte_carlo(args.runs)
    graph = _graph_from_args(args)
    # the exact value and the bounds first: a graph too large for them is refused before the runs
    exact = _sized(ct.exact_cover_moves_with_method, graph, args, "--exact") if args.exact else None
    bounds = _sized(ct.matthews_bounds, graph, args, "--bounds") if args.bounds else None
    rng = np.random.default_rng(args.seed)
    samples = ct.monte_carlo_cover_moves(graph, args.scheduler, runs=args.runs, rng=rng)
    stats = ct.summarize(samples)
    out: dict[str, Any] = {
        "topology": args.topology,
        "nodes": graph.size,
        "scheduler": args.scheduler,
        "mean_moves": stats["mean"],
        "ci95_moves": list(stats["ci95"]) if stats["ci95"] is not None else None,
        "runs": stats["runs"],
    }
    if stats["ci95"] is None:
        out["ci95_note"] = UNDEFINED_INTERVAL
    if exact is not None:
        out["exact_moves"] = exact.moves
        out["exact_method"] = exact.method
    if bounds is not None:
        out["matthews_moves"] = list(bounds)
    if args.json:
        print(json.dumps(out))
    else:
        ci = out["ci95_moves"]
        interval = f"95% CI {ci[0]:.4g} to {ci[1]:.4g}" if ci else "95% CI undefined for one run"
        print(
            f"{args.topology}, K = {out['nodes']}, {args.scheduler}: mean cover time "
            f"{out['mean_moves']:.4g} moves ({interval}, {out['runs']} run"
            f"{'s' if out['runs'] != 1 else ''}; cover iteration = moves + 1)"
        )
        if "exact_moves" in out:
            print(f"  exact expectation: {out['exact_moves']:.6g} moves ({out['exact_method']})")
        if "matthews_moves" in out:
            print(
                f"  Matthews' bounds: {out['matthews_moves'][0]:.4g} to {out['matthews_moves'][1]:.4g} moves"
            )
    return 0


def _cmd_hitting(args: argparse.Namespace) -> int:
    import numpy as np

    from gossipsim import cover as ct
    from gossipsim.core.memory import check_monte_carlo
    from gossipsim.scheduling import check_scheduler
    from gossipsim.topology import parse_label

    check_scheduler(args.scheduler, "--scheduler")
    check_monte_carlo(args.runs)
    indexed = _graph_from_args(args)
    label = parse_label(args.node)
    if label not in indexed.index_of and str(args.node) in indexed.index_of:
        label = str(args.node)
    node = indexed.index(label, "--node")
    rng = np.random.default_rng(args.seed)
    start: Any = args.start
    if args.at_slot is not None and start not in ("uniform", "stationary"):
        start = parse_label(start)
        if start not in indexed.index_of and str(args.start) in indexed.index_of:
            start = str(args.start)
        indexed.index(start, "--start")
    label = indexed.labels[node]
    # walks whose length is known to be too long are refused before the exact value is computed
    ct.montecarlo.check_hitting_work(indexed, label, args.scheduler, args.runs, "--runs")
    exact = None
    if args.exact:  # first: a slot too late for the exact law is refused before the runs
        try:
            exact = (
                ct.next_visit_latency(indexed, label, args.scheduler)
                if args.at_slot is None
                else ct.expected_removal_latency(
                    indexed, label, args.at_slot, args.scheduler, start
                )
            )
        except ConfigError as exc:
            if exc.key != "at_slot":
                raise
            raise ConfigError("--at-slot", f"{exc.message}; drop --exact") from None
    if args.at_slot is None:
        samples = ct.monte_carlo_unlearning_latency(
            indexed, label, args.scheduler, runs=args.runs, rng=rng
        )
        what = "request arriving at a stationary holder, the node's factor present"
    else:
        samples = ct.monte_carlo_removal_latency(
            indexed, label, args.at_slot, args.scheduler, runs=args.runs, rng=rng, start=start
        )
        what = f"request before slot {args.at_slot:,} of a walk from {args.start}; 0 if unseen"
    stats = ct.summarize(samples)
    out: dict[str, Any] = {
        "topology": args.topology,
        "nodes": indexed.size,
        "node": label,
        "scheduler": args.scheduler,
        "at_slot": args.at_slot,
        "start": args.start if args.at_slot is not None else "stationary",
        "mean_latency": stats["mean"],
        "ci95_latency": list(stats["ci95"]) if stats["ci95"] is not None else None,
        "runs": stats["runs"],
    }
    if stats["ci95"] is None:
        out["ci95_note"] = UNDEFINED_INTERVAL
    if exact is not None:
        out["exact_latency"] = exact
    if args.json:
        print(json.dumps(out, default=str))
    else:
        ci = out["ci95_latency"]
        interval = f"95% CI {ci[0]:.4g} to {ci[1]:.4g}" if ci else "95% CI undefined for one run"
        print(
            f"{args.topology}, K = {out['nodes']}, node {out['node']!r}, {args.scheduler}: mean "
            f"removal latency {out['mean_latency']:.4g} slots ({interval}, {out['runs']} run"
            f"{'s' if out['runs'] != 1 else ''}; {what})"
        )
        if "exact_latency" in out:
            print(f"  exact expectation: {out['exact_latency']:.6g} slots")
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from gossipsim.results.manifest import start_check

    folder = Path(args.dir)
    # every table file the folder records is hashed on a thread from now on, while the modules
    # below are imported (about a second): on two cores, verifying costs the command little time
    check = start_check(folder)
    with _collector_paused(getattr(args, "own_process", False)):
        from gossipsim.figures.standard import (  # matplotlib: imported with the collector paused
            FIGURES,
            plot_results,
        )
        from gossipsim.results.figuretables import load_figure_tables
        from gossipsim.results.folderfiles import check_output_folder

        if args.figure:
            unknown = [name for name in args.figure if name not in FIGURES]
            if unknown:
                raise ConfigError(
                    "--figure", f"unknown figure {unknown[0]!r}; allowed: {', '.join(FIGURES)}"
                )
        # a folder this gossipsim wrote: its tables and summary.json, without its study
        drawn = load_figure_tables(folder, check)
        results = None
        if drawn is None:  # another version's folder, or one without its graphs: the study too
            from gossipsim.results.results import load_results

            results = load_results(folder)
    check_output_folder(folder / "plots", "DIR")
    if results is not None and not results.graphs:  # an older folder, without graphs/: build them
        try:
            results.graphs = _graphs(results.study)
        except (ConfigError, OSError) as exc:
            print(f"gossipsim: note: graph drawing skipped ({exc})", file=sys.stderr)
    from gossipsim.core.libwarnings import HELD
    from gossipsim.results.nonfinite import nonfinite_lines

    try:
        with HELD.holding() as held:
            if drawn is not None:
                paths = plot_results(
                    drawn.metrics, drawn.runs, drawn.requests, drawn.visits, drawn.summary,
                    folder / "plots", fmt=args.format, statistic=args.statistic,
                    graphs=drawn.graphs, which=args.figure, particles=drawn.particles,
                )  # fmt: skip
                written: dict[str, Any] = {p.stem: p for p in paths}
            else:
                assert results is not None
                written = results.plot(
                    folder / "plots", which=args.figure, fmt=args.format, statistic=args.statistic
                )
    except Exception as exc:  # one line, never a traceback; the tables stay
        from gossipsim.execution.executors import describe_error

        _error_line(f"plotting {folder}/ failed ({describe_error(exc)})")
        return EXIT_FAILED
    if drawn is not None:  # the swept keys' columns are not read
        tables = {"metrics": drawn.metrics, "runs": drawn.runs, "requests": drawn.requests,
                  "particles": drawn.particles}  # fmt: skip
        _warn_nonfinite(nonfinite_lines(tables), held)
    else:
        assert results is not None
        _warn_nonfinite(results.nonfinite_values(), held)
    for path in written.values():
        print(path)
    if getattr(args, "own_process", False):
        gc.freeze()  # the process ends: a collection at exit would examine every object for nothing
    return 0


@contextlib.contextmanager
def _collector_paused(own_process: bool) -> Iterator[None]:
    """In a process that ends with the command (``own_process``), no garbage collection while the
    block imports modules and reads tables, which live to the end, and everything made so far
    frozen out of the collector's reach after it: collections examined them again and again
    (about 0.1-0.2 s of ``gossipsim plot`` on Fig. 3's folder). Elsewhere (``main(argv)`` called
    from Python) the collector is left alone."""
    if not own_process or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def _cmd_list(args: argparse.Namespace) -> int:
    from gossipsim.core.capabilities import EXACT_FACTORS, MEAN_GRADIENT
    from gossipsim.models import MODEL_KINDS
    from gossipsim.protocols import PROTOCOL_KINDS
    from gossipsim.scheduling import SCHEDULER_KINDS, scheduler_for
    from gossipsim.topology import TOPOLOGY_KINDS

    print("topologies ([topology] kind, --topology):")
    for name, spec in TOPOLOGY_KINDS.items():
        params = ", ".join(
            f"{p.name}" + ("" if p.default is None else f"={p.default}")
            for p in spec.params.values()
        )
        shown = ", ".join(p for p in ("nodes" if spec.needs_nodes else "", params) if p)
        print(f"  {name:<17} {spec.description}" + (f"  [{shown}]" if shown else ""))
    print("models ([model] kind):")
    for name, model in MODEL_KINDS.items():
        data = (
            ", ".join([p.name for p in model.data_params] + [k.name for k in model.data_keys])
            or "-"
        )
        exact = EXACT_FACTORS in model.capabilities
        how = (
            "exact conjugate factors"
            if exact
            else "expected log-likelihood gradients"
            if MEAN_GRADIENT in model.capabilities
            else "log-likelihood gradients at points (particle protocols)"
        )
        estimators = getattr(model, "estimators", ())
        extra = f"; estimators: {', '.join(estimators)}" if estimators and not exact else ""
        print(f"  {name:<22} {model.description}")
        print(f"  {'':<22} prior: {model.describe_prior()}; data: {data}; {how}{extra}")
    print('schedulers ([scheduler] kind; stays = "stepped", or "drawn" where marked):')
    for name, text in SCHEDULER_KINDS.items():
        drawn = "  [stays: drawn]" if scheduler_for(name).stay_kernel else ""
        print(f"  {name:<20} {text}{drawn}")
    print("protocols ([protocol] kind):")
    for name, kind in PROTOCOL_KINDS.items():
        text = kind.describe()
        print(f"  {name:<6} {text}")
    print(
        'models, schedulers and protocols of your own: kind = "module:Class" (an import path; '
        "see docs/extending.md)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
