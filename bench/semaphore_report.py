#!/usr/bin/env python3
"""bench/semaphore_report.py OUT_DIR REPORT.md MODE ROUNDS DUR POOL: the report of bench/semaphore.sh."""
import statistics as st
import sys

d, out, mode, rounds, dur, pool = sys.argv[1:]
rows = [l.rstrip("\n").split("\t") for l in open(d + "/runs.tsv") if l.strip()]
machine = dict(l.rstrip("\n").split("\t", 1) for l in open(d + "/machine.tsv"))
settings = [l.rstrip("\n").split("\t") for l in open(d + "/settings.tsv")]
problems = open(d + "/problems.txt").read().strip()

# (group, round, contender) -> record
R = {}
groups = {}
for g, n, r, c, k, tx, med, trim, p95, grants, load, du in rows:
	R[(g, r, c)] = dict(n=int(n), k=int(k), tx=int(tx), med=float(med), trim=float(trim),
	                    p95=float(p95), grants=int(grants), load=float(load), dur=float(du))
	groups.setdefault(g, dict(n=int(n), cs=[]))
	if c not in groups[g]["cs"]:
		groups[g]["cs"].append(c)
rnds = sorted({r for (_, r, _) in R}, key=int)

def med(xs):
	return st.median(xs) if xs else float("nan")

def ratio(g, a, b):
	"""per-round a's speed over b's: b's trimmed mean latency / a's"""
	xs = [R[(g, r, b)]["trim"] / R[(g, r, a)]["trim"] for r in rnds
	      if (g, r, a) in R and (g, r, b) in R and R[(g, r, a)]["trim"] > 0]
	return xs

def tps_ratio(g, a, b):
	"""per-round attempts per second per client, a / b"""
	xs = []
	for r in rnds:
		if (g, r, a) in R and (g, r, b) in R and R[(g, r, b)]["tx"] > 0:
			A, B = R[(g, r, a)], R[(g, r, b)]
			xs.append((A["tx"] / A["k"]) / (B["tx"] / B["k"]))
	return xs

def fmt(xs):
	if not xs:
		return "–"
	return "**%.3f** (%.2f–%.2f)" % (med(xs), min(xs), max(xs))

L = []
L.append("# bench/semaphore.sh, %s" % out.split("semaphore-")[1][:-3])
L.append("")
L.append("%s mode: %s rounds of %s s per group; git %s, fencing.so %s; %s s in all." %
         (mode, rounds, dur, machine.get("git"), machine.get("so"), machine.get("seconds")))
L.append("%s, %s vCPUs, %s, kernel %s; %s." % (machine["cpu_model"], machine["nproc"],
         machine["mem_total"], machine["kernel"], machine["pg_version"].split(" on ")[0]))
L.append("Settings: " + ", ".join("%s = %s" % (a, b) for a, b in settings) + ".")
loads = [x["load"] for x in R.values()]
L.append("Load average (1 min) after the runs: %.1f–%.1f (the machine is shared)." % (min(loads), max(loads)))
L.append("")
L.append("A group is one pgbench run; each contender has clients of its own in it. "
         "Ratios compare contenders of the same run: **speed ratio** = the other's "
         "5%%-trimmed mean latency / this one's (> 1: faster), **TPS ratio** = attempts "
         "per second per client, this / other; median of the per-round ratios, "
         "(min–max). Attempts include NULL results (every slot taken). "
         "Lease cycle: %s names at random." % pool)
L.append("")
L.append("## Ratios")
L.append("")
L.append("| group | slots N | sem clients | sem / lease cycle: speed | TPS | sem / plain-SQL semaphore: speed | TPS | sem / advisory: speed |")
L.append("|---|---|---|---|---|---|---|---|")
for g in sorted(groups, key=int):
	n = groups[g]["n"]
	k = R[(g, rnds[0], "sem")]["k"]
	L.append("| %s | %d | %d%s | %s | %s | %s | %s | %s |" % (
		g, n, k, " (> N)" if k > n else "",
		fmt(ratio(g, "sem", "lease")), fmt(tps_ratio(g, "sem", "lease")),
		fmt(ratio(g, "sem", "plain")), fmt(tps_ratio(g, "sem", "plain")),
		fmt(ratio(g, "sem", "advisory"))))
for g in sorted(groups, key=int):
	if "lease_one" in groups[g]["cs"]:
		L.append("")
		L.append("Group %s, semaphore of one slot / lease cycle on one name (the same thing): "
		         "speed %s, TPS %s." % (g, fmt(ratio(g, "sem", "lease_one")), fmt(tps_ratio(g, "sem", "lease_one"))))
try:
	pt = [l.split("\t") for l in open(d + "/plain_tokens.tsv") if l.strip()]
except FileNotFoundError:
	pt = []
burn = {}
for g, r, gr, tok in pt:
	if r != "0":
		b = burn.setdefault(g, [0, 0])
		b[0] += int(gr)
		b[1] += int(tok)
if burn:
	L.append("")
	L.append("Plain-SQL semaphore, tokens drawn per grant (an acquire that meets a concurrent "
	         "update of the row it locked evaluates nextval again): " +
	         ", ".join("group %s %.4f" % (g, b[1] / b[0]) for g, b in sorted(burn.items(), key=lambda x: int(x[0])) if b[0]) + ".")
L.append("")
L.append("## Per contender (medians over rounds)")
L.append("")
L.append("| group | N | contender | clients | attempts/s | grants/s | granted | median us | trimmed mean us | p95 us |")
L.append("|---|---|---|---|---|---|---|---|---|---|")
for g in sorted(groups, key=int):
	for c in groups[g]["cs"]:
		xs = [R[(g, r, c)] for r in rnds if (g, r, c) in R]
		att = med([x["tx"] / x["dur"] for x in xs])
		if xs[0]["grants"] >= 0:
			gr = med([x["grants"] / x["dur"] for x in xs])
			grs, share = "%.0f" % gr, "%.1f%%" % (100.0 * sum(x["grants"] for x in xs) / max(1, sum(x["tx"] for x in xs)))
		else:
			grs, share = "–", "–"
		L.append("| %s | %d | %s | %d | %.0f | %s | %s | %.1f | %.1f | %.1f |" % (
			g, groups[g]["n"], c, xs[0]["k"], att, grs, share,
			med([x["med"] for x in xs]), med([x["trim"] for x in xs]), med([x["p95"] for x in xs])))
L.append("")
L.append("## Every round")
L.append("")
L.append("| group | round | contender | clients | tx | grants | trimmed mean us | load |")
L.append("|---|---|---|---|---|---|---|---|")
for g in sorted(groups, key=int):
	for r in rnds:
		for c in groups[g]["cs"]:
			if (g, r, c) in R:
				x = R[(g, r, c)]
				L.append("| %s | %s | %s | %d | %d | %s | %.1f | %.1f |" % (
					g, r, c, x["k"], x["tx"], x["grants"] if x["grants"] >= 0 else "–", x["trim"], x["load"]))
L.append("")
L.append("## Problems")
L.append("")
L.append("```\n%s\n```" % problems if problems else "None: every pgbench run exited 0 with no failed "
         "transaction and no aborted client, the server logged no ERROR, and every grant was released.")
open(out, "w").write("\n".join(L) + "\n")
print("\n".join(L[:L.index("## Per contender (medians over rounds)")]))
