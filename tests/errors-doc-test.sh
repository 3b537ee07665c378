#!/usr/bin/env bash
# tests/errors-doc-test.sh - docs/errors.md is what tools/error-table.py
# makes of include/reserve.h's codes and the bindings' mapping tables now:
# every code has an error in every binding, the bindings agree on which
# server errors mean a refused account, and the page is not stale.
cd "$(dirname "$0")/.." || exit 1
if tools/error-table.py --check; then
  echo "errors-doc: 1 passed, 0 failed"
else
  echo "errors-doc: 0 passed, 1 failed"
  exit 1
fi
