#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ (clang++, AddressSanitizer and UBSan, only the
# parsers' sources) in build-fuzz/ and runs each for a bounded time, two at a time, on a copy of
# its seed corpus tests/fuzz/corpus/<target>/ (new inputs stay in build-fuzz/, never in the repo).
# Prints each target's executions and coverage; a crash, sanitizer report, leak, timeout or
# out-of-memory fails the run and names the input libFuzzer kept.
#   CGDP_FUZZ_SECONDS=40 tools/fuzz.sh [TARGET...]   seconds per target (default 40: about 2 min
#                                                    for the five), TARGET as model_file, datum
# Set-up: tools/setup-debian.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/stage_timing.sh
seconds=${CGDP_FUZZ_SECONDS:-40}
dir=build-fuzz
start=$SECONDS
if (($#)); then
  targets=("$@")
else
  targets=()
  for source in tests/fuzz/*_fuzz.cpp; do targets+=("$(basename "$source" _fuzz.cpp)"); done
fi

build() {
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCGDP_FUZZ=ON -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ >/dev/null || return 1
  cmake --build "$dir" -j"$(nproc)" --target "${targets[@]/%/_fuzz}" >"$dir/build.log" 2>&1 ||
    { grep -E "error" "$dir/build.log" | head -20 >&2; echo "fuzz: build failed ($dir/build.log)" >&2; return 1; }
}

# One target: its corpus copied to $dir/fuzz/<target>/corpus (libFuzzer adds what it finds there),
# the input it keeps for a failure in $dir/fuzz/<target>/, its output in .../log, its exit in .../status.
fuzz_one() {
  local target=$1 work=$dir/fuzz/$1 status=0
  rm -rf "$work" && mkdir -p "$work/corpus"
  cp tests/fuzz/corpus/"$target"/* "$work/corpus/"
  local dict=()
  [[ -f tests/fuzz/$target.dict ]] && dict=(-dict="tests/fuzz/$target.dict")
  # -timeout: one input running 10 s is a finding (a hang or a quadratic parse), as is one using
  # more than 2 GB; value profiles guide mutations toward the sizes compared (a Datum's C x H x W
  # overflow took them); allow_addr2line symbolizes reports where llvm-symbolizer is missing.
  ASAN_OPTIONS=allow_addr2line=1 UBSAN_OPTIONS="print_stacktrace=1 allow_addr2line=1" \
    "$dir/${target}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -use_value_profile=1 -print_final_stats=1 -artifact_prefix="$work/" "${dict[@]}" \
    "$work/corpus" >"$work/log" 2>&1 || status=$?
  echo "$status" >"$work/status"
}

# "model_file: 123456 executions, cov: 981 ft: 2914, corpus 8 -> 199 inputs" from a target's log.
summary() {
  local target=$1 log=$dir/fuzz/$1/log
  local runs cov seeds corp
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
  corp=$(grep -oE 'corp: [0-9]+' "$log" | tail -1)
  seeds=$(find tests/fuzz/corpus/"$target" -type f | wc -l)
  echo "fuzz $target: ${runs:-?} executions in ${seconds} s, ${cov:-no coverage line}, corpus $seeds -> ${corp#corp: } inputs"
}

run_all() {
  local failed=0 running=0 target
  for target in "${targets[@]}"; do
    fuzz_one "$target" &
    if ((++running == 2)); then  # two at a time: one per core
      wait -n || true
      ((running--))
    fi
  done
  wait
  for target in "${targets[@]}"; do
    local work=$dir/fuzz/$target
    if [[ $(cat "$work/status") == 0 ]]; then
      summary "$target"
      continue
    fi
    failed=1
    echo "fuzz $target: FAILED (exit $(cat "$work/status")); input kept:" \
      "$(find "$work" -maxdepth 1 -name "*-*" -type f -printf "%p ")" >&2
    grep -E 'ERROR|SUMMARY|runtime error|^fuzz: |^    #[0-9] ' "$work/log" | head -20 >&2
    echo "  (log: $work/log; reproduce: $dir/${target}_fuzz INPUT)" >&2
  done
  return "$failed"
}

stage "fuzz: configure and build ($dir/)" build
built=$((SECONDS - start))
stage "fuzz: ${#targets[@]} targets, ${seconds} s each" run_all
echo "fuzz: built in ${built} s, fuzzed in $((SECONDS - start - built)) s"
