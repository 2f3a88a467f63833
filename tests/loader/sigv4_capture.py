"""A loopback HTTP server of sigv4_test.sh that records the requests it gets.

    python3 sigv4_capture.py PORTFILE LOG

Answers every request 200 with a 2-byte body, and appends to LOG one line per request: the
request line and each header line as received, joined by " | ", so the test can read the
Authorization header the client sent. The port it bound is written to PORTFILE.
"""

import http.server
import os
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        lines = [self.requestline] + ["%s: %s" % (k, v) for k, v in self.headers.items()]
        with open(sys.argv[2], "a", encoding="utf-8", errors="backslashreplace") as f:
            f.write(" | ".join(lines) + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


def main():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    srv.serve_forever()


if __name__ == "__main__":
    main()
