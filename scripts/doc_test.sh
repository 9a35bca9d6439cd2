#!/usr/bin/env bash
# doc_test.sh: the documentation's code blocks, run as written against a
# throwaway cluster (scripts/tmp_cluster.sh: the initdb and pg_ctl first on
# PATH), their output checked against the ```text blocks that follow them.
# Every ```sql block of README.md and docs/*.md; every command of
# examples/README.md and examples/{python,node,c}/README.md.  The rules
# (markers, "..." in expected output) are in scripts/doc_test.py.
#
#   FENCING_SUITES=docs FENCING_PRIVATE=1 scripts/test.sh  # as root: build, install, run
#   scripts/doc_test.sh [FILE.md...]   # as postgres, extension installed in the
#                                      # server first on PATH
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash scripts/tmp_cluster.sh python3 scripts/doc_test.py "$@"
