/*
 * kineto_scan: one pass over a Chrome-trace JSON document (torch.profiler / Kineto) that fills
 * column buffers directly, without building a Python object per event.
 *
 * Why C: the ingest target is "faster than orjson.loads of the same file, peak RSS under twice
 * the file size"; any parser that materialises a dict per event misses both.
 *
 * What it returns (see tracekit/ingest/kineto.py for the Python side):
 *   - one row per element of "traceEvents" (or of a top-level array), in file order;
 *   - ph (uint8), interned codes for cat / name / pid / tid (int32) plus their value lists;
 *   - ts / dur as int64 nanoseconds parsed from the decimal text exactly (µs * 1000);
 *   - promoted integer args (External id, correlation, stream, device, grid, block, ...);
 *   - everything else as a minified JSON object per row (args minus promoted keys, plus
 *     unknown top-level keys as "@key");
 *   - the byte spans of the other top-level keys (deviceProperties, baseTimeNanoseconds, ...).
 * Missing values use INT64_MIN / INT32_MIN sentinels.
 *
 * Invalid input raises ValueError("<problem> at byte N"). Nothing here trusts the input:
 * nesting depth is bounded and every read is bounds-checked.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <pthread.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <unistd.h>

#define MISSING64 INT64_MIN
#define MISSING32 INT32_MIN
#define MAX_DEPTH 256

#define BLOCK_TYPE_NAME "tracekit._native._kineto_scan.Block"
#include "buffers.h"

/* ---------- string interning (open addressing, a word-at-a-time multiplicative hash) ---------- */
typedef struct {
    Buf pool;            /* concatenated values */
    Buf offsets;         /* int64 start of each value in pool; n+1 entries once finished */
    int32_t *slots;      /* code + 1, 0 = empty */
    uint64_t *hashes;
    size_t nslots, count;
} Interner;

/* Eight bytes per step: kernel names run to hundreds of bytes, and a byte-wise hash was a tenth
 * of the scan. Only equality matters here (collisions are compared byte by byte). */
static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w; memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL; h ^= h >> 32;
    }
    if (i < n) {
        uint64_t w = 0; memcpy(&w, s + i, n - i);
        h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL; h ^= h >> 29;
    }
    h *= 0xFF51AFD7ED558CCDULL; h ^= h >> 33;
    return h;
}
static int64_t *intern_offsets(Interner *t) { return (int64_t *)t->offsets.data; }

static int interner_grow(Interner *t) {
    size_t n = t->nslots ? t->nslots * 2 : 1024;
    int32_t *slots = calloc(n, sizeof(int32_t));
    uint64_t *hashes = calloc(n, sizeof(uint64_t));
    if (!slots || !hashes) { free(slots); free(hashes); return -1; }
    for (size_t i = 0; i < t->nslots; i++) {
        if (!t->slots[i]) continue;
        size_t j = t->hashes[i] & (n - 1);
        while (slots[j]) j = (j + 1) & (n - 1);
        slots[j] = t->slots[i]; hashes[j] = t->hashes[i];
    }
    free(t->slots); free(t->hashes);
    t->slots = slots; t->hashes = hashes; t->nslots = n;
    return 0;
}

static int32_t intern(Interner *t, const char *s, size_t n) {
    if (t->count * 2 >= t->nslots && interner_grow(t)) return -1;
    uint64_t h = hash_bytes(s, n);
    size_t j = h & (t->nslots - 1);
    int64_t *off = intern_offsets(t);
    while (t->slots[j]) {
        int32_t code = t->slots[j] - 1;
        if (t->hashes[j] == h) {
            int64_t a = off[code];
            int64_t b = (size_t)code + 1 < t->count ? off[code + 1] : (int64_t)t->pool.len;
            if ((size_t)(b - a) == n && memcmp(t->pool.data + a, s, n) == 0) return code;
        }
        j = (j + 1) & (t->nslots - 1);
    }
    int32_t code = (int32_t)t->count;
    if (buf_i64(&t->offsets, (int64_t)t->pool.len) || buf_put(&t->pool, s, n)) return -1;
    t->slots[j] = code + 1; t->hashes[j] = h; t->count++;
    return code;
}
static void interner_free(Interner *t) {
    buf_free(&t->pool); buf_free(&t->offsets); free(t->slots); free(t->hashes);
    memset(t, 0, sizeof(*t));
}

/* ---------- parser state ---------- */
typedef struct {
    const char *base, *p, *end;
    const char *err;      /* static message */
    const char *err_at;
    Buf scratch;          /* decoded string */
    Buf argkey, argsbuf;  /* an args key, an event's kept args: reused, not allocated per event */
    int release;          /* madvise(DONTNEED) pages already parsed (read-only file mappings) */
    size_t released;
} P;

static void p_free(P *s) { buf_free(&s->scratch); buf_free(&s->argkey); buf_free(&s->argsbuf); }

static int fail(P *s, const char *msg, const char *at) {
    if (!s->err) { s->err = msg; s->err_at = at; }
    return -1;
}
static int at_end(P *s) { return s->p >= s->end; }
static void skip_ws(P *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t')) s->p++;
}
static int expect(P *s, char c) {
    skip_ws(s);
    if (at_end(s)) return fail(s, "unexpected end of file (truncated JSON)", s->p);
    if (*s->p != c) return fail(s, c == ':' ? "expected ':'" : c == ',' ? "expected ','" : "unexpected character", s->p);
    s->p++; return 0;
}

/* Drop the mapped file pages already parsed, every 4 MiB (and all of them when `all`): with
 * several threads each holds its own unreleased stretch, so the stretch is kept short. */
static void release_parsed(P *s, int all) {
    if (!s->release) return;
    size_t done = (size_t)(s->p - s->base);
    const size_t chunk = 4u << 20;
    if (!all && done - s->released < chunk) return;
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t from = ((uintptr_t)s->base + s->released + page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t to = ((uintptr_t)s->base + done) & ~(uintptr_t)(page - 1);
    if (to > from) madvise((void *)from, to - from, MADV_DONTNEED);
    s->released = done;
}

/* Validate one UTF-8 sequence starting at q (q < end); returns its length or 0 if invalid. */
static int utf8_len(const unsigned char *q, const unsigned char *end) {
    unsigned c = q[0];
    if (c < 0x80) return 1;
    int n; unsigned min;
    if ((c & 0xE0) == 0xC0) { n = 2; min = 0x80; c &= 0x1F; }
    else if ((c & 0xF0) == 0xE0) { n = 3; min = 0x800; c &= 0x0F; }
    else if ((c & 0xF8) == 0xF0) { n = 4; min = 0x10000; c &= 0x07; }
    else return 0;
    if (q + n > end) return 0;
    for (int i = 1; i < n; i++) {
        if ((q[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (q[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    return n;
}
static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}
static int put_utf8(Buf *b, unsigned cp) {
    char t[4]; int n;
    if (cp < 0x80) { t[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { t[0] = (char)(0xC0 | (cp >> 6)); t[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) { t[0] = (char)(0xE0 | (cp >> 12)); t[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); t[2] = (char)(0x80 | (cp & 0x3F)); n = 3; }
    else { t[0] = (char)(0xF0 | (cp >> 18)); t[1] = (char)(0x80 | ((cp >> 12) & 0x3F)); t[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); t[3] = (char)(0x80 | (cp & 0x3F)); n = 4; }
    return buf_put(b, t, n);
}
static int read_u4(P *s, const char *q, unsigned *out) {
    if (s->end - q < 4) return fail(s, "unexpected end of file (truncated JSON)", q);
    unsigned v = 0;
    for (int i = 0; i < 4; i++) { int h = hexval(q[i]); if (h < 0) return fail(s, "invalid \\u escape", q); v = v * 16 + (unsigned)h; }
    *out = v; return 0;
}

/*
 * Parse a string at s->p (which must be '"'). Raw bytes (escapes kept) are appended to `raw`
 * when not NULL; the decoded text goes to `dec` when not NULL.
 */
static int parse_string(P *s, Buf *raw, Buf *dec) {
    const char *start = s->p;
    if (at_end(s) || *s->p != '"') return fail(s, "expected a string", s->p);
    s->p++;
    const char *run = s->p;  /* start of a run of plain bytes not yet copied to dec */
    for (;;) {
        if (at_end(s)) return fail(s, "unexpected end of file inside a string (truncated JSON)", start);
        unsigned char c = (unsigned char)*s->p;
        if (c == '"') break;
        if (c < 0x20) return fail(s, "control character inside a string", s->p);
        if (c == '\\') {
            if (dec && buf_put(dec, run, (size_t)(s->p - run))) return -1;
            if (s->end - s->p < 2) return fail(s, "unexpected end of file inside a string (truncated JSON)", start);
            char e = s->p[1];
            unsigned cp;
            switch (e) {
            case '"': case '\\': case '/': cp = (unsigned char)e; s->p += 2; break;
            case 'b': cp = '\b'; s->p += 2; break;
            case 'f': cp = '\f'; s->p += 2; break;
            case 'n': cp = '\n'; s->p += 2; break;
            case 'r': cp = '\r'; s->p += 2; break;
            case 't': cp = '\t'; s->p += 2; break;
            case 'u': {
                if (read_u4(s, s->p + 2, &cp)) return -1;
                s->p += 6;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned lo;
                    if (s->end - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u') return fail(s, "unpaired surrogate in \\u escape", s->p);
                    if (read_u4(s, s->p + 2, &lo)) return -1;
                    if (lo < 0xDC00 || lo > 0xDFFF) return fail(s, "unpaired surrogate in \\u escape", s->p);
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    s->p += 6;
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return fail(s, "unpaired surrogate in \\u escape", s->p);
                }
                break;
            }
            default: return fail(s, "invalid escape in a string", s->p);
            }
            if (dec && put_utf8(dec, cp)) return -1;
            run = s->p;
            continue;
        }
        if (c < 0x80) {
            s->p++;
#ifdef __SSE2__
            /* Skip 16 bytes at a time while none is a quote, a backslash, a control or non-ASCII byte. */
            while (s->end - s->p >= 16) {
                __m128i v = _mm_loadu_si128((const __m128i *)s->p);
                __m128i bad = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                                           _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));  /* signed: bytes >= 0x80 count too */
                int mask = _mm_movemask_epi8(bad);
                if (mask) { s->p += __builtin_ctz((unsigned)mask); break; }
                s->p += 16;
            }
#endif
            continue;
        }
        int n = utf8_len((const unsigned char *)s->p, (const unsigned char *)s->end);
        if (!n) return fail(s, "invalid UTF-8 inside a string", s->p);
        s->p += n;
    }
    if (dec && buf_put(dec, run, (size_t)(s->p - run))) return -1;
    s->p++;  /* closing quote */
    if (raw && buf_put(raw, start, (size_t)(s->p - start))) return -1;
    return 0;
}

/* Scan a JSON number; returns its span. */
static int scan_number(P *s, const char **a, const char **b) {
    const char *q = s->p;
    *a = q;
    if (q < s->end && *q == '-') q++;
    if (q >= s->end) return fail(s, "unexpected end of file (truncated JSON)", *a);
    if (*q == '0') q++;
    else if (*q >= '1' && *q <= '9') { while (q < s->end && *q >= '0' && *q <= '9') q++; }
    else return fail(s, "invalid number", *a);
    if (q < s->end && *q == '.') {
        q++;
        if (q >= s->end || *q < '0' || *q > '9') return fail(s, "invalid number", *a);
        while (q < s->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < s->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < s->end && (*q == '+' || *q == '-')) q++;
        if (q >= s->end || *q < '0' || *q > '9') return fail(s, "invalid number", *a);
        while (q < s->end && *q >= '0' && *q <= '9') q++;
    }
    *b = q; s->p = q; return 0;
}

/*
 * Exact decimal -> integer scaled by 10^scale (scale 3: µs -> ns). Rounds half away from zero.
 * Returns 0 and sets *out, or -1 when the value does not fit in int64.
 */
static int decimal_scaled(const char *a, const char *b, int scale, int64_t *out) {
    int neg = 0; const char *q = a;
    if (*q == '-') { neg = 1; q++; }
    __int128 mant = 0; int exp10 = 0, digits = 0, dropped_first = -1;
    int seen_dot = 0;
    for (; q < b && *q != 'e' && *q != 'E'; q++) {
        if (*q == '.') { seen_dot = 1; continue; }
        int d = *q - '0';
        if (digits < 36) {
            if (mant || d) digits++;
            mant = mant * 10 + d;
            if (seen_dot) exp10--;
        } else {
            if (dropped_first < 0) dropped_first = d;
            if (!seen_dot) exp10++;
        }
    }
    if (q < b) {
        q++;
        int eneg = 0; long e = 0;
        if (*q == '+' || *q == '-') { eneg = *q == '-'; q++; }
        for (; q < b; q++) { if (e < 100000) e = e * 10 + (*q - '0'); }
        exp10 += (int)(eneg ? -e : e);
    }
    int shift = exp10 + scale;
    if (shift >= 0) {
        for (int i = 0; i < shift; i++) {
            mant *= 10;
            if (mant > (__int128)INT64_MAX) return -1;
        }
    } else {
        int round_digit = dropped_first >= 0 && shift == 0 ? dropped_first : 0;
        for (int i = 0; i < -shift; i++) {
            round_digit = (int)(mant % 10);
            mant /= 10;
            if (mant == 0 && i + 1 < -shift) { round_digit = 0; mant = 0; break; }
        }
        if (round_digit >= 5) mant += 1;
    }
    if (mant > (__int128)INT64_MAX) return -1;
    *out = neg ? -(int64_t)mant : (int64_t)mant;
    return 0;
}

/* A JSON integer (no fraction / exponent) that fits int64. */
static int plain_int(const char *a, const char *b, int64_t *out) {
    const char *q = a; int neg = 0;
    if (*q == '-') { neg = 1; q++; }
    if (q >= b) return -1;
    __int128 v = 0;
    for (; q < b; q++) {
        if (*q < '0' || *q > '9') return -1;
        v = v * 10 + (*q - '0');
        if (v > (__int128)INT64_MAX + 1) return -1;
    }
    if (!neg && v > (__int128)INT64_MAX) return -1;
    *out = neg ? (int64_t)(-v) : (int64_t)v;
    return 0;
}

static int literal(P *s, const char *word, size_t n) {
    if ((size_t)(s->end - s->p) < n) return fail(s, "unexpected end of file (truncated JSON)", s->p);
    if (memcmp(s->p, word, n) != 0) return fail(s, "invalid literal", s->p);
    s->p += n; return 0;
}

/* Skip (out == NULL) or copy minified (out != NULL) one JSON value. */
static int value(P *s, Buf *out, int depth) {
    if (depth > MAX_DEPTH) return fail(s, "nesting too deep", s->p);
    skip_ws(s);
    if (at_end(s)) return fail(s, "unexpected end of file (truncated JSON)", s->p);
    char c = *s->p;
    if (c == '"') return parse_string(s, out, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        s->p++;
        if (out && buf_byte(out, c)) return -1;
        skip_ws(s);
        if (!at_end(s) && *s->p == close) { s->p++; return out ? buf_byte(out, close) : 0; }
        for (;;) {
            if (c == '{') {
                skip_ws(s);
                if (parse_string(s, out, NULL)) return -1;
                if (expect(s, ':')) return -1;
                if (out && buf_byte(out, ':')) return -1;
            }
            if (value(s, out, depth + 1)) return -1;
            skip_ws(s);
            if (at_end(s)) return fail(s, "unexpected end of file (truncated JSON)", s->p);
            if (*s->p == ',') { s->p++; if (out && buf_byte(out, ',')) return -1; continue; }
            if (*s->p == close) { s->p++; return out ? buf_byte(out, close) : 0; }
            return fail(s, c == '{' ? "expected ',' or '}'" : "expected ',' or ']'", s->p);
        }
    }
    if (c == 't') { if (literal(s, "true", 4)) return -1; return out ? buf_put(out, "true", 4) : 0; }
    if (c == 'f') { if (literal(s, "false", 5)) return -1; return out ? buf_put(out, "false", 5) : 0; }
    if (c == 'n') { if (literal(s, "null", 4)) return -1; return out ? buf_put(out, "null", 4) : 0; }
    if (c == '-' || (c >= '0' && c <= '9')) {
        const char *a, *b;
        if (scan_number(s, &a, &b)) return -1;
        return out ? buf_put(out, a, (size_t)(b - a)) : 0;
    }
    return fail(s, "unexpected character", s->p);
}

/* ---------- columns ---------- */
enum { C_EXT, C_CORR, C_STREAM, C_FLOW, C_BYTES, C_SHM, N_I64 };
enum { D_DEVICE, D_REGS, D_GX, D_GY, D_GZ, D_BX, D_BY, D_BZ, N_I32 };
static const char *I64_NAMES[N_I64] = {"external_id", "correlation", "stream", "flow_id", "bytes", "shared_memory"};
static const char *I32_NAMES[N_I32] = {"device", "registers_per_thread", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"};

typedef struct {
    Buf ph, ts, dur, cat, name, pid, tid;
    Buf i64[N_I64];
    Buf i32[N_I32];
    Buf args_off, args;
    Interner icat, iname, ipid, itid;
    size_t n;
} Cols;

static void cols_free(Cols *c) {
    buf_free(&c->ph); buf_free(&c->ts); buf_free(&c->dur); buf_free(&c->cat); buf_free(&c->name);
    buf_free(&c->pid); buf_free(&c->tid); buf_free(&c->args_off); buf_free(&c->args);
    for (int i = 0; i < N_I64; i++) buf_free(&c->i64[i]);
    for (int i = 0; i < N_I32; i++) buf_free(&c->i32[i]);
    interner_free(&c->icat); interner_free(&c->iname); interner_free(&c->ipid); interner_free(&c->itid);
}

static int key_is(const char *raw, size_t n, const char *lit) {
    size_t m = strlen(lit);
    return n == m + 2 && memcmp(raw + 1, lit, m) == 0;
}

/* Parse "[x, y, z]" of up to 3 integers into v; returns 1 if it matched, 0 if not (value left unparsed). */
static int int_triple(P *s, int32_t v[3]) {
    const char *save = s->p;
    const char *q = s->p;
    if (q >= s->end || *q != '[') return 0;
    q++;
    int k = 0;
    for (;;) {
        while (q < s->end && (*q == ' ' || *q == '\n' || *q == '\r' || *q == '\t')) q++;
        if (q < s->end && *q == ']' && k == 0) { q++; break; }
        const char *a = q;
        if (q < s->end && *q == '-') q++;
        while (q < s->end && *q >= '0' && *q <= '9') q++;
        int64_t x;
        if (q == a || plain_int(a, q, &x) || x < INT32_MIN + 1 || x > INT32_MAX || k >= 3) { s->p = save; return 0; }
        v[k++] = (int32_t)x;
        while (q < s->end && (*q == ' ' || *q == '\n' || *q == '\r' || *q == '\t')) q++;
        if (q < s->end && *q == ',') { q++; continue; }
        if (q < s->end && *q == ']') { q++; break; }
        s->p = save; return 0;
    }
    if (k != 3) { s->p = save; return 0; }
    s->p = q; return 1;
}

/* Try to promote an args value to an integer column; returns 1 if consumed. */
static int promote_int(P *s, int64_t *slot) {
    skip_ws(s);
    const char *q = s->p;
    if (q >= s->end || !(*q == '-' || (*q >= '0' && *q <= '9'))) return 0;
    const char *a, *b;
    const char *save = s->p;
    if (scan_number(s, &a, &b)) return -1;
    int64_t v;
    if (plain_int(a, b, &v) || v == MISSING64) { s->p = save; return 0; }
    *slot = v; return 1;
}

/* Parse the "args" object: promoted keys into v64/v32, the rest appended to out (without braces). */
static int parse_args(P *s, Buf *out, int *nout, int64_t v64[N_I64], int32_t v32[N_I32]) {
    skip_ws(s);
    if (at_end(s)) return fail(s, "unexpected end of file (truncated JSON)", s->p);
    if (*s->p != '{') {  /* not an object: keep it verbatim */
        if (*nout && buf_byte(out, ',')) return -1;
        if (buf_put(out, "\"@args\":", 8) || value(s, out, 1)) return -1;
        (*nout)++; return 0;
    }
    s->p++;
    skip_ws(s);
    if (!at_end(s) && *s->p == '}') { s->p++; return 0; }
    Buf *key = &s->argkey;
    for (;;) {
        skip_ws(s);
        key->len = 0;
        if (parse_string(s, key, NULL)) return -1;
        if (expect(s, ':')) return -1;
        skip_ws(s);
        int64_t *slot64 = NULL; int32_t *slot32 = NULL; int triple = -1;
        const char *k = key->data; size_t kn = key->len;
        if (key_is(k, kn, "External id") || key_is(k, kn, "external id")) slot64 = &v64[C_EXT];
        else if (key_is(k, kn, "correlation")) slot64 = &v64[C_CORR];
        else if (key_is(k, kn, "stream")) slot64 = &v64[C_STREAM];
        else if (key_is(k, kn, "bytes") || key_is(k, kn, "Bytes")) slot64 = &v64[C_BYTES];  /* [memory]: "Bytes" */
        else if (key_is(k, kn, "shared memory")) slot64 = &v64[C_SHM];
        else if (key_is(k, kn, "device")) slot32 = &v32[D_DEVICE];
        else if (key_is(k, kn, "registers per thread")) slot32 = &v32[D_REGS];
        else if (key_is(k, kn, "grid")) triple = D_GX;
        else if (key_is(k, kn, "block")) triple = D_BX;
        int consumed = 0;
        if (slot64 && *slot64 == MISSING64) {
            consumed = promote_int(s, slot64);
        } else if (slot32 && *slot32 == MISSING32) {
            int64_t v = MISSING64;
            const char *save = s->p;
            consumed = promote_int(s, &v);
            if (consumed == 1 && (v < INT32_MIN + 1 || v > INT32_MAX)) { s->p = save; consumed = 0; }
            else if (consumed == 1) *slot32 = (int32_t)v;
        } else if (triple >= 0 && v32[triple] == MISSING32) {
            int32_t t[3];
            consumed = int_triple(s, t);
            if (consumed) { v32[triple] = t[0]; v32[triple + 1] = t[1]; v32[triple + 2] = t[2]; }
        }
        if (consumed < 0) return -1;
        if (!consumed) {
            if (*nout && buf_byte(out, ',')) return -1;
            if (buf_put(out, key->data, key->len) || buf_byte(out, ':') || value(s, out, 2)) return -1;
            (*nout)++;
        }
        skip_ws(s);
        if (at_end(s)) return fail(s, "unexpected end of file (truncated JSON)", s->p);
        if (*s->p == ',') { s->p++; continue; }
        if (*s->p == '}') { s->p++; break; }
        return fail(s, "expected ',' or '}'", s->p);
    }
    return 0;
}

/* Intern the value of a string-or-number field (pid/tid/cat/name); other types go to extras. */
static int intern_field(P *s, Interner *t, int32_t *code, Buf *extra, int *nextra, const char *rawkey, size_t rawlen) {
    skip_ws(s);
    if (at_end(s)) return fail(s, "unexpected end of file (truncated JSON)", s->p);
    char c = *s->p;
    if (c == '"') {
        s->scratch.len = 0;
        if (parse_string(s, NULL, &s->scratch)) return -1;
        int32_t k = intern(t, s->scratch.data ? s->scratch.data : "", s->scratch.len);
        if (k < 0) return -1;
        *code = k; return 0;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        const char *a, *b;
        if (scan_number(s, &a, &b)) return -1;
        int32_t k = intern(t, a, (size_t)(b - a));
        if (k < 0) return -1;
        *code = k; return 0;
    }
    if (*nextra && buf_byte(extra, ',')) return -1;
    if (buf_put(extra, "\"@", 2) || buf_put(extra, rawkey + 1, rawlen - 1) || buf_byte(extra, ':')) return -1;
    (*nextra)++;
    return value(s, extra, 1);
}

static int parse_event(P *s, Cols *c, Buf *extra, Buf *key) {
    const char *ev_start = s->p;
    skip_ws(s);
    if (at_end(s)) return fail(s, "unexpected end of file (truncated JSON)", s->p);
    if (*s->p != '{') return fail(s, "a traceEvents element is not an object", s->p);
    s->p++;
    unsigned char ph = 0;
    int32_t cat = -1, name = -1, pid = -1, tid = -1;
    int64_t ts = MISSING64, dur = MISSING64;
    int64_t v64[N_I64]; int32_t v32[N_I32];
    for (int i = 0; i < N_I64; i++) v64[i] = MISSING64;
    for (int i = 0; i < N_I32; i++) v32[i] = MISSING32;
    extra->len = 0;
    int nextra = 0;
    if (buf_byte(extra, '{')) return -1;
    Buf *argsbuf = &s->argsbuf;
    argsbuf->len = 0;
    int nargs = 0, has_args = 0;
    skip_ws(s);
    if (!at_end(s) && *s->p == '}') { s->p++; goto done; }
    for (;;) {
        skip_ws(s);
        key->len = 0;
        if (parse_string(s, key, NULL)) goto error;
        if (expect(s, ':')) goto error;
        skip_ws(s);
        const char *k = key->data; size_t kn = key->len;
        if (key_is(k, kn, "ph") && !at_end(s) && *s->p == '"' && ph == 0) {
            s->scratch.len = 0;
            if (parse_string(s, NULL, &s->scratch)) goto error;
            if (s->scratch.len == 1) ph = (unsigned char)s->scratch.data[0];
            else {
                if (nextra && buf_byte(extra, ',')) goto error;
                if (buf_put(extra, "\"@ph\":\"", 7) || buf_put(extra, s->scratch.data, s->scratch.len) || buf_byte(extra, '"')) goto error;
                nextra++;
            }
        } else if (key_is(k, kn, "cat") && cat < 0) {
            if (intern_field(s, &c->icat, &cat, extra, &nextra, k, kn)) goto error;
        } else if (key_is(k, kn, "name") && name < 0) {
            if (intern_field(s, &c->iname, &name, extra, &nextra, k, kn)) goto error;
        } else if (key_is(k, kn, "pid") && pid < 0) {
            if (intern_field(s, &c->ipid, &pid, extra, &nextra, k, kn)) goto error;
        } else if (key_is(k, kn, "tid") && tid < 0) {
            if (intern_field(s, &c->itid, &tid, extra, &nextra, k, kn)) goto error;
        } else if ((key_is(k, kn, "ts") && ts == MISSING64) || (key_is(k, kn, "dur") && dur == MISSING64)) {
            int64_t *slot = k[1] == 't' ? &ts : &dur;
            if (!at_end(s) && (*s->p == '-' || (*s->p >= '0' && *s->p <= '9'))) {
                const char *a, *b;
                if (scan_number(s, &a, &b)) goto error;
                if (decimal_scaled(a, b, 3, slot) || *slot == MISSING64) { fail(s, "timestamp out of range", a); goto error; }
            } else {
                if (nextra && buf_byte(extra, ',')) goto error;
                if (buf_byte(extra, '"') || buf_byte(extra, '@') || buf_put(extra, k + 1, kn - 1) || buf_byte(extra, ':') || value(s, extra, 1)) goto error;
                nextra++;
            }
        } else if (key_is(k, kn, "id") && v64[C_FLOW] == MISSING64 && promote_int(s, &v64[C_FLOW]) == 1) {
            /* flow id promoted */
        } else if (key_is(k, kn, "args") && !has_args) {
            has_args = 1;
            if (parse_args(s, argsbuf, &nargs, v64, v32)) goto error;
        } else {
            if (s->err) goto error;
            if (nextra && buf_byte(extra, ',')) goto error;
            if (buf_byte(extra, '"') || buf_byte(extra, '@') || buf_put(extra, k + 1, kn - 1) || buf_byte(extra, ':') || value(s, extra, 1)) goto error;
            nextra++;
        }
        skip_ws(s);
        if (at_end(s)) { fail(s, "unexpected end of file (truncated JSON)", s->p); goto error; }
        if (*s->p == ',') { s->p++; continue; }
        if (*s->p == '}') { s->p++; break; }
        fail(s, "expected ',' or '}'", s->p);
        goto error;
    }
done:
    (void)ev_start;
    if (buf_byte(&c->ph, (char)ph) || buf_i64(&c->ts, ts) || buf_i64(&c->dur, dur) || buf_i32(&c->cat, cat) ||
        buf_i32(&c->name, name) || buf_i32(&c->pid, pid) || buf_i32(&c->tid, tid)) goto error;
    for (int i = 0; i < N_I64; i++) if (buf_i64(&c->i64[i], v64[i])) goto error;
    for (int i = 0; i < N_I32; i++) if (buf_i32(&c->i32[i], v32[i])) goto error;
    if (nargs || nextra) {
        if (buf_byte(&c->args, '{')) goto error;
        if (nargs && buf_put(&c->args, argsbuf->data, argsbuf->len)) goto error;
        if (nextra) {
            if (nargs && buf_byte(&c->args, ',')) goto error;
            if (buf_put(&c->args, extra->data + 1, extra->len - 1)) goto error;
        }
        if (buf_byte(&c->args, '}')) goto error;
    }
    if (buf_i64(&c->args_off, (int64_t)c->args.len)) goto error;
    c->n++;
    return 0;
error:
    return -1;
}

/*
 * Parse events from s->p (the first byte of an event) up to the array's closing ']' (returns 0)
 * or, when stop is not NULL, until the next event would start at or after stop: returns 1 when
 * it starts exactly at stop, 2 when past it (stop was not an event boundary). -1 on error.
 */
static int parse_events_from(P *s, Cols *c, const char *stop) {
    Buf extra = {0}, key = {0};
    int rc;
    for (;;) {
        if (parse_event(s, c, &extra, &key)) { rc = -1; break; }
        release_parsed(s, 0);
        skip_ws(s);
        if (at_end(s)) { rc = fail(s, "unexpected end of file inside traceEvents (truncated JSON)", s->p); break; }
        if (*s->p == ',') {
            s->p++;
            skip_ws(s);
            if (stop && s->p >= stop) { rc = s->p == stop ? 1 : 2; break; }
            continue;
        }
        if (*s->p == ']') { s->p++; rc = 0; break; }
        rc = fail(s, "expected ',' or ']' between trace events", s->p); break;
    }
    release_parsed(s, 1);
    buf_free(&extra); buf_free(&key);
    return rc;
}

/* ---------- several threads over one events array ---------- */
/*
 * A big array is cut into parts at likely event starts ('{' after "}," and before a key) and each
 * part is parsed on its own thread into its own columns. A cut is only a guess (the bytes could
 * sit inside a string): it is trusted once the part before it, itself trusted, ends exactly there.
 * Where the chain breaks, the parts up to the break are kept and the rest is parsed on one thread,
 * so the result, errors included, is the same as a serial parse.
 */
#define MAX_THREADS 64
#define PARTS_PER_THREAD 4

typedef struct {
    P *s;            /* parser state: the caller's for part 0, own_s for the others */
    Cols *c;
    P own_s;
    Cols own_c;
    const char *stop;
    int rc;
} Part;

/* Parts are handed out in order to whichever thread is free, so a slow core or a dense stretch
 * of the file does not leave the other threads waiting (there are more parts than threads). */
typedef struct {
    Part *parts;
    int nparts;
    int next;        /* the next part to take (atomic) */
} Queue;

static int is_ws(char ch) { return ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t'; }

/* The first likely event start in [from, limit), or NULL. */
static const char *event_start_after(const char *from, const char *limit, const char *floor) {
    for (const char *q = from; q < limit; q++) {
        q = memchr(q, '{', (size_t)(limit - q));
        if (!q) return NULL;
        const char *b = q - 1;
        while (b > floor && is_ws(*b)) b--;
        if (b <= floor || *b != ',') continue;
        b--;
        while (b > floor && is_ws(*b)) b--;
        if (b <= floor || *b != '}') continue;
        const char *f = q + 1;
        while (f < limit && is_ws(*f)) f++;
        if (f < limit && *f == '"') return q;
    }
    return NULL;
}

static void *worker_main(void *arg) {
    Queue *q = arg;
    for (;;) {
        int j = __atomic_fetch_add(&q->next, 1, __ATOMIC_RELAXED);
        if (j >= q->nparts) return NULL;
        Part *pt = &q->parts[j];
        pt->rc = parse_events_from(pt->s, pt->c, pt->stop);
    }
}

/* The codes of src's interned strings in dst (dst interns the ones it lacks, in src's order). */
static int intern_merge(Interner *dst, Interner *src, int32_t **map) {
    *map = malloc((src->count ? src->count : 1) * sizeof(int32_t));
    if (!*map) return -1;
    int64_t *off = intern_offsets(src);
    for (size_t i = 0; i < src->count; i++) {
        int64_t a = off[i], b = i + 1 < src->count ? off[i + 1] : (int64_t)src->pool.len;
        int32_t k = intern(dst, src->pool.data + a, (size_t)(b - a));
        if (k < 0) return -1;
        (*map)[i] = k;
    }
    return 0;
}

/* A Cols' buffers in one fixed order, and how each is appended: copied, codes re-mapped (through
 * the interner of that index), or args offsets (shifted, the leading 0 dropped). */
enum { B_COPY = -1, B_ARGS_OFF = -2 };
enum { K_ARGS = 7 };  /* the args bytes' place in that order */
#define N_BUFS (9 + N_I64 + N_I32)
static void cols_bufs(Cols *c, Buf *b[N_BUFS], int how[N_BUFS]) {
    Buf *order[N_BUFS] = {&c->ph, &c->ts, &c->dur, &c->cat, &c->name, &c->pid, &c->tid, &c->args, &c->args_off};
    int ways[9] = {B_COPY, B_COPY, B_COPY, 0, 1, 2, 3, B_COPY, B_ARGS_OFF};
    for (int k = 0; k < 9; k++) { b[k] = order[k]; how[k] = ways[k]; }
    for (int i = 0; i < N_I64; i++) { b[9 + i] = &c->i64[i]; how[9 + i] = B_COPY; }
    for (int i = 0; i < N_I32; i++) { b[9 + N_I64 + i] = &c->i32[i]; how[9 + N_I64 + i] = B_COPY; }
}

/* Parts 1..last appended to part 0's columns: the interners are merged in order on this thread
 * (so codes are as a serial parse gives them), then the bytes are copied by `threads` threads,
 * a part each at a time, into room reserved once. Each part's buffers are freed once copied. */
typedef struct {
    Part *parts;
    int last;
    Buf *dst[N_BUFS];
    int how[N_BUFS];
    size_t (*at)[N_BUFS];    /* per part: where each of its buffers goes in dst */
    int32_t *(*maps)[4];     /* per part: its cat, name, pid, tid codes in dst */
    int next;                /* the next part to copy (atomic) */
} Merge;

static void copy_part(Merge *m, int j) {
    Buf *src[N_BUFS]; int how[N_BUFS];
    cols_bufs(&m->parts[j].own_c, src, how);
    for (int k = 0; k < N_BUFS; k++) {
        char *to = m->dst[k]->data + m->at[j][k];
        if (how[k] == B_COPY) {
            if (src[k]->len) memcpy(to, src[k]->data, src[k]->len);
        } else if (how[k] == B_ARGS_OFF) {
            const int64_t *from = (const int64_t *)src[k]->data;
            int64_t base = (int64_t)m->at[j][K_ARGS];  /* where this part's args bytes go */
            size_t n = src[k]->len / sizeof(int64_t);
            for (size_t i = 1; i < n; i++) ((int64_t *)to)[i - 1] = from[i] + base;
        } else {
            const int32_t *from = (const int32_t *)src[k]->data, *map = m->maps[j][how[k]];
            size_t n = src[k]->len / sizeof(int32_t);
            for (size_t i = 0; i < n; i++) ((int32_t *)to)[i] = from[i] < 0 ? from[i] : map[from[i]];
        }
        buf_free(src[k]);
    }
}

static void *merge_worker(void *arg) {
    Merge *m = arg;
    for (;;) {
        int j = __atomic_fetch_add(&m->next, 1, __ATOMIC_RELAXED);
        if (j > m->last) return NULL;
        copy_part(m, j);
    }
}

static int cols_merge(Cols *dst, Part *parts, int last, int threads) {
    Merge m = {parts, last, {0}, {0}, NULL, NULL, 1};
    cols_bufs(dst, m.dst, m.how);
    m.at = calloc((size_t)last + 1, sizeof(*m.at));
    m.maps = calloc((size_t)last + 1, sizeof(*m.maps));
    int rc = m.at && m.maps ? 0 : -1;
    size_t end[N_BUFS];
    for (int k = 0; k < N_BUFS; k++) end[k] = m.dst[k]->len;
    Interner *into[4] = {&dst->icat, &dst->iname, &dst->ipid, &dst->itid};
    size_t rows = 0;
    for (int j = 1; j <= last && !rc; j++) {
        Cols *c = &parts[j].own_c;
        Interner *from[4] = {&c->icat, &c->iname, &c->ipid, &c->itid};
        for (int f = 0; f < 4 && !rc; f++) rc = intern_merge(into[f], from[f], &m.maps[j][f]);
        Buf *src[N_BUFS]; int how[N_BUFS];
        cols_bufs(c, src, how);
        for (int k = 0; k < N_BUFS; k++) {
            size_t len = how[k] == B_ARGS_OFF ? (src[k]->len ? src[k]->len - sizeof(int64_t) : 0) : src[k]->len;
            m.at[j][k] = end[k];
            end[k] += len;
        }
        rows += c->n;
    }
    for (int k = 0; k < N_BUFS && !rc; k++) rc = buf_reserve(m.dst[k], end[k] - m.dst[k]->len);
    if (!rc) {
        pthread_t tids[MAX_THREADS];
        int nthreads = 0;
        for (int t = 1; t < threads && t < last; t++)
            if (pthread_create(&tids[nthreads], NULL, merge_worker, &m) == 0) nthreads++;
        merge_worker(&m);
        for (int t = 0; t < nthreads; t++) pthread_join(tids[t], NULL);
        for (int k = 0; k < N_BUFS; k++) m.dst[k]->len = end[k];
        dst->n += rows;
    }
    if (m.maps) for (int j = 1; j <= last; j++) for (int f = 0; f < 4; f++) free(m.maps[j][f]);
    free(m.maps); free(m.at);
    return rc;
}

/* Parse the events from s->p (an event's first byte) to the closing ']' on up to `threads` threads,
 * or, with a stop, until the next event would start at or after it (parse_events_from's returns). */
static int parse_events_parallel(P *s, Cols *c, int threads, size_t min_part, const char *stop) {
    const char *limit = stop && stop < s->end ? stop : s->end;
    if (limit <= s->p) return parse_events_from(s, c, stop);
    size_t left = (size_t)(limit - s->p);
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    size_t k = (size_t)threads * PARTS_PER_THREAD;
    if (min_part < 1) min_part = 1;
    if (k > left / min_part) k = left / min_part;
    const char *cut[MAX_THREADS * PARTS_PER_THREAD + 1];
    int nparts = 1;
    cut[0] = s->p;
    for (size_t j = 1; j < k; j++) {
        const char *guess = s->p + left / k * j;
        if (guess <= cut[nparts - 1]) continue;
        const char *q = event_start_after(guess, limit, cut[nparts - 1]);
        if (q) cut[nparts++] = q;
    }
    if (nparts == 1) return parse_events_from(s, c, stop);

    Part *parts = calloc((size_t)nparts, sizeof(Part));
    if (!parts) return -1;
    for (int j = 0; j < nparts; j++) {
        Part *pt = &parts[j];
        pt->stop = j + 1 < nparts ? cut[j + 1] : stop;
        if (j == 0) { pt->s = s; pt->c = c; continue; }
        pt->s = &pt->own_s; pt->c = &pt->own_c;
        pt->own_s.base = s->base; pt->own_s.p = cut[j]; pt->own_s.end = s->end;
        pt->own_s.release = s->release; pt->own_s.released = (size_t)(cut[j] - s->base);
        if (buf_i64(&pt->own_c.args_off, 0)) {  /* out of memory */
            for (int i = 1; i <= j; i++) cols_free(&parts[i].own_c);
            free(parts);
            return -1;
        }
    }
    Queue q = {parts, nparts, 0};
    pthread_t tids[MAX_THREADS];
    int nthreads = 0;
    for (int t = 1; t < threads && t < nparts; t++)
        if (pthread_create(&tids[nthreads], NULL, worker_main, &q) == 0) nthreads++;
    worker_main(&q);  /* this thread takes parts too, so every part runs even if no thread started */
    for (int t = 0; t < nthreads; t++) pthread_join(tids[t], NULL);

    /* Walk the chain: part j is trusted while every part before it ended exactly at its cut. */
    int rc = parts[0].rc;
    int j = 0;
    while (rc == 1 && j + 1 < nparts) {
        j++;
        s->p = parts[j].own_s.p;
        rc = parts[j].rc;
        if (rc == -1) { s->err = parts[j].own_s.err; s->err_at = parts[j].own_s.err_at; }
    }
    if (j > 0 && cols_merge(c, parts, j, threads)) rc = -3;
    for (int i = 1; i < nparts; i++) { cols_free(&parts[i].own_c); p_free(&parts[i].own_s); }
    free(parts);
    if (rc == -3) { s->err = NULL; return -1; }  /* out of memory */
    /* rc 2 before the last part: a cut inside a string; go on serially from the event boundary
     * reached. From the last part, 1 or 2 means the window's stop was reached. */
    if (rc == 2 && j + 1 < nparts) return parse_events_from(s, c, stop);
    return rc;
}

static int parse_events_array(P *s, Cols *c, int threads, size_t min_part) {
    if (expect(s, '[')) return -1;
    skip_ws(s);
    if (!at_end(s) && *s->p == ']') { s->p++; return 0; }
    return threads > 1 ? parse_events_parallel(s, c, threads, min_part, NULL) : parse_events_from(s, c, NULL);
}

/* ---------- Python glue ---------- */
static PyObject *values_of(Interner *t) {
    PyObject *list = PyList_New((Py_ssize_t)t->count);
    if (!list) return NULL;
    int64_t *off = intern_offsets(t);
    for (size_t i = 0; i < t->count; i++) {
        int64_t a = off[i], b = i + 1 < t->count ? off[i + 1] : (int64_t)t->pool.len;
        PyObject *str = PyUnicode_DecodeUTF8(t->pool.data + a, b - a, "surrogatepass");
        if (!str) { Py_DECREF(list); return NULL; }
        PyList_SET_ITEM(list, (Py_ssize_t)i, str);
    }
    return list;
}
static int set_item(PyObject *d, const char *k, PyObject *v) {
    if (!v) return -1;
    int r = PyDict_SetItemString(d, k, v);
    Py_DECREF(v);
    return r;
}

/* The column buffers and interned values of `c` as a new dict (NULL with an exception set). */
static PyObject *cols_dict(Cols *c) {
    PyObject *result = PyDict_New();
    if (!result) return NULL;
    if (set_item(result, "n", PyLong_FromSize_t(c->n)) ||
        set_item(result, "cat_values", values_of(&c->icat)) || set_item(result, "name_values", values_of(&c->iname)) ||
        set_item(result, "pid_values", values_of(&c->ipid)) || set_item(result, "tid_values", values_of(&c->itid)) ||
        set_item(result, "ph", bytes_of(&c->ph)) || set_item(result, "ts", bytes_of(&c->ts)) ||
        set_item(result, "dur", bytes_of(&c->dur)) || set_item(result, "cat", bytes_of(&c->cat)) ||
        set_item(result, "name", bytes_of(&c->name)) || set_item(result, "pid", bytes_of(&c->pid)) ||
        set_item(result, "tid", bytes_of(&c->tid)) || set_item(result, "args_offsets", bytes_of(&c->args_off)) ||
        set_item(result, "args_data", bytes_of(&c->args))) { Py_DECREF(result); return NULL; }
    for (int i = 0; i < N_I64; i++) if (set_item(result, I64_NAMES[i], bytes_of(&c->i64[i]))) { Py_DECREF(result); return NULL; }
    for (int i = 0; i < N_I32; i++) if (set_item(result, I32_NAMES[i], bytes_of(&c->i32[i]))) { Py_DECREF(result); return NULL; }
    return result;
}

static PyObject *scan_error(P *s) {
    if (!s->err) return PyErr_NoMemory();
    long long at = (long long)((s->err_at ? s->err_at : s->p) - s->base);
    return PyErr_Format(PyExc_ValueError, "%s at byte %lld", s->err, at);
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    int release = 0, threads = 1;
    Py_ssize_t min_part = (Py_ssize_t)4 << 20;  /* smaller parts are not worth a thread; tests lower it */
    if (!PyArg_ParseTuple(args, "y*|pin", &view, &release, &threads, &min_part)) return NULL;
    P s = {0};
    s.base = s.p = (const char *)view.buf;
    s.end = s.base + view.len;
    s.release = release;
    Cols c; memset(&c, 0, sizeof(c));
    PyObject *header = PyList_New(0);
    Buf spans = {0};
    int found = 0;
    int rc = 0;
    if (!header) { PyBuffer_Release(&view); return NULL; }
    if (buf_i64(&c.args_off, 0)) rc = -1;

    Py_BEGIN_ALLOW_THREADS
    /* header spans are turned into Python objects after the GIL is back */
    skip_ws(&s);
    if (!rc && at_end(&s)) { rc = fail(&s, "the file is empty", s.p); }
    else if (!rc && *s.p == '[') { found = 1; rc = parse_events_array(&s, &c, threads, (size_t)(min_part > 0 ? min_part : 1)); }
    else if (!rc && *s.p == '{') {
        s.p++;
        skip_ws(&s);
        if (!at_end(&s) && *s.p == '}') s.p++;
        else for (;;) {
            Buf key = {0};
            skip_ws(&s);
            const char *kstart = s.p;
            if (parse_string(&s, &key, NULL) || expect(&s, ':')) { buf_free(&key); rc = -1; break; }
            skip_ws(&s);
            if (key_is(key.data, key.len, "traceEvents") && !found && !at_end(&s) && *s.p == '[') {
                found = 1;
                if (parse_events_array(&s, &c, threads, (size_t)(min_part > 0 ? min_part : 1))) { buf_free(&key); rc = -1; break; }
            } else {
                const char *vstart = s.p;
                if (value(&s, NULL, 1)) { buf_free(&key); rc = -1; break; }
                int64_t span[4] = {kstart - s.base, (kstart - s.base) + (int64_t)key.len, vstart - s.base, s.p - s.base};
                if (buf_put(&spans, span, sizeof(span))) { buf_free(&key); rc = -1; break; }
            }
            buf_free(&key);
            skip_ws(&s);
            if (at_end(&s)) { rc = fail(&s, "unexpected end of file (truncated JSON)", s.p); break; }
            if (*s.p == ',') { s.p++; continue; }
            if (*s.p == '}') { s.p++; break; }
            rc = fail(&s, "expected ',' or '}'", s.p); break;
        }
    } else if (!rc) {
        rc = fail(&s, "not JSON: the first character is not '{' or '['", s.p);
    }
    if (!rc) {
        skip_ws(&s);
        if (!at_end(&s)) rc = fail(&s, "extra data after the JSON document", s.p);
    }
    Py_END_ALLOW_THREADS

    PyObject *result = NULL;
    if (rc || s.err) { scan_error(&s); goto out; }
    for (size_t i = 0; i < spans.len / sizeof(int64_t[4]); i++) {
        int64_t *sp = (int64_t *)spans.data + 4 * i;
        PyObject *t = Py_BuildValue("(LLLL)", (long long)sp[0], (long long)sp[1], (long long)sp[2], (long long)sp[3]);
        if (!t || PyList_Append(header, t)) { Py_XDECREF(t); goto out; }
        Py_DECREF(t);
    }
    result = cols_dict(&c);
    if (!result) goto out;
    if (set_item(result, "found_events", PyBool_FromLong(found)) ||
        set_item(result, "header", (Py_INCREF(header), header))) { Py_CLEAR(result); goto out; }
out:
    buf_free(&spans);
    p_free(&s);
    cols_free(&c);
    Py_DECREF(header);
    PyBuffer_Release(&view);
    return result;
}

/* ---------- a trace read window by window (tracekit.ingest.kineto_windows) ---------- */

/* The top-level object's key/value pairs from s->p (a key) to its closing '}' (consumed), each
 * pair's byte spans appended to `spans`. With `events_at`, it stops just inside the first
 * traceEvents list and points *events_at there. */
static int object_pairs(P *s, Buf *spans, const char **events_at) {
    for (;;) {
        Buf key = {0};
        skip_ws(s);
        const char *kstart = s->p;
        if (parse_string(s, &key, NULL) || expect(s, ':')) { buf_free(&key); return -1; }
        skip_ws(s);
        if (events_at && key_is(key.data, key.len, "traceEvents") && !at_end(s) && *s->p == '[') {
            buf_free(&key);
            s->p++;
            *events_at = s->p;
            return 0;
        }
        const char *vstart = s->p;
        if (value(s, NULL, 1)) { buf_free(&key); return -1; }
        int64_t span[4] = {kstart - s->base, (kstart - s->base) + (int64_t)key.len, vstart - s->base, s->p - s->base};
        buf_free(&key);
        if (buf_put(spans, span, sizeof(span))) return -1;
        skip_ws(s);
        if (at_end(s)) return fail(s, "unexpected end of file (truncated JSON)", s->p);
        if (*s->p == ',') { s->p++; continue; }
        if (*s->p == '}') { s->p++; return 0; }
        return fail(s, "expected ',' or '}'", s->p);
    }
}

/*
 * scan_top(buffer) reads the document up to its traceEvents list: {"header": spans of the pairs
 * before it, "events": the offset just inside the list ('[' consumed; -1 when there is none),
 * "bare": whether the document is the list itself}. scan_top(buffer, at, bare) reads on from `at`,
 * the byte after the list's ']', to the end of the document (the pairs after the list). Errors
 * are scan's: ValueError("<what> at byte N").
 */
static PyObject *scan_top(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t resume = -1;
    int bare = 0;
    if (!PyArg_ParseTuple(args, "y*|np", &view, &resume, &bare)) return NULL;
    if (resume > view.len) { PyBuffer_Release(&view); PyErr_SetString(PyExc_ValueError, "scan_top: offset beyond the buffer"); return NULL; }
    P s = {0};
    s.base = s.p = (const char *)view.buf;
    s.end = s.base + view.len;
    Buf spans = {0};
    const char *events_at = NULL;
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    if (resume < 0) {
        skip_ws(&s);
        if (at_end(&s)) rc = fail(&s, "the file is empty", s.p);
        else if (*s.p == '[') { bare = 1; s.p++; events_at = s.p; }
        else if (*s.p == '{') {
            s.p++;
            skip_ws(&s);
            if (!at_end(&s) && *s.p == '}') s.p++;
            else rc = object_pairs(&s, &spans, &events_at);
        } else rc = fail(&s, "not JSON: the first character is not '{' or '['", s.p);
    } else {
        s.p = s.base + resume;
        if (!bare) {
            skip_ws(&s);
            if (at_end(&s)) rc = fail(&s, "unexpected end of file (truncated JSON)", s.p);
            else if (*s.p == ',') { s.p++; rc = object_pairs(&s, &spans, NULL); }
            else if (*s.p == '}') s.p++;
            else rc = fail(&s, "expected ',' or '}'", s.p);
        }
    }
    if (!rc && !events_at) {
        skip_ws(&s);
        if (!at_end(&s)) rc = fail(&s, "extra data after the JSON document", s.p);
    }
    Py_END_ALLOW_THREADS
    PyObject *result = NULL, *header = NULL;
    if (rc || s.err) { scan_error(&s); goto out; }
    header = PyList_New(0);
    if (!header) goto out;
    for (size_t i = 0; i < spans.len / sizeof(int64_t[4]); i++) {
        int64_t *sp = (int64_t *)spans.data + 4 * i;
        PyObject *t = Py_BuildValue("(LLLL)", (long long)sp[0], (long long)sp[1], (long long)sp[2], (long long)sp[3]);
        if (!t || PyList_Append(header, t)) { Py_XDECREF(t); goto out; }
        Py_DECREF(t);
    }
    result = Py_BuildValue("{s:O,s:n,s:O}", "header", header, "events",
                           events_at ? (Py_ssize_t)(events_at - s.base) : (Py_ssize_t)-1, "bare", bare ? Py_True : Py_False);
out:
    Py_XDECREF(header);
    buf_free(&spans);
    p_free(&s);
    PyBuffer_Release(&view);
    return result;
}

/*
 * scan_window(buffer, at, stop, first, release_pages=False, threads=1, min_part_bytes=4 MiB): the
 * events from `at` (an event's first byte, or just inside the list when `first`) until the next
 * event would start at or after `stop`, or to the list's ']'. Returns scan's columns (codes
 * interned afresh for this window) with "next" (where the next window starts, or the byte after
 * ']') and "closed" (the list ended in this window).
 */
static PyObject *scan_window(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t at, stop;
    int first = 0, release = 0, threads = 1;
    Py_ssize_t min_part = (Py_ssize_t)4 << 20;
    if (!PyArg_ParseTuple(args, "y*nnp|pin", &view, &at, &stop, &first, &release, &threads, &min_part)) return NULL;
    if (at < 0 || at > view.len) { PyBuffer_Release(&view); PyErr_SetString(PyExc_ValueError, "scan_window: offset outside the buffer"); return NULL; }
    P s = {0};
    s.base = (const char *)view.buf;
    s.p = s.base + at;
    s.end = s.base + view.len;
    s.release = release;
    s.released = (size_t)at;
    Cols c; memset(&c, 0, sizeof(c));
    int rc = buf_i64(&c.args_off, 0), closed = 0;
    const char *stop_at = stop >= 0 && stop < view.len ? s.base + stop : NULL;
    Py_BEGIN_ALLOW_THREADS
    if (!rc) {
        skip_ws(&s);
        if (at_end(&s)) rc = fail(&s, "unexpected end of file inside traceEvents (truncated JSON)", s.p);
        else if (first && *s.p == ']') { s.p++; closed = 1; }
        else {
            int r = threads > 1 ? parse_events_parallel(&s, &c, threads, (size_t)(min_part > 0 ? min_part : 1), stop_at)
                                : parse_events_from(&s, &c, stop_at);
            if (r < 0) rc = -1;
            else closed = r == 0;
        }
    }
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (rc || s.err) { scan_error(&s); goto out; }
    result = cols_dict(&c);
    if (result && (set_item(result, "next", PyLong_FromSsize_t((Py_ssize_t)(s.p - s.base))) ||
                   set_item(result, "closed", PyBool_FromLong(closed)))) Py_CLEAR(result);
out:
    p_free(&s);
    cols_free(&c);
    PyBuffer_Release(&view);
    return result;
}

/*
 * nest(group, start, end, order) -> (parent int64[], depth int16[]) as bytes, one entry per row
 * of group/start/end. `order` lists the rows that take part (a subset is fine), sorted by
 * (group, start asc, end desc); each such row's parent is the innermost earlier row of the same
 * group whose interval contains it. Rows not in `order` get parent -1, depth 0. Rows with
 * end < start (unknown end) are treated as instants.
 */
static PyObject *nest(PyObject *self, PyObject *args) {
    Py_buffer g, st, en, od;
    if (!PyArg_ParseTuple(args, "y*y*y*y*", &g, &st, &en, &od)) return NULL;
    Py_ssize_t n = g.len / 8, m = od.len / 8;
    PyObject *res = NULL;
    if (st.len / 8 != n || en.len / 8 != n || m > n) {
        PyErr_SetString(PyExc_ValueError, "nest: arrays differ in length");
        goto done;
    }
    const int64_t *grp = g.buf, *start = st.buf, *end = en.buf, *order = od.buf;
    PyObject *pb = PyBytes_FromStringAndSize(NULL, n * 8);
    PyObject *db = PyBytes_FromStringAndSize(NULL, n * 2);
    int64_t *stack = malloc((size_t)(m ? m : 1) * sizeof(int64_t));
    if (!pb || !db || !stack) { Py_XDECREF(pb); Py_XDECREF(db); free(stack); PyErr_NoMemory(); goto done; }
    int64_t *parent = (int64_t *)PyBytes_AS_STRING(pb);
    int16_t *depth = (int16_t *)PyBytes_AS_STRING(db);
    for (Py_ssize_t i = 0; i < n; i++) { parent[i] = -1; depth[i] = 0; }
    Py_ssize_t top = 0;
    int64_t cur_group = 0;
    for (Py_ssize_t k = 0; k < m; k++) {
        int64_t r = order[k];
        if (r < 0 || r >= n) { free(stack); Py_DECREF(pb); Py_DECREF(db); PyErr_SetString(PyExc_ValueError, "nest: bad order"); goto done; }
        if (k == 0 || grp[r] != cur_group) { top = 0; cur_group = grp[r]; }
        int64_t e = end[r] < start[r] ? start[r] : end[r];
        while (top > 0) {
            int64_t q = stack[top - 1];
            int64_t qe = end[q] < start[q] ? start[q] : end[q];
            if (start[r] >= start[q] && e <= qe && !(start[r] == qe && qe > start[q])) break;
            top--;
        }
        if (top > 0) { parent[r] = stack[top - 1]; depth[r] = (int16_t)(top < 32767 ? top : 32767); }
        stack[top++] = r;
    }
    free(stack);
    res = Py_BuildValue("(NN)", pb, db);
done:
    PyBuffer_Release(&g); PyBuffer_Release(&st); PyBuffer_Release(&en); PyBuffer_Release(&od);
    return res;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "scan(buffer, release_pages=False, threads=1, min_part_bytes=4 MiB) -> dict of column buffers"},
    {"scan_top", scan_top, METH_VARARGS, "scan_top(buffer, resume_at=-1, bare=False) -> {header, events, bare}"},
    {"scan_window", scan_window, METH_VARARGS,
     "scan_window(buffer, at, stop, first, release_pages=False, threads=1, min_part_bytes=4 MiB) -> dict of column buffers"},
    {"nest", nest, METH_VARARGS, "nest(group, start, end, order) -> (parent, depth) buffers"},
    {NULL, NULL, 0, NULL},
};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tracekit._native._kineto_scan", NULL, -1, methods};
PyMODINIT_FUNC PyInit__kineto_scan(void) {
    if (PyType_Ready(&BlockType) < 0) return NULL;
    return PyModule_Create(&module);
}
