/* OTLP JSON lines straight into spans, in C: the analyzer's decoder for big files.
 *
 * decode(line) gives what tracer.spans._otlp_lines.traces_from_otlp_line's typed
 * decoder gives for the same line (a dict of trace id -> list of Span, in the order of
 * the line), or None when it cannot be sure to: then the typed decoder (msgspec) reads
 * the line, and after it the general one. It takes only what is plainly written (ids
 * of lower-case hex, times and kinds as decimal digits, names without escapes, the
 * resource before the scopes) and steps aside for everything else, so it is never
 * asked to agree on a doubtful case. Whatever is a decision about values stays in
 * Python and is called from here: a span's attribute list is decoded by the typed
 * decoder's own function (once per distinct text, in its memo), a resource's service
 * name likewise, and a span with phase events or first-token attributes gets its mark
 * from first_token_ns. tests/tracer/test_otlp_lines.py runs both decoders on random and
 * malformed lines and requires the same spans.
 *
 * It validates the whole line as JSON (strings, escapes, UTF-8, numbers, nesting up
 * to MAX_DEPTH), as the typed decoder does before it returns anything.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define ASIDE (-1) /* the Python decoder reads the line */
#define FAILED (-2) /* a Python exception is set */
#define MAX_DEPTH 64

typedef struct {
    const unsigned char *b;
    Py_ssize_t n;
} Buf;

/* Set by configure(): the Span type and what is decided in Python. */
static PyObject *span_type;
static PyObject *attribute_memo; /* dict: attribute text (bytes) -> (dict, stage, general) */
static PyObject *remember; /* remember(text) -> that tuple, or None: step aside */
static PyObject *service_of; /* service_of(resource attributes text) -> str or None */
static PyObject *first_token; /* first_token(start, [(name, time)], attributes) */
static PyObject *unknown_service;
static PyObject *empty_text; /* b"[]": a span without attributes */
static long long lax_int, time_limit;

/* Names, as UTF-8: events' (marks, phases, details that step aside, the ones the
 * first-token rules read) and attribute keys' (whose values a template keeps). */
#define MAX_NAMES 64
typedef struct {
    int count;
    Py_ssize_t len[MAX_NAMES];
    char *text[MAX_NAMES];
} Names;
static Names mark_names, phase_names, detail_names, wanted_names;
/* Keys whose numbers, and keys whose strings, are part of a template's text. */
static Names literal_numbers, literal_strings;

static int
in_names(const Names *names, const unsigned char *s, Py_ssize_t len)
{
    for (int i = 0; i < names->count; i++) {
        if (names->len[i] == len && memcmp(names->text[i], s, (size_t)len) == 0) {
            return 1;
        }
    }
    return 0;
}

/* ---- JSON ------------------------------------------------------------------ */

static inline Py_ssize_t
ws(const Buf *B, Py_ssize_t p)
{
    while (p < B->n) {
        unsigned char c = B->b[p];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            p++;
        }
        else {
            break;
        }
    }
    return p;
}

static inline int
hexvalue(unsigned char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* The code unit of the escape \uXXXX at p, or -1. */
static int
unicode_escape(const Buf *B, Py_ssize_t p)
{
    int unit = 0;
    if (p + 6 > B->n) {
        return -1;
    }
    for (Py_ssize_t k = p + 2; k < p + 6; k++) {
        int v = hexvalue(B->b[k]);
        if (v < 0) {
            return -1;
        }
        unit = unit * 16 + v;
    }
    return unit;
}

/* One UTF-8 sequence starting at p (a byte >= 0x80): its length, or 0 if invalid
 * (overlong, a surrogate, past U+10FFFF, cut short). */
static Py_ssize_t
utf8_sequence(const Buf *B, Py_ssize_t p)
{
    const unsigned char *b = B->b;
    unsigned char c = b[p];
    Py_ssize_t left = B->n - p;
    if (c >= 0xC2 && c <= 0xDF) {
        return (left >= 2 && (b[p + 1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3 || (b[p + 1] & 0xC0) != 0x80 || (b[p + 2] & 0xC0) != 0x80) {
            return 0;
        }
        if (c == 0xE0 && b[p + 1] < 0xA0) {
            return 0; /* overlong */
        }
        if (c == 0xED && b[p + 1] >= 0xA0) {
            return 0; /* a surrogate */
        }
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4 || (b[p + 1] & 0xC0) != 0x80 || (b[p + 2] & 0xC0) != 0x80 ||
            (b[p + 3] & 0xC0) != 0x80) {
            return 0;
        }
        if (c == 0xF0 && b[p + 1] < 0x90) {
            return 0;
        }
        if (c == 0xF4 && b[p + 1] >= 0x90) {
            return 0;
        }
        return 4;
    }
    return 0;
}

/* The high bit of each of the 8 bytes of w that is a quote, a backslash, a control
 * character or not ASCII (the bit tricks of "Bit Twiddling Hacks": exact up to the
 * first such byte; bytes after it may be flagged falsely, which nothing here reads). */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
static inline uint64_t
specials(uint64_t w)
{
    uint64_t quote = w ^ (ONES * '"'), backslash = w ^ (ONES * '\\');
    return (((quote - ONES) & ~quote) | ((backslash - ONES) & ~backslash) |
            ((w - ONES * 0x20) & ~w) | w) &
           HIGHS;
}

/* A string at p (its opening quote): the position after its closing quote, or
 * ASIDE. *escaped tells whether it has an escape (then its text is not its bytes). */
static Py_ssize_t
skip_string(const Buf *B, Py_ssize_t p, int *escaped)
{
    const unsigned char *b = B->b;
    *escaped = 0;
    p++;
    while (p < B->n) {
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* plain bytes eight at a time, to the first byte that is not */
        if (p + 8 <= B->n) {
            uint64_t w;
            memcpy(&w, b + p, 8);
            uint64_t found = specials(w);
            if (found == 0) {
                p += 8;
                continue;
            }
            p += __builtin_ctzll(found) >> 3;
        }
#endif
        unsigned char c = b[p];
        if (c == '"') {
            return p + 1;
        }
        if (c == '\\') {
            *escaped = 1;
            if (p + 1 >= B->n) {
                return ASIDE;
            }
            unsigned char d = b[p + 1];
            if (d == 'u') {
                int unit = unicode_escape(B, p);
                if (unit < 0) {
                    return ASIDE;
                }
                if (unit >= 0xDC00 && unit <= 0xDFFF) {
                    return ASIDE; /* a low surrogate alone */
                }
                p += 6;
                if (unit >= 0xD800 && unit <= 0xDBFF) {
                    /* a high surrogate: a low one must follow, or decoders differ */
                    if (p + 1 >= B->n || b[p] != '\\' || b[p + 1] != 'u') {
                        return ASIDE;
                    }
                    unit = unicode_escape(B, p);
                    if (unit < 0xDC00 || unit > 0xDFFF) {
                        return ASIDE;
                    }
                    p += 6;
                }
                continue;
            }
            if (d != '"' && d != '\\' && d != '/' && d != 'b' && d != 'f' && d != 'n' &&
                d != 'r' && d != 't') {
                return ASIDE;
            }
            p += 2;
            continue;
        }
        if (c < 0x20) {
            return ASIDE;
        }
        if (c >= 0x80) {
            Py_ssize_t k = utf8_sequence(B, p);
            if (k == 0) {
                return ASIDE;
            }
            p += k;
            continue;
        }
        p++;
    }
    return ASIDE;
}

static Py_ssize_t
skip_number(const Buf *B, Py_ssize_t p)
{
    const unsigned char *b = B->b;
    Py_ssize_t n = B->n;
    if (p < n && b[p] == '-') {
        p++;
    }
    if (p >= n) {
        return ASIDE;
    }
    if (b[p] == '0') {
        p++;
    }
    else if (b[p] >= '1' && b[p] <= '9') {
        while (p < n && b[p] >= '0' && b[p] <= '9') {
            p++;
        }
    }
    else {
        return ASIDE;
    }
    if (p < n && b[p] == '.') {
        p++;
        if (p >= n || b[p] < '0' || b[p] > '9') {
            return ASIDE;
        }
        while (p < n && b[p] >= '0' && b[p] <= '9') {
            p++;
        }
    }
    if (p < n && (b[p] == 'e' || b[p] == 'E')) {
        p++;
        if (p < n && (b[p] == '+' || b[p] == '-')) {
            p++;
        }
        if (p >= n || b[p] < '0' || b[p] > '9') {
            return ASIDE;
        }
        while (p < n && b[p] >= '0' && b[p] <= '9') {
            p++;
        }
    }
    return p;
}

static Py_ssize_t
skip_literal(const Buf *B, Py_ssize_t p, const char *word, Py_ssize_t len)
{
    if (p + len > B->n || memcmp(B->b + p, word, (size_t)len) != 0) {
        return ASIDE;
    }
    return p + len;
}

static Py_ssize_t skip_value(const Buf *B, Py_ssize_t p, int depth);

/* After a member or element: the position of the next one (*done = 0) or after the
 * closing bracket (*done = 1), or ASIDE. */
static inline Py_ssize_t
after_member(const Buf *B, Py_ssize_t p, unsigned char close, int *done)
{
    p = ws(B, p);
    if (p >= B->n) {
        return ASIDE;
    }
    if (B->b[p] == ',') {
        *done = 0;
        p = ws(B, p + 1);
        return p < B->n ? p : ASIDE;
    }
    if (B->b[p] == close) {
        *done = 1;
        return p + 1;
    }
    return ASIDE;
}

/* An object's key at p: [*ks, *ke) is its text (no escapes), returns the position of
 * its value, or ASIDE. */
static inline Py_ssize_t
read_key(const Buf *B, Py_ssize_t p, Py_ssize_t *ks, Py_ssize_t *ke)
{
    int escaped;
    if (p >= B->n || B->b[p] != '"') {
        return ASIDE;
    }
    Py_ssize_t q = skip_string(B, p, &escaped);
    if (q < 0 || escaped) {
        return ASIDE; /* an escaped key may spell a known one */
    }
    *ks = p + 1;
    *ke = q - 1;
    q = ws(B, q);
    if (q >= B->n || B->b[q] != ':') {
        return ASIDE;
    }
    q = ws(B, q + 1);
    return q < B->n ? q : ASIDE;
}

/* p at '{' or '[': the position of the first member (*empty = 0) or after the
 * closing bracket (*empty = 1), or ASIDE. */
static inline Py_ssize_t
open_bracket(const Buf *B, Py_ssize_t p, unsigned char open, unsigned char close, int *empty)
{
    if (p >= B->n || B->b[p] != open) {
        return ASIDE;
    }
    p = ws(B, p + 1);
    if (p >= B->n) {
        return ASIDE;
    }
    if (B->b[p] == close) {
        *empty = 1;
        return p + 1;
    }
    *empty = 0;
    return p;
}

static Py_ssize_t
skip_value(const Buf *B, Py_ssize_t p, int depth)
{
    int escaped, done, empty;
    if (p >= B->n) {
        return ASIDE;
    }
    switch (B->b[p]) {
    case '"':
        return skip_string(B, p, &escaped);
    case '{':
        if (depth >= MAX_DEPTH) {
            return ASIDE;
        }
        p = open_bracket(B, p, '{', '}', &empty);
        while (p >= 0 && !empty) {
            if (B->b[p] != '"') {
                return ASIDE;
            }
            p = skip_string(B, p, &escaped);
            if (p < 0) {
                return ASIDE;
            }
            p = ws(B, p);
            if (p >= B->n || B->b[p] != ':') {
                return ASIDE;
            }
            p = skip_value(B, ws(B, p + 1), depth + 1);
            if (p < 0) {
                return ASIDE;
            }
            p = after_member(B, p, '}', &done);
            empty = done;
        }
        return p;
    case '[':
        if (depth >= MAX_DEPTH) {
            return ASIDE;
        }
        p = open_bracket(B, p, '[', ']', &empty);
        while (p >= 0 && !empty) {
            p = skip_value(B, p, depth + 1);
            if (p < 0) {
                return ASIDE;
            }
            p = after_member(B, p, ']', &done);
            empty = done;
        }
        return p;
    case 't':
        return skip_literal(B, p, "true", 4);
    case 'f':
        return skip_literal(B, p, "false", 5);
    case 'n':
        return skip_literal(B, p, "null", 4);
    default:
        return skip_number(B, p);
    }
}

/* A string without escapes at p: [*s, *e) its text; returns the position after it. */
static inline Py_ssize_t
plain_string(const Buf *B, Py_ssize_t p, Py_ssize_t *s, Py_ssize_t *e)
{
    int escaped;
    if (p >= B->n || B->b[p] != '"') {
        return ASIDE;
    }
    Py_ssize_t q = skip_string(B, p, &escaped);
    if (q < 0 || escaped) {
        return ASIDE;
    }
    *s = p + 1;
    *e = q - 1;
    return q;
}

/* Decimal digits [s, e), no sign, no leading zero (but "0"), inside int64: read the
 * same by every decoder. */
static inline int
digits(const Buf *B, Py_ssize_t s, Py_ssize_t e, long long *out)
{
    Py_ssize_t len = e - s;
    if (len < 1 || len > 19 || (len > 1 && B->b[s] == '0')) {
        return 0;
    }
    unsigned long long v = 0;
    for (Py_ssize_t i = s; i < e; i++) {
        unsigned char c = B->b[i];
        if (c < '0' || c > '9') {
            return 0;
        }
        v = v * 10 + (unsigned long long)(c - '0'); /* 19 digits fit in 64 bits */
    }
    if (v > (unsigned long long)LLONG_MAX) {
        return 0;
    }
    *out = (long long)v;
    return 1;
}

/* A non-negative integer written as "123" or 123 (OTLP JSON writes 64-bit integers as
 * strings); returns the position after it, or ASIDE. */
static inline Py_ssize_t
integer(const Buf *B, Py_ssize_t p, int string_too, long long *out)
{
    Py_ssize_t s, e, q;
    if (p >= B->n) {
        return ASIDE;
    }
    if (B->b[p] == '"') {
        if (!string_too) {
            return ASIDE;
        }
        q = plain_string(B, p, &s, &e);
    }
    else {
        s = p;
        q = skip_number(B, p);
        e = q;
    }
    if (q < 0 || !digits(B, s, e, out)) {
        return ASIDE;
    }
    return q;
}

static inline int
key_is(const Buf *B, Py_ssize_t ks, Py_ssize_t ke, const char *word, Py_ssize_t len)
{
    return ke - ks == len && memcmp(B->b + ks, word, (size_t)len) == 0;
}
#define KEY(word) key_is(B, ks, ke, word, (Py_ssize_t)(sizeof(word) - 1))

/* Lower-case hex of exactly `len` characters, not all zeros. */
static inline int
good_id(const Buf *B, Py_ssize_t s, Py_ssize_t e, Py_ssize_t len)
{
    if (e - s != len) {
        return 0;
    }
    int zeros = 1;
    for (Py_ssize_t i = s; i < e; i++) {
        unsigned char c = B->b[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return 0;
        }
        if (c != '0') {
            zeros = 0;
        }
    }
    return !zeros;
}

static PyObject *
ascii_string(const Buf *B, Py_ssize_t s, Py_ssize_t e)
{
    PyObject *out = PyUnicode_New(e - s, 127);
    if (out != NULL) {
        memcpy(PyUnicode_1BYTE_DATA(out), B->b + s, (size_t)(e - s));
    }
    return out;
}

/* ---- names: interned strings, remembered by their bytes ----------------------- */

#define NAME_SLOTS 256
#define NAME_BYTES 96
typedef struct {
    Py_ssize_t len;
    unsigned char text[NAME_BYTES];
    PyObject *str;
} NameSlot;
static NameSlot name_slots[NAME_SLOTS];

static PyObject *
name_string(const Buf *B, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t len = e - s;
    uint32_t h = 2166136261u;
    for (Py_ssize_t i = s; i < e; i++) {
        h = (h ^ B->b[i]) * 16777619u;
    }
    NameSlot *slot = &name_slots[h % NAME_SLOTS];
    if (slot->str != NULL && slot->len == len && memcmp(slot->text, B->b + s, (size_t)len) == 0) {
        Py_INCREF(slot->str);
        return slot->str;
    }
    PyObject *str = PyUnicode_DecodeUTF8((const char *)B->b + s, len, NULL);
    if (str == NULL) {
        return NULL;
    }
    PyUnicode_InternInPlace(&str);
    if (len <= NAME_BYTES) {
        Py_XDECREF(slot->str);
        Py_INCREF(str);
        slot->str = str;
        slot->len = len;
        memcpy(slot->text, B->b + s, (size_t)len);
    }
    return str;
}

/* ---- spans -------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t name_s, name_e; /* the event's name */
    long long time;
} Event;

typedef struct {
    Event *items;
    Py_ssize_t count, size;
} Events;

static int
add_event(Events *events, Py_ssize_t s, Py_ssize_t e, long long time)
{
    if (events->count == events->size) {
        Py_ssize_t size = events->size ? 2 * events->size : 16;
        Event *items = PyMem_Realloc(events->items, (size_t)size * sizeof(Event));
        if (items == NULL) {
            PyErr_NoMemory();
            return 0;
        }
        events->items = items;
        events->size = size;
    }
    events->items[events->count].name_s = s;
    events->items[events->count].name_e = e;
    events->items[events->count].time = time;
    events->count++;
    return 1;
}

/* What one span's JSON says, before it becomes a Span. */
typedef struct {
    Py_ssize_t trace_s, span_s, parent_s, parent_e, name_s, name_e, attr_s, attr_e;
    Py_ssize_t state_s, state_e;
    long long start, end, kind, status;
    Py_ssize_t events_from; /* its events in the line's Events */
} RawSpan;

/* An event {"name": ..., "timeUnixNano": ...}: added to `events`. */
static Py_ssize_t
parse_event(const Buf *B, Py_ssize_t p, Events *events)
{
    int empty, done, seen = 0;
    Py_ssize_t ks, ke, s = 0, e = 0;
    long long time = 0;
    p = open_bracket(B, p, '{', '}', &empty);
    while (p >= 0 && !empty) {
        p = read_key(B, p, &ks, &ke);
        if (p < 0) {
            return ASIDE;
        }
        if (KEY("name")) {
            if (seen & 1) {
                return ASIDE;
            }
            seen |= 1;
            p = plain_string(B, p, &s, &e);
        }
        else if (KEY("timeUnixNano")) {
            if (seen & 2) {
                return ASIDE;
            }
            seen |= 2;
            p = integer(B, p, 1, &time);
        }
        else {
            p = skip_value(B, p, 2);
        }
        if (p < 0) {
            return ASIDE;
        }
        p = after_member(B, p, '}', &done);
        empty = done;
    }
    if (p < 0) {
        return ASIDE;
    }
    return add_event(events, s, e, time) ? p : FAILED;
}

static Py_ssize_t
parse_status(const Buf *B, Py_ssize_t p, long long *code)
{
    int empty, done, seen = 0;
    Py_ssize_t ks, ke;
    if (p < B->n && B->b[p] == 'n') {
        return skip_literal(B, p, "null", 4);
    }
    p = open_bracket(B, p, '{', '}', &empty);
    while (p >= 0 && !empty) {
        p = read_key(B, p, &ks, &ke);
        if (p < 0) {
            return ASIDE;
        }
        if (KEY("code")) {
            if (seen) {
                return ASIDE;
            }
            seen = 1;
            p = integer(B, p, 0, code);
        }
        else {
            p = skip_value(B, p, 3);
        }
        if (p < 0) {
            return ASIDE;
        }
        p = after_member(B, p, '}', &done);
        empty = done;
    }
    return p;
}

static Py_ssize_t
parse_span(const Buf *B, Py_ssize_t p, RawSpan *span, Events *events)
{
    int empty, done, seen = 0;
    Py_ssize_t ks, ke, s, e;
    memset(span, 0, sizeof(*span));
    span->name_s = span->name_e = -1;
    span->attr_s = span->state_s = -1;
    span->parent_s = span->parent_e = 0;
    span->events_from = events->count;
    p = open_bracket(B, p, '{', '}', &empty);
    while (p >= 0 && !empty) {
        p = read_key(B, p, &ks, &ke);
        if (p < 0) {
            return ASIDE;
        }
        int bit = 0;
        if (KEY("traceId")) {
            bit = 1;
            p = plain_string(B, p, &s, &e);
            if (p < 0 || !good_id(B, s, e, 32)) {
                return ASIDE;
            }
            span->trace_s = s;
        }
        else if (KEY("spanId")) {
            bit = 2;
            p = plain_string(B, p, &s, &e);
            if (p < 0 || !good_id(B, s, e, 16)) {
                return ASIDE;
            }
            span->span_s = s;
        }
        else if (KEY("parentSpanId")) {
            bit = 4;
            p = plain_string(B, p, &s, &e);
            if (p < 0 || (e > s && !good_id(B, s, e, 16))) {
                return ASIDE;
            }
            span->parent_s = s;
            span->parent_e = e;
        }
        else if (KEY("name")) {
            bit = 8;
            p = plain_string(B, p, &span->name_s, &span->name_e);
        }
        else if (KEY("kind")) {
            bit = 16;
            p = integer(B, p, 0, &span->kind);
            if (p >= 0 && span->kind > 5) {
                return ASIDE;
            }
        }
        else if (KEY("startTimeUnixNano")) {
            bit = 32;
            p = integer(B, p, 1, &span->start);
        }
        else if (KEY("endTimeUnixNano")) {
            bit = 64;
            p = integer(B, p, 1, &span->end);
        }
        else if (KEY("attributes")) {
            bit = 128;
            if (B->b[p] != '[') {
                return ASIDE;
            }
            span->attr_s = p;
            p = skip_value(B, p, 2);
            span->attr_e = p;
        }
        else if (KEY("events")) {
            bit = 256;
            p = open_bracket(B, p, '[', ']', &empty);
            while (p >= 0 && !empty) {
                p = parse_event(B, p, events);
                if (p < 0) {
                    return p;
                }
                p = after_member(B, p, ']', &done);
                empty = done;
            }
        }
        else if (KEY("status")) {
            bit = 512;
            p = parse_status(B, p, &span->status);
        }
        else if (KEY("traceState")) {
            bit = 1024;
            p = plain_string(B, p, &span->state_s, &span->state_e);
        }
        else {
            p = skip_value(B, p, 2);
        }
        if (p < 0) {
            return ASIDE;
        }
        if (seen & bit) {
            return ASIDE; /* a key twice */
        }
        seen |= bit;
        p = after_member(B, p, '}', &done);
        empty = done;
    }
    if (p < 0 || (seen & 3) != 3 || (seen & 96) != 96) {
        return ASIDE; /* no ids or no times: the typed decoder says why */
    }
    if (!(lax_int < span->start && span->start <= span->end && span->end < time_limit)) {
        return ASIDE;
    }
    return p;
}

/* ---- attribute lists ------------------------------------------------------------
 *
 * A span's attribute list is decoded in Python (remember(): the typed decoder's own
 * function and memo), once per distinct text. Token counts and latencies make most
 * texts of an LLM call distinct, so a list whose only differences from one seen
 * before are such numbers is read from a *template*: the text with those numbers left
 * out, remembered with what Python decoded for the first text of that template and
 * the keys of the numbers. A span of a known template gets that dict with its own
 * numbers in, read here as Python reads them (an int of decimal digits, a float by
 * PyOS_string_to_double, which is correctly rounded as msgspec's parser is; a string
 * as it is). The value of a key that is decided on (the stage, the numbers the typed
 * decoder always checks, any string under a numeric key) stays in the template's text,
 * so a list with another stage is another template. A number that NUMBER_BOUNDS would
 * question, a list with a key twice: decoded in Python, as without templates.
 */

/* A slot's kind, also the byte that marks where its value was taken out of the
 * template's text (after a NUL, which a JSON text cannot hold), so that no text with
 * a value left in, or with a slot of another kind, has the same template. */
enum { SLOT_INT = '0', SLOT_DOUBLE = '1', SLOT_STRING = '2' };
typedef struct {
    Py_ssize_t key_s, key_e, val_s, val_e;
    int kind;
} Slot;
#define MAX_SLOTS 16
#define MAX_TEMPLATE 4096
#define MAX_TEMPLATES 4096
#define MAX_DOUBLE_TEXT 40 /* a double's text at most; slot_number's buffer holds it */
#define SLOT_MARK 2 /* bytes: NUL and the kind */

static PyObject *template_memo; /* template -> (dict, stage, general, keys, bounds) */
static PyObject *number_bounds; /* key -> the bound NUMBER_BOUNDS gives it */

/* {"intValue": "-12"}, {"intValue": 12}, {"doubleValue": 1.5} or {"stringValue":
 * "text"} (no escapes) at p: 1 and the value's place, or 0 (any other value). */
static int
numeric_value(const Buf *B, Py_ssize_t p, Slot *slot, Py_ssize_t *after)
{
    int empty, done, kind;
    Py_ssize_t ks, ke, s, e, q;
    long long v;
    p = open_bracket(B, p, '{', '}', &empty);
    if (p < 0 || empty) {
        return 0;
    }
    p = read_key(B, p, &ks, &ke);
    if (p < 0) {
        return 0;
    }
    if (KEY("intValue")) {
        if (B->b[p] == '"') {
            q = plain_string(B, p, &s, &e);
        }
        else {
            s = p;
            q = e = skip_number(B, p);
        }
        if (q < 0) {
            return 0;
        }
        Py_ssize_t d = (s < e && B->b[s] == '-') ? s + 1 : s;
        if (!digits(B, d, e, &v) || e - d > 18) {
            return 0;
        }
        kind = SLOT_INT;
    }
    else if (KEY("doubleValue")) {
        s = p;
        q = e = skip_number(B, p);
        if (q < 0 || e - s > MAX_DOUBLE_TEXT) {
            return 0;
        }
        int fraction = 0;
        for (Py_ssize_t i = s; i < e; i++) {
            unsigned char c = B->b[i];
            fraction |= (c == '.' || c == 'e' || c == 'E');
        }
        if (!fraction) {
            return 0; /* an integer for a double: the typed decoder converts it */
        }
        kind = SLOT_DOUBLE;
    }
    else if (KEY("stringValue")) {
        q = plain_string(B, p, &s, &e);
        if (q < 0) {
            return 0;
        }
        kind = SLOT_STRING;
    }
    else {
        return 0;
    }
    q = after_member(B, q, '}', &done);
    if (q < 0 || !done) {
        return 0; /* another member: the typed decoder decides which one counts */
    }
    /* The slot is written only now, with a value that parsed whole. */
    slot->kind = kind;
    slot->val_s = s;
    slot->val_e = e;
    *after = q;
    return 1;
}

/* The numbers of the attribute list [s, e) that a template leaves out, and how many
 * attributes it has; 0: not a list of plain key-value objects. */
static int
template_slots(const Buf *B, Py_ssize_t s, Slot *slots, int *nslots, Py_ssize_t *count)
{
    int empty, done, member_done;
    Py_ssize_t ks, ke, p;
    *nslots = 0;
    *count = 0;
    p = open_bracket(B, s, '[', ']', &empty);
    while (p >= 0 && !empty) {
        Slot slot = {-1, -1, -1, -1, 0};
        int numeric = 0, has_key = 0, has_value = 0;
        p = open_bracket(B, p, '{', '}', &member_done);
        while (p >= 0 && !member_done) {
            p = read_key(B, p, &ks, &ke);
            if (p < 0) {
                return 0;
            }
            if (KEY("key")) {
                if (has_key++) {
                    return 0; /* a member twice: the typed decoder keeps the last */
                }
                p = plain_string(B, p, &slot.key_s, &slot.key_e);
            }
            else if (KEY("value")) {
                if (has_value++) {
                    return 0;
                }
                Py_ssize_t after;
                if (numeric_value(B, p, &slot, &after)) {
                    numeric = 1;
                    p = after;
                }
                else {
                    p = skip_value(B, p, 3);
                }
            }
            else {
                p = skip_value(B, p, 3);
            }
            if (p < 0) {
                return 0;
            }
            p = after_member(B, p, '}', &member_done);
        }
        if (p < 0 || slot.key_s < 0) {
            return 0;
        }
        (*count)++;
        /* A value decided on stays in the template's text: lists with another stage
         * are another template. */
        if (numeric && !in_names(slot.kind == SLOT_STRING ? &literal_strings : &literal_numbers,
                                 B->b + slot.key_s, slot.key_e - slot.key_s)) {
            if (*nslots == MAX_SLOTS) {
                return 0;
            }
            slots[(*nslots)++] = slot;
        }
        p = after_member(B, p, ']', &done);
        empty = done;
    }
    return p >= 0;
}

/* What remember() (Python) makes of a text not in its memo: (dict, stage, general),
 * a new reference, or NULL with ASIDE / FAILED in *r. */
static PyObject *
remembered(PyObject *text, int *r)
{
    PyObject *seen = PyObject_CallOneArg(remember, text);
    if (seen == NULL) {
        *r = FAILED;
        return NULL;
    }
    if (seen == Py_None) {
        Py_DECREF(seen);
        *r = ASIDE;
        return NULL;
    }
    if (!PyTuple_Check(seen) || PyTuple_GET_SIZE(seen) != 3 ||
        !PyDict_Check(PyTuple_GET_ITEM(seen, 0))) {
        Py_DECREF(seen);
        PyErr_SetString(PyExc_TypeError, "remember() must give (attributes, stage, general)");
        *r = FAILED;
        return NULL;
    }
    return seen;
}

/* The template entry for `seen`, the decoding of a list with these slots, or NULL
 * (no error) when the list cannot be templated. */
static PyObject *
new_template(const Buf *B, PyObject *seen, Slot *slots, int nslots, Py_ssize_t count)
{
    PyObject *dict = PyTuple_GET_ITEM(seen, 0);
    if (PyDict_GET_SIZE(dict) != count) {
        return NULL; /* a key twice: the last one wins, which a template would not know */
    }
    PyObject *keys = PyTuple_New(nslots), *bounds = PyTuple_New(nslots);
    if (keys == NULL || bounds == NULL) {
        goto fail;
    }
    for (int i = 0; i < nslots; i++) {
        PyObject *key = PyUnicode_DecodeUTF8(
            (const char *)B->b + slots[i].key_s, slots[i].key_e - slots[i].key_s, NULL
        );
        if (key == NULL) {
            goto fail;
        }
        PyTuple_SET_ITEM(keys, i, key);
        PyObject *value = PyDict_GetItemWithError(dict, key);
        int typed = value != NULL && (slots[i].kind == SLOT_STRING   ? PyUnicode_CheckExact(value)
                                      : slots[i].kind == SLOT_DOUBLE ? PyFloat_CheckExact(value)
                                                                     : PyLong_CheckExact(value));
        if (!typed) {
            if (PyErr_Occurred()) {
                goto fail;
            }
            Py_DECREF(keys);
            Py_DECREF(bounds);
            return NULL;
        }
        PyObject *bound = PyDict_GetItemWithError(number_bounds, key);
        if (bound == NULL && PyErr_Occurred()) {
            goto fail;
        }
        double limit = bound == NULL ? -1.0 : PyFloat_AsDouble(bound);
        if (limit == -1.0 && PyErr_Occurred()) {
            goto fail;
        }
        PyObject *as_float = PyFloat_FromDouble(limit);
        if (as_float == NULL) {
            goto fail;
        }
        PyTuple_SET_ITEM(bounds, i, as_float);
    }
    PyObject *entry = PyTuple_Pack(
        5, dict, PyTuple_GET_ITEM(seen, 1), PyTuple_GET_ITEM(seen, 2), keys, bounds
    );
    Py_DECREF(keys);
    Py_DECREF(bounds);
    return entry;
fail:
    Py_XDECREF(keys);
    Py_XDECREF(bounds);
    return NULL; /* with the error set */
}

/* The span's number in `slot` as Python reads it, or NULL (no error: out of the
 * template's reach). */
static PyObject *
slot_number(const Buf *B, const Slot *slot, double bound)
{
    double as_double;
    long long v = 0;
    Py_ssize_t len = slot->val_e - slot->val_s;
    if (slot->val_s < 0 || len < 0 || slot->val_e > B->n) {
        return NULL;
    }
    if (slot->kind == SLOT_STRING) {
        return PyUnicode_DecodeUTF8((const char *)B->b + slot->val_s, len, NULL);
    }
    if (slot->kind == SLOT_DOUBLE) {
        char text[MAX_DOUBLE_TEXT + 1];
        char *end;
        if (len == 0 || len > MAX_DOUBLE_TEXT) {
            return NULL;
        }
        memcpy(text, B->b + slot->val_s, (size_t)len);
        text[len] = '\0';
        as_double = PyOS_string_to_double(text, &end, NULL);
        if (as_double == -1.0 && PyErr_Occurred()) {
            PyErr_Clear(); /* not a number it reads: Python decodes the list */
            return NULL;
        }
        if (end != text + len || !isfinite(as_double)) {
            return NULL;
        }
    }
    else if (slot->kind == SLOT_INT) {
        int negative = len > 0 && B->b[slot->val_s] == '-';
        if (!digits(B, slot->val_s + negative, slot->val_e, &v)) {
            return NULL;
        }
        v = negative ? -v : v;
        as_double = (double)v;
    }
    else {
        return NULL;
    }
    if (bound >= 0 && !(-bound <= as_double && as_double <= bound)) {
        return NULL; /* the typed decoder's check would be called: Python decodes it */
    }
    return slot->kind == SLOT_DOUBLE ? PyFloat_FromDouble(as_double) : PyLong_FromLongLong(v);
}

/* A span's own attributes from a decoding (dict, stage, general, ...): `dict` (taken)
 * or a copy of the decoding's; FAILED when the copy cannot be made. */
static int
take(PyObject *decoded, PyObject *dict, PyObject **attributes, PyObject **stage, int *general)
{
    *attributes = dict != NULL ? dict : PyDict_Copy(PyTuple_GET_ITEM(decoded, 0));
    if (*attributes == NULL) {
        return FAILED;
    }
    *stage = Py_NewRef(PyTuple_GET_ITEM(decoded, 1));
    *general = PyObject_IsTrue(PyTuple_GET_ITEM(decoded, 2));
    return 0;
}

/* The span's attributes (its own dict), its stage and whether the first-token rules
 * read it; ASIDE or FAILED. */
static int
attributes_of(const Buf *B, RawSpan *raw, PyObject **attributes, PyObject **stage, int *general)
{
    Slot slots[MAX_SLOTS];
    int nslots = 0, r = 0;
    Py_ssize_t count = 0;
    PyObject *entry = NULL, *key = NULL, *seen;
    Py_ssize_t len = raw->attr_e - raw->attr_s;
    /* A text seen before (most spans, but for LLM calls') is in the memo as it is. */
    PyObject *text = raw->attr_s < 0
                         ? Py_NewRef(empty_text)
                         : PyBytes_FromStringAndSize((const char *)B->b + raw->attr_s, len);
    if (text == NULL) {
        return FAILED;
    }
    seen = PyDict_GetItemWithError(attribute_memo, text);
    if (seen != NULL || PyErr_Occurred()) {
        Py_DECREF(text);
        return seen != NULL ? take(seen, NULL, attributes, stage, general) : FAILED;
    }
    if (raw->attr_s >= 0 && len <= MAX_TEMPLATE &&
        template_slots(B, raw->attr_s, slots, &nslots, &count) && nslots > 0) {
        char bare[MAX_TEMPLATE + SLOT_MARK * MAX_SLOTS];
        Py_ssize_t at = raw->attr_s, n = 0;
        for (int i = 0; i < nslots; i++) {
            memcpy(bare + n, B->b + at, (size_t)(slots[i].val_s - at));
            n += slots[i].val_s - at;
            bare[n++] = '\0';
            bare[n++] = (char)slots[i].kind;
            at = slots[i].val_e;
        }
        memcpy(bare + n, B->b + at, (size_t)(raw->attr_e - at));
        n += raw->attr_e - at;
        key = PyBytes_FromStringAndSize(bare, n);
        if (key == NULL) {
            Py_DECREF(text);
            return FAILED;
        }
        entry = PyDict_GetItemWithError(template_memo, key);
        if (entry == NULL && PyErr_Occurred()) {
            r = FAILED;
            goto done;
        }
    }
    if (entry != NULL) {
        PyObject *dict = PyDict_Copy(PyTuple_GET_ITEM(entry, 0));
        PyObject *keys = PyTuple_GET_ITEM(entry, 3), *bounds = PyTuple_GET_ITEM(entry, 4);
        /* The marks make the slot count part of the template; checked all the same, as
         * the tuples are read by index. */
        int whole = dict != NULL && PyTuple_GET_SIZE(keys) == nslots &&
                    PyTuple_GET_SIZE(bounds) == nslots;
        for (int i = 0; whole && i < nslots; i++) {
            double bound = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(bounds, i));
            PyObject *value = slot_number(B, &slots[i], bound);
            whole = value != NULL && PyDict_SetItem(dict, PyTuple_GET_ITEM(keys, i), value) == 0;
            Py_XDECREF(value);
        }
        if (whole) {
            r = take(entry, dict, attributes, stage, general);
            goto done;
        }
        Py_XDECREF(dict);
        if (PyErr_Occurred()) {
            r = FAILED;
            goto done;
        }
        Py_CLEAR(key); /* a value the template cannot take: Python decodes the list */
    }
    seen = remembered(text, &r);
    if (seen == NULL) {
        goto done;
    }
    if (key != NULL) {
        PyObject *made = new_template(B, seen, slots, nslots, count);
        if (made != NULL) {
            if (PyDict_GET_SIZE(template_memo) >= MAX_TEMPLATES) {
                PyDict_Clear(template_memo);
            }
            r = PyDict_SetItem(template_memo, key, made) < 0 ? FAILED : 0;
            Py_DECREF(made);
        }
        else if (PyErr_Occurred()) {
            r = FAILED;
        }
    }
    if (r == 0) {
        r = take(seen, NULL, attributes, stage, general); /* each span its own dict */
    }
    Py_DECREF(seen);
done:
    Py_DECREF(text);
    Py_XDECREF(key);
    return r;
}

/* The line being decoded: what it has made so far. */
typedef struct {
    const Buf *B;
    PyObject *out; /* trace id -> [Span] */
    PyObject *trace; /* the trace of the last span, and its list */
    PyObject *bucket;
    Py_ssize_t trace_s; /* where the last span's trace id is in the line */
    Events events;
} Line;

/* The span's first-token mark (0: none) as the typed decoder works it out; ASIDE or
 * FAILED. */
static int
first_mark(Line *L, RawSpan *raw, int general, PyObject *attributes, long long *first)
{
    const Buf *B = L->B;
    *first = 0;
    for (Py_ssize_t i = raw->events_from; i < L->events.count; i++) {
        Event *ev = &L->events.items[i];
        const unsigned char *name = B->b + ev->name_s;
        Py_ssize_t len = ev->name_e - ev->name_s;
        if (in_names(&mark_names, name, len)) {
            if (ev->time != 0 && ev->time <= lax_int) {
                return ASIDE;
            }
            if (ev->time && (*first == 0 || ev->time < *first)) {
                *first = ev->time;
            }
        }
        else if (in_names(&phase_names, name, len)) {
            if (ev->time != 0 && ev->time <= lax_int) {
                return ASIDE;
            }
            general = 1;
        }
        else if (in_names(&detail_names, name, len)) {
            return ASIDE; /* its attributes: the general decoder reads them */
        }
    }
    if (general) {
        PyObject *marks = PyList_New(0);
        if (marks == NULL) {
            return FAILED;
        }
        for (Py_ssize_t i = raw->events_from; i < L->events.count; i++) {
            Event *ev = &L->events.items[i];
            if (!in_names(&wanted_names, B->b + ev->name_s, ev->name_e - ev->name_s)) {
                continue;
            }
            PyObject *mark = Py_BuildValue(
                "(NL)",
                PyUnicode_DecodeUTF8((const char *)B->b + ev->name_s, ev->name_e - ev->name_s, NULL),
                ev->time
            );
            if (mark == NULL || PyList_Append(marks, mark) < 0) {
                Py_XDECREF(mark);
                Py_DECREF(marks);
                return FAILED;
            }
            Py_DECREF(mark);
        }
        PyObject *got = PyObject_CallFunction(first_token, "LOO", raw->start, marks, attributes);
        Py_DECREF(marks);
        if (got == NULL) {
            return FAILED;
        }
        if (got == Py_None) {
            *first = 0;
        }
        else {
            int overflow = 0;
            *first = PyLong_Check(got) ? PyLong_AsLongLongAndOverflow(got, &overflow) : -1;
            if (overflow || *first == -1) {
                PyErr_Clear();
                Py_DECREF(got);
                return ASIDE;
            }
        }
        Py_DECREF(got);
    }
    if (*first != 0 && !(0 < *first && *first < time_limit)) {
        return ASIDE;
    }
    return 0;
}

/* The Span of `raw`, appended to its trace's list. */
static int
add_span(Line *L, RawSpan *raw, PyObject *service)
{
    const Buf *B = L->B;
    PyObject *attributes, *stage, *name = NULL, *span_id = NULL, *parent = NULL;
    PyObject *state = NULL, *args[13], *span;
    long long first;
    int r;

    if (L->trace == NULL || memcmp(B->b + L->trace_s, B->b + raw->trace_s, 32) != 0) {
        PyObject *trace = ascii_string(B, raw->trace_s, raw->trace_s + 32);
        if (trace == NULL) {
            return FAILED;
        }
        PyObject *bucket = PyDict_GetItemWithError(L->out, trace);
        if (bucket == NULL) {
            if (PyErr_Occurred() || (bucket = PyList_New(0)) == NULL) {
                Py_DECREF(trace);
                return FAILED;
            }
            if (PyDict_SetItem(L->out, trace, bucket) < 0) {
                Py_DECREF(bucket);
                Py_DECREF(trace);
                return FAILED;
            }
            Py_DECREF(bucket); /* the dict holds it */
        }
        Py_XSETREF(L->trace, trace);
        L->bucket = bucket;
        L->trace_s = raw->trace_s;
    }
    int general;
    r = attributes_of(B, raw, &attributes, &stage, &general);
    if (r < 0) {
        return r;
    }
    r = first_mark(L, raw, general, attributes, &first);
    if (r < 0) {
        Py_DECREF(attributes);
        Py_DECREF(stage);
        return r;
    }
    if (raw->name_s < 0) {
        name = PyUnicode_InternFromString("");
    }
    else {
        name = name_string(B, raw->name_s, raw->name_e);
    }
    span_id = ascii_string(B, raw->span_s, raw->span_s + 16);
    if (raw->parent_e > raw->parent_s) {
        parent = ascii_string(B, raw->parent_s, raw->parent_e);
    }
    else {
        parent = Py_NewRef(Py_None);
    }
    if (raw->state_s >= 0 && raw->state_e > raw->state_s) {
        state = PyUnicode_DecodeUTF8((const char *)B->b + raw->state_s, raw->state_e - raw->state_s, NULL);
    }
    else {
        state = Py_NewRef(Py_None);
    }
    PyObject *kind = PyLong_FromLongLong(raw->kind);
    PyObject *start = PyLong_FromLongLong(raw->start);
    PyObject *end = PyLong_FromLongLong(raw->end);
    PyObject *status = PyLong_FromLongLong(raw->status);
    PyObject *mark = first ? PyLong_FromLongLong(first) : Py_NewRef(Py_None);
    span = NULL;
    if (name && span_id && parent && state && kind && start && end && status && mark) {
        args[0] = L->trace;
        args[1] = span_id;
        args[2] = parent;
        args[3] = service;
        args[4] = name;
        args[5] = kind;
        args[6] = start;
        args[7] = end;
        args[8] = stage;
        args[9] = status;
        args[10] = mark;
        args[11] = attributes;
        args[12] = state;
        span = PyObject_Vectorcall(span_type, args, 13, NULL);
    }
    Py_XDECREF(name);
    Py_XDECREF(span_id);
    Py_XDECREF(parent);
    Py_XDECREF(state);
    Py_XDECREF(kind);
    Py_XDECREF(start);
    Py_XDECREF(end);
    Py_XDECREF(status);
    Py_XDECREF(mark);
    Py_DECREF(attributes);
    Py_DECREF(stage);
    if (span == NULL) {
        return FAILED;
    }
    r = PyList_Append(L->bucket, span);
    Py_DECREF(span);
    return r < 0 ? FAILED : 0;
}

/* A scope {"spans": [...]}: its spans added. */
static Py_ssize_t
parse_scope(Line *L, Py_ssize_t p, PyObject *service)
{
    const Buf *B = L->B;
    int empty, done, seen = 0;
    Py_ssize_t ks, ke;
    RawSpan raw;
    p = open_bracket(B, p, '{', '}', &empty);
    while (p >= 0 && !empty) {
        p = read_key(B, p, &ks, &ke);
        if (p < 0) {
            return ASIDE;
        }
        if (KEY("spans")) {
            if (seen) {
                return ASIDE;
            }
            seen = 1;
            p = open_bracket(B, p, '[', ']', &empty);
            while (p >= 0 && !empty) {
                p = parse_span(B, p, &raw, &L->events);
                if (p < 0) {
                    return p;
                }
                int r = add_span(L, &raw, service);
                if (r < 0) {
                    return r;
                }
                L->events.count = 0;
                p = after_member(B, p, ']', &done);
                empty = done;
            }
        }
        else {
            p = skip_value(B, p, 3);
        }
        if (p < 0) {
            return p;
        }
        p = after_member(B, p, '}', &done);
        empty = done;
    }
    return p;
}

/* A resource {"attributes": [...]}: *service, from service_of (a new reference). */
static Py_ssize_t
parse_resource(const Buf *B, Py_ssize_t p, PyObject **service)
{
    int empty, done, seen = 0;
    Py_ssize_t ks, ke;
    if (p < B->n && B->b[p] == 'n') {
        return skip_literal(B, p, "null", 4);
    }
    p = open_bracket(B, p, '{', '}', &empty);
    while (p >= 0 && !empty) {
        p = read_key(B, p, &ks, &ke);
        if (p < 0) {
            return ASIDE;
        }
        if (KEY("attributes")) {
            if (seen || B->b[p] != '[') {
                return ASIDE;
            }
            seen = 1;
            Py_ssize_t s = p;
            p = skip_value(B, p, 3);
            if (p < 0) {
                return ASIDE;
            }
            PyObject *text = PyBytes_FromStringAndSize((const char *)B->b + s, p - s);
            if (text == NULL) {
                return FAILED;
            }
            PyObject *got = PyObject_CallOneArg(service_of, text);
            Py_DECREF(text);
            if (got == NULL) {
                return FAILED;
            }
            if (got == Py_None) {
                Py_DECREF(got);
                return ASIDE;
            }
            Py_SETREF(*service, got);
        }
        else {
            p = skip_value(B, p, 3);
        }
        if (p < 0) {
            return ASIDE;
        }
        p = after_member(B, p, '}', &done);
        empty = done;
    }
    return p;
}

/* One {"resource": ..., "scopeSpans": [...]}. */
static Py_ssize_t
parse_resource_spans(Line *L, Py_ssize_t p)
{
    const Buf *B = L->B;
    int empty, done, seen = 0;
    Py_ssize_t ks, ke;
    PyObject *service = Py_NewRef(unknown_service);
    p = open_bracket(B, p, '{', '}', &empty);
    while (p >= 0 && !empty) {
        p = read_key(B, p, &ks, &ke);
        if (p < 0) {
            break;
        }
        if (KEY("resource")) {
            if (seen) {
                p = ASIDE; /* twice, or after the spans it names */
                break;
            }
            seen = 1;
            p = parse_resource(B, p, &service);
        }
        else if (KEY("scopeSpans")) {
            if (seen & 2) {
                p = ASIDE;
                break;
            }
            seen |= 3;
            p = open_bracket(B, p, '[', ']', &empty);
            while (p >= 0 && !empty) {
                p = parse_scope(L, p, service);
                if (p < 0) {
                    break;
                }
                p = after_member(B, p, ']', &done);
                empty = done;
            }
        }
        else if (KEY("instrumentationLibrarySpans")) {
            p = ASIDE; /* the older name: the typed decoder reads it */
            break;
        }
        else {
            p = skip_value(B, p, 2);
        }
        if (p < 0) {
            break;
        }
        p = after_member(B, p, '}', &done);
        empty = done;
    }
    Py_DECREF(service);
    return p;
}

static Py_ssize_t
parse_line(Line *L)
{
    const Buf *B = L->B;
    int empty, done, seen = 0;
    Py_ssize_t ks, ke;
    Py_ssize_t p = open_bracket(B, ws(B, 0), '{', '}', &empty);
    while (p >= 0 && !empty) {
        p = read_key(B, p, &ks, &ke);
        if (p < 0) {
            return ASIDE;
        }
        if (KEY("resourceSpans")) {
            if (seen) {
                return ASIDE;
            }
            seen = 1;
            p = open_bracket(B, p, '[', ']', &empty);
            while (p >= 0 && !empty) {
                p = parse_resource_spans(L, p);
                if (p < 0) {
                    return p;
                }
                p = after_member(B, p, ']', &done);
                empty = done;
            }
        }
        else {
            p = skip_value(B, p, 1);
        }
        if (p < 0) {
            return p;
        }
        p = after_member(B, p, '}', &done);
        empty = done;
    }
    if (p < 0 || !seen) {
        return ASIDE;
    }
    return ws(B, p) == B->n ? p : ASIDE;
}

static PyObject *
decode(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer view;
    if (span_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return NULL;
    }
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    Buf B = {(const unsigned char *)view.buf, view.len};
    Line L = {&B, PyDict_New(), NULL, NULL, 0, {NULL, 0, 0}};
    Py_ssize_t p = L.out == NULL ? FAILED : parse_line(&L);
    PyMem_Free(L.events.items);
    Py_XDECREF(L.trace);
    PyBuffer_Release(&view);
    if (p >= 0) {
        return L.out;
    }
    Py_XDECREF(L.out);
    if (p == FAILED) {
        /* An exception from Python called span by span (the memo, the service name, the
         * first-token rules) on a line not yet read whole: the typed decoder reads the
         * line and decides. Only what is not an Exception (KeyboardInterrupt) goes up. */
        if (!PyErr_ExceptionMatches(PyExc_Exception)) {
            return NULL;
        }
        PyErr_Clear();
    }
    Py_RETURN_NONE;
}

static int
set_names(Names *names, PyObject *iterable)
{
    PyObject *items = PySequence_Tuple(iterable);
    if (items == NULL) {
        return -1;
    }
    if (PyTuple_GET_SIZE(items) > MAX_NAMES) {
        Py_DECREF(items);
        PyErr_SetString(PyExc_ValueError, "too many names");
        return -1;
    }
    for (int i = 0; i < names->count; i++) {
        PyMem_Free(names->text[i]);
    }
    names->count = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); i++) {
        Py_ssize_t len;
        const char *text = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(items, i), &len);
        if (text == NULL) {
            Py_DECREF(items);
            return -1;
        }
        names->text[i] = PyMem_Malloc((size_t)len + 1);
        if (names->text[i] == NULL) {
            Py_DECREF(items);
            PyErr_NoMemory();
            return -1;
        }
        memcpy(names->text[i], text, (size_t)len);
        names->len[i] = len;
        names->count = (int)i + 1;
    }
    Py_DECREF(items);
    return 0;
}

static PyObject *
configure(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *span, *memo, *remember_fn, *service_fn, *first_fn, *unknown, *marks, *phases,
        *details, *wanted, *bounds, *never, *strings;
    long long lax, limit;
    if (!PyArg_ParseTuple(
            args, "OO!OOOUOOOOLLO!O!O!", &span, &PyDict_Type, &memo, &remember_fn,
            &service_fn, &first_fn, &unknown, &marks, &phases, &details, &wanted, &lax, &limit,
            &PyDict_Type, &bounds, &PyFrozenSet_Type, &never, &PyFrozenSet_Type, &strings
        )) {
        return NULL;
    }
    if (set_names(&mark_names, marks) < 0 || set_names(&phase_names, phases) < 0 ||
        set_names(&detail_names, details) < 0 || set_names(&wanted_names, wanted) < 0 ||
        set_names(&literal_numbers, never) < 0 || set_names(&literal_strings, strings) < 0) {
        return NULL;
    }
    Py_XSETREF(span_type, Py_NewRef(span));
    Py_XSETREF(attribute_memo, Py_NewRef(memo));
    Py_XSETREF(remember, Py_NewRef(remember_fn));
    Py_XSETREF(service_of, Py_NewRef(service_fn));
    Py_XSETREF(first_token, Py_NewRef(first_fn));
    Py_XSETREF(unknown_service, Py_NewRef(unknown));
    Py_XSETREF(number_bounds, Py_NewRef(bounds));
    Py_XSETREF(template_memo, PyDict_New());
    if (template_memo == NULL) {
        return NULL;
    }
    if (empty_text == NULL) {
        empty_text = PyBytes_FromString("[]");
        if (empty_text == NULL) {
            return NULL;
        }
    }
    lax_int = lax;
    time_limit = limit;
    Py_RETURN_NONE;
}

static PyObject *
templates(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(arg))
{
    return PyLong_FromSsize_t(template_memo == NULL ? 0 : PyDict_GET_SIZE(template_memo));
}

static PyMethodDef methods[] = {
    {"templates", templates, METH_NOARGS, "templates() -> how many templates are remembered"},
    {"decode", decode, METH_O,
     "decode(line) -> {trace id: [Span]} or None (the Python decoder must read the line)"},
    {"configure", configure, METH_VARARGS,
     "configure(Span, memo, remember, service_of, first_token, unknown_service, marks, "
     "phases, details, wanted, lax_int, time_limit, number_bounds, literal_numbers, "
     "literal_strings)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_native",
    .m_doc = "OTLP JSON lines straight into spans, in C (see tracer.spans._otlp_lines).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    return PyModule_Create(&module);
}
