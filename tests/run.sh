#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/run.sh: run every test suite, show its output, and close with one
# line of totals ("tests: N passed, N failed, N skipped").  Called by
# `make test` once everything is built; exits non-zero if anything failed.
#   tests/run.sh BUSTED SM80_LOG C_TEST...
# Suites: the generator's busted specs, the sm_80 compile check, the C
# tests (Criterion), and the shell tests tests/*_test.sh (TAP).
set -u
busted=$1 sm80_log=$2
shift 2
c_tests=("$@")
passed=0 failed=0 skipped=0

# The tests see no user database of the person who runs them: one they
# would read (their tuning changes what dispatch picks, and a test's
# expectations with it) or write.  Shipped results (build/system.db) stay:
# they are what a fresh install serves.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/ktune-test.XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
unset KTUNE_DB
export XDG_DATA_HOME="$scratch/data"

# Lua: busted closes with "N successes / N failures / N errors / N pending".
out=$($busted --lpath='./?.lua' --pattern=_spec tests/ 2>&1)
echo "$out"
line=$(echo "$out" | grep -E '[0-9]+ successes / [0-9]+ failures' | tail -n1)
if [ -n "$line" ]; then
  read -r s f e p <<<"$(echo "$line" | sed -E 's/^([0-9]+) successes \/ ([0-9]+) failures \/ ([0-9]+) errors \/ ([0-9]+) pending.*/\1 \2 \3 \4/')"
  passed=$((passed + s)) failed=$((failed + f + e)) skipped=$((skipped + p))
else
  echo "tests/run.sh: busted printed no summary" >&2
  failed=$((failed + 1))
fi

# Every generated variant compiles for sm_80 too (the make step logged it).
if grep -q '^sm_80: [0-9]* variants compile' "$sm80_log" 2>/dev/null; then
  cat "$sm80_log"
  passed=$((passed + 1))
else
  echo "sm_80 compile check FAILED:"; cat "$sm80_log" 2>/dev/null
  failed=$((failed + 1))
fi

# C: Criterion closes with "Synthesis: Tested: N | Passing: N | Failing: N |
# Crashing: N"; tests skipped (no GPU) are in "Running N tests" but not in Tested.
if nvidia-smi -L >/dev/null 2>&1; then
  echo "GPU present: GPU tests run"
else
  echo "*** no GPU on this machine: GPU tests are SKIPPED (they show as [SKIP] below) ***"
fi
if [ "${#c_tests[@]}" -eq 0 ]; then
  echo "tests/run.sh: no C tests given"
  failed=$((failed + 1))
fi
for t in "${c_tests[@]}"; do
  echo "== $t"
  out=$("$t" --jobs=1 --verbose 2>&1)
  rc=$?
  echo "$out"
  running=$(echo "$out" | sed -nE 's/.*Running ([0-9]+) tests? from.*/\1/p' | awk '{s += $1} END {print s + 0}')
  syn=$(echo "$out" | grep 'Synthesis:' | tail -n1)
  if [ -z "$syn" ]; then
    echo "tests/run.sh: $t printed no synthesis (exit $rc)"
    failed=$((failed + 1))
    continue
  fi
  tested=$(echo "$syn" | sed -nE 's/.*Tested: ([0-9]+).*/\1/p')
  pass=$(echo "$syn" | sed -nE 's/.*Passing: ([0-9]+).*/\1/p')
  fail=$(echo "$syn" | sed -nE 's/.*Failing: ([0-9]+).*/\1/p')
  crash=$(echo "$syn" | sed -nE 's/.*Crashing: ([0-9]+).*/\1/p')
  passed=$((passed + pass)) failed=$((failed + fail + crash)) skipped=$((skipped + running - tested))
  [ "$rc" -eq 0 ] || [ $((fail + crash)) -gt 0 ] || failed=$((failed + 1))
done

# Shell: TAP, "ok N - what" or "not ok N - what", a skip being
# "ok N - what # SKIP why".
for t in tests/*_test.sh; do
  echo "== $t"
  out=$("$t" 2>&1)
  rc=$?
  echo "$out"
  skip=$(grep -cE '^ok [0-9]+ .*# SKIP' <<<"$out")
  pass=$(($(grep -cE '^ok [0-9]+' <<<"$out") - skip))
  fail=$(grep -cE '^not ok [0-9]+' <<<"$out")
  passed=$((passed + pass)) failed=$((failed + fail)) skipped=$((skipped + skip))
  if [ $((pass + fail + skip)) -eq 0 ] || { [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; }; then
    echo "tests/run.sh: $t exited $rc"
    failed=$((failed + 1))
  fi
done

echo
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
