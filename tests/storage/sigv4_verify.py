"""Checks the SigV4 Authorization headers of requests recorded by sigv4_capture.py with an
implementation of its own, written from AWS's description of Signature V4 (not libcurl's).

    python3 sigv4_verify.py LOG SECRET REQUIRED_HEADERS
    python3 sigv4_verify.py --vectors DIR SECRET


For every request in LOG: the canonical request is rebuilt from what was received (the
method; the path as sent, S3 not normalising it; the query's names and values decoded,
encoded again with only unreserved characters kept, sorted; the signed headers, names
lower-cased, values trimmed with inner runs of spaces made one, repeated headers joined with
','; the payload hash from x-amz-content-sha256), signed with SECRET for the Credential's
scope, and the signature must be the one sent. Every header named in REQUIRED_HEADERS
(comma-separated, lower case) must be among the signed ones. Prints one line per request;
exit status 1 on any mismatch. With --vectors, the checker itself is checked: each AWS test
vector DIR/NAME.req whose path needs no encoding (S3 signs the path as sent) must give the
signature of DIR/NAME.authz.
"""

import glob
import hashlib
import hmac
import json
import os
import re
import sys
import urllib.parse


def enc(s):
    return urllib.parse.quote(s, safe="-_.~")


def canonical_query(query):
    pairs = []
    for part in query.split("&") if query else []:
        k, _, v = part.partition("=")
        pairs.append((enc(urllib.parse.unquote(k)), enc(urllib.parse.unquote(v))))
    return "&".join("%s=%s" % kv for kv in sorted(pairs))


def check(req, secret, required):
    headers = {}
    for k, v in req["headers"]:
        headers.setdefault(k.lower(), []).append(" ".join(v.split()))
    auth = headers.get("authorization", [""])[0]
    m = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                     r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})", auth)
    if not m:
        return "no SigV4 Authorization header: %r" % auth
    _, date, region, service, signed, sig = m.groups()
    names = signed.split(";")
    missing = [h for h in required if h not in names]
    if missing:
        return "not signed: %s (SignedHeaders=%s)" % (",".join(missing), signed)
    if names != sorted(set(names)):
        return "SignedHeaders not sorted, or repeated: %s" % signed
    path, _, query = req["target"].partition("?")
    amz_date = headers["x-amz-date"][0]
    payload = headers.get("x-amz-content-sha256", [hashlib.sha256(b"").hexdigest()])[0]
    creq = "\n".join([req["method"], path, canonical_query(query)]
                     + ["%s:%s" % (n, ",".join(headers[n])) for n in names]
                     + ["", signed, payload])
    scope = "%s/%s/%s/aws4_request" % (date, region, service)
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(creq.encode()).hexdigest()])
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    want = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
    if want != sig:
        return "signature %s, the canonical request gives %s:\n%s" % (sig, want, creq)
    return None


def vectors(directory, secret):
    n = 0
    for path in sorted(glob.glob(os.path.join(directory, "*.req"))):
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        method, target = lines[0].split(" ")[0], lines[0][lines[0].index(" ") + 1:lines[0].rindex(" ")]
        if target.split("?")[0] != enc(target.split("?")[0]).replace("%2F", "/"):
            continue
        with open(path[:-4] + ".authz", encoding="utf-8") as f:
            authz = f.read().strip()
        headers = [l.split(":", 1) for l in lines[1:] if ":" in l] + [["Authorization", authz]]
        why = check({"method": method, "target": target, "headers": headers}, secret, [])
        print("%s %s" % (os.path.basename(path), "ok" if why is None else "BAD: " + why))
        if why is not None:
            sys.exit(1)
        n += 1
    if n < 10:
        sys.exit("only %d vectors checked" % n)


def main():
    if sys.argv[1] == "--vectors":
        return vectors(sys.argv[2], sys.argv[3])
    secret, required = sys.argv[2], [h for h in sys.argv[3].split(",") if h]
    bad = 0
    with open(sys.argv[1], encoding="utf-8") as f:
        reqs = [json.loads(line) for line in f]
    for req in reqs:
        why = check(req, secret, required)
        print("%s %s %s" % (req["method"], req["target"], "ok" if why is None else "BAD: " + why))
        bad += why is not None
    if not reqs:
        print("no requests recorded")
        bad = 1
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
