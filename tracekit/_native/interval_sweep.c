/*
 * Exclusive time by priority (tracekit/analyze/intervals.py), one pass over start-sorted rows.
 *
 * Every report splits each host thread's (and each device's) busy time into classes where a moment
 * covered by several classes goes to the first: class index = priority. The numpy version merges
 * each class's union into the union of the classes before it (a sort per class); this sweeps the
 * rows once, in (group, start) order, keeping for each class the furthest end seen so far.
 *
 * Why that is enough: between one row's start and the next, every row that can cover that stretch
 * has started, so class c covers exactly [start, cover[c]) of it. The stretch then goes, in class
 * order, to each class for the part past what the classes before it cover.
 *
 * exclusive(order, group, start, end, cls, n_classes, out):
 *   order  int64[n]  rows sorted by (group, start); group, start, end int64[*]; cls int8[*]
 *   out    int64[n_groups * n_classes], zeroed by the caller; out[g * n_classes + c] += time.
 * A group's value or a class outside its range is a ValueError (the caller checks them first).
 *
 * timeline(order, start, end, cls, n_classes, seg_start, seg_end, seg_cls) -> m:
 *   the same sweep over one group, writing the pieces instead of summing them: m disjoint pieces in
 *   time order, each with the class it goes to. Each piece begins at a row's start or end, so there
 *   are at most 2n (the outputs' capacity, checked).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_CLASSES 64

/* Give the stretch [lo, hi) to the classes, in priority order. */
static void attribute(int64_t lo, int64_t hi, const int64_t *cover, int n_classes, int64_t *out) {
    int64_t done = lo;
    for (int c = 0; c < n_classes && done < hi; c++) {
        int64_t h = cover[c] < hi ? cover[c] : hi;
        if (h > done) {
            out[c] += h - done;
            done = h;
        }
    }
}

typedef struct {
    int64_t *start, *end;
    int8_t *cls;
    Py_ssize_t m, capacity;
} Pieces;

/* As attribute, but each class's part of [lo, hi) is written as a piece. */
static int emit(int64_t lo, int64_t hi, const int64_t *cover, int n_classes, Pieces *p) {
    int64_t done = lo;
    for (int c = 0; c < n_classes && done < hi; c++) {
        int64_t h = cover[c] < hi ? cover[c] : hi;
        if (h > done) {
            if (p->m >= p->capacity) return -1;
            p->start[p->m] = done;
            p->end[p->m] = h;
            p->cls[p->m] = (int8_t)c;
            p->m++;
            done = h;
        }
    }
    return 0;
}

static int get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t item, int writable, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) return -1;
    if (view->itemsize != item || view->len % item) {
        PyErr_Format(PyExc_ValueError, "%s: expected items of %zd bytes", what, item);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *exclusive(PyObject *self, PyObject *args) {
    PyObject *o_order, *o_group, *o_start, *o_end, *o_cls, *o_out;
    int n_classes;
    if (!PyArg_ParseTuple(args, "OOOOOiO", &o_order, &o_group, &o_start, &o_end, &o_cls, &n_classes, &o_out))
        return NULL;
    if (n_classes < 1 || n_classes > MAX_CLASSES) {
        PyErr_SetString(PyExc_ValueError, "n_classes out of range");
        return NULL;
    }
    Py_buffer order = {0}, group = {0}, start = {0}, end = {0}, cls = {0}, out = {0};
    PyObject *result = NULL;
    if (get_buffer(o_order, &order, 8, 0, "order") || get_buffer(o_group, &group, 8, 0, "group")
        || get_buffer(o_start, &start, 8, 0, "start") || get_buffer(o_end, &end, 8, 0, "end")
        || get_buffer(o_cls, &cls, 1, 0, "cls") || get_buffer(o_out, &out, 8, 1, "out"))
        goto done;
    Py_ssize_t n = order.len / 8, rows = start.len / 8;
    if (group.len / 8 != rows || end.len / 8 != rows || cls.len != rows) {
        PyErr_SetString(PyExc_ValueError, "group, start, end and cls differ in length");
        goto done;
    }
    const int64_t *ord = order.buf, *grp = group.buf, *s = start.buf, *e = end.buf;
    const int8_t *c = cls.buf;
    int64_t *o = out.buf;
    Py_ssize_t n_groups = out.len / 8 / n_classes;
    int64_t cover[MAX_CLASSES];
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    int64_t current = -1, last_start = 0;
    for (Py_ssize_t i = 0; i < n && !bad; i++) {
        int64_t r = ord[i];
        if (r < 0 || r >= rows) { bad = 1; break; }
        int64_t g = grp[r];
        int k = c[r];
        if (g < 0 || g >= n_groups || k < 0 || k >= n_classes) { bad = 1; break; }
        if (g != current) {
            if (current >= 0) attribute(last_start, INT64_MAX, cover, n_classes, o + current * n_classes);
            for (int j = 0; j < n_classes; j++) cover[j] = INT64_MIN;
            current = g;
        } else {
            attribute(last_start, s[r], cover, n_classes, o + g * n_classes);
        }
        last_start = s[r];
        if (e[r] > cover[k]) cover[k] = e[r];
    }
    if (!bad && current >= 0) attribute(last_start, INT64_MAX, cover, n_classes, o + current * n_classes);
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "row, group or class out of range");
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    if (order.obj) PyBuffer_Release(&order);
    if (group.obj) PyBuffer_Release(&group);
    if (start.obj) PyBuffer_Release(&start);
    if (end.obj) PyBuffer_Release(&end);
    if (cls.obj) PyBuffer_Release(&cls);
    if (out.obj) PyBuffer_Release(&out);
    return result;
}

static PyObject *timeline(PyObject *self, PyObject *args) {
    PyObject *o_order, *o_start, *o_end, *o_cls, *o_ps, *o_pe, *o_pc;
    int n_classes;
    if (!PyArg_ParseTuple(args, "OOOOiOOO", &o_order, &o_start, &o_end, &o_cls, &n_classes, &o_ps, &o_pe, &o_pc))
        return NULL;
    if (n_classes < 1 || n_classes > MAX_CLASSES) {
        PyErr_SetString(PyExc_ValueError, "n_classes out of range");
        return NULL;
    }
    Py_buffer order = {0}, start = {0}, end = {0}, cls = {0}, ps = {0}, pe = {0}, pc = {0};
    PyObject *result = NULL;
    if (get_buffer(o_order, &order, 8, 0, "order") || get_buffer(o_start, &start, 8, 0, "start")
        || get_buffer(o_end, &end, 8, 0, "end") || get_buffer(o_cls, &cls, 1, 0, "cls")
        || get_buffer(o_ps, &ps, 8, 1, "seg_start") || get_buffer(o_pe, &pe, 8, 1, "seg_end")
        || get_buffer(o_pc, &pc, 1, 1, "seg_cls"))
        goto done;
    Py_ssize_t n = order.len / 8, rows = start.len / 8;
    if (end.len / 8 != rows || cls.len != rows || pe.len != ps.len || pc.len != ps.len / 8) {
        PyErr_SetString(PyExc_ValueError, "inputs or outputs differ in length");
        goto done;
    }
    const int64_t *ord = order.buf, *s = start.buf, *e = end.buf;
    const int8_t *c = cls.buf;
    Pieces p = {ps.buf, pe.buf, pc.buf, 0, ps.len / 8};
    int64_t cover[MAX_CLASSES];
    for (int j = 0; j < n_classes; j++) cover[j] = INT64_MIN;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    int64_t last_start = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t r = ord[i];
        if (r < 0 || r >= rows || c[r] < 0 || c[r] >= n_classes) { bad = 1; break; }
        if (i && emit(last_start, s[r], cover, n_classes, &p)) { bad = 2; break; }
        last_start = s[r];
        if (e[r] > cover[c[r]]) cover[c[r]] = e[r];
    }
    if (!bad && n && emit(last_start, INT64_MAX, cover, n_classes, &p)) bad = 2;
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, bad == 1 ? "row or class out of range" : "more pieces than the outputs hold");
        goto done;
    }
    result = PyLong_FromSsize_t(p.m);
done:
    if (order.obj) PyBuffer_Release(&order);
    if (start.obj) PyBuffer_Release(&start);
    if (end.obj) PyBuffer_Release(&end);
    if (cls.obj) PyBuffer_Release(&cls);
    if (ps.obj) PyBuffer_Release(&ps);
    if (pe.obj) PyBuffer_Release(&pe);
    if (pc.obj) PyBuffer_Release(&pc);
    return result;
}

static PyMethodDef methods[] = {
    {"exclusive", exclusive, METH_VARARGS,
     "exclusive(order, group, start, end, cls, n_classes, out) -> None: adds each (group, class)'s exclusive time to out."},
    {"timeline", timeline, METH_VARARGS,
     "timeline(order, start, end, cls, n_classes, seg_start, seg_end, seg_cls) -> m: the pieces each class gets."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_interval_sweep", NULL, -1, methods};

PyMODINIT_FUNC PyInit__interval_sweep(void) { return PyModule_Create(&module); }
