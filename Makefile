# haecer — top-level build. Plain GNU Make; every object lands under $(BUILD).
#
#   make               gcc build into build/
#   make SANITIZE=1    clang ASan+UBSan build into build-asan/
#   make SANITIZE=thread   clang ThreadSanitizer build into build-tsan/ (scripts/check.sh builds
#                      and runs the threaded tests there)
#   make check         install missing packages, build both, run every test (and valgrind set)
#   make demo          install missing packages, build, run the demo
#   make bench         build and run the benchmarks under bench/ (not the soak)
#   make bench-report  run them and write docs/PERFORMANCE.md and the README's headline table
#                      (BENCHES="msrd fidelity": only those; the others keep their figures)
#   make soak          the soak benchmark alone, SOAK_SECONDS long (600)
#   make fuzz          build the libFuzzer targets into build-fuzz/, run each FUZZ_SECONDS (fuzz/)
#   make install PREFIX=/usr/local

SANITIZE ?= 0
ifeq ($(SANITIZE),1)
BUILD    ?= build-asan
CC       := clang
SANITIZER_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
OPTIMIZE ?= -O1
else ifeq ($(SANITIZE),thread)
BUILD    ?= build-tsan
CC       := clang
SANITIZER_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
OPTIMIZE ?= -O1
else
BUILD    ?= build
CC       ?= gcc
ifeq ($(origin CC),default)
CC       := gcc
endif
SANITIZER_FLAGS :=
OPTIMIZE ?= -O2
endif

PREFIX   ?= /usr/local
# The one version of every binary and of libhaecer (--version, haecer_version(), haecer.pc).
VERSION  := 0.2.0
AR       ?= ar
WARNINGS := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla

# What the build needs, kept apart from CPPFLAGS, CFLAGS and LDFLAGS, which belong to whoever
# runs make (Kbuild's KBUILD_CFLAGS habit): `make CFLAGS=-O0` changes the optimisation and keeps
# the language standard, the warnings, -fPIC, -pthread, the dependency files and the sanitizer.
# The user's flags come after ours, so they win where they conflict; the optimisation level is
# in the default CFLAGS only. tests/build/test_make_flags checks it.
HAECER_CPPFLAGS = -D_GNU_SOURCE -I. -Ilibclient/include -DHAECER_VERSION='"$(VERSION)"'
HAECER_CFLAGS   = -std=gnu11 $(WARNINGS) -fPIC -pthread -MMD -MP $(SANITIZER_FLAGS)
HAECER_LDFLAGS  = -pthread $(SANITIZER_FLAGS)
CFLAGS   ?= $(OPTIMIZE) -g

# Library flags come from pkg-config, evaluated lazily so that `make check` can install the
# packages before anything asks for them.
pkg_libs = $(shell pkg-config --libs $(1) 2>/dev/null)
URING_LIBS   = $(call pkg_libs,liburing)
CYAML_LIBS   = $(call pkg_libs,libcyaml)
CMOCKA_LIBS  = $(call pkg_libs,cmocka)
SECCOMP_LIBS = $(call pkg_libs,libseccomp)
CAP_LIBS     = $(call pkg_libs,libcap)
CK_LIBS      = $(call pkg_libs,ck)
PFM_LIBS     = -lpfm

.DEFAULT_GOAL := all
.PHONY: all tests benches check demo bench bench-report soak deps clean install print-version

# Filled in by the module fragments.
PROGRAMS :=
TEST_PROGRAMS :=
BENCH_PROGRAMS :=
INSTALL_TARGETS :=

# $(call objects_of,SOURCES): the object files for a list of sources.
objects_of = $(patsubst %.c,$(BUILD)/%.o,$(1))

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(HAECER_CPPFLAGS) $(CPPFLAGS) $(HAECER_CFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/%.a:
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

# Every archive, in link order; tests and benchmarks link all of them (static linking takes only
# what is used).
ALL_ARCHIVES = $(BUILD)/libhaecer-testlib.a $(BUILD)/libhaecer-harness.a $(BUILD)/libmsrd.a \
	       $(BUILD)/libhaecer-backend.a $(BUILD)/libhaecer.a $(BUILD)/libhaecer-policy.a \
	       $(BUILD)/libhaecer-proto.a $(BUILD)/libhaecer-shm.a $(BUILD)/libhaecer-attribution.a \
	       $(BUILD)/libhaecer-common.a
ALL_LDLIBS = $(CMOCKA_LIBS) $(URING_LIBS) $(CYAML_LIBS) $(CAP_LIBS) $(SECCOMP_LIBS) $(PFM_LIBS) -lm

MODULES := $(sort $(wildcard */module.mk))
include $(MODULES)

all: $(PROGRAMS)
tests: $(TEST_PROGRAMS)
benches: $(BENCH_PROGRAMS)

deps:
	@scripts/install-deps.sh

# The README's test command. Everything a test run needs, from a fresh clone.
check: deps
	scripts/check.sh

demo: deps
	scripts/demo.sh

bench: deps
	$(MAKE) all benches
	scripts/run-benches.sh $(BUILD)

# Run the benchmarks and write docs/PERFORMANCE.md (and the README's headline table) from them.
bench-report: deps
	$(MAKE) all benches
	scripts/bench-report.sh $(BUILD) $(BENCHES)

# The soak benchmark alone (minutes; SOAK_SECONDS, default 600).
SOAK_SECONDS ?= 600
soak: deps
	$(MAKE) all benches
	HAECER_SOAK_SECONDS=$(SOAK_SECONDS) scripts/run-benches.sh $(BUILD) soak

install: all
	HAECER_VERSION=$(VERSION) scripts/install.sh "$(BUILD)" "$(DESTDIR)$(PREFIX)"

clean:
	rm -rf build build-asan build-tsan build-fuzz

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

print-version:
	@echo $(VERSION)
