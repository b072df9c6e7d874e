/* Which reduced-precision types the CPU backend runs: bf16 on oneDNN's primitives only where oneDNN may use AVX-512
 * BF16 (the CPU has it and DNNL_MAX_CPU_ISA does not cap it), since elsewhere oneDNN would emulate it several times
 * slower than fp32 (the ops whose bf16 is fp32 code, cpu_ops_table.c's bf16_anywhere, run it on any CPU); fp16
 * never (oneDNN 2.6 has no fp16 training kernels for CPUs). The check can be told to act as if the CPU lacked
 * bf16, so the refusal is tested on any machine: the backend option no_bf16, or VDNN_CPU_ISA=no-bf16 in the
 * environment ("native" or empty: what the CPU has). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/op_check.h"

static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_sse41: return "sse41";
    default: return "no vector ISA";
    }
}

vdnn_status vdnn_cpu_isa_resolve(cpu_backend *b, vdnn_error *err)
{
    const char *env = getenv("VDNN_CPU_ISA");
    bool forced = b->opt.no_bf16;
    if (env && *env && strcmp(env, "native")) {
        if (strcmp(env, "no-bf16"))
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                             "cpu backend: VDNN_CPU_ISA=%s (accepted: native, no-bf16, or unset)", env);
        forced = true;
    }
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    const bool has = ((unsigned)isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) == (unsigned)dnnl_cpu_isa_avx512_core_bf16;
    b->bf16 = has && !forced;
    if (b->bf16) b->no_bf16_why[0] = '\0';
    else if (forced)
        snprintf(b->no_bf16_why, sizeof b->no_bf16_why, "this backend acts as a CPU without AVX-512 BF16 (%s)",
                 b->opt.no_bf16 ? "its no_bf16 option" : "VDNN_CPU_ISA=no-bf16");
    else
        snprintf(b->no_bf16_why, sizeof b->no_bf16_why,
                 "this CPU lacks AVX-512 BF16 (oneDNN may use %s here), and bf16 is not emulated", isa_name(isa));
    return VDNN_OK;
}

vdnn_status vdnn_cpu_check_dtype(const cpu_backend *b, vdnn_dtype t, const char *kind, vdnn_error *err)
{
    char what[48];
    snprintf(what, sizeof what, "cpu %s", kind);
    vdnn_status st = vdnn_op_check_dtypes(t, t, what, err);
    if (st) return st;
    if (t == VDNN_DTYPE_F16)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                         "cpu %s: fp16 runs on CUDA only (oneDNN has no fp16 training kernels for CPUs); use bf16 or fp32",
                         kind);
    if (t == VDNN_DTYPE_BF16 && !b->bf16)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "cpu %s: bf16 needs AVX-512 BF16: %s; use fp32", kind,
                         b->no_bf16_why);
    return VDNN_OK;
}
