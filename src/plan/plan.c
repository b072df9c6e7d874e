/* The plan of one iteration: storages and their liveness from the DAG, then, for the classes a planner set,
 * device blocks placed at fixed offsets and the ordered actions the executor replays. It calls no planner:
 * plan_build.c goes from a request to a plan through the planners' table. */
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

#include "mem/offsets.h"
#include "plan/plan_validate.h"
#include "plan/profile.h"

const char *vdnn_storage_kind_name(vdnn_storage_kind k)
{
    static const char *names[VDNN_ST_KIND_COUNT] = {"weight", "bias", "stats", "wgrad", "bgrad",
                                                    "wmom",   "bmom", "labels", "loss", "fmap",
                                                    "aux",    "grad", "temp",  "workspace"};
    return k < VDNN_ST_KIND_COUNT ? names[k] : "?";
}

static int grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return 0;
    int nc = *cap ? *cap * 2 : 64;
    while (nc < need) nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

static int add_storage(vdnn_plan_t *p, vdnn_storage_kind kind, int layer, size_t bytes, bool persistent,
                       const char *name, const char *suffix)
{
    if (grow((void **)&p->st, &p->cap_storages, p->n_storages + 1, sizeof(vdnn_storage))) return -1;
    vdnn_storage *s = &p->st[p->n_storages];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s%s", name, suffix);
    s->kind = kind;
    s->layer = layer;
    s->bytes = bytes;
    s->persistent = persistent;
    s->def_step = s->last_fwd_use = s->first_bwd_use = s->last_use = s->prefetch_step = -1;
    s->recompute_step = s->need_step = s->end_step = -1;
    s->home_fwd = s->upd_prefetch = -1;
    s->first_event = -1;
    return p->n_storages++;
}

static int add_block(vdnn_plan_t *p, int storage, int begin, int end)
{
    if (grow((void **)&p->blocks, &p->cap_blocks, p->n_blocks + 1, sizeof(vdnn_block))) return -1;
    bool held = p->held_batches > 1 && !p->st[storage].persistent && begin < p->bwd_begin && end >= p->bwd_begin;
    p->blocks[p->n_blocks] = (vdnn_block){storage, vdnn_align_up(p->st[storage].bytes), 0, begin, end, held};
    return p->n_blocks++;
}

static int add_action(vdnn_plan_t *p, vdnn_action_kind kind, int a, int b, int event)
{
    if (grow((void **)&p->actions, &p->cap_actions, p->n_actions + 1, sizeof(vdnn_action))) return -1;
    p->actions[p->n_actions] = (vdnn_action){kind, a, b, event};
    return p->n_actions++;
}

/* Policy um keeps each swapped storage at its own range of one managed pool; ranges start on 64 KiB, the
 * Unified Memory driver's migration unit on current GPUs, so migrating one map never moves a page that a
 * kernel reading its neighbour is using. */
#define VDNN_UM_ALIGN ((size_t)64 << 10)

static bool is_um(const vdnn_plan_t *p) { return p->policy == VDNN_POLICY_UM; }
static size_t um_align_up(size_t n) { return (n + VDNN_UM_ALIGN - 1) / VDNN_UM_ALIGN * VDNN_UM_ALIGN; }

/* Steps: 0 loads the batch, 1..L-1 run forward, then backward from layer L-1 down to 1, then update. */
static int fwd_step(int l) { return l; }
static int bwd_step(const vdnn_plan_t *p, int l) { return p->n_layers - 1 + (p->n_layers - l); }

/* The storages offload_params homes in host memory: what the optimizer keeps per parameter. BN running
 * statistics stay on the device (a few floats per channel, updated by forward). */
static bool homeable(vdnn_storage_kind k)
{
    return k == VDNN_ST_WEIGHT || k == VDNN_ST_BIAS || k == VDNN_ST_WMOM || k == VDNN_ST_BMOM;
}

bool vdnn_plan_offload_supported(const vdnn_plan_request *req, const char **why)
{
    *why = NULL;
    if (!req->training) return true;
    /* A home is written back once, right after the layer's fused update; the other schedules keep
     * gradients until a separate update step, with every parameter on the device. */
    if (req->memory.micro_batches > 1) *why = "micro-batches (memory.micro_batches)";
    else if (req->keep_weight_grads) *why = "weight gradients kept until a separate update step (keep_weight_grads, "
                                           "as the distributed runtimes need)";
    else if (req->memory.policy == VDNN_POLICY_UM) *why = "policy um (memory.policy; it has no pinned host pool)";
    return !*why;
}

bool vdnn_plan_stream_supported(const vdnn_plan_request *req, const char **why)
{
    *why = NULL;
    if (!req->training) return true;
    /* The host copy of a streamed input is one per step, at a place of the host pool. */
    if (req->memory.micro_batches > 1) *why = "micro-batches (memory.micro_batches)";
    else if (req->memory.policy == VDNN_POLICY_UM) *why = "policy um (memory.policy; it has no pinned host pool)";
    return !*why;
}

int vdnn_plan_streamed_layers(const vdnn_plan_t *p)
{
    int n = 0;
    for (int l = 1; l < p->n_layers; l++) n += p->ls[l].in_place;
    return n;
}

int vdnn_plan_stream_chunk(const vdnn_plan_t *p, int l, int *n_chunks)
{
    const int n = p->g->input.n, k = p->info[l].chunk_images > 0 && p->info[l].chunk_images < n ? p->info[l].chunk_images : n;
    if (n_chunks) *n_chunks = (n + k - 1) / k;
    return k;
}

/* Bytes of the two chunk buffers a streamed input of layer l is read back through. */
static size_t stream_buffer_bytes(const vdnn_plan_t *p, int l)
{
    const vdnn_shape in = p->g->layers[p->g->layers[l].inputs[0]].out;
    return 2 * (size_t)vdnn_plan_stream_chunk(p, l, NULL) * (vdnn_map_bytes(p->g, in) / (size_t)in.n);
}

static bool is_grad(const vdnn_storage *s) { return s->kind == VDNN_ST_WGRAD || s->kind == VDNN_ST_BGRAD; }

void vdnn_plan_set_offload_params(vdnn_plan_t *p, bool on)
{
    p->offload_params = on;
    for (int i = 0; i < p->n_storages_analyzed; i++) {
        vdnn_storage *s = &p->st[i];
        /* A layer with an update step of its own: its weight gradients wait in host memory too, from its backward
         * step to its update step (they are never persistent there). */
        if (is_grad(s) && p->ls[s->layer].upd >= 0) {
            s->homed = on;
            continue;
        }
        if (!homeable(s->kind)) continue;
        /* Shared parameters are read by several layers far apart (a tied table by the first layer and the last, an
         * lstm layer's by every chunk): they stay on the device (their moments are homed). */
        if ((s->kind == VDNN_ST_WEIGHT || s->kind == VDNN_ST_BIAS) && p->g->layers[s->layer].p.tied_by) continue;
        s->homed = on;
        s->persistent = !on;
    }
}

bool vdnn_plan_offload_changes_steps(const vdnn_plan_t *p)
{
    if (!p->fused_update || p->shared_steps) return false;
    for (int l = 1; l < p->n_layers; l++) {
        const vdnn_layer *ly = &p->g->layers[l];
        if (ly->p.tied_by && (ly->n_weight || ly->n_bias)) return true;
    }
    return false;
}

/* Homes from offset 0 of the host pool in storage order (a training plan and its evaluation plan list the
 * weights and biases first, alike), and the steps each homed storage is on the device. */
static void derive_homes(vdnn_plan_t *p)
{
    p->home_bytes = 0;
    for (int i = 0; i < p->n_storages; i++) {
        vdnn_storage *x = &p->st[i];
        if (!x->homed) continue;
        x->host_offset = p->home_bytes;
        p->home_bytes += vdnn_align_up(x->bytes);
        const int l = x->layer;
        const bool param = x->kind == VDNN_ST_WEIGHT || x->kind == VDNN_ST_BIAS;
        x->home_fwd = param ? fwd_step(l) : -1;
        x->prefetch_step = x->need_step = x->end_step = x->upd_prefetch = -1;
        if (!p->training) continue;
        const int u = p->ls[l].upd;
        if (is_grad(x)) {
            /* A gradient: written by the backward step (need_step), copied home after it and fetched again for
             * the update, unless that is the next step (one block). */
            x->need_step = bwd_step(p, l);
            x->end_step = u;
            if (u - 1 > x->need_step) x->upd_prefetch = u - 1;
            continue;
        }
        if (!param && u >= 0) {
            /* Momentum: the update step alone reads it, brought in one step ahead. */
            x->need_step = x->end_step = u;
            x->prefetch_step = u - 1;
            continue;
        }
        /* Backward reads it, and so does a recompute of the layer's output earlier in the backward pass. */
        const int b = bwd_step(p, l);
        const vdnn_storage *o = &p->st[p->ls[l].out];
        int need = b;
        if (param && o->cls == VDNN_CLASS_RECOMPUTE && o->recompute_step >= 0 && o->recompute_step < need)
            need = o->recompute_step;
        x->need_step = need;
        x->end_step = b;
        /* One layer ahead, as vDNN prefetches; where that reaches back into the forward use, one block. */
        x->prefetch_step = need - 1;
        if (x->home_fwd >= 0 && x->prefetch_step <= x->home_fwd) x->prefetch_step = -1;
        if (u < 0) continue;
        /* Update steps: backward only reads it; the update (and the copy home) waits for the layer's update step.
         * The block stays from backward on where that is the next step, else the update fetches it again. */
        x->end_step = u;
        if (u - 1 > b) x->upd_prefetch = u - 1;
    }
}

/* The last step of a homed storage's first training block (forward's or backward's): its backward step where
 * the update fetches it again, else its update step (the step it is copied home after; a gradient is not). */
static int home_first_end(const vdnn_plan_t *p, const vdnn_storage *x)
{
    return x->upd_prefetch >= 0 ? bwd_step(p, x->layer) : x->end_step;
}

/* Host-device traffic of the homes per iteration: in for forward and for backward, out after the update. */
static size_t home_moved(const vdnn_plan_t *p)
{
    size_t moved = 0;
    for (int i = 0; i < p->n_storages; i++) {
        const vdnn_storage *x = &p->st[i];
        if (!x->homed) continue;
        int copies = (x->home_fwd >= 0) + (p->training ? 1 + (x->prefetch_step >= 0) + (x->upd_prefetch >= 0) : 0);
        if (is_grad(x)) copies = x->upd_prefetch >= 0 ? 2 : 0; /* out after backward, in for the update */
        moved += (size_t)copies * x->bytes;
    }
    return moved;
}

void vdnn_plan_ws_range(const vdnn_plan_t *p, int l, bool fwd, size_t *least, size_t *most)
{
    *least = SIZE_MAX;
    *most = 0;
    for (int k = 0; k < p->cands[l].n; k++) {
        const vdnn_op_info *i = &p->cands[l].a[k].info;
        size_t b = fwd ? i->fwd_ws_bytes : i->bwd_ws_bytes;
        if (b < *least) *least = b;
        if (b > *most) *most = b;
    }
}

int vdnn_plan_leanest_algo(const vdnn_plan_t *p, int l)
{
    int pick = 0;
    size_t least = SIZE_MAX;
    for (int k = 0; k < p->cands[l].n; k++) {
        const vdnn_op_info *i = &p->cands[l].a[k].info;
        size_t ws = i->fwd_ws_bytes > i->bwd_ws_bytes ? i->fwd_ws_bytes : i->bwd_ws_bytes;
        if (ws < least) least = ws, pick = k;
    }
    return pick;
}

/* The largest workspace layer l may need under the algorithms the plan may take: its storage exists
 * whenever that is non-zero. */
static size_t any_ws(const vdnn_plan_t *p, int l, bool fwd)
{
    if (!p->choose_algos) return fwd ? p->info[l].fwd_ws_bytes : p->info[l].bwd_ws_bytes;
    size_t least, most;
    vdnn_plan_ws_range(p, l, fwd, &least, &most);
    return most;
}

/* Backward-time: a backward step, or an update step (update steps read their layer's gradients). */
static bool is_bwd(const vdnn_plan_t *p, int s)
{
    return s >= p->n_layers && (p->steps[s].kind == VDNN_STEP_BWD || p->steps[s].kind == VDNN_STEP_UPDATE);
}

static void use(vdnn_plan_t *p, int st, int step)
{
    if (st < 0) return;
    vdnn_storage *s = &p->st[st];
    if (s->def_step < 0 || step < s->def_step) s->def_step = step;
    if (step > s->last_use) s->last_use = step;
    if (is_bwd(p, step)) {
        if (s->first_bwd_use < 0 || step < s->first_bwd_use) s->first_bwd_use = step;
    } else if (step > s->last_fwd_use) {
        s->last_fwd_use = step;
    }
}

/* "conv1" + "relu1" -> "conv1+relu1": a storage shared by in-place layers names them all. */
static void append_name(char *dst, size_t n, const char *add)
{
    size_t len = strlen(dst), k = strlen(add);
    if (len + 1 + k + 1 > n) return;
    dst[len] = '+';
    memcpy(dst + len + 1, add, k + 1);
}

/* Whether layer l may write its output over its only input. */
static bool can_run_in_place(const vdnn_graph_t *g, const vdnn_op_info *info, int l, bool training)
{
    const vdnn_layer *L = &g->layers[l];
    if (!info[l].inplace_ok || L->n_inputs != 1) return false;
    int in = L->inputs[0];
    if (in == 0 || g->layers[in].n_consumers != 1) return false;
    if (!training) return true;
    /* The input's value must not be needed again: not by its producer's backward (needs y)
     * and not by this layer's backward (needs x). */
    return !info[in].bwd_needs_y && !info[l].bwd_needs_x;
}

/* Whether layer l streams its input under stream_inputs: it runs in place, so its input must have no other
 * reader and be needed by nobody else's backward; every algorithm the planners may pick must stream. */
static bool streams_input(const vdnn_plan_t *p, const vdnn_graph_t *g, int l)
{
    const vdnn_layer *L = &g->layers[l];
    if (!p->stream_inputs || L->n_inputs != 1) return false;
    for (int k = 0; k < p->cands[l].n; k++)
        if (!p->cands[l].a[k].info.stream_ok) return false;
    if (!p->info[l].stream_ok) return false;
    int in = L->inputs[0];
    return in != 0 && g->layers[in].n_consumers == 1 && !p->info[in].bwd_needs_y &&
           vdnn_map_bytes(g, g->layers[in].out) == vdnn_map_bytes(g, L->out);
}

static vdnn_status build_storages(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err)
{
    const int L = g->n_layers;
    const bool tr = p->training;
    int fail = 0;
    /* Persistent storages, parameters first so every plan of a net puts them at the same offsets. An lstm layer's
     * parameters keep the file layer's name (graph.h's vdnn_layer_param_prefix). */
    char pre[VDNN_NAME_LEN + 16];
    for (int l = 1; l < L; l++) {
        const vdnn_layer *ly = &g->layers[l];
        vdnn_layer_storage *s = &p->ls[l];
        vdnn_layer_param_prefix(g, l, pre, sizeof pre);
        /* A copy of a table another pipeline stage owns is stored under the owner's name (graph.h's weight_of). */
        const char *wpre = ly->weight_of[0] ? ly->weight_of : pre;
        if (ly->n_weight) fail |= (s->w = add_storage(p, VDNN_ST_WEIGHT, l, ly->n_weight * 4, true, wpre, ".weight")) < 0;
        if (ly->n_bias) fail |= (s->b = add_storage(p, VDNN_ST_BIAS, l, ly->n_bias * 4, true, pre, ".bias")) < 0;
        if (ly->n_stats) fail |= (s->stats = add_storage(p, VDNN_ST_STATS, l, ly->n_stats * 4, true, ly->name, ".stats")) < 0;
        /* A tied layer reads its owner's parameters (an earlier layer: their storages exist): the weight, and the
         * biases where it has none of its own (an lstm chunk's). */
        if (ly->p.tie) {
            s->w = p->ls[ly->p.tie].w;
            if (!ly->n_bias) s->b = p->ls[ly->p.tie].b;
        }
    }
    fail |= (p->labels = add_storage(p, VDNN_ST_LABELS, 0, vdnn_graph_label_count(g) * 4, true, "labels", "")) < 0;
    fail |= (p->loss = add_storage(p, VDNN_ST_LOSS, L - 1, sizeof(float), true, "loss", "")) < 0;
    for (int l = 1; tr && l < L; l++) {
        const vdnn_layer *ly = &g->layers[l];
        vdnn_layer_storage *s = &p->ls[l];
        /* Kept for the whole run only for a single update step; update steps free each after its layer's. */
        const bool keep = !p->fused_update && !p->update_steps;
        vdnn_layer_param_prefix(g, l, pre, sizeof pre);
        /* A table's copy is never updated here (no optimizer state), and its gradient is only its part of each
         * micro-batch, which the runtime takes right after the backward op: one transient block for every micro-batch. */
        const bool own_w = ly->n_weight && !ly->weight_of[0];
        if (ly->n_weight && !own_w)
            fail |= (s->dw = add_storage(p, VDNN_ST_TEMP, l, ly->n_weight * 4, false, ly->weight_of, ".weight.grad.part")) < 0;
        if (own_w) fail |= (s->dw = add_storage(p, VDNN_ST_WGRAD, l, ly->n_weight * 4, keep, pre, ".weight.grad")) < 0;
        if (ly->n_bias) fail |= (s->db = add_storage(p, VDNN_ST_BGRAD, l, ly->n_bias * 4, keep, pre, ".bias.grad")) < 0;
        if (own_w) fail |= (s->vw = add_storage(p, VDNN_ST_WMOM, l, ly->n_weight * 4, true, pre, ".weight.momentum")) < 0;
        if (ly->n_bias) fail |= (s->vb = add_storage(p, VDNN_ST_BMOM, l, ly->n_bias * 4, true, pre, ".bias.momentum")) < 0;
        /* AdamW's second moments: optimizer state like momentum (homed, exported and counted alike). */
        const bool adam = p->req.memory.optimizer_moments >= 2;
        if (adam && own_w)
            fail |= (s->vw2 = add_storage(p, VDNN_ST_WMOM, l, ly->n_weight * 4, true, pre, ".weight.moment2")) < 0;
        if (adam && ly->n_bias)
            fail |= (s->vb2 = add_storage(p, VDNN_ST_BMOM, l, ly->n_bias * 4, true, pre, ".bias.moment2")) < 0;
        /* Ops overwrite their gradients: a later micro-batch's go here first, then are added to the sum. */
        if (p->micro_batches > 1 && own_w)
            fail |= (s->dwm = add_storage(p, VDNN_ST_TEMP, l, ly->n_weight * 4, false, pre, ".weight.grad.micro")) < 0;
        if (p->micro_batches > 1 && ly->n_bias)
            fail |= (s->dbm = add_storage(p, VDNN_ST_TEMP, l, ly->n_bias * 4, false, pre, ".bias.grad.micro")) < 0;
        /* Shared parameters: the readers' part of their gradient, summed from the last reader (whose backward runs
         * first and writes it) down to the first, waits in the owner's dwt (dbt) for the owner's backward, which
         * adds it to its own. Each other reader writes its part aside, added to the sum after its op (exec.c). */
        if (ly->p.tie) {
            const vdnn_layer *E = &g->layers[ly->p.tie];
            vdnn_layer_storage *o = &p->ls[ly->p.tie];
            const bool bias = E->n_bias && !ly->n_bias;
            const bool last = E->p.tied_by == l;
            fail |= (s->dw = add_storage(p, VDNN_ST_TEMP, l, E->n_weight * 4, false, ly->name,
                                         last ? ".weight.grad.tied" : ".weight.grad.part")) < 0;
            if (bias)
                fail |= (s->db = add_storage(p, VDNN_ST_TEMP, l, E->n_bias * 4, false, ly->name,
                                             last ? ".bias.grad.tied" : ".bias.grad.part")) < 0;
            if (last) {
                o->dwt = s->dw;
                o->dbt = bias ? s->db : -1;
            }
        }
    }
    /* Feature maps and aux state. */
    fail |= (p->ls[0].out = add_storage(p, VDNN_ST_FMAP, 0, vdnn_map_bytes(g, g->input), false, "data", "")) < 0;
    for (int l = 1; l < L && !fail; l++) {
        const vdnn_layer *ly = &g->layers[l];
        const bool stream = streams_input(p, g, l);
        p->ls[l].in_place = stream;
        if (stream || can_run_in_place(g, p->info, l, tr)) {
            p->ls[l].out = p->ls[ly->inputs[0]].out;
            append_name(p->st[p->ls[l].out].name, sizeof p->st[0].name, ly->name);
        } else {
            fail |= (p->ls[l].out =
                         add_storage(p, VDNN_ST_FMAP, l, vdnn_map_bytes(g, ly->out), false, ly->name, "")) < 0;
        }
        if (tr && p->info[l].aux_bytes)
            fail |= (p->ls[l].aux = add_storage(p, VDNN_ST_AUX, l, p->info[l].aux_bytes, false, ly->name, ".aux")) < 0;
        if (stream && tr) {
            fail |= (p->ls[l].xs = add_storage(p, VDNN_ST_FMAP, l, vdnn_map_bytes(g, ly->out), false, ly->name,
                                               ".input.streamed")) < 0;
            fail |= (p->ls[l].xb = add_storage(p, VDNN_ST_WS, l, stream_buffer_bytes(p, l), false, ly->name,
                                               ".input.chunks")) < 0;
            if (!fail) p->st[p->ls[l].xs].streamed = true;
        }
    }
    if (fail) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory building the plan");
    return VDNN_OK;
}

/* Whether layer l updates its parameters in an update step of its own: every layer with parameters under update
 * steps (clipping), a shared parameters' owner under shared_steps. */
static bool own_update_step(const vdnn_plan_t *p, int l)
{
    const vdnn_layer *ly = &p->g->layers[l];
    if (!ly->n_weight && !ly->n_bias) return false;
    return p->update_steps || (p->shared_steps && ly->p.tied_by);
}

static vdnn_status build_steps(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err)
{
    const int L = g->n_layers;
    int n_upd = 0;
    for (int l = 1; p->training && l < L; l++) n_upd += own_update_step(p, l);
    /* A graph without parameters keeps its (empty) single update step. */
    if (!n_upd) p->update_steps = p->shared_steps = false;
    /* Shared steps come before the single update step, which stays for every other layer (fused, so empty). */
    p->n_steps = p->training ? 2 * L - 1 + n_upd + !p->update_steps : L;
    p->update_begin = p->training ? 2 * L - 1 : -1;
    p->steps = calloc((size_t)p->n_steps, sizeof(vdnn_step));
    if (!p->steps) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory building the plan");
    p->steps[0] = (vdnn_step){.kind = VDNN_STEP_LOAD, .layer = 0, .ws = -1};
    for (int l = 1; l < L; l++) p->steps[fwd_step(l)] = (vdnn_step){.kind = VDNN_STEP_FWD, .layer = l, .ws = -1};
    if (p->training) {
        for (int l = L - 1; l >= 1; l--) p->steps[bwd_step(p, l)] = (vdnn_step){.kind = VDNN_STEP_BWD, .layer = l, .ws = -1};
        if (!p->update_steps) p->steps[p->n_steps - 1] = (vdnn_step){.kind = VDNN_STEP_UPDATE, .layer = -1, .ws = -1};
        for (int l = 1, s = p->update_begin; l < L; l++) {
            if (!own_update_step(p, l)) continue;
            p->ls[l].upd = s;
            p->steps[s++] = (vdnn_step){.kind = VDNN_STEP_UPDATE, .layer = l, .ws = -1};
        }
    }
    for (int s = 0; s < p->n_steps; s++)
        for (int i = 0; i < VDNN_MAX_INPUTS; i++) p->steps[s].dx[i] = -1;

    /* Forward uses. */
    use(p, p->ls[0].out, 0);
    use(p, p->labels, 0);
    for (int l = 1; l < L; l++) {
        const vdnn_layer *ly = &g->layers[l];
        int s = fwd_step(l);
        for (int i = 0; i < ly->n_inputs; i++) use(p, p->ls[ly->inputs[i]].out, s);
        use(p, p->ls[l].out, s);
        use(p, p->ls[l].aux, s);
        if (p->ls[l].xs >= 0) p->st[p->ls[l].xs].def_step = p->st[p->ls[l].xs].last_fwd_use = s;
        if (any_ws(p, l, true)) {
            int w = add_storage(p, VDNN_ST_WS, l, p->info[l].fwd_ws_bytes, false, ly->name, ".ws.fwd");
            if (w < 0) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory building the plan");
            p->steps[s].ws = w;
            use(p, w, s);
        }
    }
    if (!p->training) {
        /* The caller reads the probabilities after the iteration. */
        use(p, p->ls[L - 1].out, p->n_steps - 1);
        return VDNN_OK;
    }
    /* Backward uses and gradient maps, in backward order. */
    for (int l = L - 1; l >= 1; l--) {
        const vdnn_layer *ly = &g->layers[l];
        int s = bwd_step(p, l);
        vdnn_step *st = &p->steps[s];
        if (p->ls[l].xs >= 0) {
            /* The input comes back through the chunk buffers, never whole. */
            vdnn_storage *x = &p->st[p->ls[l].xs];
            x->first_bwd_use = x->last_use = s;
            use(p, p->ls[l].xb, s);
        } else if (p->info[l].bwd_needs_x) {
            for (int i = 0; i < ly->n_inputs; i++) use(p, p->ls[ly->inputs[i]].out, s);
        }
        if (p->info[l].bwd_needs_y) use(p, p->ls[l].out, s);
        use(p, p->ls[l].aux, s);
        use(p, p->ls[l].grad, s);
        use(p, p->ls[l].dw, s);
        use(p, p->ls[l].db, s);
        use(p, p->ls[l].dwm, s);
        use(p, p->ls[l].dbm, s);
        use(p, p->ls[l].dwt, s);
        use(p, p->ls[l].dbt, s);
        /* A tied layer's part of the shared gradient is added to the sum after its op. */
        if (ly->p.tie) {
            use(p, p->ls[ly->p.tie].dwt, s);
            use(p, p->ls[ly->p.tie].dbt, s);
        }
        if (ly->kind == VDNN_LAYER_SOFTMAX_XENT) use(p, p->labels, s);
        /* Update steps: each layer's gradients wait for its own (scaled there, then read by the update). */
        if (p->ls[l].upd >= 0) {
            use(p, p->ls[l].dw, p->ls[l].upd);
            use(p, p->ls[l].db, p->ls[l].upd);
        }
        for (int i = 0; i < ly->n_inputs; i++) {
            int in = ly->inputs[i];
            if (in == 0) continue;
            if (p->ls[in].grad < 0 && p->info[l].bwd_inplace_ok && ly->n_inputs == 1 && p->ls[l].grad >= 0 &&
                p->st[p->ls[l].grad].bytes == vdnn_map_bytes(g, g->layers[in].out)) {
                /* dy has no use after this step: the input's gradient takes its place. */
                p->ls[in].grad = st->dx[i] = p->ls[l].grad;
                append_name(p->st[p->ls[in].grad].name, sizeof p->st[0].name, g->layers[in].name);
            } else if (p->ls[in].grad < 0) {
                p->ls[in].grad = add_storage(p, VDNN_ST_GRAD, in, vdnn_map_bytes(g, g->layers[in].out), false,
                                             g->layers[in].name, ".grad");
                if (p->ls[in].grad < 0) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory building the plan");
                st->dx[i] = p->ls[in].grad;
            } else {
                char suffix[32];
                snprintf(suffix, sizeof suffix, ".grad.from.%d", l);
                st->dx[i] = add_storage(p, VDNN_ST_TEMP, in, vdnn_map_bytes(g, g->layers[in].out), false,
                                        g->layers[in].name, suffix);
                if (st->dx[i] < 0) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory building the plan");
                use(p, p->ls[in].grad, s);
            }
            use(p, st->dx[i], s);
        }
        if (any_ws(p, l, false)) {
            int w = add_storage(p, VDNN_ST_WS, l, p->info[l].bwd_ws_bytes, false, ly->name, ".ws.bwd");
            if (w < 0) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory building the plan");
            st->ws = w;
            use(p, w, s);
        }
    }
    return VDNN_OK;
}

const char *vdnn_class_name(vdnn_tensor_class c)
{
    return c == VDNN_CLASS_SWAP ? "swap" : c == VDNN_CLASS_RECOMPUTE ? "recompute" : "keep";
}

/* Effective liveness under the current classes. A recomputed storage needs its producer's inputs
 * on the device when it is recomputed: kept inputs live longer, swapped ones come back earlier,
 * recomputed ones are recomputed earlier (recursively, producers before consumers). */
static vdnn_status derive_needs(vdnn_plan_t *p, vdnn_error *err)
{
    for (int i = 0; i < p->n_storages; i++) {
        vdnn_storage *s = &p->st[i];
        s->need_step = s->first_bwd_use;
        s->end_step = s->last_use;
    }
    /* A map that a streaming convolution wrote over its input cannot be recomputed (that input is in host
     * memory, a chunk at a time): it is swapped instead. */
    for (int l = 1; l < p->n_layers; l++) {
        if (p->ls[l].xs < 0) continue;
        vdnn_storage *o = &p->st[p->ls[l].out];
        if (o->cls == VDNN_CLASS_RECOMPUTE) o->cls = VDNN_CLASS_SWAP, o->prefetch_step = -1;
    }
    /* Aux state follows its layer's output when the output is recomputed. */
    for (int l = 1; l < p->n_layers; l++) {
        int o = p->ls[l].out, a = p->ls[l].aux;
        if (a >= 0 && p->st[o].cls == VDNN_CLASS_RECOMPUTE) p->st[a].cls = VDNN_CLASS_RECOMPUTE;
        if (a >= 0 && p->st[o].cls != VDNN_CLASS_RECOMPUTE && p->st[a].cls == VDNN_CLASS_RECOMPUTE)
            p->st[a].cls = VDNN_CLASS_KEEP;
    }
    for (int i = 0; i < p->n_storages; i++) {
        vdnn_storage *s = &p->st[i];
        if (s->cls == VDNN_CLASS_KEEP) continue;
        if ((!s->candidate && s->kind != VDNN_ST_AUX) ||
            (s->cls == VDNN_CLASS_RECOMPUTE && s->kind != VDNN_ST_FMAP && s->kind != VDNN_ST_AUX) ||
            (s->cls == VDNN_CLASS_RECOMPUTE && s->layer == 0))
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "plan: '%s' cannot be classed %s", s->name, vdnn_class_name(s->cls));
        if (s->cls == VDNN_CLASS_RECOMPUTE && (s->recompute_step < 0 || s->recompute_step > s->first_bwd_use))
            s->recompute_step = s->first_bwd_use;
        if (s->cls == VDNN_CLASS_RECOMPUTE) s->need_step = s->recompute_step;
    }
    /* Producers later in the graph first, so an ancestor's recompute step is lowered before it is used. */
    for (int l = p->n_layers - 1; l >= 1; l--) {
        int r_st = p->ls[l].out;
        vdnn_storage *R = &p->st[r_st];
        if (R->cls != VDNN_CLASS_RECOMPUTE || R->layer != l) continue;
        int r = R->recompute_step;
        const vdnn_layer *ly = &p->g->layers[l];
        for (int i = 0; i < ly->n_inputs; i++) {
            vdnn_storage *I = &p->st[p->ls[ly->inputs[i]].out];
            if (I->cls == VDNN_CLASS_RECOMPUTE) {
                if (r < I->recompute_step) I->recompute_step = r;
                if (r < I->need_step) I->need_step = r;
            } else if (I->cls == VDNN_CLASS_SWAP) {
                if (r < I->need_step) I->need_step = r;
            }
            if (r > I->end_step) I->end_step = r;
        }
    }
    /* Aux state is recomputed with its output. */
    for (int l = 1; l < p->n_layers; l++) {
        int a = p->ls[l].aux;
        if (a < 0 || p->st[a].cls != VDNN_CLASS_RECOMPUTE) continue;
        const vdnn_storage *o = &p->st[p->ls[l].out];
        p->st[a].recompute_step = p->st[a].need_step = o->recompute_step;
    }
    for (int i = 0; i < p->n_storages; i++) {
        vdnn_storage *s = &p->st[i];
        if (s->cls == VDNN_CLASS_SWAP) {
            if (s->prefetch_step < 0 || s->prefetch_step >= s->need_step) s->prefetch_step = s->need_step - 1;
            if (s->prefetch_step <= s->last_fwd_use) {
                /* No step between the last forward use and the first need: nothing to gain. */
                s->cls = VDNN_CLASS_KEEP;
                s->need_step = s->first_bwd_use;
            }
        }
    }
    return VDNN_OK;
}

/* Per step, the items (blocks, storages or layers) whose actions fall in that step, in index order:
 * emitting a step then visits only its own items instead of scanning them all. */
typedef struct step_buckets {
    int *start; /* n_steps + 1 */
    int *item;
} step_buckets;

/* Up to KEYS_MAX steps per item; -1 or out of range: none. */
#define KEYS_MAX 6
typedef int (*step_keys_fn)(const vdnn_plan_t *p, int item, int keys[KEYS_MAX]);

static int buckets_build(step_buckets *b, const vdnn_plan_t *p, int n_items, step_keys_fn fn)
{
    const int n = p->n_steps;
    b->start = calloc((size_t)n + 2, sizeof(int));
    if (!b->start) return -1;
    int total = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            for (int s = 0; s < n; s++) b->start[s + 1] += b->start[s];
            total = b->start[n];
            b->item = malloc(sizeof(int) * (size_t)(total + 1));
            if (!b->item) return -1;
            /* start[s] becomes the fill cursor; shifted back after the fill. */
        }
        for (int i = 0; i < n_items; i++) {
            int keys[KEYS_MAX], k = fn(p, i, keys);
            for (int j = 0; j < k; j++) {
                int s = keys[j];
                bool dup = false;
                for (int q = 0; q < j; q++) dup |= keys[q] == s;
                if (s < 0 || s >= n || dup) continue;
                if (pass == 0) b->start[s + 1]++;
                else b->item[b->start[s]++] = i;
            }
        }
    }
    for (int s = n; s > 0; s--) b->start[s] = b->start[s - 1];
    b->start[0] = 0;
    (void)total;
    return 0;
}

static int keys_alloc(const vdnn_plan_t *p, int b, int keys[KEYS_MAX])
{
    keys[0] = p->blocks[b].begin;
    return !p->st[p->blocks[b].storage].persistent;
}

static int keys_free(const vdnn_plan_t *p, int b, int keys[KEYS_MAX])
{
    keys[0] = p->blocks[b].end;
    return !p->st[p->blocks[b].storage].persistent;
}

static int keys_swap(const vdnn_plan_t *p, int i, int keys[KEYS_MAX])
{
    const vdnn_storage *x = &p->st[i];
    if (x->cls != VDNN_CLASS_SWAP) return 0;
    keys[0] = x->prefetch_step;
    keys[1] = x->last_fwd_use;
    keys[2] = x->need_step;
    return 3;
}

static int keys_home(const vdnn_plan_t *p, int i, int keys[KEYS_MAX])
{
    const vdnn_storage *x = &p->st[i];
    if (!x->homed) return 0;
    keys[0] = x->home_fwd >= 0 ? x->home_fwd - 1 : -1;
    keys[1] = x->home_fwd;
    keys[2] = x->prefetch_step;
    keys[3] = x->need_step;
    keys[4] = x->end_step;
    keys[5] = x->upd_prefetch;
    return 6;
}

static int keys_recompute(const vdnn_plan_t *p, int l, int keys[KEYS_MAX])
{
    const vdnn_storage *o = &p->st[p->ls[l].out];
    keys[0] = o->recompute_step;
    return l > 0 && o->cls == VDNN_CLASS_RECOMPUTE;
}

typedef struct emit_index {
    step_buckets alloc, free, swap, recompute, home;
} emit_index;

static void emit_index_release(emit_index *e)
{
    step_buckets *b[5] = {&e->alloc, &e->free, &e->swap, &e->recompute, &e->home};
    for (int k = 0; k < 5; k++) {
        free(b[k]->start);
        free(b[k]->item);
    }
}

static int emit_index_build(emit_index *e, const vdnn_plan_t *p)
{
    memset(e, 0, sizeof *e);
    return buckets_build(&e->alloc, p, p->n_blocks, keys_alloc) || buckets_build(&e->free, p, p->n_blocks, keys_free) ||
           buckets_build(&e->swap, p, p->n_storages, keys_swap) ||
           buckets_build(&e->recompute, p, p->n_layers, keys_recompute) ||
           buckets_build(&e->home, p, p->n_storages, keys_home);
}

/* Actions of one step, in the order the executor must run them. */
static int emit_step(vdnn_plan_t *p, int s, const int *swap_event, const int *recompute_ws, const emit_index *e)
{
    int fail = 0;
    vdnn_step *st = &p->steps[s];
    st->first_action = p->n_actions;
    for (int k = e->alloc.start[s]; k < e->alloc.start[s + 1]; k++) fail |= add_action(p, VDNN_ACT_ALLOC, e->alloc.item[k], -1, -1) < 0;
    const bool um = is_um(p);
    for (int k = e->swap.start[s]; k < e->swap.start[s + 1]; k++) {
        const int i = e->swap.item[k];
        const vdnn_storage *x = &p->st[i];
        /* um: nothing waited for the migration out (no block to free), so the one back waits for it here. */
        if (x->prefetch_step == s && um) fail |= add_action(p, VDNN_ACT_WAIT, i, -1, swap_event[i]) < 0;
        if (x->prefetch_step == s) fail |= add_action(p, VDNN_ACT_PREFETCH, i, -1, swap_event[i] + 1) < 0;
        /* Copy out while this step computes, unless this step writes the value. Not under um: migrating pages
         * a running kernel reads would fault them straight back. */
        if (x->last_fwd_use == s && x->def_step != s && !um)
            fail |= add_action(p, VDNN_ACT_OFFLOAD, i, -1, swap_event[i]) < 0;
        if (x->need_step == s) fail |= add_action(p, VDNN_ACT_WAIT, i, -1, swap_event[i] + 1) < 0;
    }
    /* Homed parameters come in for their forward step and for their backward steps (a recompute of their
     * layer included); the copy in for forward is never written back. */
    for (int k = e->home.start[s]; k < e->home.start[s + 1]; k++) {
        const int i = e->home.item[k];
        const vdnn_storage *x = &p->st[i];
        if (x->home_fwd >= 0 && x->home_fwd - 1 == s) fail |= add_action(p, VDNN_ACT_PREFETCH, i, -1, swap_event[i]) < 0;
        if (x->prefetch_step == s) fail |= add_action(p, VDNN_ACT_PREFETCH, i, -1, swap_event[i] + 1) < 0;
        /* Update steps: in again for the update (the fourth event). */
        if (x->upd_prefetch == s) fail |= add_action(p, VDNN_ACT_PREFETCH, i, -1, swap_event[i] + 3) < 0;
        if (x->home_fwd == s) fail |= add_action(p, VDNN_ACT_WAIT, i, -1, swap_event[i]) < 0;
        if (x->prefetch_step >= 0 && x->need_step == s) fail |= add_action(p, VDNN_ACT_WAIT, i, -1, swap_event[i] + 1) < 0;
        if (x->upd_prefetch >= 0 && x->end_step == s) fail |= add_action(p, VDNN_ACT_WAIT, i, -1, swap_event[i] + 3) < 0;
    }
    /* Recomputes in layer order: a producer's inputs are recomputed before it. */
    for (int k = e->recompute.start[s]; k < e->recompute.start[s + 1]; k++) {
        const int l = e->recompute.item[k];
        fail |= add_action(p, VDNN_ACT_RECOMPUTE, l, recompute_ws[l], -1) < 0;
    }
    fail |= add_action(p, VDNN_ACT_COMPUTE, -1, -1, -1) < 0;
    if (st->kind == VDNN_STEP_BWD) {
        for (int i = 0; i < VDNN_MAX_INPUTS; i++) {
            int d = st->dx[i];
            if (d >= 0 && p->st[d].kind == VDNN_ST_TEMP) fail |= add_action(p, VDNN_ACT_ACCUM, p->ls[p->st[d].layer].grad, d, -1) < 0;
        }
    }
    for (int k = e->swap.start[s]; k < e->swap.start[s + 1]; k++) {
        const int i = e->swap.item[k];
        const vdnn_storage *x = &p->st[i];
        if (x->last_fwd_use != s) continue;
        if (x->def_step == s || um) fail |= add_action(p, VDNN_ACT_OFFLOAD, i, -1, swap_event[i]) < 0;
        /* The block is freed at this step's end: the copy must be done. A managed range has no block. */
        if (!um) fail |= add_action(p, VDNN_ACT_WAIT, i, -1, swap_event[i]) < 0;
    }
    /* The fused update is done: the homes take the new values back (all copies queued before the first
     * wait), and the blocks go once they are out. */
    for (int pass = 0; p->training && pass < 2; pass++) {
        for (int k = e->home.start[s]; k < e->home.start[s + 1]; k++) {
            const int i = e->home.item[k];
            const vdnn_storage *x = &p->st[i];
            /* A gradient goes home after its backward step when the update fetches it again; the update spends it. */
            const int home_at = !is_grad(x) ? x->end_step : x->upd_prefetch >= 0 ? x->need_step : -1;
            if (home_at != s) continue;
            fail |= add_action(p, pass ? VDNN_ACT_WAIT : VDNN_ACT_OFFLOAD, i, -1, swap_event[i] + 2) < 0;
        }
    }
    for (int k = e->free.start[s]; k < e->free.start[s + 1]; k++) fail |= add_action(p, VDNN_ACT_FREE, e->free.item[k], -1, -1) < 0;
    st->n_actions = p->n_actions - st->first_action;
    return fail;
}

/* Places the non-persistent blocks whose `held` flag is `held` at or above base. */
static vdnn_status place_variable(vdnn_plan_t *p, bool held, size_t base, bool thorough, size_t *top, vdnn_error *err)
{
    int n_var = 0;
    for (int b = 0; b < p->n_blocks; b++) n_var += !p->st[p->blocks[b].storage].persistent && p->blocks[b].held == held;
    vdnn_interval *iv = calloc((size_t)n_var + 1, sizeof *iv);
    int *map = calloc((size_t)n_var + 1, sizeof(int));
    if (!iv || !map) {
        free(iv);
        free(map);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory placing blocks");
    }
    int k = 0;
    for (int b = 0; b < p->n_blocks; b++) {
        if (p->st[p->blocks[b].storage].persistent || p->blocks[b].held != held) continue;
        iv[k] = (vdnn_interval){p->blocks[b].bytes, p->blocks[b].begin, p->blocks[b].end, 0};
        map[k++] = b;
    }
    *top = base;
    vdnn_status rc = vdnn_place_intervals_ex(iv, n_var, base, thorough, top, err);
    for (int i = 0; rc == VDNN_OK && i < n_var; i++) p->blocks[map[i]].offset = iv[i].offset;
    free(iv);
    free(map);
    return rc;
}

static vdnn_status place(vdnn_plan_t *p, size_t variable_base, bool thorough, vdnn_error *err)
{
    /* Persistent storages back to back from offset 0, in storage order. */
    size_t off = 0;
    for (int b = 0; b < p->n_blocks; b++) {
        if (p->st[p->blocks[b].storage].persistent) {
            p->blocks[b].offset = off;
            off += p->blocks[b].bytes;
        }
    }
    p->persistent_bytes = off;
    size_t base = off > variable_base ? off : vdnn_align_up(variable_base);
    size_t top = base;
    vdnn_status rc = VDNN_OK;
    p->held_stride = 0;
    if (p->held_batches > 1) {
        /* Micro-batch j's held blocks sit j strides above micro-batch 0's; the blocks of one pass alone
         * (a micro-batch's forward or backward runs at a time) share the region above them all. */
        rc = place_variable(p, true, base, thorough, &top, err);
        p->held_stride = vdnn_align_up(top - base);
        base += (size_t)p->held_batches * p->held_stride;
    }
    if (rc == VDNN_OK) rc = place_variable(p, false, base, thorough, &top, err);
    p->peak_device_bytes = top;

    /* Host pool: a swapped storage occupies host memory from its offload to its return. */
    int n_swap = 0;
    for (int i = 0; i < p->n_storages; i++) n_swap += p->st[i].cls == VDNN_CLASS_SWAP || p->st[i].streamed;
    vdnn_interval *iv = calloc((size_t)n_swap + 1, sizeof *iv);
    int *map = calloc((size_t)n_swap + 1, sizeof(int));
    if (!iv || !map) {
        free(iv);
        free(map);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory placing host blocks");
    }
    int k = 0;
    p->bytes_moved = home_moved(p);
    p->managed_bytes = 0;
    for (int i = 0; i < p->n_storages; i++) {
        vdnn_storage *x = &p->st[i];
        if (x->streamed) {
            p->bytes_moved += 2 * x->bytes;
            iv[k] = (vdnn_interval){vdnn_align_up(x->bytes), x->def_step, x->last_use, 0};
            map[k++] = i;
            continue;
        }
        if (x->cls != VDNN_CLASS_SWAP) continue;
        p->bytes_moved += 2 * x->bytes;
        if (is_um(p)) {
            /* Its own range for the whole run: the data lives there, on whichever side the driver has it. */
            x->host_offset = p->managed_bytes;
            p->managed_bytes += um_align_up(x->bytes);
            continue;
        }
        iv[k] = (vdnn_interval){vdnn_align_up(x->bytes), x->last_fwd_use, x->need_step, 0};
        map[k++] = i;
    }
    n_swap = k;
    /* The homes first: they stay for the net's whole life, the swapped maps' places above them. */
    p->host_bytes = p->home_bytes;
    if (rc == VDNN_OK) rc = vdnn_place_intervals(iv, n_swap, p->home_bytes, &p->host_bytes, err);
    for (int i = 0; rc == VDNN_OK && i < n_swap; i++) p->st[map[i]].host_offset = iv[i].offset;
    /* A swapped tensor stays in host memory from forward into backward: every held micro-batch has its own. */
    p->host_stride = 0;
    if (p->held_batches > 1) {
        p->host_stride = vdnn_align_up(p->host_bytes);
        p->host_bytes = (size_t)p->held_batches * p->host_stride;
    }
    free(iv);
    free(map);
    return rc;
}

void vdnn_plan_live_bytes(const vdnn_plan_t *p, size_t *live)
{
    /* Differences at each block's first and past its last step, then a running sum (unsigned
     * wrap-around cancels exactly). */
    for (int s = 0; s < p->n_steps; s++) live[s] = 0;
    for (int b = 0; b < p->n_blocks; b++) {
        const vdnn_block *k = &p->blocks[b];
        if (k->begin < 0 || k->end < k->begin || k->begin >= p->n_steps) continue;
        live[k->begin] += k->bytes;
        if (k->end + 1 < p->n_steps) live[k->end + 1] -= k->bytes;
    }
    for (int s = 1; s < p->n_steps; s++) live[s] += live[s - 1];
}

/* Candidates per layer from the request (else the caller's info alone), and the starting choice. */
static vdnn_status init_algos(vdnn_plan_t *p, const vdnn_plan_request *req)
{
    p->algo = calloc((size_t)p->n_layers, sizeof *p->algo);
    p->cands = calloc((size_t)p->n_layers, sizeof *p->cands);
    if (!p->algo || !p->cands) return VDNN_ERR_NO_MEMORY;
    const int force = req->memory.conv_algo;
    p->choose_algos = req->algos && force == VDNN_ALGO_CHOOSE;
    for (int l = 0; l < p->n_layers; l++) {
        if (req->algos && req->algos[l].n >= 1) {
            p->cands[l] = req->algos[l];
        } else {
            p->cands[l].n = 1;
            p->cands[l].a[0].info = p->info[l];
        }
        int k = force > 0 ? force : 0;
        if (force == VDNN_ALGO_LEANEST) k = vdnn_plan_leanest_algo(p, l);
        p->algo[l] = k < p->cands[l].n ? k : p->cands[l].n - 1;
        p->info[l] = p->cands[l].a[p->algo[l]].info;
    }
    return VDNN_OK;
}

void vdnn_plan_set_algo(vdnn_plan_t *p, int l, int k)
{
    if (l < 1 || l >= p->n_layers || k < 0 || k >= p->cands[l].n || p->algo[l] == k) return;
    if (p->ls[l].xs >= 0 && !p->cands[l].a[k].info.stream_ok) return;
    p->algo[l] = k;
    p->info[l] = p->cands[l].a[k].info;
    if (p->ls[l].xb >= 0) p->st[p->ls[l].xb].bytes = stream_buffer_bytes(p, l);
    int fs = p->steps[fwd_step(l)].ws;
    if (fs >= 0) p->st[fs].bytes = p->info[l].fwd_ws_bytes;
    if (p->training) {
        int bs = p->steps[bwd_step(p, l)].ws;
        if (bs >= 0) p->st[bs].bytes = p->info[l].bwd_ws_bytes;
    }
}

bool vdnn_plan_algos_change_numerics(const vdnn_plan_t *p)
{
    for (int l = 1; l < p->n_layers; l++)
        if (p->algo[l] && (p->cands[l].a[p->algo[l]].numerics < 0 ||
                           p->cands[l].a[p->algo[l]].numerics != p->cands[l].a[0].numerics))
            return true;
    return false;
}

vdnn_status vdnn_plan_analyze(const vdnn_graph_t *g, const vdnn_op_info *info, const vdnn_plan_request *req,
                              vdnn_plan_t **out, vdnn_error *err)
{
    *out = NULL;
    if (!g->resolved) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "plan: the graph has no resolved shapes");
    vdnn_status rc = vdnn_memory_options_check(&req->memory, err);
    if (rc != VDNN_OK) return rc;
    const char *why = NULL;
    if (req->memory.offload_params && !vdnn_plan_offload_supported(req, &why))
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                         "memory.offload_params: parameters homed in host memory are updated in their layer's backward "
                         "step and written back there; that does not combine with %s", why);
    if (req->memory.stream_inputs && !vdnn_plan_stream_supported(req, &why))
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                         "memory.stream_inputs: a streamed input has one host copy per step; that does not combine "
                         "with %s", why);
    vdnn_plan_t *p = calloc(1, sizeof *p);
    if (p) p->figures = vdnn_plan_figures_new();
    if (!p || !p->figures) {
        free(p);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory building the plan");
    }
    p->req = *req;
    p->policy = req->training ? req->memory.policy : VDNN_POLICY_NONE;
    p->training = req->training;
    p->micro_batches = req->training && req->memory.micro_batches > 1 ? req->memory.micro_batches : 1;
    p->held_batches = vdnn_plan_request_held(req);
    /* Clipping needs every gradient before the first update: none in backward. Update steps where nothing else
     * keeps the gradients for one update step (keep_weight_grads, micro-batches). */
    /* Clipped updates scale the gradients by their global norm, so no parameter is updated before the last gradient
     * is made: without kept gradients and micro-batches, update steps after backward; otherwise as kept ones. */
    const bool clip = req->memory.clip_grads;
    p->update_steps = req->training && clip && !req->keep_weight_grads && p->micro_batches == 1;
    p->fused_update = req->training && !req->keep_weight_grads && !clip && p->micro_batches == 1;
    p->shared_steps = p->fused_update && req->memory.offload_params && !req->fuse_shared;
    p->bwd_begin = req->training ? g->n_layers : -1;
    p->g = g;
    p->stream_inputs = req->memory.stream_inputs;
    p->n_layers = g->n_layers;
    p->info = calloc((size_t)g->n_layers, sizeof *p->info);
    p->req_info = calloc((size_t)g->n_layers, sizeof *p->info);
    p->ls = calloc((size_t)g->n_layers, sizeof *p->ls);
    if (!p->info || !p->ls || !p->req_info) {
        vdnn_plan_free(p);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory building the plan");
    }
    memcpy(p->info, info, sizeof *p->info * (size_t)g->n_layers);
    memcpy(p->req_info, info, sizeof *p->info * (size_t)g->n_layers);
    if (init_algos(p, req) != VDNN_OK) {
        vdnn_plan_free(p);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory building the plan");
    }
    for (int l = 0; l < g->n_layers; l++)
        p->ls[l] = (vdnn_layer_storage){.out = -1, .aux = -1, .grad = -1, .w = -1, .b = -1, .stats = -1, .dw = -1,
                                        .db = -1, .vw = -1, .vb = -1, .vw2 = -1, .vb2 = -1, .dwm = -1, .dbm = -1,
                                        .dwt = -1, .dbt = -1, .xs = -1, .xb = -1, .in_place = false, .upd = -1};
    rc = build_storages(p, g, err);
    if (rc == VDNN_OK) rc = build_steps(p, g, err);
    if (rc != VDNN_OK) {
        vdnn_plan_free(p);
        return rc;
    }
    for (int i = 0; i < p->n_storages; i++) {
        vdnn_storage *s = &p->st[i];
        s->cls = VDNN_CLASS_KEEP;
        /* Worth taking off the device only if some step between its last forward use and its
         * first backward use could do without it. */
        s->candidate = p->training && !s->streamed && (s->kind == VDNN_ST_FMAP || s->kind == VDNN_ST_AUX) && s->first_bwd_use >= 0 &&
                       s->last_fwd_use >= 0 && s->first_bwd_use > s->last_fwd_use + 1;
    }
    p->n_storages_analyzed = p->n_storages;
    vdnn_plan_set_offload_params(p, req->memory.offload_params);
    *out = p;
    return VDNN_OK;
}

vdnn_status vdnn_plan_finalize(vdnn_plan_t *p, vdnn_error *err) { return vdnn_plan_finalize_ex(p, true, err); }

vdnn_status vdnn_plan_finalize_ex(vdnn_plan_t *p, bool place_blocks, vdnn_error *err)
{
    p->n_storages = p->n_storages_analyzed;
    p->n_blocks = p->n_actions = p->n_events = 0;
    p->placed = false;
    p->host_bytes = p->managed_bytes = p->bytes_moved = 0;
    vdnn_status rc = derive_needs(p, err);
    if (rc != VDNN_OK) return rc;
    derive_homes(p);
    int *swap_event = calloc((size_t)p->n_storages + 1, sizeof(int));
    int *recompute_ws = malloc(sizeof(int) * (size_t)p->n_layers);
    if (!swap_event || !recompute_ws) {
        free(swap_event);
        free(recompute_ws);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory finalizing the plan");
    }
    int fail = 0;
    /* A recompute needs the layer's forward scratch at its step. */
    for (int l = 0; l < p->n_layers; l++) {
        recompute_ws[l] = -1;
        if (l == 0) continue;
        const vdnn_storage *o = &p->st[p->ls[l].out];
        if (o->cls == VDNN_CLASS_RECOMPUTE && p->info[l].fwd_ws_bytes) {
            const int at = o->recompute_step; /* add_storage may move p->st */
            int w = add_storage(p, VDNN_ST_WS, l, p->info[l].fwd_ws_bytes, false, p->g->layers[l].name, ".ws.recompute");
            if (w < 0) {
                fail = 1;
                break;
            }
            p->st[w].def_step = p->st[w].last_use = p->st[w].need_step = p->st[w].end_step = at;
            p->st[w].last_fwd_use = p->st[w].first_bwd_use = p->st[w].prefetch_step = p->st[w].recompute_step = -1;
            recompute_ws[l] = w;
        }
    }
    for (int i = 0; !fail && i < p->n_storages; i++) {
        const vdnn_storage *x = &p->st[i];
        if (x->homed) {
            /* Events: in for forward, in for backward, out after the update, in for the update (update steps;
             * unused otherwise: swapped storages' pairs start on even numbers, offload even, prefetch odd, as
             * vdnn_search_stalls reads them). */
            swap_event[i] = p->n_events;
            p->n_events += 4;
            const int f = x->home_fwd;
            if (is_grad(x)) {
                fail |= add_block(p, i, x->need_step, home_first_end(p, x)) < 0;
            } else if (!p->training) {
                fail |= add_block(p, i, f - 1, f) < 0;
            } else if (x->prefetch_step < 0) {
                fail |= add_block(p, i, f - 1, home_first_end(p, x)) < 0;
            } else {
                if (f >= 0) fail |= add_block(p, i, f - 1, f) < 0;
                fail |= add_block(p, i, x->prefetch_step, home_first_end(p, x)) < 0;
            }
            if (p->training && x->upd_prefetch >= 0) fail |= add_block(p, i, x->upd_prefetch, x->end_step) < 0;
            continue;
        }
        if (x->streamed) {
            /* Copied by its layer's own steps, a chunk at a time: an event per chunk, no block. */
            p->st[i].first_event = p->n_events;
            int chunks;
            vdnn_plan_stream_chunk(p, x->layer, &chunks);
            p->n_events += (chunks + 1) / 2 * 2; /* swapped storages' pairs stay even */
            continue;
        }
        if (x->def_step < 0 && !x->persistent) continue; /* never used (e.g. aux of an eval op) */
        if (x->persistent) {
            fail |= add_block(p, i, 0, p->n_steps - 1) < 0;
        } else if (x->cls == VDNN_CLASS_SWAP) {
            swap_event[i] = p->n_events;
            p->n_events += 2;
            /* um: the storage lives in the managed pool, not in the arena. */
            if (!is_um(p)) {
                fail |= add_block(p, i, x->def_step, x->last_fwd_use) < 0;
                fail |= add_block(p, i, x->prefetch_step, x->end_step) < 0;
            }
        } else if (x->cls == VDNN_CLASS_RECOMPUTE) {
            fail |= add_block(p, i, x->def_step, x->last_fwd_use) < 0;
            fail |= add_block(p, i, x->recompute_step, x->end_step) < 0;
        } else {
            fail |= add_block(p, i, x->def_step, x->end_step) < 0;
        }
    }
    rc = fail ? vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory finalizing the plan") : VDNN_OK;
    if (rc == VDNN_OK && place_blocks) rc = place(p, p->req.variable_base, false, err);
    p->placed = rc == VDNN_OK && place_blocks;
    emit_index ix;
    memset(&ix, 0, sizeof ix);
    if (rc == VDNN_OK && emit_index_build(&ix, p)) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory finalizing the plan");
    else if (rc == VDNN_OK) {
        for (int s = 0; rc == VDNN_OK && s < p->n_steps; s++)
            if (emit_step(p, s, swap_event, recompute_ws, &ix))
                rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory finalizing the plan");
    }
    emit_index_release(&ix);
    free(swap_event);
    free(recompute_ws);
    if (rc != VDNN_OK) return rc;
    size_t *live = calloc((size_t)p->n_steps, sizeof(size_t));
    if (!live) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory finalizing the plan");
    vdnn_plan_live_bytes(p, live);
    double sum = 0;
    size_t max_live = 0;
    for (int s = 0; s < p->n_steps; s++) {
        sum += (double)live[s];
        if (live[s] > max_live) max_live = live[s];
    }
    p->avg_device_bytes = (size_t)(sum / p->n_steps);
    p->max_live_bytes = max_live;
    free(live);
    if (!place_blocks) {
        /* Unplaced (a planner's quick look): the live bytes are a lower bound of the peak. */
        size_t base = p->req.variable_base;
        p->persistent_bytes = 0; /* as place() packs them */
        for (int b = 0; b < p->n_blocks; b++)
            if (p->st[p->blocks[b].storage].persistent) p->persistent_bytes += p->blocks[b].bytes;
        p->peak_device_bytes = max_live + (base > p->persistent_bytes ? base - p->persistent_bytes : 0);
        p->host_bytes = p->home_bytes;
        p->managed_bytes = 0;
        p->bytes_moved = home_moved(p);
        for (int i = 0; i < p->n_storages; i++) {
            if (p->st[i].streamed) p->bytes_moved += 2 * p->st[i].bytes, p->host_bytes += vdnn_align_up(p->st[i].bytes);
            if (p->st[i].cls != VDNN_CLASS_SWAP) continue;
            p->bytes_moved += 2 * p->st[i].bytes;
            if (is_um(p)) p->managed_bytes += um_align_up(p->st[i].bytes);
            else p->host_bytes += vdnn_align_up(p->st[i].bytes);
        }
        /* Held micro-batches: while one runs, the others' held blocks are live too. */
        size_t held = 0;
        for (int b = 0; b < p->n_blocks; b++) held += p->blocks[b].held ? p->blocks[b].bytes : 0;
        p->peak_device_bytes += (size_t)(p->held_batches - 1) * held;
        p->host_bytes *= (size_t)p->held_batches;
    }
    /* Managed pages wait in host memory while they are offloaded: the host budget bounds them too. */
    p->feasible = p->peak_device_bytes <= p->req.memory.budget && p->host_bytes <= p->req.memory.host_budget &&
                  p->managed_bytes <= p->req.memory.host_budget - p->host_bytes;
    /* Asked to (tests), every placed classification a planner tries is checked, not only the one it keeps. */
    if (p->placed && p->req.checks && p->req.checks->candidates) {
        p->req.checks->placements++;
        return vdnn_plan_validate(p, err);
    }
    return VDNN_OK;
}

vdnn_status vdnn_plan_place_tight(vdnn_plan_t *p, vdnn_error *err)
{
    if (!p->placed) return VDNN_OK;
    vdnn_status rc = place(p, p->req.variable_base, true, err);
    if (rc != VDNN_OK) return rc;
    p->feasible = p->peak_device_bytes <= p->req.memory.budget && p->host_bytes <= p->req.memory.host_budget &&
                  p->managed_bytes <= p->req.memory.host_budget - p->host_bytes;
    return VDNN_OK;
}

vdnn_plan_request vdnn_plan_request_default(void)
{
    return (vdnn_plan_request){.memory = vdnn_memory_options_default(), .training = true};
}

void vdnn_plan_free(vdnn_plan_t *p)
{
    if (!p) return;
    vdnn_plan_figures_free(p->figures);
    vdnn_graph_free(p->own_g);
    free(p->info);
    free(p->req_info);
    free(p->algo);
    free(p->cands);
    free(p->ls);
    free(p->st);
    free(p->blocks);
    free(p->steps);
    free(p->actions);
    free(p);
}

vdnn_status vdnn_plan_query_algos(const vdnn_graph_t *g, vdnn_backend_t *be, bool training, vdnn_layer_algos *algos,
                                  vdnn_op_info *info, vdnn_error *err)
{
    memset(&algos[0], 0, sizeof algos[0]);
    if (info) memset(&info[0], 0, sizeof info[0]);
    for (int l = 1; l < g->n_layers; l++) {
        vdnn_op_desc d;
        vdnn_op_desc_from_layer(g, l, training, &d);
        vdnn_status rc = be->ops->op_algos(be, &d, algos[l].a, &algos[l].n, err);
        if (rc != VDNN_OK) return rc;
        if (info) info[l] = algos[l].a[0].info;
    }
    return VDNN_OK;
}

vdnn_status vdnn_plan_query_ops(const vdnn_graph_t *g, vdnn_backend_t *be, bool training, vdnn_op_info *info,
                                vdnn_error *err)
{
    memset(&info[0], 0, sizeof info[0]);
    for (int l = 1; l < g->n_layers; l++) {
        vdnn_op_desc d;
        vdnn_op_desc_from_layer(g, l, training, &d);
        vdnn_status rc = be->ops->op_query(be, &d, &info[l], err);
        if (rc != VDNN_OK) return rc;
    }
    return VDNN_OK;
}
