#!/usr/bin/python3
"""An independent ZMQ peer (Debian's python3-zmq) for bindings/tests/zmq.lua.

    zmq_peer.py sub ENDPOINT TOPIC COUNT [--bind] [--hwm N]
        Subscribe to TOPIC, receive COUNT messages [topic, seq, payload]
        (seq: 8-byte big-endian) and check that seq runs 0..COUNT-1 in order.
    zmq_peer.py pub ENDPOINT TOPIC COUNT [--bind] [--hwm N]
        An XPUB: wait until a subscriber for TOPIC is there, then send COUNT
        messages [topic, seq, payload].

Prints one JSON line with the outcome and exits 0 when it is complete.
When binding, the resolved endpoint is printed first as `endpoint <addr>`.
"""
import argparse
import json
import struct
import sys

import zmq

IDLE_MS = 10000  # give up after this long without a message


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["sub", "pub"])
    ap.add_argument("endpoint")
    ap.add_argument("topic")
    ap.add_argument("count", type=int)
    ap.add_argument("--bind", action="store_true")
    ap.add_argument("--hwm", type=int, default=100000)
    a = ap.parse_args()

    ctx = zmq.Context()
    s = ctx.socket(zmq.SUB if a.mode == "sub" else zmq.XPUB)
    s.setsockopt(zmq.LINGER, 5000 if a.mode == "pub" else 0)
    s.setsockopt(zmq.RCVHWM, a.hwm)
    s.setsockopt(zmq.SNDHWM, a.hwm)
    if a.mode == "sub":
        s.setsockopt(zmq.SUBSCRIBE, a.topic.encode())
    if a.bind:
        s.bind(a.endpoint)
        print("endpoint", s.getsockopt(zmq.LAST_ENDPOINT).decode(), flush=True)
    else:
        s.connect(a.endpoint)
    out = receive(s, a) if a.mode == "sub" else publish(s, a)
    print(json.dumps(out), flush=True)
    s.close()
    ctx.term()
    return 0 if out.get("ok") else 1


def receive(s, a):
    got, expected, bad = 0, 0, None
    while got < a.count:
        if not s.poll(IDLE_MS):
            break
        frames = s.recv_multipart()
        got += 1
        if len(frames) != 3 or frames[0] != a.topic.encode():
            bad = bad or "message %d has %d frames" % (got, len(frames))
            continue
        (seq,) = struct.unpack(">Q", frames[1])
        if seq != expected and bad is None:
            bad = "message %d has seq %d, expected %d" % (got, seq, expected)
        expected = seq + 1
    return {"ok": got == a.count and bad is None, "received": got, "error": bad}


def publish(s, a):
    # XPUB: the subscription message says that a subscriber is listening.
    while True:
        if not s.poll(IDLE_MS):
            return {"ok": False, "error": "no subscriber"}
        msg = s.recv()
        if msg[:1] == b"\x01" and a.topic.encode().startswith(msg[1:]):
            break
    for i in range(a.count):
        s.send_multipart([a.topic.encode(), struct.pack(">Q", i), b"payload %d" % i])
    return {"ok": True, "sent": a.count}


if __name__ == "__main__":
    sys.exit(main())
