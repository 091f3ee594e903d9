#!/usr/bin/env bash
# The command lines bench/gpu/run.sh gives a lent GPU (bench, amp, predict, profiles, offload),
# with their flags, on small nets and the emulated GPUs (cgdp_on_emulated_gpu), so that a flag, a
# CUDA path or a table's input that fails shows here rather than in the GPU's 15 minutes. Each
# must exit 0 and print what the script's tables read.
#   cli_on_emulated_gpu.sh CGDP_BINARY SOURCE_DIR
set -euo pipefail
cgdp=$1
cd "$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Runs cgdp with the given arguments into $work/<name>.log; on failure prints its end and exits.
run() {  # name args...
  local name=$1
  shift
  if ! timeout 300 "$cgdp" "$@" >"$work/$name.log" 2>&1; then
    echo "FAILED ($name): cgdp $*" >&2
    tail -n 20 "$work/$name.log" >&2
    exit 1
  fi
}
# That a run's log holds a line matching `pattern`.
expect() {  # name pattern
  grep -Eq "$2" "$work/$1.log" || {
    echo "FAILED ($1): no line matches '$2' in:" >&2
    tail -n 20 "$work/$1.log" >&2
    exit 1
  }
}

model=models/fashion_cnn.prototxt
small=(--data synthetic --batch 4 --test-interval -1 --test-batch 4 --test-samples 4 --plain
       --phase-table --tf32 --nondeterministic --loader-threads 2 --lr 0.001)

# run.sh bench: cgdp (its defaults) and cgdp-dense at 2 workers on one GPU, then ps0; the first run
# searches cuDNN's algorithms and stores them, the others read them.
algos=$work/cudnn.txt
run bench_cgdp train --model $model "${small[@]}" --devices 2 --device-kind cuda --sync cgdp \
  --iterations 3 --display 3 --cudnn-algorithms "$algos" --oversubscribe
expect bench_cgdp "fully-connected exchange: .*ip1 as factors"
expect bench_cgdp "^iter 3/3"
expect bench_cgdp "backward"  # the phase table
[[ -s $algos ]] || { echo "FAILED: --cudnn-algorithms stored nothing in $algos" >&2; exit 1; }
run bench_dense train --model $model "${small[@]}" --devices 2 --device-kind cuda --sync cgdp \
  --iterations 3 --display 3 --cudnn-algorithms "$algos" --oversubscribe --fc-exchange dense \
  --exchange-dtype fp32
expect bench_dense "^iter 3/3"
run bench_ps0 train --model $model "${small[@]}" --devices 2 --device-kind cuda --sync ps0 \
  --iterations 3 --display 3 --cudnn-algorithms "$algos" --oversubscribe
expect bench_ps0 "^iter 3/3"
# The copy rows' timeline, and a 16-bit exchange.
run bench_timeline train --model $model "${small[@]}" --devices 2 --device-kind cuda --sync cgdp \
  --iterations 2 --display 2 --cudnn-algorithms "$algos" --oversubscribe --exchange-dtype bf16 \
  --timeline "$work/copy.json"
python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))' "$work/copy.json"

# run.sh amp: one worker in each precision, packs on and off, NHWC and NCHW operands.
for p in fp32:auto:fastest bf16:auto:fastest bf16:off:fastest bf16:auto:nchw fp16:auto:fastest; do
  IFS=: read -r precision packs layout <<<"$p"
  run "amp_${precision}_${packs}_$layout" train --model models/resnet_small.prototxt "${small[@]}" \
    --devices 1 --device-kind cuda --sync local --iterations 2 --display 2 \
    --precision "$precision" --pack-activations "$packs" --layout "$layout" \
    --cudnn-algorithms "$work/cudnn_$precision.txt"
  expect "amp_${precision}_${packs}_$layout" "^iter 2/2"
done

# run.sh profiles and predict: a profile with the host sums, then the model's figures for 4 GPUs.
run profile profile --model $model --data synthetic --batch 4 --devices 1 --device-kind cuda \
  --tf32 --nondeterministic --host-threads 2 --sum-inputs 4 --iterations 2 --warmup 1 \
  --cudnn-algorithms "$algos" --out "$work/profile.json"
run predict predict --model $model --profile "$work/profile.json" --devices 4 --json
python3 - "$work/predict.log" <<'EOF'
import json, sys
cgdp = json.load(open(sys.argv[1]))["cgdp"]
assert cgdp["d2h_bytes_per_worker"] > 0 and cgdp["h2d_bytes_per_worker"] > 0, cgdp
EOF

# run.sh offload: within 60% of what the unconstrained run held at its peak, cuDNN's choices
# shared; the planned run keeps to its budget and saves the same bits.
CGDP=$cgdp FLAGS="--device-kind cuda --tf32 --cudnn-algorithms $work/cudnn_offload.txt" \
  bench/offload_table.sh models/resnet_small.prototxt 8 0.6 2 >"$work/offload.log" 2>&1 || {
  echo "FAILED: bench/offload_table.sh on the emulated GPU" >&2
  tail -n 20 "$work/offload.log" >&2
  exit 1
}
if grep -q "OVER it" "$work/offload.log" || ! grep -Eq "\| yes \|$" "$work/offload.log"; then
  echo "FAILED: the offloaded run went over its budget or changed the parameters:" >&2
  cat "$work/offload.log" >&2
  exit 1
fi
# cgdp topo (run.sh's first look at the machine): the GPUs and a worker each; one more GPU worker
# than GPUs is refused with what to add (topology_test's TopoCommand case, which needs GPUs).
run topo topo --devices 2
expect topo "^GPUs: 2"
expect topo "^  cuda:1 -> NUMA node"
if timeout 60 "$cgdp" topo --devices 3 >"$work/topo3.log" 2>&1; then
  echo "FAILED (topo3): cgdp topo --devices 3 on 2 GPUs exited 0" >&2
  exit 1
fi
expect topo3 "only 2 CUDA GPUs found; add --cpu to plan CPU workers"

echo "every command line of bench/gpu/run.sh ran on the emulated GPUs"
