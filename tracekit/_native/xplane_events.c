/*
 * The events of one XSpace line (tracekit/ingest/xplane.py) as columns.
 *
 * protobuf parses an .xplane.pb in C, but reading every event through Python message objects was
 * 5-20 µs per event. Python keeps planes, lines and metadata (a few thousand objects); this walks a
 * line's serialized bytes and writes, per event:
 *   start_ns, dur_ns, metadata_id, mode (how the row's facts are found, below), flags (stat names
 *   present that decide a host event's kind), correlation_id, step_num, kernel_details (an index
 *   into the distinct texts), bytes_allocated, and the args JSON, written exactly as the Python
 *   reader's json.JSONEncoder(separators=(",", ":"), default=str) writes the merged stats dict.
 * Modes: 0 = no stats of its own and no repeat count: its metadata's facts (Python reads them once
 * per metadata id); 1 = read here; 2 = anything unusual (metadata with stats of its own, a stat id
 * missing from the plane's metadata, values beyond int64): Python reads that event as before.
 *
 * Wire format (proto3; fields not listed are skipped):
 *   XLine  { 4: repeated XEvent events }
 *   XEvent { 1: metadata_id; 2: offset_ps | 5: num_occurrences; 3: duration_ps; 4: repeated XStat }
 *   XStat  { 1: metadata_id; 2: double | 3: uint64 | 4: int64 | 5: str | 6: bytes | 7: ref_value }
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define BLOCK_TYPE_NAME "tracekit._native._xplane_events.Block"
#include "buffers.h"
#include "json_text.h"

/* ---------- protobuf wire format ---------- */
static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*p >= end) return -1;
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << (shift < 64 ? shift : 63);
        if (!(b & 0x80)) { *out = v; return 0; }
    }
    return -1;
}

/* Skip a field's value; -1 on a malformed field (groups included: not in this schema). */
static int skip_value(const uint8_t **p, const uint8_t *end, int wire) {
    uint64_t n;
    switch (wire) {
        case 0: return read_varint(p, end, &n);
        case 1: if (end - *p < 8) return -1; *p += 8; return 0;
        case 2:
            if (read_varint(p, end, &n) || n > (uint64_t)(end - *p)) return -1;
            *p += n;
            return 0;
        case 5: if (end - *p < 4) return -1; *p += 4; return 0;
        default: return -1;
    }
}

static int read_bytes(const uint8_t **p, const uint8_t *end, const uint8_t **data, size_t *len) {
    uint64_t n;
    if (read_varint(p, end, &n) || n > (uint64_t)(end - *p)) return -1;
    *data = *p; *len = (size_t)n; *p += n;
    return 0;
}

/* ---------- one stat ---------- */
enum { V_NONE, V_DOUBLE, V_UINT, V_INT, V_STR, V_BYTES, V_REF };
typedef struct {
    int64_t metadata_id;
    int type;
    double d;
    uint64_t u;      /* uint64 and ref values */
    int64_t i;
    const uint8_t *data;
    size_t len;
} Stat;

static int parse_stat(const uint8_t *p, const uint8_t *end, Stat *s) {
    memset(s, 0, sizeof *s);
    while (p < end) {
        uint64_t tag, v;
        if (read_varint(&p, end, &tag)) return -1;
        int field = (int)(tag >> 3), wire = (int)(tag & 7);
        if (field == 1 && wire == 0) { if (read_varint(&p, end, &v)) return -1; s->metadata_id = (int64_t)v; }
        else if (field == 2 && wire == 1) {
            if (end - p < 8) return -1;
            memcpy(&s->d, p, 8); p += 8; s->type = V_DOUBLE;  /* little-endian, as protobuf writes it */
        }
        else if (field == 3 && wire == 0) { if (read_varint(&p, end, &s->u)) return -1; s->type = V_UINT; }
        else if (field == 4 && wire == 0) { if (read_varint(&p, end, &v)) return -1; s->i = (int64_t)v; s->type = V_INT; }
        else if ((field == 5 || field == 6) && wire == 2) {
            if (read_bytes(&p, end, &s->data, &s->len)) return -1;
            s->type = field == 5 ? V_STR : V_BYTES;
        }
        else if (field == 7 && wire == 0) { if (read_varint(&p, end, &s->u)) return -1; s->type = V_REF; }
        else if (skip_value(&p, end, wire)) return -1;
    }
    return 0;
}

/* ---------- the plane's stat names ---------- */
typedef struct {
    const int64_t *ids;        /* stat metadata ids (the map's keys), sorted */
    const int32_t *name_of;    /* per id: index of its distinct name */
    Py_ssize_t count;
    PyObject *names;           /* tuple of bytes: each distinct name as a JSON string */
    PyObject *raw_names;       /* tuple of bytes: each distinct name as UTF-8 */
    int corr, step, hlo, kernel, nbytes, occurrences;  /* indices of the names that matter, -1 when absent */
} StatNames;

static int stat_name(const StatNames *t, int64_t id) {
    Py_ssize_t lo = 0, hi = t->count;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (t->ids[mid] < id) lo = mid + 1; else hi = mid;
    }
    return lo < t->count && t->ids[lo] == id ? t->name_of[lo] : -1;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int write_base64(Buf *o, const uint8_t *d, size_t n) {
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
        char q[4] = {B64[v >> 18 & 63], B64[v >> 12 & 63], i + 1 < n ? B64[v >> 6 & 63] : '=', i + 2 < n ? B64[v & 63] : '='};
        if (buf_put(o, q, 4)) return -1;
    }
    return 0;
}

static int write_unsigned(Buf *o, uint64_t u) {
    char tmp[24];
    char *end = tmp + sizeof tmp, *p = end;
    do { *--p = (char)('0' + u % 10); u /= 10; } while (u);
    return buf_put(o, p, (size_t)(end - p));
}

/* A stat's value as the Python reader's _stat_value returns it, JSON-encoded. */
static int write_stat_value(Walk *w, Buf *o, const Stat *s, const StatNames *t) {
    switch (s->type) {
        case V_DOUBLE: return write_json_float(w, o, s->d);
        case V_UINT: return write_unsigned(o, s->u);
        case V_INT: return write_json_int(o, s->i);
        case V_STR: return write_json_text(w, o, s->data, s->len);
        case V_BYTES: {  /* {"bytes_b64": base64 of the first 4096 bytes, "size": length} */
            size_t shown = s->len < 4096 ? s->len : 4096;
            return buf_put(o, "{\"bytes_b64\":\"", 14) || write_base64(o, s->data, shown) ||
                   buf_put(o, "\",\"size\":", 9) || write_unsigned(o, s->len) || buf_byte(o, '}');
        }
        case V_REF: {  /* the referenced stat's name, "" when unknown */
            int name = s->u <= INT64_MAX ? stat_name(t, (int64_t)s->u) : -1;
            if (name < 0) return buf_put(o, "\"\"", 2);
            PyObject *text = PyTuple_GET_ITEM(t->names, name);
            return buf_put(o, PyBytes_AS_STRING(text), (size_t)PyBytes_GET_SIZE(text));
        }
        default: return buf_put(o, "null", 4);
    }
}

/* ---------- one event ---------- */
#define MAX_STATS 256
typedef struct { int name; size_t off, len; } Entry;  /* a merged stat: name index, value text in scratch */

typedef struct {
    Buf start, dur, mid, mode, flags, corr, step, kernel, nbytes;
    Buf offsets, data, valid;
    Buf scratch;
    Entry entries[MAX_STATS];
    PyObject *kernel_index;  /* dict: kernel_details bytes -> index */
    PyObject *kernel_texts;  /* list of str */
} Out;

static int64_t floor_div_1000(int64_t v) {
    int64_t q = v / 1000;
    return (v % 1000 != 0 && v < 0) ? q - 1 : q;
}

/* Mode 1 facts and args of an event with stats of its own and no metadata stats; returns the mode
   (1, or 2 where the event needs the Python reader) or -1 on error. */
static int read_stats(Walk *w, Out *o, const uint8_t **stats, const size_t *lens, int n, const StatNames *t,
                      int occurrences_set, int64_t occurrences, int64_t *corr, int64_t *step, int32_t *kernel,
                      int64_t *nbytes, uint8_t *flags) {
    int count = 0;
    const uint8_t *kd = NULL;
    size_t kd_len = 0;
    o->scratch.len = 0;
    for (int k = 0; k < n; k++) {
        Stat s;
        if (parse_stat(stats[k], stats[k] + lens[k], &s)) return 2;
        int name = stat_name(t, s.metadata_id);
        if (name < 0 || name == t->occurrences) return 2;  /* an id the plane does not name: the key is its number */
        int is_int = s.type == V_INT || (s.type == V_UINT && s.u <= INT64_MAX);
        int64_t as_int = s.type == V_INT ? s.i : (int64_t)s.u;
        if (name == t->corr) {
            *flags |= 1;
            if (s.type == V_UINT && !is_int) return 2;
            *corr = is_int ? as_int : -1;
            continue;  /* popped from the args */
        }
        if (name == t->step) {
            *flags |= 2;
            if (s.type == V_UINT && !is_int) return 2;
            *step = is_int ? as_int : -1;
        }
        if (name == t->hlo) *flags |= 4;
        if (name == t->kernel) {
            kd = s.type == V_STR ? s.data : NULL;
            kd_len = s.len;
            if (s.type == V_REF) {  /* TF's GPU events name another stat: its name is the text ("" unknown) */
                int ref = s.u <= INT64_MAX ? stat_name(t, (int64_t)s.u) : -1;
                PyObject *raw = ref >= 0 ? PyTuple_GET_ITEM(t->raw_names, ref) : NULL;
                kd = raw ? (const uint8_t *)PyBytes_AS_STRING(raw) : (const uint8_t *)"";
                kd_len = raw ? (size_t)PyBytes_GET_SIZE(raw) : 0;
            }
        }
        if (name == t->nbytes) *nbytes = is_int && as_int >= 0 ? as_int : -1;
        size_t off = o->scratch.len;
        if (write_stat_value(w, &o->scratch, &s, t)) return -1;
        int at = 0;
        while (at < count && o->entries[at].name != name) at++;
        if (at == count) {
            if (count == MAX_STATS) return 2;
            o->entries[count++].name = name;
        }
        o->entries[at].off = off;
        o->entries[at].len = o->scratch.len - off;
    }
    if (kd) {
        PyObject *key = PyBytes_FromStringAndSize((const char *)kd, (Py_ssize_t)kd_len);
        if (!key) return -1;
        PyObject *found = PyDict_GetItemWithError(o->kernel_index, key);
        if (found) {
            *kernel = (int32_t)PyLong_AsLong(found);
        } else if (!PyErr_Occurred()) {
            PyObject *text = PyUnicode_DecodeUTF8((const char *)kd, (Py_ssize_t)kd_len, "strict");
            PyObject *index = text ? PyLong_FromSsize_t(PyList_GET_SIZE(o->kernel_texts)) : NULL;
            int failed = !index || PyList_Append(o->kernel_texts, text) || PyDict_SetItem(o->kernel_index, key, index);
            Py_XDECREF(text);
            Py_XDECREF(index);
            if (failed) {
                Py_DECREF(key);
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return -1;
                PyErr_Clear();
                return 2;
            }
            *kernel = (int32_t)(PyList_GET_SIZE(o->kernel_texts) - 1);
        }
        Py_DECREF(key);
        if (PyErr_Occurred()) return -1;
    }
    /* The args: the merged stats in first-seen order, then the repeat count. */
    if (count == 0 && !occurrences_set) return 1;
    for (int k = 0; k < count; k++) {
        PyObject *key = PyTuple_GET_ITEM(t->names, o->entries[k].name);
        if (buf_byte(&o->data, k ? ',' : '{') || buf_put(&o->data, PyBytes_AS_STRING(key), (size_t)PyBytes_GET_SIZE(key)) ||
            buf_byte(&o->data, ':') || buf_put(&o->data, o->scratch.data + o->entries[k].off, o->entries[k].len))
            return -1;
    }
    if (occurrences_set) {
        if (buf_put(&o->data, count ? ",\"@num_occurrences\":" : "{\"@num_occurrences\":", count ? 20 : 20) ||
            write_json_int(&o->data, occurrences))
            return -1;
    }
    return buf_byte(&o->data, '}') ? -1 : 1;
}

static int sorted_contains(const int64_t *ids, Py_ssize_t n, int64_t id) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (ids[mid] < id) lo = mid + 1; else hi = mid;
    }
    return lo < n && ids[lo] == id;
}

static int read_event(Walk *w, Out *o, const uint8_t *p, const uint8_t *end, int64_t base_ns, const StatNames *t,
                      const int64_t *meta_with_stats, Py_ssize_t n_meta_with_stats, Py_ssize_t row) {
    int64_t mid = 0, offset = 0, occurrences = 0, duration = 0;
    int which = 0;  /* the data oneof: 1 offset_ps, 2 num_occurrences; the last one written wins */
    const uint8_t *stats[MAX_STATS];
    size_t lens[MAX_STATS];
    int n_stats = 0, too_many = 0;
    while (p < end) {
        uint64_t tag, v;
        if (read_varint(&p, end, &tag)) return -2;
        int field = (int)(tag >> 3), wire = (int)(tag & 7);
        if (wire == 0 && (field == 1 || field == 2 || field == 3 || field == 5)) {
            if (read_varint(&p, end, &v)) return -2;
            if (field == 1) mid = (int64_t)v;
            else if (field == 2) { offset = (int64_t)v; occurrences = 0; which = 1; }
            else if (field == 5) { occurrences = (int64_t)v; offset = 0; which = 2; }
            else duration = (int64_t)v;
        } else if (field == 4 && wire == 2) {
            const uint8_t *d;
            size_t len;
            if (read_bytes(&p, end, &d, &len)) return -2;
            if (n_stats == MAX_STATS) too_many = 1;
            else { stats[n_stats] = d; lens[n_stats] = len; n_stats++; }
        } else if (skip_value(&p, end, wire)) {
            return -2;
        }
    }
    int64_t start;
    int mode = 0;
    if (__builtin_add_overflow(base_ns, floor_div_1000(offset), &start)) { start = 0; mode = 2; }
    int64_t corr = -1, step = -1, nbytes = -1;
    int32_t kernel = -1;
    uint8_t flags = 0;
    size_t data_before = o->data.len;
    if (mode == 0 && (n_stats || which == 2)) {
        if (too_many || sorted_contains(meta_with_stats, n_meta_with_stats, mid)) mode = 2;
        else {
            mode = read_stats(w, o, stats, lens, n_stats, t, which == 2, occurrences, &corr, &step, &kernel, &nbytes, &flags);
            if (mode < 0) return -1;
        }
    }
    if (mode == 2) { o->data.len = data_before; corr = step = nbytes = -1; kernel = -1; flags = 0; }
    int has_args = o->data.len > data_before;
    if (buf_i64(&o->start, start) || buf_i64(&o->dur, floor_div_1000(duration)) || buf_i64(&o->mid, mid) ||
        buf_byte(&o->mode, (char)mode) || buf_byte(&o->flags, (char)flags) || buf_i64(&o->corr, corr) ||
        buf_i64(&o->step, step) || buf_i32(&o->kernel, kernel) || buf_i64(&o->nbytes, nbytes) ||
        buf_i64(&o->offsets, (int64_t)o->data.len))
        return -1;
    if (row % 8 == 0 && buf_byte(&o->valid, 0)) return -1;
    if (has_args) o->valid.data[row / 8] |= (char)(1 << (row % 8));
    return 0;
}

static void out_free(Out *o) {
    Buf *all[] = {&o->start, &o->dur, &o->mid, &o->mode, &o->flags, &o->corr, &o->step, &o->kernel, &o->nbytes,
                  &o->offsets, &o->data, &o->valid, &o->scratch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) buf_free(all[i]);
    Py_XDECREF(o->kernel_index);
    Py_XDECREF(o->kernel_texts);
}

/*
 * walk_line(line, base_ns, stat_ids, stat_name_of, names, raw_names, specials, meta_with_stats)
 *   line: a serialized XLine; base_ns: the line's start (ns); stat_ids: the plane's stat metadata
 *   ids, sorted, as int64 bytes; stat_name_of: per id, the index of its name (int32 bytes); names:
 *   tuple of each distinct name as JSON text (bytes); raw_names: the same as UTF-8; specials: indices of the names correlation_id,
 *   step_num, hlo_op, kernel_details, bytes_allocated, @num_occurrences (-1: absent);
 *   meta_with_stats: event metadata ids whose metadata has stats, sorted int64 bytes.
 * Returns (start, dur, metadata_id, mode, flags, correlation, step, kernel, bytes, (validity,
 * offsets, data), kernel_texts, rows); raises ValueError on malformed bytes.
 */
static PyObject *walk_line(PyObject *self, PyObject *args) {
    Py_buffer line, ids, name_of, meta;
    long long base_ns;
    PyObject *names, *raw_names, *specials;
    if (!PyArg_ParseTuple(args, "y*Ly*y*O!O!O!y*", &line, &base_ns, &ids, &name_of, &PyTuple_Type, &names,
                          &PyTuple_Type, &raw_names, &PyTuple_Type, &specials, &meta))
        return NULL;
    PyObject *result = NULL;
    Out o;
    memset(&o, 0, sizeof o);
    Walk w = {NULL, 0};
    StatNames t = {ids.buf, name_of.buf, ids.len / 8, names, raw_names, -1, -1, -1, -1, -1, -1};
    if (name_of.len / 4 != t.count || PyTuple_GET_SIZE(specials) != 6 || PyTuple_GET_SIZE(raw_names) != PyTuple_GET_SIZE(names)) {
        PyErr_SetString(PyExc_ValueError, "stat tables differ in length");
        goto done;
    }
    int *special[] = {&t.corr, &t.step, &t.hlo, &t.kernel, &t.nbytes, &t.occurrences};
    for (int k = 0; k < 6; k++) {
        *special[k] = (int)PyLong_AsLong(PyTuple_GET_ITEM(specials, k));
        if (PyErr_Occurred()) goto done;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(names); k++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(names, k)) || !PyBytes_Check(PyTuple_GET_ITEM(raw_names, k))) {
            PyErr_SetString(PyExc_TypeError, "names: bytes");
            goto done;
        }
    }
    for (Py_ssize_t k = 0; k < t.count; k++) {
        if (t.name_of[k] < 0 || t.name_of[k] >= PyTuple_GET_SIZE(names)) {
            PyErr_SetString(PyExc_ValueError, "stat name index out of range");
            goto done;
        }
    }
    o.kernel_index = PyDict_New();
    o.kernel_texts = PyList_New(0);
    if (!o.kernel_index || !o.kernel_texts || buf_i64(&o.offsets, 0)) goto nomem;
    const uint8_t *p = line.buf, *end = p + line.len;
    Py_ssize_t row = 0;
    while (p < end) {
        uint64_t tag;
        if (read_varint(&p, end, &tag)) goto malformed;
        if ((tag >> 3) == 4 && (tag & 7) == 2) {
            const uint8_t *ev;
            size_t len;
            if (read_bytes(&p, end, &ev, &len)) goto malformed;
            int rc = read_event(&w, &o, ev, ev + len, base_ns, &t, meta.buf, meta.len / 8, row);
            if (rc == -2) goto malformed;
            if (rc < 0) { if (!PyErr_Occurred()) goto nomem; goto done; }
            row++;
        } else if (skip_value(&p, end, (int)(tag & 7))) {
            goto malformed;
        }
    }
    PyObject *valid = bytes_of(&o.valid), *offsets = valid ? bytes_of(&o.offsets) : NULL,
             *data = offsets ? bytes_of(&o.data) : NULL;
    if (!data) { Py_XDECREF(valid); Py_XDECREF(offsets); goto done; }
    result = Py_BuildValue("(NNNNNNNNN(NNN)On)", bytes_of(&o.start), bytes_of(&o.dur), bytes_of(&o.mid),
                           bytes_of(&o.mode), bytes_of(&o.flags), bytes_of(&o.corr), bytes_of(&o.step),
                           bytes_of(&o.kernel), bytes_of(&o.nbytes), valid, offsets, data, o.kernel_texts, row);
    goto done;
malformed:
    PyErr_SetString(PyExc_ValueError, "malformed XLine bytes");
    goto done;
nomem:
    if (!PyErr_Occurred()) PyErr_NoMemory();
done:
    out_free(&o);
    PyBuffer_Release(&line);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&name_of);
    PyBuffer_Release(&meta);
    return result;
}

static PyMethodDef methods[] = {
    {"walk_line", walk_line, METH_VARARGS, "walk_line(line, base_ns, stat_ids, stat_name_of, names, raw_names, specials, "
                                           "meta_with_stats) -> columns of the line's events."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_xplane_events", NULL, -1, methods};

PyMODINIT_FUNC PyInit__xplane_events(void) {
    if (PyType_Ready(&BlockType) < 0) return NULL;
    return PyModule_Create(&module);
}
