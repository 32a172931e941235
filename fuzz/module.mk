# fuzz/: libFuzzer targets, built with clang -fsanitize=fuzzer,address,undefined into build-fuzz/.
#
#   make fuzz [FUZZ_SECONDS=N] [FUZZ_TARGETS=wire,ring]   build every target, run each N s (60)
#
# fuzz/fuzz_NAME.c is one target. It starts from the committed seeds in fuzz/corpus/NAME/ and
# keeps what it finds in build-fuzz/corpus/NAME/ (never in the source tree); a crash, a leak or a
# sanitizer report fails the run and leaves the input in build-fuzz/artifacts/ (fuzz/run.sh).
# The libraries are compiled again with coverage instrumentation by a recursive make, so the
# normal builds never see fuzzer flags.
FUZZ_BUILD := build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SANITIZERS := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
		   -fno-omit-frame-pointer
FUZZ_BINARIES := $(patsubst fuzz/%.c,$(BUILD)/fuzz/%,$(wildcard fuzz/fuzz_*.c))
# Listed here, not taken from server/module.mk, which is read after this file.
FUZZ_ARCHIVES := $(BUILD)/libmsrd.a $(BUILD)/libhaecer-backend.a $(BUILD)/libhaecer-policy.a \
		 $(BUILD)/libhaecer-proto.a $(BUILD)/libhaecer-shm.a $(BUILD)/libhaecer-common.a

# Targets that need the shipped models and policies find the source tree here.
$(BUILD)/fuzz/%.o: HAECER_CPPFLAGS += -DFUZZ_SOURCE_DIR='"$(CURDIR)"'
$(FUZZ_BINARIES): $(BUILD)/fuzz/%: $(BUILD)/fuzz/%.o $(FUZZ_ARCHIVES)
	$(CC) $(HAECER_LDFLAGS) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(URING_LIBS) $(CYAML_LIBS) \
		$(CAP_LIBS) $(SECCOMP_LIBS) -lm

# The generated seeds (fuzz/seeds.c says when to run it); not part of any default target.
$(BUILD)/fuzz/seeds: $(BUILD)/fuzz/seeds.o $(BUILD)/libhaecer-proto.a $(BUILD)/libhaecer-shm.a
	$(CC) $(HAECER_LDFLAGS) $(LDFLAGS) -o $@ $^

.PHONY: fuzz fuzz-binaries
fuzz-binaries: $(FUZZ_BINARIES)

fuzz:
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=clang OPTIMIZE=-O1 SANITIZER_FLAGS="$(FUZZ_SANITIZERS)" \
		fuzz-binaries
	fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)
