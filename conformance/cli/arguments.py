"""The command line: every command, its arguments and their help."""

from __future__ import annotations

import argparse

from conformance.cli.preflight import DEFAULT_BUDGET, DEFAULT_TIMEOUT
from conformance.run.invocation import HYPOTHESIS_PROFILES

DESCRIPTION = "python -m conformance certify | report | diff | verify | merge | scoreboard | replay | list"


def parser() -> argparse.ArgumentParser:
    from conformance import __version__
    from conformance.run.cluster import DEFAULT_RETRIES

    p = argparse.ArgumentParser(prog="python -m conformance", description=DESCRIPTION)
    p.add_argument("--version", action="version", version=f"torch-backend-conformance {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("certify", help="certify a backend and write reports/NAME/report.{json,md}")
    c.add_argument(
        "backend",
        nargs="+",
        help="entry-point name (see `list`), module:attr or path.py:attr; several share one "
        "pytest session and the profile, each gets its own report",
    )
    c.add_argument(
        "--profile",
        default=None,
        help="certification profile: a name `list` shows, `claimed` (the ops the backend claims), or a profiles "
        "file FILE.toml[:NAME] in specs/profiles.toml's format (default: the backend's own, usually full)",
    )
    c.add_argument(
        "--ops",
        action="append",
        default=None,
        metavar="PATTERNS",
        help="only these ops of the profile: comma-separated names or patterns (aten.add.*, *conv*); repeatable",
    )
    c.add_argument(
        "--dtypes",
        action="append",
        default=None,
        metavar="DTYPES",
        help="only these dtypes of the profile, comma-separated (float32,int32); repeatable",
    )
    c.add_argument("--output", default="reports", help="where reports go: each backend's into OUTPUT/NAME/ (default: reports)")
    c.add_argument(
        "--hypothesis-profile",
        default="ci",
        choices=HYPOTHESIS_PROFILES,
        help="examples drawn per NUM check: ci 8 (default, derandomized), dev 100, thorough 1000 (nightly)",
    )
    c.add_argument(
        "--workers",
        default="auto",
        help="pytest-xdist workers (default auto: the cores, or with --cluster a shard's CPUs; "
        "0 runs in-process, no crash isolation)",
    )
    c.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per check before TIMEOUT")
    c.add_argument(
        "--hard-timeout",
        type=float,
        default=None,
        help="seconds after which a check's process is killed (default 2 x --timeout + 10)",
    )
    c.add_argument("--skip-perf", action="store_true", help="skip the performance session")
    c.add_argument(
        "--cache-dir",
        default=None,
        metavar="DIR",
        help="where programs, lowerings and compiled packages are cached on disk, or 'off' "
        "(default: $XDG_CACHE_HOME/torch-backend-conformance)",
    )
    c.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_BUDGET,
        help=f"seconds the whole run may take; checks left then are recorded not run (default {DEFAULT_BUDGET})",
    )
    c.add_argument("--shard", default=None, metavar="I/N", help="run shard I of N; merge shards with `merge`")
    c.add_argument(
        "--record-not-run",
        default=None,
        metavar="REASON",
        help="with --shard I/N: run nothing, record every check of the shard not run for REASON (its machine left no "
        "results), to merge with the other shards (exit 1)",
    )
    c.add_argument(
        "--cluster",
        default=None,
        metavar="ADDRESS",
        help="run the shards on a Ray cluster and merge them here: a Ray address, 'auto' (the cluster this machine "
        "belongs to) or 'local' (a Ray started here); needs pip install 'torch-backend-conformance[cluster]'",
    )
    c.add_argument(
        "--shards", type=int, default=None, metavar="K", help="with --cluster: how many shards (default twice the nodes)"
    )
    c.add_argument(
        "--shard-cpus",
        type=int,
        default=None,
        metavar="C",
        help="with --cluster: CPUs each shard reserves on its node, and its --workers unless given (default half the smallest node's)",
    )
    c.add_argument(
        "--shard-retries",
        type=int,
        default=None,
        metavar="R",
        help=f"with --cluster: times a shard is started again on another node when its node dies (default {DEFAULT_RETRIES}); "
        "a shard lost every time has its checks recorded not run",
    )
    c.add_argument(
        "--cluster-workdir",
        default=None,
        metavar="DIR",
        help="with --cluster: where each node runs its shard, holding what relative paths name (default this directory)",
    )
    c.add_argument(
        "--durations-from",
        default=None,
        metavar="REPORT",
        help="a report.json whose check durations order this run longest first (default: the backend's "
        "previous report in --output, else --baseline; 'none' keeps contract checks first)",
    )
    c.add_argument(
        "--baseline",
        default=None,
        help="report.json of a previous run: also compare every check's category and timing with it; "
        "exit 6 on a regression (the verdict is printed and gives 1 when not certified)",
    )
    c.add_argument(
        "--sign",
        default=None,
        metavar="KEY.pem",
        help="sign report.json with this Ed25519 private key (PEM; make a pair: "
        "openssl genpkey -algorithm ed25519 -out KEY.pem && openssl pkey -in KEY.pem -pubout -out KEY.pub.pem)",
    )
    _gate_options(c)
    r = sub.add_parser("report", help="rebuild report.json and its renderings from DIR/results/*.json")
    r.add_argument("directory", nargs="+")
    r.add_argument("--sign", default=None, metavar="KEY.pem", help="sign report.json with this Ed25519 private key (PEM)")
    r.add_argument(
        "--rerender",
        action="store_true",
        help="write DIR/report.json (of this or a previous report format) again in this harness's format, with its "
        "renderings, from itself alone: its results and verdict as they were (not recomputed; a report of "
        "another spec stays stale), its integrity hash computed again over the new form",
    )
    rp = sub.add_parser("replay", help="re-run a saved failing example")
    rp.add_argument(
        "directory",
        help="a failing example's replay directory, as the report and the console print it (reports/NAME/replays/...)",
    )
    rp.add_argument("--backend", default=None, help="backend to run it on (default: the one that failed)")
    d = sub.add_parser(
        "diff",
        help="compare two reports; exit 6 on a regression (a result no longer passing, missing or failing, a dropped claim, a slowdown)",
    )
    d.add_argument("old")
    d.add_argument("new")
    _gate_options(d)
    d.add_argument(
        "--public-key",
        default=None,
        metavar="PUB.pem",
        help="Ed25519 public key (PEM): both reports must be signed by its private key",
    )
    v = sub.add_parser("verify", help="check a report's schema, integrity hash, signature, verdict and renderings")
    v.add_argument("report")
    v.add_argument(
        "--public-key",
        default=None,
        metavar="PUB.pem",
        help="Ed25519 public key (PEM): the report must be signed by its private key (without it: exit 5, signature not checked)",
    )
    v.add_argument(
        "--allow-stale", action="store_true", help="accept a report of another spec or harness version: check its integrity only"
    )
    m = sub.add_parser("merge", help="merge results documents (shards) into DIR/report.json")
    m.add_argument("directory", help="output directory, e.g. reports/mybackend")
    m.add_argument("results", nargs="+", help="results/*.json files or directories holding them")
    m.add_argument("--sign", default=None, metavar="KEY.pem", help="sign report.json with this Ed25519 private key (PEM)")
    sb = sub.add_parser("scoreboard", help="backends side by side from their report.json files")
    sb.add_argument("reports", nargs="+")
    sb.add_argument("--output", default="reports", help="directory for scoreboard.md/html (default: reports)")
    ls = sub.add_parser("list", help="list backends found through entry points, and the profiles")
    ls.add_argument("--ops", action="store_true", help="list every spec'd op with its dtypes (core: in torch's core ATen set)")
    for command in (c, r, rp, d, v, m, sb, ls):
        command.add_argument(
            "--specs",
            default=None,
            metavar="DIR",
            help="the spec of record to use instead of the installed one (a specs/ directory)",
        )
    return p


def _gate_options(p: argparse.ArgumentParser) -> None:
    from conformance.report.diff import DEFAULT_THRESHOLD

    p.add_argument("--waivers", default=None, help="TOML file of waivers ([[waiver]] id, reason, tracking, expires)")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help="performance regression ratio (default 1.25)")
    p.add_argument(
        "--allow-stale", action="store_true", help="compare reports of another spec, profile or harness version by check id"
    )
