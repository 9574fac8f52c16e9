"""Python driver around scan.scan_block: block cutting, interning, trace grouping."""

import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
import numpy as np
import orjson
import scan

BLOCK = 8 << 20


def block_bounds(data, block=BLOCK):
    """cut bytes into ~block-sized pieces ending just after a newline"""
    out = []
    s = 0
    n = len(data)
    while s < n:
        e = s + block
        if e >= n:
            out.append((s, n))
            break
        k = data.rfind(b"\n", s, e)
        if k < 0:
            k = data.find(b"\n", e)
            if k < 0:
                out.append((s, n))
                break
        out.append((s, k + 1))
        s = k + 1
    return out


class Buffers:
    def __init__(self, block=BLOCK):
        self.alloc(block // 128, block // 64 + 16)

    def alloc(self, cap, lcap):
        self.u = np.empty((cap, scan.NU), np.uint64)
        self.i = np.empty((cap, scan.NI), np.int64)
        self.lf = np.empty(lcap, np.uint8)
        self.ls = np.empty(lcap, np.int64)
        self.le = np.empty(lcap, np.int64)
        self.stack = np.empty(scan.MAXDEPTH, np.uint8)


def run_block(arr, s, e, line0, bufs):
    """kernel over arr[s:e]; grows buffers and reruns on overflow"""
    b = arr[s:e]
    while True:
        ns, nl = scan.scan_block(b, s, line0, bufs.u, bufs.i, bufs.lf, bufs.ls, bufs.le, bufs.stack)
        if ns >= 0:
            return ns, nl
        if nl < 0:
            bufs.alloc(bufs.u.shape[0], bufs.lf.shape[0] * 4)
        else:
            bufs.alloc(max(bufs.u.shape[0] * 4, (e - s) // 3 + 1), bufs.lf.shape[0])


def kernel_only(arr, bounds):
    """(b): kernel over every block, reused buffers, nothing kept"""
    bufs = Buffers()
    line0 = 0
    tot = 0
    flagged = 0
    for s, e in bounds:
        ns, nl = run_block(arr, s, e, line0, bufs)
        line0 += nl
        tot += ns
        flagged += int(np.count_nonzero(bufs.lf[:nl]))
    return tot, line0, flagged


class Interner:
    """hash -> small int code; Python object made once per distinct hash (on first sight).
    Membership test is vectorised (searchsorted on a sorted array of known hashes);
    the Python loop only runs over hashes never seen before."""

    def __init__(self, make):
        self.make = make
        self.known = np.empty(0, np.uint64)  # sorted
        self.kcode = np.empty(0, np.int64)
        self.objs = []

    def codes(self, h, off, ln, data):
        u, first, inv = np.unique(h, return_index=True, return_inverse=True)
        pos = np.searchsorted(self.known, u)
        pos_c = np.minimum(pos, max(len(self.known) - 1, 0))
        found = (self.known[pos_c] == u) if len(self.known) else np.zeros(len(u), bool)
        ucode = np.empty(len(u), np.int64)
        ucode[found] = self.kcode[pos_c[found]]
        newi = np.flatnonzero(~found)
        if len(newi):
            base = len(self.objs)
            make = self.make
            objs = self.objs
            for o, n in zip(off[first[newi]].tolist(), ln[first[newi]].tolist(), strict=True):
                objs.append(make(data[o : o + n]) if o >= 0 else make(b""))
            nc = np.arange(base, base + len(newi), dtype=np.int64)
            ucode[newi] = nc
            k = np.concatenate([self.known, u[newi]])
            c = np.concatenate([self.kcode, nc])
            order = np.argsort(k, kind="stable")
            self.known = k[order]
            self.kcode = c[order]
        return ucode[inv.ravel()]


def _attrs(bs):
    return orjson.loads(bs) if bs else []


def full_pipeline(data, arr, bounds, attr_make=_attrs):
    """(c): kernel + interning of names/attrs/services + grouping by trace id."""
    bufs = Buffers()
    names = Interner(lambda bs: bs.decode())
    attrs = Interner(attr_make)
    svcs = Interner(lambda bs: bs.decode())
    parts = []
    flagged_lines = []
    line0 = 0
    for s, e in bounds:
        ns, nl = run_block(arr, s, e, line0, bufs)
        u = bufs.u[:ns]
        i = bufs.i[:ns]
        ncode = names.codes(u[:, scan.U_NHASH], i[:, scan.I_NOFF], i[:, scan.I_NLEN], data)
        acode = attrs.codes(u[:, scan.U_AHASH], i[:, scan.I_AOFF], i[:, scan.I_ALEN], data)
        scode = svcs.codes(u[:, scan.U_SHASH], i[:, scan.I_SOFF], i[:, scan.I_SLEN], data)
        fl = np.flatnonzero(bufs.lf[:nl])
        if len(fl):
            flagged_lines.extend(zip(bufs.ls[fl].tolist(), bufs.le[fl].tolist(), strict=True))
        parts.append(
            (
                u[:, :4].copy(),
                i[
                    :,
                    [
                        scan.I_LINE,
                        scan.I_START,
                        scan.I_END,
                        scan.I_KIND,
                        scan.I_STATUS,
                        scan.I_NEV,
                        scan.I_FTOK,
                    ],
                ],
                ncode,
                acode,
                scode,
            )
        )
        line0 += nl
    U = np.concatenate([p[0] for p in parts])
    icols = np.concatenate([p[1] for p in parts])
    ncode = np.concatenate([p[2] for p in parts])
    acode = np.concatenate([p[3] for p in parts])
    scode = np.concatenate([p[4] for p in parts])
    # group by trace id (hi, lo)
    order = np.lexsort((U[:, 1], U[:, 0]))
    thi = U[order, 0]
    tlo = U[order, 1]
    brk = np.flatnonzero((thi[1:] != thi[:-1]) | (tlo[1:] != tlo[:-1])) + 1
    starts = np.concatenate([[0], brk])
    ends = np.concatenate([brk, [len(order)]])
    # slow path for flagged lines (none expected here): fall back to orjson
    fallback = [orjson.loads(data[a:b]) for a, b in flagged_lines if b > a]
    return dict(
        order=order,
        starts=starts,
        ends=ends,
        U=U,
        icols=icols,
        ncode=ncode,
        acode=acode,
        scode=scode,
        names=names.objs,
        attrs=attrs.objs,
        svcs=svcs.objs,
        fallback=fallback,
    )
