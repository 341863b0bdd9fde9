#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli_test.sh: the ktune command line's conventions (tuner/main.c,
# cli.c, tune.c, results.c) on build/ktune: --help on stdout with exit 0, --version,
# --json that parses, exit 2 and a message for bad arguments before any GPU
# is touched, a message of its own for each database problem, and
# `histogram` wherever `hist` is.  With a GPU, it also tunes one small
# problem into a scratch database to check tune, show and explain --json.
# Prints TAP for tests/run.sh.
#
#   tests/cli_test.sh        (after make; make test runs it)
set -u
cd "$(dirname "$0")/.."
ktune=$PWD/build/ktune
work=$(mktemp -d "${TMPDIR:-/tmp}/ktune-cli-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
# No user database but the scratch one; the system layer as the build has it.
export XDG_DATA_HOME=$work/data
unset KTUNE_DB KTUNE_LOG

. tests/tap.sh
TAP_SHOW="$work/stdout $work/stderr" # what a failed check shows
# run ARGS...: ktune's exit status in $rc, its output in $work/stdout and stderr.
run() {
  "$ktune" "$@" >"$work/stdout" 2>"$work/stderr"
  rc=$?
}
# expect WHAT STATUS [GREP-ON-STDERR]: the last run exited STATUS (saying so).
expect() {
  if [ "$rc" -eq "$2" ] && { [ -z "${3:-}" ] || grep -q -- "$3" "$work/stderr"; }; then ok "$1"; else
    not_ok "$1 (exit $rc, wanted $2${3:+ and \"$3\" on stderr})"
  fi
}
# json_ok [PYTHON-CONDITION-ON-d]: does stdout hold one JSON document (for which it holds)?
json_ok() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if (${1:-True}) else 1)" "$work/stdout"
  else # at least one object, whole
    head -c1 "$work/stdout" | grep -q '{' && tail -c2 "$work/stdout" | grep -q '}'
  fi
}

# ---- help and version: stdout, exit 0 ---------------------------------------
for args in "--help" "-h"; do
  run $args
  if [ "$rc" -eq 0 ] && grep -q '^usage: ktune' "$work/stdout" && [ ! -s "$work/stderr" ]; then
    ok "ktune $args: usage on stdout, exit 0"
  else not_ok "ktune $args: usage on stdout, exit 0"; fi
done
for cmd in tune list show export import explain; do
  run "$cmd" --help
  if [ "$rc" -eq 0 ] && grep -q "^usage: ktune $cmd" "$work/stdout" && [ ! -s "$work/stderr" ]; then
    ok "ktune $cmd --help: usage on stdout, exit 0"
  else not_ok "ktune $cmd --help: usage on stdout, exit 0"; fi
done
run tune --help
missing=""
for opt in --db --family --matmul --hist --hist-n --dists --variants --timeout --seed --gpus --fresh --json --help; do
  grep -q -- "^  $opt\b\|, $opt\b" "$work/stdout" || missing="$missing $opt"
done
defaults=$(grep -c 'default: ' "$work/stdout")
if [ -z "$missing" ] && [ "$defaults" -ge 11 ]; then ok "ktune tune --help describes every option, with $defaults defaults"; else
  not_ok "ktune tune --help describes every option and its default (missing:$missing; $defaults defaults)"
fi
version=$(sed -n 's/^#define KT_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' runtime/include/ktune.h | paste -sd. -)
run --version
if [ "$rc" -eq 0 ] && [ "$(head -n1 "$work/stdout")" = "ktune $version" ]; then ok "ktune --version: ktune $version"; else
  not_ok "ktune --version: ktune $version"
fi

# ---- usage errors: exit 2, a message, and no GPU needed ------------------------
run
expect "ktune alone: usage on stderr, exit 2" 2 "^usage: ktune"
run frobnicate
expect "an unknown command: exit 2" 2 "unknown command 'frobnicate'"
run --frobnicate
expect "an unknown option: exit 2" 2 "unknown option '--frobnicate'"
run list --frobnicate
expect "list: an unknown option: exit 2" 2 "unknown option"
run list nosuch
expect "list: an unknown family: exit 2" 2 "unknown family 'nosuch'"
run show extra
expect "show: an unknown argument: exit 2" 2 "unknown argument 'extra'"
run show --db
expect "show: --db without a path: exit 2" 2 "needs a path"
run show --all --device x
expect "show: --all and --device: exit 2" 2 "exclude each other"
run export --frobnicate
expect "export: an unknown option: exit 2" 2 "unknown option '--frobnicate'"
run import
expect "import without a file: exit 2" 2 "no FILE"
run import --db
expect "import: --db without a path: exit 2" 2 "needs a path"
run tune --frobnicate 1
expect "tune: an unknown option: exit 2" 2 "unknown option '--frobnicate'"
run tune --family nosuch
expect "tune: an unknown family: exit 2" 2 "unknown family 'nosuch'"
run tune --variants 'no_such_variant*'
expect "tune: a --variants pattern that matches nothing: exit 2" 2 "matches no variant"
run --version extra
expect "--version with an argument: exit 2" 2 "takes no arguments"

# ---- output that cannot be written: exit 1, never a silent cut -------------
if [ -w /dev/full ]; then
  for cmd in "--version" "list" "list --json"; do
    # shellcheck disable=SC2086
    "$ktune" $cmd >/dev/full 2>"$work/stderr"
    rc=$?
    expect "$cmd into a full disk: exit 1" 1 "writing the output"
  done
fi

run tune --matmul 64x64
expect "tune: a bad shape: exit 2" 2 "bad shape"
run tune --timeout
expect "tune: an option without its value: exit 2" 2 "needs a value"
run tune --gpus 0,x
expect "tune: a bad --gpus list: exit 2" 2 "--gpus"
run explain
expect "explain without a family: exit 2" 2 "a family"
run explain nosuch 1
expect "explain: an unknown family: exit 2" 2 "unknown family 'nosuch'"
run explain matmul 64 64
expect "explain matmul with two sizes: exit 2" 2 "M N K"
run explain matmul 64 0 64
expect "explain matmul with a zero size: exit 2" 2 "M N K"
run explain matmul 64 2147482624 64
expect "explain matmul past the library's largest size: exit 2" 2 "each 1..2147482623"
run explain gemm 64 64 2147482624
expect "explain gemm past the library's largest size: exit 2" 2 "each 1..2147482623"
run explain histogram lots
expect "explain histogram with a bad bin count: exit 2" 2 "NBINS"
run explain hist 256 --frobnicate
expect "explain: an unknown option: exit 2" 2 "unknown option"
run explain matmul -1 64 64
expect "explain matmul with a negative size: exit 2, a bad size (not an option)" 2 "M N K"
printf '\001\002\377\200\033[31mx\n' >"$work/noise" # control bytes, bytes past ASCII, an escape sequence
run tune --matmul "@$work/noise"
if [ "$rc" -eq 2 ] && grep -q "bad shape" "$work/stderr" && ! LC_ALL=C grep -q '[^[:print:][:space:]]' "$work/stderr"; then
  ok "tune --matmul @FILE of noise: exit 2, its bytes not sent to the terminal"
else not_ok "tune --matmul @FILE of noise: exit 2, its bytes not sent to the terminal"; fi

# ---- list ------------------------------------------------------------------
run list
nvariants=$(wc -l <"$work/stdout")
expect "list: exit 0" 0
run list --json
if [ "$rc" -eq 0 ] && json_ok "len(d['variants']) == $nvariants and all('name' in v and 'params' in v for v in d['variants'])"; then
  ok "list --json: one document with the $nvariants variants"
else not_ok "list --json: one document with the $nvariants variants"; fi
run list hist
cp "$work/stdout" "$work/hist"
run list histogram
if [ "$rc" -eq 0 ] && [ -s "$work/stdout" ] && cmp -s "$work/hist" "$work/stdout" && ! grep -qv ' hist ' "$work/stdout"; then
  ok "list histogram: the hist variants, as list hist"
else not_ok "list histogram: the hist variants, as list hist"; fi
run list --json histogram
if [ "$rc" -eq 0 ] && json_ok "len(d['variants']) > 0 and all(v['family'] == 'hist' for v in d['variants'])"; then
  ok "list --json histogram: only hist variants"
else not_ok "list --json histogram: only hist variants"; fi

# ---- databases: a message for each cause --------------------------------------
run show --db "$work/none.db"
expect "show: a missing database: exit 1, says so" 1 "does not exist"
run explain matmul 64 64 64 --db "$work/none.db"
expect "explain: a missing --db: exit 1 before any GPU, says so" 1 "does not exist"
echo "not a database" >"$work/text.db"
run show --db "$work/text.db"
expect "show: a file that is not a database: exit 1, says so" 1 "not a ktune tuning database"
mkdir "$work/folder.db"
run show --db "$work/folder.db"
expect "show: a database that cannot be read: exit 1, says so" 1 "cannot be opened or read"
run import --db "$work/import.db" "$work/folder.db"
expect "import of a folder: exit 1, says it is a folder" 1 "is a folder"
# A device that a file does not hold: show says so and exits 1, as export does.
run import --db "$work/shipped.db" tuning-db/shipped/nvidia-h100-80gb-hbm3.json
expect "import of a shipped file: exit 0" 0
fp=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['devices'][0]['fingerprint'])" \
  tuning-db/shipped/nvidia-h100-80gb-hbm3.json 2>/dev/null)
run show --db "$work/shipped.db" --device nope
expect "show --device that the file lacks: exit 1, says so" 1 "no device 'nope' in this file"
run export --db "$work/shipped.db" --device nope
expect "export --device that the file lacks: exit 1, says so" 1 "no device 'nope'"
if [ -n "$fp" ]; then
  run show --db "$work/shipped.db" --device "$fp"
  if [ "$rc" -eq 0 ] && grep -q "ranked" "$work/stdout"; then ok "show --device that the file holds: its rows, exit 0"
  else not_ok "show --device that the file holds: its rows, exit 0 (exit $rc)"; fi
else skip "show --device that the file holds" "no python3 to read the shipped file's fingerprint"; fi
(unset KTUNE_DB XDG_DATA_HOME HOME && "$ktune" show >"$work/stdout" 2>"$work/stderr")
rc=$?
if [ "$rc" -eq 0 ] && grep -q "no home folder" "$work/stderr" && ! grep -q -- "--help" "$work/stderr" &&
  grep -q "^system database" "$work/stdout"; then
  ok "show without a home folder: a note, the system database, exit 0"
else not_ok "show without a home folder: a note, the system database, exit 0"; fi

# ---- what needs a GPU ----------------------------------------------------------
if ! nvidia-smi -L >/dev/null 2>&1; then
  run explain histogram 4096
  expect "explain without a GPU: exit 1, \"no CUDA device\"" 1 "no CUDA device"
  run tune --family hist --hist 256
  expect "tune without a GPU: exit 1, \"no CUDA device\"" 1 "no CUDA device"
  for what in "tune --json" "show --json" "explain --json, with the choice's source"; do skip "$what" "no GPU"; done
else
  db=$work/gpu.db
  run tune --db "$db" --family histogram --hist 4096 --hist-n 1048576 --dists uniform --variants 'hist_global_*' --json
  if [ "$rc" -eq 0 ] && json_ok "d['measurements']['total'] >= 1 and d['problems'][0]['winner'].startswith('hist_global_')"; then
    ok "tune --json: the measurements and each problem's winner"
  else not_ok "tune --json: the measurements and each problem's winner"; fi
  run show --db "$db" --json
  if [ "$rc" -eq 0 ] && json_ok "d['files'][0]['devices'][0]['winners'][0]['family'] == 'hist' and d['files'][0]['devices'][0]['winners'][0]['variant'].startswith('hist_global_')"; then
    ok "show --json: the tuned problem and its winner"
  else not_ok "show --json: the tuned problem and its winner"; fi
  run explain histogram 4096 1048576 --db "$db" --json
  if [ "$rc" -eq 0 ] && json_ok "d['tuned'] and '$db' in d['source'] and d['variant'].startswith('hist_global_')"; then
    ok "explain --json, with the choice's source"
  else not_ok "explain --json, with the choice's source"; fi
  run explain hist 4096 1048576 --db "$db"
  if [ "$rc" -eq 0 ] && grep -q "source: user database $db" "$work/stdout"; then ok "explain names the source"; else
    not_ok "explain names the source"
  fi
fi

echo "1..$n"
[ "$failed" -eq 0 ]
