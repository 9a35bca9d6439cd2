#!/usr/bin/python3
"""doc_test.py: run the code blocks of the documentation, check what they print.

Run by test/docs/doc_test.sh (see there for how to call it).  Needs a running
server reached through libpq's environment (PGHOST, PGPORT, PGUSER: a
superuser) with the extension installed, psql on PATH, and the repository
root as working directory.

What runs:

  README.md, docs/*.md        every ```sql block, in psql (their ```sh
                              blocks, install and CI commands, are not run)
  examples/README.md,         every ```sh block, in bash, and every ```sql
  examples/{python,node,c}/   block, in psql, in order, as one shell story
  README.md,
  docs/fencing-lock.md

SQL pages.  Each page gets a fresh database (dropped afterwards with the
roles and databases its blocks created).  The test runs
CREATE EXTENSION fencing in it first, from another session, unless the
page's own first CREATE/DROP EXTENSION fencing is a CREATE.  The blocks of a
page run in order in one psql session (psql -X -q, so command tags are not
printed), so a page reads as one story: psql variables set with \\gset in
one block are there in the next.

Shell pages.  The blocks run in order in one bash (set -e) in the
repository root, with PGHOST, PGPORT and PGUSER naming the test's server
and PGDATABASE=postgres; an ```sql block there runs as
psql -X -q -v ON_ERROR_STOP=1 in the database the shell's PGDATABASE names.

Markers (an HTML comment on the line(s) right before a block; blank lines
in between are allowed):

  <!-- not tested: REASON -->   skip the block; reported with its reason
  <!-- new session -->          (SQL pages) this block starts a new psql
                                session; the database stays

Expected output.  A ```text block right after a tested block (only blank
lines between) is what the block must print, compared line by line after
trailing blanks are stripped and blank lines at both ends are dropped.  In
it, "..." stands for any text within a line, and a line that is only "..."
for any number of lines (zero or more) that are not errors: write tokens,
times and other values that vary as "...", or \\gset them and show
something fixed.  A
block without a ```text block must not print an ERROR, a WARNING or a psql
error (shell blocks: must exit 0).

Links and coverage.  Every relative link of these pages must name a file
that exists and, with an anchor, a heading of it (GitHub's anchors), and
README.md must name every function of the install script (but the internal
_ ones) as `name(` and have a row `| \`LFnnn\`` for every LF SQLSTATE of
src/.  A miss is a failure (printed as WARN only with DOC_TEST_STRICT=0).

Prints one line per block (ok / FAIL / SKIP with file:line), a diff for each
failure, and at the end "doc test: N passed, N failed, N skipped".  Exits
1 if any block failed.
"""

import difflib
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SHELL_PAGES = [
    "examples/README.md",
    "examples/python/README.md",
    "examples/node/README.md",
    "examples/c/README.md",
    "docs/fencing-lock.md",  # a program's page: its commands run
]
SQL_PAGES = ["README.md"] + sorted(p for p in glob.glob("docs/*.md") if p not in SHELL_PAGES)
SHELL_LANGS = {"sh", "bash", "shell"}
TIMEOUT = int(os.environ.get("DOC_TEST_TIMEOUT", "300"))  # per session

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([A-Za-z0-9_+-]*)\s*$")
DIRECTIVE = re.compile(r"^\s*<!--\s*(not tested|new session)\s*(?::\s*(.*?))?\s*-->\s*$")
CREATE_EXT = re.compile(r"\bcreate\s+extension\s+(if\s+not\s+exists\s+)?\"?fencing\b", re.I)
DROP_EXT = re.compile(r"\bdrop\s+extension\s+(if\s+exists\s+)?\"?fencing\b", re.I)
PROBLEM = re.compile(
    r"^(psql:\S*: )?(ERROR|FATAL|PANIC|WARNING):"
    r"|^(psql:\S*: )?invalid command "
    r"|^(psql:\S*: )?(no rows|more than one row) returned for \\gset"
    r"|^psql: error"
    r"|^(psql:\S*: )?\\\w+: "
)
MARK = "@@doc-test@@"
# broken links and undocumented functions or SQLSTATEs: FAIL, or WARN
STRICT = os.environ.get("DOC_TEST_STRICT", "1") != "0"


class Block:
    def __init__(self, path, line, lang, text, directives):
        self.path = path
        self.line = line  # line of the opening fence, 1-based
        self.lang = lang
        self.text = text
        self.skip = None  # reason
        self.new_session = False
        for kind, arg in directives:
            if kind == "not tested":
                self.skip = arg or ""
            elif kind == "new session":
                self.new_session = True
        self.expected = None  # list of lines
        self.expected_line = None

    def where(self):
        return f"{self.path}:{self.line}"


def parse(path):
    """Every fenced block of a markdown file, with its markers and the
    ```text block that follows it."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks = []
    i = 0
    pending = []  # directives seen since the last non-blank, non-directive line
    last = None  # the previous block, while only blank lines follow it
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            d = DIRECTIVE.match(lines[i])
            if d:
                pending.append((d.group(1), d.group(2)))
            elif lines[i].strip():
                pending = []
                last = None
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        start = i
        body = []
        i += 1
        while i < len(lines):
            c = lines[i]
            if c.strip().startswith(fence[0] * len(fence)) and c.strip().strip(fence[0]) == "":
                break
            body.append(c[len(indent):] if c.startswith(indent) else c.lstrip())
            i += 1
        i += 1  # the closing fence
        if lang == "text" and last is not None and last.expected is None:
            last.expected = body
            last.expected_line = start + 1
            last = None
        else:
            b = Block(path, start + 1, lang, "\n".join(body) + "\n", pending)
            blocks.append(b)
            last = b
        pending = []
    return blocks


def patterns(expected):
    pats = []
    for e in expected:
        if e.strip() == "...":
            pats.append(None)
        else:
            pats.append(re.compile(".*".join(re.escape(p) for p in e.split("...")) + r"\Z", re.S))
    return pats


def resolve(expected, actual):
    """For the diff of a failure: the expected lines, each replaced by the
    actual line it matches (found going forward), so that the diff shows
    only the lines that really differ."""
    pats = patterns(expected)
    disp = []
    j = 0
    for i, (pat, e) in enumerate(zip(pats, expected)):
        if pat is None:
            nxt = next((p for p in pats[i + 1:] if p is not None), None)
            while (j < len(actual) and not PROBLEM.search(actual[j])
                   and not (nxt is not None and nxt.match(actual[j]))):
                disp.append(actual[j])
                j += 1
            continue
        k = next((k for k in range(j, len(actual)) if pat.match(actual[k])), None)
        if k is None:
            disp.append(e)
        else:
            disp.append(actual[k])
            j = k + 1
    return disp


def matches(expected, actual):
    """expected lines (with "..." wildcards) against actual lines."""
    pats = patterns(expected)
    memo = {}

    def m(i, j):
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(pats):
            r = j == len(actual)
        elif pats[i] is None:
            # "..." never hides an error: an error must be shown as such
            r = m(i + 1, j) or (j < len(actual) and not PROBLEM.search(actual[j]) and m(i, j + 1))
        else:
            r = j < len(actual) and pats[i].match(actual[j]) is not None and m(i + 1, j + 1)
        memo[key] = r
        return r

    return m(0, 0)


def trim(lines):
    lines = [l.rstrip() for l in lines]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def unterminated(block):
    """The last SQL line of a psql block must end its statement, or the
    next block would be glued to it."""
    for line in reversed(block.text.split("\n")):
        s = re.sub(r"--.*$", "", line).strip()
        if not s:
            continue
        return not (s.endswith(";") or s.startswith("\\") or re.search(r"\\[a-z]+(\s+\S+)*$", s))
    return False


def psql(args, **kw):
    return subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", *args],
                          capture_output=True, text=True, timeout=120, **kw)


def admin(sql, db="postgres"):
    r = psql(["-At", "-d", db, "-c", sql])
    if r.returncode != 0:
        raise RuntimeError(f"{sql}: {r.stderr.strip()}")
    return r.stdout.split("\n")[:-1]


def snapshot():
    return (set(admin("SELECT datname FROM pg_catalog.pg_database")),
            set(admin("SELECT rolname FROM pg_catalog.pg_roles")))


def quote_ident(s):
    return '"' + s.replace('"', '""') + '"'


def cleanup(before):
    """Drop the databases and roles a page created."""
    dbs, roles = snapshot()
    for d in sorted(dbs - before[0]):
        admin(f"DROP DATABASE {quote_ident(d)} WITH (FORCE)")
    for r in sorted(roles - before[1]):
        for d in sorted(before[0] - {"template0"}):
            psql(["-d", d, "-c", f"DROP OWNED BY {quote_ident(r)} CASCADE"])
        admin(f"DROP ROLE {quote_ident(r)}")


def split_output(out, n):
    """Output of a script with markers before each block: list of n lists
    of lines (None for a block that never started)."""
    parts = [None] * n
    cur = None
    for line in out.split("\n"):
        if line.startswith(MARK):
            tag = line[len(MARK):].strip()
            if tag.startswith("end"):
                cur = None
            else:
                cur = int(tag)
                parts[cur] = []
            continue
        if cur is not None:
            parts[cur].append(line)
    return parts


class Result:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.skipped = 0
        self.failures = []
        self.lines = []  # of the current page, printed in line order by flush()

    def ok(self, b, note=""):
        self.passed += 1
        self.lines.append((b.line, f"ok    {b.where()} {b.lang}{note}"))

    def fail(self, b, why, diff=None):
        self.failed += 1
        self.lines.append((b.line, f"FAIL  {b.where()} {b.lang}: {why}"))
        self.failures.append((b, why, diff))

    def skip(self, b):
        if not b.skip:
            self.fail(b, "<!-- not tested: REASON --> without a reason")
            return
        self.skipped += 1
        self.lines.append((b.line, f"SKIP  {b.where()} {b.lang}: not tested: {b.skip}"))

    def flush(self):
        for _, line in sorted(self.lines):
            print(line, flush=True)
        self.lines = []


def judge(res, b, lines, rc_note=None):
    """Compare a block's output with its ```text block, or look for errors."""
    if lines is None:
        res.fail(b, "did not run (an earlier block stopped the session)" if rc_note is None else rc_note)
        return
    actual = trim(lines)
    if b.expected is not None:
        expected = trim(b.expected)
        if matches(expected, actual) and rc_note is None:
            res.ok(b, f" (output checked against line {b.expected_line})")
            return
        diff = list(difflib.unified_diff(
            resolve(expected, actual), actual,
            f"{b.path}:{b.expected_line} (the ```text block: expected; \"...\" shown as matched)",
            f"what the block at {b.where()} printed", lineterm="", n=3))
        res.fail(b, rc_note or "output differs from the ```text block", diff)
        return
    bad = [l for l in actual if PROBLEM.search(l)]
    if bad or rc_note:
        res.fail(b, rc_note or "printed an error", actual)
    else:
        res.ok(b)


def run_sql_page(path, blocks, res, workdir):
    tested = [b for b in blocks if b.lang == "sql"]
    for b in tested:
        if b.skip is not None:
            res.skip(b)
    tested = [b for b in tested if b.skip is None]
    if not tested:
        return
    for b in tested:
        if unterminated(b):
            res.fail(b, "the block's last statement has no ';' (it would run glued to the next block)")
            return
    before = snapshot()
    db = "doc_" + re.sub(r"[^a-z0-9]+", "_", path.lower().removesuffix(".md"))
    try:
        admin(f"CREATE DATABASE {db}")
        first = None
        for b in tested:
            c, d = CREATE_EXT.search(b.text), DROP_EXT.search(b.text)
            if c or d:
                first = "create" if c and (not d or c.start() < d.start()) else "drop"
                break
        if first != "create":
            admin("CREATE EXTENSION fencing", db)
        sessions = []
        for b in tested:
            if not sessions or b.new_session:
                sessions.append([])
            sessions[-1].append(b)
        for s in sessions:
            script = []
            for k, b in enumerate(s):
                script.append(f"\\echo {MARK}{k}")
                script.append(b.text)
            script.append(f"\\echo {MARK}end")
            try:
                r = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=0", "-d", db],
                                   input="\n".join(script), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT,
                                   cwd=os.getcwd())
                out, note = r.stdout, None
                if r.returncode != 0:
                    note = f"psql exited {r.returncode}"
            except subprocess.TimeoutExpired as e:
                out = e.stdout or ""
                if isinstance(out, bytes):
                    out = out.decode(errors="replace")
                note = f"timed out after {TIMEOUT} s"
            parts = split_output(out, len(s))
            for k, b in enumerate(s):
                # a failure of the session itself belongs to the last block that started
                started = [j for j in range(len(s)) if parts[j] is not None]
                last = started[-1] if started else 0
                judge(res, b, parts[k], note if note and k == last else None)
    finally:
        cleanup(before)


def run_shell_page(path, blocks, res, workdir):
    tested = [b for b in blocks if b.lang in SHELL_LANGS or b.lang == "sql"]
    for b in tested:
        if b.skip is not None:
            res.skip(b)
    tested = [b for b in tested if b.skip is None]
    if not tested:
        return
    before = snapshot()
    d = tempfile.mkdtemp(prefix="shell.", dir=workdir)
    script = ["set -e"]
    for k, b in enumerate(tested):
        f = os.path.join(d, f"block{k}")
        with open(f, "w") as fh:
            fh.write(b.text)
        script.append(f"echo '{MARK}{k}'")
        if b.lang == "sql":
            script.append(f"psql -X -q -v ON_ERROR_STOP=1 < {f} 2>&1")
        else:
            script.append(f". {f}")
        script.append(f"echo '{MARK}end {k}'")
    env = dict(os.environ, PGDATABASE="postgres")
    try:
        try:
            r = subprocess.run(["bash", "-c", "\n".join(script)], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT, env=env,
                               stdin=subprocess.DEVNULL)
            out, note = r.stdout, (f"exited {r.returncode}" if r.returncode else None)
        except subprocess.TimeoutExpired as e:
            out = e.stdout or ""
            if isinstance(out, bytes):
                out = out.decode(errors="replace")
            note = f"timed out after {TIMEOUT} s"
        parts = split_output(out, len(tested))
        ended = set(int(l[len(MARK) + 4:]) for l in out.split("\n") if l.startswith(MARK + "end "))
        for k, b in enumerate(tested):
            if parts[k] is not None and k not in ended:
                judge(res, b, parts[k], note or "did not finish")
            elif parts[k] is None:
                judge(res, b, None)
            else:
                judge_shell(res, b, parts[k])
    finally:
        shutil.rmtree(d, ignore_errors=True)
        cleanup(before)


def judge_shell(res, b, lines):
    # the block exited 0; with a ```text block its output must match
    if b.expected is None:
        res.ok(b)
    else:
        judge(res, b, lines)


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def slug(heading):
    """GitHub's anchor for a heading."""
    h = re.sub(r"[`*]|<[^>]*>", "", heading.strip().lower())
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found = set()
        seen = {}
        in_code = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE.match(line):
                    in_code = not in_code
                    continue
                if in_code:
                    continue
                m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if m:
                    a = slug(m.group(1))
                    n = seen.get(a, 0)
                    seen[a] = n + 1
                    found.add(a if n == 0 else f"{a}-{n}")
                for m in re.finditer(r"""(?:id|name)=["']([^"']+)["']""", line):
                    found.add(m.group(1))
        cache[path] = found
    return cache[path]


def check_links(path, res):
    """Relative links of a page: the file exists, and so does the heading an
    anchor names.  Broken links fail (DOC_TEST_STRICT=0: WARN)."""
    strict = STRICT
    base = os.path.dirname(path)
    in_code = False
    bad = 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                in_code = not in_code
                continue
            if in_code:
                continue
            for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                    continue  # https:, mailto:
                file, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(base, file)) if file else path
                why = None
                if not os.path.exists(dest):
                    why = "no such file"
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    why = f"no heading #{anchor} in {dest}"
                if why:
                    bad += 1
                    msg = f"{path}:{n} link {target}: {why}"
                    if strict:
                        res.failed += 1
                        res.lines.append((n, f"FAIL  {msg}"))
                    else:
                        res.lines.append((n, f"WARN  {msg}"))
    return bad


def check_coverage(res):
    """Every function of the install scripts (but the internal _ ones) and
    every LF SQLSTATE of src/ is named in README.md (the reference and
    SQLSTATE tables)."""
    with open("README.md", encoding="utf-8") as f:
        readme = f.read()
    names = set()
    for script in glob.glob("fencing--*.sql"):
        with open(script, encoding="utf-8") as f:
            names |= set(re.findall(r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+fencing\.([a-z][a-z0-9_]*)",
                                    f.read(), re.I))
    codes = set()
    for src in glob.glob("src/*.[ch]"):
        with open(src, encoding="utf-8") as f:
            for m in re.finditer(r"MAKE_SQLSTATE\('L',\s*'F',\s*'(\d)',\s*'(\d)',\s*'(\d)'\)", f.read()):
                codes.add("LF" + "".join(m.groups()))
    missing = ([f"function fencing.{n}() is not in the reference" for n in sorted(names)
                if not re.search(r"`" + re.escape(n) + r"\(", readme)]
               + [f"SQLSTATE {c} is not in the SQLSTATE table" for c in sorted(codes)
                  if not re.search(r"^\| `" + c + r"`", readme, re.M)])
    for m in missing:
        if STRICT:
            res.failed += 1
            print(f"FAIL  README.md: {m}")
        else:
            print(f"WARN  README.md: {m}")


def main(argv):
    t0 = time.time()
    pages = argv[1:] or (SQL_PAGES + SHELL_PAGES)
    res = Result()
    workdir = tempfile.mkdtemp(prefix="fencing-doctest.")
    try:
        for p in pages:
            if not os.path.exists(p):
                print(f"FAIL  {p}: no such file", flush=True)
                res.failed += 1
                continue
            blocks = parse(p)
            try:
                check_links(p, res)
                if p in SHELL_PAGES:
                    run_shell_page(p, blocks, res, workdir)
                else:
                    run_sql_page(p, blocks, res, workdir)
            finally:
                res.flush()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if not argv[1:]:
        check_coverage(res)
    for b, why, diff in res.failures:
        print()
        print(f"==== {b.where()}: {why}")
        for line in diff or []:
            print(line)
    print()
    print(f"doc test: {res.passed} passed, {res.failed} failed, {res.skipped} skipped"
          f" ({time.time() - t0:.0f} s)")
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
