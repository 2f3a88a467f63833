"""Hostile files: mutated tar shards, hostile typed members (.npy, .safetensors, LZ4), forged
index / manifest / cost files, SIGKILL mid-write, a full disk. Each case builds its files from
its own seed; run.py runs and judges it."""

import gzip
import io
import json
import os
import random
import signal
import struct
import subprocess
import tarfile
import time
import zlib

import numpy as np

import refs
from harness import judge

MEMBERS = ["json", "latent.npy", "t5.npy", "txt"]


def base_members(seed, n=4, latent_ext="latent.npy"):
    """n samples: KEY.json (256x256, images and a 17-frame video), KEY.LATENT (float16 (16, T,
    32, 32)), KEY.t5.npy (float32 (L, 8)), KEY.txt."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        k = "k%04d" % i
        f = 17 if i == 1 else 1
        t = 1 + (f - 1) // 4
        lat = rng.standard_normal((16, t, 32, 32)).astype(np.float16)
        t5 = rng.standard_normal((int(rng.integers(2, 9)), 8)).astype(np.float32)
        out.append((k + ".json", json.dumps({"width": 256, "height": 256, "frames": f}).encode()))
        if latent_ext.endswith(".safetensors"):
            out.append((k + "." + latent_ext, refs.st_bytes(lat)))
        else:
            out.append((k + "." + latent_ext, refs.npy_bytes(lat)))
        out.append((k + ".t5.npy", refs.npy_bytes(t5)))
        out.append((k + ".txt", ("caption %d " % i).encode() * int(rng.integers(1, 5))))
    return out


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


# ---------------------------------------------------------------- the end-to-end check


def members_of(ctx, idx):
    r = ctx.run(["inspect", idx, "--json"])
    if r.rc != 0:
        return None, r
    try:
        return [m["ext"] for m in json.loads(r.out)["members"]], r
    except Exception:
        return None, r


def check_corpus(ctx, d, shards, refmap, names, asan=False, extra_index=(), want=None, lat_ext="latent.npy"):
    """index -> inspect -> plan -> stream --jsonl of every member, each delivered sample checked
    against refmap (name -> candidate payloads from refs.scan_tar). Returns (category, why)."""
    idx = os.path.join(d, "i.alidx")
    names = list(names) + [os.path.basename(s) for s in shards]
    r = ctx.run(["index", "-o", idx] + list(extra_index) + list(shards))
    if asan and ctx.asan:
        ra = ctx.run(["index", "-o", idx + ".asan"] + list(extra_index) + list(shards), asan=True)
        j = judge(ra, None)
        if j and j[0] in ("crash", "hang"):
            return j[0], "asan index: " + j[1]
    j = judge(r, names)
    if j:
        return j
    r = ctx.run(["inspect", idx, "--rejected", "--json"])
    j = judge(r, [idx])
    if j:
        return j if j[0] != "ok" else ("unclear", "inspect --rejected of a written index failed: " + j[1])
    try:
        rej = json.loads(r.out)
    except Exception as e:
        return "wrong", "inspect --rejected --json is not JSON: %s" % e
    mem, r = members_of(ctx, idx)
    if mem is None:
        return judge(r, [idx]) or ("wrong", "inspect --json has no members list")
    man = os.path.join(d, "p.alm")
    r = ctx.run(["plan", "--index", idx, "--world", "1", "-o", man])
    j = judge(r, [idx, "sample", "bucket"])
    if j:
        return j
    req = [m for m in (want or MEMBERS) if m in mem or m + ".lz4" in mem]
    req = [m for m in req if m in mem] + [m[:-4] for m in mem if m.endswith(".lz4") and m[:-4] not in req]
    if not req:
        return "ok", "indexed, no member to stream"
    cmd = ["stream", "--index", idx, "--manifest", man, "--members", ",".join(req), "--jsonl", "--on-error",
           "skip", "--max-skip-fraction", "1"]
    r = ctx.run(cmd)
    if asan and ctx.asan:
        ra = ctx.run(cmd, asan=True)
        j = judge(ra, None)
        if j and j[0] in ("crash", "hang"):
            return j[0], "asan stream: " + j[1]
    keys = set()
    for line in r.out.splitlines():
        try:
            keys.update(json.loads(line).get("keys", []))
        except Exception:
            pass
    j = judge(r, names + sorted(keys) + ["sample", "key"])
    if j and j[0] != "ok":
        return j
    bad = compare_stream(r.out, refmap, lat_ext)
    if bad:
        return "wrong", bad
    nrej = len(rej.get("entries", []))
    return "ok", "indexed (%d rejected entries), %d samples streamed and matched%s" % (
        nrej, len(keys), "" if r.rc == 0 else "; stream then refused: " + r.err.strip()[-200:])


def compare_stream(out, refmap, lat_ext):
    """None when every delivered member of every sample equals what a strict reader of the shard
    gives (latent cropped by the documented rule); else what differs."""
    for line in out.splitlines():
        try:
            b = json.loads(line)
        except Exception:
            return "stream --jsonl line is not JSON: %r" % line[:200]
        for mname, m in b.get("members", {}).items():
            for i, key in enumerate(b["keys"]):
                shape = m["shapes"][i]
                got = m["crc32"][i]
                cands = refmap.get(key + "." + mname, []) + refmap.get(key + "." + mname + ".lz4", [])
                ok = False
                for cname, raw in [(key + "." + mname, x) for x in refmap.get(key + "." + mname, [])] + \
                        [(key + "." + mname + ".lz4", x) for x in refmap.get(key + "." + mname + ".lz4", [])]:
                    ref = refs.typed_ref(cname, raw)
                    if ref is None:
                        continue
                    exp = refs.crop_bytes(ref, shape, mname == lat_ext)
                    if exp is not None and refs.crc(exp) == got:
                        if mname == "json" and refs.strict_json(ref[3]) is None:
                            return "key %r: its KEY.json was accepted but a strict RFC 8259 parser refuses it: %r" % (
                                key, ref[3][:120])
                        ok = True
                        break
                if not ok:
                    return "key %r member %r: delivered shape %s crc %s matches no strict reading of the %d " \
                           "candidate member(s) in the shard" % (key, mname, shape, got, len(cands))
    return None


# ---------------------------------------------------------------- tar shards

TAR_KINDS = ["flip_header", "flip_any", "bytes_any", "truncate", "size_field", "checksum", "typeflag",
             "special", "long_name", "duplicate", "zero_block", "garbage_block", "huge_size", "gz_truncate",
             "gz_flip", "name_bytes", "magic", "tail"]
TAR_WEIGHTS = [90, 60, 30, 50, 30, 10, 20, 25, 20, 10, 8, 8, 10, 12, 12, 15, 6, 6]

SIZE_FIELDS = [b"77777777777\0", b"\x80" + b"\0" * 3 + b"\x7f" + b"\xff" * 7, b"\xff" * 12, b"\xc0" + b"\0" * 11,
               b"-0000000001\0", b"           ", b"\0" * 12, b"0x100000000\0", b"00000000009\0", b"1e10       \0",
               b"\x80" + b"\xff" * 11, b"00000001000 ", b"0000000017\0\0", b"  0000001000"]


def gen_tar(rng):
    for _ in range(sum(TAR_WEIGHTS)):
        k = rng.choices(TAR_KINDS, TAR_WEIGHTS)[0]
        yield {"kind": k, "desc": "tar %s" % k, "p": rng.random(), "q": rng.random(), "r": rng.randrange(1 << 30)}


def _mutate_tar(case, d):
    """Writes the case's shard; returns (shard paths, refmap)."""
    rng = random.Random(case["seed"])
    mem = base_members(case["seed"] % 97)
    k, p = case["kind"], case["p"]
    data, offs = refs.write_tar(mem)
    data = bytearray(data)
    end = offs[-1] + 512 + len(mem[-1][1])
    end += -end % 512
    gz = False
    trunc_gz = False
    if k == "flip_header":
        o = offs[int(p * len(offs))] + int(case["q"] * 512)
        data[o] ^= 1 << rng.randrange(8)
    elif k == "flip_any":
        o = int(p * end)
        data[o] ^= 1 << rng.randrange(8)
    elif k == "bytes_any":
        for _ in range(1 + rng.randrange(16)):
            data[rng.randrange(end)] = rng.randrange(256)
    elif k == "truncate":
        cut = int(p * len(data)) if case["q"] < 0.6 else offs[int(p * len(offs))] + rng.choice([0, 1, 511, 512, 513])
        data = data[:cut]
    elif k == "size_field":
        i = int(p * len(offs))
        data[offs[i] + 124:offs[i] + 136] = rng.choice(SIZE_FIELDS)
        if case["q"] < 0.7:  # with a valid checksum, so only the size field is hostile
            _fix_sum(data, offs[i])
    elif k == "checksum":
        i = int(p * len(offs))
        data[offs[i] + 148:offs[i] + 156] = rng.choice([b"0000000\0", b"\0" * 8, b"9999999\0", b"       \0"])
    elif k == "typeflag":
        i = int(p * len(offs))
        data[offs[i] + 156] = ord(rng.choice("1234567gxLKVASMN\xff\0"))
        _fix_sum(data, offs[i])
    elif k == "special":
        i = int(p * len(offs))
        name = mem[i][0]
        typ, link = rng.choice([(b"2", b"/etc/passwd"), (b"2", b"../../../etc/shadow"), (b"1", mem[0][0].encode()),
                                (b"3", b""), (b"4", b""), (b"6", b""), (b"5", b""), (b"1", name.encode())])
        h = refs.raw_header(name, 0 if typ != b"1" or case["q"] < 0.5 else 100, typ, linkname=link, devmajor=1,
                            devminor=3)
        data = bytearray(bytes(data[:offs[i]]) + h + bytes(data[offs[i]:]))
    elif k == "long_name":
        keylen = rng.choice([99, 100, 101, 155, 156, 255, 256, 1000, 1023, 1024, 1025, 4096, 70000])
        key = ("L" * keylen)
        extra = [(key + ".json", mem[0][1]), (key + ".latent.npy", mem[1][1]), (key + ".t5.npy", mem[2][1]),
                 (key + ".txt", b"long")]
        fmt = tarfile.GNU_FORMAT if case["q"] < 0.5 else tarfile.PAX_FORMAT
        b = io.BytesIO()
        with tarfile.open(fileobj=b, mode="w", format=fmt) as t:
            for n, v in mem + extra:
                ti = tarfile.TarInfo(n)
                ti.size, ti.mtime = len(v), 1700000000
                t.addfile(ti, io.BytesIO(v))
        data = bytearray(b.getvalue())
    elif k == "duplicate":
        i = int(p * len(mem))
        dup = (mem[i][0], mem[i][1][:-1] + b"Z" if mem[i][0].endswith(("txt", "json")) else mem[i][1])
        data, _ = refs.write_tar(mem + [dup] if case["q"] < 0.5 else mem[:i] + [dup] + mem[i:])
        data = bytearray(data)
    elif k == "zero_block":
        i = int(p * len(offs))
        data = bytearray(bytes(data[:offs[i]]) + b"\0" * 1024 + bytes(data[offs[i]:]))
    elif k == "garbage_block":
        i = int(p * len(offs))
        g = bytes(rng.randrange(256) for _ in range(512 * (1 + rng.randrange(3))))
        data = bytearray(bytes(data[:offs[i]]) + g + bytes(data[offs[i]:]))
    elif k == "huge_size":
        h = refs.raw_header(rng.choice(["k0009.latent.npy", "k0000.t5.npy", "k0009.json"]), 0,
                            size_field=rng.choice([b"77777777777\0", b"\x80" + b"\0" * 3 + b"\x01" + b"\0" * 7,
                                                   b"\x80" + b"\x7f" + b"\xff" * 10]))
        data = bytearray(bytes(data[:end]) + h + bytes(data[end:]))
    elif k in ("gz_truncate", "gz_flip"):
        gz = True
        z = bytearray(gzip.compress(bytes(data), mtime=0))
        if k == "gz_truncate":
            z = z[:int(p * len(z))]
            trunc_gz = True
        else:
            z[10 + int(p * (len(z) - 10))] ^= 1 << rng.randrange(8)
        raw = bytes(data)
        data = z
    elif k == "name_bytes":
        i = int(p * len(offs))
        bad = rng.choice([b"k\n0000.json", b"/abs/k0000.txt", b"../k0000.txt", b"k0000.\xff\xfe", b"k00\x0100.txt",
                          b".json", b"k0000.", b"k0000", b"./k0000.txt", b"a/b/c/k0000.txt", b"k0000..txt",
                          b"\xc3\x28.json"])
        data[offs[i]:offs[i] + 100] = bad.ljust(100, b"\0")
        _fix_sum(data, offs[i])
    elif k == "magic":
        i = int(p * len(offs))
        data[offs[i] + 257:offs[i] + 265] = rng.choice([b"ustar  \0", b"\0" * 8, b"USTAR\x0000", b"ustar\x0099"])
        _fix_sum(data, offs[i])
    elif k == "tail":
        data = data[:end] + bytes(rng.randrange(256) for _ in range(rng.choice([1, 100, 511, 512, 1537])))
    name = "s0.tar.gz" if gz else "s0.tar"
    path = write(os.path.join(d, name), bytes(data))
    if gz:
        try:
            plain = zlib.decompress(bytes(data), 31)
        except Exception:
            plain = b""
            if trunc_gz:
                o = zlib.decompressobj(31)
                try:
                    plain = o.decompress(bytes(data))
                except Exception:
                    plain = b""
        return [path], refs.scan_tar(plain)
    return [path], refs.scan_tar(bytes(data))


def _fix_sum(data, o):
    data[o + 148:o + 156] = b" " * 8
    s = sum(data[o:o + 512])
    data[o + 148:o + 156] = ("%06o\0 " % s).encode()


def exec_tar(ctx, case, d):
    shards, refmap = _mutate_tar(case, d)
    return check_corpus(ctx, d, shards, refmap, ["s0.tar", "k000"], asan=True)


# ---------------------------------------------------------------- typed members

def _npy_variants():
    L = (16, 1, 32, 32)
    good = "{'descr': '<f2', 'fortran_order': False, 'shape': (16, 1, 32, 32), }"
    v = []
    for descr in ["'>f2'", "'|O'", "'<c8'", "'<U4'", "'V8'", "'<f2x'", "[('a', '<f2')]", "'<M8'", "'|b1'", "'<f8'",
                  "'<i8'", "'|u1'", "'<f16'", "''", "'<f'", "'=f2'", "'|f2'", "None", "5", "'<f2'*1000"]:
        v.append(("descr %s" % descr[:20], "{'descr': %s, 'fortran_order': False, 'shape': (16, 1, 32, 32), }" % descr))
    for fo in ["True", "1", "'no'", "None", "0"]:
        v.append(("fortran %s" % fo, "{'descr': '<f2', 'fortran_order': %s, 'shape': (16, 1, 32, 32), }" % fo))
    for shp in ["(-1, 1, 32, 32)", "(0, 1, 32, 32)", "(16, 1, 32, 32, 1)", "(16, 1, 32)", "()", "(16,)",
                "(9223372036854775807, 9223372036854775807)", "(4294967296, 4294967296, 1, 1)",
                "(1, 1, 1, 1, 1, 1, 1, 1, 16384)", "(1, 1, 1, 1, 1, 1, 1, 1, 1, 16384)", "(16, 1, 32, 32.0)",
                "[16, 1, 32, 32]", "(16, 1, 32, 32", "(16, 1, 32, '32')", "(16, 1, 32, 32, -0)",
                "(18446744073709551617, 1)", "(16, 1, 32, 31)", "(16, 1, 32, 33)", "(16, 1, 64, 64)",
                "(16, 1, 8, 8)", "(16, 2, 32, 32)", "(32, 1, 32, 32)", "(True, 1, 32, 32)", "(0x10, 1, 32, 32)"]:
        v.append(("shape %s" % shp[:30], "{'descr': '<f2', 'fortran_order': False, 'shape': %s, }" % shp))
    for txt in ["{'descr': '<f2', 'fortran_order': False}", "{'descr': '<f2', 'shape': (16, 1, 32, 32)}",
                "{'descr': '<f2', 'fortran_order': False, 'shape': (16, 1, 32, 32), 'x': 1}",
                "{'descr': '<f2', 'descr': '<f4', 'fortran_order': False, 'shape': (16, 1, 32, 32)}",
                "[]", "", "garbage", "{" * 5000, "{'descr': '<f2', 'fortran_order': False, 'shape': (16, 1, 32, 32), }\0",
                "{'descr': '<f2',\0 'fortran_order': False, 'shape': (16, 1, 32, 32), }",
                "{\"descr\": \"<f2\", \"fortran_order\": false, \"shape\": [16, 1, 32, 32]}",
                "{'descr': '<f2', 'fortran_order': False, 'shape': (16, 1, 32, 32), }" + " " * (1 << 20),
                "{'descr': '\u00e9f2', 'fortran_order': False, 'shape': (16, 1, 32, 32), }",
                "{'descr':'<f2','fortran_order':False,'shape':(16,1,32,32)}",
                "  {'descr': '<f2', 'fortran_order': False, 'shape': (16, 1, 32, 32), }"]:
        v.append(("dict %r" % txt[:30], txt))
    out = [(n, {"header": h}) for n, h in v]
    out += [("magic", {"header": good, "magic": b"\x93NUMPZ"}), ("magic short", {"header": good, "magic": b"\x93NUM"}),
            ("version 2.0", {"header": good, "version": (2, 0)}), ("version 3.0", {"header": good, "version": (3, 0)}),
            ("version 9.0", {"header": good, "version": (9, 0)}), ("version 0.0", {"header": good, "version": (0, 0)}),
            ("version 1.5", {"header": good, "version": (1, 5)}),
            ("hlen 65535", {"header": good, "hlen": 65535}), ("hlen 0", {"header": good, "hlen": 0}),
            ("hlen 10", {"header": good, "hlen": 10}), ("hlen +1", {"header": good, "hlen": 119}),
            ("hlen v2 2^32-1", {"header": good, "version": (2, 0), "hlen": 0xFFFFFFFF}),
            ("hlen v2 2^31", {"header": good, "version": (2, 0), "hlen": 1 << 31}),
            ("data short", {"header": good, "cut": 2}), ("data short half", {"header": good, "cut": 16384}),
            ("data long", {"header": good, "extra": b"\1" * 7}), ("data long 1MB", {"header": good, "extra": b"\0" * (1 << 20)}),
            ("header only", {"header": good, "cut": 32768}), ("empty file", {"raw": b""}), ("magic only", {"raw": b"\x93NUMPY"}),
            ("magic+version", {"raw": b"\x93NUMPY\x01\x00"}), ("1 byte", {"raw": b"\x93"})]
    return L, out


def _st_variants():
    v = [("valid", {}), ("hlen huge", {"hlen": 1 << 62}), ("hlen 0", {"hlen": 0}), ("hlen file+1", {"hlen": 10 ** 6}),
         ("hlen 2^64-1", {"hlen": (1 << 64) - 1}), ("hlen 1MiB+1", {"header": " " * ((1 << 20) + 1)}),
         ("json garbage", {"header": "{not json"}), ("json array", {"header": "[]"}),
         ("two tensors", {"header": '{"a": {"dtype": "F16", "shape": [16, 1, 32, 32], "data_offsets": [0, 32768]},'
                                    ' "b": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}}'}),
         ("metadata only", {"header": '{"__metadata__": {"x": "y"}}'}),
         ("metadata + tensor", {"header": '{"__metadata__": {"x": "y"}, "t": {"dtype": "F16", "shape": [16, 1, 32, 32],'
                                          ' "data_offsets": [0, 32768]}}'}),
         ("dtype F8", {"dtype": "F8_E4M3"}), ("dtype BF16", {"dtype": "BF16"}), ("dtype F32", {"dtype": "F32"}),
         ("dtype lower", {"dtype": "f16"}), ("dtype number", {"header": '{"t": {"dtype": 5, "shape": [16, 1, 32, 32],'
                                                                       ' "data_offsets": [0, 32768]}}'}),
         ("shape negative", {"shape": [16, -1, 32, 32]}), ("shape float", {"shape": [16, 1, 32, 32.0]}),
         ("shape 9 dims", {"shape": [1] * 8 + [16384]}), ("shape overflow", {"shape": [1 << 62, 1 << 62]}),
         ("shape 2^64", {"shape": [1 << 64, 1]}), ("shape small", {"shape": [16, 1, 8, 8], "offsets": [0, 2048]}),
         ("shape string", {"shape": "16,1,32,32"}), ("shape empty", {"shape": [], "offsets": [0, 2]}),
         ("offsets reversed", {"offsets": [32768, 0]}), ("offsets past end", {"offsets": [0, 40000]}),
         ("offsets short", {"offsets": [0, 32766]}), ("offsets long", {"offsets": [0, 32770]}),
         ("offsets shifted", {"offsets": [2, 32770], "data": b"\0\0" + b"\1" * 32768}),
         ("offsets huge", {"offsets": [1 << 63, (1 << 63) + 32768]}), ("offsets 3", {"offsets": [0, 32768, 3]}),
         ("offsets negative", {"offsets": [-2, 32766]}), ("offsets float", {"offsets": [0, 32768.0]}),
         ("header NUL", {"header": '{"t": {"dtype": "F16", "shape": [16, 1, 32, 32], "data_offsets": [0, 32768]}}\0'}),
         ("header latin1", {"header": b'{"t\xff": {"dtype": "F16", "shape": [16, 1, 32, 32], "data_offsets": [0, 32768]}}'}),
         ("header padded", {"header": '{"t": {"dtype": "F16", "shape": [16, 1, 32, 32], "data_offsets": [0, 32768]}}   '}),
         ("data short", {"data": b"\1" * 100}), ("data long", {"data": b"\1" * 40000}),
         ("file 7 bytes", {"raw": b"\1" * 7}), ("empty", {"raw": b""}),
         ("dup keys", {"header": '{"t": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}, "t": {"dtype": "F16",'
                                 ' "shape": [16, 1, 32, 32], "data_offsets": [0, 32768]}}'}),
         ("deep json", {"header": "[" * 100000}),
         ("number exponent", {"header": '{"t": {"dtype": "F16", "shape": [16, 1, 32, 3.2e1], "data_offsets": [0, 32768]}}'})]
    return v


def _lz4_variants():
    return [("valid", {}), ("valid compressed", {"comp": True}), ("block checksum ok", {"bc": True}),
            ("content size ok", {"cs": 0}), ("content size +1", {"cs": 1}), ("content size -1", {"cs": -1}),
            ("content size 2^63", {"cs": "huge"}), ("bad HC", {"bad_hc": True}), ("no end mark", {"end": False}),
            ("truncated", {"cut": 0.5}), ("truncated header", {"cut": 5}), ("block checksum bad", {"bc": True, "flip": "bc"}),
            ("content checksum bad", {"flip": "cc"}), ("trailing garbage", {"trail": b"garbage"}),
            ("trailing frame", {"trail": "frame"}), ("bad offset 0", {"block": b"\x14a\x00\x00"}),
            ("offset past start", {"block": b"\x14a\xff\x00" + b"\x10b"}), ("match at end", {"block": b"\x14a\x01\x00"}),
            ("literal run past block", {"block": b"\xf0\xff\xff\x05ab"}), ("block > max", {"bd": 0x40, "big": True}),
            ("bd reserved", {"bd": 0x71}), ("bd 0x00", {"bd": 0x00}), ("version 2", {"flg": 0x80 | 0x60}),
            ("dict id", {"flg": 0x61}), ("magic wrong", {"magic": b"\x04\x22\x4d\x19"}),
            ("skippable", {"magic": b"\x50\x2a\x4d\x18"}), ("empty", {"raw": b""}), ("magic only", {"raw": b"\x04\x22\x4d\x18"}),
            ("legacy magic", {"raw": b"\x02\x21\x4c\x18" + b"\0" * 8}),
            ("bomb", {"bomb": 200}), ("uncompressed size lie", {"usize": True}), ("empty frame", {"payload": b""})]


TYPED_KINDS = ["npy_latent", "npy_t5", "st_latent", "lz4_t5", "lz4_latent", "lz4_json"]


def gen_typed(rng):
    L, npys = _npy_variants()
    sts = _st_variants()
    lz = _lz4_variants()
    for n, v in npys:
        yield {"kind": "npy_latent", "desc": "latent.npy %s" % n, "v": n}
    for n, v in npys[::2]:
        yield {"kind": "npy_t5", "desc": "t5.npy %s" % n, "v": n}
    for n, v in sts:
        yield {"kind": "st_latent", "desc": "latent.safetensors %s" % n, "v": n}
    for n, v in lz:
        yield {"kind": "lz4_t5", "desc": "t5.npy.lz4 %s" % n, "v": n}
    for n, v in lz[:20]:
        yield {"kind": "lz4_latent", "desc": "latent.npy.lz4 %s" % n, "v": n}
    for n, v in lz[:16]:
        yield {"kind": "lz4_json", "desc": "json.lz4 %s" % n, "v": n}


def _npy_from(v, arr):
    if "raw" in v:
        return v["raw"]
    b = refs.npy_bytes(arr, header=v["header"], magic=v.get("magic", b"\x93NUMPY"), version=v.get("version", (1, 0)),
                       hlen=v.get("hlen"), extra=v.get("extra", b""))
    if "cut" in v:
        b = b[:len(b) - v["cut"]]
    return b


def _st_from(v, arr):
    if "raw" in v:
        return v["raw"]
    return refs.st_bytes(arr, dtype=v.get("dtype", "F16"), header=v.get("header"), hlen=v.get("hlen"),
                         offsets=v.get("offsets"), shape=v.get("shape"), data=v.get("data"))


def _lz4_from(v, payload):
    if "raw" in v:
        return v["raw"]
    payload = v.get("payload", payload)
    if v.get("bomb"):
        # each block: 1 literal then one match of ~4 MiB copying it (offset 1)
        ml = (4 << 20) - 5 - 4
        blk = bytearray([0x1F, 0x41, 0x01, 0x00])
        r = ml - 15
        blk += b"\xff" * (r // 255) + bytes([r % 255]) + b"\x50" + b"BBBBB"
        frame = refs.lz4_frame(b"", blocks=[(bytes(blk), True)] * v["bomb"], content_checksum=False)
        return frame
    blocks = None
    if v.get("comp"):
        blocks = [(refs.lz4_literals_block(payload), True)]
    if "block" in v:
        blocks = [(v["block"], True)]
    if v.get("big"):
        blocks = [(payload * 3 + b"\0" * 70000, False)]
    if v.get("usize"):
        blocks = [(payload, False)]
    cs = None
    if "cs" in v:
        cs = (1 << 63) if v["cs"] == "huge" else len(payload) + v["cs"]
    f = bytearray(refs.lz4_frame(payload, blocks=blocks, content_size=cs, block_checksum=v.get("bc", False),
                                 bd=v.get("bd", 0x70), bad_hc=v.get("bad_hc", False), end_mark=v.get("end", True),
                                 trailing=(refs.lz4_frame(b"x") if v.get("trail") == "frame" else v.get("trail", b""))))
    if "flg" in v:
        f[4] = v["flg"]
    if "magic" in v:
        f[0:4] = v["magic"]
    if v.get("flip") == "bc":
        f[-12] ^= 1
    if v.get("flip") == "cc":
        f[-1] ^= 1
    if "cut" in v:
        c = v["cut"]
        f = f[:int(len(f) * c)] if isinstance(c, float) else f[:c]
    return bytes(f)


def exec_typed(ctx, case, d):
    L, npys = _npy_variants()
    k = case["kind"]
    lat_ext = "latent.safetensors" if k == "st_latent" else "latent.npy"
    mem = base_members(case["seed"] % 97, latent_ext=lat_ext)
    target = "k0000"  # the first image's member is replaced
    arr = np.random.default_rng(5).standard_normal((16, 1, 32, 32)).astype(np.float16)
    if k.startswith("npy"):
        v = dict(npys)[case["v"]]
        if k == "npy_t5":
            v = dict(v)
            if "header" in v and isinstance(v["header"], str):
                v["header"] = v["header"].replace("(16, 1, 32, 32)", "(4, 8)").replace("'<f2'", "'<f4'", 1)
            arr = np.random.default_rng(6).standard_normal((4, 8)).astype(np.float32)
        name = target + (".latent.npy" if k == "npy_latent" else ".t5.npy")
        mem = [(n, _npy_from(v, arr) if n == name else b) for n, b in mem]
    elif k == "st_latent":
        v = dict(_st_variants())[case["v"]]
        name = target + ".latent.safetensors"
        mem = [(n, _st_from(v, arr) if n == name else b) for n, b in mem]
    else:
        v = dict(_lz4_variants())[case["v"]]
        ext = {"lz4_t5": ".t5.npy", "lz4_latent": ".latent.npy", "lz4_json": ".json"}[k]
        name = target + ext
        new = []
        for n, b in mem:
            if n == name:
                new.append((n + ".lz4", _lz4_from(v, b)))
            elif n.endswith(ext) and k != "lz4_t5":
                new.append((n + ".lz4", refs.lz4_frame(b)))  # one member kind stays one kind
            else:
                new.append((n, b))
        mem = new
    data, _ = refs.write_tar(mem)
    shard = write(os.path.join(d, "s0.tar"), data)
    want = ["json", lat_ext, "t5.npy", "txt"]
    return check_corpus(ctx, d, [shard], refs.scan_tar(data), [target, "s0.tar"], asan=True, want=want,
                        lat_ext=lat_ext)


# ---------------------------------------------------------------- forged container files

def setup(ctx, surfaces):
    """One good corpus, its index, manifests and cost file, shared by the file and CLI cases."""
    g = os.path.join(ctx.out, "good")
    if os.path.isdir(g):
        import shutil
        shutil.rmtree(g)
    os.makedirs(os.path.join(g, "shards"))
    mem = base_members(11, n=8)
    for s in range(2):
        data, _ = refs.write_tar([m for m in mem if int(m[0][1:5]) % 2 == s])
        write(os.path.join(g, "shards", "s%d.tar" % s), data)
    ctx.shared["good_members"] = mem
    ctx.shared["good_ref"] = {}
    for s in range(2):
        with open(os.path.join(g, "shards", "s%d.tar" % s), "rb") as f:
            ctx.shared["good_ref"].update(refs.scan_tar(f.read()))
    P = {"dir": g, "shards": os.path.join(g, "shards"), "index": os.path.join(g, "i.alidx"),
         "manifest": os.path.join(g, "p.alm"), "manifest2": os.path.join(g, "p2.alm"), "cost": os.path.join(g, "c.alc"),
         "big_shards": os.path.join(g, "big"), "big_index": os.path.join(g, "big.alidx"),
         "big_manifest": os.path.join(g, "big.alm"), "bench": os.path.join(g, "bench.csv")}
    must = [["index", "-o", P["index"], os.path.join(P["shards"], "s0.tar"), os.path.join(P["shards"], "s1.tar")],
            ["plan", "--index", P["index"], "--world", "1", "-o", P["manifest"]],
            ["plan", "--index", P["index"], "--world", "2", "--mem-tokens", "2000", "-o", P["manifest2"]],
            ["fit", "--default", "-o", P["cost"]],
            ["synth", "--out", P["big_shards"], "--samples", "3000", "--shards", "4", "--seed", "2", "--payload", "none"],
            ["index", "-o", P["big_index"], P["big_shards"]],
            ["plan", "--index", P["big_index"], "--world", "4", "--micro-per-step", "2", "--mem-tokens", "30000",
             "-o", P["big_manifest"]]]
    for c in must:
        r = ctx.run(c, timeout=120)
        if r.rc != 0:
            raise SystemExit("setup failed: %s: %s" % (" ".join(c), r.err))
    rows = ["B,S,step_ms,peak_mem_bytes"]
    for B in (1, 2, 4, 8):
        for S in (1024, 4096, 16384, 32768):
            rows.append("%d,%d,%.4f,%d" % (B, S, 0.5 + 2e-4 * B * S + 1e-9 * B * S * S, (1 << 30) + 1000 * B * S))
    with open(P["bench"], "w") as f:
        f.write("\n".join(rows) + "\n")
    ctx.shared["P"] = P


FORGE_TARGETS = ["index", "manifest", "manifest2", "cost", "big_manifest", "big_index"]
FORGE_KINDS = ["flip", "flip_head", "bytes", "truncate", "zero", "random", "swap_kind", "append", "empty_frame"]
FORGE_WEIGHTS = [60, 30, 15, 25, 5, 5, 8, 8, 4]


def gen_forged(rng):
    for _ in range(170):
        t = rng.choice(FORGE_TARGETS)
        k = rng.choices(FORGE_KINDS, FORGE_WEIGHTS)[0]
        yield {"kind": k, "target": t, "desc": "%s %s" % (t, k), "p": rng.random()}


def _use_cmd(P, target, path):
    """How each forged file is read: the command that must refuse it (or work)."""
    if target in ("index", "big_index"):
        return [["inspect", path, "--json"], ["plan", "--index", path, "--world", "2", "-o", path + ".m"]]
    if target == "cost":
        return [["plan", "--index", P["index"], "--world", "1", "--cost", path, "-o", path + ".m"]]
    idx = P["big_index"] if target == "big_manifest" else P["index"]
    mem = ["--members", "json"] if target == "big_manifest" else []
    return [["inspect", path, "--jsonl"], ["stream", "--index", idx, "--manifest", path, "--rank", "0", "--jsonl"] + mem,
            ["plan", "--resume-from", path, "--at-step", "1", "--world", "1", "-o", path + ".m"]]


def forge(case, orig, others):
    """The damaged bytes of case["kind"] applied to orig (others: the other files a swap_kind
    case may take, in a fixed order)."""
    rng = random.Random(case["seed"])
    data = bytearray(orig)
    k, p = case["kind"], case["p"]
    if k == "flip":
        data[int(p * len(data))] ^= 1 << rng.randrange(8)
    elif k == "flip_head":
        data[int(p * min(64, len(data)))] ^= 1 << rng.randrange(8)
    elif k == "bytes":
        for _ in range(1 + rng.randrange(8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif k == "truncate":
        data = data[:int(p * len(data))]
    elif k == "zero":
        data = bytearray(len(data))
    elif k == "random":
        data = bytearray(rng.randrange(256) for _ in range(rng.choice([1, 7, 64, 4096])))
    elif k == "swap_kind":
        with open(rng.choice(others), "rb") as f:
            data = bytearray(f.read())
    elif k == "append":
        data += bytes(rng.randrange(256) for _ in range(rng.choice([1, 4, 100])))
    elif k == "empty_frame":
        data = bytearray(refs.lz4_frame(b""))
    return bytes(data)


def judge_forged(ctx, case, orig_path, path, data, orig, cmds):
    """Runs every command of cmds (each naming path) on the forged file: each must refuse it
    naming the file, or accept it and print what it prints for the original file."""
    k = case["kind"]
    outs = []
    for c in cmds:
        asan = ctx.asan is not None and c[0] == "inspect"
        r = ctx.run(c)
        if asan:
            ra = ctx.run(c, asan=True)
            j = judge(ra, None)
            if j and j[0] in ("crash", "hang"):
                return j[0], "asan: " + j[1]
        j = judge(r, [path, os.path.basename(path)])
        if j:
            if j[0] != "ok":
                return j
            outs.append("refused")
            continue
        # accepted: only fine when the content is what the original file says
        ro = ctx.run([x if x != path else orig_path for x in c])
        a = r.out.replace(path, "X")
        b = ro.out.replace(orig_path, "X")
        if k not in ("swap_kind", "append") and data != orig and a != b:
            return "wrong", "a damaged %s was accepted by `%s` and gave other output" % (case["target"], c[0])
        outs.append("accepted, same output")
    return "ok", "; ".join(outs)


def exec_forged(ctx, case, d):
    P = ctx.shared["P"]
    with open(P[case["target"]], "rb") as f:
        orig = f.read()
    data = forge(case, orig, [P[t] for t in FORGE_TARGETS if t != case["target"]])
    path = write(os.path.join(d, "forged" + os.path.splitext(P[case["target"]])[1]), data)
    return judge_forged(ctx, case, P[case["target"]], path, data, orig, _use_cmd(P, case["target"], path))


# ---------------------------------------------------------------- SIGKILL mid-write

def gen_sigkill(rng):
    for i in range(60):
        yield {"kind": rng.choice(["index", "plan", "plan", "fit", "replan"]), "desc": "SIGKILL", "p": rng.random()}


def _kill_cmd(P, kind, out):
    if kind == "index":
        return ["index", "-o", out, "--threads", "2", P["big_shards"]]
    if kind == "plan":
        return ["plan", "--index", P["big_index"], "--world", "8", "--mem-tokens", "20000", "-o", out]
    if kind == "replan":
        return ["plan", "--resume-from", P["big_manifest"], "--at-step", "3", "--world", "3", "-o", out]
    return ["fit", "--bench", P["bench"], "-o", out]


def exec_sigkill(ctx, case, d):
    P = ctx.shared["P"]
    k = case["kind"]
    ref = os.path.join(d, "ref.out")
    r = ctx.run(_kill_cmd(P, k, ref))
    if r.rc != 0:
        return "wrong", "the reference run failed: " + r.err[-300:]
    with open(ref, "rb") as f:
        new = f.read()
    target = os.path.join(d, "target.out")
    old = b"OLD CONTENT " * 100
    write(target, old)
    cmd = [ctx.bin] + _kill_cmd(P, k, target)
    t = r.secs * case["p"] * 1.3
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(t)
    p.send_signal(signal.SIGKILL)
    p.wait()
    with open(target, "rb") as f:
        got = f.read()
    left = sorted(os.listdir(d))
    if got == old:
        return "ok", "killed after %.3f s (run %.3f s): old file kept; dir %s" % (t, r.secs, left)
    if got == new:
        return "ok", "killed after %.3f s (run %.3f s): new file whole" % (t, r.secs)
    return "wrong", "killed after %.3f s: the target is neither the old file nor the whole new one (%d bytes)" % (
        t, len(got))


# ---------------------------------------------------------------- a full disk

def gen_disk(rng):
    for how in ("tmpfs", "fsize"):
        for verb in ("index", "plan", "fit", "synth", "svg", "replan", "dali"):
            for old in (False, True):
                yield {"kind": how, "verb": verb, "old": old, "desc": "full disk (%s) %s%s" % (
                    how, verb, " over an old file" if old else "")}
    for verb in ("inspect-json", "inspect-jsonl", "stream-jsonl", "index-json", "plan-json", "fit-json"):
        yield {"kind": "devfull", "verb": verb, "desc": "stdout on /dev/full: %s" % verb}


def _disk_cmd(P, verb, out):
    return {"index": ["index", "-o", out, P["big_shards"]],
            "plan": ["plan", "--index", P["big_index"], "--world", "2", "-o", out],
            "fit": ["fit", "--bench", P["bench"], "-o", out],
            "synth": ["synth", "--out", out, "--samples", "50", "--shards", "2"],
            "svg": ["inspect", P["big_manifest"], "--svg", out],
            "replan": ["plan", "--resume-from", P["big_manifest"], "--at-step", "2", "--world", "2", "-o", out],
            "dali": ["index", "-o", out + ".alidx", "--dali-idx", out, P["shards"]]}[verb]


def exec_disk(ctx, case, d):
    import resource
    P = ctx.shared["P"]
    if case["kind"] == "devfull":
        cmd = {"inspect-json": ["inspect", P["big_manifest"], "--json"],
               "inspect-jsonl": ["inspect", P["big_manifest"], "--jsonl"],
               "stream-jsonl": ["stream", "--index", P["index"], "--manifest", P["manifest"], "--jsonl"],
               "index-json": ["index", "-o", os.path.join(d, "x.alidx"), "--json", P["shards"]],
               "plan-json": ["plan", "--index", P["index"], "--world", "1", "-o", os.path.join(d, "x.alm"), "--json"],
               "fit-json": ["fit", "--default", "--json"]}[case["verb"]]
        with open("/dev/full", "w") as full:
            r = ctx.run(cmd, stdout=full)
        if r.rc == 0:
            return "wrong", "exit 0 while its output went to a full device (written nowhere)"
        return judge(r, ["stdout", "output", "No space", "write"]) or ("ok", "")
    if case["kind"] == "tmpfs":
        base = os.path.join(d, "tiny")
        os.makedirs(base)
        m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", base], stderr=subprocess.PIPE)
        if m.returncode != 0:
            return "ok", "skipped: no tmpfs (%s)" % m.stderr.decode().strip()
        preexec = None
    else:
        base = d
        lim = 6000

        def preexec():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (lim, lim))
    out = os.path.join(base, "out.bin")
    old = b"OLD" * 10
    try:
        if case["old"] and case["verb"] != "synth":
            write(out if case["verb"] != "dali" else out + ".alidx", old)
        before = sorted(os.listdir(base))
        r = ctx.run(_disk_cmd(P, case["verb"], out), preexec=preexec)
        after = sorted(os.listdir(base))
        j = judge(r, [out, os.path.basename(out), "out.bin", base])
        if j is None:
            return "ok", "fit in the room left"
        if j[0] != "ok":
            return j
        if case["old"] and case["verb"] != "synth":
            with open(out if case["verb"] != "dali" else out + ".alidx", "rb") as f:
                if f.read() != old:
                    return "wrong", "the old file was changed by a failed write"
        extra = [x for x in after if x not in before and not (case["verb"] in ("synth", "dali"))]
        if extra:
            return "wrong", "a failed write left files behind: %s" % extra
        return j
    finally:
        if case["kind"] == "tmpfs":
            subprocess.run(["umount", base], stderr=subprocess.DEVNULL)


SURFACES = [("tar", gen_tar, exec_tar), ("typed", gen_typed, exec_typed), ("forged", gen_forged, exec_forged),
            ("sigkill", gen_sigkill, exec_sigkill), ("disk_full", gen_disk, exec_disk)]
