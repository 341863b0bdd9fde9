# SPDX-License-Identifier: MIT
# tests/tap.sh: TAP for the shell tests (tests/*_test.sh), sourced by them.
# tests/run.sh counts what they print: "ok N - what", "not ok N - what",
# and a skip, "ok N - what # SKIP why".  A test script closes with
# `[ "$failed" -eq 0 ]`, so that its exit status says it too.
#
#   ok WHAT                  a check passed
#   not_ok WHAT [FILE...]    a check failed; each FILE (else each of
#                            $TAP_SHOW, when the script sets it) is shown,
#                            its lines as "#   NAME: line"
#   skip WHAT WHY            a check that could not run here
n=0
failed=0
TAP_SHOW=${TAP_SHOW:-}
ok() {
  n=$((n + 1))
  echo "ok $n - $1"
}
not_ok() {
  n=$((n + 1))
  failed=$((failed + 1))
  echo "not ok $n - $1"
  shift
  local f
  # shellcheck disable=SC2086 # TAP_SHOW is a list of paths without spaces
  for f in ${@:-$TAP_SHOW}; do
    [ -f "$f" ] && sed "s/^/#   $(basename "$f"): /" "$f"
  done
  return 0
}
skip() {
  n=$((n + 1))
  echo "ok $n - $1 # SKIP $2"
}
