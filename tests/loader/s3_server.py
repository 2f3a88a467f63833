"""An S3-compatible server on the loopback for the remote tests: moto's S3 (from PyPI) with
SigV4 authentication on, one account, one bucket, and its objects kept in a folder so that a
server killed with SIGKILL and started again on the same folder serves the same objects.

    s3_server.py --port PORT --data DIR --bucket BUCKET --access-key ID --secret SECRET
                 [--session-key ID --session-secret SECRET --session-token TOKEN]

What the tests rely on, all moto's own behaviour:
  * path-style (http://127.0.0.1:PORT/BUCKET/KEY) and virtual-hosted addressing
    (http://BUCKET.localhost:PORT/KEY: a Host with a dot that is not an IP address);
  * SigV4 recomputed for every request: an unknown access key id is a 403 InvalidAccessKeyId,
    a wrong secret a 403 SignatureDoesNotMatch;
  * temporary credentials (--session-*: an assumed role's ASIA key, secret and session
    token): a request must carry the token as x-amz-security-token, and a long-term AKIA key
    with a token, or a temporary key with another token, is a 400 InvalidToken;
  * MD5 ETags of single-part PUTs, ranged GETs (206), HEAD, ListObjectsV2 with max-keys and
    continuation tokens, If-Match (412 when the ETag differs).

Persistence: after every PUT, POST or DELETE that succeeds, the objects that changed are
written to DIR (one data file and one JSON file per object, each renamed into place) before the
answer is sent, and objects deleted are removed; at start-up DIR's objects are loaded. The ETag
of a reloaded object is the MD5 of its bytes, as it was when it was PUT.
"""
import argparse
import hashlib
import json
import os
import sys
import threading

# Authentication from the first request on (moto's default is none at all).
os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"

from moto.core.models import DEFAULT_ACCOUNT_ID  # noqa: E402
from moto.iam.models import iam_backends  # noqa: E402
from moto.moto_server.werkzeug_app import (  # noqa: E402
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from moto.s3.models import s3_backends  # noqa: E402
from moto.sts.models import sts_backends  # noqa: E402
from werkzeug.serving import make_server  # noqa: E402

REGION = "us-east-1"
ALLOW_ALL = json.dumps({"Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]})


def add_account(key_id, secret):
    """One IAM user allowed every S3 action, whose access key is (key_id, secret)."""
    if not key_id.startswith("AKIA") or len(key_id) != 20:
        sys.exit("s3_server.py: --access-key must be 20 characters starting with AKIA, not %r" % key_id)
    iam = iam_backends[DEFAULT_ACCOUNT_ID]["global"]
    iam.create_user(REGION, "tests")
    iam.put_user_policy("tests", "s3", ALLOW_ALL)
    key = iam.create_access_key("tests")
    key.access_key_id, key.secret_access_key = key_id, secret


def add_session(key_id, secret, token):
    """Temporary credentials of a role allowed every S3 action, as STS would hand them out."""
    if not key_id.startswith("ASIA") or len(key_id) != 20:
        sys.exit("s3_server.py: --session-key must be 20 characters starting with ASIA, not %r" % key_id)
    iam = iam_backends[DEFAULT_ACCOUNT_ID]["global"]
    role = iam.create_role("tests-role", "{}", "/", None, "", [], None)
    iam.put_role_policy("tests-role", "s3", ALLOW_ALL)
    assumed = sts_backends[DEFAULT_ACCOUNT_ID]["aws"].assume_role(
        REGION, "tests", role.arn, "", 3600 * 24 * 7, "")
    assumed.access_key_id, assumed.secret_access_key, assumed.session_token = key_id, secret, token


def s3():
    return s3_backends[DEFAULT_ACCOUNT_ID]["aws"]


class Store:
    """The objects of every bucket, mirrored in a folder: DIR/BUCKET/HEX(KEY).{data,json}."""

    def __init__(self, root):
        self.root = root
        self.lock = threading.Lock()
        self.saved = {}  # (bucket, key) -> etag written

    def path(self, bucket, key):
        return os.path.join(self.root, bucket, key.encode("utf-8").hex())

    def load(self):
        for bucket in sorted(os.listdir(self.root)):
            if bucket not in s3().buckets:
                s3().create_bucket(bucket, REGION)
            folder = os.path.join(self.root, bucket)
            for name in sorted(os.listdir(folder)):
                if not name.endswith(".json"):
                    continue
                meta = json.load(open(os.path.join(folder, name)))
                with open(os.path.join(folder, name[:-5] + ".data"), "rb") as f:
                    value = f.read()
                obj = s3().put_object(bucket, meta["key"], value, disable_notification=True)
                self.saved[(bucket, meta["key"])] = obj.etag

    def sync(self):
        """Writes the objects whose ETag changed since the last sync, removes deleted ones."""
        with self.lock:
            now = {}
            for bucket_name, bucket in list(s3().buckets.items()):
                os.makedirs(os.path.join(self.root, bucket_name), exist_ok=True)
                for key_name, obj in list(bucket.keys.items()):
                    now[(bucket_name, key_name)] = obj
            for (bucket_name, key_name), obj in now.items():
                if self.saved.get((bucket_name, key_name)) == obj.etag:
                    continue
                base = self.path(bucket_name, key_name)
                self.write(base + ".data", obj.value)
                self.write(base + ".json", json.dumps({"key": key_name}).encode())
                self.saved[(bucket_name, key_name)] = obj.etag
            for gone in set(self.saved) - set(now):
                base = self.path(*gone)
                for ext in (".json", ".data"):
                    if os.path.exists(base + ext):
                        os.unlink(base + ext)
                del self.saved[gone]

    @staticmethod
    def write(path, data):
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


class Persisting:
    """WSGI middleware: a successful PUT, POST or DELETE is on disk before its answer is sent."""

    def __init__(self, app, store):
        self.app, self.store = app, store

    def __call__(self, environ, start_response):
        status = []

        def start(code, headers, exc_info=None):
            status.append(code)
            return start_response(code, headers, exc_info)

        body = self.app(environ, start)
        if environ.get("REQUEST_METHOD") in ("PUT", "POST", "DELETE") and status and status[0][:1] == "2":
            self.store.sync()
        return body


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--data", required=True, help="folder the objects are kept in")
    ap.add_argument("--bucket", action="append", default=[], help="a bucket to create (repeatable)")
    ap.add_argument("--access-key", required=True)
    ap.add_argument("--secret", required=True)
    ap.add_argument("--session-key")
    ap.add_argument("--session-secret")
    ap.add_argument("--session-token")
    a = ap.parse_args()
    add_account(a.access_key, a.secret)
    if a.session_key:
        add_session(a.session_key, a.session_secret, a.session_token)
    os.makedirs(a.data, exist_ok=True)
    store = Store(a.data)
    store.load()
    for b in a.bucket:
        if b not in s3().buckets:
            s3().create_bucket(b, REGION)
    store.sync()
    app = Persisting(DomainDispatcherApplication(create_backend_app), store)
    server = make_server(a.host, a.port, app, threaded=True, request_handler=MotoRequestHandler)
    print("s3_server.py: %d objects in %s, listening on %s:%d" % (len(store.saved), a.data, a.host, a.port),
          flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
