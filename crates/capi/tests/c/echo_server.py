"""A kernel TCP echo server for the tests: one thread per connection, so an echo never
waits on another connection (socat's PIPE echo can stall a connection that streams both
ways at once: one process writes into a pipe only it reads). Prints "listening" when
ready.  Usage: echo_server.py ADDRESS PORT"""
import socket
import socketserver
import sys


class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            data = self.request.recv(65536)
            if not data:
                break
            self.request.sendall(data)
        try:
            self.request.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 256


with Server((sys.argv[1], int(sys.argv[2])), Echo) as s:
    print("listening", flush=True)
    s.serve_forever()
