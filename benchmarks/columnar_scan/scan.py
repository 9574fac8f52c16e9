"""Numba prototype: OTLP JSON lines (collector file exporter) -> per-span columns.

Kernel: scan_block(buf uint8[:], base, line0, ucols, icols, lflag, lstart, lend)
  - no Python objects; one pass over the bytes; validating skipper for unknown keys
  - any line it can't handle exactly is flagged (lflag=1) and its spans rolled back.
"""

import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
import numpy as np
from numba import njit

# ---- output column layout -------------------------------------------------
# ucols (uint64): trace hi, trace lo, span id, parent id, name hash, attr hash, svc hash
U_THI, U_TLO, U_SID, U_PID, U_NHASH, U_AHASH, U_SHASH = range(7)
NU = 7
# icols (int64)
(
    I_LINE,
    I_START,
    I_END,
    I_KIND,
    I_STATUS,
    I_NOFF,
    I_NLEN,
    I_AOFF,
    I_ALEN,
    I_NEV,
    I_FTOK,
    I_SOFF,
    I_SLEN,
) = range(13)
NI = 13

# flag reasons (lflag values); 0 = ok
F_MALFORMED = 1
F_ESCAPE = 2
F_TYPE = 3
F_ID = 4
F_NUM = 5
F_DUP = 6
F_MISSING = 7
F_DEPTH = 8


# ---- constant key literals -------------------------------------------------
def _lit(s):
    return np.frombuffer(s.encode(), dtype=np.uint8).copy()


K_RESOURCESPANS = _lit("resourceSpans")
K_RESOURCE = _lit("resource")
K_SCOPESPANS = _lit("scopeSpans")
K_SPANS = _lit("spans")
K_ATTRIBUTES = _lit("attributes")
K_KEY = _lit("key")
K_VALUE = _lit("value")
K_STRINGVALUE = _lit("stringValue")
K_SERVICENAME = _lit("service.name")
K_TRACEID = _lit("traceId")
K_SPANID = _lit("spanId")
K_PARENTSPANID = _lit("parentSpanId")
K_NAME = _lit("name")
K_KIND = _lit("kind")
K_START = _lit("startTimeUnixNano")
K_END = _lit("endTimeUnixNano")
K_STATUS = _lit("status")
K_CODE = _lit("code")
K_EVENTS = _lit("events")
K_TIME = _lit("timeUnixNano")
K_FIRSTTOK = _lit("hoptrace.first_token")

INT64_MAX = np.uint64(0x7FFFFFFFFFFFFFFF)
MAXDEPTH = 256

# error sentinel: positions are >= 0, errors are negative (-reason)


@njit(cache=True, nogil=True, _nrt=False)
def keq(b, s, e, lit):
    n = e - s
    if n != lit.shape[0]:
        return False
    for i in range(n):
        if b[s + i] != lit[i]:
            return False
    return True


@njit(cache=True, nogil=True, _nrt=False)
def ws(b, p, n):
    # JSON whitespace except '\n' (a newline always ends the JSONL line)
    while p < n:
        c = b[p]
        if c == 32 or c == 9 or c == 13:
            p += 1
        else:
            break
    return p


@njit(cache=True, nogil=True, _nrt=False)
def skip_string(b, p, n):
    """p at opening quote. Returns (pos after closing quote or -reason, has_escape)."""
    p += 1
    esc = False
    while p < n:
        c = b[p]
        if c == 34:
            return p + 1, esc
        if c == 92:
            esc = True
            if p + 1 >= n:
                return -F_MALFORMED, esc
            d = b[p + 1]
            if d == 117:  # \uXXXX
                if p + 6 > n:
                    return -F_MALFORMED, esc
                for k in range(p + 2, p + 6):
                    h = b[k]
                    if not ((48 <= h <= 57) or (97 <= h <= 102) or (65 <= h <= 70)):
                        return -F_MALFORMED, esc
                p += 6
                continue
            if not (
                d == 34
                or d == 92
                or d == 47
                or d == 98
                or d == 102
                or d == 110
                or d == 114
                or d == 116
            ):
                return -F_MALFORMED, esc
            p += 2
            continue
        if c < 32:
            return -F_MALFORMED, esc
        p += 1
    return -F_MALFORMED, esc


@njit(cache=True, nogil=True, _nrt=False)
def skip_number(b, p, n):
    """Validating JSON number skipper. Returns pos after, or -reason."""
    if p < n and b[p] == 45:
        p += 1
    if p >= n:
        return -F_MALFORMED
    c = b[p]
    if c == 48:
        p += 1
    elif 49 <= c <= 57:
        while p < n and 48 <= b[p] <= 57:
            p += 1
    else:
        return -F_MALFORMED
    if p < n and b[p] == 46:
        p += 1
        if p >= n or not (48 <= b[p] <= 57):
            return -F_MALFORMED
        while p < n and 48 <= b[p] <= 57:
            p += 1
    if p < n and (b[p] == 101 or b[p] == 69):
        p += 1
        if p < n and (b[p] == 43 or b[p] == 45):
            p += 1
        if p >= n or not (48 <= b[p] <= 57):
            return -F_MALFORMED
        while p < n and 48 <= b[p] <= 57:
            p += 1
    return p


@njit(cache=True, nogil=True, _nrt=False)
def skip_lit(b, p, n):
    c = b[p]
    if c == 116:  # true
        if p + 4 <= n and b[p + 1] == 114 and b[p + 2] == 117 and b[p + 3] == 101:
            return p + 4
    elif c == 102:  # false
        if (
            p + 5 <= n
            and b[p + 1] == 97
            and b[p + 2] == 108
            and b[p + 3] == 115
            and b[p + 4] == 101
        ):
            return p + 5
    elif c == 110:  # null
        if p + 4 <= n and b[p + 1] == 117 and b[p + 2] == 108 and b[p + 3] == 108:
            return p + 4
    return -F_MALFORMED


@njit(cache=True, nogil=True, _nrt=False)
def skip_value(b, p, n, stack):
    """Skip (and validate) one JSON value of any type starting at p (after ws).
    Returns pos after, or -reason."""
    depth = 0
    while True:
        # ---- parse a value at p
        p = ws(b, p, n)
        if p >= n:
            return -F_MALFORMED
        c = b[p]
        if c == 123 or c == 91:  # { or [
            p = ws(b, p + 1, n)
            if p >= n:
                return -F_MALFORMED
            if (c == 123 and b[p] == 125) or (c == 91 and b[p] == 93):
                p += 1  # empty container: value complete
            else:
                if depth >= MAXDEPTH:
                    return -F_DEPTH
                stack[depth] = c
                depth += 1
                if c == 123:
                    if b[p] != 34:
                        return -F_MALFORMED
                    p, _e = skip_string(b, p, n)
                    if p < 0:
                        return p
                    p = ws(b, p, n)
                    if p >= n or b[p] != 58:
                        return -F_MALFORMED
                    p += 1
                continue  # parse first member value
        elif c == 34:
            p, _e = skip_string(b, p, n)
            if p < 0:
                return p
        elif c == 45 or (48 <= c <= 57):
            p = skip_number(b, p, n)
            if p < 0:
                return p
        else:
            p = skip_lit(b, p, n)
            if p < 0:
                return p
        # ---- value complete: close containers / handle commas
        while True:
            if depth == 0:
                return p
            p = ws(b, p, n)
            if p >= n:
                return -F_MALFORMED
            c = b[p]
            top = stack[depth - 1]
            if c == 44:  # ,
                p = ws(b, p + 1, n)
                if top == 123:
                    if p >= n or b[p] != 34:
                        return -F_MALFORMED
                    p, _e = skip_string(b, p, n)
                    if p < 0:
                        return p
                    p = ws(b, p, n)
                    if p >= n or b[p] != 58:
                        return -F_MALFORMED
                    p += 1
                break
            elif c == 125 and top == 123:
                depth -= 1
                p += 1
            elif c == 93 and top == 91:
                depth -= 1
                p += 1
            else:
                return -F_MALFORMED


@njit(cache=True, nogil=True, _nrt=False)
def hash_bytes(b, s, e):
    """64-bit hash, 8 bytes per step (multiply-xorshift mix); length folded in."""
    h = np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(e - s)
    m = np.uint64(0xFF51AFD7ED558CCD)
    i = s
    while i + 8 <= e:
        w = (
            np.uint64(b[i])
            | (np.uint64(b[i + 1]) << np.uint64(8))
            | (np.uint64(b[i + 2]) << np.uint64(16))
            | (np.uint64(b[i + 3]) << np.uint64(24))
            | (np.uint64(b[i + 4]) << np.uint64(32))
            | (np.uint64(b[i + 5]) << np.uint64(40))
            | (np.uint64(b[i + 6]) << np.uint64(48))
            | (np.uint64(b[i + 7]) << np.uint64(56))
        )
        h = (h ^ w) * m
        h ^= h >> np.uint64(29)
        i += 8
    w = np.uint64(0)
    sh = np.uint64(0)
    while i < e:
        w |= np.uint64(b[i]) << sh
        sh += np.uint64(8)
        i += 1
    h = (h ^ w) * m
    h ^= h >> np.uint64(32)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(29)
    return h


@njit(cache=True, nogil=True, _nrt=False)
def hexval(c):
    if 48 <= c <= 57:
        return np.int64(c - 48)
    if 97 <= c <= 102:
        return np.int64(c - 87)
    if 65 <= c <= 70:
        return np.int64(c - 55)
    return np.int64(-1)


@njit(cache=True, nogil=True, _nrt=False)
def hex64(b, s):
    """16 hex chars at s -> (uint64, ok)"""
    v = np.uint64(0)
    for i in range(16):
        d = hexval(b[s + i])
        if d < 0:
            return np.uint64(0), False
        v = (v << np.uint64(4)) | np.uint64(d)
    return v, True


@njit(cache=True, nogil=True, _nrt=False)
def dec_digits(b, s, e):
    """decimal digits [s,e) -> (int64, ok); <= int64 max"""
    if e <= s or e - s > 19:
        return np.int64(0), False
    v = np.uint64(0)
    for i in range(s, e):
        c = b[i]
        if c < 48 or c > 57:
            return np.int64(0), False
        v = v * np.uint64(10) + np.uint64(c - 48)
    if v > INT64_MAX:
        return np.int64(0), False
    return np.int64(v), True


@njit(cache=True, nogil=True, _nrt=False)
def parse_u64_field(b, p, n):
    """Value at p: a decimal string "123" or a plain JSON integer 123.
    Returns (value, pos after or -reason)."""
    c = b[p]
    if c == 34:
        q, esc = skip_string(b, p, n)
        if q < 0:
            return np.int64(0), q
        if esc:
            return np.int64(0), -F_ESCAPE
        v, ok = dec_digits(b, p + 1, q - 1)
        if not ok:
            return np.int64(0), -F_NUM
        return v, q
    if 48 <= c <= 57:
        q = skip_number(b, p, n)
        if q < 0:
            return np.int64(0), q
        if c == 48 and q - p > 1:  # 0.5, 0e1 ...
            return np.int64(0), -F_NUM
        v, ok = dec_digits(b, p, q)
        if not ok:
            return np.int64(0), -F_NUM
        return v, q
    return np.int64(0), -F_TYPE


@njit(cache=True, nogil=True, _nrt=False)
def parse_small_int(b, p, n):
    """plain non-negative JSON integer (kind, status code). Returns (v, pos or -reason)."""
    c = b[p]
    if not (48 <= c <= 57):
        if c == 34 or c == 45:
            return np.int64(0), -F_TYPE
        return np.int64(0), -F_TYPE
    q = skip_number(b, p, n)
    if q < 0:
        return np.int64(0), q
    if c == 48 and q - p > 1:
        return np.int64(0), -F_NUM
    v, ok = dec_digits(b, p, q)
    if not ok or q - p > 9:
        return np.int64(0), -F_NUM
    return v, q


@njit(cache=True, nogil=True, _nrt=False)
def obj_begin(b, p, n):
    """p at '{'. Returns (pos of first key quote | pos after '}' , empty flag) or -reason."""
    if p >= n or b[p] != 123:
        return -F_TYPE, False
    p = ws(b, p + 1, n)
    if p >= n:
        return -F_MALFORMED, False
    if b[p] == 125:
        return p + 1, True
    return p, False


@njit(cache=True, nogil=True, _nrt=False)
def read_key(b, p, n):
    """p at key quote. Returns (ks, ke, pos of value) or pos<0."""
    if p >= n or b[p] != 34:
        return 0, 0, -F_MALFORMED
    q, esc = skip_string(b, p, n)
    if q < 0:
        return 0, 0, q
    if esc:
        return 0, 0, -F_ESCAPE  # escaped key at a level where keys are matched
    ks = p + 1
    ke = q - 1
    q = ws(b, q, n)
    if q >= n or b[q] != 58:
        return 0, 0, -F_MALFORMED
    q = ws(b, q + 1, n)
    if q >= n:
        return 0, 0, -F_MALFORMED
    return ks, ke, q


@njit(cache=True, nogil=True, _nrt=False)
def after_member(b, p, n, close):
    """After a member/element value. Returns (pos of next key/element, done) or -reason."""
    p = ws(b, p, n)
    if p >= n:
        return -F_MALFORMED, False
    c = b[p]
    if c == 44:
        p = ws(b, p + 1, n)
        if p >= n:
            return -F_MALFORMED, False
        return p, False
    if c == close:
        return p + 1, True
    return -F_MALFORMED, False


@njit(cache=True, nogil=True, _nrt=False)
def arr_begin(b, p, n):
    if p >= n or b[p] != 91:
        return -F_TYPE, False
    p = ws(b, p + 1, n)
    if p >= n:
        return -F_MALFORMED, False
    if b[p] == 93:
        return p + 1, True
    return p, False


@njit(cache=True, nogil=True, _nrt=False)
def parse_string_val(b, p, n):
    """value at p must be a string without escapes. Returns (s, e, pos or -reason)."""
    if b[p] != 34:
        return 0, 0, -F_TYPE
    q, esc = skip_string(b, p, n)
    if q < 0:
        return 0, 0, q
    if esc:
        return 0, 0, -F_ESCAPE
    return p + 1, q - 1, q


@njit(cache=True, nogil=True, _nrt=False)
def parse_event(b, p, n, stack):
    """Returns (is_first_token, time, pos or -reason)."""
    p, empty = obj_begin(b, p, n)
    if p < 0 or empty:
        return False, np.int64(0), p
    has_name = False
    has_time = False
    isft = False
    t = np.int64(0)
    while True:
        ks, ke, p = read_key(b, p, n)
        if p < 0:
            return False, t, p
        if keq(b, ks, ke, K_NAME):
            if has_name:
                return False, t, -F_DUP
            has_name = True
            s, e, p = parse_string_val(b, p, n)
            if p < 0:
                return False, t, p
            isft = keq(b, s, e, K_FIRSTTOK)
        elif keq(b, ks, ke, K_TIME):
            if has_time:
                return False, t, -F_DUP
            has_time = True
            t, p = parse_u64_field(b, p, n)
            if p < 0:
                return False, t, p
        else:
            p = skip_value(b, p, n, stack)
            if p < 0:
                return False, t, p
        p, done = after_member(b, p, n, 125)
        if p < 0:
            return False, t, p
        if done:
            break
    if isft and not has_time:
        return False, t, -F_MISSING
    return isft, t, p


@njit(cache=True, nogil=True, _nrt=False)
def parse_span(b, p, n, base, si, ucols, icols, stack):
    """Parse one span object at p, writing row si. Returns pos or -reason."""
    for k in range(NU):
        ucols[si, k] = 0
    for k in range(NI):
        icols[si, k] = 0
    icols[si, I_NOFF] = -1
    icols[si, I_AOFF] = -1
    ucols[si, U_NHASH] = hash_bytes(b, 0, 0)
    ucols[si, U_AHASH] = hash_bytes(b, 0, 0)
    p, empty = obj_begin(b, p, n)
    if p < 0:
        return p
    if empty:
        return -F_MISSING
    seen = 0
    while True:
        ks, ke, p = read_key(b, p, n)
        if p < 0:
            return p
        kl = ke - ks
        bit = 0
        if kl == 7 and keq(b, ks, ke, K_TRACEID):
            bit = 1
            s, e, p = parse_string_val(b, p, n)
            if p < 0:
                return p
            if e - s != 32:
                return -F_ID
            hi, ok1 = hex64(b, s)
            lo, ok2 = hex64(b, s + 16)
            if not (ok1 and ok2):
                return -F_ID
            ucols[si, U_THI] = hi
            ucols[si, U_TLO] = lo
        elif kl == 6 and keq(b, ks, ke, K_SPANID):
            bit = 2
            s, e, p = parse_string_val(b, p, n)
            if p < 0:
                return p
            if e - s != 16:
                return -F_ID
            v, ok = hex64(b, s)
            if not ok:
                return -F_ID
            ucols[si, U_SID] = v
        elif kl == 12 and keq(b, ks, ke, K_PARENTSPANID):
            bit = 4
            s, e, p = parse_string_val(b, p, n)
            if p < 0:
                return p
            if e - s == 16:
                v, ok = hex64(b, s)
                if not ok:
                    return -F_ID
                ucols[si, U_PID] = v
            elif e - s != 0:
                return -F_ID
        elif kl == 4 and keq(b, ks, ke, K_NAME):
            bit = 8
            s, e, p = parse_string_val(b, p, n)
            if p < 0:
                return p
            icols[si, I_NOFF] = base + s
            icols[si, I_NLEN] = e - s
            ucols[si, U_NHASH] = hash_bytes(b, s, e)
        elif kl == 4 and keq(b, ks, ke, K_KIND):
            bit = 16
            v, p = parse_small_int(b, p, n)
            if p < 0:
                return p
            icols[si, I_KIND] = v
        elif kl == 17 and keq(b, ks, ke, K_START):
            bit = 32
            v, p = parse_u64_field(b, p, n)
            if p < 0:
                return p
            icols[si, I_START] = v
        elif kl == 15 and keq(b, ks, ke, K_END):
            bit = 64
            v, p = parse_u64_field(b, p, n)
            if p < 0:
                return p
            icols[si, I_END] = v
        elif kl == 10 and keq(b, ks, ke, K_ATTRIBUTES):
            bit = 128
            if b[p] != 91:
                return -F_TYPE
            q = skip_value(b, p, n, stack)
            if q < 0:
                return q
            icols[si, I_AOFF] = base + p
            icols[si, I_ALEN] = q - p
            ucols[si, U_AHASH] = hash_bytes(b, p, q)
            p = q
        elif kl == 6 and keq(b, ks, ke, K_STATUS):
            bit = 256
            p, empty = obj_begin(b, p, n)
            if p < 0:
                return p
            if not empty:
                seen_code = False
                while True:
                    ks2, ke2, p = read_key(b, p, n)
                    if p < 0:
                        return p
                    if keq(b, ks2, ke2, K_CODE):
                        if seen_code:
                            return -F_DUP
                        seen_code = True
                        v, p = parse_small_int(b, p, n)
                        if p < 0:
                            return p
                        icols[si, I_STATUS] = v
                    else:
                        p = skip_value(b, p, n, stack)
                        if p < 0:
                            return p
                    p, done = after_member(b, p, n, 125)
                    if p < 0:
                        return p
                    if done:
                        break
        elif kl == 6 and keq(b, ks, ke, K_EVENTS):
            bit = 512
            p, empty = arr_begin(b, p, n)
            if p < 0:
                return p
            nev = 0
            ft = np.int64(0)
            if not empty:
                while True:
                    isft, t, p = parse_event(b, p, n, stack)
                    if p < 0:
                        return p
                    nev += 1
                    if isft and (ft == 0 or t < ft):
                        ft = t
                    p, done = after_member(b, p, n, 93)
                    if p < 0:
                        return p
                    if done:
                        break
            icols[si, I_NEV] = nev
            icols[si, I_FTOK] = ft
        else:
            p = skip_value(b, p, n, stack)
            if p < 0:
                return p
        if bit != 0:
            if seen & bit:
                return -F_DUP
            seen |= bit
        p, done = after_member(b, p, n, 125)
        if p < 0:
            return p
        if done:
            break
    if (seen & 3) != 3:  # traceId and spanId required
        return -F_MISSING
    return p


@njit(cache=True, nogil=True, _nrt=False)
def parse_kv_service(b, p, n, stack):
    """One resource attribute {key, value:{...}}. Returns (is_svc, s, e, pos).
    is_svc only when key == service.name and value is a plain stringValue."""
    p, empty = obj_begin(b, p, n)
    if p < 0 or empty:
        return False, 0, 0, p
    is_key = False
    has_key = False
    vs = -1
    ve = -1
    val_kind = 0  # 0 none, 1 stringValue, 2 other
    while True:
        ks, ke, p = read_key(b, p, n)
        if p < 0:
            return False, 0, 0, p
        if keq(b, ks, ke, K_KEY):
            if has_key:
                return False, 0, 0, -F_DUP
            has_key = True
            if b[p] != 34:
                return False, 0, 0, -F_TYPE
            q, esc = skip_string(b, p, n)
            if q < 0:
                return False, 0, 0, q
            # an escaped key might decode to service.name -> step aside
            if esc:
                return False, 0, 0, -F_ESCAPE
            is_key = keq(b, p + 1, q - 1, K_SERVICENAME)
            p = q
        elif keq(b, ks, ke, K_VALUE):
            if val_kind != 0:
                return False, 0, 0, -F_DUP
            val_kind = 2
            p, empty = obj_begin(b, p, n)
            if p < 0:
                return False, 0, 0, p
            if not empty:
                while True:
                    ks2, ke2, p = read_key(b, p, n)
                    if p < 0:
                        return False, 0, 0, p
                    if keq(b, ks2, ke2, K_STRINGVALUE) and b[p] == 34:
                        q, esc = skip_string(b, p, n)
                        if q < 0:
                            return False, 0, 0, q
                        if vs >= 0:
                            return False, 0, 0, -F_DUP
                        vs = p + 1
                        ve = q - 1
                        val_kind = 3 if esc else 1
                        p = q
                    else:
                        p = skip_value(b, p, n, stack)
                        if p < 0:
                            return False, 0, 0, p
                    p, done = after_member(b, p, n, 125)
                    if p < 0:
                        return False, 0, 0, p
                    if done:
                        break
        else:
            p = skip_value(b, p, n, stack)
            if p < 0:
                return False, 0, 0, p
        p, done = after_member(b, p, n, 125)
        if p < 0:
            return False, 0, 0, p
        if done:
            break
    if is_key:
        if val_kind == 3:
            return False, 0, 0, -F_ESCAPE
        if val_kind != 1:
            return False, 0, 0, -F_TYPE
        return True, vs, ve, p
    return False, 0, 0, p


@njit(cache=True, nogil=True, _nrt=False)
def parse_resource(b, p, n, stack):
    """resource object. Returns (svc_s, svc_e, pos); svc_s=-1 if none."""
    ss = -1
    se = -1
    p, empty = obj_begin(b, p, n)
    if p < 0 or empty:
        return ss, se, p
    while True:
        ks, ke, p = read_key(b, p, n)
        if p < 0:
            return ss, se, p
        if keq(b, ks, ke, K_ATTRIBUTES):
            p, empty = arr_begin(b, p, n)
            if p < 0:
                return ss, se, p
            if not empty:
                while True:
                    isv, s, e, p = parse_kv_service(b, p, n, stack)
                    if p < 0:
                        return ss, se, p
                    if isv:
                        # duplicate service.name: python-side semantics unclear -> step aside
                        if ss >= 0:
                            return ss, se, -F_DUP
                        ss = s
                        se = e
                    p, done = after_member(b, p, n, 93)
                    if p < 0:
                        return ss, se, p
                    if done:
                        break
        else:
            p = skip_value(b, p, n, stack)
            if p < 0:
                return ss, se, p
        p, done = after_member(b, p, n, 125)
        if p < 0:
            return ss, se, p
        if done:
            break
    return ss, se, p


@njit(cache=True, nogil=True, _nrt=False)
def parse_line(b, p, n, base, li_global, ns, cap, ucols, icols, stack):
    """Parse one top-level line object at p. Returns (pos or -reason, new ns).
    pos == -100 means output capacity exhausted."""
    p = ws(b, p, n)
    p, empty = obj_begin(b, p, n)
    if p < 0:
        return -F_MALFORMED, ns
    if empty:
        return p, ns
    seen_rs = False
    while True:
        ks, ke, p = read_key(b, p, n)
        if p < 0:
            return p, ns
        if keq(b, ks, ke, K_RESOURCESPANS):
            if seen_rs:
                return -F_DUP, ns
            seen_rs = True
            p, empty = arr_begin(b, p, n)
            if p < 0:
                return p, ns
            while not empty:
                # ---- one ResourceSpans
                r0 = ns
                ss = -1
                se = -1
                seen_res = False
                seen_ss = False
                p, emp2 = obj_begin(b, p, n)
                if p < 0:
                    return p, ns
                while not emp2:
                    ks, ke, p = read_key(b, p, n)
                    if p < 0:
                        return p, ns
                    if keq(b, ks, ke, K_RESOURCE):
                        if seen_res:
                            return -F_DUP, ns
                        seen_res = True
                        ss, se, p = parse_resource(b, p, n, stack)
                        if p < 0:
                            return p, ns
                    elif keq(b, ks, ke, K_SCOPESPANS):
                        if seen_ss:
                            return -F_DUP, ns
                        seen_ss = True
                        p, emp3 = arr_begin(b, p, n)
                        if p < 0:
                            return p, ns
                        while not emp3:
                            # ---- one ScopeSpans
                            p, emp4 = obj_begin(b, p, n)
                            if p < 0:
                                return p, ns
                            seen_sp = False
                            while not emp4:
                                ks, ke, p = read_key(b, p, n)
                                if p < 0:
                                    return p, ns
                                if keq(b, ks, ke, K_SPANS):
                                    if seen_sp:
                                        return -F_DUP, ns
                                    seen_sp = True
                                    p, emp5 = arr_begin(b, p, n)
                                    if p < 0:
                                        return p, ns
                                    while not emp5:
                                        if ns >= cap:
                                            return -100, ns
                                        p = parse_span(b, p, n, base, ns, ucols, icols, stack)
                                        if p < 0:
                                            return p, ns
                                        icols[ns, I_LINE] = li_global
                                        ns += 1
                                        p, emp5 = after_member(b, p, n, 93)
                                        if p < 0:
                                            return p, ns
                                else:
                                    p = skip_value(b, p, n, stack)
                                    if p < 0:
                                        return p, ns
                                p, emp4 = after_member(b, p, n, 125)
                                if p < 0:
                                    return p, ns
                            p, emp3 = after_member(b, p, n, 93)
                            if p < 0:
                                return p, ns
                    else:
                        p = skip_value(b, p, n, stack)
                        if p < 0:
                            return p, ns
                    p, emp2 = after_member(b, p, n, 125)
                    if p < 0:
                        return p, ns
                # resource done: backfill service name for its spans
                if ss >= 0:
                    sh = hash_bytes(b, ss, se)
                    for i in range(r0, ns):
                        icols[i, I_SOFF] = base + ss
                        icols[i, I_SLEN] = se - ss
                        ucols[i, U_SHASH] = sh
                else:
                    sh = hash_bytes(b, 0, 0)
                    for i in range(r0, ns):
                        icols[i, I_SOFF] = -1
                        icols[i, I_SLEN] = 0
                        ucols[i, U_SHASH] = sh
                p, empty = after_member(b, p, n, 93)
                if p < 0:
                    return p, ns
        else:
            p = skip_value(b, p, n, stack)
            if p < 0:
                return p, ns
        p, done = after_member(b, p, n, 125)
        if p < 0:
            return p, ns
        if done:
            break
    return p, ns


@njit(cache=True, nogil=True, _nrt=False)
def scan_block(b, base, line0, ucols, icols, lflag, lstart, lend, stack):
    """Scan a block of complete lines (last line may lack '\n').
    Returns (n_spans, n_lines); n_spans == -1 -> span capacity too small,
    n_lines == -1 -> line capacity too small (rerun with larger arrays)."""
    n = b.shape[0]
    cap = ucols.shape[0]
    lcap = lflag.shape[0]
    p = 0
    ns = 0
    li = 0
    while p < n:
        if li >= lcap:
            return -1, -1
        ls = p
        ns0 = ns
        q, ns = parse_line(b, p, n, base, line0 + li, ns, cap, ucols, icols, stack)
        if q == -100:
            return -1, li
        flag = 0
        if q >= 0:
            q = ws(b, q, n)
            if q < n and b[q] != 10:
                flag = F_MALFORMED  # trailing garbage
        else:
            flag = -q
        if flag != 0:
            ns = ns0  # roll back this line's spans
            q = ls
        # line end: next '\n' (only searched from q; for good lines q is at it)
        while q < n and b[q] != 10:
            q += 1
        lflag[li] = flag
        lstart[li] = base + ls
        lend[li] = base + q
        li += 1
        p = q + 1
    return ns, li
