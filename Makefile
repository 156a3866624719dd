# Glovebox: one non-recursive GNU Makefile.
#   make                 library, glovebox-init, glovebox (CLI)
#   make test            unit + integration tests (as root; sandbox tests need namespaces),
#                        the cross-tenant matrix (tests/security), the fault suite
#                        (tests/faults), then the node suites (tests/e2b,
#                        tests/mcp, tests/worker), whose npm packages it installs from their
#                        lockfiles (npm ci) when needed
#   make test SANITIZE=address,undefined   the everyday loop (leak detection on)
#   make bench           benchmarks side by side with peers (bwrap, unshare)
#   make fuzz            build and run the libFuzzer targets for a short while (FUZZ_TIME=20 s each)
#   make fuzz-long       each target for FUZZ_LONG_TIME=600 s, one at a time, with a summary line
#                        per target (execs, cov, ft, corpus, crashes); fails on any crash
#   make lint            clang-tidy + cppcheck
#   make format-check    clang-format --dry-run
.SUFFIXES:
.DELETE_ON_ERROR:
.SECONDARY:
MAKEFLAGS += --no-builtin-rules

CC ?= gcc
ifeq ($(origin CC),default)
CC := gcc
endif
SANITIZE ?=
WERROR ?= $(if $(CI),1,)
BUILD := build$(if $(SANITIZE),-san)
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

# Dependencies: install them through the project's script when pkg-config cannot see them.
PKGS := libseccomp sqlite3 libssl libcrypto libevent libevent_openssl jansson libcurl libnftnl libmnl ldns libarchive
DEPS_OK := $(shell pkg-config --exists $(PKGS) && pkg-config --exists cmocka && test -f /usr/include/http_parser.h && test -f /usr/include/wslay/wslay.h && echo yes)
ifneq ($(DEPS_OK),yes)
$(info deps: missing build dependencies; running scripts/deps.sh)
$(shell ./scripts/deps.sh >&2)
endif

WARN := -Wall -Wextra -Wshadow -Wformat=2 -Wmissing-prototypes -Wstrict-prototypes \
        -Wpointer-arith -Wcast-qual -Wwrite-strings -Wvla -Wno-unused-parameter \
        -Wimplicit-fallthrough -Wundef
ifeq ($(WERROR),1)
WARN += -Werror
endif
HARDEN := -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIE
BASE_CFLAGS := -std=gnu11 -g -O2 $(WARN) -Isrc -MMD -MP -D_GNU_SOURCE \
               -DGBX_VERSION='"$(VERSION)"'
ifneq ($(SANITIZE),)
SAN_FLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif
CFLAGS_ALL := $(BASE_CFLAGS) $(HARDEN) $(SAN_FLAGS) $(shell pkg-config --cflags $(PKGS)) $(CFLAGS)
LDFLAGS_ALL := -pie -Wl,-z,relro,-z,now $(SAN_FLAGS) $(LDFLAGS)
LIBS := $(shell pkg-config --libs $(PKGS)) -lhttp_parser

# (+ the daemon's pure parsers, so unit tests and fuzz targets can link them)
LIB_SRCS := $(wildcard src/base/*.c src/agent/*.c src/store/*.c src/sandbox/*.c src/egress/*.c) \
            src/session/toolkit.c src/session/glob.c \
            src/http/multipart.c src/e2b/connect.c src/core/limits.c src/core/spec.c \
            src/core/capture.c src/core/actor.c src/core/template_names.c src/core/template_log.c \
            src/ingress/route.c src/ingress/cdp_json.c
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/src/sandbox/init_blob.o $(BUILD)/gen/seccomp_bpf.o
LIB := $(BUILD)/libglovebox.a

DAEMON_SRCS := $(filter-out $(LIB_SRCS),$(wildcard src/core/*.c src/session/*.c src/api/*.c src/e2b/*.c \
                                                  src/http/*.c src/ingress/*.c src/browser/*.c \
                                                  src/daemon/*.c))
DAEMON_OBJS := $(DAEMON_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/src/e2b/interp_blob.o
DAEMON_LIBS := $(shell pkg-config --libs libevent jansson zlib) -lwslay
CLI_LIBS := $(shell pkg-config --libs jansson)
CLI_SRCS := $(filter-out src/cli/audit.c src/cli/audit_main.c,$(wildcard src/cli/*.c src/mcp/*.c src/worker/*.c))
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/%.o)
CLI_LIB_OBJS := $(filter-out %/main.o,$(CLI_OBJS))
# glovebox-audit: the one command that reads the store, so glovebox itself links neither
# SQLite nor libcrypto (--as-needed drops them)
AUDIT_OBJS := $(BUILD)/src/cli/audit.o $(BUILD)/src/cli/audit_main.o $(BUILD)/src/cli/util.o \
              $(BUILD)/src/cli/audit_usage.o

# glovebox-init: static, no library dependencies, never sanitized (it runs inside sandboxes).
INIT_SRCS := $(wildcard src/init/*.c) src/agent/frame.c src/base/path.c
INIT_OBJS := $(INIT_SRCS:%.c=$(BUILD)/init-obj/%.o)
INIT_CFLAGS := -std=gnu11 -Os -ffunction-sections -fdata-sections $(WARN) -Isrc -MMD -MP -D_GNU_SOURCE -fstack-protector-strong \
               -D_FORTIFY_SOURCE=2

PROBE := $(BUILD)/gbx-probe

# musl when it is installed (scripts/deps.sh installs it): a much smaller static binary,
# cheaper to copy into each runtime's sealed memfd and to exec. glibc -static otherwise.
# musl-gcc sees only musl's headers: the kernel's are linked in from the system.
MUSL_GCC := $(shell command -v musl-gcc 2>/dev/null)
ifneq ($(MUSL_GCC),)
INIT_CC := $(MUSL_GCC)
INIT_INC := $(BUILD)/musl-include
INIT_CFLAGS += -isystem $(INIT_INC)
else
INIT_CC := $(CC)
INIT_INC :=
endif

# A flags stamp: changing flags rebuilds everything that depends on them.
FLAGS_STAMP := $(BUILD)/.flags
FLAGS_NOW = $(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) $(INIT_CC) $(INIT_CFLAGS)
$(shell mkdir -p $(BUILD); if [ "$$(cat $(FLAGS_STAMP) 2>/dev/null)" != "$(FLAGS_NOW)" ]; then \
    echo "$(FLAGS_NOW)" > $(FLAGS_STAMP); fi)


all: $(BUILD)/glovebox $(BUILD)/glovebox-audit $(BUILD)/gloveboxd $(BUILD)/glovebox-init $(LIB)
.PHONY: all test unit integration bench fuzz fuzz-long lint format format-check clean deps

deps:
	./scripts/deps.sh

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/musl-include:
	@mkdir -p $@
	ln -sfn /usr/include/linux $@/linux
	ln -sfn /usr/include/asm-generic $@/asm-generic
	ln -sfn /usr/include/$$(gcc -print-multiarch)/asm $@/asm

$(BUILD)/init-obj/%.o: %.c $(FLAGS_STAMP) | $(INIT_INC)
	@mkdir -p $(@D)
	$(INIT_CC) $(INIT_CFLAGS) -c $< -o $@

$(BUILD)/glovebox-init: $(INIT_OBJS)
	$(INIT_CC) -static -s -Wl,--gc-sections -o $@ $^

# the seccomp filter, compiled to BPF at build time (tools/gen-seccomp.c)
$(BUILD)/gen-seccomp: tools/gen-seccomp.c src/sandbox/seccomp.c src/base/mem.c src/sandbox/seccomp.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -Isrc -D_GNU_SOURCE -DGBX_SECCOMP_GENERATOR -o $@ tools/gen-seccomp.c src/sandbox/seccomp.c \
	    src/base/mem.c $(LIBS)

$(BUILD)/gen/seccomp_bpf.c: $(BUILD)/gen-seccomp
	@mkdir -p $(@D)
	$(BUILD)/gen-seccomp > $@

$(BUILD)/gen/seccomp_bpf.o: $(BUILD)/gen/seccomp_bpf.c
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/src/sandbox/init_blob.o: src/sandbox/init_blob.S $(BUILD)/glovebox-init
	@mkdir -p $(@D)
	$(CC) -c -DGBX_INIT_PATH='"$(BUILD)/glovebox-init"' $< -o $@

$(BUILD)/src/e2b/interp_blob.o: src/e2b/interp_blob.S src/e2b/interp_kernel.py
	@mkdir -p $(@D)
	$(CC) -c -DGBX_INTERP_KERNEL='"src/e2b/interp_kernel.py"' $< -o $@

# (the Makefile too: a file moved into LIB_SRCS whose object is older than the archive)
$(LIB): $(LIB_OBJS) Makefile
	rm -f $@
	ar rcs $@ $(LIB_OBJS)

$(BUILD)/glovebox: $(CLI_OBJS) $(LIB)
	$(CC) $(LDFLAGS_ALL) -Wl,--as-needed -o $@ $(CLI_OBJS) $(LIB) $(CLI_LIBS) $(LIBS)

$(BUILD)/glovebox-audit: $(AUDIT_OBJS) $(LIB)
	$(CC) $(LDFLAGS_ALL) -o $@ $(AUDIT_OBJS) $(LIB) $(CLI_LIBS) $(LIBS)

$(BUILD)/gloveboxd: $(DAEMON_OBJS) $(LIB)
	$(CC) $(LDFLAGS_ALL) -o $@ $(DAEMON_OBJS) $(LIB) $(DAEMON_LIBS) $(LIBS)

# ---- tests -------------------------------------------------------------------------------
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
INTEG_SRCS := $(wildcard tests/integration/t*.c)
INTEG_BINS := $(INTEG_SRCS:tests/integration/%.c=$(BUILD)/tests/integration/%)
TEST_HELPER_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/lib/*.c))
CMOCKA_LIBS := $(shell pkg-config --libs cmocka)

$(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(TEST_HELPER_OBJS) $(CLI_LIB_OBJS) $(LIB)
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(TEST_HELPER_OBJS) $(CLI_LIB_OBJS) $(LIB) $(CLI_LIBS) $(LIBS) $(CMOCKA_LIBS)

$(BUILD)/tests/integration/%: $(BUILD)/tests/integration/%.o $(TEST_HELPER_OBJS) $(CLI_LIB_OBJS) $(LIB)
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(TEST_HELPER_OBJS) $(CLI_LIB_OBJS) $(LIB) $(CLI_LIBS) $(LIBS) $(CMOCKA_LIBS)

$(PROBE): tests/probe/probe.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -Wall -static -o $@ $<

# The node suites' packages, from their lockfiles: npm ci again when node_modules is missing
# or older than package-lock.json (the stamp is the last thing written). A failure fails the
# test run, with npm's reason, rather than leaving the suites to skip.
NODE_SUITES := tests/e2b tests/mcp tests/worker tests/browser
NODE_STAMPS := $(NODE_SUITES:%=%/node_modules/.glovebox-npm-ci)
%/node_modules/.glovebox-npm-ci: %/package-lock.json %/package.json
	@command -v npm >/dev/null || { echo "test: npm not found (scripts/deps.sh installs it)"; exit 1; }
	@echo "npm ci in $*"
	@cd $* && npm ci --no-audit --no-fund --loglevel=error || \
	    { echo "test: npm ci in $* failed (above): its suite cannot run"; exit 1; }
	@touch $@

test: all $(UNIT_BINS) $(INTEG_BINS) $(PROBE) $(NODE_STAMPS)
	@BUILD=$(BUILD) ./tests/run-tests.sh tests/unit/test_runner.sh tests/unit/layers.sh $(UNIT_BINS) $(INTEG_BINS) \
	    tests/integration/t*.sh tests/security/*.sh tests/faults/f*.sh $(NODE_SUITES:%=%/run.sh)

unit: $(UNIT_BINS)
	@BUILD=$(BUILD) ./tests/run-tests.sh tests/unit/test_runner.sh $(UNIT_BINS)

# ---- benchmarks --------------------------------------------------------------------------
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)
# bench_api is an HTTP client of the daemon: libcurl and jansson, linked directly
BENCH_LIBS := $(shell pkg-config --libs libcurl jansson) -pthread
BENCH_LIB_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(wildcard bench/lib/*.c))
$(BUILD)/bench/%: $(BUILD)/bench/%.o $(BENCH_LIB_OBJS) $(LIB)
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(BENCH_LIB_OBJS) $(LIB) $(BENCH_LIBS) $(LIBS)

bench: all $(BENCH_BINS) tests/e2b/node_modules/.glovebox-npm-ci
	@BUILD=$(BUILD) ./bench/run.sh

# ---- fuzzing -----------------------------------------------------------------------------
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=build-fuzz/%)
FUZZ_TIME ?= 20
# the pure parts of the library (no sandboxes, no store, no daemon-side egress, no capture of
# a sandbox's files: it takes a sandbox's credentials through sandbox/fscred.c; no template
# names and logs: they read names with sandbox/template.c), plus what a target names in
# FUZZ_EXTRA_<target>
FUZZ_LIB_SRCS := $(filter-out src/sandbox/% src/store/% src/agent/aconn.c src/agent/awrite.c src/egress/egress.c src/egress/netns.c \
                  src/egress/proxy.c src/egress/dns.c src/core/capture.c src/core/template_names.c \
                  src/core/template_log.c,$(LIB_SRCS))
FUZZ_EXTRA_fuzz_dns := src/egress/dns.c
FUZZ_EXTRA_fuzz_oci := src/sandbox/oci.c src/sandbox/template.c src/sandbox/layer.c
FUZZ_EXTRA_fuzz_worker := src/worker/worker.c src/worker/hook.c
# the request-body gate alone (its one call into aconn.c is stubbed in the target)
FUZZ_EXTRA_fuzz_body := src/http/http.c
build-fuzz/%: tests/fuzz/%.c $(LIB_SRCS) src/init/*.c $(wildcard src/mcp/*.c) $(wildcard src/worker/*.c) src/http/http.c
	@mkdir -p $(@D)
	clang -std=gnu11 -g -O1 -Isrc -D_GNU_SOURCE -DGBX_FUZZING -fsanitize=fuzzer,address,undefined \
	    -fno-sanitize-recover=all \
	    -o $@ $< $(FUZZ_LIB_SRCS) $(FUZZ_EXTRA_$*) $(LIBS)

fuzz: $(FUZZ_BINS)
	@set -e; for f in $(FUZZ_BINS); do n=$$(basename $$f); mkdir -p build-fuzz/corpus-$$n; \
	    echo "fuzz: $$n for $(FUZZ_TIME)s"; \
	    $$f -max_total_time=$(FUZZ_TIME) -print_final_stats=0 build-fuzz/corpus-$$n tests/fuzz/corpus/$$n >build-fuzz/$$n.log 2>&1 \
	    || { tail -n 40 build-fuzz/$$n.log; exit 1; }; tail -n 2 build-fuzz/$$n.log; done

# make fuzz-long: every target for FUZZ_LONG_TIME seconds, one after another (or only the
# targets named in FUZZ_ONLY, e.g. FUZZ_ONLY="fuzz_dns fuzz_sni"); see tests/fuzz/run-long.sh
FUZZ_LONG_TIME ?= 600
FUZZ_ONLY ?=
FUZZ_LONG_BINS := $(if $(FUZZ_ONLY),$(FUZZ_ONLY:%=build-fuzz/%),$(FUZZ_BINS))
fuzz-long: $(FUZZ_LONG_BINS)
	@./tests/fuzz/run-long.sh $(FUZZ_LONG_TIME) $^

# ---- lint and format ---------------------------------------------------------------------
ALL_C := $(shell find src tests bench -name '*.c' -o -name '*.h' 2>/dev/null)
lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
	    --suppress=missingIncludeSystem -Isrc -D_GNU_SOURCE src
	clang-tidy --quiet $(filter %.c,$(wildcard src/*/*.c)) -- $(BASE_CFLAGS) \
	    $(shell pkg-config --cflags $(PKGS))

format:
	clang-format -i $(ALL_C)

format-check:
	clang-format --dry-run --Werror $(ALL_C)

clean:
	rm -rf build build-san build-fuzz

-include $(shell find $(BUILD) build-fuzz -name '*.d' 2>/dev/null)
