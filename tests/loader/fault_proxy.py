"""A throttling, faulting reverse proxy on 127.0.0.1, in front of nginx or the S3 server (s3_server.py).

    python3 fault_proxy.py UPSTREAM PORTFILE [KNOB=VALUE ...]

UPSTREAM is http://HOST:PORT. Every request is forwarded with its method, path, query and
headers unchanged (Host and the SigV4 Authorization included, so a signature made for the
proxy's address stays what the client signed), and the answer comes back unchanged unless a
knob says otherwise. The port bound is written to PORTFILE.

Knobs (KNOB=VALUE on the command line, or at run time GET /__proxy/set?KNOB=VALUE&...;
0 turns one off). Requests are numbered 1, 2, ... in arrival order (control requests not
counted); "every N" means request numbers divisible by N.
  latency_ms=MS        each request waits MS before it is forwarded
  bandwidth=BYTES_S    answer bodies, all connections together, at most BYTES_S bytes/s
  fail_every=N         every Nth request answered fail_status (default 503), not forwarded
  fail_status=CODE     the status of fail_every and burst answers (default 503)
  burst=K              the next K requests answered fail_status (a burst of failures)
  burst_s=S            every request for the next S seconds answered fail_status
  throttle_every=N     every Nth request answered 429 with Retry-After: retry_after
  retry_after=S        the Retry-After of 429s in seconds (default 1)
  retry_after_date=1   the Retry-After as an HTTP date (now + retry_after), not seconds
  reset_every=N        every Nth answer with a body: the headers and half the body, then a
                       TCP reset
  truncate_every=N     every Nth answer with a body: the headers (Content-Length honest) and
                       half the body, then a clean close
  etag=STRING          answers to GET carry this ETag instead of the upstream's (the object
                       "changed" after a HEAD pinned it; "" turns it off)
  total_delta=N        answers to GET say the object is N bytes longer in Content-Range
  only_path=STRING     the knobs above apply only to requests whose path contains STRING
                       (one object "down", the others served); "" turns it off
A knob that answers a request itself (fail, burst, throttle) takes precedence over the body
faults. An upstream that cannot be reached is a 502; an upstream that breaks off an answer
resets the client's connection.

GET /__proxy/stats answers JSON: requests, forwarded, the count of each injected fault,
upstream_errors, body_bytes (sent to clients) and the knobs. GET /__proxy/zero zeroes the
counters and the request numbering; GET /__proxy/reset also sets every knob back to its
default (no faults).
"""

import email.utils
import http.client
import http.server
import json
import os
import socket
import struct
import sys
import threading
import time
import urllib.parse

HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
       "proxy-connection"}
CHUNK = 1 << 20

KNOBS = {
    "latency_ms": 0.0, "bandwidth": 0.0, "fail_every": 0, "fail_status": 503, "burst": 0,
    "burst_s": 0.0, "throttle_every": 0, "retry_after": 1, "retry_after_date": 0,
    "reset_every": 0, "truncate_every": 0, "etag": "", "total_delta": 0, "only_path": "",
}
DEFAULTS = dict(KNOBS)
LOCK = threading.Lock()
STATE = {"n": 0, "burst_until": 0.0, "body_n": 0}
STATS = {}


def zero():
    STATE["n"] = 0
    STATE["body_n"] = 0
    STATS.clear()
    STATS.update({"requests": 0, "forwarded": 0, "fail": 0, "burst": 0, "throttle": 0,
                  "reset": 0, "truncate": 0, "upstream_errors": 0, "body_bytes": 0})


def count(key, n=1):
    with LOCK:
        STATS[key] += n


def set_knob(name, value):
    if name not in KNOBS:
        raise ValueError("unknown knob %r" % name)
    if isinstance(KNOBS[name], str):
        with LOCK:
            KNOBS[name] = value
        return
    v = type(KNOBS[name])(float(value))
    if v < 0:
        raise ValueError("%s=%s: negative" % (name, value))
    with LOCK:
        KNOBS[name] = v
        if name == "burst_s":
            STATE["burst_until"] = time.monotonic() + v


class Pacer:
    """Bodies of all connections together at most KNOBS['bandwidth'] bytes per second."""

    def __init__(self):
        self.lock = threading.Lock()
        self.next = 0.0

    def wait(self, nbytes):
        bw = KNOBS["bandwidth"]
        if bw <= 0:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next)
            self.next = start + nbytes / bw
            until = self.next
        delay = until - time.monotonic()
        if delay > 0:
            time.sleep(delay)


PACER = Pacer()


def every(n, knob):
    k = KNOBS[knob]
    return k > 0 and n % k == 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream = None  # (host, port)
    # Headers and body go out in separate writes: without TCP_NODELAY a small body waits
    # for the client's delayed ACK (~40 ms), which would add latency no knob asked for.
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        self.proxy()

    def do_HEAD(self):
        self.proxy()

    def do_PUT(self):
        self.proxy()

    def do_POST(self):
        self.proxy()

    def do_DELETE(self):
        self.proxy()

    def answer(self, code, body, headers=()):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def control(self):
        u = urllib.parse.urlsplit(self.path)
        if u.path == "/__proxy/stats":
            with LOCK:
                out = dict(STATS, knobs=dict(KNOBS))
            return self.answer(200, json.dumps(out, sort_keys=True).encode() + b"\n",
                               [("Content-Type", "application/json")])
        if u.path in ("/__proxy/zero", "/__proxy/reset"):
            with LOCK:
                zero()
                if u.path == "/__proxy/reset":
                    KNOBS.update(DEFAULTS)
                    STATE["burst_until"] = 0.0
            return self.answer(200, b"ok\n")
        if u.path == "/__proxy/set":
            try:
                for k, v in urllib.parse.parse_qsl(u.query, keep_blank_values=True,
                                                    strict_parsing=True):
                    set_knob(k, v)
            except ValueError as e:
                return self.answer(400, (str(e) + "\n").encode())
            return self.answer(200, b"ok\n")
        return self.answer(404, b"no such control\n")

    def injected(self, n):
        """Answers the request itself when a knob says so; True if it did."""
        with LOCK:
            burst = KNOBS["burst"] > 0 or time.monotonic() < STATE["burst_until"]
            if KNOBS["burst"] > 0:
                KNOBS["burst"] -= 1
        body = b"<Error><Code>Injected</Code><Message>fault proxy</Message></Error>"
        if burst or every(n, "fail_every"):
            count("burst" if burst else "fail")
            self.answer(KNOBS["fail_status"], body)
            return True
        if every(n, "throttle_every"):
            count("throttle")
            ra = KNOBS["retry_after"]
            value = str(ra)
            if KNOBS["retry_after_date"]:
                value = email.utils.formatdate(time.time() + ra, usegmt=True)
            self.answer(429, body, [("Retry-After", value)])
            return True
        return False

    def read_request_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else None

    def proxy(self):
        if self.path.startswith("/__proxy/"):
            return self.control()
        body = self.read_request_body()
        with LOCK:
            STATE["n"] += 1
            n = STATE["n"]
            STATS["requests"] += 1
        self.faulty = not KNOBS["only_path"] or KNOBS["only_path"] in self.path
        if self.faulty and KNOBS["latency_ms"] > 0:
            time.sleep(KNOBS["latency_ms"] / 1000.0)
        if self.faulty and self.injected(n):
            return
        try:
            up = http.client.HTTPConnection(*self.upstream, timeout=60)
            up.connect()
            up.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            up.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for k, v in self.headers.items():
                if k.lower() not in HOP and k.lower() != "content-length":
                    up.putheader(k, v)
            if body is not None:
                up.putheader("Content-Length", str(len(body)))
            up.endheaders(body)
            resp = up.getresponse()
        except (OSError, http.client.HTTPException) as e:
            count("upstream_errors")
            return self.answer(502, ("upstream: %s\n" % e).encode())
        count("forwarded")
        try:
            self.relay(resp)
        finally:
            up.close()

    def relay(self, resp):
        length = resp.getheader("Content-Length")
        data = None
        if length is None and self.command != "HEAD":
            data = resp.read()  # chunked or close-delimited: sent with a Content-Length
            length = str(len(data))
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP and k.lower() != "content-length":
                self.send_header(k, self.rewrite(k.lower(), v))
        if length is not None:
            self.send_header("Content-Length", length)
        self.end_headers()
        size = int(length or 0)
        if self.command == "HEAD" or size == 0:
            return
        with LOCK:
            STATE["body_n"] += 1
            bn = STATE["body_n"]
        cut = None
        if self.faulty and every(bn, "reset_every"):
            cut = "reset"
        elif self.faulty and every(bn, "truncate_every"):
            cut = "truncate"
        limit = size // 2 if cut else size
        sent = 0
        while sent < limit:
            if data is not None:
                chunk = data[sent:min(limit, sent + CHUNK)]
            else:
                try:
                    chunk = resp.read(min(CHUNK, limit - sent))
                except (OSError, http.client.HTTPException):
                    chunk = b""
            if not chunk:  # the upstream broke off: so does the proxy
                count("upstream_errors")
                return self.hang_up(True)
            if self.faulty:
                PACER.wait(len(chunk))
            self.wfile.write(chunk)
            sent += len(chunk)
            count("body_bytes", len(chunk))
        if cut:
            self.wfile.flush()
            count(cut)
            self.hang_up(cut == "reset")

    def rewrite(self, name, value):
        """A GET answer's ETag or Content-Range as the etag and total_delta knobs say."""
        if self.command != "GET" or not self.faulty:
            return value
        if name == "etag" and KNOBS["etag"]:
            return KNOBS["etag"]
        if name == "content-range" and KNOBS["total_delta"] and "/" in value:
            head, _, total = value.rpartition("/")
            if total.isdigit():
                return "%s/%d" % (head, int(total) + KNOBS["total_delta"])
        return value

    def hang_up(self, reset):
        self.close_connection = True
        try:
            self.wfile.flush()
            if reset:  # linger 0: close() sends a RST, not a FIN
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                os.close(self.connection.detach())
            else:
                self.connection.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request, client_address):
        # Clients that give up on an answer, and connections the proxy cut on purpose.
        if not isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError, OSError)):
            super().handle_error(request, client_address)


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: fault_proxy.py http://HOST:PORT PORTFILE [KNOB=VALUE ...]")
    u = urllib.parse.urlsplit(sys.argv[1])
    if u.scheme != "http" or not u.hostname or not u.port:
        sys.exit("fault_proxy.py: upstream %s: not http://HOST:PORT" % sys.argv[1])
    Handler.upstream = (u.hostname, u.port)
    zero()
    for arg in sys.argv[3:]:
        k, _, v = arg.partition("=")
        try:
            set_knob(k, v)
        except ValueError as e:
            sys.exit("fault_proxy.py: %s" % e)
    srv = Server(("127.0.0.1", 0), Handler)
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    srv.serve_forever()


if __name__ == "__main__":
    main()
