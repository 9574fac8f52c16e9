/* The compiled parts of the analysis's execution: what is done once per trace (or per
 * part of one) before it is attributed. Each has its Python reference, which runs
 * where this is not built or HOPTRACE_NATIVE=off; the tests compare the two.
 *
 * earliest(spans, key) (words.earliest_holder): the span a split value comes from.
 *
 * A trace's shape key and machine words: what ShapeBatcher.ticket reads of every
 * trace, read in one pass.
 *
 * words(spans) gives what tracer.analysis.attribution.batches.shape_words gives (that
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
 * tracer.analysis.attribution.attribute) looks for on every trace. */
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
    .m_doc = "The compiled parts of the analysis's execution (see words.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    return PyModule_Create(&module);
}
