#!/bin/sh
# `make valgrind`: the engine's own tests under valgrind, one worker per file
# (the worker is where a file's Lua, loop and bindings run; the processes it
# starts are not traced).  Fails on any invalid access or definite/indirect
# leak; a test's own pass or fail does not matter here.
set -u
kv=$1
cd "$(dirname "$0")/.."
log=$(mktemp)
status=0
for f in engine/tests/core.lua engine/tests/fs.lua engine/tests/golden/*.lua bindings/tests/*.lua; do
  case $f in *fuzz.lua) continue ;; esac
  KVENGINE_TIME_SCALE=10 valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect \
    --error-exitcode=99 "$kv" __worker --timeout 300 "$f" 3>/dev/null >/dev/null 2>"$log"
  if [ $? -eq 99 ]; then
    echo "valgrind: $f"
    cat "$log"
    status=1
  else
    echo "valgrind clean: $f"
  fi
done
rm -f "$log"
exit $status
