#!/usr/bin/env bash
# release_check.sh: check that the release metadata agree with each other
# and with the PGXN Meta Spec v1.0.0.  Exits non-zero, listing every
# problem, if anything is off.
#
#   test/release_check.sh            # the tree this script lives in
#   test/release_check.sh DIR        # another copy of the tree
#
# The single source of the version is default_version in fencing.control
# (the extension version, e.g. '1.0').  Everything else must agree with it:
#   - META.json: version and provides.fencing.version are that version
#     with a patch level (1.0 -> 1.0.x); provides.fencing.file is
#     fencing--<default_version>.sql, and that file exists;
#   - CHANGELOG.md has a "## <META version>" section; while that section
#     says "unreleased", release_status must not be "stable";
#   - debian/changelog's newest entry has upstream version <META version>;
#   - src/fencing.c's PG_MODULE_MAGIC_EXT (PostgreSQL 18) names the same
#     version;
#   - no install script is newer than default_version, and every
#     fencing--A--B.sql update script leads to a version that has an
#     install script or is default_version.
# META.json itself is checked against the spec's rules (required keys,
# types, Term/Tag/SemVer/version-range syntax, license names, meta-spec
# version, prereq phases and relationships, resources).
#
# Needs python3 (standard library only).
set -euo pipefail

dir=${1:-"$(dirname "$0")/.."}
cd "$dir"

py=/usr/bin/python3
[ -x "$py" ] || py=python3
exec "$py" - <<'PYTHON'
import json
import os
import re
import sys

problems = []
notes = []


def bad(msg):
    problems.append(msg)


# ---------------------------------------------------------------------------
# PGXN Meta Spec v1.0.0

SEMVER = (r"(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)"
          r"(?:-(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
          r"(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
          r"(?:\+[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*)?")
SEMVER_RE = re.compile(r"^" + SEMVER + r"$")
RANGE_ONE = r"(?:(?:[=!]=|[<>]=?)\s*)?(?:" + SEMVER + r"|0)"
RANGE_RE = re.compile(r"^" + RANGE_ONE + r"(?:,\s*" + RANGE_ONE + r")*$")
TERM_RE = re.compile(r"^[^/\\\s\x00-\x1f\x7f]{2,}$")
TAG_RE = re.compile(r"^[^/\\\x00-\x1f\x7f]{2,255}$")
CUSTOM_RE = re.compile(r"^[xX]_.")
URI_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:\S+$")
LICENSES = {
    "agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd",
    "freebsd", "gfdl_1_2", "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1",
    "lgpl_3_0", "mit", "mozilla_1_0", "mozilla_1_1", "openssl", "perl_5",
    "postgresql", "qpl_1_0", "ssleay", "sun", "zlib", "open_source",
    "restricted", "unrestricted", "unknown",
}
TOP_KEYS = {
    "name", "version", "abstract", "maintainer", "license", "provides",
    "meta-spec", "description", "generated_by", "tags", "no_index",
    "prereqs", "release_status", "resources",
}
REQUIRED = ["name", "version", "abstract", "maintainer", "license",
            "provides", "meta-spec"]


def is_str(v, min_len=1):
    return isinstance(v, str) and len(v) >= min_len


def check_keys(where, obj, allowed):
    for k in obj:
        if k not in allowed and not CUSTOM_RE.match(k):
            bad(f"META.json: {where}: unknown key {k!r}")


def check_path(where, v):
    if not is_str(v) or v.startswith("/") or "\\" in v:
        bad(f"META.json: {where}: must be a relative path with unix conventions")
    elif not os.path.isfile(v):
        bad(f"META.json: {where}: file {v} does not exist")


def validate_meta(meta):
    if not isinstance(meta, dict):
        bad("META.json: not a JSON object")
        return
    for k in REQUIRED:
        if k not in meta:
            bad(f"META.json: required key {k!r} is missing")
    check_keys("top level", meta, TOP_KEYS)

    if "name" in meta and not (is_str(meta["name"]) and TERM_RE.match(meta["name"])):
        bad("META.json: name must be a Term (2+ characters, no slash, backslash, space or control character)")
    if "version" in meta and not (is_str(meta["version"]) and SEMVER_RE.match(meta["version"])):
        bad(f"META.json: version {meta['version']!r} is not a SemVer")
    for k in ("abstract", "description", "generated_by"):
        if k in meta and not is_str(meta[k]):
            bad(f"META.json: {k} must be a non-empty string")

    m = meta.get("maintainer")
    if m is not None and not (is_str(m) or (isinstance(m, list) and m and all(is_str(x) for x in m))):
        bad("META.json: maintainer must be a string or a non-empty list of strings")

    lic = meta.get("license")
    if lic is not None:
        if isinstance(lic, str):
            if lic not in LICENSES:
                bad(f"META.json: license {lic!r} is not one of the spec's names")
        elif isinstance(lic, list):
            if not lic or any(x not in LICENSES for x in lic):
                bad("META.json: license list must name licenses from the spec")
        elif isinstance(lic, dict):
            if not lic or any(not (is_str(u) and URI_RE.match(u)) for u in lic.values()):
                bad("META.json: license object must map names to URIs")
        else:
            bad("META.json: license must be a string, a list or an object")

    prov = meta.get("provides")
    if prov is not None:
        if not isinstance(prov, dict) or not prov:
            bad("META.json: provides must be a non-empty object")
        else:
            for ext, p in prov.items():
                where = f"provides.{ext}"
                if not TERM_RE.match(ext):
                    bad(f"META.json: {where}: the extension name is not a Term")
                if not isinstance(p, dict):
                    bad(f"META.json: {where}: must be an object")
                    continue
                check_keys(where, p, {"file", "version", "abstract", "docfile"})
                for k in ("file", "version"):
                    if k not in p:
                        bad(f"META.json: {where}: required key {k!r} is missing")
                if "file" in p:
                    check_path(f"{where}.file", p["file"])
                if "docfile" in p:
                    check_path(f"{where}.docfile", p["docfile"])
                if "version" in p and not (is_str(p["version"]) and SEMVER_RE.match(p["version"])):
                    bad(f"META.json: {where}.version is not a SemVer")
                if "abstract" in p and not is_str(p["abstract"]):
                    bad(f"META.json: {where}.abstract must be a non-empty string")

    ms = meta.get("meta-spec")
    if ms is not None:
        if not isinstance(ms, dict):
            bad("META.json: meta-spec must be an object")
        else:
            check_keys("meta-spec", ms, {"version", "url"})
            if not (is_str(ms.get("version")) and re.match(r"^1\.0\.\d+$", ms["version"])):
                bad("META.json: meta-spec.version must be 1.0.x")
            if "url" in ms and ms["url"] not in ("https://pgxn.org/meta/spec.txt",
                                                 "http://pgxn.org/meta/spec.txt"):
                bad("META.json: meta-spec.url must be the spec's URL")

    tags = meta.get("tags")
    if tags is not None:
        if not isinstance(tags, list) or not tags:
            bad("META.json: tags must be a non-empty list")
        else:
            for t in tags:
                if not (isinstance(t, str) and TAG_RE.match(t)):
                    bad(f"META.json: tag {t!r}: 2 to 255 characters, no slash, backslash or control character")

    ni = meta.get("no_index")
    if ni is not None:
        if not isinstance(ni, dict):
            bad("META.json: no_index must be an object")
        else:
            check_keys("no_index", ni, {"file", "directory"})
            for k, v in ni.items():
                if CUSTOM_RE.match(k):
                    continue
                if not (is_str(v) or (isinstance(v, list) and v and all(is_str(x) for x in v))):
                    bad(f"META.json: no_index.{k} must be a path or a list of paths")

    pre = meta.get("prereqs")
    if pre is not None:
        if not isinstance(pre, dict) or not pre:
            bad("META.json: prereqs must be a non-empty object")
        else:
            check_keys("prereqs", pre, {"configure", "build", "test", "runtime", "develop"})
            for phase, rels in pre.items():
                if CUSTOM_RE.match(phase):
                    continue
                if not isinstance(rels, dict) or not rels:
                    bad(f"META.json: prereqs.{phase} must be a non-empty object")
                    continue
                check_keys(f"prereqs.{phase}", rels,
                           {"requires", "recommends", "suggests", "conflicts"})
                for rel, deps in rels.items():
                    if CUSTOM_RE.match(rel):
                        continue
                    if not isinstance(deps, dict):
                        bad(f"META.json: prereqs.{phase}.{rel} must be an object")
                        continue
                    for dep, rng in deps.items():
                        if not TERM_RE.match(dep):
                            bad(f"META.json: prereqs.{phase}.{rel}: {dep!r} is not a Term")
                        if not (rng == 0 or (isinstance(rng, str) and RANGE_RE.match(rng))):
                            bad(f"META.json: prereqs.{phase}.{rel}.{dep}: {rng!r} is not a version range")

    rs = meta.get("release_status")
    if rs is not None and rs not in ("stable", "testing", "unstable"):
        bad("META.json: release_status must be stable, testing or unstable")

    res = meta.get("resources")
    if res is not None:
        if not isinstance(res, dict) or not res:
            bad("META.json: resources must be a non-empty object")
        else:
            check_keys("resources", res, {"homepage", "bugtracker", "repository"})
            if "homepage" in res and not (is_str(res["homepage"]) and URI_RE.match(res["homepage"])):
                bad("META.json: resources.homepage must be a URI")
            for k, allowed in (("bugtracker", {"web", "mailto"}),
                               ("repository", {"url", "web", "type"})):
                v = res.get(k)
                if v is None:
                    continue
                if not isinstance(v, dict) or not v:
                    bad(f"META.json: resources.{k} must be a non-empty object")
                    continue
                check_keys(f"resources.{k}", v, allowed)
                for sub in ("web", "url"):
                    if sub in v and not (is_str(v[sub]) and URI_RE.match(v[sub])):
                        bad(f"META.json: resources.{k}.{sub} must be a URI")
                if "type" in v and not (is_str(v["type"]) and re.match(r"^[a-z]+$", v["type"])):
                    bad(f"META.json: resources.{k}.type must be a lowercase word (git, svn, ...)")
    else:
        notes.append("META.json has no resources (homepage, bugtracker, repository): add them once public")


# ---------------------------------------------------------------------------
# one version everywhere

def control_value(text, key):
    m = re.search(r"^\s*" + re.escape(key) + r"\s*=\s*'([^']*)'", text, re.M)
    return m.group(1) if m else None


def vkey(v):
    return [int(x) if x.isdigit() else x for x in re.split(r"[.]", v)]


ext = "fencing"
control_path = f"{ext}.control"
default_version = None
if not os.path.isfile(control_path):
    bad(f"{control_path} does not exist")
else:
    default_version = control_value(open(control_path, encoding="utf-8").read(), "default_version")
    if not default_version:
        bad(f"{control_path}: no default_version = '...' line")
    elif not re.match(r"^\d+\.\d+$", default_version):
        bad(f"{control_path}: default_version {default_version!r} is not major.minor")

meta = None
try:
    with open("META.json", encoding="utf-8") as f:
        meta = json.load(f)
except FileNotFoundError:
    bad("META.json does not exist")
except ValueError as e:
    bad(f"META.json is not valid JSON: {e}")

if meta is not None:
    validate_meta(meta)

meta_version = meta.get("version") if isinstance(meta, dict) else None
if default_version and isinstance(meta_version, str):
    install = f"{ext}--{default_version}.sql"
    if not os.path.isfile(install):
        bad(f"{install} (the install script of default_version) does not exist")
    if meta.get("name") != ext:
        bad(f"META.json: name {meta.get('name')!r} is not {ext!r}")
    mm = re.match(r"^(\d+)\.(\d+)\.\d+", meta_version)
    if not mm or f"{mm.group(1)}.{mm.group(2)}" != default_version:
        bad(f"META.json: version {meta_version} does not carry {control_path}'s "
            f"default_version {default_version} (expected {default_version}.x)")
    p = (meta.get("provides") or {}).get(ext) if isinstance(meta.get("provides"), dict) else None
    if not isinstance(p, dict):
        bad(f"META.json: provides has no {ext!r} entry")
    else:
        if p.get("version") != meta_version:
            bad(f"META.json: provides.{ext}.version {p.get('version')!r} differs from version {meta_version}")
        if p.get("file") != install:
            bad(f"META.json: provides.{ext}.file {p.get('file')!r} is not {install}")

    # CHANGELOG.md: a section for this version
    status = meta.get("release_status")
    if not os.path.isfile("CHANGELOG.md"):
        bad("CHANGELOG.md does not exist")
    else:
        cl = open("CHANGELOG.md", encoding="utf-8").read()
        hm = re.search(r"^##\s+\[?v?" + re.escape(meta_version) + r"\]?(?![\w.])(.*)$", cl, re.M)
        if not hm:
            bad(f"CHANGELOG.md has no '## {meta_version}' section")
        else:
            unreleased = "unreleased" in hm.group(1).lower()
            if unreleased and status == "stable":
                bad(f"CHANGELOG.md says {meta_version} is unreleased, but META.json's release_status is stable")
            if not unreleased and status not in (None, "stable"):
                notes.append(f"CHANGELOG.md dates {meta_version}, release_status is {status}")

    # debian/changelog: upstream version of the newest entry
    if os.path.isfile("debian/changelog"):
        first = open("debian/changelog", encoding="utf-8").readline()
        dm = re.match(r"^\S+ \(([^)]+)\)", first)
        if not dm:
            bad("debian/changelog: cannot read the version of the newest entry")
        else:
            deb = dm.group(1)
            upstream = re.sub(r"^\d+:", "", deb)
            upstream = re.sub(r"-[^-]*$", "", upstream)
            upstream = re.sub(r"[~+].*$", "", upstream)
            if upstream != meta_version:
                bad(f"debian/changelog: version {deb} is not {meta_version}-<debian revision>")

    # PostgreSQL 18 module magic
    if os.path.isfile("src/fencing.c"):
        src = open("src/fencing.c", encoding="utf-8").read()
        for v in re.findall(r"PG_MODULE_MAGIC_EXT\([^)]*\.version\s*=\s*\"([^\"]*)\"", src):
            if v != default_version:
                bad(f"src/fencing.c: PG_MODULE_MAGIC_EXT names version {v}, not {default_version}")

    # install and update scripts
    for fn in sorted(os.listdir(".")):
        m1 = re.match(r"^" + ext + r"--([^-]+)\.sql$", fn)
        m2 = re.match(r"^" + ext + r"--([^-]+)--([^-]+)\.sql$", fn)
        if m1 and vkey(m1.group(1)) > vkey(default_version):
            bad(f"{fn}: an install script newer than default_version {default_version}")
        if m2:
            to = m2.group(2)
            if vkey(to) > vkey(default_version):
                bad(f"{fn}: updates to {to}, newer than default_version {default_version}")

for n in notes:
    print(f"note: {n}")
if problems:
    for p in problems:
        print(f"release_check: {p}", file=sys.stderr)
    print(f"release_check: {len(problems)} problem(s)", file=sys.stderr)
    sys.exit(1)
print(f"release_check: ok ({ext} {meta_version}, extension version {default_version})")
PYTHON
