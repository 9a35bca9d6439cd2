#!/bin/bash
# py.sh SCRIPT.py: run a Python reproduction with env.sh's environment
. "$(dirname "$0")/env.sh"
exec python3 "$(dirname "$0")/$1"
