/* Model-parallel stages without MPI: where a graph may be cut, stage= keys in model files, balanced splits
 * (with and without a memory check) and the graph each stage runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/stages.h"
#include "plan/plan.h"
#include "plan/plan_validate.h"
#include "vdnn/backend.h"
#include "testutil.h"

static vdnn_graph_t *load_resolved(const char *path, int batch, int c, int h, int w, int classes)
{
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_load(path, &g, &err), err);
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){batch, c, h, w}, classes, &err), err);
    return g;
}

static vdnn_graph_t *parse_resolved(const char *text, int batch)
{
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_parse(text, "t.cfg", &g, &err), err);
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){batch, 0, 0, 0}, 0, &err), err);
    return g;
}

static bool cut_after(const vdnn_graph_t *g, const bool *cut, const char *name)
{
    int l = vdnn_graph_find(g, name);
    if (l < 0) fail_msg("no layer %s", name);
    return cut[l];
}

static void residual_blocks_cut_between_blocks_only(void **state)
{
    vdnn_graph_t *g = load_resolved(VDNN_SOURCE_DIR "/models/resnet18.cfg", 2, 3, 32, 32, 10);
    bool *cut = calloc((size_t)g->n_layers, sizeof *cut);
    vdnn_stage_cuts(g, cut);
    assert_true(cut_after(g, cut, "conv1"));
    assert_true(cut_after(g, cut, "maxpool"));
    assert_true(cut_after(g, cut, "layer1.0.relu"));
    assert_true(cut_after(g, cut, "layer4.1.relu"));
    /* Inside a block the shortcut crosses. */
    assert_false(cut_after(g, cut, "layer1.0.conv1"));
    assert_false(cut_after(g, cut, "layer1.0.bn2"));
    assert_false(cut_after(g, cut, "layer2.0.downsample.1"));
    assert_false(cut[0]);
    assert_false(cut[g->n_layers - 1]);
    free(cut);
    vdnn_graph_free(g);
}

static const char staged[] = "[net]\ninput=3x8x8\nclasses=4\n"
                             "[c1]\ntype=conv\nfilters=4\nsize=3\npad=1\n[r1]\ntype=relu\n"
                             "[c2]\ntype=conv\nfilters=4\nsize=3\npad=1\nstage=1\n[r2]\ntype=relu\n"
                             "[add]\ntype=add\ninput=r1,r2\n"
                             "[f]\ntype=flatten\nstage=2\n[fc]\ntype=fc\noutputs=classes\n[loss]\ntype=softmax\n";

static void stage_keys_place_layers(void **state)
{
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_parse(staged, "t.cfg", &g, &err), err);
    assert_true(vdnn_graph_has_stages(g));
    /* A key starts a stage; the layers after it follow until the next one. */
    assert_int_equal(g->layers[vdnn_graph_find(g, "r1")].stage, 0);
    assert_int_equal(g->layers[vdnn_graph_find(g, "r2")].stage, 1);
    assert_int_equal(g->layers[vdnn_graph_find(g, "add")].stage, 1);
    assert_int_equal(g->layers[vdnn_graph_find(g, "loss")].stage, 2);
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){2, 0, 0, 0}, 0, &err), err);
    vdnn_stage_split s;
    vt_assert_error(vdnn_stage_split_from_model(g, 2, &s, &err), err, VDNN_ERR_INVALID_ARG, "3 stages");
    /* r1, the first stage's output, may feed several layers of the next. */
    vt_assert_ok(vdnn_stage_split_from_model(g, 3, &s, &err), err);
    assert_int_equal(s.last[0], vdnn_graph_find(g, "r1"));
    assert_int_equal(s.first[1], vdnn_graph_find(g, "c2"));
    assert_int_equal(s.last[1], vdnn_graph_find(g, "add"));
    assert_int_equal(s.first[2], vdnn_graph_find(g, "f"));
    vdnn_graph_free(g);
    /* c1 is read past the boundary after r1: the error names the reader and the tensor. */
    char bad[sizeof staged + 8];
    snprintf(bad, sizeof bad, "%s", staged);
    memcpy(strstr(bad, "input=r1,r2"), "input=c1,r2", 11);
    vt_assert_ok(vdnn_graph_parse(bad, "t.cfg", &g, &err), err);
    vt_assert_error(vdnn_stage_split_from_model(g, 3, &s, &err), err, VDNN_ERR_INVALID_ARG,
                    "layer 'add' (in a later stage) reads 'c1'");
    vdnn_graph_free(g);

    /* Stages never go back. */
    static const char back[] = "[c1]\ntype=conv\nfilters=4\nsize=1\nstage=2\n[r1]\ntype=relu\nstage=1\n[fc]\ntype=fc\n"
                               "outputs=3\n[loss]\ntype=softmax\n";
    vt_assert_error(vdnn_graph_parse(back, "back.cfg", &g, &err), err, VDNN_ERR_PARSE, "back.cfg:8: stage=1 is out of range (must be between 2");
    /* No key: no placement. */
    static const char none[] = "[c1]\ntype=conv\nfilters=4\nsize=1\n[fc]\ntype=fc\noutputs=3\n[loss]\ntype=softmax\n";
    vt_assert_ok(vdnn_graph_parse(none, "none.cfg", &g, &err), err);
    assert_false(vdnn_graph_has_stages(g));
    vdnn_graph_free(g);
}

/* conv/relu pairs: every boundary is a clean cut. */
static const char chain[] = "[net]\ninput=2x4x4\nclasses=3\n"
                            "[a]\ntype=conv\nfilters=2\nsize=1\n[b]\ntype=relu\n[c]\ntype=conv\nfilters=2\nsize=1\n"
                            "[d]\ntype=relu\n[e]\ntype=conv\nfilters=2\nsize=1\n[f]\ntype=relu\n[g]\ntype=flatten\n"
                            "[fc]\ntype=fc\noutputs=classes\n[loss]\ntype=softmax\n";

/* A memory check that refuses any stage holding both b and c. */
static bool not_b_with_c(void *ctx, int first, int last)
{
    const vdnn_graph_t *g = ctx;
    return !(first <= vdnn_graph_find(g, "b") && vdnn_graph_find(g, "c") <= last);
}

static void balance_minimises_the_largest_stage(void **state)
{
    vdnn_graph_t *g = parse_resolved(chain, 2);
    const int n = g->n_layers; /* data a b c d e f g fc loss */
    double cost[16] = {0};
    for (int l = 1; l < n; l++) cost[l] = 1;
    vdnn_stage_split s;
    vdnn_error err;
    vt_assert_ok(vdnn_stage_split_balance(g, cost, 3, NULL, NULL, &s, &err), err);
    vt_assert_ok(vdnn_stage_split_check(g, &s, &err), err);
    assert_int_equal(s.first[0], 1);
    assert_int_equal(s.last[2], n - 1);
    for (int k = 0; k < 3; k++) assert_true(s.last[k] - s.first[k] + 1 == 3);
    /* One heavy layer gets a stage of its own. */
    cost[vdnn_graph_find(g, "c")] = 10;
    vt_assert_ok(vdnn_stage_split_balance(g, cost, 3, NULL, NULL, &s, &err), err);
    assert_int_equal(s.first[1], vdnn_graph_find(g, "c"));
    assert_int_equal(s.last[1], vdnn_graph_find(g, "c"));
    /* A memory check that refuses some ranges moves the cuts (the best is then 2 + 4 + 3), or makes a
     * split impossible. */
    for (int l = 1; l < n; l++) cost[l] = 1;
    vt_assert_ok(vdnn_stage_split_balance(g, cost, 3, not_b_with_c, g, &s, &err), err);
    int largest = 0;
    for (int k = 0; k < 3; k++) {
        assert_true(not_b_with_c(g, s.first[k], s.last[k]));
        if (s.last[k] - s.first[k] + 1 > largest) largest = s.last[k] - s.first[k] + 1;
    }
    assert_int_equal(largest, 4);
    vt_assert_error(vdnn_stage_split_balance(g, cost, 1, not_b_with_c, g, &s, &err), err, VDNN_ERR_BUDGET, "memory budget");
    vt_assert_error(vdnn_stage_split_balance(g, cost, 12, NULL, NULL, &s, &err), err, VDNN_ERR_INVALID_ARG, "cannot be split");
    vdnn_graph_free(g);
}

static size_t params(const vdnn_graph_t *g)
{
    size_t n = 0;
    for (int l = 1; l < g->n_layers; l++) n += g->layers[l].n_weight + g->layers[l].n_bias + g->layers[l].n_stats;
    return n;
}

static void stage_graphs_partition_the_model(void **state)
{
    vdnn_graph_t *g = load_resolved(VDNN_SOURCE_DIR "/models/resnet18.cfg", 4, 3, 32, 32, 10);
    vdnn_stage_split s;
    vdnn_error err;
    vt_assert_ok(vdnn_stage_split_balance(g, NULL, 3, NULL, NULL, &s, &err), err);
    size_t total = 0;
    for (int k = 0; k < 3; k++) {
        vdnn_graph_t *sg = NULL;
        vt_assert_ok(vdnn_stage_graph(g, &s, k, &sg, &err), err);
        vdnn_shape in = vdnn_stage_input_shape(g, &s, k);
        vt_assert_ok(vdnn_graph_resolve(sg, in, vdnn_stage_classes(g, &s, k), &err), err);
        assert_string_equal(sg->layers[1].name, VDNN_STAGE_INPUT);
        /* Each of the stage's own layers has the full graph's name and output shape. */
        for (int l = s.first[k]; l <= s.last[k]; l++) {
            const vdnn_layer *a = &g->layers[l], *b = &sg->layers[l - s.first[k] + VDNN_STAGE_PREFIX];
            assert_string_equal(a->name, b->name);
            assert_memory_equal(&a->out, &b->out, sizeof a->out);
            assert_int_equal(a->n_weight, b->n_weight);
        }
        int tail = k < 2 ? VDNN_STAGE_TAIL : 0;
        assert_int_equal(sg->n_layers, VDNN_STAGE_PREFIX + s.last[k] - s.first[k] + 1 + tail);
        assert_int_equal(sg->layers[sg->n_layers - 1].kind, VDNN_LAYER_SOFTMAX_XENT);
        total += params(sg);
        vdnn_graph_free(sg);
    }
    assert_int_equal(total, params(g));
    char buf[256];
    vdnn_stage_split_format(g, &s, buf, sizeof buf);
    assert_non_null(strstr(buf, "conv1.."));
    assert_non_null(strstr(buf, " | "));
    /* A split through a residual block is refused. */
    s.last[0] = vdnn_graph_find(g, "layer1.0.conv1");
    s.first[1] = s.last[0] + 1;
    vt_assert_error(vdnn_stage_split_check(g, &s, &err), err, VDNN_ERR_INVALID_ARG, "crossed by one tensor only");
    vdnn_graph_free(g);
}

/* An embedding, two linear layers and the output projection tied to the embedding's table (GPT-2's shape). */
static const char tied[] = "[net]\ninput=1x8x1\nclasses=16\n[wte]\ntype=embed\noutputs=8\n"
                           "[a]\ntype=linear\noutputs=8\n[b]\ntype=linear\noutputs=8\n"
                           "[head]\ntype=linear\noutputs=classes\ntie=wte\nbias=0\n[loss]\ntype=softmax\n";

/* A tied table split over two stages: the embedding keeps it and no reader, the projection's stage holds a copy
 * under the table's name (weight_of), with no optimizer state of its own; within one stage, the tie's indices follow
 * the renumbering. Parameters shared otherwise across stages (an lstm layer's chunks) are refused by name. */
static void tied_tables_split_into_a_copy(void **state)
{
    (void)state;
    vdnn_graph_t *g = parse_resolved(tied, 2), *sg = NULL;
    vdnn_error err;
    const int wte = vdnn_graph_find(g, "wte"), a = vdnn_graph_find(g, "a"), head = vdnn_graph_find(g, "head");
    vdnn_stage_split s = {.stages = 2, .first = {1, a + 1}, .last = {a, g->n_layers - 1}};
    assert_true(vdnn_stage_table_split(g, wte, head));
    assert_false(vdnn_stage_table_split(g, wte, a));
    vt_assert_ok(vdnn_stage_graph(g, &s, 1, &sg, &err), err);
    int sh = vdnn_graph_find(sg, "head");
    assert_true(sh > 0);
    assert_int_equal(sg->layers[sh].p.tie, 0);
    assert_string_equal(sg->layers[sh].weight_of, "wte");
    /* Resolved in its stage: a weight of the table's size, stored as the table, trained by its owner's stage. */
    vt_assert_ok(vdnn_graph_resolve(sg, vdnn_stage_input_shape(g, &s, 1), vdnn_stage_classes(g, &s, 1), &err), err);
    assert_int_equal(sg->layers[sh].n_weight, g->layers[wte].n_weight);
    vdnn_graph_free(sg);
    vt_assert_ok(vdnn_stage_graph(g, &s, 0, &sg, &err), err);
    const int s0 = vdnn_graph_find(sg, "wte");
    assert_int_equal(sg->layers[s0].p.tied_by, 0);
    assert_string_equal(sg->layers[s0].weight_of, "");
    /* The embedding's vocabulary is the model's, not the stage's (its tail's) class count. */
    assert_int_equal(sg->layers[s0].p.model_vocab, 16);
    vt_assert_ok(vdnn_graph_resolve(sg, vdnn_stage_input_shape(g, &s, 0), vdnn_stage_classes(g, &s, 0), &err), err);
    assert_int_equal(sg->layers[s0].p.vocab, 16);
    assert_true(vdnn_stage_classes(g, &s, 0) != 16);
    vdnn_graph_free(sg);
    s = (vdnn_stage_split){.stages = 1, .first = {1}, .last = {g->n_layers - 1}};
    vt_assert_ok(vdnn_stage_graph(g, &s, 0, &sg, &err), err);
    sh = vdnn_graph_find(sg, "head");
    const int sw = vdnn_graph_find(sg, "wte");
    assert_true(sh > 0 && sw > 0 && sw != wte && head > 0);
    assert_int_equal(sg->layers[sh].p.tie, sw);
    assert_int_equal(sg->layers[sw].p.tied_by, sh);
    assert_string_equal(sg->layers[sh].weight_of, "");
    vdnn_graph_free(sg);
    vdnn_graph_free(g);
    /* Two readers of one table cannot both be a copy's: a hand-made second reader in another stage is refused. */
    g = parse_resolved(tied, 2);
    g->layers[a].p.tie = wte;
    s = (vdnn_stage_split){.stages = 2, .first = {1, a}, .last = {a - 1, g->n_layers - 1}};
    vt_assert_error(vdnn_stage_graph(g, &s, 1, &sg, &err), err, VDNN_ERR_UNSUPPORTED,
                    "layer 'a' shares its parameters with layer 'wte' of another stage");
    vdnn_graph_free(g);
}

/* The plan of a stage holding a table's copy, pipelined over 2 micro-batches under AdamW: the copy stored as the
 * table, no optimizer state, one transient gradient block for every micro-batch's part and no per-micro-batch sum;
 * the plan validator passes. */
static void table_copy_plans_no_state(void **state)
{
    (void)state;
    vdnn_graph_t *g = parse_resolved(tied, 4), *sg = NULL;
    vdnn_error err;
    const int a = vdnn_graph_find(g, "a");
    vdnn_stage_split s = {.stages = 2, .first = {1, a + 1}, .last = {a, g->n_layers - 1}};
    vt_assert_ok(vdnn_stage_graph(g, &s, 1, &sg, &err), err);
    vdnn_shape in = vdnn_stage_input_shape(g, &s, 1);
    in.n /= 2;
    vt_assert_ok(vdnn_graph_resolve(sg, in, vdnn_stage_classes(g, &s, 1), &err), err);
    vdnn_backend_t *be = NULL;
    vt_assert_ok(vdnn_backend_cpu_create(NULL, &be, &err), err);
    vdnn_op_info *info = calloc((size_t)sg->n_layers, sizeof *info);
    assert_non_null(info);
    vt_assert_ok(vdnn_plan_query_ops(sg, be, true, info, &err), err);
    vdnn_memory_options mem = vdnn_memory_options_default();
    mem.micro_batches = 2;
    mem.pipelined = true;
    mem.optimizer_moments = 2;
    vdnn_plan_t *p = NULL;
    vt_assert_ok(vdnn_plan_training(sg, info, NULL, &mem, NULL, true, &p, &err), err);
    const int h = vdnn_graph_find(sg, "head");
    const vdnn_layer_storage *ls = &p->ls[h];
    assert_true(ls->w >= 0 && ls->dw >= 0);
    assert_string_equal(p->st[ls->w].name, "wte.weight");
    assert_true(p->st[ls->w].persistent);
    assert_int_equal(p->st[ls->dw].kind, VDNN_ST_TEMP);
    assert_false(p->st[ls->dw].persistent);
    assert_int_equal(ls->vw, -1);
    assert_int_equal(ls->vw2, -1);
    assert_int_equal(ls->dwm, -1);
    for (int i = 0; i < p->n_storages; i++) assert_null(strstr(p->st[i].name, "wte.weight.mom"));
    vt_assert_ok(vdnn_plan_validate(p, &err), err);
    vdnn_plan_free(p);
    free(info);
    vdnn_backend_free(be);
    vdnn_graph_free(sg);
    vdnn_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(residual_blocks_cut_between_blocks_only),
        cmocka_unit_test(stage_keys_place_layers),
        cmocka_unit_test(balance_minimises_the_largest_stage),
        cmocka_unit_test(stage_graphs_partition_the_model),
        cmocka_unit_test(tied_tables_split_into_a_copy),
        cmocka_unit_test(table_copy_plans_no_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
