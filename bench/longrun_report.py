"""The long-run section of ``bench/RESULTS.md``: targets and tables (see ``longrun.py``)."""

from __future__ import annotations

import os
import platform
import sqlite3
import statistics
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from machine import cpu_and_memory
from sections import markers, replace_section

START, END = markers("longrun")
FLAT = 1.2  # last window / first window, ms per superstep
LOADS = 3.0  # largest run / smallest run, medians
STALL = 5.0  # worst superstep beside the readers / median superstep alone
STORE = {"memory": "MemoryStore", "normal": 'SqliteStore, synchronous="normal"',
         "full": 'SqliteStore, synchronous="full"'}
READS = [("get_state", "`get_state(run_id)` (head)"),
         ("loader", "engine loader (`ThreadRunner.load`, head)"),
         ("resume", "`resume` with the answer (1 sample per run)"),
         ("page_first", "`history(limit=50)` first page"),
         ("page_middle", "`history(limit=50, before=<superstep N/2>)`"),
         ("history_full", "`history(run_id)`, all checkpoints (1 sample)")]
RATIO_TARGETS = ("get_state", "loader", "resume", "page_first", "page_middle")


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _ver(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_lines(root: Path, code: Path) -> list[str]:
    cpu, mem = cpu_and_memory()

    def git(*args: str) -> str:
        try:  # read-only: no optional locks, nothing written to the repository
            return subprocess.run(["git", "--no-optional-locks", *args], cwd=root,
                                  capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    head = git("rev-parse", "--short", "HEAD") or "?"
    if code.resolve() == (root / "durable_flow").resolve():
        changed = git("status", "--porcelain", "--", "durable_flow").splitlines()
        tree = (f"commit {head}, with {len(changed)} changed file(s) under `durable_flow/` "
                "in the working tree" if changed else
                f"commit {head}, `durable_flow/` as committed")
    else:
        tree = f"`durable_flow` imported from `{code}` (not this working tree)"
    return [
        f"- CPU: `nproc` = {len(os.sched_getaffinity(0))} ({cpu}); memory: {mem}; "
        "disk: the temporary folder's file system",
        f"- OS: {platform.platform()}",
        f"- Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}; "
        + ", ".join(f"{p} {_ver(p)}" for p in ("durable-flow", "langgraph",
                                              "langgraph-checkpoint-sqlite", "aiosqlite",
                                              "SQLAlchemy", "pydantic", "orjson")),
        f"- code: {tree}",
    ]


# --------------------------------------------------------------------------- formatting
def ms(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 100 else f"{x:,.0f}"


def med_best(samples: list[float] | None) -> str:
    """Seconds in, 'median (best)' in ms out."""
    if not samples:
        return "-"
    if len(samples) == 1:
        return ms(samples[0] * 1e3)
    return f"{ms(statistics.median(samples) * 1e3)} ({ms(min(samples) * 1e3)})"


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x" if x >= 0.1 else f"{x:.2g}x"


def fmt_bytes(x: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f} B"


def status(ok: bool | None) -> str:
    return "not measured" if ok is None else "met" if ok else "**missed**"


def _median(samples: list[float] | None) -> float | None:
    return statistics.median(samples) if samples else None


def _sizes(res: dict[str, Any], table: dict[str, Any]) -> list[int]:
    return [n for n in res["sizes"] if str(n) in table]


# --------------------------------------------------------------------------- targets
def targets(res: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for store in ("memory", "normal", "full"):
        b = res.get("superstep", {}).get(store)
        if not b or "steps" not in b:
            continue
        st = b["steps"]
        r = st["last_ms"] / st["first_ms"]
        stopped = " (stopped early by the time budget)" if b.get("stopped_by_budget") else ""
        out.append({"text": f"superstep cost flat, {STORE[store]}: last {st['window']:,} / "
                            f"first {st['window']:,} of {st['supersteps']:,}{stopped} <= {FLAT}x",
                    "measured": f"{r:.2f}x ({ms(st['first_ms'])} -> {ms(st['last_ms'])} ms)",
                    "met": r <= FLAT})
    sizes = res["sizes"]
    lo, hi = sizes[0], sizes[-1]
    for store, table in (("SQLite", res.get("loads", {})), ("MemoryStore", res.get("memory", {}))):
        if str(lo) not in table or str(hi) not in table:
            continue
        for key, label in READS:
            if key not in RATIO_TARGETS:
                continue
            a = _median(table[str(hi)].get("samples", {}).get(key))
            b = _median(table[str(lo)].get("samples", {}).get(key))
            r = ratio(a, b)
            out.append({"text": f"{store} {label}: {hi:,} / {lo:,} supersteps <= {LOADS:g}x",
                        "measured": f"{fmt_ratio(r)} ({ms(b and b * 1e3)} -> {ms(a and a * 1e3)} ms)",
                        "met": None if r is None else r <= LOADS})
    table = res.get("loads", {})
    if str(lo) in table and str(hi) in table:
        a = table[str(hi)].get("rows_returned", {}).get("get_state")
        b = table[str(lo)].get("rows_returned", {}).get("get_state")
        if isinstance(a, int) and isinstance(b, int):
            r = ratio(a, b)
            out.append({"text": f"SQLite rows returned to a head load (`get_state`): "
                                f"{hi:,} / {lo:,} supersteps <= {LOADS:g}x (O(log n))",
                        "measured": f"{fmt_ratio(r)} ({b:,} -> {a:,} rows)",
                        "met": None if r is None else r <= LOADS})
    lg = res.get("langgraph", {})
    for n in res.get("lg_sizes", []):
        if str(n) not in lg or str(n) not in table:
            continue
        ours = _median(table[str(n)].get("samples", {}).get("get_state"))
        theirs = _median(lg[str(n)].get("samples", {}).get("get_state"))
        r = ratio(ours, theirs)
        if n == res["lg_sizes"][-1]:
            out.append({"text": f"get_state(head) at {n:,} supersteps no slower than "
                                "LangGraph's aget_state",
                        "measured": f"{fmt_ratio(r)} ({ms(ours and ours * 1e3)} vs "
                                    f"{ms(theirs and theirs * 1e3)} ms)",
                        "met": None if r is None else r <= 1.0})
    st = res.get("stall", {})
    base = stall_baseline(st)
    for mode, label in (("thread", "a reader thread with its own Runtime and store"),
                        ("task", "a reader task on the same Runtime")):
        runs = st.get(mode) or []
        if not runs or base is None:
            continue
        worst = max(r["steps"]["worst_ms"] for r in runs)
        p99 = max(r["steps"]["p99_ms"] for r in runs)
        alone = max(r["steps"]["worst_ms"] for r in st.get("alone") or [])
        r = worst / base
        out.append({"text": f"reads never stall commits, {label}: worst superstep <= "
                            f"{STALL:g}x the median alone",
                    "measured": f"{r:.1f}x (worst {ms(worst)} ms, p99 {ms(p99)} ms = "
                                f"{p99 / base:.1f}x; alone: median {ms(base)} ms, worst "
                                f"{ms(alone)} ms = {alone / base:.1f}x)",
                    "met": r <= STALL})
    return out


def stall_baseline(st: dict[str, Any]) -> float | None:
    alone = st.get("alone") or []
    meds = [r["steps"]["median_ms"] for r in alone if "steps" in r]
    return statistics.median(meds) if meds else None


# --------------------------------------------------------------------------- tables
def superstep_table(res: dict[str, Any]) -> list[str]:
    rows = res.get("superstep", {})
    if not rows:
        return []
    w = res["window"]
    lines = [f"| store | supersteps | ms/superstep, first {w:,} | last {w:,} | last/first "
             "(target <= 1.2x) | same, medians | mean | median | p99 | worst single (at superstep) | "
             "supersteps over 10 ms | run, s | CPU, s | peak RSS, MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    tenths = ["| store | " + " | ".join(f"{i + 1}/10" for i in range(10)) + " |",
              "|---" * 11 + "|"]
    skipped = []
    for store in ("memory", "normal", "full"):
        b = rows.get(store)
        if not b:
            continue
        if "steps" not in b:
            skipped.append(f"- {STORE[store]}: {b.get('skipped', 'not measured')}")
            continue
        st = b["steps"]
        r = st["last_ms"] / st["first_ms"]
        reached = f"{st['supersteps']:,}" + (" (budget)" if b.get("stopped_by_budget") else "")
        lines.append(f"| {STORE[store]} | {reached} | {ms(st['first_ms'])} | {ms(st['last_ms'])} "
                     f"| {r:.2f}x {'met' if r <= FLAT else '**missed**'} | "
                     f"{st['last_median_ms'] / st['first_median_ms']:.2f}x | {ms(st['mean_ms'])} | "
                     f"{ms(st['median_ms'])} | {ms(st['p99_ms'])} | {ms(st['worst_ms'])} "
                     f"({st['worst_at']:,}) | {st['over_10ms']:,} | {b['seconds']:.1f} | "
                     f"{b['cpu_s']:.1f} | {b['rss_mb']:.0f} |")
        tenths.append(f"| {STORE[store]} | " + " | ".join(ms(t) for t in st["tenths_ms"]) + " |")
    out = [*lines, ""]
    if len(tenths) > 2:
        out += ["Mean ms per superstep by tenth of the run:", "", *tenths, ""]
    return out + ([*skipped, ""] if skipped else [])


def loads_table(res: dict[str, Any], table: dict[str, Any], fresh: bool) -> list[str]:
    sizes = _sizes(res, table)
    if not sizes:
        return []
    lo, hi = sizes[0], sizes[-1]
    head = ("| read | " + " | ".join(f"N = {n:,}" for n in sizes)
            + f" | {hi:,} / {lo:,} (target <= 3x) |")
    lines = [head, "|---" * (len(sizes) + 2) + "|"]
    for key, label in READS:
        cells = [med_best(table[str(n)].get("samples", {}).get(key)) for n in sizes]
        if all(c == "-" for c in cells):
            continue
        r = ratio(_median(table[str(hi)].get("samples", {}).get(key)),
                  _median(table[str(lo)].get("samples", {}).get(key)))
        mark = "" if key not in RATIO_TARGETS or r is None else (
            " met" if r <= LOADS else " **missed**")
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {fmt_ratio(r)}{mark} |")
    if fresh:
        for key, label in (("get_state", "rows SQLite returned to `get_state(head)`"),
                           ("loader", "rows SQLite returned to the engine loader"),
                           ("page_first", "rows SQLite returned to `history(limit=50)`")):
            vals = [table[str(n)].get("rows_returned", {}).get(key) for n in sizes]
            cells = [f"{v:,}" if isinstance(v, int) else "-" for v in vals]
            r = ratio(vals[-1], vals[0]) if all(isinstance(v, int) for v in
                                                (vals[0], vals[-1])) else None
            lines.append(f"| {label} | " + " | ".join(cells) + f" | {fmt_ratio(r)} |")
        stored = [table[str(n)].get("stored_rows", {}) for n in sizes]
        for key, label in (("log_rows", "log rows a head load reads (`log_chunks`, thread '', "
                                        "seq <= head; plain SQL)"),
                           ("value_rows", "`channel_values` rows at or before the head "
                                          "(plain SQL)"),
                           ("value_rows_referenced", "`channel_values` rows the head references")):
            vals = [s.get(key) for s in stored]
            if all(v is None for v in vals):
                errs = {s.get("error") for s in stored if s.get("error")}
                if errs:
                    lines.append(f"| {label} | " + " | ".join("-" for _ in sizes)
                                 + f" | {'; '.join(sorted(errs))[:200]} |")
                continue
            cells = [f"{v:,}" if isinstance(v, int) else "-" for v in vals]
            r = ratio(vals[-1], vals[0]) if all(isinstance(v, int) for v in
                                                (vals[0], vals[-1])) else None
            lines.append(f"| {label} | " + " | ".join(cells) + f" | {fmt_ratio(r)} |")
    errors = {f"{k} at {n:,}: {v}" for n in sizes
              for k, v in table[str(n)].get("errors", {}).items()}
    return [*lines, "", *([f"Errors: {'; '.join(sorted(errors))}", ""] if errors else [])]


def build_table(res: dict[str, Any]) -> list[str]:
    """How long building each run took (setup, not a target)."""
    lines = ["| run | " + " | ".join(f"N = {n:,}" for n in res["sizes"]) + " |",
             "|---" * (len(res["sizes"]) + 1) + "|"]
    for store, label in (("memory", "MemoryStore"), ("normal", 'SQLite "normal"')):
        builds = res.get("builds", {}).get(store, {})
        if not builds:
            continue
        cells = []
        for n in res["sizes"]:
            b = builds.get(str(n))
            cells.append("-" if not b or "steps" not in b else
                         f"{b['seconds']:.1f} s, {ms(b['steps']['mean_ms'])} ms/superstep"
                         + (f", {fmt_bytes(b['db_bytes'])}" if "db_bytes" in b else ""))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return [*lines, ""] if len(lines) > 2 else []


def langgraph_table(res: dict[str, Any]) -> list[str]:
    lg, ours = res.get("langgraph", {}), res.get("loads", {})
    sizes = [n for n in res.get("lg_sizes", []) if str(n) in lg]
    if not sizes:
        return []
    lines = ["| N | read | durable-flow | LangGraph | ours/theirs |", "|---|---|---|---|---|"]
    for n in sizes:
        o, t = ours.get(str(n), {}).get("samples", {}), lg[str(n)].get("samples", {})
        for key, label in (("get_state", "`get_state(run_id)` / `aget_state(config)` (head)"),
                           ("loader", "engine loader / `saver.aget_tuple(config)` (head)")):
            r = ratio(_median(o.get(key)), _median(t.get(key)))
            lines.append(f"| {n:,} | {label} | {med_best(o.get(key))} | {med_best(t.get(key))} "
                         f"| {fmt_ratio(r)} |")
        ob = res.get("builds", {}).get("normal", {}).get(str(n), {})
        tb = lg[str(n)].get("build", {})
        if ob.get("db_bytes") and tb.get("db_bytes"):
            lines.append(f"| {n:,} | database file after the run (setup) | "
                         f"{fmt_bytes(ob['db_bytes'])} in {ob['seconds']:.1f} s | "
                         f"{fmt_bytes(tb['db_bytes'])} in {tb['seconds']:.1f} s | "
                         f"{fmt_ratio(ob['db_bytes'] / tb['db_bytes'])} |")
    return [*lines, ""]


def stall_table(res: dict[str, Any]) -> list[str]:
    st = res.get("stall", {})
    if not st:
        return []
    base = stall_baseline(st)
    label = {"alone": "none (alone)", "thread": "thread: own event loop, own Runtime + store",
             "task": "task on the writer's loop, the writer's Runtime"}
    lines = ["| reader | supersteps | median ms | p99 ms | worst ms (at) | worst / alone median "
             "(target <= 5x) | run, s | reads done meanwhile: full history / pages / get_state "
             "| reader's ms, median (max): full history; page; get_state |",
             "|---|---|---|---|---|---|---|---|---|"]
    for mode in ("alone", "thread", "task"):
        for r in st.get(mode) or []:
            s = r["steps"]
            rr = ratio(s["worst_ms"], base)
            mark = "" if mode == "alone" or rr is None else (" met" if rr <= STALL else
                                                            " **missed**")
            rd = r["reads"]
            done = " / ".join(str(rd[k]["count"]) for k in ("history_full", "page", "get_state"))
            times = "; ".join(f"{ms(rd[k]['median_ms'])} ({ms(rd[k]['max_ms'])})"
                              for k in ("history_full", "page", "get_state"))
            steps = f"{s['supersteps']:,}" + (f" (stopped at {r['cap_s']:g} s)"
                                               if r.get("stopped_by_cap") else "")
            lines.append(f"| {label[mode]} | {steps} | {ms(s['median_ms'])} | "
                         f"{ms(s['p99_ms'])} | {ms(s['worst_ms'])} ({s['worst_at']:,}) | "
                         f"{fmt_ratio(rr)}{mark} | {r['seconds']:.2f} | "
                         f"{done if mode != 'alone' else '-'} | "
                         f"{times if mode != 'alone' else '-'} |")
    return [*lines, ""]


def code_lines(res: dict[str, Any]) -> list[str]:
    """A warning when the package changed under the benchmark, and when each phase began."""
    code = res.get("code") or {}
    phases = res.get("phases") or {}
    out = []
    if phases:
        out.append("- phases began (UTC): " + ", ".join(f"{k} {v}" for k, v in phases.items()))
    if code.get("changed"):
        out.append(f"- **the package changed while this ran** ({len(code['changed'])} file(s), "
                   "modification time UTC): the figures mix code versions: "
                   + ", ".join(f"`{c}`" for c in code["changed"]))
    return out


# --------------------------------------------------------------------------- the section
def render(res: dict[str, Any]) -> str:
    sizes = res["sizes"]
    big, w = sizes[-1], res["window"]
    reps = res["args"]["reps"]
    lines = [START, f"## Long runs: {big:,} supersteps", "",
             "Written by `bench/longrun.py` (`make bench-long`); regenerated in place (only the "
             "text between the `longrun` markers). Every figure is a ratio within this one run: "
             "the machine is a noisy shared 2-core box, so compare ratios, not absolute times "
             "across runs.", "",
             f"Generated {res['date']} by `{res['command']}` in {res['wall_s'] / 60:.1f} min "
             f"(load average before/after: {res['load'][0]} / {res['load'][1]}).", "",
             "### Machine and versions", "", *res["machine"], *code_lines(res), "",
             "### Method", "",
             "- Workload: one `async` node looping on itself (the chain of `bench/run.py`): each "
             "superstep appends one ~200-byte `Message` to `messages` (so the node's own history "
             "grows too) and adds 1 to an `Annotated[int, add]` counter, while `count < N`; "
             "`run(..., max_supersteps=N + 10)`. When the count reaches N the node calls "
             "`await ctx.request(...)` once, so every run ends `waiting` with its head at "
             "superstep N (one more superstep of the same node), ready to be resumed.",
             "- Every measurement is a fresh worker process (`longrun.py --worker SPEC`) in a "
             "fresh temporary folder; a run is built by one worker and its reads are measured "
             "by the next (warm page cache, cold Python). MemoryStore runs are built and read "
             "in the same worker (the store lives in that process).",
             f"- 1. Per-superstep cost: the node appends `time.perf_counter()` to a list at every "
             f"call; the difference of two neighbours is one superstep as `run` sees it (commit, "
             f"routing, the next task's start). Mean over the first {w:,} and the last {w:,} "
             f"supersteps of a {big:,}-superstep run, their ratio, the overall mean and the "
             f"worst single superstep. The same run on SQLite is the largest run of 2. "
             f"`synchronous=\"full\"` runs last, only if the time budget allows, and stops early "
             f"(ending waiting where it stands) when it would overrun.",
             f"- 2. Loads at N = {', '.join(f'{n:,}' for n in sizes)}: on SQLite each sample on a "
             f"new `SqliteStore` object (new connection; opening it is not timed); {reps} "
             "samples of each read, interleaved, fewer when one read's samples pass 20 s in all "
             "(at least 2), median (best). The engine loader is `ThreadRunner.load` on a "
             "`RunContext` (what `resume` uses after its checks). `resume` answers the run's "
             "request and runs it to completion (one sample per run: a fork copies the head "
             "into one checkpoint, so it would not load like the long run). The middle page is "
             "`history(limit=50, before=<id of superstep N/2>)`. Rows: the rows SQLite handed "
             "back to the store during one call (a bench-side `sqlite3.Connection` subclass "
             "counting `fetchall`/`fetchone`), and plain `count(*)` on the file of the log rows "
             "and value rows at or before the head.",
             f"- 3. LangGraph: the same chain (`bench/workloads_langgraph.py`, `AsyncSqliteSaver`, "
             f"`durability=\"sync\"`) at N = {', '.join(f'{n:,}' for n in res.get('lg_sizes', []))}; "
             "both sides' runs are built with `synchronous=NORMAL` (setup, not compared); "
             "`aget_state` and `saver.aget_tuple` on a new connection per sample.",
             f"- 4. Reads beside commits: a writer run of {res['stall_n']:,} supersteps (the same "
             f"chain, `synchronous=\"normal\"`) in a file that also holds a "
             f"{res['stall_source']:,}-superstep run; its per-superstep latency alone, then while "
             "a reader loops over the long run: full `history(run_id)`, 10 pages of "
             "`history(limit=50)` walking back with `before=`, `get_state(run_id)`. The reader "
             "is a thread with its own event loop and its own `Runtime(SqliteStore(same "
             "file))`, or a task on the writer's loop using the writer's `Runtime`. The "
             "alone run is measured before and after; the baseline is the median of their "
             f"medians. The writer stops early after {res.get('stall_cap', 30):g} s (a store "
             "whose reads hold up its commits would take many minutes).", ""]
    tg = targets(res)
    lines += ["### Targets", "", "| target | measured | status |", "|---|---|---|"]
    lines += [f"| {t['text']} | {t['measured']} | {status(t['met'])} |" for t in tg]
    lines.append("")
    if res.get("superstep"):
        lines += [f"### 1. Cost per superstep up to {big:,} supersteps", "",
                  *superstep_table(res)]
    if res.get("loads") or res.get("memory"):
        lines += ["### 2. Loading the head, resume and history pages", "",
                  "SQLite (`synchronous=\"normal\"` when built; reads on a fresh store "
                  "object each). Times in ms, median (best):", "",
                  *loads_table(res, res.get("loads", {}), fresh=True)]
        if res.get("memory"):
            lines += ["MemoryStore (in the process that built the run, same store object):", "",
                      *loads_table(res, res.get("memory", {}), fresh=False)]
        lines += ["Building the runs (setup; mean ms per superstep over the whole run, file "
                  "size with its WAL):", "", *build_table(res)]
    if res.get("langgraph"):
        lines += ["### 3. Against LangGraph", "", *langgraph_table(res)]
    if res.get("stall"):
        lines += ["### 4. Reads beside commits", "", *stall_table(res)]
    if res.get("errors"):
        lines += ["### Errors", ""] + [f"- {k}: `{v[-300:]}`".replace("\n", " ")
                                        for k, v in res["errors"].items()] + [""]
    lines.append(END)
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    """Replace the long-run section of ``path`` (or append it at the end)."""
    replace_section(path, "longrun", section)


def summary(res: dict[str, Any]) -> str:
    """The plain-text table ``longrun.py`` prints."""
    rows = [(("met" if t["met"] else "MISSED") if t["met"] is not None else "n/a",
             t["text"].replace("`", ""), t["measured"]) for t in targets(res)]
    if not rows:
        return "(nothing measured)"
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    return "\n".join(f"  [{a:<{w0}}] {b:<{w1}}  {c}" for a, b, c in rows)
