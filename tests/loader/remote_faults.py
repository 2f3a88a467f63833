"""An HTTP server on 127.0.0.1 that misbehaves on purpose, for remote_http_test.sh (tests/storage/).

    python3 remote_faults.py DIR PORTFILE

serves the files of DIR as /MODE/COUNT/NAME (the port it bound is written to PORTFILE).
The first COUNT GET requests of each path misbehave as MODE says; later ones, and HEAD
requests (ETag "v1-SIZE", Content-Length), are answered correctly with Range support:
  ok        never misbehaves
  503       503 Service Unavailable
  429       429 Too Many Requests with Retry-After: 1
  reset     the range's headers, half its bytes, then a TCP reset
  short     the range's headers, half its bytes, then a clean close
  partial   a 206 for the first half of the range only (Content-Range says so)
  full      a 200 with the whole file, the Range ignored (not counted: always)
  stall     no answer for 30 s (the client's stall timeout fires first)
  etag      GETs answer ETag "v2-SIZE", If-Match ignored (always)
  precond   GETs answer 412 when If-Match is sent (always: the object changed)
  grown     GETs say the file is one byte longer in Content-Range (always)
  headfail  HEAD requests too: 503 for the first COUNT of them
  bigetag   HEAD and GETs answer an ETag of 300 bytes; a GET whose If-Match is not it: 412
  bigetagchg  the same, GETs with another ETag of 300 bytes (always: the object changed)
  weak      HEAD and GETs answer a weak ETag, W/"v1-SIZE"; a GET with If-Match: 412 (If-Match
            compares strongly, a weak ETag never matches: what nginx does)
  weakchg   the same, GETs answering W/"v2-SIZE" (always: the object changed)
  bighdr    HEAD and GET answers carry a header line of 200 KB (always)
  manyhdr   HEAD and GET answers carry 40 header lines of 10 KB (always)
  drip      GETs send their body COUNT bytes a second, one byte every 2 s for COUNT 0 (always)
  listloop  any GET (an S3 endpoint ending in /listloop/COUNT, BUCKET the NAME) is a truncated
            ListObjectsV2 page whose NextContinuationToken cycles through COUNT tokens (1: the
            same token for ever)
"""

import http.server
import os
import re
import socket
import struct
import sys
import threading
import time

ROOT = sys.argv[1]
COUNTS = {}
LOCK = threading.Lock()


def take(key, count):
    """True while the first `count` requests of key are being answered."""
    with LOCK:
        n = COUNTS.get(key, 0)
        COUNTS[key] = n + 1
    return n < count


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Small answers go out at once, not after the peer's delayed ACK (~40 ms each).
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):
        pass

    def parse(self):
        parts = self.path.split("/", 3)
        if len(parts) != 4:
            return None
        _, mode, count, name = parts
        path = os.path.join(ROOT, name)
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as f:
            data = f.read()
        return mode, int(count), data

    def send(self, code, headers, body=b"", close=False):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, code, extra=()):
        body = b"<Error><Code>Injected</Code><Message>fault</Message></Error>"
        self.send(code, [("Content-Length", str(len(body)))] + list(extra), body)

    @staticmethod
    def etag(mode, size, get):
        """The ETag a HEAD (get False) or a GET answers in this mode."""
        v = 2 if get and mode in ("etag", "bigetagchg", "weakchg") else 1
        if mode in ("bigetag", "bigetagchg"):
            return '"%s-v%d-%d"' % ("e" * 290, v, size)
        if mode in ("weak", "weakchg"):
            return 'W/"v%d-%d"' % (v, size)
        return '"v%d-%d"' % (v, size)

    @staticmethod
    def extra(mode):
        """Header lines over libcurl's limits (a line over 100 KiB, 300 KiB in all)."""
        if mode == "bighdr":
            return [("X-Big", "b" * 200000)]
        if mode == "manyhdr":
            return [("X-Many-%d" % i, "m" * 10000) for i in range(40)]
        return []

    def if_match_fails(self, mode, etag):
        """If-Match as a strong comparison (RFC 9110, 13.1.1): a weak ETag never matches."""
        want = self.headers.get("If-Match")
        if want is None or mode not in ("bigetag", "bigetagchg", "weak", "weakchg"):
            return False
        return etag.startswith("W/") or want != etag

    def do_HEAD(self):
        p = self.parse()
        if p is None:
            return self.send(404, [("Content-Length", "0")])
        mode, count, data = p
        if mode == "headfail" and take(("HEAD", self.path), count):
            return self.error(503)
        self.send(200, [("Content-Length", str(len(data))), ("ETag", self.etag(mode, len(data), False))]
                  + self.extra(mode))

    def listing(self, count):
        """A ListObjectsV2 page that is never the last one."""
        m = re.search(r"continuation-token=t(\d+)", self.path)
        nxt = (int(m.group(1)) + 1) % count if m else 0
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult>"
                "<IsTruncated>true</IsTruncated><Contents><Key>a.tar</Key><Size>1</Size>"
                "<ETag>\"e\"</ETag></Contents><NextContinuationToken>t%d</NextContinuationToken>"
                "</ListBucketResult>" % nxt).encode()
        self.send(200, [("Content-Length", str(len(body)))], body)

    def drip(self, headers, body, rate):
        """body at `rate` bytes a second (0: a byte every 2 s) until the client gives up."""
        self.send_response(206)
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        step, pause = (rate, 1.0) if rate > 0 else (1, 2.0)
        for i in range(0, len(body), step):
            self.wfile.write(body[i : i + step])
            self.wfile.flush()
            time.sleep(pause)

    def range(self, size):
        r = self.headers.get("Range", "")
        if not r.startswith("bytes="):
            return None
        a, b = r[6:].split("-")
        return int(a), min(int(b), size - 1)

    def do_GET(self):
        parts = self.path.split("/")
        if len(parts) > 3 and parts[1] == "listloop":
            return self.listing(max(1, int(parts[2])))
        p = self.parse()
        if p is None:
            return self.error(404)
        mode, count, data = p
        size = len(data)
        etag = self.etag(mode, size, True)
        if mode == "precond" and self.headers.get("If-Match"):
            return self.error(412)
        if self.if_match_fails(mode, etag):
            return self.error(412)
        rng = self.range(size)
        if mode == "full" or rng is None:
            return self.send(200, [("Content-Length", str(size)), ("ETag", etag)] + self.extra(mode), data)
        a, b = rng
        fault = take(("GET", self.path), count) and mode in ("503", "429", "stall", "partial", "reset", "short")
        if fault and mode == "503":
            return self.error(503)
        if fault and mode == "429":
            return self.error(429, [("Retry-After", "1")])
        if fault and mode == "stall":
            time.sleep(30)
            return
        total = size + 1 if mode == "grown" else size
        if fault and mode == "partial":
            b = a + (b - a) // 2
        body = data[a : b + 1]
        headers = [
            ("Content-Length", str(len(body))),
            ("Content-Range", "bytes %d-%d/%d" % (a, b, total)),
            ("ETag", etag),
        ] + self.extra(mode)
        if mode == "drip":
            return self.drip(headers, body, count)
        if fault and mode in ("reset", "short"):
            self.send_response(206)
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            if mode == "reset":  # linger 0: close() sends a RST, not a FIN
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                os.close(self.connection.detach())
            return
        self.send(206, headers, body)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that gives up on an answer (a stall, a range it has in full) resets the
        # connection: expected here, not worth a traceback.
        if not isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError)):
            super().handle_error(request, client_address)


def main():
    srv = Server(("127.0.0.1", 0), Handler)
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    srv.serve_forever()


if __name__ == "__main__":
    main()
