/* The compiled parts of the analysis's execution: what is done once per trace (or per
 * part of one) before it is attributed. Each has its Python reference, which runs
 * where this is not built or HOPTRACE_NATIVE=off; the tests compare the two.
 *
 * Window (stream.Window): the streaming window, which groups the parts of each trace
 * as lines arrive and hands a trace to be attributed once the input has moved far
 * enough past its last span.
 *
 * earliest(spans, key) (words.earliest_holder): the span a split value comes from.
 *
 * A trace's shape key and machine words: what ShapeBatcher.ticket reads of every
 * trace, read in one pass.
 *
 * words(spans) gives what tracer.analysis.execution.batches.shape_words gives (that
 * Python function is the reference; tests/analysis/test_words.py compares the two on
 * random traces): the key (parent positions, the key fields of each span, each span's
 * attribute keys), the starts, ends and first-token marks as 3n int64 (None when one
 * does not fit), which spans have a mark, and whether a span has a field only the
 * weight reads. None: a duplicate span id. NotImplemented: spans this does not read
 * (another type, a field of an unexpected type); the Python function then reads them.
 *
 * Which fields are in the key, which are the tree, the times and the weight is not
 * written here: configure() is given their names (from shapes.FIELDS) and finds where
 * the Span type keeps each (its member descriptors).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

#define MAX_FIELDS 16
#define MAX_SPANS 512

static PyTypeObject *span_type;
static Py_ssize_t static_at[MAX_FIELDS], weight_at[MAX_FIELDS];
static int statics, weights;
static Py_ssize_t id_at, parent_at, attributes_at, start_at, end_at, mark_at;

static inline PyObject *
field(PyObject *span, Py_ssize_t offset)
{
    return *(PyObject **)((char *)span + offset);
}

/* The position of `id` among ids[0..n) by a table of 2*MAX_SPANS slots; -1: none. */
typedef struct {
    PyObject *id[2 * MAX_SPANS];
    int position[2 * MAX_SPANS];
    Py_hash_t hash[2 * MAX_SPANS];
    int size;
} Index;

static int
index_find(Index *index, PyObject *id, Py_hash_t hash, int *found)
{
    int mask = index->size - 1;
    for (int slot = (int)(hash & mask);; slot = (slot + 1) & mask) {
        if (index->id[slot] == NULL) {
            *found = -1;
            return slot;
        }
        if (index->hash[slot] == hash) {
            int same = index->id[slot] == id ? 1 : PyObject_RichCompareBool(index->id[slot], id, Py_EQ);
            if (same < 0) {
                return -1;
            }
            if (same) {
                *found = index->position[slot];
                return slot;
            }
        }
    }
}

static PyObject *
words(PyObject *Py_UNUSED(module), PyObject *spans)
{
    static Index index;
    if (span_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return NULL;
    }
    if (!PyList_CheckExact(spans)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    Py_ssize_t n = PyList_GET_SIZE(spans);
    if (n == 0 || n > MAX_SPANS) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    int weighted = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *span = PyList_GET_ITEM(spans, i);
        if (Py_TYPE(span) != span_type) {
            Py_RETURN_NOTIMPLEMENTED; /* its fields are read only once it is a span */
        }
        PyObject *parent = field(span, parent_at);
        if (!PyUnicode_CheckExact(field(span, id_at)) ||
            !(parent == Py_None || PyUnicode_CheckExact(parent)) ||
            !PyDict_CheckExact(field(span, attributes_at))) {
            Py_RETURN_NOTIMPLEMENTED; /* (so no Python code runs while the index is in use) */
        }
        for (int w = 0; w < weights && !weighted; w++) {
            int truth = PyObject_IsTrue(field(span, weight_at[w]));
            if (truth < 0) {
                return NULL;
            }
            weighted = truth;
        }
    }
    int size = 16;
    while (size < 2 * n) {
        size *= 2;
    }
    index.size = size;
    memset(index.id, 0, (size_t)size * sizeof(PyObject *));
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *id = field(PyList_GET_ITEM(spans, i), id_at);
        Py_hash_t hash = PyObject_Hash(id);
        int found;
        if (hash == -1) {
            return NULL;
        }
        int slot = index_find(&index, id, hash, &found);
        if (slot < 0) {
            return NULL;
        }
        if (found >= 0) {
            Py_RETURN_NONE; /* a duplicate span id */
        }
        index.id[slot] = id;
        index.hash[slot] = hash;
        index.position[slot] = (int)i;
    }
    PyObject *parents = PyTuple_New(n), *keyed = PyTuple_New(n), *named = PyTuple_New(n);
    PyObject *times = PyBytes_FromStringAndSize(NULL, 3 * n * 8);
    PyObject *has = PyBytes_FromStringAndSize(NULL, n);
    if (parents == NULL || keyed == NULL || named == NULL || times == NULL || has == NULL) {
        goto fail;
    }
    long long *word = (long long *)PyBytes_AS_STRING(times);
    char *marked = PyBytes_AS_STRING(has);
    int wide = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *span = PyList_GET_ITEM(spans, i);
        /* the parent's position */
        PyObject *parent = field(span, parent_at);
        int at = -1;
        if (parent != Py_None) {
            Py_hash_t hash = PyObject_Hash(parent);
            if (hash == -1 || index_find(&index, parent, hash, &at) < 0) {
                goto fail;
            }
        }
        PyObject *position = PyLong_FromLong(at);
        if (position == NULL) {
            goto fail;
        }
        PyTuple_SET_ITEM(parents, i, position);
        /* the key fields: one value, or a tuple of them (as operator.attrgetter) */
        PyObject *value;
        if (statics == 1) {
            value = Py_NewRef(field(span, static_at[0]));
        }
        else {
            value = PyTuple_New(statics);
            if (value == NULL) {
                goto fail;
            }
            for (int k = 0; k < statics; k++) {
                PyTuple_SET_ITEM(value, k, Py_NewRef(field(span, static_at[k])));
            }
        }
        PyTuple_SET_ITEM(keyed, i, value);
        /* the attribute keys, in the dict's order */
        PyObject *attributes = field(span, attributes_at);
        PyObject *keys = PyTuple_New(PyDict_GET_SIZE(attributes));
        if (keys == NULL) {
            goto fail;
        }
        Py_ssize_t pos = 0, k = 0;
        PyObject *key, *ignored;
        while (PyDict_Next(attributes, &pos, &key, &ignored)) {
            PyTuple_SET_ITEM(keys, k++, Py_NewRef(key));
        }
        PyTuple_SET_ITEM(named, i, keys);
        /* the machine words: starts, ends, marks (0: none) */
        PyObject *start = field(span, start_at), *end = field(span, end_at);
        PyObject *mark = field(span, mark_at);
        if (!PyLong_CheckExact(start) || !PyLong_CheckExact(end) ||
            (mark != Py_None && !PyLong_CheckExact(mark))) {
            Py_DECREF(parents);
            Py_DECREF(keyed);
            Py_DECREF(named);
            Py_DECREF(times);
            Py_DECREF(has);
            Py_RETURN_NOTIMPLEMENTED;
        }
        int overflow = 0, more = 0;
        word[i] = PyLong_AsLongLongAndOverflow(start, &overflow);
        word[n + i] = PyLong_AsLongLongAndOverflow(end, &more);
        overflow |= more;
        if (mark == Py_None) {
            word[2 * n + i] = 0;
            marked[i] = 0;
        }
        else {
            word[2 * n + i] = PyLong_AsLongLongAndOverflow(mark, &more);
            overflow |= more;
            marked[i] = 1;
        }
        wide |= overflow;
    }
    if (wide) {
        Py_SETREF(times, Py_NewRef(Py_None)); /* a time past int64: the scalar path's */
    }
    return Py_BuildValue(
        "((NNN)NNO)", parents, keyed, named, times, has, weighted ? Py_True : Py_False
    );
fail:
    Py_XDECREF(parents);
    Py_XDECREF(keyed);
    Py_XDECREF(named);
    Py_XDECREF(times);
    Py_XDECREF(has);
    return NULL;
}

/* The earliest span whose attributes hold `key` (of equal starts, the first), None when
 * no span does, NotImplemented for spans this does not read: what split_value (Python,
 * tracer.analysis.execution.attribute) looks for on every trace. */
static PyObject *
earliest(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "earliest(spans, key) takes two arguments");
        return NULL;
    }
    PyObject *spans = args[0], *key = args[1], *best = NULL;
    long long best_start = 0;
    if (span_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return NULL;
    }
    if (!PyList_CheckExact(spans) || !PyUnicode_CheckExact(key)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(spans); i++) {
        PyObject *span = PyList_GET_ITEM(spans, i);
        if (Py_TYPE(span) != span_type || !PyDict_CheckExact(field(span, attributes_at))) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        int has = PyDict_Contains(field(span, attributes_at), key);
        if (has < 0) {
            return NULL;
        }
        if (!has) {
            continue;
        }
        PyObject *start = field(span, start_at);
        int overflow = 0;
        long long at = PyLong_CheckExact(start) ? PyLong_AsLongLongAndOverflow(start, &overflow)
                                                : (overflow = 1, 0);
        if (overflow) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        if (best == NULL || at < best_start) {
            best = span;
            best_start = at;
        }
    }
    return Py_NewRef(best != NULL ? best : Py_None);
}

/* Where the Span type keeps the field `name` (a member descriptor of an object). */
static int
offset_of(PyObject *type, PyObject *name, Py_ssize_t *offset)
{
    PyObject *descr = PyObject_GetAttr(type, name);
    if (descr == NULL) {
        return -1;
    }
    if (!Py_IS_TYPE(descr, &PyMemberDescr_Type) ||
        ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX) {
        Py_DECREF(descr);
        PyErr_Format(PyExc_TypeError, "%R is not a field this module can read", name);
        return -1;
    }
    *offset = ((PyMemberDescrObject *)descr)->d_member->offset;
    Py_DECREF(descr);
    return 0;
}

static int
offsets_of(PyObject *type, PyObject *names, Py_ssize_t *offsets, int *count)
{
    PyObject *items = PySequence_Tuple(names);
    if (items == NULL) {
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    if (n > MAX_FIELDS) {
        Py_DECREF(items);
        PyErr_SetString(PyExc_ValueError, "too many fields");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (offset_of(type, PyTuple_GET_ITEM(items, i), &offsets[i]) < 0) {
            Py_DECREF(items);
            return -1;
        }
    }
    *count = (int)n;
    Py_DECREF(items);
    return 0;
}

static PyObject *
configure(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *type, *keyed, *weighed, *id, *parent, *attributes, *start, *end, *mark;
    if (!PyArg_ParseTuple(
            args, "O!OOUUUUUU", &PyType_Type, &type, &keyed, &weighed, &id, &parent,
            &attributes, &start, &end, &mark
        )) {
        return NULL;
    }
    if (offsets_of(type, keyed, static_at, &statics) < 0 ||
        offsets_of(type, weighed, weight_at, &weights) < 0 || offset_of(type, id, &id_at) < 0 ||
        offset_of(type, parent, &parent_at) < 0 ||
        offset_of(type, attributes, &attributes_at) < 0 || offset_of(type, start, &start_at) < 0 ||
        offset_of(type, end, &end_at) < 0 || offset_of(type, mark, &mark_at) < 0) {
        return NULL;
    }
    if (statics == 0) {
        PyErr_SetString(PyExc_ValueError, "no key fields");
        return NULL;
    }
    Py_XSETREF(span_type, (PyTypeObject *)Py_NewRef(type));
    Py_RETURN_NONE;
}

/* ---- the streaming window (stream.Window is the reference) ------------------------ */

/* An open trace: its spans so far, where it first appeared, the count of spans read
 * when its last part arrived (its mark) and the end of that part's line. */
typedef struct {
    PyObject_HEAD
    PyObject *spans, *seq, *end;
    long long mark;
} Open;

static void
open_dealloc(Open *self)
{
    Py_XDECREF(self->spans);
    Py_XDECREF(self->seq);
    Py_XDECREF(self->end);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject OpenType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tracer.analysis.execution._native.Open",
    .tp_basicsize = sizeof(Open),
    .tp_dealloc = (destructor)open_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
};

/* A queue of (mark, trace id) or, with marks unused, of ids: a ring that grows. */
typedef struct {
    long long *mark;
    PyObject **id; /* strong references */
    Py_ssize_t head, count, size;
} Ring;

static int
ring_push(Ring *ring, long long mark, PyObject *id)
{
    if (ring->count == ring->size) {
        Py_ssize_t size = ring->size ? 2 * ring->size : 1024;
        long long *marks = PyMem_Malloc((size_t)size * sizeof(long long));
        PyObject **ids = PyMem_Malloc((size_t)size * sizeof(PyObject *));
        if (marks == NULL || ids == NULL) {
            PyMem_Free(marks);
            PyMem_Free(ids);
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i < ring->count; i++) {
            Py_ssize_t at = (ring->head + i) % ring->size;
            marks[i] = ring->mark[at];
            ids[i] = ring->id[at];
        }
        PyMem_Free(ring->mark);
        PyMem_Free(ring->id);
        ring->mark = marks;
        ring->id = ids;
        ring->head = 0;
        ring->size = size;
    }
    Py_ssize_t at = (ring->head + ring->count) % ring->size;
    ring->mark[at] = mark;
    ring->id[at] = Py_NewRef(id);
    ring->count++;
    return 0;
}

/* The oldest entry's id (the reference passes to the caller) and mark. */
static PyObject *
ring_pop(Ring *ring, long long *mark)
{
    PyObject *id = ring->id[ring->head];
    if (mark != NULL) {
        *mark = ring->mark[ring->head];
    }
    ring->head = (ring->head + 1) % ring->size;
    ring->count--;
    return id;
}

static void
ring_clear(Ring *ring)
{
    while (ring->count > 0) {
        Py_DECREF(ring_pop(ring, NULL));
    }
}

static void
ring_free(Ring *ring)
{
    ring_clear(ring);
    PyMem_Free(ring->mark);
    PyMem_Free(ring->id);
    ring->mark = NULL;
    ring->id = NULL;
    ring->size = 0;
}

typedef struct {
    PyObject_HEAD
    PyObject *open; /* trace id -> Open, in the order traces first appeared */
    PyObject *closed; /* the ids of the traces attributed last, while the window grows */
    Ring queue, closing;
    long long window, largest, seen;
    Py_ssize_t last_slot; /* the last order in a line a seq tells apart */
} Window;

static int
window_init(Window *self, PyObject *args, PyObject *kwds)
{
    long long window, largest;
    Py_ssize_t last_slot;
    static char *names[] = {"window", "largest", "last_slot", NULL};
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "LLn", names, &window, &largest, &last_slot
        )) {
        return -1;
    }
    if (last_slot < 0) {
        PyErr_SetString(PyExc_ValueError, "last_slot is not negative");
        return -1;
    }
    if (window <= 0 || largest <= 0) {
        PyErr_SetString(PyExc_ValueError, "a window is a positive number of spans");
        return -1;
    }
    Py_XSETREF(self->open, PyDict_New());
    Py_XSETREF(self->closed, PySet_New(NULL));
    if (self->open == NULL || self->closed == NULL) {
        return -1;
    }
    ring_free(&self->queue);
    ring_free(&self->closing);
    self->window = window < largest ? window : largest;
    self->largest = largest;
    self->seen = 0;
    self->last_slot = last_slot;
    return 0;
}

static void
window_dealloc(Window *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->open);
    Py_CLEAR(self->closed);
    ring_free(&self->queue);
    ring_free(&self->closing);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
window_traverse(Window *self, visitproc visit, void *arg)
{
    Py_VISIT(self->open);
    Py_VISIT(self->closed);
    return 0;
}

static int
window_clear(Window *self)
{
    Py_CLEAR(self->open);
    Py_CLEAR(self->closed);
    return 0;
}

static int
window_ready(Window *self)
{
    if (self->open == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the window was not initialised");
        return -1;
    }
    return 0;
}

/* attribute(trace id, spans, seq, end) for one trace */
static int
hand_over(PyObject *attribute, PyObject *id, Open *open)
{
    PyObject *args[4] = {id, open->spans, open->seq, open->end};
    PyObject *done = PyObject_Vectorcall(attribute, args, 4, NULL);
    if (done == NULL) {
        return -1;
    }
    Py_DECREF(done);
    return 0;
}

/* take(traces, seq, end, attribute): a line's traces ({id: [Span]}, first appearing at
 * seq | their order in the line) into the window, and the traces now complete to
 * attribute(id, spans, seq, end). */
static PyObject *
window_take(Window *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "take(traces, seq, end, attribute)");
        return NULL;
    }
    PyObject *traces = args[0], *base = args[1], *end = args[2], *attribute = args[3];
    if (window_ready(self) < 0) {
        return NULL;
    }
    if (!PyDict_Check(traces) || !PyLong_Check(base)) {
        PyErr_SetString(PyExc_TypeError, "take() wants a dict of traces and an int seq");
        return NULL;
    }
    Py_ssize_t pos = 0, slot = 0;
    PyObject *id, *spans;
    while (PyDict_Next(traces, &pos, &id, &spans)) {
        if (!PyList_CheckExact(spans)) {
            PyErr_SetString(PyExc_TypeError, "a trace's spans are a list");
            return NULL;
        }
        self->seen += PyList_GET_SIZE(spans);
        Open *open = (Open *)PyDict_GetItemWithError(self->open, id);
        if (open == NULL) {
            if (PyErr_Occurred()) {
                return NULL;
            }
            open = PyObject_New(Open, &OpenType);
            if (open == NULL) {
                return NULL;
            }
            Py_ssize_t at = slot < self->last_slot ? slot : self->last_slot;
            PyObject *order = PyLong_FromSsize_t(at);
            open->seq = order == NULL ? NULL : PyNumber_Or(base, order);
            Py_XDECREF(order);
            open->spans = Py_NewRef(spans);
            open->end = Py_NewRef(end);
            open->mark = self->seen;
            int failed = open->seq == NULL || PyDict_SetItem(self->open, id, (PyObject *)open) < 0;
            Py_DECREF(open);
            if (failed) {
                return NULL;
            }
            if (self->window < self->largest) {
                int again = PySet_Contains(self->closed, id);
                if (again < 0) {
                    return NULL;
                }
                if (again) { /* a part after its trace was attributed: a wider window */
                    self->window =
                        2 * self->window < self->largest ? 2 * self->window : self->largest;
                    if (self->window == self->largest) {
                        if (PySet_Clear(self->closed) < 0) {
                            return NULL;
                        }
                        ring_clear(&self->closing);
                    }
                }
            }
        }
        else {
            Py_ssize_t size = PyList_GET_SIZE(open->spans);
            if (PyList_SetSlice(open->spans, size, size, spans) < 0) {
                return NULL;
            }
            open->mark = self->seen;
            Py_SETREF(open->end, Py_NewRef(end));
        }
        if (ring_push(&self->queue, self->seen, id) < 0) {
            return NULL;
        }
        slot++;
    }
    while (self->queue.count > 0 &&
           self->seen - self->queue.mark[self->queue.head] > self->window) {
        long long mark;
        PyObject *tid = ring_pop(&self->queue, &mark);
        Open *open = (Open *)PyDict_GetItemWithError(self->open, tid);
        if (open == NULL || open->mark != mark) {
            Py_DECREF(tid);
            if (PyErr_Occurred()) {
                return NULL;
            }
            continue;
        }
        Py_INCREF(open);
        int failed = PyDict_DelItem(self->open, tid) < 0 || hand_over(attribute, tid, open) < 0;
        Py_DECREF(open);
        if (!failed && self->window < self->largest) {
            failed = PySet_Add(self->closed, tid) < 0 || ring_push(&self->closing, 0, tid) < 0;
            if (!failed && self->closing.count > self->largest) {
                PyObject *oldest = ring_pop(&self->closing, NULL);
                failed = PySet_Discard(self->closed, oldest) < 0;
                Py_DECREF(oldest);
            }
        }
        Py_DECREF(tid);
        if (failed) {
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

/* rest(attribute): every trace still open, in the order they first appeared. */
static PyObject *
window_rest(Window *self, PyObject *attribute)
{
    if (window_ready(self) < 0) {
        return NULL;
    }
    PyObject *open = self->open;
    self->open = PyDict_New();
    if (self->open == NULL) {
        self->open = open;
        return NULL;
    }
    Py_ssize_t pos = 0;
    PyObject *id, *entry;
    while (PyDict_Next(open, &pos, &id, &entry)) {
        if (hand_over(attribute, id, (Open *)entry) < 0) {
            Py_DECREF(open);
            return NULL;
        }
    }
    Py_DECREF(open);
    Py_RETURN_NONE;
}

static PyObject *
window_size(Window *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->window);
}

static PyMethodDef window_methods[] = {
    {"take", (PyCFunction)(void (*)(void))window_take, METH_FASTCALL,
     "take(traces, seq, end, attribute): a line's traces into the window"},
    {"rest", (PyCFunction)window_rest, METH_O, "rest(attribute): the traces still open"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef window_getset[] = {
    {"window", (getter)window_size, NULL, "the window now, in spans", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject WindowType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tracer.analysis.execution._native.Window",
    .tp_doc = "Window(window, largest, last_slot): the streaming window (stream.Window)",
    .tp_basicsize = sizeof(Window),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)window_init,
    .tp_dealloc = (destructor)window_dealloc,
    .tp_traverse = (traverseproc)window_traverse,
    .tp_clear = (inquiry)window_clear,
    .tp_methods = window_methods,
    .tp_getset = window_getset,
};

static PyMethodDef methods[] = {
    {"words", words, METH_O,
     "words(spans) -> ((parents, key fields, attribute keys), times or None, has, weighted), "
     "None (a duplicate span id) or NotImplemented"},
    {"earliest", (PyCFunction)(void (*)(void))earliest, METH_FASTCALL,
     "earliest(spans, key) -> the earliest span whose attributes hold key, None or "
     "NotImplemented"},
    {"configure", configure, METH_VARARGS,
     "configure(Span, key fields, weight fields, id, parent, attributes, start, end, mark)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_native",
    .m_doc = "The compiled parts of the analysis's execution (see words.py, stream.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    if (PyType_Ready(&OpenType) < 0 || PyType_Ready(&WindowType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "Window", (PyObject *)&WindowType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
