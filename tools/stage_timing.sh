# Sourced by the CI's scripts: `stage NAME COMMAND...` runs COMMAND and, when CGDP_TIMINGS is a
# folder, appends "NAME<tab>seconds<tab>exit status" to its stages.tsv; `junit_flag TREE` prints
# ctest's --output-junit option for that folder (nothing when unset). tools/ci_timings.py reads both.
stage() {
  local name=$1 start=$SECONDS status=0
  shift
  "$@" || status=$?
  [[ -n ${CGDP_TIMINGS:-} ]] && printf '%s\t%d\t%d\n' "$name" $((SECONDS - start)) "$status" \
    >>"$CGDP_TIMINGS/stages.tsv"
  return "$status"
}

junit_flag() {
  [[ -n ${CGDP_TIMINGS:-} ]] && echo "--output-junit $CGDP_TIMINGS/tests-$1.xml"
  return 0
}
