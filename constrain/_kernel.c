/* Compiled kernels: the token-trie walk of a token index (constrain/regex/index.py), the merge
 * of a product state's part rows (constrain/regex/algebra.py, see ``merge``) and the cut of a
 * subset state's byte moves into runs written into its row (constrain/regex/automaton.py, see
 * ``expand``).
 *
 * Why C: a token index builds a state's row by walking every token of the vocabulary's byte
 * trie through the byte automaton. In numpy that is one vectorized step per trie depth, about
 * twenty array calls each, so a row costs hundreds of microseconds even when only a few
 * hundred trie nodes stay alive, and most first visits are such narrow rows. Here the walk is
 * a depth-first loop over the trie's flat arrays: a few nanoseconds per node.
 *
 * The kernel never builds automaton states itself (that is Python: closures, counters, embedded
 * automata; ``expand`` only cuts a state's moves into runs and writes its row). A node whose
 * state has no row yet is handed back as pending; the caller expands those states and calls
 * again with the pending nodes as the new tasks. The loop runs without the GIL, on buffers the
 * caller holds.
 *
 * Built by the package's own build (setup.py, an optional extension): where no C compiler is at
 * hand the package installs without it and constrain.kernel falls back to the numpy walk.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_AVX2_PATH 1
#endif

#define DEAD (-1)

/* The buffers one call takes, released together whatever happens. */
typedef struct {
    Py_buffer view[16];
    int held;
} Buffers;

/* Take ``obj``'s buffer (C-contiguous, writable if asked, of ``itemsize``-byte items) as the next
   of ``buffers``: its data and item count. None gives NULL and 0 (the caller says where that is
   allowed). Returns -1 with an exception set on a wrong argument. */
static int
take(Buffers *buffers, PyObject *obj, Py_ssize_t itemsize, int writable, const char *name, void *data,
     Py_ssize_t *items)
{
    *(void **)data = NULL;
    *items = 0;
    if (obj == Py_None) {
        return 0;
    }
    Py_buffer *view = &buffers->view[buffers->held];
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) {
        return -1;
    }
    buffers->held++;
    if (view->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s must hold %zd-byte items, not %zd-byte ones", name, itemsize,
                     view->itemsize);
        return -1;
    }
    *(void **)data = view->buf;
    *items = view->len / itemsize;
    return 0;
}

static void
release(Buffers *buffers)
{
    for (int i = 0; i < buffers->held; i++) {
        PyBuffer_Release(&buffers->view[i]);
    }
}

PyDoc_STRVAR(walk_doc,
"walk(table, expanded, byte, token, child_lo, child_hi, root, skip, nodes, states,\n"
"     out_ids, out_states, pending_nodes, pending_states) -> (found, pending)\n"
"\n"
"From each task (nodes[i] reached in states[i]) visit the node's children: a child whose byte\n"
"leads from the state (table[state, byte]) to a live state is reached; its token, if any, is\n"
"written to out_ids/out_states and its own children are visited from there. A task whose\n"
"state is not expanded yet, or whose row holds a pending successor (a cell below DEAD) on a\n"
"child's byte, is written to pending_nodes/pending_states instead. The children\n"
"of ``root`` whose byte ``skip`` flags are left out (skip may be None). Returns how many\n"
"tokens and how many pending tasks were written. Every out and pending array must hold as\n"
"many items as the trie has nodes (a node is reached at most once per call).");

static PyObject *
walk(PyObject *self, PyObject *args)
{
    PyObject *o_table, *o_expanded, *o_byte, *o_token, *o_lo, *o_hi, *o_skip;
    PyObject *o_nodes, *o_states, *o_out_ids, *o_out_states, *o_pend_nodes, *o_pend_states;
    Py_ssize_t root;
    if (!PyArg_ParseTuple(args, "OOOOOOnOOOOOOO", &o_table, &o_expanded, &o_byte, &o_token, &o_lo, &o_hi,
                          &root, &o_skip, &o_nodes, &o_states, &o_out_ids, &o_out_states,
                          &o_pend_nodes, &o_pend_states)) {
        return NULL;
    }
    Buffers b = {.held = 0};
    PyObject *result = NULL;
    int32_t *stack = NULL;
    const int32_t *table, *token, *lo, *hi, *nodes, *states;
    const uint8_t *expanded, *byte, *skip;
    int32_t *out_ids, *out_states, *pend_nodes, *pend_states;
    Py_ssize_t cells, rows, size, n_token, n_lo, n_hi, tasks, n_states, n_skip, room[4];
    if (take(&b, o_table, 4, 0, "table", &table, &cells) < 0
        || take(&b, o_expanded, 1, 0, "expanded", &expanded, &rows) < 0
        || take(&b, o_byte, 1, 0, "byte", &byte, &size) < 0
        || take(&b, o_token, 4, 0, "token", &token, &n_token) < 0
        || take(&b, o_lo, 4, 0, "child_lo", &lo, &n_lo) < 0
        || take(&b, o_hi, 4, 0, "child_hi", &hi, &n_hi) < 0
        || take(&b, o_skip, 1, 0, "skip", &skip, &n_skip) < 0
        || take(&b, o_nodes, 4, 0, "nodes", &nodes, &tasks) < 0
        || take(&b, o_states, 4, 0, "states", &states, &n_states) < 0
        || take(&b, o_out_ids, 4, 1, "out_ids", &out_ids, &room[0]) < 0
        || take(&b, o_out_states, 4, 1, "out_states", &out_states, &room[1]) < 0
        || take(&b, o_pend_nodes, 4, 1, "pending_nodes", &pend_nodes, &room[2]) < 0
        || take(&b, o_pend_states, 4, 1, "pending_states", &pend_states, &room[3]) < 0) {
        goto done;
    }
    if (cells / 256 < rows) {
        rows = cells / 256;
    }
    if (n_token != size || n_lo != size || n_hi != size || n_states != tasks || room[0] < size
        || room[1] < size || room[2] < size || room[3] < size || (skip != NULL && n_skip != 256)) {
        PyErr_SetString(PyExc_ValueError, "walk: array sizes disagree");
        goto done;
    }
    /* Every node index and state read below is checked against its array: a bad argument is an
       exception, never a read out of bounds. */
    Py_ssize_t capacity = 2 * (tasks + 64);
    stack = malloc(sizeof(int32_t) * capacity);
    if (stack == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t top = 0, found = 0, pending = 0;
    int bad = 0;
    for (Py_ssize_t i = 0; i < tasks; i++) {
        stack[top++] = nodes[i];
        stack[top++] = states[i];
    }
    Py_BEGIN_ALLOW_THREADS
    while (top > 0) {
        int32_t state = stack[--top];
        int32_t node = stack[--top];
        if (node < 0 || node >= size || state < 0 || state >= rows) {
            bad = 1;
            break;
        }
        int32_t first = lo[node], last = hi[node];
        if (first < 0 || last > size || first > last) {
            bad = 1;
            break;
        }
        const int32_t *row = table + (size_t)state * 256;
        int skipping = skip != NULL && node == root;
        /* A state without a row, or a successor below DEAD (not built yet) on a child's byte: the
           whole task goes back before any child is visited, and resumes from scratch once the
           caller has built them, so each token is found once. */
        int unbuilt = !expanded[state];
        for (int32_t child = first; child < last && !unbuilt; child++) {
            unbuilt = row[byte[child]] < DEAD && !(skipping && skip[byte[child]]);
        }
        if (unbuilt) {
            if (pending >= size) {
                bad = 1;
                break;
            }
            pend_nodes[pending] = node;
            pend_states[pending] = state;
            pending++;
            continue;
        }
        for (int32_t child = first; child < last; child++) {
            uint8_t value = byte[child];
            if (skipping && skip[value]) {
                continue;
            }
            int32_t next = row[value];
            if (next == DEAD) {
                continue;
            }
            if (token[child] >= 0) {
                if (found >= size) {
                    bad = 1;
                    break;
                }
                out_ids[found] = token[child];
                out_states[found] = next;
                found++;
            }
            if (lo[child] < hi[child]) {
                if (top + 2 > capacity) {
                    Py_ssize_t grown = 2 * capacity;
                    int32_t *larger = realloc(stack, sizeof(int32_t) * grown);
                    if (larger == NULL) {
                        bad = 2;
                        break;
                    }
                    stack = larger;
                    capacity = grown;
                }
                stack[top++] = child;
                stack[top++] = next;
            }
        }
        if (bad) {
            break;
        }
    }
    Py_END_ALLOW_THREADS
    if (bad == 2) {
        PyErr_NoMemory();
        goto done;
    }
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "walk: a node or state index outside its array");
        goto done;
    }
    result = Py_BuildValue("nn", found, pending);
done:
    free(stack);
    release(&b);
    return result;
}

PyDoc_STRVAR(scatter_doc,
"scatter(token_ids, states, words, dense) -> None\n"
"\n"
"Set bit ``token_ids[i]`` of the packed mask ``words`` (little-endian int32 words, as\n"
"constrain.guide writes masks) and, unless dense is None, ``dense[token_ids[i]] = states[i]``.\n"
"Every id must be below 32 * len(words) (and len(dense)). The numpy equivalent is a bool\n"
"array of the vocabulary's size, packed: tens of microseconds where this takes a few.");

static PyObject *
scatter(PyObject *self, PyObject *args)
{
    PyObject *o_ids, *o_states, *o_words, *o_dense;
    if (!PyArg_ParseTuple(args, "OOOO", &o_ids, &o_states, &o_words, &o_dense)) {
        return NULL;
    }
    Buffers b = {.held = 0};
    PyObject *result = NULL;
    const int32_t *ids, *states;
    uint32_t *words;
    int32_t *dense;
    Py_ssize_t n, n_states, n_words, n_dense;
    if (take(&b, o_ids, 4, 0, "token_ids", &ids, &n) < 0
        || take(&b, o_words, 4, 1, "words", &words, &n_words) < 0
        || take(&b, o_dense, 4, 1, "dense", &dense, &n_dense) < 0
        || take(&b, dense == NULL ? Py_None : o_states, 4, 0, "states", &states, &n_states) < 0) {
        goto done;
    }
    Py_ssize_t limit = n_words * 32;
    if (dense != NULL) {
        if (n_states != n) {
            PyErr_SetString(PyExc_ValueError, "scatter: token_ids and states differ in length");
            goto done;
        }
        if (n_dense < limit) {
            limit = n_dense;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= limit) {
            PyErr_Format(PyExc_ValueError, "scatter: token id %d outside the mask", (int)id);
            goto done;
        }
        words[id >> 5] |= (uint32_t)1 << (id & 31);
        if (dense != NULL) {
            dense[id] = states[i];
        }
    }
    result = Py_NewRef(Py_None);
done:
    release(&b);
    return result;
}

PyDoc_STRVAR(gather_doc,
"gather(words, dense, out_ids, out_states) -> count\n"
"\n"
"The ids whose bits ``words`` sets, in ascending order, into out_ids, and ``dense`` at each\n"
"into out_states: a row sorted by token id after ``scatter``, without a sort (zero words are\n"
"skipped whole). The out arrays must hold as many items as bits are set.");

static PyObject *
gather(PyObject *self, PyObject *args)
{
    PyObject *o_words, *o_dense, *o_ids, *o_states;
    if (!PyArg_ParseTuple(args, "OOOO", &o_words, &o_dense, &o_ids, &o_states)) {
        return NULL;
    }
    Buffers b = {.held = 0};
    PyObject *result = NULL;
    const uint32_t *words;
    const int32_t *dense;
    int32_t *ids, *states;
    Py_ssize_t count, size, room, room_states, found = 0;
    if (take(&b, o_words, 4, 0, "words", &words, &count) < 0 || take(&b, o_dense, 4, 0, "dense", &dense, &size) < 0
        || take(&b, o_ids, 4, 1, "out_ids", &ids, &room) < 0
        || take(&b, o_states, 4, 1, "out_states", &states, &room_states) < 0) {
        goto done;
    }
    if (words == NULL || dense == NULL || ids == NULL || states == NULL) {
        PyErr_SetString(PyExc_TypeError, "gather: every argument is an array");
        goto done;
    }
    if (room_states < room) {
        room = room_states;
    }
    for (Py_ssize_t w = 0; w < count; w++) {
        uint32_t bits = words[w];
        while (bits) {
            int32_t id = (int32_t)(w * 32 + __builtin_ctz(bits));
            bits &= bits - 1;
            if (id >= size || found >= room) {
                PyErr_SetString(PyExc_ValueError, "gather: more bits set than the arrays hold");
                goto done;
            }
            ids[found] = id;
            states[found] = dense[id];
            found++;
        }
    }
    result = PyLong_FromSsize_t(found);
done:
    release(&b);
    return result;
}

PyDoc_STRVAR(unpack_doc,
"unpack(words, out, portable=False) -> None\n"
"\n"
"Bit i of the packed mask ``words`` (little-endian int32 words) as byte i of ``out`` (0 or 1),\n"
"for every byte of ``out``, which must hold at most 32 * len(words): a bool mask of the\n"
"vocabulary's size without numpy's unpackbits: 32 tokens per step where the CPU has AVX2,\n"
"else (or with ``portable``) a byte table lookup per eight tokens.");

/* One 8-byte pattern per mask byte, built once (bytes are read low bit first, as the words
   are little-endian and their bit i is token 32 * word + i). */
static uint64_t unpack_table[256];

static void
unpack_bytes(const uint8_t *bits, uint8_t *out, Py_ssize_t from, Py_ssize_t whole)
{
    for (Py_ssize_t i = from; i < whole; i++) {
        memcpy(out + 8 * i, &unpack_table[bits[i]], 8);
    }
}

#ifdef HAVE_AVX2_PATH
/* Four mask bytes at a time: each broadcast to eight output bytes (a byte shuffle within each
   128-bit lane), kept where its bit for that byte's position is set, written as 0 or 1. On a
   49k-token mask 0.9 us where the table loop takes 2.2 (the stores are the cost: one 32-byte
   store here for four 8-byte ones). Returns how many mask bytes it did. */
__attribute__((target("avx2"))) static Py_ssize_t
unpack_avx2(const uint8_t *bits, uint8_t *out, Py_ssize_t whole)
{
    const __m256i select = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i ones = _mm256_set1_epi8(1);
    const __m256i spread = _mm256_set_epi8(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
                                           1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    Py_ssize_t i = 0;
    for (; i + 4 <= whole; i += 4) {
        uint32_t four;
        memcpy(&four, bits + i, 4);
        /* lane 0 takes bytes 0 and 1, lane 1 bytes 2 and 3 of the same broadcast word */
        __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)four), spread);
        v = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, select), select), ones);
        _mm256_storeu_si256((__m256i *)(out + 8 * i), v);
    }
    return i;
}
#endif

static PyObject *
unpack(PyObject *self, PyObject *args)
{
    PyObject *o_words, *o_out;
    int portable = 0;
    if (!PyArg_ParseTuple(args, "OO|p", &o_words, &o_out, &portable)) {
        return NULL;
    }
    Buffers b = {.held = 0};
    PyObject *result = NULL;
    const uint8_t *bits;
    uint8_t *out;
    Py_ssize_t count, size;
    if (take(&b, o_words, 4, 0, "words", &bits, &count) < 0 || take(&b, o_out, 1, 1, "out", &out, &size) < 0) {
        goto done;
    }
    if (bits == NULL || out == NULL) {
        PyErr_SetString(PyExc_TypeError, "unpack: both arguments are arrays");
        goto done;
    }
    if (size > count * 32) {
        PyErr_SetString(PyExc_ValueError, "unpack: out holds more items than the mask has bits");
        goto done;
    }
    static int ready = 0;
    static int avx2 = 0;
    if (!ready) {
        for (int v = 0; v < 256; v++) {
            uint8_t spread[8];
            for (int k = 0; k < 8; k++) {
                spread[k] = (uint8_t)((v >> k) & 1);
            }
            memcpy(&unpack_table[v], spread, 8);
        }
#ifdef HAVE_AVX2_PATH
        __builtin_cpu_init();
        avx2 = __builtin_cpu_supports("avx2");
#endif
        ready = 1;
    }
    Py_ssize_t whole = size / 8;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t done = 0;
#ifdef HAVE_AVX2_PATH
    if (avx2 && !portable) {
        done = unpack_avx2(bits, out, whole);
    }
#endif
    unpack_bytes(bits, out, done, whole);
    for (Py_ssize_t i = 8 * whole; i < size; i++) {
        out[i] = (uint8_t)((bits[i / 8] >> (i % 8)) & 1);
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    release(&b);
    return result;
}

PyDoc_STRVAR(lex_walk_doc,
"lex_walk(table, emit, final_only, possible, matrix, width, lengths, rows, todo, walkers, out,\n"
"         offset, drop_inherit) -> pending\n"
"\n"
"The grammar index's walk of token rows through the lexer DFA (constrain/cfg/index.py,\n"
"``MaskIndex._build``), one row at a time. For each i in ``todo``, row ``rows[i]`` (its bytes\n"
"``matrix[row * width:]``, ``lengths[row]`` of them) goes on from ``walkers[i]`` = (state,\n"
"last emission, its position, byte position) until it ends: ``out[i]`` = (1, emission,\n"
"resume) where the lexeme ends (the DFA dies after a match, or reaches a final-only state;\n"
"(1, -1, offset) where it dies with no match and ``drop_inherit`` is false), (2, possible\n"
"set, last emission) where the row ends inside a lexeme, (0, 0, 0) where it is dropped, and\n"
"(3, 0, 0) where a state has no row yet: ``walkers[i]`` then holds where it stopped, the\n"
"caller expands that state and calls again with those rows. Returns how many are pending.\n"
"table is the lexer DFA's int32 rows of 256 (-1 dead, -2 not expanded), emit and possible\n"
"int32 per state, final_only one byte per state; walkers and out int64, 4 and 3 per row.");

static PyObject *
lex_walk(PyObject *self, PyObject *args)
{
    PyObject *o_table, *o_emit, *o_final, *o_possible, *o_matrix, *o_lengths, *o_rows, *o_todo, *o_walkers,
        *o_out;
    Py_ssize_t width, offset;
    int drop_inherit;
    if (!PyArg_ParseTuple(args, "OOOOOnOOOOOnp", &o_table, &o_emit, &o_final, &o_possible, &o_matrix, &width,
                          &o_lengths, &o_rows, &o_todo, &o_walkers, &o_out, &offset, &drop_inherit)) {
        return NULL;
    }
    Buffers b = {.held = 0};
    PyObject *result = NULL;
    const int32_t *table, *emit, *possible;
    const uint8_t *final_only, *matrix;
    const int64_t *lengths, *rows, *todo;
    int64_t *walkers, *out;
    Py_ssize_t n_table, n_emit, n_final, n_possible, n_matrix, n_lengths, n_rows, n_todo, n_walkers, n_out;
    if (take(&b, o_table, 4, 0, "table", &table, &n_table) < 0 || take(&b, o_emit, 4, 0, "emit", &emit, &n_emit) < 0
        || take(&b, o_final, 1, 0, "final_only", &final_only, &n_final) < 0
        || take(&b, o_possible, 4, 0, "possible", &possible, &n_possible) < 0
        || take(&b, o_matrix, 1, 0, "matrix", &matrix, &n_matrix) < 0
        || take(&b, o_lengths, 8, 0, "lengths", &lengths, &n_lengths) < 0
        || take(&b, o_rows, 8, 0, "rows", &rows, &n_rows) < 0 || take(&b, o_todo, 8, 0, "todo", &todo, &n_todo) < 0
        || take(&b, o_walkers, 8, 1, "walkers", &walkers, &n_walkers) < 0
        || take(&b, o_out, 8, 1, "out", &out, &n_out) < 0) {
        goto done;
    }
    if (table == NULL || emit == NULL || final_only == NULL || possible == NULL || matrix == NULL || lengths == NULL
        || rows == NULL || walkers == NULL || out == NULL) {
        PyErr_SetString(PyExc_TypeError, "lex_walk: every argument but todo is an array");
        goto done;
    }
    Py_ssize_t states = n_emit < n_final ? n_emit : n_final;
    if (n_possible < states) {
        states = n_possible;
    }
    if (n_table / 256 < states) {
        states = n_table / 256;
    }
    if (n_walkers != 4 * n_rows || n_out != 3 * n_rows || width <= 0) {
        PyErr_SetString(PyExc_ValueError, "lex_walk: walkers and out hold 4 and 3 items per row");
        goto done;
    }
    Py_ssize_t pending = 0;
    for (Py_ssize_t k = 0; k < (todo == NULL ? n_rows : n_todo); k++) {
        Py_ssize_t i = todo == NULL ? k : (Py_ssize_t)todo[k];
        if (i < 0 || i >= n_rows) {
            PyErr_SetString(PyExc_IndexError, "lex_walk: todo names a row outside rows");
            goto done;
        }
        int64_t row = rows[i];
        if (row < 0 || row >= n_lengths || lengths[row] > width || (row + 1) * width > n_matrix) {
            PyErr_SetString(PyExc_IndexError, "lex_walk: a row outside the matrix");
            goto done;
        }
        const uint8_t *data = matrix + row * width;
        int64_t length = lengths[row];
        int64_t *walker = walkers + 4 * i, *result_row = out + 3 * i;
        int64_t state = walker[0], last = walker[1], last_pos = walker[2], pos = walker[3];
        for (;;) {
            if (state < 0 || state >= states || pos < 0 || pos >= length) {
                PyErr_SetString(PyExc_ValueError, "lex_walk: a walker outside the lexer or its row");
                goto done;
            }
            int32_t next = table[state * 256 + data[pos]];
            if (next == -2) { /* not expanded yet: the caller expands ``state`` */
                walker[0] = state, walker[1] = last, walker[2] = last_pos, walker[3] = pos;
                result_row[0] = 3, result_row[1] = 0, result_row[2] = 0;
                pending++;
                break;
            }
            if (next < 0) { /* dead: the lexeme ends at the last match, or is dropped */
                if (last >= 0) {
                    result_row[0] = 1, result_row[1] = last, result_row[2] = last_pos;
                } else if (!drop_inherit) {
                    result_row[0] = 1, result_row[1] = -1, result_row[2] = offset;
                } else {
                    result_row[0] = 0, result_row[1] = 0, result_row[2] = 0;
                }
                break;
            }
            pos++;
            state = next;
            if (state >= states) {
                PyErr_SetString(PyExc_ValueError, "lex_walk: the table leads outside the lexer's states");
                goto done;
            }
            int32_t emission = emit[state];
            if (emission >= 0) {
                last = emission, last_pos = pos;
                if (final_only[state]) {
                    result_row[0] = 1, result_row[1] = emission, result_row[2] = pos;
                    break;
                }
            }
            if (pos == length) {
                result_row[0] = 2, result_row[1] = possible[state], result_row[2] = last;
                break;
            }
        }
    }
    result = PyLong_FromSsize_t(pending);
done:
    release(&b);
    return result;
}

/* Append ``item`` (a new reference, or NULL after a failed build) to ``list`` and drop the
   reference: -1 with an exception set where either failed. */
static int
append_new(PyObject *list, PyObject *item)
{
    if (item == NULL) {
        return -1;
    }
    int failed = PyList_Append(list, item);
    Py_DECREF(item);
    return failed;
}

PyDoc_STRVAR(merge_doc,
"merge(rows, subtract) -> (successors, spans)\n"
"\n"
"The successor tuples of a product state whose parts have the 256-cell ``rows`` (int32\n"
"arrays, or None for a part that is dead), each named once in byte order, and ``spans``, the\n"
"runs ``(low, high, index)`` of bytes with one successor (an index into successors). A byte\n"
"leads nowhere where the first part is dead on it or, unless ``subtract``, any part is. This\n"
"is a product's inner loop (constrain/regex/algebra.py): a search expands every tuple it\n"
"meets, and merging the parts' runs in Python cost most of a product's compile time.");

static PyObject *
merge(PyObject *self, PyObject *args)
{
    PyObject *o_rows;
    int subtract;
    if (!PyArg_ParseTuple(args, "Op", &o_rows, &subtract)) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(o_rows, "merge: rows must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    PyObject *result = NULL, *successors = NULL, *spans = NULL;
    Py_buffer *views = PyMem_Calloc(k > 0 ? k : 1, sizeof(Py_buffer));
    const int32_t **cells = PyMem_Calloc(k > 0 ? k : 1, sizeof(int32_t *));
    int32_t *column = PyMem_Calloc(k > 0 ? k : 1, sizeof(int32_t));
    /* The distinct alive columns seen so far, k cells each: a state has a few dozen runs at most. */
    int32_t *seen = PyMem_Calloc((size_t)(k > 0 ? k : 1) * 256, sizeof(int32_t));
    Py_ssize_t held = 0, named = 0;
    if (views == NULL || cells == NULL || column == NULL || seen == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (k == 0) {
        PyErr_SetString(PyExc_ValueError, "merge: a product has at least one part");
        goto done;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *row = PySequence_Fast_GET_ITEM(seq, j);
        if (row == Py_None) {
            continue;
        }
        if (PyObject_GetBuffer(row, &views[j], PyBUF_C_CONTIGUOUS) < 0) {
            goto done;
        }
        held = j + 1;
        if (views[j].itemsize != 4 || views[j].len != 256 * 4) {
            PyBuffer_Release(&views[j]);
            views[j].obj = NULL;
            PyErr_SetString(PyExc_ValueError, "merge: each row holds 256 int32 cells");
            goto done;
        }
        cells[j] = views[j].buf;
    }
    successors = PyList_New(0);
    spans = PyList_New(0);
    if (successors == NULL || spans == NULL) {
        goto done;
    }
    int low = 0;
    while (low < 256) {
        /* The column at ``low``, and the last byte of the stretch that keeps it. */
        int alive = 1;
        for (Py_ssize_t j = 0; j < k; j++) {
            int32_t cell = cells[j] == NULL ? DEAD : cells[j][low];
            column[j] = cell < 0 ? DEAD : cell;
            if (column[j] == DEAD && (j == 0 || !subtract)) {
                alive = 0;
            }
        }
        int high = low;
        while (high < 255) {
            int same = 1;
            for (Py_ssize_t j = 0; j < k && same; j++) {
                int32_t cell = cells[j] == NULL ? DEAD : cells[j][high + 1];
                same = (cell < 0 ? DEAD : cell) == column[j];
            }
            if (!same) {
                break;
            }
            high++;
        }
        if (alive) {
            Py_ssize_t index = 0;
            while (index < named && memcmp(seen + index * k, column, (size_t)k * sizeof(int32_t)) != 0) {
                index++;
            }
            if (index == named) {
                PyObject *key = PyTuple_New(k);
                if (key == NULL) {
                    goto done;
                }
                for (Py_ssize_t j = 0; j < k; j++) {
                    PyObject *cell = PyLong_FromLong(column[j]);
                    if (cell == NULL) {
                        Py_DECREF(key);
                        goto done;
                    }
                    PyTuple_SET_ITEM(key, j, cell);
                }
                int failed = PyList_Append(successors, key);
                Py_DECREF(key);
                if (failed < 0) {
                    goto done;
                }
                memcpy(seen + named * k, column, (size_t)k * sizeof(int32_t));
                named++;
            }
            if (append_new(spans, Py_BuildValue("(iin)", low, high, index)) < 0) {
                goto done;
            }
        }
        low = high + 1;
    }
    result = PyTuple_Pack(2, successors, spans);
done:
    for (Py_ssize_t j = 0; j < held; j++) {
        if (views[j].obj != NULL) {
            PyBuffer_Release(&views[j]);
        }
    }
    Py_XDECREF(successors);
    Py_XDECREF(spans);
    PyMem_Free(views);
    PyMem_Free(cells);
    PyMem_Free(column);
    PyMem_Free(seen);
    Py_DECREF(seq);
    return result;
}

/* Read ``item`` as ``(low, high, target)`` with a byte range low..high: its bounds and its target
   (borrowed). -1 with an exception set, naming ``what`` (e.g. "expand: an edge"), where it is not. */
static int
byte_range(PyObject *item, const char *what, int *low, int *high, PyObject **target)
{
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
        PyErr_Format(PyExc_TypeError, "%s is a (low, high, target) tuple", what);
        return -1;
    }
    long lo = PyLong_AsLong(PyTuple_GET_ITEM(item, 0)), hi = PyLong_AsLong(PyTuple_GET_ITEM(item, 1));
    if (PyErr_Occurred()) {
        return -1;
    }
    if (lo < 0 || hi > 255 || lo > hi) {
        PyErr_Format(PyExc_ValueError, "%s's bytes lie within 0..255, low <= high", what);
        return -1;
    }
    *low = (int)lo;
    *high = (int)hi;
    *target = PyTuple_GET_ITEM(item, 2);
    return 0;
}

PyDoc_STRVAR(expand_doc,
"expand(state, members, edges, extra, known, pending, row) -> (placed, codes)\n"
"\n"
"A subset state's row (``LazyDFA._expand_one``, constrain/regex/automaton.py): the moves of its\n"
"``members`` (a frozenset of virtual states ``(q, counters)``, each moving along ``edges[q]``, a\n"
"list of ``(low, high, target)``, to ``(target, counters)``) and the ``extra`` moves ``(low,\n"
"high, virtual state)`` (embedded automata) are cut into runs of bytes with one set of targets:\n"
"the one target where a single distinct one covers the run, else their frozenset (``sweep_runs``).\n"
"Each run is written into the 256-cell int32 ``row``: the successor ``known[targets]`` where that\n"
"dict holds one, else a pending cell (``DEAD - 1 - code``, where ``code`` is the index of the\n"
"entry ``(state, low, high, targets)`` appended to the list ``pending``: ``LazyDFA._place``).\n"
"Returns the runs with a cell other than DEAD as ``(low, high, cell)`` and the new codes.\n"
"One call per state that a walk or a product search expands: building every move as a tuple in\n"
"Python, sorting them and cutting them cost more than the rest of a first visit's expansion.");

/* One move of ``expand``: bytes low..high to the virtual state (target, counters), or to
   ``target`` itself where counters is NULL (an extra move). Both borrowed. */
typedef struct {
    int low, high;
    PyObject *target, *counters;
} Move;

/* The virtual state a move leads to (a new reference). */
static PyObject *
move_target(const Move *move)
{
    if (move->counters == NULL) {
        Py_INCREF(move->target);
        return move->target;
    }
    return PyTuple_Pack(2, move->target, move->counters);
}

/* Append the move ``item`` (``(low, high, target)``, read by ``byte_range`` naming ``what``) with
   ``counters`` (borrowed, or NULL) to ``*moves`` (``*n`` of them, room for ``*cap``). -1 with an
   exception set. */
static int
add_move(Move **moves, Py_ssize_t *n, Py_ssize_t *cap, PyObject *item, const char *what, PyObject *counters)
{
    if (*n == *cap) {
        Py_ssize_t wanted = *cap ? 2 * *cap : 64;
        Move *bigger = PyMem_Realloc(*moves, wanted * sizeof(Move));
        if (bigger == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        *moves = bigger;
        *cap = wanted;
    }
    Move *move = &(*moves)[*n];
    if (byte_range(item, what, &move->low, &move->high, &move->target) < 0) {
        return -1;
    }
    move->counters = counters;
    (*n)++;
    return 0;
}

static PyObject *
expand(PyObject *self, PyObject *args)
{
    PyObject *o_state, *members, *edges, *extra, *known, *pending, *o_row;
    if (!PyArg_ParseTuple(args, "OOO!O!O!O!O", &o_state, &members, &PyList_Type, &edges, &PyList_Type, &extra,
                          &PyDict_Type, &known, &PyList_Type, &pending, &o_row)) {
        return NULL;
    }
    if (!PyFrozenSet_Check(members)) { /* it holds the members (and their counters) alive throughout */
        PyErr_SetString(PyExc_TypeError, "expand: members must be a frozenset of (state, counters) tuples");
        return NULL;
    }
    Buffers b = {.held = 0};
    int32_t *row;
    Py_ssize_t cells, n = 0, cap = 0;
    Move *moves = NULL;
    Py_ssize_t *covering = NULL;
    PyObject *result = NULL, *placed = NULL, *codes = NULL, *iter = NULL, *member, *active = NULL;
    unsigned char cut[257] = {0};
    if (take(&b, o_row, 4, 1, "row", &row, &cells) < 0) {
        goto done;
    }
    if (row == NULL || cells != 256) {
        PyErr_SetString(PyExc_ValueError, "expand: row holds 256 int32 cells");
        goto done;
    }
    iter = PyObject_GetIter(members);
    if (iter == NULL) {
        goto done;
    }
    /* (Everything borrowed below stays alive: the frozenset holds the members, the lists their
       items, and this call runs no Python code but what a collection could (finalizers, which
       never touch an automaton; and builds run with the collector paused, core/collector.py).) */
    while ((member = PyIter_Next(iter)) != NULL) {
        Py_DECREF(member);
        if (!PyTuple_Check(member) || PyTuple_GET_SIZE(member) != 2) {
            PyErr_SetString(PyExc_TypeError, "expand: a member is a (state, counters) tuple");
            goto done;
        }
        Py_ssize_t q = PyLong_AsSsize_t(PyTuple_GET_ITEM(member, 0));
        if (q == -1 && PyErr_Occurred()) {
            goto done;
        }
        if (q < 0 || q >= PyList_GET_SIZE(edges) || !PyList_Check(PyList_GET_ITEM(edges, q))) {
            PyErr_Format(PyExc_IndexError, "expand: state %zd has no edge list", q);
            goto done;
        }
        PyObject *list = PyList_GET_ITEM(edges, q);
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
            if (add_move(&moves, &n, &cap, PyList_GET_ITEM(list, i), "expand: an edge", PyTuple_GET_ITEM(member, 1)) < 0) {
                goto done;
            }
        }
    }
    if (PyErr_Occurred()) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(extra); i++) {
        if (add_move(&moves, &n, &cap, PyList_GET_ITEM(extra, i), "expand: an extra move", NULL) < 0) {
            goto done;
        }
    }
    /* The bytes between two cuts form an interval that each move covers whole or not at all;
       each interval's covering moves are listed once, in move order (a wide state's moves
       number in the thousands, and scanning them all for each interval was most of a call). */
    int interval[256], starts[257], intervals = 0;
    Py_ssize_t offsets[258] = {0};
    for (Py_ssize_t i = 0; i < n; i++) {
        cut[moves[i].low] = 1;
        cut[moves[i].high + 1] = 1;
    }
    for (int byte = 0; byte < 256; byte++) {
        if (byte == 0 || cut[byte]) {
            starts[intervals++] = byte;
        }
        interval[byte] = intervals - 1;
    }
    starts[intervals] = 256;
    for (Py_ssize_t i = 0; i < n; i++) {
        for (int k = interval[moves[i].low]; k <= interval[moves[i].high]; k++) {
            offsets[k + 2]++;
        }
    }
    for (int k = 0; k < intervals; k++) {
        offsets[k + 2] += offsets[k + 1];
    }
    covering = PyMem_Calloc(offsets[intervals + 1] > 0 ? offsets[intervals + 1] : 1, sizeof(Py_ssize_t));
    placed = PyList_New(0);
    codes = PyList_New(0);
    if (covering == NULL || placed == NULL || codes == NULL) {
        if (covering == NULL) {
            PyErr_NoMemory();
        }
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) { /* (offsets[k + 1] is where interval k's next move goes) */
        for (int k = interval[moves[i].low]; k <= interval[moves[i].high]; k++) {
            covering[offsets[k + 1]++] = i;
        }
    }
    for (int k = 0; k < intervals; k++) {
        int low = starts[k], high = starts[k + 1] - 1;
        Py_ssize_t count = offsets[k + 1] - offsets[k], *over = covering + offsets[k];
        if (count == 0) {
            continue;
        }
        PyObject *targets;
        if (count == 1) {
            targets = move_target(&moves[over[0]]);
        } else {
            Py_XDECREF(active);
            active = PyTuple_New(count);
            if (active == NULL) {
                goto done;
            }
            for (Py_ssize_t j = 0; j < count; j++) {
                PyObject *target = move_target(&moves[over[j]]);
                if (target == NULL) {
                    goto done;
                }
                PyTuple_SET_ITEM(active, j, target);
            }
            targets = PyFrozenSet_New(active);
            if (targets != NULL && PySet_GET_SIZE(targets) == 1) { /* equal targets: the one they are */
                Py_DECREF(targets);
                targets = PyTuple_GET_ITEM(active, 0);
                Py_INCREF(targets);
            }
        }
        if (targets == NULL) {
            goto done;
        }
        PyObject *successor = PyDict_GetItemWithError(known, targets); /* borrowed */
        long cell;
        if (successor != NULL) {
            cell = PyLong_AsLong(successor);
        } else if (!PyErr_Occurred()) {
            Py_ssize_t code = PyList_GET_SIZE(pending);
            if (append_new(codes, PyLong_FromSsize_t(code)) < 0
                || append_new(pending, Py_BuildValue("(OiiO)", o_state, low, high, targets)) < 0) {
                Py_DECREF(targets);
                goto done;
            }
            cell = DEAD - 1 - (long)code;
        } else {
            cell = -1;
        }
        Py_DECREF(targets);
        if (PyErr_Occurred()) {
            goto done;
        }
        if (cell != DEAD) {
            for (int byte = low; byte <= high; byte++) {
                row[byte] = (int32_t)cell;
            }
            if (append_new(placed, Py_BuildValue("(iil)", low, high, cell)) < 0) {
                goto done;
            }
        }
    }
    result = PyTuple_Pack(2, placed, codes);
done:
    release(&b);
    Py_XDECREF(iter);
    Py_XDECREF(active);
    Py_XDECREF(placed);
    Py_XDECREF(codes);
    PyMem_Free(moves);
    PyMem_Free(covering);
    return result;
}

/* Push a borrowed state onto a walk's stack, doubling it when full: 0, or -1 with MemoryError. */
static int
push_state(PyObject ***stack, Py_ssize_t *size, Py_ssize_t *top, PyObject *state)
{
    if (*top == *size) {
        PyObject **grown = PyMem_Realloc(*stack, (size_t)(*size * 2) * sizeof(PyObject *));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        *stack = grown;
        *size *= 2;
    }
    (*stack)[(*top)++] = state;
    return 0;
}

PyDoc_STRVAR(closure_doc,
"closure(q, seen, epsilon, edges, live, accept, special, caps, counters, free) -> (reading, special_states)\n"
"\n"
"The plain part of an epsilon closure (``LazyDFA._closure``, constrain/regex/automaton.py):\n"
"from NFA state ``q`` along ``epsilon`` (a list of target lists) through states that no dict of\n"
"the tuple ``special`` holds (deferred stubs, counter operations, embedded automata, bounded\n"
"lengths: their counters change, which is Python's part). A state of the dict ``caps`` is plain\n"
"but for its bound: its ``(slot, cap)`` pair drops it (doomed) where ``counters[slot]`` is below\n"
"``free`` and past ``cap``; it is looked up before ``special``. ``seen`` (a set of states, shared\n"
"with the caller for one counter stack, ``counters``) is read and extended. Returns the live\n"
"plain states that read a byte (``edges[s]`` not empty) or are ``accept``, and the special states\n"
"met, not entered. ``plain_closure`` is the Python path. Most states of a Thompson NFA are plain,\n"
"and the closure was the first item of every first walk's profile; inside a bounded string\n"
"(``maxLength``) every state was special until ``caps`` took them in.");

/* Whether a state of ``caps`` is doomed under ``counters`` (1), not (0), or an error (-1). */
static int
capped_out(PyObject *cap, PyObject *counters, Py_ssize_t free)
{
    if (!PyTuple_Check(cap) || PyTuple_GET_SIZE(cap) != 2) {
        PyErr_SetString(PyExc_TypeError, "closure: caps holds (slot, cap) pairs");
        return -1;
    }
    Py_ssize_t slot = PyLong_AsSsize_t(PyTuple_GET_ITEM(cap, 0));
    if (slot == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (slot < 0 || slot >= PyTuple_GET_SIZE(counters)) {
        PyErr_Format(PyExc_IndexError, "closure: slot %zd is not in the counters", slot);
        return -1;
    }
    Py_ssize_t count = PyLong_AsSsize_t(PyTuple_GET_ITEM(counters, slot));
    Py_ssize_t bound = PyLong_AsSsize_t(PyTuple_GET_ITEM(cap, 1));
    if (PyErr_Occurred()) {
        return -1;
    }
    return count < free && count > bound;
}

static PyObject *
closure(PyObject *self, PyObject *args)
{
    PyObject *q, *seen, *epsilon, *edges, *o_live, *special, *caps, *counters;
    long accept;
    Py_ssize_t free;
    if (!PyArg_ParseTuple(args, "OO!O!O!OlO!O!O!n", &q, &PySet_Type, &seen, &PyList_Type, &epsilon, &PyList_Type,
                          &edges, &o_live, &accept, &PyTuple_Type, &special, &PyDict_Type, &caps, &PyTuple_Type,
                          &counters, &free)) {
        return NULL;
    }
    Buffers b = {.held = 0};
    const unsigned char *live;
    Py_ssize_t states;
    PyObject *result = NULL, *reading = PyList_New(0), *met = PyList_New(0);
    Py_ssize_t size = 64, top = 0;
    PyObject **stack = PyMem_Malloc((size_t)size * sizeof(PyObject *));
    if (reading == NULL || met == NULL) {
        goto done;
    }
    if (stack == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (take(&b, o_live, 1, 0, "live", &live, &states) < 0) {
        goto done;
    }
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(special); j++) {
        if (!PyDict_Check(PyTuple_GET_ITEM(special, j))) {
            PyErr_SetString(PyExc_TypeError, "closure: special holds dicts");
            goto done;
        }
    }
    stack[top++] = q; /* borrowed: the caller's q, then the epsilon lists' items */
    while (top > 0) {
        PyObject *state = stack[--top];
        PyObject *cap = PyDict_GetItemWithError(caps, state); /* borrowed */
        if (cap == NULL && PyErr_Occurred()) {
            goto done;
        }
        if (cap != NULL) {
            int doomed = capped_out(cap, counters, free);
            if (doomed < 0) {
                goto done;
            }
            if (doomed) {
                continue;
            }
        }
        int is_special = 0;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(special) && !is_special && cap == NULL; j++) {
            is_special = PyDict_Contains(PyTuple_GET_ITEM(special, j), state);
            if (is_special < 0) {
                goto done;
            }
        }
        if (is_special) {
            if (PyList_Append(met, state) < 0) {
                goto done;
            }
            continue;
        }
        Py_ssize_t s = PyLong_AsSsize_t(state);
        if (s == -1 && PyErr_Occurred()) {
            goto done;
        }
        if (s < 0 || s >= states || s >= PyList_GET_SIZE(epsilon) || s >= PyList_GET_SIZE(edges)) {
            PyErr_Format(PyExc_IndexError, "closure: state %zd is not in the tables", s);
            goto done;
        }
        if (!live[s]) {
            continue;
        }
        PyObject *out = PyList_GET_ITEM(edges, s);
        if (!PyList_Check(out)) {
            PyErr_SetString(PyExc_TypeError, "closure: edges holds lists");
            goto done;
        }
        if ((PyList_GET_SIZE(out) > 0 || s == accept) && PyList_Append(reading, state) < 0) {
            goto done;
        }
        PyObject *targets = PyList_GET_ITEM(epsilon, s);
        if (!PyList_Check(targets)) {
            PyErr_SetString(PyExc_TypeError, "closure: epsilon holds lists");
            goto done;
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(targets); i++) {
            PyObject *target = PyList_GET_ITEM(targets, i);
            int known = PySet_Contains(seen, target);
            if (known < 0 || (!known && PySet_Add(seen, target) < 0)) {
                goto done;
            }
            if (known) {
                continue;
            }
            if (push_state(&stack, &size, &top, target) < 0) {
                goto done;
            }
        }
    }
    result = PyTuple_Pack(2, reading, met);
done:
    release(&b);
    PyMem_Free(stack);
    Py_XDECREF(reading);
    Py_XDECREF(met);
    return result;
}

PyDoc_STRVAR(lexer_closure_doc,
"lexer_closure(seeds, live, pending, accept, edges, eps) -> (threads, tag) or (None, state)\n"
"\n"
"A lexer state's threads (``LexerDFA._closure``, constrain/cfg/lexer.py): from the NFA states\n"
"``seeds`` in priority order, depth first along ``eps`` (lists of targets, in priority order),\n"
"the live states that read a byte (``edges[p]`` not empty), cut at the first accepting state\n"
"(``accept[p] >= 0``), whose tag comes back; -1 where none is met. A state of the set\n"
"``pending`` has no edges yet: the walk stops and returns ``(None, state)``, and the caller\n"
"fills it in (``PriorityNFA.materialize``) and asks again. ``priority_closure`` is the Python\n"
"path. A fuzzed terminal's lexer states held hundreds of threads, 1.7 ms a closure in Python.");

static uint32_t *lexer_seen = NULL;
static Py_ssize_t lexer_seen_size = 0;
static uint32_t lexer_generation = 0;

static PyObject *
lexer_closure(PyObject *self, PyObject *args)
{
    PyObject *seeds, *o_live, *pending, *accept, *edges, *eps;
    if (!PyArg_ParseTuple(args, "O!OO!O!O!O!", &PyList_Type, &seeds, &o_live, &PySet_Type, &pending, &PyList_Type,
                          &accept, &PyList_Type, &edges, &PyList_Type, &eps)) {
        return NULL;
    }
    Buffers b = {.held = 0};
    const unsigned char *live;
    Py_ssize_t states;
    PyObject *result = NULL, *out = PyList_New(0);
    uint32_t *seen;
    Py_ssize_t size = 64, top = 0;
    PyObject **stack = PyMem_Malloc((size_t)size * sizeof(PyObject *));
    if (out == NULL) {
        goto done;
    }
    if (stack == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (take(&b, o_live, 1, 0, "live", &live, &states) < 0) {
        goto done;
    }
    if (live == NULL) {
        PyErr_SetString(PyExc_TypeError, "lexer_closure: live is a buffer");
        goto done;
    }
    /* The states seen, by generation: one array for every call (the GIL is held throughout, so
       no two calls share it at once), grown to the NFA's size, never cleared (an NFA of a million
       states made clearing a fresh array most of a call). */
    if (states > lexer_seen_size) {
        uint32_t *grown = PyMem_Realloc(lexer_seen, (size_t)states * sizeof(uint32_t));
        if (grown == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        memset(grown + lexer_seen_size, 0, (size_t)(states - lexer_seen_size) * sizeof(uint32_t));
        lexer_seen = grown;
        lexer_seen_size = states;
    }
    if (++lexer_generation == 0) { /* wrapped: start over */
        memset(lexer_seen, 0, (size_t)lexer_seen_size * sizeof(uint32_t));
        lexer_generation = 1;
    }
    seen = lexer_seen;
    const uint32_t generation = lexer_generation;
    for (Py_ssize_t i = PyList_GET_SIZE(seeds) - 1; i >= 0; i--) {
        if (push_state(&stack, &size, &top, PyList_GET_ITEM(seeds, i)) < 0) { /* borrowed, as the eps lists' items */
            goto done;
        }
    }
    long tag = -1;
    while (top > 0) {
        PyObject *state = stack[--top];
        Py_ssize_t p = PyLong_AsSsize_t(state);
        if (p == -1 && PyErr_Occurred()) {
            goto done;
        }
        if (p < 0 || p >= states || p >= PyList_GET_SIZE(accept) || p >= PyList_GET_SIZE(edges) ||
            p >= PyList_GET_SIZE(eps)) {
            PyErr_Format(PyExc_IndexError, "lexer_closure: state %zd is not in the tables", p);
            goto done;
        }
        if (seen[p] == generation) {
            continue;
        }
        seen[p] = generation;
        if (!live[p]) {
            continue;
        }
        int waiting = PySet_Contains(pending, state);
        if (waiting < 0) {
            goto done;
        }
        if (waiting) {
            result = Py_BuildValue("(On)", Py_None, p);
            goto done;
        }
        long accepts = PyLong_AsLong(PyList_GET_ITEM(accept, p));
        if (accepts == -1 && PyErr_Occurred()) {
            goto done;
        }
        if (accepts >= 0) {
            tag = accepts;
            break;
        }
        PyObject *reads = PyList_GET_ITEM(edges, p), *targets = PyList_GET_ITEM(eps, p);
        if (!PyList_Check(reads) || !PyList_Check(targets)) {
            PyErr_SetString(PyExc_TypeError, "lexer_closure: edges and eps hold lists");
            goto done;
        }
        if (PyList_GET_SIZE(reads) > 0 && PyList_Append(out, state) < 0) {
            goto done;
        }
        for (Py_ssize_t i = PyList_GET_SIZE(targets) - 1; i >= 0; i--) {
            if (push_state(&stack, &size, &top, PyList_GET_ITEM(targets, i)) < 0) {
                goto done;
            }
        }
    }
    PyObject *threads = PyList_AsTuple(out);
    if (threads != NULL) {
        result = Py_BuildValue("(Nl)", threads, tag);
    }
done:
    release(&b);
    PyMem_Free(stack);
    Py_XDECREF(out);
    return result;
}

PyDoc_STRVAR(relocate_doc,
"relocate(edges, epsilon, base, top, offset) -> None\n"
"\n"
"Append to the NFA tables ``edges`` (lists of ``(low, high, target)``) and ``epsilon`` (lists of\n"
"targets) a copy of the states ``base..top-1``, each target moved by ``offset``; edges that leave\n"
"the slice are left out (``ByteNFA._instantiate``, constrain/regex/automaton.py, where a node\n"
"built before is copied: every item of an array of objects, every ``$ref`` to one definition).\n"
"Copying hundreds of thousands of states a list at a time was the first walks' largest cost.");

static PyObject *
relocate(PyObject *self, PyObject *args)
{
    PyObject *edges, *epsilon;
    Py_ssize_t base, top, offset;
    if (!PyArg_ParseTuple(args, "O!O!nnn", &PyList_Type, &edges, &PyList_Type, &epsilon, &base, &top, &offset)) {
        return NULL;
    }
    if (base < 0 || top < base || top > PyList_GET_SIZE(edges) || top > PyList_GET_SIZE(epsilon)) {
        PyErr_SetString(PyExc_IndexError, "relocate: the slice lies outside the tables");
        return NULL;
    }
    for (Py_ssize_t q = base; q < top; q++) {
        PyObject *out = PyList_GET_ITEM(edges, q), *free = PyList_GET_ITEM(epsilon, q);
        if (!PyList_Check(out) || !PyList_Check(free)) {
            PyErr_SetString(PyExc_TypeError, "relocate: the tables hold lists");
            return NULL;
        }
        PyObject *moved = PyList_New(0);
        if (moved == NULL) {
            return NULL;
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(out); i++) {
            int low, high;
            PyObject *o_target;
            if (byte_range(PyList_GET_ITEM(out, i), "relocate: an edge", &low, &high, &o_target) < 0) {
                Py_DECREF(moved);
                return NULL;
            }
            Py_ssize_t target = PyLong_AsSsize_t(o_target);
            if (target == -1 && PyErr_Occurred()) {
                Py_DECREF(moved);
                return NULL;
            }
            if (base <= target && target < top
                && append_new(moved, Py_BuildValue("(iin)", low, high, target + offset)) < 0) {
                Py_DECREF(moved);
                return NULL;
            }
        }
        if (append_new(edges, moved) < 0) {
            return NULL;
        }
        moved = PyList_New(0);
        if (moved == NULL) {
            return NULL;
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(free); i++) {
            Py_ssize_t target = PyLong_AsSsize_t(PyList_GET_ITEM(free, i));
            if (target == -1 && PyErr_Occurred()) {
                Py_DECREF(moved);
                return NULL;
            }
            if (base <= target && target < top && append_new(moved, PyLong_FromSsize_t(target + offset)) < 0) {
                Py_DECREF(moved);
                return NULL;
            }
        }
        if (append_new(epsilon, moved) < 0) {
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(coreachable_doc,
"coreachable(edges, epsilon, first, target, deferred, blocked) -> bytearray\n"
"\n"
"Per NFA state ``first..len(edges)-1``, 1 where ``target`` can be reached from it, else 0: a\n"
"backward search (``ByteNFA._coreachable``, constrain/regex/automaton.py, whose Python loop is\n"
"the fallback with the same result). A state moves to the targets of its ``edges`` (lists of\n"
"``(low, high, target)``) and ``epsilon`` lists, and a stub in ``deferred`` (a dict) to the state\n"
"after it; targets outside the range are not followed. A loop state in ``blocked`` (a set) never\n"
"takes its last epsilon target (its way out). Run at every build of a deferred part, on the\n"
"fragment just built: on the first walks of 150 dev schemas 0.43 s in Python, 0.12 s here.");

static PyObject *
coreachable(PyObject *self, PyObject *args)
{
    PyObject *edges, *epsilon, *deferred, *blocked;
    Py_ssize_t first, target;
    if (!PyArg_ParseTuple(args, "O!O!nnO!O!", &PyList_Type, &edges, &PyList_Type, &epsilon, &first, &target,
                          &PyDict_Type, &deferred, &PySet_Type, &blocked)) {
        return NULL;
    }
    Py_ssize_t top = PyList_GET_SIZE(edges);
    if (first < 0 || first > top || PyList_GET_SIZE(epsilon) != top || target < first || target >= top) {
        PyErr_SetString(PyExc_IndexError, "coreachable: first or target lies outside the tables");
        return NULL;
    }
    Py_ssize_t n = top - first;
    /* Two passes over the moves: count each target's predecessors, then place them (CSR). */
    Py_ssize_t *start = PyMem_Calloc((size_t)n + 1, sizeof(Py_ssize_t));
    Py_ssize_t *fill = NULL, *preds = NULL, *stack = NULL;
    PyObject *result = NULL;
    if (start == NULL) {
        return PyErr_NoMemory();
    }
    for (int pass = 0; pass < 2; pass++) {
        for (Py_ssize_t q = first; q < top; q++) {
            PyObject *out = PyList_GET_ITEM(edges, q), *free = PyList_GET_ITEM(epsilon, q);
            if (!PyList_Check(out) || !PyList_Check(free)) {
                PyErr_SetString(PyExc_TypeError, "coreachable: the tables hold lists");
                goto done;
            }
            Py_ssize_t n_out = PyList_GET_SIZE(out), n_free = PyList_GET_SIZE(free);
            int in_blocked = 0, in_deferred = 0;
            if (PySet_GET_SIZE(blocked) > 0 || PyDict_GET_SIZE(deferred) > 0) {
                PyObject *key = PyLong_FromSsize_t(q);
                if (key == NULL) {
                    goto done;
                }
                in_blocked = PySet_GET_SIZE(blocked) > 0 ? PySet_Contains(blocked, key) : 0;
                if (in_blocked >= 0 && PyDict_GET_SIZE(deferred) > 0) {
                    in_deferred = PyDict_Contains(deferred, key);
                }
                Py_DECREF(key);
                if (in_blocked < 0 || in_deferred < 0) {
                    goto done;
                }
            }
            Py_ssize_t moves = n_out + n_free + (in_deferred ? 1 : 0);
            for (Py_ssize_t i = 0; i < moves; i++) {
                Py_ssize_t t;
                if (i < n_out) {
                    int low, high;
                    PyObject *o_target;
                    PyObject *edge = PyList_GET_ITEM(out, i);
                    if (byte_range(edge, "coreachable: an edge", &low, &high, &o_target) < 0) {
                        goto done;
                    }
                    t = PyLong_AsSsize_t(o_target);
                } else if (i < n_out + n_free) {
                    if (in_blocked && i == n_out + n_free - 1) {
                        continue;  /* a blocked loop's way out */
                    }
                    t = PyLong_AsSsize_t(PyList_GET_ITEM(free, i - n_out));
                } else {
                    t = q + 1;  /* an unbuilt stub passes to its exit */
                }
                if (t == -1 && PyErr_Occurred()) {
                    goto done;
                }
                if (t < first || t >= top) {
                    continue;
                }
                if (pass == 0) {
                    start[t - first + 1]++;
                } else {
                    preds[fill[t - first]++] = q - first;
                }
            }
        }
        if (pass == 0) {
            for (Py_ssize_t i = 0; i < n; i++) {
                start[i + 1] += start[i];
            }
            fill = PyMem_Malloc(((size_t)n + 1) * sizeof(Py_ssize_t));
            preds = PyMem_Malloc(((size_t)start[n] + 1) * sizeof(Py_ssize_t));
            stack = PyMem_Malloc(((size_t)n + 1) * sizeof(Py_ssize_t));
            if (fill == NULL || preds == NULL || stack == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            memcpy(fill, start, ((size_t)n + 1) * sizeof(Py_ssize_t));
        }
    }
    result = PyByteArray_FromStringAndSize(NULL, n);
    if (result == NULL) {
        goto done;
    }
    char *live = PyByteArray_AS_STRING(result);
    memset(live, 0, (size_t)n);
    Py_ssize_t depth = 0;
    live[target - first] = 1;
    stack[depth++] = target - first;
    while (depth > 0) {
        Py_ssize_t t = stack[--depth];
        for (Py_ssize_t i = start[t]; i < start[t + 1]; i++) {
            Py_ssize_t q = preds[i];
            if (!live[q]) {
                live[q] = 1;
                stack[depth++] = q;
            }
        }
    }
done:
    PyMem_Free(start);
    PyMem_Free(fill);
    PyMem_Free(preds);
    PyMem_Free(stack);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, walk_doc},
    {"scatter", scatter, METH_VARARGS, scatter_doc},
    {"gather", gather, METH_VARARGS, gather_doc},
    {"unpack", unpack, METH_VARARGS, unpack_doc},
    {"lex_walk", lex_walk, METH_VARARGS, lex_walk_doc},
    {"merge", merge, METH_VARARGS, merge_doc},
    {"expand", expand, METH_VARARGS, expand_doc},
    {"closure", closure, METH_VARARGS, closure_doc},
    {"lexer_closure", lexer_closure, METH_VARARGS, lexer_closure_doc},
    {"relocate", relocate, METH_VARARGS, relocate_doc},
    {"coreachable", coreachable, METH_VARARGS, coreachable_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "constrain._kernel",
    "Compiled kernels (see constrain.kernel, which falls back to numpy without them).", -1, methods,
};

PyMODINIT_FUNC
PyInit__kernel(void)
{
    PyObject *m = PyModule_Create(&module);
    /* What the Python side checks before it uses these kernels (constrain/kernel.py): 2 hands back
       tasks with pending successors, 3 adds unpack, 4 merge, 5 sweep, place, closure and relocate, 6 expand (sweep and place
       in one), 9 closure's caps (a bounded Length's plain states), 10 lexer_closure, 11 coreachable.
       A build older than its Python is left unused, not misread. */
    if (m != NULL && PyModule_AddIntConstant(m, "VERSION", 11) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
