#!/bin/sh
# Writes a C file holding each Lua source given, so the engine's Lua half
# ships inside the binary: kv_embedded[] = {name, bytes, length}.
set -eu
echo '#include <stddef.h>'
i=0
for f in "$@"; do
  printf 'static const unsigned char src%d[] = {\n' "$i"
  od -An -v -tx1 "$f" | sed -e 's/\([0-9a-f][0-9a-f]\)/0x\1,/g'
  printf '};\n'
  i=$((i + 1))
done
echo 'const struct kv_embedded { const char *name; const unsigned char *src; size_t len; } kv_embedded[] = {'
i=0
for f in "$@"; do
  name=$(basename "$f" .lua)
  printf '  {"%s", src%d, sizeof src%d},\n' "$name" "$i" "$i"
  i=$((i + 1))
done
echo '  {NULL, NULL, 0}};'
