/* What test_gpt_reference and test_lstm_reference share: a sequence model's PyTorch reference (make_gpt_reference.py,
 * make_lstm_reference.py), the nets built from it, and comparisons against a tolerance relative to each tensor's scale. */
#ifndef VDNN_TEST_SEQ_REFERENCE_H
#define VDNN_TEST_SEQ_REFERENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exec/net.h"
#include "ref_file.h"

/* The most training steps a reference may record. */
#define VT_SEQ_MAX_STEPS 8

typedef struct vt_seq_ref {
    vt_ref_file file;
    int batch, steps;      /* meta.batch, meta.steps */
    float lr, momentum;    /* meta.sgd, where the reference has SGD runs (else 0 and vdnn's default momentum) */
    const float *adamw;    /* meta.adamw: lr, beta1, beta2, eps, weight decay */
    const float *tokens;   /* data.out, once vt_seq_ref_graph has sized it */
    const int32_t *labels; /* labels, likewise */
    const char *model;     /* heads every line vt_seq_check prints; NULL for none */
    size_t bad;            /* tensors that differed so far */
    /* What vt_seq_check_params measures errors against: 0, each tensor's largest value; else this (AdamW's
     * parameters: lr x steps, how far a step can move them whatever their size). */
    double param_scale;
} vt_seq_ref;

/* Reads tests/reference/NAME.bin and its meta arrays (the test fails on a damaged file). */
void vt_seq_ref_load(vt_seq_ref *r, const char *name);
void vt_seq_ref_free(vt_seq_ref *r);
/* tests/reference/NAME.cfg resolved at the reference's batch; points r->tokens and r->labels at its inputs. */
vdnn_graph_t *vt_seq_ref_graph(vt_seq_ref *r, const char *name);

/* Counts a mismatch in r->bad unless |got - want| <= tol * max(max |want|, 1e-6) everywhere (attention probabilities
 * and gradients span many magnitudes, so the bound follows the tensor's largest value); prints the worst error. */
void vt_seq_check(vt_seq_ref *r, const char *what, const float *got, const float *want, size_t n, double tol);
/* The same against `scale` (0: the tensor's largest value). */
void vt_seq_check_scaled(vt_seq_ref *r, const char *what, const float *got, const float *want, size_t n, double tol,
                         double scale);

/* Options of a net of g at the reference's batch, memory poisoned: SGD with the reference's momentum and no weight
 * decay, or AdamW with meta.adamw's hyperparameters. */
vdnn_net_options vt_seq_options(const vt_seq_ref *r, const vdnn_graph_t *g, bool adamw);
/* A net of g (gradients kept readable when keep_grads) holding the reference's initial parameters. */
vdnn_net_t *vt_seq_net(vt_seq_ref *r, const vdnn_graph_t *g, vdnn_backend_t *be, const vdnn_net_options *cfg,
                       bool keep_grads);

/* Every weight and bias of net against the reference's "<prefix><layer>.weight<suffix>" (".bias" likewise). With
 * keys_bias_noise the keys' third of each attention's qkv bias is passed over: it has no gradient in exact arithmetic
 * (it adds the same q.b to every score of a row, which the softmax cancels), so both sides hold rounding noise that
 * AdamW scales to whole steps. */
void vt_seq_check_params(vt_seq_ref *r, const vdnn_graph_t *g, vdnn_net_t *net, const char *prefix, const char *suffix,
                         double tol, bool keys_bias_noise);

/* The logits of a forward pass in evaluation mode on the reference tokens against "head.out" ("<what>"). */
void vt_seq_check_logits(vt_seq_ref *r, const vdnn_graph_t *g, vdnn_net_t *net, const char *what, double tol);

/* r->steps training steps at lr, each step's loss against the reference's array `losses` ("<label> at step t");
 * after step 0 every parameter gradient too (at grad_tol) unless grad_tol is 0. */
void vt_seq_train(vt_seq_ref *r, const vdnn_graph_t *g, vdnn_net_t *net, float lr, const char *losses, const char *label,
                  double loss_tol, double grad_tol);

/* Fails the test when any vt_seq_check counted a mismatch since r->bad was last cleared. */
void vt_seq_assert_good(vt_seq_ref *r);

#endif
