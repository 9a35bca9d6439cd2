#!/usr/bin/python3
"""election_check.py: the history checker of t/052_election_pgbouncer.pl.

    election_check.py --history FILE --freezes FILE LOG...

--history: the resource's accepted writes, "seq|token|candidate|at_epoch"
per line, in commit order (seq: the history table's serial, drawn while the
resource row is locked, so it is the order of the writes).  --freezes: one
JSON object per line, {"c", "pid", "token", "resumed_at"} for each leader
the test froze with SIGSTOP and resumed with SIGCONT after its successor
wrote.  LOG: the candidates' JSON event lines (election_candidate.py).

Checks, each violation printed on stderr as "VIOLATION kind: ...":

  order      at most one leader's writes accepted at any point of the token
             order: the accepted tokens never decrease along the history
             (a smaller token after a larger one is a second leader's write)
  owner      each accepted token is one candidate's, issued to it by a
             campaign it logged
  acked      every write a candidate saw accepted is in the history, with its
             token; every history row is a write some candidate attempted
  frozen     every write attempt a frozen leader made after it was resumed
             (its successor had written by then) was refused (LF001/LF005);
             and at least one frozen leader attempted one (else the check
             proves nothing: "vacuous")
  view       each candidate process's view of the leader (election_observe)
             never goes backwards: the tokens it sees never decrease

Prints the figures as one JSON object on stdout; exits 1 on any violation.
"""

import argparse
import json
import sys
from collections import defaultdict

ap = argparse.ArgumentParser()
ap.add_argument("--history", required=True)
ap.add_argument("--freezes", required=True)
ap.add_argument("logs", nargs="*")
opt = ap.parse_args()

violations = []


def violation(kind, text):
    violations.append(kind)
    print("VIOLATION %s: %s" % (kind, text), file=sys.stderr)


history = []
with open(opt.history) as f:
    for line in f:
        line = line.strip()
        if line:
            seq, token, cand, at = line.split("|")
            history.append((int(seq), int(token), cand, float(at)))
history.sort()

events = []
for path in opt.logs:
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                events.append(json.loads(line))

freezes = []
with open(opt.freezes) as f:
    for line in f:
        if line.strip():
            freezes.append(json.loads(line))

# ---- order: accepted tokens never decrease along the history ----------------
top = None
leaders = []
for seq, token, cand, at in history:
    if top is not None and token < top:
        violation("order", "write seq %d with token %d (%s) after token %d had written"
                  % (seq, token, cand, top))
    if top is None or token > top:
        top = token
        leaders.append((token, cand))

# ---- owner: one candidate per token, issued by its campaign ----------------
led = defaultdict(set)  # token -> candidates that logged "leading" with it
for e in events:
    if e["event"] == "leading":
        led[e["token"]].add(e["c"])
owners = defaultdict(set)
for seq, token, cand, at in history:
    owners[token].add(cand)
for token, cands in sorted(owners.items()):
    if len(cands) > 1:
        violation("owner", "token %d wrote for %s" % (token, sorted(cands)))
    if not cands <= led[token]:
        violation("owner", "token %d wrote for %s, which no campaign of it issued"
                  % (token, sorted(cands - led[token])))
for token, cands in led.items():
    if len(cands) > 1:
        violation("owner", "token %d issued to %s" % (token, sorted(cands)))

# ---- acked: acknowledged writes are in the history, and nothing else ---------
by_seq = {seq: (token, cand) for seq, token, cand, at in history}
writes = [e for e in events if e["event"] == "write"]
attempted = defaultdict(int)  # (token, candidate) -> attempts
for e in events:
    if e["event"] == "attempt":
        attempted[(e["token"], e["c"])] += 1
for e in writes:
    if e["outcome"] == "accepted":
        got = by_seq.get(e["seq"])
        if got != (e["token"], e["c"]):
            violation("acked", "%s's write with token %d acknowledged as seq %d; history has %r"
                      % (e["c"], e["token"], e["seq"], got))
accepted_ack = defaultdict(int)
for e in writes:
    if e["outcome"] in ("accepted", "unknown"):
        accepted_ack[(e["token"], e["c"])] += 1
in_history = defaultdict(int)
for seq, token, cand, at in history:
    in_history[(token, cand)] += 1
for key, n in in_history.items():
    if n > accepted_ack[key]:
        violation("acked", "history has %d writes of token %d by %s; it saw %d accepted or unknown"
                  % (n, key[0], key[1], accepted_ack[key]))

# ---- frozen: every attempt after the resume refused ------------------------
frozen_refused = 0
frozen_attempts = 0
for fz in freezes:
    # the successor wrote before the resume
    after = [h for h in history if h[1] > fz["token"]]
    if not after or after[0][3] > fz["resumed_at"]:
        violation("frozen", "%s (token %d) resumed before a successor wrote" % (fz["c"], fz["token"]))
    mine = [e for e in events if e.get("pid") == fz["pid"] and e.get("token") == fz["token"]
            and e["event"] in ("attempt", "write")]
    late = 0
    pending = False
    for e in mine:
        if e["event"] == "attempt":
            pending = e["at"] >= fz["resumed_at"]
            continue
        if not pending:
            continue
        pending = False
        late += 1
        if e["outcome"] != "refused" or e.get("sqlstate") not in ("LF001", "LF005"):
            violation("frozen", "%s's write with token %d after its resume: %s %s"
                      % (fz["c"], fz["token"], e["outcome"], e.get("sqlstate", "")))
    frozen_attempts += late
    if late:
        frozen_refused += 1
if freezes and not frozen_refused:
    violation("frozen", "vacuous: no frozen leader attempted a write after its resume")

# ---- view: each process's view never goes backwards -----------------------
views = defaultdict(list)
for e in events:
    if e["event"] == "view":
        views[e["pid"]].append(e)
backwards = 0
observations = 0
for pid, vs in views.items():
    vs.sort(key=lambda e: e["at"])
    seen = None
    for e in vs:
        observations += 1
        t = e["token"]
        if t is None:
            continue
        if seen is not None and t < seen:
            backwards += 1
            violation("view", "%s (pid %d) saw token %d after %d" % (e["c"], pid, t, seen))
        seen = t if seen is None else max(seen, t)

refused = [e for e in writes if e["outcome"] == "refused"]
summary = {
    "leaders": len(leaders),
    "leader_tokens": [t for t, c in leaders],
    "writes_accepted": len(history),
    "writes_refused": len(refused),
    "refused_sqlstates": sorted(set(e.get("sqlstate") for e in refused)),
    "writes_unknown": sum(1 for e in writes if e["outcome"] == "unknown"),
    "frozen_leaders": len(freezes),
    "frozen_leaders_refused": frozen_refused,
    "frozen_late_attempts": frozen_attempts,
    "view_processes": len(views),
    "view_observations": observations,
    "view_backwards": backwards,
    "violations": sorted(set(violations)),
}
print(json.dumps(summary))
sys.exit(1 if violations else 0)
