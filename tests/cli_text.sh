#!/usr/bin/env bash
# Sequence models on the command line (docs/sequence.md): `vdnn info gpt-mini`, `--data text:FILE` errors (missing,
# empty, too short for one sequence, longer than the model's context), and a short gpt-mini training run that prints
# the validation loss in nats and bits per token and measures the peak `vdnn plan` plans, and `vdnn sample`.
# Usage: cli_text.sh PATH/TO/vdnn   (run from the repository root; CTest does both)
set -uo pipefail

VDNN=${1:?usage: cli_text.sh PATH/TO/vdnn}
# shellcheck source=lib_cli.sh
source "$(dirname "$0")/lib_cli.sh"

if "$VDNN" info gpt-mini >"$TMP/info" 2>"$TMP/err" && grep -q "attn_probs" "$TMP/info" &&
    grep -q "parameters            867328" "$TMP/info"; then ok; else bad "info gpt-mini: $(head -c 300 "$TMP/err")"; fi

: >"$TMP/empty.txt"
printf 'hello world' >"$TMP/short.txt"
python3 -c 'import sys; sys.stdout.write("the quick brown fox jumps over the lazy dog. " * 200)' >"$TMP/text.txt"
common=(--model gpt-mini --batch 4 --device cpu --threads 1 --log-every 1000)
run "text: missing file" 1 "text:$TMP/nope.txt: cannot open it" -- train "${common[@]}" --data "text:$TMP/nope.txt"
run "text: empty file" 1 "the file is empty" -- train "${common[@]}" --data "text:$TMP/empty.txt"
run "text: too short" 1 "11 bytes is too short for one sequence of 64 tokens" "needs at least 650 bytes" -- \
    train "${common[@]}" --data "text:$TMP/short.txt"
run "text: no file" 2 "no file given" -- train "${common[@]}" --data "text:"
run "--seq-len 0" 2 "--seq-len" -- train "${common[@]}" --data "text:$TMP/text.txt" --seq-len 0
run "--seq-len beyond the context" 1 "sequence of 65 tokens is longer than its context=64" -- \
    train "${common[@]}" --data "text:$TMP/text.txt" --seq-len 65
run "text on an image net" 2 "feeds sequence models" "lenet takes 1x28x28 images" -- train --model lenet --data "text:$TMP/text.txt" --steps 1
run "synthetic images on a sequence model" 1 "one label per image, but the net predicts every token" -- \
    train --model gpt-mini --data synthetic --batch 4 --steps 1 --device cpu

if "$VDNN" train "${common[@]}" --data "text:$TMP/text.txt" --seq-len 32 --steps 3 >"$TMP/out" 2>"$TMP/err" &&
    grep -q "validation loss: [0-9.]* nats/token, [0-9.]* bits/token" "$TMP/out"; then ok
else bad "train gpt-mini on text: $(head -c 400 "$TMP/err") $(tail -2 "$TMP/out")"; fi

# AdamW: a bad name is refused; its two moments make the plan larger by the parameters' bytes (867,328 floats).
run "--optimizer foo" 2 "--optimizer" "'foo'" -- train "${common[@]}" --data "text:$TMP/text.txt" --optimizer foo
run "--beta1 1" 2 "--beta1" -- train "${common[@]}" --data "text:$TMP/text.txt" --optimizer adamw --beta1 1
"$VDNN" plan gpt-mini --seq-len 32 --batch 4 --device cpu --json >"$TMP/sgd.json" 2>/dev/null
"$VDNN" plan gpt-mini --seq-len 32 --batch 4 --device cpu --optimizer adamw --json >"$TMP/adamw.json" 2>/dev/null
if [ "$(($(json_get "$TMP/adamw.json" peak_device_bytes) - $(json_get "$TMP/sgd.json" peak_device_bytes)))" = 3469312 ]
then ok; else bad "plan --optimizer adamw: not 3469312 bytes more than SGD's"; fi
if "$VDNN" train "${common[@]}" --data "text:$TMP/text.txt" --seq-len 32 --steps 2 --no-eval --optimizer adamw --lr 0.001 \
        --policy all --poison --json >"$TMP/run.json" 2>"$TMP/err" && "$VDNN" plan gpt-mini --seq-len 32 --batch 4 \
        --device cpu --optimizer adamw --policy all --json >"$TMP/plan.json" 2>/dev/null &&
    [ "$(json_get "$TMP/plan.json" peak_device_bytes)" = "$(json_get "$TMP/run.json" peak_device_bytes)" ]; then ok
else bad "train --optimizer adamw --policy all: $(head -c 300 "$TMP/err")"; fi

# The peak training measures is the one `vdnn plan` plans, under a swapping policy too.
for p in none all auto; do
    "$VDNN" plan gpt-mini --seq-len 32 --batch 4 --device cpu --policy "$p" --json >"$TMP/plan.json" 2>"$TMP/err" ||
        bad "plan gpt-mini/$p: $(cat "$TMP/err")"
    if "$VDNN" train "${common[@]}" --data "text:$TMP/text.txt" --seq-len 32 --steps 1 --no-eval --policy "$p" \
            --poison --json >"$TMP/run.json" 2>"$TMP/err"; then
        planned=$(json_get "$TMP/plan.json" peak_device_bytes)
        measured=$(json_get "$TMP/run.json" peak_device_bytes)
        if [ "$planned" = "$measured" ]; then ok; else bad "gpt-mini/$p: planned peak $planned, measured $measured"; fi
    else
        bad "train gpt-mini/$p: $(head -c 300 "$TMP/err")"
    fi
done

# tokens:FILE, llm.c's .bin layout: the vocabulary is the largest id + 1 (297 + 1 here); every malformed file is named
# with why.
python3 - "$TMP" <<'PY'
import struct, sys
d = sys.argv[1]
ids = [(i * 7 + i // 5) % 300 for i in range(3000)]
def write(name, ids, magic=20240520, version=1, count=None, cut=0):
    head = [0] * 256
    head[0], head[1], head[2] = magic, version, len(ids) if count is None else count
    b = struct.pack("<256i", *head) + struct.pack("<%dH" % len(ids), *ids)
    open("%s/%s" % (d, name), "wb").write(b[:len(b) - cut])
write("tok.bin", ids)
write("trunc.bin", ids, cut=3)
write("magic.bin", ids, magic=1)
write("version.bin", ids, version=2)
write("short.bin", ids[:20])
write("none.bin", [])
open("%s/tiny.bin" % d, "wb").write(b"\x01\x02")
PY
if "$VDNN" train "${common[@]}" --data "tokens:$TMP/tok.bin" --seq-len 16 --steps 2 >"$TMP/out" 2>"$TMP/err" &&
    grep -q "298 classes" "$TMP/out" && grep -q "validation loss: [0-9.]* nats/token" "$TMP/out"; then ok
else bad "train on tokens: $(head -c 300 "$TMP/err") $(head -3 "$TMP/out")"; fi
tk=(train "${common[@]}" --seq-len 16 --steps 1 --data)
run "tokens: truncated" 1 "the header says 3000 tokens (6000 bytes after it), the file has 5997" "truncated" -- "${tk[@]}" "tokens:$TMP/trunc.bin"
run "tokens: wrong magic" 1 "magic 1, expected 20240520" -- "${tk[@]}" "tokens:$TMP/magic.bin"
run "tokens: other version" 1 "version 2; this build reads version 1" -- "${tk[@]}" "tokens:$TMP/version.bin"
run "tokens: too short" 1 "20 tokens is too short for one sequence of 16 tokens" -- "${tk[@]}" "tokens:$TMP/short.bin"
run "tokens: no tokens" 1 "holds no tokens" -- "${tk[@]}" "tokens:$TMP/none.bin"
run "tokens: shorter than the header" 1 "2 bytes, shorter than the 1024-byte header" -- "${tk[@]}" "tokens:$TMP/tiny.bin"
run "tokens: no file" 2 "no file given (use --data tokens:FILE)" -- "${tk[@]}" "tokens:"

# Without --data a sequence model reads the default text (Debian's fortunes packages), or says which package is missing.
# text:DIR reads a directory's text files as one text: binary files and symlinks are left out.
mkdir -p "$TMP/dir" && cp "$TMP/text.txt" "$TMP/dir/a" && cp "$TMP/text.txt" "$TMP/dir/b" && printf 'x\0y' >"$TMP/dir/c.dat" &&
    ln -sf a "$TMP/dir/a.u8"
"$VDNN" train "${common[@]}" --data "text:$TMP/dir" --seq-len 16 --steps 1 --no-eval >"$TMP/out" 2>"$TMP/err"
# Two copies of the text (the binary file and the symlink left out): the first nine tenths, cut into sequences.
all=$((2 * $(wc -c <"$TMP/text.txt")))
want=$(((all - all / 10 - 1) / 16))
if grep -q ", $want train images" "$TMP/out"; then ok
else bad "text:DIR: expected $want training sequences of two files: $(head -c 300 "$TMP/err") $(cat "$TMP/out")"; fi
mkdir -p "$TMP/bin" && printf 'x\0y' >"$TMP/bin/c.dat"
run "text:DIR without text" 1 "holds no text file" -- train "${common[@]}" --data "text:$TMP/bin" --seq-len 16 --steps 1
if [ -d /usr/share/games/fortunes ]; then
    if "$VDNN" train "${common[@]}" --seq-len 16 --steps 1 >"$TMP/out" 2>"$TMP/err" &&
        grep -q "validation loss: [0-9.]* nats/token" "$TMP/out"; then ok
    else bad "train gpt-mini on the default text: $(head -c 300 "$TMP/err")"; fi
else
    run "default text missing" 1 "install the Debian package 'fortunes'" -- train "${common[@]}" --seq-len 16 --steps 1
fi

# --clip-grad-norm: a positive number; a clipped run trains, also with --offload-params (bytes equal to the run
# with the parameters on the device).
run "--clip-grad-norm 0" 2 "--clip-grad-norm: invalid value '0'" -- train "${common[@]}" --data "text:$TMP/text.txt" --clip-grad-norm 0
for home in "" --offload-params; do
    # shellcheck disable=SC2086
    if "$VDNN" train "${common[@]}" --data "text:$TMP/text.txt" --seq-len 32 --steps 2 --no-eval --clip-grad-norm 0.5 \
            --optimizer adamw --lr 0.003 $home --save "$TMP/clip$home.ckpt" >"$TMP/out" 2>"$TMP/err"; then ok
    else bad "train --clip-grad-norm $home: $(head -c 300 "$TMP/err")"; fi
done
if cmp -s "$TMP/clip.ckpt" "$TMP/clip--offload-params.ckpt"; then ok
else bad "--clip-grad-norm with --offload-params: checkpoint differs from the parameters on the device"; fi

# --clip-grad-norm on vdnn plan: clipped updates wait for backward's end; the plan is the one clipped training runs
# (its measured peak), with homed parameters too.
"$VDNN" plan gpt-mini --batch 8 --device cpu --optimizer adamw --offload-params --clip-grad-norm 1 --json \
    >"$TMP/clip.json" 2>"$TMP/err"
if "$VDNN" train "${common[@]}" --batch 8 --data "text:$TMP/text.txt" --optimizer adamw --offload-params \
        --clip-grad-norm 1 --steps 1 --no-eval >"$TMP/out" 2>>"$TMP/err" &&
    grep -q "peak device memory .* ($(json_get "$TMP/clip.json" peak_device_bytes) bytes)" "$TMP/out"; then ok
else bad "plan --clip-grad-norm against clipped training's peak: $(head -c 300 "$TMP/err") $(tail -1 "$TMP/out")"; fi

# --context N: the position table grows (64 more rows of 128), sequences up to N train; not for an image model.
if "$VDNN" info gpt-mini --context 128 >"$TMP/info" 2>"$TMP/err" && grep -q "parameters            875520" "$TMP/info"
then ok; else bad "info gpt-mini --context 128: $(head -c 300 "$TMP/err")"; fi
if "$VDNN" train "${common[@]}" --data "text:$TMP/text.txt" --context 128 --seq-len 100 --steps 1 --no-eval \
        >"$TMP/out" 2>"$TMP/err"; then ok; else bad "train --context 128: $(head -c 300 "$TMP/err")"; fi
run "--context on an image model" 2 "--context: models/lenet.cfg has no pos_embed layer" -- info lenet --context 128

# --head-groups G: every attention in G groups of heads (nodes of their own), the same losses as the whole attention.
if "$VDNN" info gpt-mini --head-groups 2 >"$TMP/info" 2>"$TMP/err" && grep -q "h3.probs.g1 *attn_probs" "$TMP/info" &&
    grep -q "h3.mix *feat_cat" "$TMP/info" && grep -q "parameters            867328" "$TMP/info"
then ok; else bad "info gpt-mini --head-groups 2: $(head -c 300 "$TMP/err")"; fi
for g in 1 4; do
    "$VDNN" train "${common[@]}" --data "text:$TMP/text.txt" --seq-len 32 --steps 2 --log-every 1 --no-eval \
        --head-groups "$g" 2>/dev/null | grep "^step" | sed 's/ *[0-9.]* img\/s.*//' >"$TMP/groups$g.txt"
done
if [ -s "$TMP/groups1.txt" ] && cmp -s "$TMP/groups1.txt" "$TMP/groups4.txt"; then ok
else bad "train --head-groups 4: losses differ from the whole attention's: $(cat "$TMP/groups1.txt" "$TMP/groups4.txt")"; fi
# A checkpoint trained in groups resumes under the whole attention (the same parameters; the model hash is the whole
# attention's).
if "$VDNN" train "${common[@]}" --data "text:$TMP/text.txt" --seq-len 32 --steps 1 --no-eval --head-groups 2 \
        --save "$TMP/groups.ckpt" >/dev/null 2>"$TMP/err" &&
    "$VDNN" sample --resume "$TMP/groups.ckpt" --model gpt-mini --seq-len 32 --device cpu --prompt "the " --tokens 4 \
        >/dev/null 2>>"$TMP/err"; then ok
else bad "train --head-groups 2, then sample without groups: $(head -c 300 "$TMP/err")"; fi
run "--head-groups 3" 2 "--head-groups: 3 does not divide the 4 heads of 'h0.probs'" -- info gpt-mini --head-groups 3
run "--head-groups 0" 2 "--head-groups" -- info gpt-mini --head-groups 0
run "--head-groups on an image model" 2 "has no attention (attn_probs) layer" -- info lenet --head-groups 2

# --attention fused: every attention one op (no probabilities tensor), the losses the materialized attention's to the
# printed digits, a checkpoint that resumes without the flag, a lower plan at a long context.
if "$VDNN" info gpt-mini --attention fused >"$TMP/info" 2>"$TMP/err" && grep -q "h3.mix *attention" "$TMP/info" &&
    ! grep -q "attn_probs" "$TMP/info" && grep -q "parameters            867328" "$TMP/info"
then ok; else bad "info gpt-mini --attention fused: $(head -c 300 "$TMP/err")"; fi
for a in materialized fused; do
    "$VDNN" train "${common[@]}" --data "text:$TMP/text.txt" --seq-len 32 --steps 2 --log-every 1 --no-eval \
        --attention "$a" 2>/dev/null | grep "^step" | sed 's/ *[0-9.]* img\/s.*//' >"$TMP/attn-$a.txt"
done
if [ -s "$TMP/attn-fused.txt" ] && cmp -s "$TMP/attn-materialized.txt" "$TMP/attn-fused.txt"; then ok
else bad "train --attention fused: losses differ: $(cat "$TMP/attn-materialized.txt" "$TMP/attn-fused.txt")"; fi
if "$VDNN" train "${common[@]}" --data "text:$TMP/text.txt" --seq-len 32 --steps 1 --no-eval --attention fused \
        --save "$TMP/fused.ckpt" >/dev/null 2>"$TMP/err" &&
    "$VDNN" sample --resume "$TMP/fused.ckpt" --model gpt-mini --seq-len 32 --device cpu --prompt "the " --tokens 4 \
        >/dev/null 2>>"$TMP/err"; then ok
else bad "train --attention fused, then sample materialized: $(head -c 300 "$TMP/err")"; fi
run "--attention fused with --head-groups" 2 "--attention fused computes each attention whole" -- \
    plan gpt-mini --attention fused --head-groups 2
run "--attention fused with --head-groups auto" 2 "--attention fused computes each attention whole" -- \
    plan gpt-mini --attention fused --head-groups auto --policy auto --budget 50MiB
run "--attention on an image model" 2 "has no attention (attn_probs) layer" -- info lenet --attention fused
run "--attention fast" 2 "--attention: invalid value 'fast' (fused, materialized or auto)" -- \
    plan gpt-mini --attention fast
# In-core at context 1024, batch 2: 77.95 MiB fused against 231.68 MiB with the probabilities (4 heads x 1024^2 a layer).
if "$VDNN" plan gpt-mini --context 1024 --batch 2 --device cpu --attention fused >"$TMP/out" 2>"$TMP/err" &&
    grep -q "peak device memory:    77.95 MiB" "$TMP/out"
then ok; else bad "plan --attention fused at context 1024: $(head -c 300 "$TMP/out")"; fi

# --head-groups auto: the fewest groups whose plan fits. gpt-mini (4 heads) at context 1024, batch 2: auto needs
# 79.4 MiB with the whole attention, 55.5 MiB in 2 groups, 38.8 MiB in 4.
hg=(gpt-mini --context 1024 --batch 2 --device cpu --policy auto --json)
if "$VDNN" plan "${hg[@]}" --budget 50MiB --head-groups auto >"$TMP/auto.json" 2>"$TMP/err" &&
    grep -qF -- "--head-groups auto: 4, the fewest head groups whose plan fits 50.00 MiB" "$TMP/err" &&
    "$VDNN" plan "${hg[@]}" --budget 50MiB --head-groups 4 >"$TMP/four.json" 2>/dev/null &&
    cmp -s "$TMP/auto.json" "$TMP/four.json"
then ok; else bad "plan --head-groups auto at 50 MiB: not the plan in 4 groups: $(head -c 300 "$TMP/err")"; fi
run "--head-groups auto with room for the whole attention" 0 "--head-groups auto: 1, the fewest" -- \
    plan "${hg[@]}" --budget 100MiB --head-groups auto
run "--head-groups auto when nothing fits" 3 "no grouping fits 30.00 MiB; 4 head groups need the least" \
    "needs at least 38.76 MiB" -- plan "${hg[@]}" --budget 30MiB --head-groups auto
run "--head-groups auto in vdnn info" 2 "--head-groups: invalid value 'auto'" -- info gpt-mini --head-groups auto
run "--head-groups auto with a profile" 2 "a profile is measured for one: give --head-groups N" -- \
    plan "${hg[@]}" --budget 50MiB --head-groups auto --profile "$TMP/auto.json"
run "--head-groups auto on an image model" 2 "has no attention (attn_probs) layer" -- \
    plan lenet --budget 50MiB --head-groups auto
# Training in the groups it chose (4, at 10 MiB) gives in-core's checkpoint, bit for bit.
hgt=(train "${common[@]}" --data "text:$TMP/text.txt" --context 256 --seq-len 256 --steps 2 --no-eval)
if "$VDNN" "${hgt[@]}" --policy auto --budget 10MiB --head-groups auto --save "$TMP/hg.ckpt" >/dev/null 2>"$TMP/err" &&
    grep -qF -- "--head-groups auto: 4, the fewest" "$TMP/err" &&
    "$VDNN" "${hgt[@]}" --save "$TMP/hg-none.ckpt" >/dev/null 2>>"$TMP/err" && cmp -s "$TMP/hg.ckpt" "$TMP/hg-none.ckpt"
then ok; else bad "train --head-groups auto at 10 MiB: $(head -c 300 "$TMP/err")"; fi

# --attention auto: the attentions to fuse chosen by their plans. gpt-mini at context 1024, batch 2, default estimate:
# fusing every attention is the fastest plan at 50 MiB (its probabilities are 32 MiB an attention), the very plan of
# --attention fused; at context 64, batch 8 and 6 MiB, the last attention alone.
if "$VDNN" plan "${hg[@]}" --budget 50MiB --attention auto >"$TMP/aa.json" 2>"$TMP/err" &&
    grep -qF -- "--attention auto: 4 of 4 attentions fused (0,1,2,3): the fastest plan that fits 50.00 MiB" "$TMP/err" &&
    "$VDNN" plan "${hg[@]}" --budget 50MiB --attention fused >"$TMP/af.json" 2>/dev/null && cmp -s "$TMP/aa.json" "$TMP/af.json"
then ok; else bad "plan --attention auto at 50 MiB: not the fused plan: $(head -c 300 "$TMP/err")"; fi
run "--attention auto, some fused" 0 "--attention auto: 1 of 4 attentions fused (3): the fastest plan that fits 6.00 MiB" -- \
    plan gpt-mini --batch 8 --device cpu --policy auto --budget 6MiB --attention auto
run "--attention auto when nothing fits" 3 "no choice fits 4.00 MiB; this one needs the least" -- \
    plan gpt-mini --batch 8 --device cpu --policy auto --budget 4MiB --attention auto
run "--attention auto in vdnn info" 2 "--attention: invalid value 'auto' (fused or materialized)" -- \
    info gpt-mini --attention auto
run "--attention auto with --head-groups" 2 "--attention auto fuses whole attentions" -- \
    plan "${hg[@]}" --budget 50MiB --attention auto --head-groups 2
run "--attention auto with a profile" 2 "a profile is measured for one: give --attention fused or materialized" -- \
    plan "${hg[@]}" --budget 50MiB --attention auto --profile "$TMP/aa.json"
run "--attention auto on an image model" 2 "has no attention (attn_probs) layer" -- \
    plan lenet --budget 50MiB --attention auto
# --attention auto from measured profiles: the model unfused (--profile) and with every attention fused
# (--fused-profile); each choice is planned from the two.
"$VDNN" profile gpt-mini --batch 8 --iterations 1 --device cpu --out "$TMP/pu.json" >/dev/null 2>&1 &&
    "$VDNN" profile gpt-mini --batch 8 --iterations 1 --device cpu --attention fused --out "$TMP/pf.json" >/dev/null 2>&1 ||
    bad "vdnn profile gpt-mini (unfused and --attention fused) failed"
run "--attention auto from two profiles" 0 "the fastest plan that fits 6.00 MiB (costs from the two profiles)" -- \
    plan gpt-mini --batch 8 --policy auto --budget 6MiB --attention auto --profile "$TMP/pu.json" \
    --fused-profile "$TMP/pf.json"
run "--fused-profile without --profile" 2 "--fused-profile goes with --profile" -- \
    plan gpt-mini --batch 8 --policy auto --attention auto --fused-profile "$TMP/pf.json"
run "--fused-profile without --attention auto" 2 "--fused-profile is for --attention auto" -- \
    plan gpt-mini --batch 8 --policy auto --profile "$TMP/pu.json" --fused-profile "$TMP/pf.json"
run "--fused-profile of the unfused model" 1 "pu.json: profile has 49 layers, but model gpt-mini has 45" -- \
    plan gpt-mini --batch 8 --policy auto --attention auto --profile "$TMP/pu.json" --fused-profile "$TMP/pu.json"
# Training with what it chose (every attention fused, at 10 MiB) gives the fused model's in-core checkpoint, bit for bit.
if "$VDNN" "${hgt[@]}" --policy auto --budget 10MiB --attention auto --save "$TMP/aa.ckpt" >/dev/null 2>"$TMP/err" &&
    grep -qF -- "--attention auto: 4 of 4 attentions fused" "$TMP/err" &&
    "$VDNN" "${hgt[@]}" --attention fused --save "$TMP/aa-fused.ckpt" >/dev/null 2>>"$TMP/err" &&
    cmp -s "$TMP/aa.ckpt" "$TMP/aa-fused.ckpt"
then ok; else bad "train --attention auto at 10 MiB: $(head -c 300 "$TMP/err")"; fi
# Training from the two profiles plans as vdnn plan does for the same flags (the net's plan from them composed for
# the choice), and, at context 256 and 7.8 MiB, where only every attention fused fits, trains like --attention fused.
sq=(gpt-mini --batch 8 --device cpu --threads 1 --policy auto --budget 6MiB --attention auto)
if "$VDNN" train "${common[@]}" --data "text:$TMP/text.txt" --steps 1 --no-eval "${sq[@]:1}" \
        --profile "$TMP/pu.json" --fused-profile "$TMP/pf.json" --plan-json "$TMP/tq.json" >/dev/null 2>"$TMP/err" &&
    grep -qF -- "(costs from the two profiles)" "$TMP/err" &&
    "$VDNN" plan "${sq[@]}" --profile "$TMP/pu.json" --fused-profile "$TMP/pf.json" --json >"$TMP/pq.json" 2>>"$TMP/err" &&
    cmp -s "$TMP/tq.json" "$TMP/pq.json"
then ok; else bad "train --attention auto --fused-profile: not vdnn plan's plan: $(head -c 300 "$TMP/err")"; fi
long=(--batch 4 --context 256 --seq-len 256 --iterations 1 --device cpu --threads 1)
if "$VDNN" profile gpt-mini "${long[@]}" --out "$TMP/lu.json" >/dev/null 2>"$TMP/err" &&
    "$VDNN" profile gpt-mini "${long[@]}" --attention fused --out "$TMP/lf.json" >/dev/null 2>>"$TMP/err" &&
    "$VDNN" "${hgt[@]}" --policy auto --budget 7.8MiB --attention auto --profile "$TMP/lu.json" \
        --fused-profile "$TMP/lf.json" --save "$TMP/am.ckpt" >/dev/null 2>>"$TMP/err" &&
    grep -qF -- "--attention auto: 4 of 4 attentions fused (0,1,2,3): the fastest plan that fits 7.80 MiB (costs from the two profiles)" "$TMP/err" &&
    cmp -s "$TMP/am.ckpt" "$TMP/aa-fused.ckpt"
then ok; else bad "train --attention auto --fused-profile at 7.8 MiB: $(head -c 300 "$TMP/err")"; fi
run "train --fused-profile without --attention auto" 2 "--fused-profile $TMP/pf.json goes with --attention auto and --profile" -- \
    "${hgt[@]}" --profile "$TMP/pu.json" --fused-profile "$TMP/pf.json"
run "train --fused-profile without --profile" 2 "goes with --attention auto and --profile" -- \
    "${hgt[@]}" --attention auto --fused-profile "$TMP/pf.json"
run "vdnn eval --fused-profile" 2 "unknown flag '--fused-profile'" -- \
    eval --resume "$TMP/am.ckpt" --model gpt-mini --fused-profile "$TMP/pf.json"

# vdnn profile measures a sequence model (token ids and a label per token), and vdnn plan plans from it.
if "$VDNN" profile gpt-mini --batch 4 --seq-len 16 --device cpu --threads 1 --out "$TMP/prof.json" >/dev/null 2>"$TMP/err" &&
    "$VDNN" plan gpt-mini --batch 4 --seq-len 16 --device cpu --profile "$TMP/prof.json" --policy auto --json \
        >"$TMP/plan.json" 2>>"$TMP/err" && [ "$(json_get "$TMP/plan.json" feasible)" = true ]; then ok
else bad "profile gpt-mini, then plan from it: $(head -c 300 "$TMP/err")"; fi

# vdnn project counts a sequence model's samples as sequences of its context.
printf '64 1\n4096 1\n' >"$TMP/epochs.txt"
if "$VDNN" project gpt-mini --devices 4 --batch 16 --epochs-table "$TMP/epochs.txt" --dataset-size 10000 >"$TMP/out" 2>"$TMP/err" &&
    grep -q "10000 sequences of 64 tokens per epoch" "$TMP/out" && grep -q "sequences/s" "$TMP/out"; then ok
else bad "project gpt-mini: $(head -c 300 "$TMP/err")"; fi

# vdnn sample: the prompt and N more bytes, the same text for the same seed, and its errors.
if "$VDNN" train "${common[@]}" --data "text:$TMP/text.txt" --seq-len 32 --steps 20 --no-eval --optimizer adamw \
        --lr 0.003 --save "$TMP/gpt.ckpt" >/dev/null 2>"$TMP/err"; then ok; else bad "train for sample: $(head -c 300 "$TMP/err")"; fi
smp=(sample --resume "$TMP/gpt.ckpt" --seq-len 32 --device cpu --threads 1)
if "$VDNN" "${smp[@]}" --prompt "the quick" --tokens 40 >"$TMP/s1" 2>"$TMP/err" && [ "$(head -c 9 "$TMP/s1")" = "the quick" ] &&
    [ "$(wc -c <"$TMP/s1")" = 50 ]; then ok; else bad "sample greedy: $(head -c 300 "$TMP/err") [$(cat "$TMP/s1")]"; fi
"$VDNN" "${smp[@]}" --prompt "the" --tokens 40 --temperature 1 --seed 5 >"$TMP/t1" 2>/dev/null
"$VDNN" "${smp[@]}" --prompt "the" --tokens 40 --temperature 1 --seed 5 >"$TMP/t2" 2>/dev/null
"$VDNN" "${smp[@]}" --prompt "the" --tokens 40 --temperature 1 --seed 6 >"$TMP/t3" 2>/dev/null
if cmp -s "$TMP/t1" "$TMP/t2" && ! cmp -s "$TMP/t1" "$TMP/t3" && [ "$(wc -c <"$TMP/t1")" = 44 ]; then ok
else bad "sample --temperature 1: not the same text for one seed, or the same for two"; fi
run "sample without --prompt" 2 "--prompt TEXT are required" -- "${smp[@]}"
run "sample --tokens 0" 2 "--tokens: invalid value '0'" -- "${smp[@]}" --prompt a --tokens 0
run "sample --temperature -1" 2 "--temperature: invalid value '-1'" -- "${smp[@]}" --prompt a --temperature -1
run "sample a prompt beyond --seq-len" 2 "--prompt: 33 bytes; it must be 1 to 32" -- "${smp[@]}" \
    --prompt "$(printf 'a%.0s' $(seq 33))"
run "sample at another --seq-len" 1 "was it trained at another --seq-len?" -- sample --resume "$TMP/gpt.ckpt" --device cpu --prompt a
run "sample an image model" 2 "lenet is not a sequence model" -- sample --resume "$TMP/gpt.ckpt" --model lenet --prompt a

# bf16 on a CPU without AVX-512 BF16 (simulated): a transformer runs (its ops widen bf16 maps to fp32 code), half
# its maps' bytes; its checkpoint samples, and evaluates in fp32 with a message; a CNN is refused naming its layer.
export VDNN_CPU_ISA=no-bf16
"$VDNN" info gpt-mini --json >"$TMP/i32.json" 2>/dev/null
"$VDNN" info gpt-mini --json --precision bf16 >"$TMP/i16.json" 2>"$TMP/err"
f32=$(json_get "$TMP/i32.json" feature_map_bytes) f16=$(json_get "$TMP/i16.json" feature_map_bytes)
if [ -n "$f16" ] && [ "$((f16 * 2))" = "$f32" ]; then ok; else bad "info gpt-mini --precision bf16: maps $f16 bytes, fp32 $f32 ($(head -c 200 "$TMP/err"))"; fi
if "$VDNN" train "${common[@]}" --data "text:$TMP/text.txt" --seq-len 32 --steps 3 --precision bf16 --policy auto \
        --budget 3MiB --poison --save "$TMP/bf16.ckpt" >"$TMP/out" 2>"$TMP/err" && grep -q "bf16 maps" "$TMP/out" &&
    grep -q "validation loss: [0-9.]* nats/token" "$TMP/out"; then ok
else bad "train gpt-mini --precision bf16: $(head -c 300 "$TMP/err") $(tail -2 "$TMP/out")"; fi
if "$VDNN" sample --resume "$TMP/bf16.ckpt" --seq-len 32 --device cpu --threads 1 --prompt "the" --tokens 8 \
        >"$TMP/s16" 2>"$TMP/err" && [ "$(head -c 3 "$TMP/s16")" = "the" ] && [ "$(wc -c <"$TMP/s16")" = 12 ]; then ok
else bad "sample a bf16 gpt-mini checkpoint: $(head -c 300 "$TMP/err")"; fi
run "a bf16 gpt-mini checkpoint evaluated in fp32" 0 "written by a bf16 net" -- eval --model gpt-mini --batch 4 \
    --device cpu --threads 1 --data "text:$TMP/text.txt" --seq-len 32 --resume "$TMP/bf16.ckpt"
run "bf16 CNN without AVX-512 BF16" 1 "layer 'conv1'" "AVX-512 BF16" -- plan lenet --precision bf16
unset VDNN_CPU_ISA

echo "cli_text: $passed passed, $failed failed"
[ "$failed" = 0 ]
