"""Kernel peers for tests/c/opts.c, in namespace B.
Usage:
  opts_peer.py send ADDR PORT BYTES      listen, accept one connection, send BYTES of the
                                         pattern (i*7+3)&255, close; prints "listening"
  opts_peer.py push ADDR PORT BYTES      connect (retrying up to 20 s), send BYTES of the
                                         pattern, close
  opts_peer.py names ADDR PORT COUNT     listen; for COUNT connections print the peer's
                                         address and port ("peer IP PORT"), send it back
                                         as "IP PORT\\n", close; prints "listening"
  opts_peer.py udp ADDR PORT COUNT       receive COUNT datagrams, answer each with "ok"
  opts_peer.py close ADDR PORT COUNT     listen; accept COUNT connections, closing each
                                         at once (FIN); prints "listening"
"""
import socket
import sys
import time

mode, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])


def pattern(n):
    return bytes((i * 7 + 3) & 255 for i in range(n))


def listener():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(16)
    s.settimeout(30)
    print("listening", flush=True)
    return s


if mode == "send":
    s = listener()
    c, _ = s.accept()
    c.sendall(pattern(int(sys.argv[4])))
    c.close()
elif mode == "push":
    data = pattern(int(sys.argv[4]))
    deadline = time.time() + 20
    while True:
        try:
            c = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)
    c.settimeout(30)
    c.sendall(data)
    c.close()
elif mode == "names":
    s = listener()
    for _ in range(int(sys.argv[4])):
        c, peer = s.accept()
        print("peer %s %d" % peer, flush=True)
        c.sendall(("%s %d\n" % peer).encode())
        c.close()
elif mode == "udp":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    s.settimeout(30)
    print("listening", flush=True)
    for _ in range(int(sys.argv[4])):
        d, src = s.recvfrom(2048)
        s.sendto(b"ok", src)
elif mode == "close":
    s = listener()
    for _ in range(int(sys.argv[4])):
        c, _ = s.accept()
        c.close()
else:
    sys.exit("unknown mode " + mode)
print("peer done", flush=True)
