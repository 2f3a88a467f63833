#!/usr/bin/env bash
# tools/format.sh [--check] - clang-format (.clang-format at the top) over every tracked
# C, C++ and CUDA file. --check changes nothing and fails, naming the files, when one
# differs from the style; tools/test.sh runs it so CI keeps one style and one line width.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cc' '*.cu' '*.cuh')
if [ "${1:-}" = "--check" ]; then
  bad=$(clang-format --dry-run "${files[@]}" 2>&1 | grep 'warning: code should be clang-formatted' | cut -d: -f1 | sort -u || true)
  if [ -n "$bad" ]; then
    echo "format: these files differ from .clang-format (run tools/format.sh):" >&2
    echo "$bad" | sed 's/^/  /' >&2
    exit 1
  fi
  echo "format: ${#files[@]} files follow .clang-format"
else
  clang-format -i "${files[@]}"
fi
