#!/usr/bin/python3
"""An independent msgpack peer for kv.events tests (Debian's python3-msgpack).

Run with /usr/bin/python3 (the Debian interpreter that has python3-msgpack).
Reads one item per line on stdin and writes one result per line on stdout:

  decode   hex payload in -> JSON of the decoded structure out
  encode   JSON structure in -> hex payload out
  repack   hex payload in -> hex of the same structure packed by python-msgpack
           (compact integer widths, float64, str/bin types) out

JSON structures use tagged scalars so that nothing is lost in JSON:
  "i:<decimal>" integer (any size, exact)   "s:<text>" string
  "b:<hex>"     bytes (msgpack bin)         "f:<repr>" float
  null, true, false as themselves           a JSON list is a msgpack array
  {"map": [[k, v], ...]} a msgpack map, entries in wire order
  "e:[]" an empty array, "e:{}" an empty map (for writers that cannot emit them)

Exit status: 0 ok, 1 a line could not be processed (the message is on
stderr), 2 usage, 3 python3-msgpack is missing.
"""

import binascii
import json
import sys

try:
    import msgpack
except ImportError:
    sys.stderr.write("interop_events.py: python3-msgpack is not installed\n")
    sys.exit(3)


def to_tagged(obj):
    """A decoded msgpack value as tagged JSON."""
    if obj is None or isinstance(obj, bool):
        return obj
    if isinstance(obj, int):
        return "i:%d" % obj
    if isinstance(obj, float):
        return "f:" + repr(obj)
    if isinstance(obj, str):
        return "s:" + obj
    if isinstance(obj, (bytes, bytearray)):
        return "b:" + binascii.hexlify(obj).decode()
    if isinstance(obj, (list, tuple)):
        return [to_tagged(x) for x in obj]
    if isinstance(obj, dict):
        return {"map": [[to_tagged(k), to_tagged(v)] for k, v in obj.items()]}
    raise ValueError("unexpected msgpack value %r" % (obj,))


def from_tagged(v):
    """Tagged JSON as the Python value msgpack should write."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, list):
        return [from_tagged(x) for x in v]
    if isinstance(v, dict):
        if set(v) != {"map"}:
            raise ValueError("an object must be {\"map\": [[k, v], ...]}")
        out = {}  # dicts keep insertion order: the map is written in wire order
        for k, x in v["map"]:
            out[from_tagged(k)] = from_tagged(x)
        return out
    if not isinstance(v, str) or len(v) < 2 or v[1] != ":":
        raise ValueError("untagged scalar %r" % (v,))
    tag, body = v[0], v[2:]
    if tag == "i":
        return int(body)
    if tag == "s":
        return body
    if tag == "b":
        return binascii.unhexlify(body)
    if tag == "f":
        return float(body)
    if tag == "e":
        return [] if body == "[]" else {}
    raise ValueError("unknown tag %r" % (tag,))


def unpack(hexline):
    # strict_map_key=False: maps may have non-string keys; raw=False: str is text.
    return msgpack.unpackb(binascii.unhexlify(hexline), raw=False, strict_map_key=False)


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def main(argv):
    if len(argv) != 2 or argv[1] not in ("decode", "encode", "repack"):
        sys.stderr.write("usage: interop_events.py decode|encode|repack < lines\n")
        return 2
    mode = argv[1]
    for n, line in enumerate(sys.stdin, 1):
        line = line.strip()
        if not line:
            continue
        try:
            if mode == "decode":
                out = json.dumps(to_tagged(unpack(line)), separators=(",", ":"))
            elif mode == "encode":
                out = binascii.hexlify(pack(from_tagged(json.loads(line)))).decode()
            else:
                out = binascii.hexlify(pack(unpack(line))).decode()
        except Exception as e:  # report which line, keep the message
            sys.stderr.write("interop_events.py: line %d: %s: %s\n" % (n, type(e).__name__, e))
            return 1
        sys.stdout.write(out + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
