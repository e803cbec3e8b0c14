/*
 * Growable byte buffers (malloc'd, usable without the GIL) and Block, the read-only Python object
 * that hands a finished buffer to numpy/pyarrow without a copy. Shared by the C extensions; each
 * defines BLOCK_TYPE_NAME first and calls PyType_Ready(&BlockType) in its module init.
 */
#ifndef TRACEKIT_BUFFERS_H
#define TRACEKIT_BUFFERS_H

#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---------- growable byte buffer ---------- */
typedef struct { char *data; size_t len, cap; } Buf;

static int buf_grow(Buf *b, size_t extra) {
    size_t cap = b->cap ? b->cap : 4096;
    /* 1.5x growth: doubling left up to half of every column buffer unused at the peak. */
    while (cap < b->len + extra) cap += cap / 2;
    char *d = realloc(b->data, cap);
    if (!d) return -1;  /* may run without the GIL: the caller reports MemoryError */
    b->data = d; b->cap = cap; return 0;
}
/* The fast paths are inline: most puts are a few bytes into a buffer with room. */
static inline int buf_reserve(Buf *b, size_t extra) {
    return b->len + extra <= b->cap ? 0 : buf_grow(b, extra);
}
static inline int buf_put(Buf *b, const void *src, size_t n) {
    if (n == 0) return 0;  /* src may be NULL then, and memcpy(NULL, NULL, 0) is undefined */
    if (buf_reserve(b, n)) return -1;
    memcpy(b->data + b->len, src, n); b->len += n; return 0;
}
static inline int buf_byte(Buf *b, char c) {
    if (buf_reserve(b, 1)) return -1;
    b->data[b->len++] = c; return 0;
}
static inline int buf_i64(Buf *b, int64_t v) { return buf_put(b, &v, 8); }
static inline int buf_i32(Buf *b, int32_t v) { return buf_put(b, &v, 4); }
static void buf_free(Buf *b) { free(b->data); b->data = NULL; b->len = b->cap = 0; }

/*
 * A column buffer handed to Python without a copy: a read-only object with the buffer protocol
 * that owns the malloc'd bytes (numpy.frombuffer and pyarrow.py_buffer keep it alive). Copying
 * each column into a bytes object touched every page twice; on a VM a fresh page costs µs.
 */
typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t len;
} Block;

static int block_getbuffer(PyObject *o, Py_buffer *view, int flags) {
    Block *b = (Block *)o;
    return PyBuffer_FillInfo(view, o, b->data ? b->data : (char *)"", b->len, 1, flags);
}
static void block_dealloc(PyObject *o) {
    free(((Block *)o)->data);
    Py_TYPE(o)->tp_free(o);
}
static Py_ssize_t block_length(PyObject *o) { return ((Block *)o)->len; }
static PyBufferProcs block_as_buffer = {block_getbuffer, NULL};
static PySequenceMethods block_as_sequence = {.sq_length = block_length};
static PyTypeObject BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = BLOCK_TYPE_NAME,
    .tp_doc = "A column buffer (read-only, buffer protocol).",
    .tp_basicsize = sizeof(Block),
    .tp_dealloc = block_dealloc,
    .tp_as_buffer = &block_as_buffer,
    .tp_as_sequence = &block_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
};

static PyObject *bytes_of(Buf *b) {
    Block *o = PyObject_New(Block, &BlockType);
    if (!o) { buf_free(b); return NULL; }
    char *d = b->data;
    if (d && b->len < b->cap) {  /* give back the growth slack; shrinking does not move big blocks */
        char *shrunk = realloc(d, b->len ? b->len : 1);
        if (shrunk) d = shrunk;
    }
    o->data = d; o->len = (Py_ssize_t)b->len;
    b->data = NULL; b->len = b->cap = 0;
    return (PyObject *)o;
}
#endif
