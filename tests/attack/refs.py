"""Independent references for tests/attack/run.py: a strict tar scan, .npy / .safetensors / LZ4
frame readers, the latent crop rule, and writers of the hostile members. Stdlib + numpy;
nothing here calls adaptiveload code."""

import io
import json
import struct
import tarfile
import zlib

import numpy as np

# ---------------------------------------------------------------- tar


def _octal(field):
    """A ustar numeric field, strictly: octal digits, optional leading spaces/NUL-terminated;
    base-256 (high bit) too. None when the field is not a number."""
    if field and field[0] & 0x80:
        v = int.from_bytes(field[1:], "big") | ((field[0] & 0x7F) << (8 * (len(field) - 1)))
        return None if field[0] & 0x40 else v  # negative base-256: not a size
    s = field.split(b"\0", 1)[0].strip(b" ")
    if not s or any(c not in b"01234567" for c in s):
        return None
    return int(s, 8)


def header_ok(block):
    """The ustar checksum holds (unsigned sum, as GNU tar and POSIX define it)."""
    if len(block) < 512 or block == b"\0" * 512:
        return False
    stored = _octal(block[148:156])
    if stored is None:
        return False
    s = sum(block[:148]) + 8 * 32 + sum(block[156:512])
    return s == stored


def scan_tar(data):
    """name -> list of payload bytes, for every 512-aligned header with a valid checksum whose
    whole payload lies inside data (regular files only; GNU 'L' long names and pax 'path'
    applied to the next header). A strict superset of what any reader may deliver."""
    out = {}
    o, n = 0, len(data)
    long_name = None
    while o + 512 <= n:
        blk = data[o:o + 512]
        if not header_ok(blk):
            o += 512
            long_name = None
            continue
        size = _octal(blk[124:136])
        typ = blk[156:157]
        name = blk[0:100].split(b"\0", 1)[0]
        if blk[257:262] == b"ustar":
            prefix = blk[345:500].split(b"\0", 1)[0]
            if prefix:
                name = prefix + b"/" + name
        if size is None:
            o += 512
            continue
        end = o + 512 + size
        if typ in (b"L", b"x") and end <= n:
            body = data[o + 512:end]
            if typ == b"L":
                long_name = body.split(b"\0", 1)[0]
            else:
                for rec in _pax_records(body):
                    if rec[0] == b"path":
                        long_name = rec[1]
            o += 512 + (size + 511) // 512 * 512
            continue
        if long_name is not None:
            name, long_name = long_name, None
        # POSIX: an unknown typeflag reads as a regular file; GNU 'S' only with a real size field
        if (typ in (b"0", b"\0", b"7") or typ not in b"123456DKLMSVxgX" or
                typ == b"S" and _octal(blk[483:495]) == size) and end <= n:
            out.setdefault(name.decode("utf-8", "replace"), []).append(data[o + 512:end])
        o += 512  # every aligned block is looked at: resynchronising readers may find more
    return out


def _pax_records(body):
    recs = []
    i = 0
    while i < len(body):
        sp = body.find(b" ", i)
        if sp < 0:
            break
        try:
            ln = int(body[i:sp])
        except ValueError:
            break
        rec = body[sp + 1:i + ln - 1]
        k, _, v = rec.partition(b"=")
        recs.append((k, v))
        if ln <= 0:
            break
        i += ln
    return recs


def write_tar(members, fmt=tarfile.USTAR_FORMAT):
    """members: list of (name, bytes) -> tar bytes, and the byte offsets of each header."""
    b = io.BytesIO()
    offs = []
    with tarfile.open(fileobj=b, mode="w", format=fmt) as t:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = 1700000000
            offs.append(b.tell())
            t.addfile(ti, io.BytesIO(data))
    return b.getvalue(), offs


def raw_header(name, size, typ=b"0", size_field=None, linkname=b"", magic=b"ustar\x0000", fix_sum=True,
               devmajor=0, devminor=0):
    """One ustar header block with any field forged."""
    h = bytearray(512)
    nb = name if isinstance(name, bytes) else name.encode()
    h[0:100] = nb[:100].ljust(100, b"\0")
    h[100:108] = b"0000644\0"
    h[108:116] = b"0000000\0"
    h[116:124] = b"0000000\0"
    h[124:136] = size_field if size_field is not None else ("%011o\0" % size).encode()
    h[136:148] = b"15127257400\0"
    h[156:157] = typ
    h[157:257] = linkname[:100].ljust(100, b"\0")
    h[257:265] = magic
    h[329:337] = ("%07o\0" % devmajor).encode()
    h[337:345] = ("%07o\0" % devminor).encode()
    if fix_sum:
        h[148:156] = b" " * 8
        s = sum(h)
        h[148:156] = ("%06o\0 " % s).encode()
    return bytes(h)


def pad512(b):
    return b + b"\0" * (-len(b) % 512)


# ---------------------------------------------------------------- .npy


def npy_bytes(arr, header=None, magic=b"\x93NUMPY", version=(1, 0), hlen=None, extra=b""):
    """A .npy file of arr, or with a forged header dict text / header length / version."""
    if header is None:
        b = io.BytesIO()
        np.save(b, arr)
        return b.getvalue() + extra
    hb = header.encode("latin1") if isinstance(header, str) else header
    major = version[0]
    lenfmt = "<H" if major == 1 else "<I"
    pre = len(magic) + 2 + struct.calcsize(lenfmt)
    total = pre + len(hb) + 1
    hb = hb + b" " * (-total % 64) + b"\n"
    n = len(hb) if hlen is None else hlen
    try:
        lenb = struct.pack(lenfmt, n)
    except struct.error:
        lenb = struct.pack(lenfmt, n & (0xFFFF if major == 1 else 0xFFFFFFFF))
    return magic + bytes(version) + lenb + hb + arr.tobytes() + extra


def npy_ref(raw):
    """numpy's own reading: (dtype name, shape, C-order bytes) or None when numpy refuses it."""
    try:
        a = np.load(io.BytesIO(raw), allow_pickle=False)
    except Exception:
        return None
    if not isinstance(a, np.ndarray) or a.dtype.hasobject:
        return None
    # numpy reads just what the shape needs and ignores the rest of the file
    return a.dtype, tuple(a.shape), np.ascontiguousarray(a)


# ---------------------------------------------------------------- .safetensors

ST_DTYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "BF16": None, "I8": np.int8,
             "U8": np.uint8, "I16": np.int16, "U16": np.uint16, "I32": np.int32, "U32": np.uint32,
             "I64": np.int64, "U64": np.uint64, "BOOL": np.bool_}
ST_SIZE = {"F16": 2, "F32": 4, "F64": 8, "BF16": 2, "I8": 1, "U8": 1, "I16": 2, "U16": 2, "I32": 4,
           "U32": 4, "I64": 8, "U64": 8, "BOOL": 1}


def st_bytes(arr, dtype="F16", name="t", header=None, hlen=None, offsets=None, shape=None, data=None):
    data = arr.tobytes() if data is None else data
    if header is None:
        shp = list(arr.shape) if shape is None else shape
        off = [0, len(data)] if offsets is None else offsets
        header = json.dumps({name: {"dtype": dtype, "shape": shp, "data_offsets": off}})
    hb = header.encode() if isinstance(header, str) else header
    n = len(hb) if hlen is None else hlen
    return struct.pack("<Q", n & 0xFFFFFFFFFFFFFFFF) + hb + data


def st_ref(raw):
    """Strict safetensors: one tensor (besides __metadata__), known dtype, offsets [0, n) exactly
    the shape's bytes, inside the file. (dtype, shape, bytes) or None."""
    if len(raw) < 8:
        return None
    n = struct.unpack("<Q", raw[:8])[0]
    if n > len(raw) - 8:
        return None
    try:
        h = json.loads(raw[8:8 + n].decode("utf-8"))
    except Exception:
        return None
    if not isinstance(h, dict):
        return None
    ts = [(k, v) for k, v in h.items() if k != "__metadata__"]
    if len(ts) != 1 or not isinstance(ts[0][1], dict):
        return None
    t = ts[0][1]
    dt, shp, off = t.get("dtype"), t.get("shape"), t.get("data_offsets")
    if dt not in ST_SIZE or not isinstance(shp, list) or not isinstance(off, list) or len(off) != 2:
        return None
    if not all(type(d) is int and d >= 0 for d in shp) or not all(type(d) is int and d >= 0 for d in off):
        return None
    cnt = 1
    for d in shp:
        cnt *= d
    b, e = off
    base = 8 + n
    if b > e or base + e > len(raw) or e - b != cnt * ST_SIZE[dt]:
        return None
    return dt, tuple(shp), raw[base + b:base + e]


# ---------------------------------------------------------------- LZ4 frames

P1, P2, P3, P4, P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
M32 = 0xFFFFFFFF


def _rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & M32


def xxh32(data, seed=0):
    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + P1 + P2) & M32, (seed + P2) & M32, seed & M32, (seed - P1) & M32]
        while i + 16 <= n:
            for k in range(4):
                lane = struct.unpack_from("<I", data, i + 4 * k)[0]
                v[k] = (_rotl((v[k] + lane * P2) & M32, 13) * P1) & M32
            i += 16
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & M32
    else:
        h = (seed + P5) & M32
    h = (h + n) & M32
    while i + 4 <= n:
        h = (_rotl((h + struct.unpack_from("<I", data, i)[0] * P3) & M32, 17) * P4) & M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * P5) & M32, 11) * P1) & M32
        i += 1
    h ^= h >> 15
    h = (h * P2) & M32
    h ^= h >> 13
    h = (h * P3) & M32
    h ^= h >> 16
    return h


def lz4_frame(payload, blocks=None, content_size=None, block_checksum=False, content_checksum=True,
              bd=0x70, bad_hc=False, end_mark=True, trailing=b""):
    """An LZ4 frame; blocks: list of (raw block bytes, compressed?) or None for uncompressed
    64 KiB blocks of payload. content_size: the value to declare (None: not declared)."""
    flg = 0x40 | 0x20  # version 01, block independence
    if block_checksum:
        flg |= 0x10
    if content_size is not None:
        flg |= 0x08
    if content_checksum:
        flg |= 0x04
    desc = bytes([flg, bd]) + (struct.pack("<Q", content_size) if content_size is not None else b"")
    hc = (xxh32(desc) >> 8) & 0xFF
    if bad_hc:
        hc ^= 0x5A
    out = bytearray(b"\x04\x22\x4d\x18" + desc + bytes([hc]))
    if blocks is None:
        blocks = [(payload[i:i + 65536], False) for i in range(0, len(payload), 65536)]
    for raw, comp in blocks:
        out += struct.pack("<I", len(raw) | (0 if comp else 0x80000000))
        out += raw
        if block_checksum:
            out += struct.pack("<I", xxh32(raw))
    if end_mark:
        out += b"\0\0\0\0"
        if content_checksum:
            out += struct.pack("<I", xxh32(payload))
    return bytes(out) + trailing


def lz4_literals_block(data):
    """One LZ4 block holding data as a single literal run (valid compressed block)."""
    n = len(data)
    tok = min(n, 15) << 4
    out = bytearray([tok])
    if n >= 15:
        r = n - 15
        while r >= 255:
            out.append(255)
            r -= 255
        out.append(r)
    return bytes(out) + data


def _lz4_block_decode(src, cap):
    out = bytearray()
    i = 0
    n = len(src)
    while i < n:
        tok = src[i]
        i += 1
        lit = tok >> 4
        if lit == 15:
            while True:
                if i >= n:
                    return None
                b = src[i]
                i += 1
                lit += b
                if b != 255:
                    break
        if i + lit > n:
            return None
        out += src[i:i + lit]
        i += lit
        if len(out) > cap:
            return None
        if i == n:
            return bytes(out)
        if i + 2 > n:
            return None
        off = src[i] | (src[i + 1] << 8)
        i += 2
        if off == 0 or off > len(out):
            return None
        ml = tok & 15
        if ml == 15:
            while True:
                if i >= n:
                    return None
                b = src[i]
                i += 1
                ml += b
                if b != 255:
                    break
        ml += 4
        for _ in range(ml):
            out.append(out[-off])
        if len(out) > cap:
            return None
    return None  # a block must end with literals


def lz4_ref(raw):
    """Strict LZ4 frame decoding: magic, version, HC, block sizes within the maximum, block and
    content checksums, declared content size, end mark, nothing after. Bytes or None."""
    if len(raw) < 7 or raw[:4] != b"\x04\x22\x4d\x18":
        return None
    flg, bd = raw[4], raw[5]
    if flg >> 6 != 1 or flg & 0x03 or bd & 0x8F or (bd >> 4) & 7 < 4:
        return None
    bmax = 1 << (8 + 2 * ((bd >> 4) & 7))
    p = 6
    csize = None
    if flg & 0x08:
        if len(raw) < p + 8:
            return None
        csize = struct.unpack_from("<Q", raw, p)[0]
        p += 8
    if flg & 0x01:
        return None
    if len(raw) < p + 1 or raw[p] != (xxh32(raw[4:p]) >> 8) & 0xFF:
        return None
    p += 1
    out = bytearray()
    while True:
        if len(raw) < p + 4:
            return None
        w = struct.unpack_from("<I", raw, p)[0]
        p += 4
        if w == 0:
            break
        ln = w & 0x7FFFFFFF
        if ln > bmax or len(raw) < p + ln:
            return None
        blk = raw[p:p + ln]
        p += ln
        if flg & 0x10:
            if len(raw) < p + 4 or struct.unpack_from("<I", raw, p)[0] != xxh32(blk):
                return None
            p += 4
        if w & 0x80000000:
            out += blk
        else:
            d = _lz4_block_decode(blk, bmax)
            if d is None:
                return None
            out += d
    if flg & 0x04:
        if len(raw) < p + 4 or struct.unpack_from("<I", raw, p)[0] != xxh32(bytes(out)):
            return None
        p += 4
    if p != len(raw):
        return None
    if csize is not None and csize != len(out):
        return None
    return bytes(out)


# ---------------------------------------------------------------- what the stream must deliver


def crc(b):
    return "%08x" % (zlib.crc32(b) & 0xFFFFFFFF)


def typed_ref(name, raw):
    """A member's expected (kind, dtype-ish, shape, C-order numpy array or bytes), or None when
    a strict reader refuses it; untyped members: ('raw', None, (len,), bytes)."""
    base = name[:-4] if name.endswith(".lz4") else name
    if name.endswith(".lz4"):
        raw = lz4_ref(raw)
        if raw is None:
            return None
    if base.endswith(".npy"):
        r = npy_ref(raw)
        return None if r is None else ("npy",) + r
    if base.endswith(".safetensors"):
        r = st_ref(raw)
        return None if r is None else ("st",) + r
    return ("raw", None, (len(raw),), raw)


def crop_bytes(ref, shape, is_latent):
    """The bytes the stream must deliver for ref at the delivered shape: the latent cropped
    (channels whole, first T frames, centred rows/columns), anything else whole."""
    kind, dt, shp, val = ref
    if kind == "raw":
        return val if tuple(shape) == tuple(shp) else None
    if kind == "st":
        if not is_latent:
            return val if tuple(shape) == tuple(shp) else None
        if dt not in ST_SIZE:
            return None
        itemsize = ST_SIZE[dt]
        arr = np.frombuffer(val, dtype="u%d" % itemsize if itemsize > 1 else np.uint8).reshape(shp)
    else:
        arr = val
        if not is_latent:
            return arr.tobytes() if tuple(shape) == tuple(shp) else None
    a = crop_array(arr, shape)
    return None if a is None else a.tobytes()


def crop_array(arr, shape):
    """A latent array (C, T, H, W) or (C, H, W) cropped to shape (c, t, h, w) by the documented
    rule (channels whole, the first t frames, centred rows and columns), or None when it cannot be."""
    a = arr
    if a.ndim == 3:  # (C, H, W): T = 1
        a = a[:, None]
    if a.ndim != 4 or len(shape) != 4:
        return None
    c, t, h, w = shape
    C, T, H, W = a.shape
    if c != C or t > T or h > H or w > W:
        return None
    y0, x0 = (H - h) // 2, (W - w) // 2
    return np.ascontiguousarray(a[:, :t, y0:y0 + h, x0:x0 + w])


def patchify(a, pt, ph, pw):
    """A (C, T, H, W) latent as token rows: tokens in (t, y, x) order of its patch grid, each
    row the features (c, dt, dy, dx); T, H, W multiples of the patch."""
    C, T, H, W = a.shape
    x = a.reshape(C, T // pt, pt, H // ph, ph, W // pw, pw).transpose(1, 3, 5, 0, 2, 4, 6)
    return np.ascontiguousarray(x.reshape(-1, C * pt * ph * pw))


def strict_json(raw):
    """RFC 8259 object in UTF-8 (no NaN/Infinity, no NUL bytes raw), else None."""
    try:
        s = raw.decode("utf-8")
        v = json.loads(s, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except Exception:
        return None
    return v if isinstance(v, dict) else None
