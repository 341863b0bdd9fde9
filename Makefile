# SPDX-License-Identifier: MIT
# ktune: autotuned CUDA kernels.  `make tune` on a GPU host; `make test` anywhere.
#
# Flow: templates/*.space.lua + templates/*.cu.tpl --(generator/)--> generated/
#       --(nvcc)--> build/libktune.{a,so} + build/ktune --(make tune)--> tuning-db/

# ---- settings -----------------------------------------------------------
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
LUA ?= lua5.4
BUSTED ?= busted
CC ?= gcc
# Where `make install` puts things (the GNU names).  DESTDIR stages the
# whole tree somewhere else (packaging, tests) and is never compiled in;
# DATADIR (the shipped results) and the path from BINDIR to LIBDIR (the
# CLI's RUNPATH) are, so changing them rebuilds what holds them.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share
DOCDIR ?= $(DATADIR)/doc/ktune
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DESTDIR ?=
LDCONFIG ?= ldconfig
# Target architectures: the kernels are compiled for each (fat objects), and
# each GPU runs those of the newest target it can (README: "Architectures").
# Default: the GPUs present (nvidia-smi: one quick build for this host),
# else DEFAULT_ARCHS, the A100 and the H100, whose PTX newer GPUs compile.
# ARCH=sm_80 is a synonym for ARCHS=sm_80.
DEFAULT_ARCHS := sm_80 sm_90
ARCH ?=
ifeq ($(origin ARCHS),undefined)
ARCHS := $(or $(ARCH),$(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | \
           sed -n 's/^\([0-9]*\)\.\([0-9]*\)$$/sm_\1\2/p' | sort -u),$(DEFAULT_ARCHS))
endif
# The user database that make tune and make bench use; empty = ktune's
# default ($KTUNE_DB, else ~/.local/share/ktune/ktune.db).
KTUNE_DB ?=
CFLAGS ?= -O2 -g
NVCCFLAGS ?= -O3 -lineinfo
TUNE_ARGS ?=
# A file of matmul shapes for make tune to tune instead of the default ones:
# one MxNxK a line, # comments (`ktune tune --matmul @FILE`).
SHAPES ?=
# Build (and so tune) only the variants whose names match these comma-
# separated shell globs, each matching a whole name (* ? [...], as fnmatch(3);
# `ktune tune --variants` takes the same), plus the defaults, e.g.
# ONLY='matmul_wt_128x128x16_*,hist_smem_*': quick tunes.
ONLY ?=
# NO_PRUNE=1 keeps every variant that can be built, also those that the
# spaces' prune rules drop because measurements (on the GPU each rule names)
# showed they cannot win: the whole feasible space, for tuning a new GPU.
NO_PRUNE ?=
NPROC ?= $(shell nproc 2>/dev/null || echo 4)
V ?= 0

# ---- nothing to change below ---------------------------------------------
ifeq ($(V),0)
Q := @
say = @printf '  %-6s %s\n' $(1) "$(2)";
else
Q :=
say :=
endif

# The version: ktune.h's KT_VERSION_MAJOR, _MINOR and _PATCH lines, the one
# place it is written.
VERSION := $(shell sed -n 's/^.define KT_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9][0-9]*\)$$/\2/p' \
             runtime/include/ktune.h | paste -sd. -)
ifneq ($(words $(subst ., ,$(VERSION))),3)
$(error cannot read the version from the KT_VERSION_* lines of runtime/include/ktune.h)
endif
MAJOR := $(firstword $(subst ., ,$(VERSION)))

# Goals that need no generated files; any other reads generated/variants.mk.
NO_GEN_GOALS := clean deps test-deps check-test-deps help uninstall
NEEDS_GEN := $(filter-out $(NO_GEN_GOALS),$(or $(MAKECMDGOALS),all))

# Building needs the CUDA toolkit, Lua 5.4 with Penlight and SQLite's
# headers; testing adds busted, Criterion and pkg-config.  Builds and tests
# only check, and print the command that installs what is missing; only
# `make deps` (building) and `make test-deps` (both) install packages.
BUILD_PKGS := lua5.4 lua-penlight libsqlite3-dev
TEST_PKGS := lua-busted libcriterion-dev pkg-config
# For each Debian package, a command that succeeds when it is usable.
has_lua5.4 := command -v $(LUA)
has_lua-penlight := $(LUA) -e 'require "pl.template"'
has_libsqlite3-dev := $(CC) -include sqlite3.h -E -x c /dev/null
has_lua-busted := command -v $(BUSTED)
has_libcriterion-dev := $(CC) -include criterion/criterion.h -E -x c /dev/null
has_pkg-config := command -v pkg-config
# Shell: set $missing to the packages of $(1) that are not usable.
find_missing = missing=""; $(foreach p,$(1),{ $(has_$(p)); } >/dev/null 2>&1 || missing="$$missing $(p)";)
NVCC_MISSING = ktune: nvcc not found at $(NVCC): install the CUDA toolkit, or set CUDA_HOME

# What a build lacks, and ARCHS that the generator does not know (its own
# list, generator/targets.lua), are said once, before anything runs.
ifneq ($(NEEDS_GEN),)
ifeq ($(shell command -v $(NVCC)),)
$(error $(NVCC_MISSING))
endif
BUILD_MISSING := $(shell $(call find_missing,$(BUILD_PKGS)) echo $$missing)
ifneq ($(BUILD_MISSING),)
$(error ktune: building needs $(BUILD_MISSING).  Install with:  sudo apt-get install $(BUILD_MISSING)  (or: make deps))
endif
# ARCHS as the generator reads it (generator/targets.lua), else its message.
ARCHS_CHECK := $(shell KT_ARCHS='$(ARCHS)' $(LUA) -e 'package.path = "./?.lua;" .. package.path; \
                 local t, err = require("generator.targets").parse(os.getenv("KT_ARCHS")); local n = {}; \
                 for _, x in ipairs(t or {}) do n[#n + 1] = x.arch end; \
                 print(t and ("ok " .. table.concat(n, " ")) or err)' 2>&1)
ifneq ($(firstword $(ARCHS_CHECK)),ok)
$(error ktune: ARCHS='$(ARCHS)': $(ARCHS_CHECK))
endif
endif
# The targets by compute capability, one word each (ARCHS may have commas).
TARGETS := $(wordlist 2,$(words $(ARCHS_CHECK)),$(ARCHS_CHECK))

NO_PRUNE_ON := $(if $(filter-out 0,$(NO_PRUNE)),1)
GEN_FLAGS := $(if $(NO_PRUNE_ON),--no-prune) $(if $(ONLY),--only '$(ONLY)')
DB_ARG := $(if $(KTUNE_DB),--db '$(KTUNE_DB)')
SHAPES_ARG := $(if $(SHAPES),--matmul '@$(SHAPES)')
comma := ,
empty :=
space := $(empty) $(empty)
# Each target's SASS and PTX (the PTX runs on newer GPUs); a variant is
# compiled for the targets whose spaces keep it (generated/variants.mk).
gencode = -gencode=arch=compute_$(1:sm_%=%),code=[sm_$(1:sm_%=%),compute_$(1:sm_%=%)]
GENCODES := $(foreach t,$(TARGETS),$(call gencode,$(t)))
variant_gencodes = $(foreach t,$(TARGETS),$(if $(filter $(1),$(KT_TARGET_VARIANTS_$(t))),$(call gencode,$(t))))
GEN_ARCH := $(subst $(space),$(comma),$(TARGETS))
CUDA_INC := -I$(CUDA_HOME)/include
KT_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC -fvisibility=hidden -MMD -MP \
             -Iruntime/include -Iruntime -Igenerated $(CUDA_INC) -DKT_SYSTEM_DB='"$(DATADIR)/ktune/system.db"'
SQLITE_LIBS := $(shell pkg-config --libs sqlite3 2>/dev/null || echo -lsqlite3)
CRITERION_LIBS := $(shell pkg-config --libs criterion 2>/dev/null || echo -lcriterion)
# What libktune needs.  The shared library records no path to the CUDA
# runtime: the loader's configuration finds it, as it does for the program.
LIB_LIBS := $(SQLITE_LIBS) -L$(CUDA_HOME)/lib64 -lcudart -lstdc++ -lpthread -lm
# Programs run from the build tree (tests, the example, the benchmarks)
# link libktune.a and find the CUDA runtime where this build did.
LIBS := $(LIB_LIBS) -Wl,-rpath,$(CUDA_HOME)/lib64

ifneq ($(NEEDS_GEN),)
-include generated/variants.mk
endif
# generated/variants.mk lists the variants; make regenerates it (and re-reads
# it) whenever a template, a space, the generator, ARCHS, ONLY or NO_PRUNE changes.
ifneq ($(strip $(KT_GENERATED_ARCH))|$(KT_GENERATED_ONLY)|$(KT_GENERATED_NO_PRUNE),$(TARGETS)|$(ONLY)|$(NO_PRUNE_ON))
FORCE_GEN := FORCE
endif

# Every family that variants.mk lists (KT_VARIANTS_<family>): a new family
# needs no line here.
GEN_FAMILIES := $(sort $(patsubst KT_VARIANTS_%,%,$(filter KT_VARIANTS_%,$(.VARIABLES))))
VARIANTS := $(foreach f,$(GEN_FAMILIES),$(KT_VARIANTS_$(f)))
VARIANT_OBJS := $(VARIANTS:%=build/obj/%.o)
FAMILIES := $(sort $(patsubst %/,%,$(dir $(VARIANTS))))
RUNTIME_SRCS := $(wildcard runtime/*.c)
RUNTIME_OBJS := $(RUNTIME_SRCS:%.c=build/obj/%.o)
# The runtime's own kernels (runtime/kt_kernels.h), which no family
# generates: in the library with the variants, never in the CLI.
RUNTIME_KERNEL_OBJS := $(patsubst %.cu,build/obj/%.o,$(wildcard runtime/*.cu))
REGISTRY_OBJ := build/obj/generated/registry.o
KERNEL_REGS_OBJ := build/obj/kernel_regs.o
LIB_OBJS := $(RUNTIME_OBJS) $(RUNTIME_KERNEL_OBJS) $(REGISTRY_OBJ) $(KERNEL_REGS_OBJ) $(VARIANT_OBJS)
TUNER_SRCS := $(wildcard tuner/*.c)
TUNER_OBJS := $(TUNER_SRCS:%.c=build/obj/%.o)
TOOL_OBJS := $(filter-out build/obj/tuner/main.o,$(TUNER_OBJS))
C_TESTS := $(patsubst tests/%.c,build/tests/%,$(wildcard tests/test_*.c))
GEN_INPUTS := $(wildcard generator/*.lua templates/*)
SHLIB := build/libktune.so.$(VERSION)
# Shipped results (ktune export, one per GPU) make the system layer, build/system.db.
SHIPPED_RESULTS := $(wildcard tuning-db/shipped/*.json)

.PHONY: all generate tune test check test-lua bench clean deps test-deps check-test-deps help \
        install uninstall FORCE
all: build/libktune.a build/libktune.so build/ktune build/example build/ktune.pc \
     $(if $(SHIPPED_RESULTS),build/system.db)

help:
	@echo "make [all]        build generated kernels, libktune (.a, .so), the ktune CLI and the example"
	@echo "make generate     expand the templates for ARCHS='$(ARCHS)' and explain what was dropped"
	@echo "make tune         build, then benchmark every variant on this GPU into the user database,"
	@echo "                  on the default problems and those applications called untuned (ktune tune --help)"
	@echo "make test         generator, database, dispatch, API, CLI and install tests; GPU tests when a GPU is present"
	@echo "make bench        ktune against cuBLAS, CUB and the seed kernels (needs a GPU)"
	@echo "make install      copy the library, header, ktune.pc, CLI and kernel sources under PREFIX=$(PREFIX)"
	@echo "                  (DESTDIR, BINDIR, LIBDIR, INCLUDEDIR, DATADIR, DOCDIR, PKGCONFIGDIR also apply)"
	@echo "make uninstall    remove what make install copied (same variables)"
	@echo "make deps         install the Debian packages that building needs (apt-get)"
	@echo "make test-deps    install those that building and testing need"
	@echo "make clean        remove build/ and generated/"
	@echo "settings (make VAR=value ...):"
	@echo "  ARCHS='$(ARCHS)'  target architectures, one fat build (default: the present GPUs', else $(DEFAULT_ARCHS));"
	@echo "                    ARCH=sm_80 is the same as ARCHS=sm_80"
	@echo "  ONLY='g1,g2'      only the variants these shell globs match (whole names; * ? [...]), plus the defaults"
	@echo "  NO_PRUNE=1        also keep what the spaces' prune rules drop: the whole feasible space, for a new GPU"
	@echo "  KTUNE_DB=FILE     the user database of make tune and make bench (default: ktune's own)"
	@echo "  SEED=N            make bench: the random suites' seed (default: the benches' own)"
	@echo "  SHAPES=FILE       make tune: these matmul shapes (one MxNxK a line, # comments) instead of the defaults"
	@echo "  PREFIX=DIR        where make install puts things (now $(PREFIX))"
	@echo "  V=1               show the commands"

# ---- dependencies -----------------------------------------------------------
check_nvcc = command -v $(NVCC) >/dev/null 2>&1 || { echo "$(NVCC_MISSING)" >&2; exit 1; }
# Shell: install $missing with apt-get when root or allowed sudo, else say how.
apt_install = if [ -z "$$missing" ]; then echo "ktune: the packages are installed"; \
  elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
  elif sudo -n true 2>/dev/null; then sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
  else echo "ktune: run:  sudo apt-get install$$missing" >&2; exit 1; fi

check-test-deps:
	@$(call find_missing,$(TEST_PKGS)) [ -z "$$missing" ] || \
	  { echo "ktune: testing needs$$missing.  Install with:  sudo apt-get install$$missing  (or: make test-deps)" >&2; exit 1; }

deps:
	@$(check_nvcc)
	@$(call find_missing,$(BUILD_PKGS)) $(apt_install)

test-deps:
	@$(check_nvcc)
	@$(call find_missing,$(BUILD_PKGS) $(TEST_PKGS)) $(apt_install)

# ---- generation ------------------------------------------------------------
generate:
	$(Q)$(LUA) generator/ktgen.lua --arch $(GEN_ARCH) --out generated --explain $(GEN_FLAGS)

generated/variants.mk: $(GEN_INPUTS) $(FORCE_GEN)
	$(call say,GEN,generated/ for $(TARGETS))
	$(Q)$(LUA) generator/ktgen.lua --arch $(GEN_ARCH) --out generated --quiet $(GEN_FLAGS)
	@touch $@ # the generator leaves unchanged files alone; this one marks the run

generated/registry.c generated/registry.h: | generated/variants.mk

# The install paths that the build compiles in, one per line.  The file is
# rewritten only when they change, so that what holds them is rebuilt then
# (`make install PREFIX=/usr` after `make`), and only then.
LIB_FROM_BIN := $(shell realpath -m --relative-to='$(BINDIR)' '$(LIBDIR)')
CLI_RUNPATH := $$ORIGIN/$(LIB_FROM_BIN):$(CUDA_HOME)/lib64
build/paths: FORCE
	@mkdir -p $(@D)
	@printf '%s\n' 'PREFIX=$(PREFIX)' 'LIBDIR=$(LIBDIR)' 'INCLUDEDIR=$(INCLUDEDIR)' 'DATADIR=$(DATADIR)' \
	  'RUNPATH=$(CLI_RUNPATH)' 'CUDA_HOME=$(CUDA_HOME)' > $@.new
	@if cmp -s $@.new $@; then rm -f $@.new; else mv -f $@.new $@; fi

# ---- compilation -------------------------------------------------------
# nvcc's resource report (registers, shared memory, spills) is kept beside
# each object as .ptxas, for reading why a variant wins or loses.  Generated
# kernels include runtime/kt_launch.h and the shared headers of their
# templates (templates/*.cuh), which variants.mk lists per family.
build/obj/%.o: generated/%.cu runtime/kt_variant.h runtime/kt_launch.h
	$(call say,NVCC,$<)
	@mkdir -p $(@D)
	$(Q)$(NVCC) $(NVCCFLAGS) $(or $(SASS_ONLY),$(call variant_gencodes,$*)) -Xcompiler -fPIC,-fvisibility=hidden -Iruntime -Itemplates -Xptxas -v \
	  -c $< -o $@ 2> $(@:.o=.ptxas) || { cat $(@:.o=.ptxas) >&2; exit 1; }
define family_includes
$$(KT_VARIANTS_$(1):%=build/obj/%.o): $$(KT_INCLUDES_$(1))
endef
$(foreach f,$(GEN_FAMILIES),$(eval $(call family_includes,$(f))))
# wgmma and setmaxnreg exist only in sm_90a machine code (no PTX: it would
# not run elsewhere); the generator makes these variants for sm_90 targets only.
$(patsubst %,build/obj/%.o,$(filter gemm/gemm_wgmma_%,$(KT_VARIANTS_gemm))): SASS_ONLY = -gencode=arch=compute_90a,code=sm_90a

# The registry and the kernels' ptxas counts below are the internals that
# libktune.so exports (build/libktune.map).
$(REGISTRY_OBJ): generated/registry.c generated/registry.h runtime/kt_variant.h

# What ptxas gave each variant's kernel (registers, static shared memory),
# read from the reports once the kernels are compiled: dispatch's cost model
# counts the blocks an SM holds with it (runtime/resident.c).
build/kernel_regs.c: $(VARIANT_OBJS) generator/kernel_regs.lua
	$(call say,GEN,$@)
	$(Q)$(LUA) generator/kernel_regs.lua $(VARIANT_OBJS:.o=.ptxas) > $@.tmp && mv -f $@.tmp $@

$(KERNEL_REGS_OBJ): build/kernel_regs.c runtime/kt_internal.h runtime/kt_variant.h

# Both keep their symbols visible; the rest of the runtime's are hidden.
$(REGISTRY_OBJ) $(KERNEL_REGS_OBJ):
	$(call say,CC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(KT_CFLAGS) -fvisibility=default -c $< -o $@

# Their entry points are visible (KT_RUNTIME_KERNEL): libktune.so exports
# them for the CLI (REGISTRY_SYMBOLS), whose runtime objects call them.
build/obj/runtime/%.o: runtime/%.cu runtime/kt_kernels.h templates/gemm_common.cuh runtime/kt_launch.h \
                       runtime/kt_variant.h
	$(call say,NVCC,$<)
	@mkdir -p $(@D)
	$(Q)$(NVCC) $(NVCCFLAGS) $(GENCODES) -Xcompiler -fPIC,-fvisibility=hidden -Iruntime -Itemplates -c $< -o $@

build/obj/%.o: %.c generated/registry.h
	$(call say,CC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(KT_CFLAGS) -c $< -o $@

build/obj/runtime/results.o: build/paths # KT_SYSTEM_DB
# The matmul check's reference loop (kt_tune_matmul_reference_row): gcc's
# -O2 leaves it scalar; vectorised it takes under half the time, with the
# same sums (no reassociation: each one still adds in k order).
build/obj/tuner/matmul.o: KT_CFLAGS += -ftree-vectorize

# ---- the library --------------------------------------------------------
build/libktune.a: $(LIB_OBJS)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

# libktune.so exports the API (KT_API in ktune.h) and, for the ktune CLI
# alone, the variant registry, its kernels' ptxas counts and the runtime's
# own kernels, under a version named for this release: a CLI then runs
# only with the library it was built with.
REGISTRY_SYMBOLS := kt_registry kt_registry_count kt_registry_generator_version kt_registry_target \
                    kt_registry_targets kt_registry_target_count kt_kernel_regs kt_kernel_regs_count \
                    kt_transpose_f32 kt_scale_f32 kt_scratch_alloc kt_scratch_free kt_cluster_capacity
build/libktune.map: runtime/include/ktune.h Makefile
	@mkdir -p $(@D)
	$(Q)printf 'KTUNE_PRIVATE_%s {\n  global: %s\n};\n' $(VERSION) '$(addsuffix ;,$(REGISTRY_SYMBOLS))' > $@

# libktune.so.MAJOR.MINOR.PATCH, known to the loader by its SONAME
# libktune.so.MAJOR, and to the linker (-lktune) by libktune.so.
$(SHLIB): $(LIB_OBJS) build/libktune.map
	$(call say,LD,$@)
	$(Q)$(CC) -shared -Wl,-soname,libktune.so.$(MAJOR) -Wl,--version-script,build/libktune.map -Wl,-z,defs \
	  -o $@ $(LIB_OBJS) $(LIB_LIBS)

build/libktune.so.$(MAJOR): $(SHLIB)
	$(Q)ln -sf $(notdir $<) $@

build/libktune.so: build/libktune.so.$(MAJOR)
	$(Q)ln -sf $(notdir $<) $@

build/ktune.pc: runtime/ktune.pc.in build/paths runtime/include/ktune.h
	$(call say,GEN,$@)
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(call under_prefix,$(LIBDIR))|' \
	  -e 's|@INCLUDEDIR@|$(call under_prefix,$(INCLUDEDIR))|' -e 's|@CUDA_HOME@|$(CUDA_HOME)|' \
	  -e 's|@VERSION@|$(VERSION)|' $< > $@
# ${prefix}/lib for $(PREFIX)/lib, so that pkg-config may move the prefix.
# subst, not patsubst: a PREFIX with a space stays one path (a marker
# anchors it at the start).
under_prefix = $(subst @@,,$(subst @@$(PREFIX)/,$${prefix}/,@@$(1)))

# ---- programs -----------------------------------------------------------
# The CLI takes the kernels, nearly all of libktune's size, from
# libktune.so, and the runtime's internals, which libktune.so does not
# export, from an archive of the runtime's own objects (less the registry
# and the kernels).  --exclude-libs keeps that copy's API functions out of
# the CLI's exports, where they would stand in for the library's.  It is
# linked twice, alike but for its RUNPATH (with the CUDA runtime this build
# found in both): build/ktune finds libktune.so beside it in build/, the
# installed one (build/install/ktune) in LIBDIR alone, so that no
# libktune.so.* that lies in BINDIR can stand in for the installed one.
build/libktune_internal.a: $(RUNTIME_OBJS)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

CLI_LINK = $(CC) -o $@ $(TUNER_OBJS) build/libktune_internal.a build/libktune.so \
	  -Wl,--exclude-libs,libktune_internal.a $(LIB_LIBS) -Wl,--enable-new-dtags
build/ktune: $(TUNER_OBJS) build/libktune_internal.a build/libktune.so
	$(call say,LD,$@)
	$(Q)$(CLI_LINK) -Wl,-rpath,'$$ORIGIN:$(CUDA_HOME)/lib64'

build/install/ktune: $(TUNER_OBJS) build/libktune_internal.a build/libktune.so build/paths
	$(call say,LD,$@)
	$(Q)mkdir -p $(@D) && $(CLI_LINK) -Wl,-rpath,'$(CLI_RUNPATH)'

build/example: build/obj/examples/example.o build/libktune.a
	$(call say,LD,$@)
	$(Q)$(CC) -o $@ $< build/libktune.a $(LIBS)

# ---- tuning --------------------------------------------------------------
# The variants compile in parallel even from a plain `make tune`.
tune:
	$(Q)$(MAKE) --no-print-directory -j$(NPROC) all
	$(Q)./build/ktune tune $(DB_ARG) $(SHAPES_ARG) $(TUNE_ARGS)

# The shipped results, imported (CPU only) into the system layer that the
# runtime finds beside the program.  Rebuilt when ktune is: its sources
# decide which rows rank.
build/system.db: $(SHIPPED_RESULTS) build/ktune
	$(call say,IMPORT,$@)
	$(Q)rm -f $@.tmp && ./build/ktune import --db $@.tmp $(SHIPPED_RESULTS) >/dev/null && mv $@.tmp $@

# ---- tests ---------------------------------------------------------------
build/tests/%: tests/%.c $(TOOL_OBJS) build/libktune.a | check-test-deps
	$(call say,CC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(KT_CFLAGS) -fvisibility=default -Ituner -o $@ $< $(TOOL_OBJS) build/libktune.a \
	  $(CRITERION_LIBS) $(LIBS)

test: check-test-deps all $(C_TESTS) build/sm80.log build/replay_dispatch
	$(Q)KTUNE_MISSES=off tests/run.sh $(BUSTED) build/sm80.log $(C_TESTS)

test-lua:
	$(Q)$(BUSTED) --lpath='./?.lua' --pattern=_spec tests/

check: test

# Every variant that the sm_80 target keeps must compile for sm_80 too: the
# build did it when sm_80 is one of ARCHS, else this check does.
ifneq ($(filter sm_80,$(TARGETS)),)
build/sm80.log: build/libktune.a
	@echo "sm_80: $(words $(KT_TARGET_VARIANTS_sm_80)) variants compile (sm_80 is one of ARCHS)" > $@
else
build/sm80.log: $(GEN_INPUTS) runtime/kt_variant.h runtime/kt_launch.h
	$(call say,CHECK,sm_80 compiles)
	$(Q)rm -rf build/sm80 && mkdir -p build && $(LUA) generator/ktgen.lua --arch sm_80 --out build/sm80 --quiet && \
	  ls build/sm80/*/*.cu | xargs -P $$(nproc) -n 1 sh -c '$(NVCC) -arch=sm_80 -Iruntime -Itemplates -cubin -o /dev/null "$$0" || exit 255' && \
	  echo "sm_80: $$(ls build/sm80/*/*.cu | wc -l) variants compile" > $@ || { rm -f $@; exit 1; }
endif

# ---- benchmarks ----------------------------------------------------------
BENCH_BINS := build/bench_matmul build/bench_matmul_random build/bench_hist build/bench_gemm
# The link needs the tuner's objects: list them, so that `make build/bench_x`
# builds them and `make -j bench` never links before they exist.
build/bench_%: bench/bench_%.cu bench/bench_common.h bench/matmul_check.cuh build/libktune.a $(TOOL_OBJS) $(wildcard tuner/*.h) \
               runtime/kt_internal.h runtime/kt_variant.h runtime/include/ktune.h
	$(call say,NVCC,$<)
	$(Q)$(NVCC) $(NVCCFLAGS) $(GENCODES) -std=c++17 -Iruntime/include -Iruntime -Igenerated -Ituner -Itemplates -o $@ $< \
	  $(TOOL_OBJS) build/libktune.a -lcublas $(SQLITE_LIBS) -lpthread

# Every bench runs, whichever fails (a failed shape, cuBLAS in another
# precision); make bench fails at the end if any did.  SEED=N draws the
# random suites from another seed.
SEED_ARG := $(if $(SEED),--seed $(SEED))
bench: all $(TOOL_OBJS) $(BENCH_BINS)
	$(Q)mkdir -p bench/results; rc=0; \
	./build/bench_matmul $(DB_ARG) --out bench/results || rc=1; \
	./build/bench_matmul_random $(DB_ARG) --out bench/results $(SEED_ARG) || rc=1; \
	./build/bench_matmul_random $(DB_ARG) --out bench/results --vectors $(SEED_ARG) || rc=1; \
	./build/bench_hist $(DB_ARG) --out bench/results || rc=1; \
	./build/bench_gemm $(DB_ARG) --out bench/results $(SEED_ARG) || rc=1; \
	if [ $$rc -ne 0 ]; then echo "make bench: a bench failed (its output says which)" >&2; fi; exit $$rc
build/bench_gemm: templates/gemm_common.cuh

# Matmul dispatch replayed over measured suites, on the CPU
# (bench/replay_dispatch.c): not part of `make bench`, which measures.
build/replay_dispatch: bench/replay_dispatch.c build/libktune.a runtime/kt_internal.h runtime/include/ktune.h
	$(call say,CC,$<)
	$(Q)$(CC) $(CFLAGS) $(KT_CFLAGS) -fvisibility=default -o $@ $< build/libktune.a $(LIBS)

# ---- installing ----------------------------------------------------------
# Under $(DATADIR)/ktune: the kernels' sources, for reading what `ktune
# explain` names (those of this build only: an earlier install's go), and
# build/system.db when there is one (the shipped results, the system
# layer).  Outside a stage, ldconfig (when it may) tells the loader about
# the new library.
KT_SHARE := $(DATADIR)/ktune
install: all build/install/ktune
	$(call say,INSTALL,$(DESTDIR)$(PREFIX))
	$(Q)rm -rf '$(DESTDIR)$(KT_SHARE)/generated'
	$(Q)install -d '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(LIBDIR)' '$(DESTDIR)$(PKGCONFIGDIR)' '$(DESTDIR)$(INCLUDEDIR)' \
	  '$(DESTDIR)$(DOCDIR)' $(FAMILIES:%='$(DESTDIR)$(KT_SHARE)/generated/%')
	$(Q)install -m 644 runtime/include/ktune.h '$(DESTDIR)$(INCLUDEDIR)/'
	$(Q)install -m 644 build/libktune.a '$(DESTDIR)$(LIBDIR)/'
	$(Q)install -m 755 $(SHLIB) '$(DESTDIR)$(LIBDIR)/'
	$(Q)ln -sf libktune.so.$(VERSION) '$(DESTDIR)$(LIBDIR)/libktune.so.$(MAJOR)'
	$(Q)ln -sf libktune.so.$(MAJOR) '$(DESTDIR)$(LIBDIR)/libktune.so'
	$(Q)install -m 644 build/ktune.pc '$(DESTDIR)$(PKGCONFIGDIR)/'
	$(Q)install -m 755 build/install/ktune '$(DESTDIR)$(BINDIR)/'
	$(Q)install -m 644 LICENSE '$(DESTDIR)$(DOCDIR)/'
	$(Q)$(foreach f,$(FAMILIES),install -m 644 $(filter generated/$(f)/%,$(VARIANTS:%=generated/%.cu)) \
	  '$(DESTDIR)$(KT_SHARE)/generated/$(f)/' &&) true
	$(Q)if [ -f build/system.db ]; then install -m 644 build/system.db '$(DESTDIR)$(KT_SHARE)/system.db'; fi
	$(Q)[ -n '$(DESTDIR)' ] || $(LDCONFIG) 2>/dev/null || true

# Removes every file that install may have copied, and ktune's own folders;
# leaves the shared ones (bin, lib, lib/pkgconfig, include, share,
# share/doc): other packages use them, and /usr/local's come with the
# system (automake's uninstall does the same).  A file put in
# $(DATADIR)/ktune by hand stays, and so does that folder.
uninstall:
	$(call say,RM,$(DESTDIR)$(PREFIX))
	$(Q)rm -f '$(DESTDIR)$(BINDIR)/ktune' '$(DESTDIR)$(INCLUDEDIR)/ktune.h' '$(DESTDIR)$(LIBDIR)/libktune.a' \
	  '$(DESTDIR)$(LIBDIR)/libktune.so' '$(DESTDIR)$(LIBDIR)/libktune.so.$(MAJOR)' \
	  '$(DESTDIR)$(LIBDIR)/libktune.so.$(VERSION)' '$(DESTDIR)$(PKGCONFIGDIR)/ktune.pc' '$(DESTDIR)$(DOCDIR)/LICENSE' \
	  '$(DESTDIR)$(KT_SHARE)/system.db'
	$(Q)rm -rf '$(DESTDIR)$(KT_SHARE)/generated'
	$(Q)rmdir '$(DESTDIR)$(KT_SHARE)' '$(DESTDIR)$(DOCDIR)' 2>/dev/null || true
	$(Q)[ -n '$(DESTDIR)' ] || $(LDCONFIG) 2>/dev/null || true

clean:
	rm -rf build generated

FORCE:

-include $(shell find build/obj -name '*.d' 2>/dev/null)
