#!/usr/bin/env bash
# doc_test.sh: the documentation's code blocks, run as written against a
# throwaway cluster (test/tmp_cluster.sh: the initdb and pg_ctl first on
# PATH), their output checked against the ```text blocks that follow them.
# Every ```sql block of README.md and docs/*.md; every command of
# examples/README.md and examples/{python,node,c}/README.md.  The rules
# (markers, "..." in expected output) are in test/docs/doc_test.py.
#
#   FENCING_SUITES=docs FENCING_PRIVATE=1 test/run.sh  # as root: build, install, run
#   test/docs/doc_test.sh [FILE.md...]   # as postgres, extension installed in the
#                                      # server first on PATH
set -euo pipefail
cd "$(dirname "$0")/../.."
exec bash test/tmp_cluster.sh python3 test/docs/doc_test.py "$@"
