/*
 * JSON values written as Python's json.dumps(value, ensure_ascii=True) writes them, into a Buf:
 * integers, floats (float.__repr__, NaN, Infinity) and strings (ASCII escapes, surrogate pairs).
 * A writer may run without the GIL (Walk.released set): where it needs Python (decoding non-ASCII
 * text, formatting a float) it takes the GIL for that call and gives it back.
 */
#ifndef TRACEKIT_JSON_TEXT_H
#define TRACEKIT_JSON_TEXT_H

#include <Python.h>
#include <math.h>
#include "buffers.h"

/* ---------- the walk's state: the GIL is released while no Python object is touched ---------- */
typedef struct {
    PyThreadState *released;  /* set while the GIL is released */
    int may_release;          /* 0 when rows produce Python objects (object columns) */
} Walk;

/* 1 when this call took the GIL (the caller gives it back with gil_drop), 0 when it was held. */
static inline int gil_hold(Walk *w) {
    if (!w->released) return 0;
    PyEval_RestoreThread(w->released);
    w->released = NULL;
    return 1;
}
static inline void gil_drop(Walk *w) {
    if (w->may_release && !w->released) w->released = PyEval_SaveThread();
}

/* ---------- JSON values, as json.dumps(value, ensure_ascii=True) writes them ---------- */
static const char HEX[] = "0123456789abcdef";

static int write_escaped_codepoint(Buf *o, Py_UCS4 c) {
    char tmp[12];
    size_t n = 0;
    switch (c) {
        case '"': tmp[n++] = '\\'; tmp[n++] = '"'; break;
        case '\\': tmp[n++] = '\\'; tmp[n++] = '\\'; break;
        case '\n': tmp[n++] = '\\'; tmp[n++] = 'n'; break;
        case '\r': tmp[n++] = '\\'; tmp[n++] = 'r'; break;
        case '\t': tmp[n++] = '\\'; tmp[n++] = 't'; break;
        case '\b': tmp[n++] = '\\'; tmp[n++] = 'b'; break;
        case '\f': tmp[n++] = '\\'; tmp[n++] = 'f'; break;
        default:
            if (c >= 0x20 && c <= 0x7e) { tmp[n++] = (char)c; break; }
            if (c >= 0x10000) {  /* a surrogate pair, as Python writes it */
                Py_UCS4 v = c - 0x10000;
                Py_UCS4 hi = 0xd800 | ((v >> 10) & 0x3ff), lo = 0xdc00 | (v & 0x3ff);
                tmp[n++] = '\\'; tmp[n++] = 'u';
                for (int s = 12; s >= 0; s -= 4) tmp[n++] = HEX[(hi >> s) & 0xf];
                c = lo;
            }
            tmp[n++] = '\\'; tmp[n++] = 'u';
            for (int s = 12; s >= 0; s -= 4) tmp[n++] = HEX[(c >> s) & 0xf];
    }
    return buf_put(o, tmp, n);
}

/* A JSON string of UTF-8 text; invalid UTF-8 is decoded with errors="replace", as the reader's
   text_factory does (that path takes the GIL: Python's decoder is the reference). */
static int write_json_text(Walk *w, Buf *o, const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n && s[i] < 0x80) i++;
    if (buf_byte(o, '"')) return -1;
    if (i == n) {  /* ASCII: escape only what needs it */
        size_t run = 0;
        for (size_t k = 0; k < n; k++) {
            unsigned char c = s[k];
            if (c >= 0x20 && c <= 0x7e && c != '"' && c != '\\') continue;
            if (buf_put(o, s + run, k - run) || write_escaped_codepoint(o, c)) return -1;
            run = k + 1;
        }
        if (buf_put(o, s + run, n - run)) return -1;
    } else {
        int taken = gil_hold(w);
        PyObject *u = PyUnicode_DecodeUTF8((const char *)s, (Py_ssize_t)n, "replace");
        if (!u) return -1;
        int kind = PyUnicode_KIND(u);
        const void *data = PyUnicode_DATA(u);
        Py_ssize_t len = PyUnicode_GET_LENGTH(u);
        for (Py_ssize_t k = 0; k < len; k++) {
            if (write_escaped_codepoint(o, PyUnicode_READ(kind, data, k))) { Py_DECREF(u); return -1; }
        }
        Py_DECREF(u);
        if (taken) gil_drop(w);
    }
    return buf_byte(o, '"');
}

static int write_json_float(Walk *w, Buf *o, double v) {
    if (isnan(v)) return buf_put(o, "NaN", 3);
    if (isinf(v)) return v > 0 ? buf_put(o, "Infinity", 8) : buf_put(o, "-Infinity", 9);
    int taken = gil_hold(w);  /* PyOS_double_to_string allocates with PyMem */
    char *text = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);  /* float.__repr__ */
    if (!text) return -1;
    int rc = buf_put(o, text, strlen(text));
    PyMem_Free(text);
    if (taken) gil_drop(w);
    return rc;
}

static int write_json_int(Buf *o, long long v) {
    char tmp[24];
    char *end = tmp + sizeof tmp, *p = end;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do { *--p = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) *--p = '-';
    return buf_put(o, p, (size_t)(end - p));
}

#endif
