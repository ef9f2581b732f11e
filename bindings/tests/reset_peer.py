#!/usr/bin/python3
"""A TCP server that resets every connection, for bindings/tests/redis.lua.

It accepts, reads the client's first bytes, waits a little and closes with
SO_LINGER 0, so the client sees a reset (RST, POLLERR) rather than an end of
stream: the case hiredis's stock libuv adapter never reports.  Prints
`port <n>` once listening, then serves until killed.
"""
import socket
import struct
import time

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(16)
print("port", s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    c.recv(4096)
    time.sleep(0.1)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
