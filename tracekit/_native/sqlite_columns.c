/*
 * Rows of one SQLite query as columns, for the nsys reader (tracekit/ingest/nsys.py).
 *
 * Python's sqlite3 module makes a tuple and an object per value: on an nsys export with millions of
 * kernels and API calls that was 80% of the read. This walks the statement in C and writes
 *   - integer columns into int64 buffers,
 *   - "object" columns into lists (the few columns the reader needs as Python values),
 *   - the remaining "args" columns into one JSON object per row, as an Arrow large_string column
 *     (offsets, data, validity), written exactly as json.dumps(ensure_ascii=True) writes the values
 *     the sqlite3 module would have returned.
 *
 * SQLite itself is not linked: load() takes the path of the libsqlite3 that Python's sqlite3 module
 * uses and resolves the dozen functions needed, so building needs no sqlite3.h and both readers see
 * the same SQLite. Without it (a statically linked Python, no compiler) the reader stays in Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define BLOCK_TYPE_NAME "tracekit._native._sqlite_columns.Block"
#include "buffers.h"
#include "json_text.h"

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
enum { SQLITE_OK = 0, SQLITE_ROW = 100, SQLITE_DONE = 101 };
enum { SQLITE_INTEGER = 1, SQLITE_FLOAT = 2, SQLITE_TEXT = 3, SQLITE_BLOB = 4, SQLITE_NULL = 5 };
enum { SQLITE_OPEN_READONLY = 0x1, SQLITE_OPEN_URI = 0x40, SQLITE_OPEN_NOMUTEX = 0x8000 };

typedef struct {
    int (*open_v2)(const char *, sqlite3 **, int, const char *);
    int (*close_v2)(sqlite3 *);
    int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
    int (*step)(sqlite3_stmt *);
    int (*finalize)(sqlite3_stmt *);
    int (*column_count)(sqlite3_stmt *);
    int (*column_type)(sqlite3_stmt *, int);
    long long (*column_int64)(sqlite3_stmt *, int);
    double (*column_double)(sqlite3_stmt *, int);
    const unsigned char *(*column_text)(sqlite3_stmt *, int);
    const void *(*column_blob)(sqlite3_stmt *, int);
    int (*column_bytes)(sqlite3_stmt *, int);
    const char *(*errmsg)(sqlite3 *);
} Api;
#define API_FUNCTIONS 13
static const char *API_NAMES[API_FUNCTIONS] = {
    "sqlite3_open_v2", "sqlite3_close_v2", "sqlite3_prepare_v2", "sqlite3_step", "sqlite3_finalize",
    "sqlite3_column_count", "sqlite3_column_type", "sqlite3_column_int64", "sqlite3_column_double",
    "sqlite3_column_text", "sqlite3_column_blob", "sqlite3_column_bytes", "sqlite3_errmsg"};

/* The functions one read() uses, per thread: resolved at the start of each read (see bind()). */
static _Thread_local Api api;
static void *library = NULL;  /* the libsqlite3 Python's sqlite3 module loaded */

enum { BOUND_LIBRARY, BOUND_GLOBAL, BOUND_PARTIAL };

/*
 * Which SQLite to call. Another copy of SQLite may sit in the process's global symbol scope:
 * TensorFlow's libtensorflow_cc exports one and is loaded with RTLD_GLOBAL. Calls inside
 * libsqlite3 then bind to that copy's functions, so libsqlite3's own entry points run half of one
 * SQLite and half of the other (a crash in `tracekit run`, which imports TensorFlow). Python's
 * sqlite3 module resolves through the global scope and so runs the other copy whole; so does the
 * walker: every function from the global scope when all are there, libsqlite3's own when none
 * is; a partial set cannot be used (the reader then stays in Python).
 */
static int bind(Api *out) {
    void *global[API_FUNCTIONS];
    int found = 0;
    for (int i = 0; i < API_FUNCTIONS; i++) found += (global[i] = dlsym(RTLD_DEFAULT, API_NAMES[i])) != NULL;
    if (found != 0 && found != API_FUNCTIONS) return BOUND_PARTIAL;
    void **slots[API_FUNCTIONS] = {
        (void **)&out->open_v2, (void **)&out->close_v2, (void **)&out->prepare_v2, (void **)&out->step,
        (void **)&out->finalize, (void **)&out->column_count, (void **)&out->column_type,
        (void **)&out->column_int64, (void **)&out->column_double, (void **)&out->column_text,
        (void **)&out->column_blob, (void **)&out->column_bytes, (void **)&out->errmsg};
    for (int i = 0; i < API_FUNCTIONS; i++) *slots[i] = found ? global[i] : dlsym(library, API_NAMES[i]);
    if (!found) return BOUND_LIBRARY;
    for (int i = 0; i < API_FUNCTIONS; i++) {
        if (global[i] != dlsym(library, API_NAMES[i])) return BOUND_GLOBAL;
    }
    return BOUND_LIBRARY;  /* the global scope holds libsqlite3 itself */
}

static PyObject *load(PyObject *self, PyObject *args) {
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) { PyErr_Format(PyExc_OSError, "cannot load %s: %s", path, dlerror()); return NULL; }
    for (int i = 0; i < API_FUNCTIONS; i++) {
        if (!dlsym(lib, API_NAMES[i])) {
            PyErr_Format(PyExc_OSError, "%s has no %s", path, API_NAMES[i]);
            return NULL;
        }
    }
    library = lib;
    Py_RETURN_NONE;
}

/* binding() -> "library" (the sqlite3 module's libsqlite3), "global" (another copy, whole, that
   shadows it: safe on one thread only, its build unknown) or "partial" (the walker cannot run). */
static PyObject *binding(PyObject *self, PyObject *unused) {
    if (!library) { PyErr_SetString(PyExc_RuntimeError, "load() was not called"); return NULL; }
    Api probe;
    switch (bind(&probe)) {
        case BOUND_LIBRARY: return PyUnicode_FromString("library");
        case BOUND_GLOBAL: return PyUnicode_FromString("global");
        default: return PyUnicode_FromString("partial");
    }
}

/* A blob as json.dumps(value, default=str) writes it: the JSON string of str(bytes). */
static int write_json_blob(Walk *w, Buf *o, const void *p, size_t n) {
    int taken = gil_hold(w);
    PyObject *b = PyBytes_FromStringAndSize(p ? p : "", (Py_ssize_t)n);
    PyObject *s = b ? PyObject_Str(b) : NULL;
    Py_XDECREF(b);
    if (!s) return -1;
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(s, &len);
    int rc = utf8 ? write_json_text(w, o, (const unsigned char *)utf8, (size_t)len) : -1;
    Py_DECREF(s);
    if (rc == 0 && taken) gil_drop(w);
    return rc;
}

/* ---------- integer-id lookups: id -> pre-rendered JSON text ---------- */
typedef struct {
    const long long *ids;   /* sorted */
    Py_ssize_t count;
    PyObject *texts;        /* tuple: bytes (the JSON text) or None (leave the key out) */
    int missing_as_number;  /* an id not in ids: its digits (1) or left out (0) */
} Lookup;

/* 1: found, *text is the bytes to write (NULL: leave the key out); 0: not found. */
static int lookup_find(const Lookup *l, long long id, PyObject **text) {
    Py_ssize_t lo = 0, hi = l->count;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (l->ids[mid] < id) lo = mid + 1; else hi = mid;
    }
    if (lo < l->count && l->ids[lo] == id) {
        PyObject *t = PyTuple_GET_ITEM(l->texts, lo);
        *text = t == Py_None ? NULL : t;
        return 1;
    }
    return 0;
}

/* ---------- one row ---------- */
static PyObject *column_object(sqlite3_stmt *st, int col) {
    switch (api.column_type(st, col)) {
        case SQLITE_INTEGER: return PyLong_FromLongLong(api.column_int64(st, col));
        case SQLITE_FLOAT: return PyFloat_FromDouble(api.column_double(st, col));
        case SQLITE_TEXT: {
            const unsigned char *s = api.column_text(st, col);
            return PyUnicode_DecodeUTF8((const char *)s, api.column_bytes(st, col), "replace");
        }
        case SQLITE_BLOB: {
            const void *p = api.column_blob(st, col);
            return PyBytes_FromStringAndSize(p ? p : "", api.column_bytes(st, col));
        }
        default: Py_RETURN_NONE;
    }
}

static const char *TYPE_NAMES[] = {"?", "integer", "real", "text", "blob", "NULL"};

/* One row's integer column; -1 with ValueError on a value that is not a number. */
static int take_int(Walk *w, sqlite3_stmt *st, int col, Py_ssize_t row, Buf *dst) {
    int t = api.column_type(st, col);
    long long v;
    if (t == SQLITE_INTEGER) {
        v = api.column_int64(st, col);
    } else {
        double d = api.column_double(st, col);
        if (t != SQLITE_FLOAT || !isfinite(d) || d <= -9.2e18 || d >= 9.2e18) {
            gil_hold(w);
            PyErr_Format(PyExc_ValueError, "row %zd, column %d holds %s where an integer is expected",
                         row + 1, col + 1, TYPE_NAMES[t >= 1 && t <= 5 ? t : 0]);
            return -1;
        }
        v = (long long)d;  /* truncated, as numpy's int64 conversion does */
    }
    return buf_i64(dst, v);
}

static int write_arg(Walk *w, Buf *data, sqlite3_stmt *st, int col, const Lookup *lk, PyObject *key, int *first) {
    int t = api.column_type(st, col);
    if (t == SQLITE_NULL) return 0;
    PyObject *text = NULL;
    long long iv = 0;
    if (t == SQLITE_INTEGER) {
        iv = api.column_int64(st, col);
        if (lk->ids) {
            if (!lookup_find(lk, iv, &text)) {
                if (!lk->missing_as_number) return 0;
            } else if (!text) {
                return 0;
            }
        }
    }
    if (buf_byte(data, *first ? '{' : ',')) return -1;
    *first = 0;
    if (buf_put(data, PyBytes_AS_STRING(key), (size_t)PyBytes_GET_SIZE(key))) return -1;
    switch (t) {
        case SQLITE_INTEGER:
            return text ? buf_put(data, PyBytes_AS_STRING(text), (size_t)PyBytes_GET_SIZE(text)) : write_json_int(data, iv);
        case SQLITE_FLOAT: return write_json_float(w, data, api.column_double(st, col));
        case SQLITE_TEXT: {
            const unsigned char *s = api.column_text(st, col);
            return write_json_text(w, data, s, (size_t)api.column_bytes(st, col));
        }
        default: return write_json_blob(w, data, api.column_blob(st, col), (size_t)api.column_bytes(st, col));
    }
}

/*
 * read(uri, sql, n_int, n_obj, keys, lookups, rows_hint)
 *   The query's first n_int columns are integers, the next n_obj any values, the rest args: keys
 *   holds their JSON key prefixes ('"name":' as bytes), lookups for each None or
 *   (sorted int64 ids as bytes, list of bytes-or-None, missing_as_number).
 * Returns (ints: list of int64 Blocks, objs: list of lists, args: (validity bitmap, int64 offsets,
 * data) as Blocks, rows). Errors: OSError from SQLite itself (a corrupt page, say), ValueError for
 * a value of the wrong type. Without object columns the walk runs without the GIL, so the reader
 * can walk two tables at once.
 */
static PyObject *read_query(PyObject *self, PyObject *args) {
    const char *uri, *sql;
    int n_int, n_obj;
    PyObject *key_list, *lookup_specs;
    Py_ssize_t rows_hint;
    if (!PyArg_ParseTuple(args, "ssiiO!O!n", &uri, &sql, &n_int, &n_obj, &PyList_Type, &key_list, &PyList_Type,
                          &lookup_specs, &rows_hint))
        return NULL;
    if (!library) { PyErr_SetString(PyExc_RuntimeError, "load() was not called"); return NULL; }
    if (bind(&api) == BOUND_PARTIAL) {
        PyErr_SetString(PyExc_RuntimeError, "part of SQLite's API is shadowed by another library");
        return NULL;
    }
    Py_ssize_t n_args = PyList_GET_SIZE(key_list);
    if (PyList_GET_SIZE(lookup_specs) != n_args || n_int < 0 || n_obj < 0) {
        PyErr_SetString(PyExc_ValueError, "keys and lookups differ in length");
        return NULL;
    }
    if (rows_hint < 0) rows_hint = 0;

    PyObject *result = NULL, *int_list = NULL, *obj_lists = NULL, *keys = NULL;
    Lookup *lookups = NULL;
    Buf *ints = NULL, offsets = {0}, data = {0}, valid = {0};
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    Walk w = {NULL, n_obj == 0};

    keys = PyList_AsTuple(key_list);  /* tuples: the walk reads them without the GIL */
    lookups = PyMem_Calloc((size_t)n_args + 1, sizeof(Lookup));
    ints = PyMem_Calloc((size_t)n_int + 1, sizeof(Buf));
    if (!keys || !lookups || !ints) { if (!PyErr_Occurred()) PyErr_NoMemory(); goto done; }
    for (Py_ssize_t k = 0; k < n_args; k++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(keys, k))) { PyErr_SetString(PyExc_TypeError, "keys must be bytes"); goto done; }
        PyObject *spec = PyList_GET_ITEM(lookup_specs, k);
        if (spec == Py_None) continue;
        PyObject *ids, *texts;
        int missing;
        if (!PyArg_ParseTuple(spec, "SO!p", &ids, &PyList_Type, &texts, &missing)) goto done;
        Py_ssize_t count = PyBytes_GET_SIZE(ids) / (Py_ssize_t)sizeof(long long);
        if (count != PyList_GET_SIZE(texts)) { PyErr_SetString(PyExc_ValueError, "lookup ids and texts differ"); goto done; }
        PyObject *frozen = PyList_AsTuple(texts);
        if (!frozen) goto done;
        lookups[k] = (Lookup){(const long long *)PyBytes_AS_STRING(ids), count, frozen, missing};
        for (Py_ssize_t j = 0; j < count; j++) {
            PyObject *t = PyTuple_GET_ITEM(frozen, j);
            if (t != Py_None && !PyBytes_Check(t)) { PyErr_SetString(PyExc_TypeError, "lookup texts: bytes or None"); goto done; }
        }
    }
    obj_lists = PyList_New(n_obj);
    if (!obj_lists) goto done;
    for (int j = 0; j < n_obj; j++) {
        PyObject *l = PyList_New(0);
        if (!l) goto done;
        PyList_SET_ITEM(obj_lists, j, l);
    }
    for (int i = 0; i < n_int; i++) {
        if (buf_reserve(&ints[i], (size_t)rows_hint * 8 + 8)) { PyErr_NoMemory(); goto done; }
    }
    if (buf_reserve(&offsets, ((size_t)rows_hint + 1) * 8) || buf_reserve(&valid, (size_t)rows_hint / 8 + 1) ||
        buf_i64(&offsets, 0)) {
        PyErr_NoMemory();
        goto done;
    }

    /* One connection used by one thread: no per-call mutex (it was 10% of the walk). */
    if (api.open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        PyErr_Format(PyExc_OSError, "cannot open the database: %s", db ? api.errmsg(db) : "out of memory");
        goto done;
    }
    if (api.prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        PyErr_Format(PyExc_OSError, "%s", api.errmsg(db));  /* SQLite's own error: OSError */
        goto done;
    }
    if (api.column_count(st) != n_int + n_obj + n_args) {
        PyErr_SetString(PyExc_ValueError, "the query's column count does not match");
        goto done;
    }
    Py_ssize_t row = 0;
    int rc;
    gil_drop(&w);
    while ((rc = api.step(st)) == SQLITE_ROW) {
        for (int i = 0; i < n_int; i++) {
            if (take_int(&w, st, i, row, &ints[i])) goto failed;
        }
        for (int j = 0; j < n_obj; j++) {  /* only when the GIL is held throughout (may_release = 0) */
            PyObject *v = column_object(st, n_int + j);
            if (!v) goto failed;
            int appended = PyList_Append(PyList_GET_ITEM(obj_lists, j), v);
            Py_DECREF(v);
            if (appended < 0) goto failed;
        }
        int first = 1;
        for (Py_ssize_t k = 0; k < n_args; k++) {
            if (write_arg(&w, &data, st, n_int + n_obj + (int)k, &lookups[k], PyTuple_GET_ITEM(keys, k), &first)) goto failed;
        }
        if (!first && buf_byte(&data, '}')) goto failed;
        if (row % 8 == 0 && buf_byte(&valid, 0)) goto failed;
        if (!first) valid.data[row / 8] |= (char)(1 << (row % 8));
        if (buf_i64(&offsets, (long long)data.len)) goto failed;
        row++;
        if ((row & 0xffff) == 0) {
            int taken = gil_hold(&w);
            if (PyErr_CheckSignals() < 0) goto done;
            if (taken) gil_drop(&w);
        }
    }
    gil_hold(&w);
    if (rc != SQLITE_DONE) {
        PyErr_Format(PyExc_OSError, "%s", api.errmsg(db));  /* SQLite's own error: OSError */
        goto done;
    }
    int_list = PyList_New(n_int);
    if (!int_list) goto done;
    for (int i = 0; i < n_int; i++) {
        PyObject *a = bytes_of(&ints[i]);
        if (!a) goto done;
        PyList_SET_ITEM(int_list, i, a);
    }
    PyObject *v = bytes_of(&valid), *off = v ? bytes_of(&offsets) : NULL, *d = off ? bytes_of(&data) : NULL;
    if (!d) { Py_XDECREF(v); Py_XDECREF(off); goto done; }
    result = Py_BuildValue("(OO(NNN)n)", int_list, obj_lists, v, off, d, row);
    goto done;

failed:  /* a Python error is set, or (only without the GIL) an allocation failed */
    gil_hold(&w);
    if (!PyErr_Occurred()) PyErr_NoMemory();
done:
    gil_hold(&w);
    if (st) api.finalize(st);
    if (db) api.close_v2(db);
    for (int i = 0; ints && i < n_int; i++) buf_free(&ints[i]);
    buf_free(&offsets);
    buf_free(&data);
    buf_free(&valid);
    for (Py_ssize_t k = 0; lookups && k < n_args; k++) Py_XDECREF(lookups[k].texts);
    Py_XDECREF(keys);
    Py_XDECREF(int_list);
    Py_XDECREF(obj_lists);
    PyMem_Free(ints);
    PyMem_Free(lookups);
    return result;
}

static PyMethodDef methods[] = {
    {"load", load, METH_VARARGS, "load(path): resolve the SQLite C API from this shared library."},
    {"read", read_query, METH_VARARGS, "read(uri, sql, n_int, n_obj, keys, lookups, rows_hint) -> columns."},
    {"binding", binding, METH_NOARGS, "binding() -> which SQLite read() calls: library, global or partial."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sqlite_columns", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sqlite_columns(void) {
    if (PyType_Ready(&BlockType) < 0) return NULL;
    return PyModule_Create(&module);
}
