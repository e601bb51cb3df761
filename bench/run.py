"""``make bench``: run every figure and write bench/results.md."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import confirm_overhead, fsyncs, ledger_scale, throughput
from bench.common import Stat

RESULTS = Path(__file__).resolve().parent / "results.md"


def _machine() -> list[str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = ", ".join(
        f"{name} {importlib.metadata.version(name)}"
        for name in ("undogate", "httpx", "httpcore", "starlette", "uvicorn")
    )
    return [
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {cpu}",
        f"- system: {platform.platform()}",
        f"- Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}; {versions}",
        f"- run at {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
    ]


def _throughput_section(client: str, runs: list[dict[str, float]]) -> list[str]:
    rate = Stat.of([r["throughput"] for r in runs])
    floor_rate = Stat.of([r["floor_throughput"] for r in runs])
    return [
        f"**{client}**",
        "",
        f"- undogate: {rate.median:.0f} jobs/s (min {rate.low:.0f}, max {rate.high:.0f})",
        f"- floor: {floor_rate.median:.0f} ops/s (min {floor_rate.low:.0f}, "
        f"max {floor_rate.high:.0f})",
        f"- ratio: {_runs([r['ratio'] for r in runs])}",
        "- latency p50 / p99 per run: "
        + "; ".join(f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f} ms" for r in runs)
        + " (floor: "
        + "; ".join(f"{r['floor_p50_ms']:.1f} / {r['floor_p99_ms']:.1f} ms" for r in runs)
        + ")",
        "- gateway CPU per prepare, 16 agents: "
        + ", ".join(f"{r['server_cpu_ms']:.2f} ms" for r in runs)
        + "; one agent alone: "
        + ", ".join(f"{r['server_cpu_alone_ms']:.2f} ms" for r in runs),
        "",
    ]


def _x(stat: Stat) -> str:
    """A ratio: the median of paired samples and their interquartile range."""
    return f"**{stat.median:.2f}×** (IQR {stat.low:.2f}–{stat.high:.2f})"


def _met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _runs(values: list[float]) -> str:
    return (
        f"**{statistics.median(values):.2f}×** (runs: "
        + ", ".join(f"{v:.2f}" for v in values)
        + ")"
    )


def main() -> int:
    lines = [
        "# Benchmarks",
        "",
        "Written by `make bench` (bench/run.py). Every ratio is "
        "measured against its floor in the same run.",
        "",
        *_machine(),
        "",
    ]
    with tempfile.TemporaryDirectory(prefix="undogate-bench-") as tmp:
        work = Path(tmp)
        print("1/4 confirm overhead ...", flush=True)
        confirm = confirm_overhead.run(work / "confirm", trials=15)
        print("2/4 prepare throughput (3 runs on each client) ...", flush=True)
        runs: list[dict[str, float]] = []
        httpx_runs: list[dict[str, float]] = []
        for i in range(3):
            runs.append(throughput.run(work / f"throughput-{i}", "http.client"))
            httpx_runs.append(throughput.run(work / f"throughput-httpx-{i}", "httpx"))
        print("3/4 ledger scale (1,000 vs 100,000 jobs) ...", flush=True)
        scale = ledger_scale.run(work / "scale")
        print("4/4 fsyncs per applied action ...", flush=True)
        durability = fsyncs.run(work / "fsyncs")

    tp_runs = [r["ratio"] for r in runs]
    httpx_tp_runs = [r["ratio"] for r in httpx_runs]
    lines += [
        "## Summary",
        "",
        "| figure | result | target | met |",
        "|---|---|---|---|",
        f"| confirm of an 8-change mixed job / floor | {_x(confirm['ratio'])} | ≤ 1.3× | "
        f"{_met(confirm['ratio'].median <= 1.3)} |",
        f"| prepare throughput, 16 agents / floor | {_runs(tp_runs)} | ≥ 0.5× | "
        f"{_met(statistics.median(tp_runs) >= 0.5)} |",
        f"| the same, agents and floor on httpx | {_runs(httpx_tp_runs)} | ≥ 0.5× | "
        f"{_met(statistics.median(httpx_tp_runs) >= 0.5)} |",
        f"| job list, 100k / 1k jobs | {_x(scale['list_ratio'])} | ≤ 1.5× | "
        f"{_met(scale['list_ratio'].median <= 1.5)} |",
        f"| job detail, 100k / 1k jobs | {_x(scale['detail_ratio'])} | ≤ 1.5× | "
        f"{_met(scale['detail_ratio'].median <= 1.5)} |",
        f"| start-up recovery, 100k / 1k jobs | {_x(scale['recovery_ratio'])} | "
        f"flat: must not read every job | {_met(scale['recovery_ratio'].median <= 1.5)} |",
        f"| start-up open (identity, WAL and `quick_check` of the whole file), 100k / 1k "
        f"jobs | {_x(scale['open_ratio'])} ({scale['open_large'].median * 1000:.0f} ms at "
        "100k) | report: reads every page on purpose | |",
        "| fsyncs per applied action | "
        + (f"**{durability['per_action']:.2f}** (minimum 2)" if durability else "strace missing")
        + " | report | |",
        f"| peak RSS of `undogate serve` (throughput run) | "
        f"{max(r['peak_rss_mib'] for r in runs + httpx_runs):.1f} MiB | report | |",
        "",
        "## 1. Confirm overhead",
        "",
        "An 8-change job (4 JSON records, 4 text documents) confirmed against the contract "
        "server on loopback (its own process), 15 trials after a warm-up, each followed by "
        "its floor (the ratio is taken per pair). Floor: the same "
        "requests (8 whole-preview reads, 8 conditional writes, 8 read-backs) sent with one "
        "keep-alive httpx client, plus 16 fsync'd SQLite commits, in the same process.",
        "",
        f"- confirm: {confirm['confirm'].fmt()}",
        f"- floor: {confirm['floor'].fmt()}",
        f"- ratio: {_x(confirm['ratio'])}",
        "",
        "Bounded by: the server's write latency (each write persists a file) and 16 fsyncs, "
        "which both sides pay; the rest is ours: a fresh TCP connection per write (a "
        "stale keep-alive socket must never turn a write into a false `uncertain`), the "
        "address check on every request, lossless JSON parsing and the per-action events.",
        "",
        "## 2. Prepare throughput",
        "",
        "16 agents, each with its own token and resource, each sending 40 single-change "
        "prepares in sequence over one keep-alive connection to `POST /api/v1/jobs` on a "
        "running `undogate serve`. Floor: the same number of raw GETs to the contract "
        "server, each followed by one fsync'd commit (serialised, as a single ledger must), "
        "from 16 threads on the same client. 3 runs per client, interleaved.",
        "",
        "The headline uses `http.client`, the lightest Python client, on both sides: the "
        "load generator shares the 2 cores with the gateway and the contract server, and a "
        "heavier client mostly measures itself. With httpx on both sides the floor is less "
        "than half as fast, so the same gateway scores a much better ratio; both are shown.",
        "",
        *_throughput_section("http.client", runs),
        *_throughput_section("httpx", httpx_runs),
        "Bounded by: the gateway's CPU. `undogate serve` is one Python process; during the "
        "run it kept about one core busy ("
        f"{statistics.median(r['server_busy'] for r in runs) * 100:.0f}%), at "
        f"{statistics.median(r['server_cpu_ms'] for r in runs):.2f} ms of CPU per prepare. "
        "A prepare from one agent alone costs "
        f"{statistics.median(r['server_cpu_alone_ms'] for r in runs):.2f} ms: the agent's "
        "request in and the reply out (uvicorn, Starlette), the remote read (httpcore and "
        "h11, pure Python), the lossless parse and plan, and one fsync'd commit of four "
        "rows. The difference is 16 threads contending for one interpreter lock (system "
        "time, context switches). The floor pays none of the agent-facing half, and only "
        "the client side of its GET: reaching 0.5× would need a prepare under about "
        f"{2000 / statistics.median(r['floor_throughput'] for r in runs):.2f} ms of "
        "gateway CPU at 16-way concurrency. Already done: keys verified once skip the "
        "ledger and a thread hop; remote requests go straight to httpcore; a record's "
        "canonical size is computed only when its body is over the limit. Tried and not "
        "kept: group commit (no gain while the process is CPU-bound), uvloop, a smaller "
        "worker pool (about +15%, but one slow remote would stall every agent).",
        "",
        "## 3. Ledger scale",
        "",
        f"- fill: 1,000 jobs {scale['fill_1000'].median:.1f} s, 100,000 jobs "
        f"{scale['fill_100000'].median:.1f} s",
        f"- job list (newest 100 of one agent): {scale['list_small'].fmt()} vs "
        f"{scale['list_large'].fmt()} → {_x(scale['list_ratio'])}",
        f"- job detail (random id): {scale['detail_small'].fmt()} vs "
        f"{scale['detail_large'].fmt()} → {_x(scale['detail_ratio'])}",
        f"- start-up recovery: {scale['recovery_small'].fmt()} vs "
        f"{scale['recovery_large'].fmt()} → {_x(scale['recovery_ratio'])}",
        f"- start-up open (identity, WAL check, `quick_check`, migrations): "
        f"{scale['open_small'].fmt()} vs {scale['open_large'].fmt()} → "
        f"{_x(scale['open_ratio'])}",
        "",
        "Bounded by: B-tree depth (indexes on owner, agent and sequence; on job id). "
        "Recovery reads only in-flight actions, running jobs and changed resource "
        "identities (partial indexes), never every job; counters for the limits live in "
        "one row. Opening reads every page once on purpose: `PRAGMA quick_check` is how a "
        "damaged ledger is refused at start instead of discovered mid-confirm "
        "(docs/recovery.md), so it grows with the file.",
        "",
        "## 4. Durability",
        "",
    ]
    if durability:
        lines += [
            f"- {durability['jobs']:.0f} single-change jobs prepared and previewed: "
            f"{durability['fsyncs_setup']:.0f} fsync/fdatasync calls; with their confirms: "
            f"{durability['fsyncs_with_confirm']:.0f}",
            f"- **{durability['per_action']:.2f} fsyncs per applied action** (minimum 2: the "
            "intent before the request, the outcome after it). The operation's start rides "
            "in the first intent's commit and its finish in the last outcome's.",
        ]
    else:
        lines.append("- not measured: `strace` is not installed")
    lines += [
        "",
        "## 5. Memory",
        "",
        "- peak RSS (VmHWM) of `undogate serve` after each throughput run: "
        + ", ".join(f"{r['peak_rss_mib']:.1f} MiB" for r in runs + httpx_runs),
        "",
    ]
    RESULTS.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
