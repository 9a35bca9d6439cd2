#!/usr/bin/env python3
"""bench/report.py: the report of bench/run.sh.

    python3 bench/report.py OUT_DIR RESULT_PREFIX MODE

Reads what the runner measured (OUT_DIR/*.tsv), writes RESULT_PREFIX.md and,
with gnuplot, RESULT_PREFIX.png, and prints the summary.  Only the standard
library.
"""
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from datetime import datetime, timezone

out, prefix, mode = sys.argv[1], sys.argv[2], sys.argv[3]


def read_tsv(name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def read_text(name):
    path = os.path.join(out, name)
    return open(path).read() if os.path.exists(path) else ""


machine = {r[0]: r[1] for r in read_tsv("machine.tsv") if len(r) >= 2}
settings = read_tsv("settings.tsv")
sections = {r[0]: r for r in read_tsv("sections.tsv")}
scale_sizes = read_tsv("scale_sizes.tsv")
waits = read_tsv("waits.tsv")
problems = read_text("problems.txt")
server_errors = read_text("server_errors.txt")

# section contender round tps tx granted errors status duration clients load1
runs = defaultdict(lambda: defaultdict(dict))
info = defaultdict(lambda: defaultdict(list))
for r in read_tsv("runs.tsv"):
    s, c, rnd = r[0], r[1], int(r[2])
    tps, tx, granted, errs = float(r[3]), int(r[4]), int(r[5]), int(r[6])
    runs[s][c][rnd] = tps
    info[s][c].append(dict(tps=tps, tx=tx, granted=granted, errors=errs,
                           status=r[7], dur=float(r[8]), clients=int(r[9])))
mixed = defaultdict(dict)
for r in read_tsv("mixed.tsv"):
    mixed[(r[0], r[1])][r[2]] = dict(n=int(r[3]), median=float(r[4]), mean=float(r[5]))


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def tps_stats(s, c):
    xs = [runs[s][c][k] for k in sorted(runs[s][c])]
    return med(xs), (min(xs) if xs else 0), (max(xs) if xs else 0), xs


def paired(s, a, b):
    """per-round ratios a/b of rounds both ran in"""
    rs = sorted(set(runs[s][a]) & set(runs[s][b]))
    return [runs[s][a][k] / runs[s][b][k] for k in rs if runs[s][b][k] > 0]


def ratio_block(s, a, b):
    pr = paired(s, a, b)
    ma, mb = tps_stats(s, a)[0], tps_stats(s, b)[0]
    return dict(paired=med(pr), lo=min(pr) if pr else 0, hi=max(pr) if pr else 0,
                of_medians=(ma / mb) if mb else float("nan"), n=len(pr))


def f1(x):
    return f"{x:,.1f}".replace(",", " ")


def f0(x):
    return f"{x:,.0f}".replace(",", " ")


def r3(x):
    return f"{x:.3f}"


def pct(x):
    return f"{x * 100:+.1f}%"


# ---------------------------------------------------------------- targets
targets = []   # dicts: name, value (higher is better, throughput ratio), target, ...


def target_ratio(key, name, s, a, b, tgt, how, primary="rounds", mix=None, show=None):
    """throughput ratio a/b >= tgt.  mix: (section, group) of a mixed run,
    whose latency ratio b/a is the same kind of number"""
    if not runs[s].get(a) or not runs[s].get(b):
        return
    rb = ratio_block(s, a, b)
    m = None
    if mix and mix in mixed and a in mixed[mix] and b in mixed[mix]:
        ma, mb = mixed[mix][a], mixed[mix][b]
        if ma["mean"] > 0:
            m = dict(mean=mb["mean"] / ma["mean"], median=mb["median"] / ma["median"])
    value = m["mean"] if (primary == "mixed" and m) else rb["paired"]
    targets.append(dict(key=key, name=name, value=value, target=tgt, how=how,
                        rounds=rb, mixed=m, primary=primary if (primary != "mixed" or m) else "rounds",
                        show=show))


target_ratio("lease", "Lease cycle: fencing / plain SQL (TPS)", "S1", "fencing", "plain_sql",
             1.0, ">= 1.0x", mix=("S1", "notify_on"))
target_ratio("check", "Fenced UPDATE: fence_allows / fence < token", "S2", "a_check", "a_raw",
             0.98, ">= 0.98x", primary="mixed", mix=("S2", "a"))
target_ratio("guard", "fence_guard trigger: guarded / plain UPDATE", "S2", "b_guard", "b_plain",
             1 / 1.05, "overhead <= 5% (ratio >= 0.952)", primary="mixed", mix=("S2", "b"),
             show="overhead")
sizes = sorted({int(c.split("_")[1]) for c in runs["S4"] if c.count("_") == 1})
if sizes:
    lo_n, hi_n = sizes[0], sizes[-1]
    target_ratio("scale", f"Lease cycle at {hi_n:,} vs {lo_n:,} leases (TPS ratio)",
                 "S4", f"leases_{hi_n}", f"leases_{lo_n}", 1 / 1.2,
                 "cost <= 1.2x (TPS ratio >= 0.833)", show="cost")
target_ratio("jq", "Job queue: with fencing / without (TPS)", "S3", "jq_fencing", "jq_plain",
             0.9, ">= 0.9x", mix=("S3", "jq"))

# contention: errors
hot = {c: info["S5"][c] for c in info["S5"]}
hot_clients = sorted(hot, key=lambda c: int(c.split("_")[1]))
hot_max = hot_clients[-1] if hot_clients else None


def hot_errors(c):
    return sum(x["errors"] for x in hot[c]) + sum(0 if x["status"] == "ok" else 1 for x in hot[c])


def verdict(t):
    v, tg = t["value"], t["target"]
    met = v >= tg
    rb = t["rounds"]
    straddle = rb["lo"] < tg <= rb["hi"] or rb["lo"] <= tg < rb["hi"]
    word = "**met**" if met else "**missed**"
    if straddle:
        word += " (rounds straddle the target)"
    return met, word


def shown(t, v):
    if t.get("show") == "overhead":
        return f"{r3(v)} (overhead {pct(1 / v - 1)})"
    if t.get("show") == "cost":
        return f"{r3(v)} (cost {1 / v:.3f}x)"
    return r3(v)


def margin(t):
    v, tg = t["value"], t["target"]
    if t.get("show") == "overhead":
        return f"overhead {pct(1 / v - 1)} vs limit +5.0%"
    if t.get("show") == "cost":
        return f"cost {1 / v:.3f}x vs limit 1.200x"
    return f"{pct(v / tg - 1)} vs target"


# ---------------------------------------------------------------- report
now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
L = []
P = L.append
P(f"# fencing benchmark, {now} ({mode} mode)")
P("")
P("Written by `bench/run.sh" + (" --quick" if mode == "quick" else "") + "`; how to read it: "
  "[bench/README.md](../README.md).  TPS = pgbench transactions per second; one "
  "transaction of the lease sections is one lease cycle (acquire, then release if "
  "granted: two statements, two commits).")
P("")
P("## Targets")
P("")
P("| target | measured | per-round min - max | other measure | target | verdict | margin |")
P("|---|---:|---:|---|---|---|---|")
summary = []
for t in targets:
    met, word = verdict(t)
    rb = t["rounds"]
    if t["primary"] == "mixed":
        other = f"rounds: median of per-round ratios {r3(rb['paired'])}, ratio of medians {r3(rb['of_medians'])}"
        meas = shown(t, t["value"]) + " (mixed run, trimmed-mean latency)"
    else:
        other = f"ratio of medians {r3(rb['of_medians'])}"
        if t["mixed"]:
            other += f"; mixed run latency ratio {r3(t['mixed']['mean'])}"
        meas = shown(t, t["value"]) + " (median of per-round ratios)"
    P(f"| {t['name']} | {meas} | {r3(rb['lo'])} - {r3(rb['hi'])} | {other} | {t['how']} | {word} | {margin(t)} |")
    summary.append((t["name"], shown(t, t["value"]), t["how"], "met" if met else "MISSED", margin(t)))
if hot_max:
    e = hot_errors(hot_max)
    tot_null = sum(x["tx"] - x["granted"] for x in hot[hot_max])
    word = "**met**" if e == 0 else "**missed**"
    P(f"| {hot_max.split('_')[1]} clients on one lease: errors | {e} errors, "
      f"{f0(tot_null)} NULL results | - | see section 5 | 0 errors | {word} | - |")
    summary.append((f"{hot_max.split('_')[1]} clients on one lease", f"{e} errors", "0 errors",
                    "met" if e == 0 else "MISSED", f"{tot_null} NULL results (fine)"))
P("")
P("A ratio is contender / baseline throughput: above 1 the fenced variant is faster. "
  "*Per-round* ratios pair the two runs of one round (they ran minutes apart at most); "
  "their median is the headline for sections 1, 3 and 4.  Section 2's effects are a few "
  "percent, below the round-to-round noise of a shared machine, so its headline is the "
  "*mixed run*: both statements in one pgbench run, interleaved transaction by "
  "transaction, compared by per-transaction latency (trimmed mean, 5% cut at each end; "
  "baseline latency / contender latency, comparable to a TPS ratio).")
P("")

# ---- machine
P("## Machine and cluster")
P("")
P(f"- CPU: {machine.get('cpu_model', '?')}, nproc = {machine.get('nproc', '?')}; "
  f"memory {machine.get('mem_total', '?')}; kernel {machine.get('kernel', '?')}")
P(f"- {machine.get('pg_version', '?')}")
P(f"- {machine.get('pgbench', '?')}")
sob, soa = machine.get("so_before", "? ?").split(" ", 1), machine.get("so_after", "? ?").split(" ", 1)
P(f"- fencing.so measured: sha256 {sob[0]}..., installed {sob[1]}, tree at `{machine.get('git', '?')}` when the run "
  "started; the run used a private copy of the installation taken at its start (under the build lock)"
  + ("" if sob == soa else " -- **which changed during the run**"))
shb, sha = machine.get("so_shared_before", "?"), machine.get("so_shared_after", "? ?").split(" ", 1)
if shb != sha[0]:
    P(f"- the shared installation was replaced during the run (now sha256 {sha[0]}..., {sha[1]}); "
      "this run did not see that")
P(f"- times: setup {machine.get('setup_s', '?')} s, measurements and setup "
  f"{machine.get('main_s', '?')} s, bench/wait {machine.get('wait_s', '?')} s")
P("- load average (1, 5, 15 min) at the start / end of each section: "
  + "; ".join(f"{k}: {v[2]} / {v[3]} ({float(v[1]):.0f} s)" for k, v in sections.items()))
P("")
P("Throwaway cluster: `initdb` and `pg_ctl` in a temp directory, run as user postgres, "
  "Unix socket only.  Server settings (pg_settings):")
P("")
P("| setting | value | source |")
P("|---|---|---|")
for r in settings:
    P(f"| {r[0]} | {r[1]} | {r[2] if len(r) > 2 else ''} |")
P("")
P("Durability, the same for every contender of a section:")
P("")
P("- **synchronous_commit = on** for sections 1, 3, 4 and 5: fencing forces a synchronous "
  "commit on acquire and release anyway (`ForceSyncCommit()`), so every contender pays a WAL "
  "flush per commit, and every lock held across commit is held across that flush.")
P("- **fsync = off** for the main runs: each commit still writes its WAL (`XLogFlush`, the "
  "WAL write lock, group commit), only the `fdatasync` returns at once.  On this VM a "
  "single fdatasync takes 0.2 to 2.4 ms and varies from second to second (pg_test_fsync), "
  "so with fsync on every lease contender measures the disk: the code paths disappear in "
  "the noise.  The section *fsync = on* below repeats the lease cycle with real flushes "
  "(full mode), to show what that does and that the ranking holds.")
P("- **synchronous_commit = off** for section 2 only (both statements of each pair, set per "
  "session with PGOPTIONS): it measures the CPU cost of a check in an UPDATE, which a commit "
  "wait would only dilute (the same choice as the former bench/run_resource.sh).")
P("")

# ---- section 1
S1 = ["fencing", "fencing_notify_on", "plpgsql", "plain_sql", "advisory"]
notify_default = {r[0]: r[1] for r in settings}.get("fencing.notify", "?")
desc = {
    "fencing": f"`fencing.lease_acquire` + `fencing.lease_release` (C), defaults (fencing.notify = {notify_default})",
    "fencing_notify_on": "the same with `fencing.notify = on` (PGOPTIONS): a NOTIFY at every acquire and release",
    "plpgsql": "the same API in PL/pgSQL: bench/plpgsql_lease.sql (no NOTIFY)",
    "plain_sql": "`INSERT ... ON CONFLICT (name) DO UPDATE ... WHERE expired RETURNING token` "
                 "+ `UPDATE` to release: bench/plain_lease.sql",
    "advisory": "`BEGIN; SELECT pg_try_advisory_xact_lock(hashtext(name)); END` "
                "(no durability, no token: the floor)",
}


def contender_table(s, cs, base, unit="TPS", show_granted=True):
    P(f"| contender | median {unit} | min - max | per round | vs {base} (median of per-round ratios, min - max) | granted / NULL | errors |")
    P("|---|---:|---:|---|---|---:|---:|")
    for c in cs:
        if c not in runs[s]:
            continue
        m, lo, hi, xs = tps_stats(s, c)
        rr = ""
        if c != base and base in runs[s]:
            rb = ratio_block(s, c, base)
            rr = f"{r3(rb['paired'])} ({r3(rb['lo'])} - {r3(rb['hi'])})"
        g = sum(x["granted"] for x in info[s][c])
        tx = sum(x["tx"] for x in info[s][c])
        gn = f"{f0(g)} / {f0(tx - g)}" if (show_granted and g >= 0) else "-"
        errs = sum(x["errors"] for x in info[s][c]) + sum(0 if x["status"] == "ok" else 1 for x in info[s][c])
        per = ", ".join(f0(runs[s][c][k]) for k in sorted(runs[s][c]))
        P(f"| {c} | {f1(m)} | {f1(lo)} - {f1(hi)} | {per} | {rr} | {gn} | {errs} |")
    P("")


def mixed_table(key, base):
    if key not in mixed:
        return
    P(f"| contender | transactions | median latency (us) | trimmed mean (us) | {base} latency / this (trimmed mean) |")
    P("|---|---:|---:|---:|---:|")
    b = mixed[key].get(base)
    for c, m in mixed[key].items():
        rr = r3(b["mean"] / m["mean"]) if (b and m["mean"] > 0) else "-"
        P(f"| {c} | {f0(m['n'])} | {f1(m['median'])} | {f1(m['mean'])} | {rr} |")
    P("")


if runs["S1"]:
    d = info["S1"]["fencing"][0]
    P("## 1. Lease cycle")
    P("")
    P(f"Each transaction: a random name of {os.environ.get('POOL', '1000')} (`'l' || random`), acquire "
      f"for 1 minute with holder `'c' || client_id`, release if granted.  {d['clients']} clients, "
      f"{len(runs['S1']['fencing'])} rounds of {d['dur']:.0f} s per contender, the order rotating "
      "by one every round.  Contenders:")
    P("")
    for c in S1:
        P(f"- **{c}**: {desc[c]}")
    P("")
    contender_table("S1", S1, "plain_sql")
    P("Granted / NULL: NULL when another client held the name (expected now and then with 8 "
      "clients on 1000 names).  Counted from the lease rows' counters (fencing, plpgsql) or "
      "the table statistics (plain_sql, rows inserted + updated / 2); not counted for advisory.")
    P("")
    for key, label in ((("S1", "defaults"), "defaults"),):
        if key in mixed:
            P(f"Mixed run ({label}): all four scripts in one pgbench run, {d['clients']} clients.  "
              "Caveat: here only a quarter of the transactions are fencing's, so they queue less "
              "behind each other on anything they serialize on than in a run of their own.")
            P("")
            mixed_table(key, "plain_sql")
    if runs["S1F"]:
        P("### The lease cycle with fsync = on")
        P("")
        P("The same scripts after `ALTER SYSTEM SET fsync = on` (3 rounds of 5 s), to show "
          "what real flushes do to the comparison:")
        P("")
        contender_table("S1F", ["fencing", "fencing_notify_on", "plpgsql", "plain_sql"], "plain_sql")
    if waits:
        P("### What the lease contenders' backends wait for")
        P("")
        P("200 samples of `pg_stat_activity` (active pgbench backends) and `pg_locks`, 20 ms "
          "apart, during an unmeasured 5 s run of each contender.  *ClientRead* is a backend "
          "waiting for pgbench (which shares the 2 cores); *Lock:object* is a heavyweight lock "
          "on a non-relation object.")
        P("")
        byc = defaultdict(list)
        for r in waits:
            if len(r) >= 3:
                byc[r[0]].append((r[1], int(r[2])))
        P("| contender | samples (wait event: count) |")
        P("|---|---|")
        for c, evs in byc.items():
            P(f"| {c} | " + "; ".join(f"{e}: {n}" for e, n in evs) + " |")
        P("")

# ---- section 2
if runs["S2"]:
    d = info["S2"]["a_check"][0]
    P("## 2. Resource side")
    P("")
    P(f"Single-row UPDATE by primary key on a table of {os.environ.get('RES_ROWS', '100000')} rows; "
      f"{d['clients']} clients, each writing only its own rows with a token that only grows, so "
      "every write passes; checked after every run that each transaction changed one row.  "
      f"{len(runs['S2']['a_check'])} rounds of {d['dur']:.0f} s, pairs back to back (A B, then B A).  "
      "synchronous_commit = off.")
    P("")
    P("- a_check: `UPDATE bench_a SET v = v + 1, fence = :tok WHERE id = :id AND fencing.fence_allows(fence, :tok)`")
    P("- a_raw: `UPDATE bench_a SET v = v + 1, fence = :tok WHERE id = :id AND fence < :tok`")
    P("- b_guard / b_plain: `UPDATE <t> SET v = v + 1, fence = :tok WHERE id = :id`, on a table with "
      "`BEFORE INSERT OR UPDATE OR DELETE ... FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence')` / without")
    P("- c_advance: `UPDATE bench_c SET v = v + 1, fence = fencing.fence_advance(fence, :tok) WHERE id = :id`; c_raw: `... SET fence = :tok ...`")
    P("")
    P("| pair | A median TPS (min - max) | B median TPS (min - max) | A/B: ratio of medians | A/B: median of per-round ratios (min - max) | mixed run: B latency / A latency (trimmed mean; median) |")
    P("|---|---:|---:|---:|---:|---:|")
    for a, b, g in (("a_check", "a_raw", "a"), ("b_guard", "b_plain", "b"), ("c_advance", "c_raw", "c")):
        if a not in runs["S2"]:
            continue
        ma = tps_stats("S2", a)
        mb = tps_stats("S2", b)
        rb = ratio_block("S2", a, b)
        mx = mixed.get(("S2", g), {})
        ml = "-"
        if a in mx and b in mx:
            ml = f"{r3(mx[b]['mean'] / mx[a]['mean'])}; {r3(mx[b]['median'] / mx[a]['median'])}"
        P(f"| {a} / {b} | {f1(ma[0])} ({f1(ma[1])} - {f1(ma[2])}) | {f1(mb[0])} ({f1(mb[1])} - {f1(mb[2])}) "
          f"| {r3(rb['of_medians'])} | {r3(rb['paired'])} ({r3(rb['lo'])} - {r3(rb['hi'])}) | {ml} |")
    P("")
    P("Mixed runs (per-transaction latency, microseconds):")
    P("")
    P("| pair | A transactions | A median | A trimmed mean | B transactions | B median | B trimmed mean |")
    P("|---|---:|---:|---:|---:|---:|---:|")
    for a, b, g in (("a_check", "a_raw", "a"), ("b_guard", "b_plain", "b"), ("c_advance", "c_raw", "c")):
        mx = mixed.get(("S2", g), {})
        if a in mx and b in mx:
            P(f"| {a} / {b} | {f0(mx[a]['n'])} | {f1(mx[a]['median'])} | {mx[a]['mean']:.2f} | "
              f"{f0(mx[b]['n'])} | {f1(mx[b]['median'])} | {mx[b]['mean']:.2f} |")
    P("")

# ---- section 3
if runs["S3"]:
    d = info["S3"]["jq_fencing"][0]
    P("## 3. Job queue")
    P("")
    P("Each transaction: claim one job, then complete it (two statements, two commits).  "
      "**jq_fencing**: `job_queue.claim('q', 1, '5 minutes')` + `job_queue.complete(id, token, result)` "
      "from examples/job_queue.sql (a fresh token per claim, `fence_advance`, `lock_claim`, "
      "`expect_rows`); **jq_plain**: the same queue without fencing, bench/plain_queue.sql "
      "(same table less the fence, same index, same SKIP LOCKED claim, unconditional complete).  "
      f"{d['clients']} workers, {len(runs['S3']['jq_fencing'])} rounds of {d['dur']:.0f} s, back to back "
      f"(A B / B A).  Each queue holds {os.environ.get('JQ_HISTORY', '?')} finished jobs (a queue with "
      f"history) and is topped up to {os.environ.get('JQ_READY', '?')} ready jobs and vacuumed before "
      "every run; checked after every run that each transaction claimed and completed one job.")
    P("")
    contender_table("S3", ["jq_fencing", "jq_plain"], "jq_plain", show_granted=False)
    mixed_table(("S3", "jq"), "jq_plain")

# ---- section 4
if runs["S4"]:
    P("## 4. Scale: the lease cycle with many existing leases")
    P("")
    P("One database per size; its fencing.leases holds N live leases (`'s' || g`, holder 'h', "
      "1 day), created through `fencing.lease_acquire` in batches of 100 000, plus the "
      "1000 pool names, then VACUUM ANALYZE.  The lease cycle of section 1 (fencing) runs on the "
      "pool names; the databases alternate, the order rotating every round.")
    P("")
    if scale_sizes:
        P("| N | rows in fencing.leases | table size | primary key size |")
        P("|---:|---:|---:|---:|")
        for n, cnt, hb, ib in scale_sizes:
            P(f"| {f0(int(n))} | {f0(int(cnt))} | {int(hb) / 2**20:.1f} MiB | {int(ib) / 2**20:.1f} MiB |")
        P("")
    cs = [c for c in runs["S4"] if not c.endswith("_notify_on")]
    cs.sort(key=lambda c: int(c.split("_")[1]))
    contender_table("S4", cs, cs[0])
    nn = [c for c in runs["S4"] if c.endswith("_notify_on")]
    if nn:
        nn.sort(key=lambda c: int(c.split("_")[1]))
        P("The same with fencing.notify = on:")
        P("")
        contender_table("S4", nn, nn[0])

# ---- section 5
if runs["S5"]:
    P("## 5. Contention: every client on one lease")
    P("")
    P("Each transaction: `fencing.lease_acquire('hot', 'c' || client_id, '1 minute')`, and "
      "`lease_release` if granted.  An attempt is a transaction; NULL (someone else holds it) "
      "is a normal answer.  Errors = server-side ERRORs in the log + pgbench failures or aborts.")
    P("")
    P("| clients | attempts/s (median) | min - max | grants/s | NULL results | errors |")
    P("|---:|---:|---:|---:|---:|---:|")
    for c in hot_clients:
        m, lo, hi, xs = tps_stats("S5", c)
        g = sum(x["granted"] for x in info["S5"][c])
        tx = sum(x["tx"] for x in info["S5"][c])
        dur = sum(x["dur"] for x in info["S5"][c])
        P(f"| {c.split('_')[1]} | {f1(m)} | {f1(lo)} - {f1(hi)} | {f1(g / dur)} | {f0(tx - g)} of {f0(tx)} | {hot_errors(c)} |")
    P("")

# ---- section 6
P("## 6. Handover latency of a waiting acquirer")
P("")
ws = read_text("wait_status").strip()
wt = read_text("wait.txt")
if ws == "absent" or not ws:
    P("Skipped: bench/wait/run.sh does not exist (yet).  bench/wait/ belongs to another person; "
      "bench/run.sh calls `bench/wait/run.sh` when it is there and includes the end of its output here.")
else:
    P(f"`bench/wait/run.sh` exit status {ws}" + (" (timed out)" if ws == "124" else "") + "; the end of its output:")
    P("")
    P("```")
    P("\n".join(wt.rstrip().splitlines()[-40:]))
    P("```")
P("")

if problems.strip() or server_errors.strip():
    P("## Problems seen during the run")
    P("")
    P("```")
    P((problems + server_errors).rstrip()[:6000])
    P("```")
    P("")

# ---------------------------------------------------------------- plot
png = prefix + ".png"
have_gnuplot = subprocess.run(["sh", "-c", "command -v gnuplot"], capture_output=True).returncode == 0
if have_gnuplot and targets:
    with tempfile.TemporaryDirectory() as td:
        def w(name, rows):
            with open(os.path.join(td, name), "w") as f:
                for r in rows:
                    f.write("\t".join(str(x) for x in r) + "\n")
        def nice(n):
            return f"{n // 1000000}M" if n % 1000000 == 0 else (f"{n // 1000}k" if n % 1000 == 0 else str(n))
        short = {"lease": "lease cycle\\nfencing / plain SQL", "check": "fence_allows /\\nfence < token",
                 "guard": "fence_guard /\\nno trigger",
                 "scale": f"lease cycle\\n{nice(hi_n)} / {nice(lo_n)} leases" if sizes else "",
                 "jq": "job queue\\nfenced / plain"}
        rows = []
        for i, t in enumerate(targets):
            rb = t["rounds"]
            lo, hi = (rb["lo"], rb["hi"]) if t["primary"] == "rounds" else (t["value"], t["value"])
            rows.append((i, f'"{short[t["key"]]}"', t["value"], lo, hi, t["target"],
                         1 if t["value"] >= t["target"] else 0))
        w("targets.dat", rows)
        rows = []
        for i, c in enumerate([c for c in S1 if c in runs["S1"]]):
            m, lo, hi, _ = tps_stats("S1", c)
            f = tps_stats("S1F", c) if c in runs["S1F"] else (0, 0, 0, [])
            rows.append((i, f'"{c}"', m, lo, hi, f[0], f[1], f[2]))
        w("lease.dat", rows)
        rows = []
        for c in sorted([c for c in runs["S4"] if not c.endswith("_notify_on")], key=lambda c: int(c.split("_")[1])):
            n = int(c.split("_")[1])
            m, lo, hi, _ = tps_stats("S4", c)
            mm = tps_stats("S4", c + "_notify_on") if (c + "_notify_on") in runs["S4"] else (0, 0, 0, [])
            rows.append((n, m, lo, hi, mm[0], mm[1], mm[2]))
        w("scale.dat", rows)
        rows = []
        for i, c in enumerate(hot_clients):
            m, lo, hi, _ = tps_stats("S5", c)
            g = sum(x["granted"] for x in info["S5"][c]) / sum(x["dur"] for x in info["S5"][c])
            rows.append((i, c.split("_")[1], m, lo, hi, g))
        w("hot.dat", rows)
        ntg = len(targets)
        fsync_title = 'title "fsync = on (section F)"' if runs["S1F"] else "notitle"
        nn_title = 'title "fencing.notify = on"' if any(c.endswith("_notify_on") for c in runs["S4"]) else "notitle"
        ymax = max([1.35] + [max(t["value"], t["rounds"]["hi"]) + 0.2 for t in targets])
        gp = f"""
set terminal pngcairo size 1500,1050 font "Sans,10" noenhanced
set output "{png}"
set multiplot layout 2,2 title "fencing benchmark {now} ({mode} mode, {machine.get('nproc', '?')} cores)" font ",13"
set style fill solid 0.75 border -1
set boxwidth 0.6
set grid ytics
set key top right
set title "Targets: throughput ratio (higher is better), bar = measured, whiskers = per-round min-max\\nred line = target; green = met, red = missed"
set yrange [0:{ymax:.2f}]
set xrange [-0.6:{ntg - 0.4}]
set xtics nomirror
set ylabel "ratio"
plot "{td}/targets.dat" using 1:($7 == 1 ? $3 : 1/0):xtic(2) with boxes lc rgb "#4caf50" title "met", \\
     "" using 1:($7 == 0 ? $3 : 1/0) with boxes lc rgb "#e53935" title "missed", \\
     "" using 1:3:4:5 with yerrorbars pt 0 ps 0 lc rgb "black" notitle, \\
     "" using ($1-0.4):6:(0.8):(0) with vectors nohead lw 3 lc rgb "#b71c1c" title "target", \\
     "" using 1:($3+0.04):(sprintf("%.3f", $3)) with labels notitle
set yrange [0:*]
set key top left
set title "1. Lease cycle, 8 clients: median TPS, whiskers = min-max over rounds"
set xrange [-0.6:4.6]
set ylabel "lease cycles / s"
set boxwidth 0.38
plot "{td}/lease.dat" using ($1-0.2):3:xtic(2) with boxes lc rgb "#1e88e5" title "fsync = off (main runs)", \\
     "" using ($1-0.2):3:4:5 with yerrorbars pt 0 ps 0 lc rgb "black" notitle, \\
     "" using ($1+0.2):($6 > 0 ? $6 : 1/0) with boxes lc rgb "#fb8c00" {fsync_title}, \\
     "" using ($1+0.2):($6 > 0 ? $6 : 1/0):7:8 with yerrorbars pt 0 ps 0 lc rgb "black" notitle
set key bottom right
set title "4. Lease cycle vs existing leases: median TPS, whiskers = min-max"
set logscale x
set xrange [500:2000000]
set xtics ("1k" 1000, "10k" 10000, "100k" 100000, "1M" 1000000)
set ylabel "lease cycles / s"
set xlabel "leases in fencing.leases"
plot "{td}/scale.dat" using 1:2:3:4 with yerrorlines lw 2 pt 7 lc rgb "#1e88e5" title "fencing (defaults)", \\
     "" using 1:($5 > 0 ? $5 : 1/0):6:7 with yerrorlines lw 2 pt 5 lc rgb "#43a047" {nn_title}
unset logscale x
unset xlabel
set key top right
set title "5. One lease, N clients: attempts/s (bars) and grants/s"
set xrange [-0.6:{max(len(hot_clients), 1) - 0.4}]
set xtics auto
set boxwidth 0.38
set ylabel "per second"
set xlabel "clients"
plot "{td}/hot.dat" using ($1-0.2):3:xtic(2) with boxes lc rgb "#8e24aa" title "attempts/s", \\
     "" using ($1-0.2):3:4:5 with yerrorbars pt 0 ps 0 lc rgb "black" notitle, \\
     "" using ($1+0.2):6 with boxes lc rgb "#26a69a" title "grants/s"
unset multiplot
"""
        gpf = os.path.join(td, "plot.gp")
        open(gpf, "w").write(gp)
        r = subprocess.run(["gnuplot", gpf], capture_output=True, text=True)
        if r.returncode != 0:
            print("gnuplot failed:\n" + r.stderr, file=sys.stderr)
if os.path.exists(png):
    L.insert(2, f"![ratios vs targets, lease cycle, scale, contention]({os.path.basename(png)})\n")

with open(prefix + ".md", "w") as f:
    f.write("\n".join(L) + "\n")

# ---------------------------------------------------------------- summary
print()
print(f"fencing benchmark ({mode} mode)")
print()
w = max(len(s[0]) for s in summary) if summary else 10
for name, value, how, v, m in summary:
    print(f"  {name:<{w}}  {value:<28} target {how:<34} {v:<7} {m}")
print()
for s, cs, base in (("S1", S1, "plain_sql"), ("S3", ["jq_fencing", "jq_plain"], "jq_plain")):
    for c in cs:
        if c in runs[s]:
            m, lo, hi, _ = tps_stats(s, c)
            rr = "" if c == base else f"  x{r3(ratio_block(s, c, base)['paired'])} vs {base}"
            print(f"  {s} {c:<18} median {f1(m):>10} TPS  ({f1(lo)} - {f1(hi)}){rr}")
