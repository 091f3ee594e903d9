#!/usr/bin/env bash
# cgdp on one GPU next to PyTorch, in two halves, since the GPU machine has CUDA, PyTorch and
# torchvision but none of Debian's libraries and builds nothing:
#   bench/gpu/run.sh prepare   here: builds cgdp, gpu_copy_bench and the CUDA tests with CUDA
#                              (protobuf, OpenBLAS, hwloc, zlib, libgomp static) and assembles
#                              build-gpu/carry (git-ignored, at most 64 MiB)
#   bench/gpu/run.sh bench     on the GPU machine: prints ONE table (runs within BUDGET_S s):
#                              single-worker iteration time and images/s next to PyTorch's;
#                              1, 2 and 4 workers sharing the GPU, cgdp vs ps0, with the phases;
#                              chunk copy GB/s next to plain pinned cudaMemcpy; MiB per worker
#   bench/gpu/run.sh test      on the GPU machine: the CUDA tests from the carry folder
#   bench/gpu/run.sh ab M B N 'A flags' 'B flags' [ROUNDS]   on the GPU machine: two flag sets,
#                              alternating cgdp runs; median ms per iteration and gradient sum
#                              (A_CGDP, B_CGDP: another cgdp binary for that set, say a commit's
#                              before a change)
#   bench/gpu/run.sh predict M B N   on the GPU machine: `cgdp profile` (the GPU's sync point,
#                              copies and overlap per MB), then per chunk plan (layer, all) the
#                              predicted phases next to one measured `cgdp train --phase-table`
#   bench/gpu/run.sh hostsum   on the GPU machine: the host sum of 4 buffers next to a triad on
#                              the same cores, at 1, 4, 8 and 14 threads (bench/host_aggregate_table.sh)
#   bench/gpu/run.sh offload M B F   on the GPU machine: bench/offload_table.sh on CUDA (TF32,
#                              deterministic cuDNN, timelines): M at
#                              batch B unconstrained, then within the
#                              fraction F of what `inspect --memory` says it needs (issue 35)
#   bench/gpu/run.sh amp       on the GPU machine: one worker per net in fp32 (TF32) and bf16
#                              next to PyTorch's AMP (bench/gpu/amp_table.py; issue 36)
#   bench/gpu/run.sh profiles [M:B ...]   on the GPU machine: one GPU's `cgdp profile` of each net,
#                              host sums timed up to 4 inputs, for `cgdp predict --devices 4`
# With the device tool: run(command="bench/gpu/run.sh bench", carry=["build-gpu/carry"]).
# A 15-minute session (the machine's start included) fits two calls: "bench/gpu/run.sh test;
# BUDGET_S=400 bench/gpu/run.sh bench" (about 9 minutes), then "BUDGET_S=240 bench/gpu/run.sh
# amp" or one offload row; test and amp write test.log and amp_table.txt to $OUT as they go.
# Environment: ITERATIONS (10), BUDGET_S (520), CONFIGS ("alexnet:256 googlenet:64 vgg16:32
# resnet152:12 resnet152:16"), JOBS (build jobs, 2), OUT (gets table.txt and the logs' archive).
# Set-up: tools/setup-debian.sh (prepare, here); the GPU machine (bench and test)
set -euo pipefail
cd "$(dirname "$0")/../.."
carry=build-gpu/carry
binaries=(cgdp gpu_copy_bench cuda_device_test cuda_layers_test cuda_net_test precision16_test train_test
          cgdp_equivalence_test fc_exchange_test activation_plan_test host_aggregate_bench
          cublas_library_test memory_estimate_test relu_absorb_test topology_test)

die() { echo "bench/gpu/run.sh: $*" >&2; exit 1; }

prepare() {
  mkdir -p build-gpu
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCGDP_WITH_CUDA=ON -DCGDP_STATIC_DEPS=ON -DCGDP_WITH_ONEDNN=OFF -DCGDP_WITH_HDF5=OFF \
    "-DCMAKE_CUDA_ARCHITECTURES=80-real;90" -DBUILD_TESTING=ON >build-gpu/cmake.log 2>&1 ||
    { cat build-gpu/cmake.log >&2; die "cmake failed"; }
  grep -q "cgdp: CUDA backend ON" build-gpu/cmake.log || die "no nvcc here: the GPU build needs CUDA"
  cmake --build build-gpu -j"${JOBS:-2}" --target "${binaries[@]}" >build-gpu/build.log 2>&1 ||
    { grep -E "error|Error" build-gpu/build.log | head -20 >&2; die "the build failed (build-gpu/build.log)"; }
  # Keep cuDNN's choices from an earlier bench (cudnn/), so that its search need not run again.
  local kept
  kept=$(mktemp -d)
  [[ -d $carry/cudnn ]] && cp -r "$carry/cudnn" "$kept/"
  rm -rf "$carry"
  mkdir -p "$carry/lib"
  [[ -d $kept/cudnn ]] && mv "$kept/cudnn" "$carry/"
  rm -rf "$kept"
  local stage
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  mkdir "$stage/bin"
  for b in "${binaries[@]}"; do
    local path=build-gpu/$b
    [[ -x $path ]] || path=build-gpu/tests/$b
    [[ -x $path ]] || path=build-gpu/bench/$b
    cp "$path" "$stage/bin/" && strip "$stage/bin/$b"
  done
  # Shared libraries the binaries still need, but for glibc, the C++ runtime and CUDA's (the
  # GPU machine has those; its cuDNN and cuBLAS come from pip).
  ldd "$stage"/bin/* | awk '/=> \// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcud[a-z]*|libcublas[A-Za-z]*)\.so' |
    while read -r lib; do cp -L "$lib" "$carry/lib/"; done
  # Static binaries compress about tenfold; the GPU half unpacks them with python3's tarfile.
  XZ_OPT="-6 -T${JOBS:-2}" tar -C "$stage" -cJf "$carry/bin.tar.xz" bin
  fashion_subset "$carry/fashion-mnist"
  { echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
    echo "built $(date -u +%FT%TZ) on $(uname -n)"
    (cd "$carry" && find . -type f -printf '%s %p\n' | sort -k2); } >"$carry/MANIFEST"
  local bytes tracked
  bytes=$(du -sb "$carry" | cut -f1)
  # The working tree's tracked files travel beside the carry, within the same 64 MiB.
  tracked=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -n 1 | cut -f1)
  ((bytes + tracked <= 64 * 1024 * 1024)) ||
    die "$carry is $((bytes >> 20)) MiB and the tracked files $((tracked >> 20)) MiB: over the 64 MiB that travels"
  echo "$carry: $((bytes >> 20)) MiB ($(ls "$carry/lib" | tr '\n' ' '))"
  echo "next, on the GPU machine: bench/gpu/run.sh bench (carry build-gpu/carry)"
}

# The first 4096 training and 64 test samples of Fashion-MNIST, which the CUDA equivalence test
# reads (the GPU machine has no dataset-fashion-mnist).
fashion_subset() {
  local src=/usr/share/datasets/fashion-mnist
  [[ -d $src ]] || { echo "($src missing: the equivalence test will skip there)"; return 0; }
  mkdir -p "$1"
  python3 - "$src" "$1" <<'EOF'
import gzip, sys
src, dst = sys.argv[1:]
for split, count in (("train", 4096), ("t10k", 64)):
    for kind, header, record in (("images-idx3", 16, 784), ("labels-idx1", 8, 1)):
        name = "%s-%s-ubyte.gz" % (split, kind)
        data = bytearray(gzip.open("%s/%s" % (src, name)).read(header + record * count))
        data[4:8] = count.to_bytes(4, "big")
        with gzip.open("%s/%s" % (dst, name), "wb") as out:
            out.write(data)
EOF
}

# On the GPU machine: the binaries unpacked, the libraries found, or a clear reason why not.
gpu_setup() {
  [[ -f $carry/bin.tar.xz ]] || die "no $carry/bin.tar.xz: run 'bench/gpu/run.sh prepare' first, then carry build-gpu/carry"
  command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU ||
    die "no GPU here (nvidia-smi lists none): the GPU half runs on the device machine"
  work=$(mktemp -d)
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$carry/bin.tar.xz" "$work"
  bin=$work/bin
  # cuDNN and cuBLAS from the pip packages PyTorch uses (python's nvidia/*/lib folders).
  local pip_libs
  pip_libs=$(python3 -c 'import glob, os, nvidia
print(":".join(sorted({os.path.dirname(f) for d in nvidia.__path__
                       for f in glob.glob(os.path.join(d, "**", "lib*.so*"), recursive=True)})))' 2>/dev/null) ||
    die "python3 has no nvidia packages (PyTorch's cuDNN and cuBLAS)"
  export LD_LIBRARY_PATH=$pip_libs:$PWD/$carry/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  local missing
  missing=$(ldd "$bin/cgdp" | grep "not found" || true)
  [[ -z $missing ]] || die "cgdp cannot load: $missing"
  # cuBLAS is opened on first use (src/cuda/cublas_library.cpp), so ldd does not list it.
  python3 -c 'import ctypes, re, sys
name = re.search(rb"libcublas\.so\.[0-9]+", open(sys.argv[1], "rb").read()).group().decode()
ctypes.CDLL(name)' "$bin/cgdp" || die "cgdp cannot open cuBLAS (the soname it names, above)"
  export CGDP_MODELS_DIR=$PWD/models
}

bench() {
  gpu_setup
  local iterations=${ITERATIONS:-10} budget=${BUDGET_S:-520}
  local results=$work/results
  mkdir -p "$results"
  # cuDNN's choices from an earlier bench ($carry/cudnn/, from its logs) skip the search.
  [[ -d $carry/cudnn ]] && { cp "$carry"/cudnn/cudnn_*.txt "$results/" 2>/dev/null || true; }
  local start=$SECONDS
  local configs=(${CONFIGS:-alexnet:256 googlenet:64 vgg16:32 resnet152:12 resnet152:16})
  # Seconds left for one more run (at most 240), so that no run outlasts the budget.
  time_left() { local left=$((budget - (SECONDS - start))); echo $((left < 240 ? left : 240)); }
  # Runs cgdp unless the budget is spent; the log is the table's input. A model's runs share
  # cuDNN's choices (--cudnn-algorithms): only its first run searches, so the rows fit one call.
  # sync "cgdp-dense": cgdp with every weight summed dense in fp32, as before the exchange issue
  # (32), beside the row with cgdp's defaults.
  cgdp_run() {  # config-name model batch sync workers iterations extra-flags...
    local name=$1 model=$2 batch=$3 sync=$4 n=$5 its=$6
    shift 6
    local log=$results/${name}_${sync}_n$n.log left
    [[ $sync == cgdp-dense ]] && set -- --fc-exchange dense --exchange-dtype fp32 "$@"
    left=$(time_left)
    if ((left < 20)); then echo "skipped: time budget spent" >"$log"; return; fi
    timeout "$left" "$bin/cgdp" train --model "models/$model.prototxt" --data synthetic \
      --batch "$batch" --devices "$n" --device-kind cuda --sync "${sync%-dense}" --iterations "$its" \
      --test-interval -1 --test-batch "$batch" --test-samples "$batch" --display "$its" \
      --plain --phase-table --tf32 --nondeterministic --loader-threads 8 --lr 0.001 \
      --cudnn-algorithms "$results/cudnn_${model}_b$batch.txt" $( ((n > 1)) && echo --oversubscribe) "$@" \
      >"$log" 2>&1 || echo "cgdp: error: exit $? (timeout or failure)" >>"$log"
  }
  size_of() { [[ $1 == alexnet ]] && echo 227 || echo 224; }
  local setup_configs=()
  for c in "${configs[@]}"; do  # 1: single worker next to PyTorch, for every configuration
    local model=${c%%:*} batch=${c##*:}
    local name=${model}_b$batch
    cgdp_run "$name" "$model" "$batch" local 1 "$iterations"
    (($(time_left) >= 20)) && timeout "$(time_left)" python3 bench/gpu/torch_peer.py --model "$model" \
      --batch "$batch" --size "$(size_of "$model")" --iterations "$iterations" --warmup 3 \
      >"$results/${name}_torch.json" 2>"$results/${name}_torch.err" || rm -f "$results/${name}_torch.json"
  done
  for c in "${configs[@]}"; do  # 2: workers sharing the GPU, cgdp vs ps0 (ResNet-152: batch 16)
    local model=${c%%:*} batch=${c##*:}
    [[ $c == resnet152:12 ]] && continue
    for n in 1 2 4; do
      cgdp_run "${model}_b$batch" "$model" "$batch" cgdp "$n" "$iterations"
      cgdp_run "${model}_b$batch" "$model" "$batch" cgdp-dense "$n" "$iterations"
      if ((n > 1)); then cgdp_run "${model}_b$batch" "$model" "$batch" ps0 "$n" "$iterations"; fi
    done
  done
  for c in "${configs[@]}"; do  # 3: chunk copies (2 workers, timeline on) and plain copies
    local model=${c%%:*} batch=${c##*:}
    local name=${model}_b$batch
    [[ $c == resnet152:12 ]] && continue
    cgdp_run "${name}_copies" "$model" "$batch" cgdp 2 4 --timeline "$results/${name}_copy.json"
    [[ -f $results/${name}_copy.json ]] || continue
    local sizes
    sizes=$(python3 -c 'import json, sys
print(" ".join(sorted({str(e["args"]["bytes"]) for e in json.load(open(sys.argv[1]))["traceEvents"]
                       if e.get("cat") == "d2h" and "bytes" in e.get("args", {})})))' "$results/${name}_copy.json") ||
      continue
    timeout 60 "$bin/gpu_copy_bench" $sizes >"$results/${name}_plain.jsonl" 2>&1 || true
  done
  python3 - "$results" "$iterations" "${configs[@]}" <<'EOF'
import json, subprocess, sys
try:
    import torch
    versions = "torch %s, cuDNN %s" % (torch.__version__, torch.backends.cudnn.version())
except ImportError:
    versions = "PyTorch not found"
results, iterations, configs = sys.argv[1], sys.argv[2], sys.argv[3:]
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip()
entries = []
for c in configs:
    model, batch = c.split(":")
    runs = [["local", 1]]
    if c != "resnet152:12":
        runs += [["cgdp", 1], ["cgdp-dense", 1], ["cgdp", 2], ["cgdp-dense", 2], ["ps0", 2],
                 ["cgdp", 4], ["cgdp-dense", 4], ["ps0", 4]]
    entries.append({"model": model, "batch": int(batch), "runs": runs, "copy_workers": 2})
notes = [
    "cgdp: its defaults (--fc-exchange auto: on CUDA without a profile, Poseidon's byte rule;"
    " --exchange-dtype fp32); fc: the weights sent as sufficient factors. cgdp-dense: every"
    " weight summed dense in fp32 (--fc-exchange dense --exchange-dtype fp32).",
    "N workers share the one GPU round-robin (each its own streams and memory), batch per worker;"
    " ms/it: wall time per iteration, mean of %s after the first; phases in ms per worker." % iterations,
    "exch: exchange left after each worker's backward (mean of workers); exch/bwd: the exchange"
    " left after the last backward over the slowest worker's backward (the iteration's, as the"
    " cost model predicts it); sum: gradient sum (cgdp: host; ps0: on the GPU); MiB/wkr: device"
    " memory cgdp allocated per worker (not cuDNN's/cuBLAS's own).",
    "D2H/H2D GB/s: cgdp's chunk copies during training with 2 workers (timeline run), in"
    " parentheses a plain pinned cudaMemcpy of the same sizes.",
    "Both: fp32, synthetic data, cuDNN autotuned (cgdp: --nondeterministic), TF32 in convolutions"
    " only (PyTorch's default; cgdp --tf32). cgdp copies each batch from pinned host memory;"
    " PyTorch's stays on the GPU. PyTorch runs torchvision's models (AlexNet without Caffe's LRN"
    " and groups; GoogLeNet without auxiliary heads, as cgdp's).",
    "%s; GPU %s" % (versions, gpu),
]
json.dump({"title": "cgdp vs PyTorch on one GPU (%s)" % gpu, "configs": entries, "notes": notes},
          open(results + "/setup.json", "w"))
EOF
  python3 bench/gpu/table.py "$results" | tee "$results/table.txt"
  # The device tool brings back a few files from $OUT: the table, and every log in one archive.
  if [[ -n ${OUT:-} ]]; then
    cp "$results/table.txt" "$OUT/"
    tar -C "$work" -czf "$OUT/gpu-bench-logs.tar.gz" results
  fi
}

tests() {
  gpu_setup
  [[ -d $carry/fashion-mnist ]] && export CGDP_FASHION_MNIST=$PWD/$carry/fashion-mnist
  # The tests run cgdp and read the tree here, not where prepare compiled their paths in.
  export CGDP_TEST_BINARY_DIR=$bin CGDP_TEST_SOURCE_DIR=$PWD
  local log=${OUT:-$work}/test.log failed=0
  : >"$log"
  # One binary (optionally filtered), its output kept; a hang costs 240 s, not the session.
  run_test() {  # binary [gtest filter]
    local status=0
    timeout 240 "$bin/$1" --gtest_brief=1 ${2:+"--gtest_filter=$2"} >>"$log" 2>&1 || status=$?
    ((status == 0)) || { echo "run.sh test: $1 ${2:-} failed (exit $status; 124: timed out)" >>"$log"; failed=1; }
  }
  for t in cublas_library_test cuda_device_test cuda_layers_test cuda_net_test; do run_test "$t"; done
  run_test precision16_test '*Cuda*'
  run_test train_test '*Cuda*'
  run_test cgdp_equivalence_test '*cuda*'
  run_test fc_exchange_test '*Cuda*'
  run_test activation_plan_test '*Cuda*'
  run_test memory_estimate_test '*Cuda*'
  run_test relu_absorb_test '*Cuda*'
  run_test topology_test 'TopoCommand.*'
  # On a GPU machine a skip for want of a GPU or of the data is a failure, not a pass.
  local skipped
  skipped=$(grep -cE "CUDA test not run|no CUDA GPU|is missing" "$log" || true)
  if ((skipped > 0)); then
    echo "run.sh test: $skipped tests skipped for want of a GPU or of data on the GPU machine" >>"$log"
    failed=1
  fi
  # The summary lines and each failure's place (the whole log: test.log in $OUT).
  grep -E "^\[  (PASSED|FAILED) |^\[  SKIPPED \] [0-9]|^run.sh test:|: Failure$" "$log" | head -n 80 || true
  return $failed
}

# The device tool brings back a few files from $OUT: a run's logs go in one archive.
keep_logs() {
  [[ -n ${OUT:-} ]] || return 0
  tar -C "$(dirname "$1")" -czf "$OUT/$(basename "$1").tar.gz" "$(basename "$1")"
}

# Two flag sets side by side on one model: ROUNDS alternating cgdp runs of each (N workers share
# the GPU), then per set the median "total per iteration" and "gradient sum" over the rounds.
ab() {  # model batch workers "A flags" "B flags" [rounds]
  (($# >= 5)) || die "usage: run.sh ab MODEL BATCH WORKERS 'A FLAGS' 'B FLAGS' [ROUNDS]"
  gpu_setup
  local model=$1 batch=$2 n=$3 rounds=${6:-3} logs
  logs=$work/ab_${model}_b${batch}_n$n
  mkdir -p "$logs"
  # cuDNN's choices from an earlier bench (its logs' cudnn_*.txt copied to $carry/cudnn/) skip
  # the search; without them the first run searches and the others reuse what it wrote.
  local algos=$carry/cudnn/cudnn_${model}_b$batch.txt
  [[ -f $algos ]] || algos=$logs/cudnn.txt
  for ((r = 1; r <= rounds; r++)); do
    for set in A B; do
      local flags=$4
      [[ $set == B ]] && flags=$5
      # shellcheck disable=SC2086  # the flag sets are word lists
      local binary=${A_CGDP:-$bin/cgdp}
      [[ $set == B ]] && binary=${B_CGDP:-$bin/cgdp}
      timeout 120 "$binary" train --model "models/$model.prototxt" --data synthetic \
        --batch "$batch" --devices "$n" --device-kind cuda --sync cgdp --iterations 10 \
        --test-interval -1 --test-batch "$batch" --test-samples "$batch" --display 10 --plain \
        --phase-table --tf32 --nondeterministic --lr 0.001 --cudnn-algorithms "$algos" \
        $( ((n > 1)) && echo --oversubscribe) $flags >"$logs/${set}_$r.log" 2>&1 ||
        echo "cgdp: error: exit $?" >>"$logs/${set}_$r.log"
    done
  done
  python3 - "$logs" "$rounds" "$4${A_CGDP:+ [binary $A_CGDP]}" "$5${B_CGDP:+ [binary $B_CGDP]}" <<'EOF2'
import re, statistics, sys
logs, rounds, flags = sys.argv[1], int(sys.argv[2]), {"A": sys.argv[3], "B": sys.argv[4]}
def phase(text, name):
    m = re.search(r"^\s+%s\s+([0-9.]+)$" % name, text, re.M)
    return float(m.group(1)) if m else float("nan")
for s in "AB":
    texts = [open("%s/%s_%d.log" % (logs, s, r)).read() for r in range(1, rounds + 1)]
    total = [phase(t, "total per iteration") for t in texts]
    summ = [phase(t, "gradient sum") for t in texts]
    bwd = statistics.median([phase(t, "backward, slowest worker") for t in texts])
    exch = statistics.median([phase(t, "exchange after last backward") for t in texts])
    print("%s  total %s ms (median %.1f)  sum median %.1f ms  bwd %.1f  exch %.1f (%.0f%%)  "
          "flags: %s" % (s, " ".join("%.1f" % v for v in total), statistics.median(total),
                         statistics.median(summ), bwd, exch, 100 * exch / bwd, flags[s] or "(none)"))
EOF2
  keep_logs "$logs"
}

# The cost model on the GPU: a profile of N workers, then each plan predicted and measured.
# KIND=cpu runs the same on this machine's CPU backend (no GPU set-up), to try the script.
predict_check() {  # model batch workers
  (($# == 3)) || die "usage: run.sh predict MODEL BATCH WORKERS"
  local model=$1 batch=$2 n=$3 kind=${KIND:-cuda}
  if [[ $kind == cuda ]]; then gpu_setup; else bin=build work=$(mktemp -d); fi
  local logs=$work/predict_${model}_b${batch}_n$n
  mkdir -p "$logs"
  local common=(--model "models/$model.prototxt" --data synthetic --batch "$batch" --devices "$n"
                --device-kind "$kind" --oversubscribe)
  timeout 300 "$bin/cgdp" profile "${common[@]}" --iterations 10 --warmup 3 \
    --out "$logs/profile.json" >"$logs/profile.log" 2>&1 || { cat "$logs/profile.log" >&2; die "cgdp profile failed"; }
  for plan in layer all; do
    "$bin/cgdp" predict --model "models/$model.prototxt" --profile "$logs/profile.json" \
      --chunk "$plan" --sync cgdp --json >"$logs/predict_$plan.json"
    timeout 300 "$bin/cgdp" train "${common[@]}" --sync cgdp --chunk "$plan" --iterations 13 \
      --test-interval -1 --test-batch "$batch" --test-samples "$batch" --display 13 --plain \
      --phase-table >"$logs/train_$plan.log" 2>&1 || echo "cgdp: error: exit $?" >>"$logs/train_$plan.log"
  done
  python3 - "$logs" <<'EOF2'
import json, re, sys
logs = sys.argv[1]
# The iteration's backward and exchange, as the model predicts them (phase_table.hpp). The
# batch's copy to the GPU is the data layer's forward in the profile, but the phase table's
# broadcast (before forward): the two are compared together.
keys = [(("broadcast", "forward"), ("broadcast_us", "forward_us")),
        (("backward, slowest worker",), ("backward_us",)),
        (("exchange after last backward",), ("exchange_after_backward_us",)),
        (("update",), ("update_us",)), (("total per iteration",), ("iteration_us",))]
print("%-6s %-28s %12s %12s %8s" % ("plan", "phase", "predicted ms", "measured ms", "error"))
for plan in ("layer", "all"):
    predicted = json.load(open("%s/predict_%s.json" % (logs, plan)))["cgdp"]["simulated"]
    text = open("%s/train_%s.log" % (logs, plan)).read()
    def measured(phase):
        m = re.search(r"^\s+%s\s+([0-9.]+)$" % phase, text, re.M)
        return float(m.group(1)) if m else float("nan")
    for phases, names in keys:
        p = sum(predicted[k] for k in names) / 1e3
        meas = sum(measured(phase) for phase in phases)
        err = "%+.1f%%" % ((p - meas) / meas * 100) if meas > 0 else "-"
        print("%-6s %-28s %12.2f %12.2f %8s" % (plan, " + ".join(phases), p, meas, err))
profile = json.load(open(logs + "/profile.json"))
print("profile: sync point %.1f us, overlap %.2f us per MB, d2h %.1f GB/s, h2d %.1f GB/s" % (
    profile["sync_us"], profile.get("overlap_us_per_mb", 0), profile["d2h"]["gbps"],
    profile["h2d"]["gbps"]))
EOF2
  keep_logs "$logs"
}

# The host's sum next to a STREAM-like triad on the same cores: OpenMP's team is the same for
# both (bound to cores), at several sizes of team. N=4 inputs, as four GPUs send.
host_sum_check() {
  gpu_setup
  local logs=$work/hostsum
  mkdir -p "$logs"
  { nproc; lscpu | grep -E '^(Model name|Socket|Core|Thread|NUMA|L3)'; "$bin/cgdp" topo; } \
    >"$logs/machine.txt" 2>&1 || true
  cat "$logs/machine.txt"
  for t in 1 4 8 14; do
    echo "== $t threads (OMP_PLACES=cores OMP_PROC_BIND=close)"
    OMP_NUM_THREADS=$t OMP_PLACES=cores OMP_PROC_BIND=close bench/host_aggregate_table.sh \
      "$bin/host_aggregate_bench" '--benchmark_filter=BM_SumVsTriads/N:4/bytes:(4194304|67108864)/' \
      --benchmark_min_time=0.3 2>&1 | tee "$logs/threads_$t.txt"
  done
  keep_logs "$logs"
}

# One GPU's profile of each net (the bench's batches), host sums up to 4 inputs at 8 threads: what
# `cgdp predict --devices 4` needs for four real GPUs. cuDNN's choices are kept beside them.
profiles() {
  gpu_setup
  local logs=$work/profiles
  mkdir -p "$logs"
  local configs=("$@")
  ((${#configs[@]})) || configs=(alexnet:256 vgg16:32 googlenet:64 resnet152:16)
  for c in "${configs[@]}"; do
    local model=${c%%:*} batch=${c##*:}
    local algos=$carry/cudnn/cudnn_${model}_b$batch.txt
    [[ -f $algos ]] || algos=$logs/cudnn_${model}_b$batch.txt
    timeout "${PROFILE_TIMEOUT:-150}" "$bin/cgdp" profile --model "models/$model.prototxt" --data synthetic \
      --batch "$batch" --devices 1 --device-kind cuda --tf32 --nondeterministic --host-threads 8 \
      --sum-inputs 4 --iterations 8 --warmup 2 --cudnn-algorithms "$algos" \
      --out "$logs/profile_${model}_b$batch.json" >"$logs/profile_${model}_b$batch.log" 2>&1 ||
      echo "cgdp profile: exit $?" >>"$logs/profile_${model}_b$batch.log"
    tail -n 12 "$logs/profile_${model}_b$batch.log"
  done
  keep_logs "$logs"
}

# Issue 35 on the GPU: the offload table with cuDNN's choices shared by its runs (same bits).
offload() {  # model batch fraction
  (($# == 3)) || die "usage: run.sh offload MODEL BATCH FRACTION"
  gpu_setup
  local logs=$work/offload_$1_b$2
  mkdir -p "$logs"
  local algos=$carry/cudnn/cudnn_$1_b$2.txt
  [[ -f $algos ]] || algos=$logs/cudnn.txt
  CGDP=$bin/cgdp KEEP=$logs TIMELINE=1 \
    FLAGS="--device-kind cuda --tf32 --cudnn-algorithms $algos" \
    bench/offload_table.sh "$1" "$2" "$3" "${ITERATIONS:-6}" || echo "offload_table.sh: exit $?"
  keep_logs "$logs"
}

# Issue 36 on the GPU: one worker per net in fp32 (TF32) and in bf16, next to PyTorch's AMP.
# Within BUDGET_S (420) seconds; the table and the logs go to $OUT after each net, so a call cut
# short still brings back what ran.
amp() {
  gpu_setup
  local logs=$work/amp its=${ITERATIONS:-10} budget=${BUDGET_S:-420} start=$SECONDS
  local configs=(${CONFIGS:-alexnet:256 googlenet:64 vgg16:32 resnet152:16})
  mkdir -p "$logs"
  time_left() { local left=$((budget - (SECONDS - start))); echo $((left < 200 ? left : 200)); }
  local done_configs=()
  for c in "${configs[@]}"; do
    local model=${c%%:*} batch=${c##*:} size=224
    [[ $model == alexnet ]] && size=227
    # bf16_stored: bf16 again with the choices bf16 stored (no search: its peak holds only the
    # chosen algorithms' scratch); bf16_kept: every activation kept in fp32 (--pack-activations
    # off), the packs' cost, on bf16's choices (the same convolutions); bf16_nchw: cuDNN's
    # operands in NCHW (--layout nchw).
    for p in fp32 bf16 bf16_stored bf16_kept bf16_nchw; do
      local packs=auto layout=fastest choices=$p log=$logs/${model}_b${batch}_$p.log
      [[ $p == bf16_stored || $p == bf16_kept ]] && choices=bf16
      [[ $p == bf16_kept ]] && packs=off
      [[ $p == bf16_nchw ]] && layout=nchw
      if (($(time_left) < 20)); then echo "skipped: time budget spent" >"$log"; continue; fi
      timeout "$(time_left)" "$bin/cgdp" train --model "models/$model.prototxt" --data synthetic \
        --batch "$batch" --devices 1 --device-kind cuda --sync local --iterations "$its" \
        --test-interval -1 --test-batch "$batch" --test-samples "$batch" --display "$its" --plain \
        --phase-table --tf32 --nondeterministic --loader-threads 8 --lr 0.001 \
        --precision "${p%_*}" --pack-activations "$packs" --layout "$layout" \
        --cudnn-algorithms "$logs/cudnn_${model}_b${batch}_$choices.txt" \
        >"$log" 2>&1 || echo "cgdp: error: exit $?" >>"$log"
    done
    # AlexNet's peer is Caffe's AlexNet in torch.nn (LRN, groups), as the issue asks.
    local peer=$model
    [[ $model == alexnet ]] && peer=caffe_alexnet
    (($(time_left) >= 20)) && timeout "$(time_left)" python3 bench/gpu/torch_peer.py --model "$peer" \
      --batch "$batch" --size "$size" --iterations "$its" --warmup 3 --amp \
      >"$logs/${model}_b${batch}_amp.json" 2>"$logs/${model}_b${batch}_amp.err" ||
      rm -f "$logs/${model}_b${batch}_amp.json"
    done_configs+=("$c")
    python3 bench/gpu/amp_table.py "$logs" "${done_configs[@]}" >"$logs/table.txt"
    [[ -n ${OUT:-} ]] && cp "$logs/table.txt" "$OUT/amp_table.txt"
    keep_logs "$logs"
  done
  cat "$logs/table.txt"
}

case ${1:-} in
  prepare) prepare ;;
  hostsum) host_sum_check ;;
  profiles) shift; profiles "$@" ;;
  bench) bench ;;
  ab) shift; ab "$@" ;;
  predict) shift; predict_check "$@" ;;
  test) tests ;;
  offload) shift; offload "$@" ;;
  amp) amp ;;
  *) sed -n 2,28p "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
