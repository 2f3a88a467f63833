"""A loopback HTTP server of sigv4_test.sh that records the requests it gets.

    python3 sigv4_capture.py PORTFILE LOG

Appends to LOG one JSON line per request: {"method", "target" (path and query as sent),
"headers" (name, value pairs as received, repeated ones kept)}, so the test can read the
Authorization header the client sent and check it. It answers like a small S3 bucket, enough
for //storage to open, read and list: every key is the 1000 bytes 0, 1, ..., 231, 0,
... (ETag "e-1000"); HEAD gives its size, a GET with Range a 206; a GET of /BUCKET with
list-type=2 lists two keys, KEY-a and KEY-b under the prefix, in two pages (the first with a
continuation token that needs percent-encoding). Other answers: 200 with a 2-byte body. The
port it bound is written to PORTFILE.
"""

import http.server
import json
import os
import sys
import urllib.parse

DATA = bytes(i % 232 for i in range(1000))
TOKEN = "page+2/of=2"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def record(self):
        entry = {"method": self.command, "target": self.path,
                 "headers": [[k, v] for k, v in self.headers.items()]}
        with open(sys.argv[2], "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")

    def send(self, code, body, headers=()):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.record()
        self.send(200, DATA, [("ETag", '"e-1000"')])

    def listing(self, q):
        prefix = q.get("prefix", [""])[0]
        first = "continuation-token" not in q
        key = prefix + ("KEY-a" if first else "KEY-b")
        more = ("<IsTruncated>true</IsTruncated><NextContinuationToken>%s"
                "</NextContinuationToken>" % TOKEN) if first else "<IsTruncated>false</IsTruncated>"
        if not first and q["continuation-token"][0] != TOKEN:
            return self.send(400, b"<Error><Code>BadToken</Code></Error>")
        body = ("<ListBucketResult>%s<Contents><Key>%s</Key><Size>1000</Size>"
                "<ETag>&quot;e-1000&quot;</ETag></Contents></ListBucketResult>" % (more, key))
        self.send(200, body.encode())

    def do_GET(self):
        self.record()
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        if q.get("list-type") == ["2"]:
            return self.listing(q)
        r = self.headers.get("Range", "")
        if r.startswith("bytes="):
            a, b = (int(x) for x in r[6:].split("-"))
            return self.send(206, DATA[a:b + 1], [("Content-Range", "bytes %d-%d/1000" % (a, b)),
                                                  ("ETag", '"e-1000"')])
        self.send(200, b"ok")


def main():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    srv.serve_forever()


if __name__ == "__main__":
    main()
