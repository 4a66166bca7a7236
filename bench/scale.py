"""One run, a million supersteps: ``make bench-scale`` (or ``python bench/scale.py``).

The contract is DESIGN.md's "One run, a million supersteps". For one run of
N supersteps (the chain of ``longrun_work.py``: one node appending one
~200-byte message a superstep; default N = 1,000,000 on SQLite and 200,000 on
PostgreSQL, in a database the bench creates on ``--pg-server`` and drops) it
measures, each figure against its target:

1. the cost per superstep of the last 1,000 against the first 1,000 (<= 1.1x);
2. ``get_state``, the engine's head load and ``resume`` at N against the same
   on a 1,000-superstep run in the same store (<= 3x each);
3. storage bytes per superstep at marks along the way (1k, 10k, 100k, N): O(n)
   read as bytes/superstep at N at most 1.5x that at the first mark of 10k
   or more (the first mark when the run is shorter);
4. ``history(limit=50)``: the first page and a page from the middle of the run,
   against the same pages of the 1,000-superstep run (<= 3x), and
   ``prune(keep_last=1000)`` on the long run: its time and what it keeps (the
   last 1,000 checkpoints, the head's whole state);
5. a small run (2,000 supersteps) in the same store while another process
   reads the long run (history pages, ``get_state``): its worst superstep
   against its median (<= 5x); alone before and after, for comparison.

Each store in this order, every step a fresh worker process: the build (the
1,000-superstep run, then the long run), the head loads and pages, the small
run alone / beside the reader / alone, the profiles of the misses, and last
``resume`` of both runs and ``prune`` (which change the long run). For a
missed target the section carries a cProfile summary of where the time goes
(the 1,000 supersteps after the first window and before the last one for 1;
one ``get_state`` of the long run for 2; the small run beside the reader for
5), and Python's full garbage collections are counted during the build and
the small runs (a worst superstep they fell in is named so).

The long run is a real run of the engine, every superstep committed by the
store; nothing is written around it. Building it is the cost (about 0.6 ms a
superstep on SQLite and 1.3 ms on PostgreSQL on this machine), so the build
of each store stops at its time budget (``--build-minutes``) and the run
ends there, waiting, at the superstep it reached: every figure is then
measured at that N, which the section states with the time the full N would
need at the measured rate.

Options: ``--supersteps N`` (SQLite; e.g. 2000 for a quick look),
``--pg-supersteps N`` (0: no PostgreSQL), ``--pg-server DSN`` (default
``$DURABLE_FLOW_BENCH_PG_DSN`` or this machine's server), ``--build-minutes
S,P`` (each store's build budget, default 11,4.5), ``--reps N``, ``--out DIR``
(the folder of the RESULTS.md written; default ``bench/``). The section goes
between the ``scale`` markers of RESULTS.md, a summary to stdout, the raw
results to ``$TMPDIR/df-scale-results.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import longrun_report as report  # noqa: E402
from longrun import code_dir, log, spawn  # noqa: E402
from sections import markers, replace_section  # noqa: E402

FLAT, LOADS, STORAGE, PAGES, BESIDE = 1.1, 3.0, 1.5, 3.0, 5.0
MARKS = (1_000, 10_000, 100_000)
STORES = {"sqlite": 'SQLite (`synchronous="normal"`)', "postgres": "PostgreSQL"}
READS = (("get_state", "`get_state` (head)"), ("loader", "head load (engine loader)"),
         ("resume", "`resume` with the answer"))
PAGE_READS = (("page_first", "`history(limit=50)` first page"),
              ("page_middle", "`history(limit=50, before=<superstep N/2>)`"))


def work(name: str, args: dict[str, Any], timeout: float = 3600) -> Any:
    return spawn(name, args, timeout, module="scale_work")


@contextlib.contextmanager
def place(kind: str, server: str) -> Iterator[str]:
    """A fresh folder (SQLite) or database (PostgreSQL) for one store's runs."""
    if kind == "sqlite":
        folder = tempfile.mkdtemp(prefix="df-scale-")
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    else:
        from bulk import database

        with database(server, prefix="df_bench_scale") as dsn:
            yield dsn


def measure(kind: str, where: str, n: int, budget_s: float, args: argparse.Namespace
            ) -> dict[str, Any]:
    """Every figure of one store; a failed step is recorded, the others still run."""
    small = min(1000, max(10, n // 2))
    window = min(1000, max(1, n // 10))
    out: dict[str, Any] = {"n": n, "small": small, "window": window, "errors": {}}
    t0 = time.perf_counter()
    b = work("build", {"kind": kind, "where": where, "n": n, "window": window,
                       "marks": sorted({m for m in MARKS if m < n} | {max(1, n // 4)}),
                       "budget_s": budget_s,
                       "small": small})
    out["build"] = b
    reached = b["reached"]
    st = b["steps"]
    log(f"{kind}: {reached:,} of {n:,} supersteps in {b['seconds']:.0f}s "
        f"({b['seconds'] / max(reached, 1) * 1e3:.3f} ms each); first {st['first_ms']:.3f} -> "
        f"last {st['last_ms']:.3f} ms")
    small_run = min(2000, max(50, n // 10))
    runs = {"kind": kind, "where": where, "run_id": b["run_id"], "n": reached}
    beside = {**runs, "small": small_run, "window": min(100, small_run // 10), "cap_s": 60.0}
    with guard(out, "reads"):
        out["reads"] = work("reads", {**runs, "small_id": b["small_id"], "small": small,
                                      "reps": args.reps})
        log(f"{kind}: head loads and pages read")
    for mode in ("alone", "reader", "alone", "frozen reader"):
        with guard(out, f"beside {mode}"):
            r = work("beside", {**beside, "reader": mode != "alone",
                                "freeze": mode == "frozen reader"})
            out.setdefault("beside", []).append(r)
            log(f"{kind} beside {mode}: median {r['steps']['median_ms']:.3f} ms, worst "
                f"{r['steps']['worst_ms']:.2f} ms at {r['steps']['worst_at']:,}, full "
                f"collections {r['gc']}, reads {r['reads']}")
    # where the time goes, for the misses (before the long run is resumed and pruned)
    out["profiles"] = {}
    if "beside" in missed_keys(kind, out):
        with guard(out, "profile beside"):
            out["profiles"]["beside"] = work("beside", {**beside, "reader": True,
                                                        "profile": True})["profile"]
    if missed_keys(kind, out) & {"get_state", "loader"}:
        with guard(out, "profile get_state"):
            out["profiles"]["get_state"] = work("profile_read", {**runs, "what": "get_state"}
                                                )["summary"]
    with guard(out, "finish"):
        out["finish"] = work("finish", {**runs, "small_id": b["small_id"], "small": small,
                                        "keep": min(1000, max(1, reached // 10))})
        log(f"{kind}: resumed {out['finish']['resume']}, pruned {out['finish']['prune']}")
    out["seconds"] = time.perf_counter() - t0
    return out


def missed_keys(kind: str, res: dict[str, Any]) -> set[str]:
    """The keys of the figures measured so far that missed their target."""
    return {f["key"] for f in store_figures(kind, res) if f["met"] is False}


@contextlib.contextmanager
def guard(out: dict[str, Any], name: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        log(f"{name} FAILED: {str(exc)[-1500:]}")
        out["errors"][name] = str(exc)[-3000:]


# --------------------------------------------------------------------------- figures
def _median(samples: list[float] | None) -> float | None:
    return statistics.median(samples) if samples else None


def store_figures(kind: str, res: dict[str, Any]) -> list[dict[str, Any]]:
    """One dict per figure: key, text (with its target), measured, met (None: not measured)."""
    name = STORES[kind]
    b = res.get("build") or {}
    reached = b.get("reached", 0)
    out: list[dict[str, Any]] = []
    st = b.get("steps") or {}
    if st.get("supersteps"):
        r = st["last_ms"] / st["first_ms"]
        out.append({"key": "superstep", "text": f"{name}: cost per superstep, last {st['window']:,}"
                    f" / first {st['window']:,} of {st['supersteps']:,} <= {FLAT}x",
                    "measured": f"{r:.2f}x ({report.ms(st['first_ms'])} -> "
                                f"{report.ms(st['last_ms'])} ms)", "met": r <= FLAT})
    else:
        out.append({"key": "superstep", "text": f"{name}: cost per superstep <= {FLAT}x",
                    "measured": "not measured", "met": None})
    samples = (res.get("reads") or {}).get("samples", {})
    big, small = samples.get("n", {}).get("samples", {}), samples.get("small", {}).get("samples", {})
    resumed = (res.get("finish") or {}).get("resume", {})
    big, small = ({**big, "resume": [resumed["n"]]} if "n" in resumed else big,
                  {**small, "resume": [resumed["small"]]} if "small" in resumed else small)
    for key, label in (*READS, *PAGE_READS):
        target = PAGES if key.startswith("page") else LOADS
        a, c = _median(big.get(key)), _median(small.get(key))
        r = report.ratio(a, c)
        out.append({"key": key, "text": f"{name}: {label} at {reached:,} / at {res['small']:,} "
                                        f"supersteps <= {target:g}x",
                    "measured": f"{report.fmt_ratio(r)} ({report.ms(c and c * 1e3)} -> "
                                f"{report.ms(a and a * 1e3)} ms)" if r is not None
                                else "not measured", "met": None if r is None else r <= target})
    sizes = b.get("sizes") or []
    per = [(s["superstep"], s["bytes"] / s["superstep"]) for s in sizes if s["superstep"]]
    if per:
        ref = next((p for p in per if p[0] >= 10_000), per[0])
        r = per[-1][1] / ref[1] if ref[1] else None
        along = ", ".join(f"{k:,}: {v:,.0f}" for k, v in per)
        out.append({"key": "storage", "text": f"{name}: storage O(n), bytes/superstep at "
                                              f"{per[-1][0]:,} / at {ref[0]:,} <= {STORAGE:g}x",
                    "measured": f"{report.fmt_ratio(r)} (bytes/superstep at {along})",
                    "met": None if r is None else r <= STORAGE})
    else:
        out.append({"key": "storage", "text": f"{name}: storage O(n) <= {STORAGE:g}x",
                    "measured": "not measured", "met": None})
    pr = (res.get("finish") or {}).get("prune")
    if pr:
        keep = pr["keep"]
        ok = (pr["after"] == keep and pr["removed"] == pr["before"] - keep
              and pr["messages"] == reached and pr["page_after"] == min(50, keep))
        out.append({"key": "prune", "text": f"{name}: `prune(keep_last={keep})` on the long run "
                                            f"keeps the last {keep:,} checkpoints and the whole "
                                            "head state",
                    "measured": f"{pr['seconds']:.2f} s; {pr['before']:,} -> {pr['after']:,} "
                                f"checkpoints ({pr['removed']:,} removed); head superstep "
                                f"{pr['head_superstep']:,} with {pr['messages']:,} messages; "
                                f"first page after: {pr['page_after']}", "met": ok})
    else:
        out.append({"key": "prune", "text": f"{name}: `prune` on the long run",
                    "measured": "not measured", "met": None})
    runs = res.get("beside") or []
    with_reader = [r for r in runs if r["reader"] and not r.get("freeze")]
    alone = [r for r in runs if not r["reader"]]
    frozen = [r for r in runs if r.get("freeze")]
    if with_reader:
        base = "; alone: " + ", ".join(
            f"{a['steps']['worst_ms'] / a['steps']['median_ms']:.1f}x (at "
            f"{a['steps']['worst_at']:,}{gc_note(a)})" for a in alone)
        r, measured = _worst_over_median(with_reader[0])
        out.append({"key": "beside", "text": f"{name}: a {with_reader[0]['small']:,}-superstep run "
                                             "beside a reader of the long run, worst superstep / "
                                             f"median <= {BESIDE:g}x",
                    "measured": f"{measured}{base if alone else ''})", "met": r <= BESIDE})
    else:
        out.append({"key": "beside", "text": f"{name}: a small run beside a reader of the long run "
                                             f"<= {BESIDE:g}x", "measured": "not measured",
                    "met": None})
    if frozen:  # the small run's process as a `durable-flow worker`: its start-up heap frozen
        r, measured = _worst_over_median(frozen[0])
        out.append({"key": "beside_frozen",
                    "text": f"{name}: the same beside the reader, its process's start-up heap "
                            "frozen as `durable-flow worker` does, worst superstep / median "
                            f"<= {BESIDE:g}x",
                    "measured": f"{measured})", "met": r <= BESIDE})
    return out


def _worst_over_median(run: dict[str, Any]) -> tuple[float, str]:
    """A small run's worst superstep over its median, and its figures (without the ")")."""
    s = run["steps"]
    r = s["worst_ms"] / s["median_ms"]
    return r, (f"{r:.1f}x (median {report.ms(s['median_ms'])} ms, p99 {report.ms(s['p99_ms'])}, "
               f"worst {report.ms(s['worst_ms'])} ms at superstep {s['worst_at']:,}{gc_note(run)}")


def gc_note(run: dict[str, Any]) -> str:
    """", a full garbage collection of X ms in it" when one fell in the run's worst superstep."""
    hit = [ms for at, ms in (run.get("gc") or {}).get("all", []) if at == run["steps"]["worst_at"]]
    return f", a full garbage collection of {hit[0]:.0f} ms in it" if hit else ""


def figure_line(f: dict[str, Any]) -> str:
    verdict = "n/a" if f["met"] is None else "met" if f["met"] else "MISSED"
    return f"[{verdict}] {f['text'].replace('`', '')}: {f['measured']}"


# --------------------------------------------------------------------------- the section
def render(res: dict[str, Any]) -> str:
    start, end = markers("scale")
    lines = [start, "## One run, a million supersteps", "",
             "Written by `bench/scale.py` (`make bench-scale`); regenerated in place (only the "
             "text between the `scale` markers). The contract is DESIGN.md's \"One run, a "
             "million supersteps\". Ratios within one run: the machine is a shared 2-core box.",
             "", f"Generated {res['date']} by `{res['command']}` in {res['wall_s'] / 60:.1f} min "
             f"(load average before/after: {res['load'][0]} / {res['load'][1]}).", "",
             *res["machine"], "", "### Method", "",
             "- The long run is the chain of `bench/longrun_work.py` (one node appending one "
             "~200-byte `Message` and adding 1 to a counter each superstep, asking once at the "
             "end so the run ends `waiting` with its head at superstep N), a real run of the "
             "engine: every superstep committed by the store, nothing written around it. Each "
             "store's build has a time budget; a build that reaches it stops there (its node "
             "asks at once) and every figure is measured at the N reached.",
             "- Cost per superstep: differences of neighbouring node starts; mean of the first "
             "and the last window. Loads, resume and pages: each sample on a new store object, "
             "median; the reference is a 1,000-superstep run built first in the same store. "
             "Storage: SQLite's used pages (`page_count - freelist_count`) or PostgreSQL's "
             "`pg_database_size`, less the size before the long run began, at each mark. "
             "Beside: a small run of the same chain in the same store, alone, while another "
             "process loops over `history(limit=50)` pages (walking back) and `get_state` of "
             "the long run, alone again. `resume` and `prune` come last (they change the long "
             "run).", ""]
    for kind in STORES:
        s = res["stores"].get(kind)
        if s is None:
            continue
        b = s.get("build") or {}
        lines += [f"### {STORES[kind]}", ""]
        if b:
            rate = b["seconds"] / max(b["reached"], 1)
            lines.append(f"- Long run: {b['reached']:,} of the {s['n']:,} supersteps asked for, "
                         f"built in {b['seconds']:.0f} s ({rate * 1e3:.3f} ms a superstep, CPU "
                         f"{b['cpu_s']:.0f} s)" + (
                             f"; **stopped by its {b['budget_s'] / 60:.0f}-minute budget**: the "
                             f"full {s['n']:,} would need about {rate * s['n'] / 60:.0f} min at "
                             "this rate" if b["stopped_by_budget"] else "") + ".")
            st = b["steps"]
            if st.get("supersteps"):
                lines.append("- Mean ms per superstep by tenth of the run: "
                             + ", ".join(report.ms(t) for t in st["tenths_ms"])
                             + f"; worst single {report.ms(st['worst_ms'])} ms at superstep "
                             f"{st['worst_at']:,}{gc_note(b)}.")
            g = b.get("gc") or {}
            if g.get("count"):
                lines.append(f"- Python's full garbage collections during the run: {g['count']:,}, "
                             f"{g['total_ms'] / 1e3:.1f} s in all, the longest "
                             f"{report.ms(g['worst_ms'])} ms at superstep {g['worst_at']:,}.")
        lines += ["", "| figure | target | measured | status |", "|---|---|---|---|"]
        for f in store_figures(kind, s):
            text, _, target = f["text"].rpartition(" <= ")
            if not target.endswith("x"):
                text, target = f["text"], "works"
            lines.append(f"| {text} | {('<= ' + target) if target != 'works' else target} | "
                         f"{f['measured']} | {report.status(f['met'])} |")
        lines.append("")
        profiles = dict(s.get("profiles") or {})
        figures = {f["key"]: f for f in store_figures(kind, s)}
        if figures["superstep"]["met"] is False:
            profiles["superstep (early window)"] = b["profiles"]["early"]
            profiles["superstep (late window)"] = b["profiles"]["late"]
        for name, text in profiles.items():
            lines += [f"Where the time goes, {name} (cProfile, by own time):", "", "```",
                      *text.splitlines()[:16], "```", ""]
        for name, err in (s.get("errors") or {}).items():
            lines.append(f"- error in {name}: `{err[-300:]}`".replace("\n", " "))
    lines.append(end)
    return "\n".join(lines)


def summary(res: dict[str, Any]) -> str:
    return "\n".join(figure_line(f) for kind in STORES if kind in res["stores"]
                     for f in store_figures(kind, res["stores"][kind]))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--supersteps", type=int, default=1_000_000, help="N on SQLite")
    parser.add_argument("--pg-supersteps", type=int, default=200_000,
                        help="N on PostgreSQL (0: not measured)")
    parser.add_argument("--pg-server", default=os.environ.get(
        "DURABLE_FLOW_BENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="the server the bench creates its database on (and drops it)")
    parser.add_argument("--build-minutes", default="11,4.5",
                        help="the SQLite and PostgreSQL builds' time budgets")
    parser.add_argument("--reps", type=int, default=3, help="samples of each read")
    parser.add_argument("--out", default=None, help="folder of the RESULTS.md to write")
    return parser.parse_args(argv)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--reader":
        import scale_work

        asyncio.run(scale_work.read_loop(**json.loads(sys.argv[2])))
        return
    args = parse_args()
    budgets = [float(x) * 60 for x in args.build_minutes.split(",")]
    out_dir = Path(args.out) if args.out else HERE
    out_dir.mkdir(parents=True, exist_ok=True)
    started, load0 = time.perf_counter(), report.loadavg()
    res: dict[str, Any] = {"stores": {}}
    plan = [("sqlite", args.supersteps, budgets[0]),
            ("postgres", args.pg_supersteps, budgets[-1])]
    for kind, n, budget in plan:
        if n <= 0:
            continue
        log(f"{kind}: a run of {n:,} supersteps (build budget {budget / 60:g} min)")
        try:
            with place(kind, args.pg_server) as where:
                res["stores"][kind] = measure(kind, where, n, budget, args)
        except Exception as exc:
            log(f"{kind} FAILED: {str(exc)[-1500:]}")
            res["stores"][kind] = {"n": n, "small": 1000, "errors": {"build": str(exc)[-3000:]}}
    res.update(wall_s=time.perf_counter() - started, load=(load0, report.loadavg()),
               date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
               command="python bench/scale.py" + "".join(f" {a}" for a in sys.argv[1:]),
               machine=report.machine_lines(ROOT, code_dir()))
    raw = Path(tempfile.gettempdir()) / "df-scale-results.json"
    raw.write_text(json.dumps(res, indent=1))
    path = out_dir / "RESULTS.md"
    replace_section(path, "scale", render(res))
    print(summary(res))
    log(f"done in {res['wall_s'] / 60:.1f} min; raw results {raw}; see {path}")


if __name__ == "__main__":
    main()
