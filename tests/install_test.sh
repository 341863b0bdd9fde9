#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/install_test.sh: make install and make uninstall, as a package build
# runs them (DESTDIR=stage PREFIX=/usr), and a program from outside the tree
# built against the staged files with pkg-config alone.
#
#   make test                     runs it, passing its ARCH, ONLY...
#   ONLY='...' tests/install_test.sh   by hand: give the variables the build had
#
# Checks that install writes nothing outside the stage (a listing of the
# system's folders, with sizes and times, before and after), what it
# installs (SONAME and links, no RUNPATH in the library, a CLI without
# kernels that runs from the stage and finds the library in lib/ alone),
# that tests/outside/hello.c builds against libktune.so and libktune.a
# and, without a GPU, fails cleanly ("no CUDA device"; with one, it
# multiplies and checks), and that uninstall leaves no file in the stage.
# Prints TAP for tests/run.sh.
#
# pkg-config is pointed at the stage by PKG_CONFIG_PATH and prefix=STAGE/usr
# (ktune.pc's paths are under ${prefix}).  PKG_CONFIG_SYSROOT_DIR would
# move CUDA's and SQLite's paths into the stage too, where they are not.
set -u
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/ktune-install-test.XXXXXX")
stage=$work/stage
trap 'rm -rf "$work"' EXIT

. tests/tap.sh
# check WHAT COMMAND...: ok when COMMAND succeeds; its output shows otherwise.
check() {
  local what=$1
  shift
  if "$@" >"$work/out" 2>&1; then ok "$what"; else not_ok "$what" "$work/out"; fi
}

version=$(sed -n 's/^#define KT_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' runtime/include/ktune.h | paste -sd. -)
major=${version%%.*}

# The make that runs us passes its variables (ARCH, ONLY...) in MAKEFLAGS,
# and its jobs, whose pipe we do not have: keep the first, drop the second.
MAKEFLAGS=$(printf '%s' "${MAKEFLAGS:-}" | sed -E 's/(^| )-j[0-9]*//g; s/--jobserver-(auth|fds)=[^ ]*//g')
export MAKEFLAGS
run_make() {
  make --no-print-directory -C "$root" "$@" DESTDIR="$stage" PREFIX=/usr
}
# The system's folders that an install could touch: every entry, its size and time.
snapshot() {
  find /usr/lib /usr/include /usr/bin /usr/share /usr/local /etc -xdev -printf '%p %y %s %T@\n' 2>/dev/null | sort
}
outside_unchanged() { # before after
  diff "$1" "$2" | head -20
  cmp -s "$1" "$2"
}

# ---- install ----------------------------------------------------------------
snapshot >"$work/before"
check "make install DESTDIR=stage PREFIX=/usr" run_make install
snapshot >"$work/installed"
check "make install wrote nothing outside the stage" outside_unchanged "$work/before" "$work/installed"

lib=$stage/usr/lib
check "installed: ktune.h, libktune.a, libktune.so.$version, ktune.pc, ktune, LICENSE" \
  test -f "$stage/usr/include/ktune.h" -a -f "$lib/libktune.a" -a -f "$lib/libktune.so.$version" \
  -a -f "$lib/pkgconfig/ktune.pc" -a -x "$stage/usr/bin/ktune" -a -f "$stage/usr/share/doc/ktune/LICENSE"
check "libktune.so -> libktune.so.$major -> libktune.so.$version" \
  test "$(readlink "$lib/libktune.so")" = "libktune.so.$major" -a \
  "$(readlink "$lib/libktune.so.$major")" = "libktune.so.$version"
check "the library's SONAME is libktune.so.$major" \
  grep -q "Library soname: \[libktune.so.$major\]" <(readelf -d "$lib/libktune.so.$version")
check "the library carries no RUNPATH" eval "! readelf -d '$lib/libktune.so.$version' | grep -E 'RUNPATH|RPATH'"
nsources=$(find "$stage/usr/share/ktune/generated" -name '*.cu' | wc -l)
check "the kernels' sources are under share/ktune/generated ($nsources)" test "$nsources" -gt 0
if [ -f build/system.db ]; then
  check "build/system.db is share/ktune/system.db" cmp build/system.db "$stage/usr/share/ktune/system.db"
else
  check "no build/system.db, so no share/ktune/system.db" test ! -e "$stage/usr/share/ktune/system.db"
fi

# The CLI: its kernels are libktune.so's, found through $ORIGIN/../lib.
check "the CLI holds no kernels (no .nv_fatbin section)" eval "! readelf -S '$stage/usr/bin/ktune' | grep -q nv_fatbin"
check "the CLI loads the staged libktune.so" \
  grep -q "libktune.so.$major => $stage/usr/bin/../lib/libktune.so.$major" <(ldd "$stage/usr/bin/ktune")
# A libktune.so.* in BINDIR (a stray copy) is not what the installed CLI loads.
cp "$lib/libktune.so.$version" "$stage/usr/bin/libktune.so.$major"
check "the CLI's RUNPATH has \$ORIGIN/../lib, not \$ORIGIN: a copy in bin/ is not loaded" \
  grep -q "libktune.so.$major => $stage/usr/bin/../lib/libktune.so.$major" <(ldd "$stage/usr/bin/ktune")
rm -f "$stage/usr/bin/libktune.so.$major"
check "the staged CLI runs: ktune --version" grep -qx "ktune $version" <("$stage/usr/bin/ktune" --version)
check "the staged CLI lists each installed source's variant (a row per target)" \
  test "$("$stage/usr/bin/ktune" list | awk '{print $1}' | sort -u | wc -l)" -eq "$nsources"

# ---- a program from outside, by pkg-config ------------------------------------
export PKG_CONFIG_PATH=$lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
unset PKG_CONFIG_SYSROOT_DIR
pc() { pkg-config --define-variable=prefix="$stage/usr" "$@" ktune; }
check "pkg-config --modversion ktune is $version" test "$(pc --modversion)" = "$version"
cuda=$(pc --variable=cudaroot)
cc=${CC:-cc}
# shellcheck disable=SC2046 # pkg-config's flags are words
check "hello.c builds against libktune.so" $cc -Wall -Wextra -Werror -o "$work/hello" tests/outside/hello.c \
  $(pc --cflags) -I"$cuda/include" $(pc --libs) -L"$cuda/lib64" -lcudart
# shellcheck disable=SC2046
check "hello.c builds against libktune.a (--static, ktune_lib=:libktune.a)" $cc -Wall -Wextra -Werror \
  -o "$work/hello_static" tests/outside/hello.c $(pc --cflags) -I"$cuda/include" \
  $(pc --static --libs --define-variable=ktune_lib=:libktune.a)
check "the static hello needs no libktune.so" eval "! readelf -d '$work/hello_static' | grep -q libktune"

if nvidia-smi -L >/dev/null 2>&1; then gpu=1; else gpu=0; fi
for prog in hello hello_static; do
  LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$work/$prog" >"$work/out" 2>&1
  rc=$?
  if [ "$gpu" = 1 ]; then
    if [ "$rc" -eq 0 ] && grep -q "(ok)" "$work/out"; then ok "$prog multiplies on the GPU"; else
      not_ok "$prog multiplies on the GPU (exit $rc)" "$work/out"
    fi
  elif [ "$rc" -ge 1 ] && [ "$rc" -le 125 ] && grep -q "no CUDA device" "$work/out"; then
    ok "$prog without a GPU: exit $rc, \"no CUDA device\""
  else
    not_ok "$prog without a GPU fails cleanly, saying \"no CUDA device\" (exit $rc)" "$work/out"
  fi
done
check "hello runs on the staged libktune.so" \
  grep -q "libktune.so.$major => $lib/libktune.so.$major" <(LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$work/hello")

# ---- uninstall ----------------------------------------------------------------
check "make uninstall DESTDIR=stage PREFIX=/usr" run_make uninstall
snapshot >"$work/after"
check "make uninstall touched nothing outside the stage" outside_unchanged "$work/installed" "$work/after"
check "no file is left in the stage" test -z "$(find "$stage" ! -type d)"
# uninstall leaves the folders that other packages share (see the Makefile).
left=$(cd "$stage" && find . -mindepth 1 -type d | sort | tr '\n' ' ')
check "the stage keeps only the shared folders" \
  test "$left" = "./usr ./usr/bin ./usr/include ./usr/lib ./usr/lib/pkgconfig ./usr/share ./usr/share/doc "

# ---- a PREFIX with a space ------------------------------------------------------
# make's functions split words at spaces; no path may be split.  ktune.pc
# quotes its paths, and pkg-config prints their spaces escaped, for a shell
# (or make) to read.  Installed where it says (no DESTDIR; no ldconfig):
# pkg-config's --define-variable=prefix would move SQLite's prefix too,
# and its -I, unquoted there, would split.
sp="$work/k tune"
run_make_spaced() {
  make --no-print-directory -C "$root" "$@" PREFIX="$sp" LDCONFIG=true
}
check "make install PREFIX='.../k tune'" run_make_spaced install
pcs() { PKG_CONFIG_PATH=$sp/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} pkg-config "$@" ktune; }
check "ktune.pc's libdir is \${prefix}/lib, there" \
  eval "grep -qxF 'libdir=\${prefix}/lib' '$sp/lib/pkgconfig/ktune.pc' && test \"\$(pcs --variable=libdir)\" = '$sp/lib'"
check "pkg-config's flags keep the path whole" test "$(pcs --cflags | sed 's/ *$//')" = "-I${sp// /\\ }/include"
check "hello.c builds against it (the flags read by the shell)" eval "$cc -Wall -Wextra -Werror \
  -o '$work/hello_spaced' tests/outside/hello.c $(pcs --cflags) -I'$cuda/include' $(pcs --libs) -L'$cuda/lib64' -lcudart"
check "that hello loads the library from the spaced lib/" \
  grep -qF "libktune.so.$major => $sp/lib/libktune.so.$major" <(LD_LIBRARY_PATH=$sp/lib ldd "$work/hello_spaced")
check "the CLI runs there and names its system database under the prefix" \
  grep -qF "system database $sp/share/ktune/system.db" <("$sp/bin/ktune" show 2>&1)
check "make uninstall PREFIX='.../k tune'" run_make_spaced uninstall
check "no file is left there" test -z "$(find "$sp" ! -type d)"

echo "1..$n"
[ "$failed" -eq 0 ]
