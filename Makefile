# kvengine: build, test, benchmark and install.
#
#   make              build build/kvengine
#   make test         everything the project tests (installs missing deps first)
#   make e2e-kvcache  the KV-cache routing suite, with a JUnit file and an HTML report
#   make e2e-kvcache-kthena  the suite on Kthena's real router and sim, no cluster (docs/targets.md)
#   make e2e-kvcache-llmd  the suite on llm-d's KV-cache indexer and the real sim (docs/llmd.md)
#   make e2e-kvcache-kind  the suite on a Kind cluster with the real Kthena (docs/kind.md)
#   make e2e-kvcache-smg  the suite on SGLang's gateway from PyPI, no KV events (docs/smg.md)
#   make e2e-kvcache-dynamo  the suite on Dynamo's selection service from PyPI (docs/dynamo.md)
#   make cluster-node-build  the cluster target's node, kvengine-node (docs/cluster-node.md)
#   make cluster-build  the cluster target's control plane and helm, from Go modules (docs/cluster.md)
#   make e2e-kvcache-cluster  the suite on Kthena's Helm chart on a local control plane (docs/cluster-target.md)
#   make cluster-breaks  three breaks of a Kthena checkout only a deployment shows (docs/cluster-target.md)
#   make cluster-causes  the suite on the cluster target held to the installed Kthena's known causes
#   make asan         the tests under ASan/UBSan (build-asan/kvengine)
#   make lint         clang-format check, cppcheck, actionlint over .github/workflows
#   make types        the editor types (types/) against the running engine
#   make html-check   the HTML report as headless Chromium renders it (installs Chromium)
#   make bench        benchmarks, printed beside their references
#   make scale-scenarios  the scale scenarios (scenarios/scale/, docs/bench.md)
#   make conformance  the suite on local and kthena, differences explained or failed
#   make scoreboard   the suite on every router that builds here, side by side (docs/scoreboard.md)
#   make soak         everything `make test` runs, 20 times in a row (ci/soak.sh)
#   make mutation     the mutation catalogue against the suite (docs/mutation.md);
#                     MUTATION_ARGS="-j 2 FILTER-1 lora-filter-removed" for a subset
#   make install      PREFIX=/usr/local DESTDIR=

PREFIX  ?= /usr/local
DESTDIR ?=
BUILD   ?= build
SAN     ?=

# Every library is found with pkg-config; http_parser ships no .pc file.
# The binary links only what the engine itself needs; each binding is a Lua
# C module (build/lib/<name>.so, loaded by `require`) linked with its own
# library, so a file that needs no HTTP does not pay for loading libcurl.
ENGINE_PKGS := lua5.4 libuv
PKGS        := $(ENGINE_PKGS) libzmq hiredis libcurl msgpack libcrypto
PLAIN_LIBS  := http_parser

LIBS_http  := $(shell pkg-config --libs libcurl libcrypto 2>/dev/null) -lhttp_parser
LIBS_zmq   := $(shell pkg-config --libs libzmq 2>/dev/null)
LIBS_redis := $(shell pkg-config --libs hiredis 2>/dev/null)
LIBS_kv    := $(shell pkg-config --libs msgpack libcrypto 2>/dev/null)
LIBS_proc  :=

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)

CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -Iengine -Ibindings $(PKG_CFLAGS)
LDFLAGS += -rdynamic
LDLIBS  += $(shell pkg-config --libs $(ENGINE_PKGS) 2>/dev/null) -lm

ifneq ($(SAN),)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif

ENGINE_SRC := $(wildcard engine/*.c)
LUA_SRC    := $(sort $(wildcard engine/lua/*.lua))
ENGINE_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(ENGINE_SRC)) $(BUILD)/obj/gen/embedded.o

# A module is bindings/<name>.c (the one that defines luaopen_<name>) plus
# its bindings/<name>_*.c.
MODULES := $(sort $(patsubst bindings/%.c,%,$(shell grep -l '^int luaopen_' bindings/*.c)))
MODULE_SO := $(patsubst %,$(BUILD)/lib/%.so,$(MODULES))

KVENGINE := $(BUILD)/kvengine
TEST_PATHS = $(wildcard engine/tests bindings/tests fixtures/tests scenarios)
SUITE := 'scenarios/*.lua'

.PHONY: FORCE all test conformance e2e-kvcache e2e-kvcache-kthena kthena-build kthena-test e2e-kvcache-kind asan \
  smg-build e2e-kvcache-smg dynamo-build e2e-kvcache-dynamo \
  cluster-node-build cluster-node-test llmd-build llmd-test e2e-kvcache-llmd cluster-build cluster-kthena-build e2e-kvcache-cluster cluster-breaks cluster-causes \
  valgrind lint types bench scale-scenarios install deps clean soak mutation html-check scoreboard

all: $(KVENGINE) $(MODULE_SO)

$(KVENGINE): $(ENGINE_OBJ)
	$(CC) $(LDFLAGS) -o $@ $(ENGINE_OBJ) $(LDLIBS)

# Objects depend on the flags they were built with, so that a build dir
# never mixes, say, sanitized and plain objects.
$(BUILD)/flags: FORCE
	@mkdir -p $(BUILD)
	@echo '$(CC) $(CFLAGS) $(LDFLAGS)' | cmp -s - $@ || echo '$(CC) $(CFLAGS) $(LDFLAGS)' > $@

FORCE:

$(BUILD)/obj/engine/%.o: engine/%.c $(wildcard engine/*.h) $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/obj/bindings/%.o: bindings/%.c engine/engine.h $(wildcard bindings/*.h) $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -c -o $@ $<

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

define module_rule
$(BUILD)/lib/$(1).so: $(patsubst %.c,$(BUILD)/obj/%.o,bindings/$(1).c $(wildcard bindings/$(1)_*.c))
	@mkdir -p $$(dir $$@)
	$$(CC) -shared $$(filter -fsanitize%,$$(LDFLAGS)) -o $$@ $$^ $$(LIBS_$(1))
endef
$(foreach m,$(MODULES),$(eval $(call module_rule,$(m))))

# The Lua half of the engine ships inside the binary, as Lua bytecode:
# every process loads its modules at start, and undumping a chunk costs a
# tenth of compiling its source (`make bench`, engine start).  luac5.4 ships
# with lua5.4, the same release as the library the engine links; the chunks
# keep their debug information, so errors and tracebacks still name
# engine/lua/<module>.lua and its lines.  Without luac5.4 the sources
# themselves are embedded (luaL_loadbuffer takes either).
LUAC     ?= $(shell command -v luac5.4 2>/dev/null)
LUA_EMBED = $(if $(LUAC),$(patsubst engine/lua/%,$(BUILD)/luac/%,$(LUA_SRC)),$(LUA_SRC))

# A compiled chunk keeps its module's name (ci/embed.sh names each by its file).
$(BUILD)/luac/%.lua: engine/lua/%.lua
	@mkdir -p $(dir $@)
	$(LUAC) -o $@ $<

$(BUILD)/gen/embedded.c: $(LUA_EMBED) ci/embed.sh
	@mkdir -p $(dir $@)
	sh ci/embed.sh $(LUA_EMBED) > $@

# Installs the Debian packages when a library or tool is missing.
deps:
	@ok=1; for p in $(PKGS); do pkg-config --exists $$p || ok=0; done; \
	for l in $(PLAIN_LIBS); do echo 'int main(void){return 0;}' | \
	  $(CC) -x c - -o /dev/null -l$$l 2>/dev/null || ok=0; done; \
	for t in redis-server xmllint openssl ip; do command -v $$t >/dev/null || ok=0; done; \
	/usr/bin/python3 -c 'import zmq, msgpack' 2>/dev/null || ok=0; \
	python3 -c 'import venv, ensurepip' 2>/dev/null || ok=0; \
	lua5.4 -e 'require("cjson"); require("yaml")' 2>/dev/null || ok=0; \
	echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return d && n; }' | \
	  clang -x c - -fsanitize=fuzzer,address -o /dev/null 2>/dev/null || ok=0; \
	[ $$ok = 1 ] || bash ci/install-deps.sh

FUZZ_TARGETS = $(BUILD)/fuzz/fuzz_events $(BUILD)/fuzz/fuzz_http $(BUILD)/fuzz/fuzz_lines

# With Go on PATH the kthena target's programs and the cluster target's
# control plane are built first, so their tests run (fixtures/tests/kthena_*.lua,
# cluster_*.lua); without Go they are skipped, saying why, and so are the
# cluster's when its build could not reach the module proxy (exit 3).
# -j 2, not the default 4 per core: besides the scenarios, the tests time
# their own stacks and fakes (fixtures/tests/kvcache.lua's start in about a
# second, stack_kind.lua's namespace still terminating), and 8 workers on 2
# shared cores failed two of them under load where -j 2 passed.
test: deps
	@$(MAKE) --no-print-directory all $(FUZZ_TARGETS)
	@if command -v go >/dev/null 2>&1; then deploy=0; \
	  if [ "$$(id -u)" = 0 ]; then deploy=1; else echo "make test: not root: the cluster target's tests are" \
	    "skipped (its node needs network namespaces and mounts)"; fi; \
	  $(MAKE) --no-print-directory kthena-build kthena-test llmd-build llmd-test KTHENA_DEPLOY=$$deploy \
	  KTHENA_RUNTIME="$(or $(KTHENA_RUNTIME),local)" && { sh ci/cluster/build.sh || [ $$? = 3 ]; } && \
	  $(MAKE) --no-print-directory cluster-node-build cluster-node-test; \
	else echo "make test: no Go on PATH: the kthena, llmd and cluster targets' tests are skipped (install Go, see" \
	  "fixtures/kthena/go.mod)"; fi
	@sh ci/smg/build.sh || echo "make test: the smg target's virtualenv could not be made (above): its tests are skipped"
	@sh ci/dynamo/build.sh || echo "make test: the dynamo target's virtualenv could not be made (above): its tests are skipped"
	KTHENA_RUNTIME="$(or $(KTHENA_RUNTIME),local)" KVENGINE_FUZZ_DIR=$(BUILD)/fuzz $(KVENGINE) -j 2 \
	  --junit $(BUILD)/junit.xml $(TEST_PATHS)

# The engine's default parallelism (4 workers per core, longest file first):
# a scenario file mostly waits on its stack's processes and on Kthena's own
# time budgets, so on 2 idle cores the suite ends in about the time of its
# longest file, tokenizer_failure.lua (13 s), where -j 2 took 33 s.
e2e-kvcache: deps
	@$(MAKE) --no-print-directory all
	$(KVENGINE) --junit $(BUILD)/e2e-kvcache.xml --html $(BUILD)/e2e-kvcache.html $(SUITE)

# The kthena target's programs (ci/kthena/build.sh: needs Go): Kthena's router
# as pinned in fixtures/kthena/go.mod, or built from KTHENA_DIR (a checkout)
# or KTHENA_VERSION (a release the Go module proxy serves).
KTHENA_DIR ?=
KTHENA_VERSION ?=
KTHENA_RUNTIME ?=
KTHENA_DEPLOY ?= 0
kthena-build:
	KTHENA_DIR="$(KTHENA_DIR)" KTHENA_VERSION="$(KTHENA_VERSION)" KTHENA_RUNTIME="$(KTHENA_RUNTIME)" \
	  KTHENA_DEPLOY="$(KTHENA_DEPLOY)" sh ci/kthena/build.sh

# The cluster target's control plane (ci/cluster/build.sh: needs Go):
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy,
# kubectl and helm into build/cluster/bin, at the versions the go.mod files
# of fixtures/cluster/{kube,etcd,helm} pin.
cluster-build:
	sh ci/cluster/build.sh

# The cluster target's Kthena: the kthena target's programs and Kthena's own
# kthena-router and kthena-controller-manager commands (KTHENA_DEPLOY=1),
# which the node runs for the chart's images (fixtures/cluster/images.lua).
cluster-kthena-build:
	KTHENA_DIR="$(KTHENA_DIR)" KTHENA_VERSION="$(KTHENA_VERSION)" KTHENA_RUNTIME="$(KTHENA_RUNTIME)" \
	  KTHENA_DEPLOY=1 sh ci/kthena/build.sh

# The suite on Kthena installed by its own Helm chart on a control plane of
# local processes (docs/cluster-target.md): everything built, the cluster
# brought up outside the suite (fixtures/cluster/up.lua), the suite run one
# file at a time, the cluster stopped whatever happened (ci/cluster/run.sh).
# Needs Go and root. CLUSTER_SUITE: paths or globs, space-separated.
CLUSTER_SUITE ?= scenarios/*.lua
e2e-kvcache-cluster: deps
	@$(MAKE) --no-print-directory all cluster-build cluster-node-build cluster-kthena-build
	KTHENA_DIR="$(KTHENA_DIR)" KTHENA_RUNTIME="$(KTHENA_RUNTIME)" KVENGINE=$(KVENGINE) SUITE='$(CLUSTER_SUITE)' \
	  JUNIT=$(BUILD)/e2e-kvcache-cluster.xml RECORD=$(BUILD)/cluster/last-suite.txt sh ci/cluster/run.sh

# Three breaks of a Kthena checkout that only a deployment shows, each
# passing on the kthena target and failing on the cluster target, naming
# the link (ci/cluster/breaks.lua, docs/cluster-target.md). Needs Go, root
# and KTHENA_DIR (a checkout whose cache tests pass).
cluster-breaks: deps
	@$(MAKE) --no-print-directory all cluster-build cluster-node-build
	KTHENA_DIR="$(KTHENA_DIR)" $(KVENGINE) --timeout 3600 ci/cluster/breaks.lua

# The whole suite on the cluster target, its outcomes held to the known
# causes of the Kthena installed (ci/cluster/causes.lua): on v1.0.0 each
# cache test fails naming its cause and nothing else fails.
cluster-causes: deps
	@$(MAKE) --no-print-directory all cluster-build cluster-node-build cluster-kthena-build
	CLUSTER_SUITE='$(CLUSTER_SUITE)' KTHENA_DIR="$(KTHENA_DIR)" $(KVENGINE) --timeout 7200 ci/cluster/causes.lua

# The router harness's own Go tests (against the pinned Kthena), and go vet.
kthena-test:
	cd fixtures/kthena && GOTOOLCHAIN=local go vet ./... && GOTOOLCHAIN=local go test ./...

# The cluster target's node, kvengine-node (ci/cluster/node-build.sh: needs
# Go), and its Go tests; those of a pod's namespaces run as root only.
cluster-node-build:
	sh ci/cluster/node-build.sh

cluster-node-test:
	cd fixtures/cluster/node && GOTOOLCHAIN=local CGO_ENABLED=0 go vet ./... && \
	  GOTOOLCHAIN=local CGO_ENABLED=0 go test ./...

# The suite against Kthena's real router and llm-d-inference-sim as local
# processes (docs/targets.md), one file at a time: the real router is heavier.
e2e-kvcache-kthena: deps
	@$(MAKE) --no-print-directory all kthena-build
	KTHENA_DIR="$(KTHENA_DIR)" KTHENA_VERSION="$(KTHENA_VERSION)" KTHENA_RUNTIME="$(KTHENA_RUNTIME)" \
	  $(KVENGINE) --target kthena -j 1 --junit $(BUILD)/e2e-kvcache-kthena.xml $(SUITE)

# The smg target's virtualenv (ci/smg/build.sh: python3 and PyPI): SGLang's
# gateway at the version ci/smg/requirements.txt pins.
smg-build:
	sh ci/smg/build.sh

# The dynamo target's virtualenv (ci/dynamo/build.sh: python3 and PyPI):
# Dynamo's selection service at the version ci/dynamo/requirements.txt pins.
dynamo-build:
	sh ci/dynamo/build.sh

# The llmd target's router (docs/llmd.md): llm-d's KV-cache indexer in the
# project's program, pinned in fixtures/llmd/go.mod; its engines are the
# kthena target's (kthena-build).
llmd-build:
	sh ci/llmd/build.sh

llmd-test:
	cd fixtures/llmd && GOTOOLCHAIN=local go vet ./... && GOTOOLCHAIN=local go test ./...

# The suite on a peer router (docs/smg.md, docs/dynamo.md, docs/llmd.md): its
# toolchain built (llmd's engines are the kthena target's programs), the run
# written as TAP and held to fixtures/expect/<target>.lua by ci/expected.lua,
# which sets the exit status: a failure listed under its cause is a finding,
# not a red run.
e2e-kvcache-smg e2e-kvcache-dynamo e2e-kvcache-llmd: e2e-kvcache-%: deps
	@$(MAKE) --no-print-directory all $*-build $(if $(filter llmd,$*),kthena-build KTHENA_RUNTIME=local)
	$(KVENGINE) --target $* -j 2 --tap --junit $(BUILD)/e2e-kvcache-$*.xml $(SUITE) | tee $(BUILD)/e2e-kvcache-$*.tap
	$(KVENGINE) serve ci/expected.lua $* $(BUILD)/e2e-kvcache-$*.tap

# The suite against Kthena on a Kind cluster (docs/kind.md): needs Docker, kind,
# kubectl and helm 3 (ci/kind/versions.env); creates the cluster when missing,
# keeps it unless KIND_DELETE=1. KIND_SUITE: paths or globs, space-separated.
KIND_SUITE ?= scenarios/*.lua
e2e-kvcache-kind: deps
	@$(MAKE) --no-print-directory all
	KVENGINE=$(KVENGINE) SUITE='$(KIND_SUITE)' JUNIT=$(BUILD)/e2e-kvcache-kind.xml sh ci/kind/run.sh

asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan SAN=1 all
	ASAN_OPTIONS=detect_leaks=1 build-asan/kvengine -j 2 --timeout 120 $(TEST_PATHS)

# valgrind over the engine's own tests: no leaks, no invalid accesses.
valgrind: all
	sh ci/valgrind.sh $(KVENGINE)

lint:
	clang-format --dry-run --Werror engine/*.c engine/*.h bindings/*.c bindings/fuzz/*.c $(wildcard bindings/*.h)
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
	  --inline-suppr --std=c11 -D_GNU_SOURCE -Iengine engine bindings
	sh ci/actionlint.sh $(BUILD)/tools
	@if command -v gofmt >/dev/null 2>&1; then \
	  out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt would change: $$out"; exit 1; }; \
	else echo "lint: no gofmt on PATH: the Go files were not checked"; fi

# The annotation test (also part of `make test`), and the Lua language
# server's own check of the annotation files where lua-language-server is
# installed: no Debian or npm package provides it, so it is never fetched.
types: all
	$(KVENGINE) fixtures/tests/types.lua
	@if command -v lua-language-server >/dev/null 2>&1; then \
	  lua-language-server --check=$(CURDIR)/types --checklevel=Warning; \
	else echo "lua-language-server is not installed: its check of types/ skipped"; fi

# The HTML report of a run with a failure, rendered by headless Chromium and
# checked against the run (ci/html-check/check.lua). Chromium and ImageMagick
# are installed when missing; `make test` needs neither.
# HTML_CHECK_SCREENSHOT=docs/img/report.png also refreshes the docs' picture.
html-check: deps
	@command -v chromium >/dev/null && command -v identify >/dev/null || bash ci/html-check/install.sh
	@$(MAKE) --no-print-directory all
	HTML_CHECK_DIR=$(BUILD)/html-check HTML_CHECK_SCREENSHOT=$(HTML_CHECK_SCREENSHOT) \
	  $(KVENGINE) --timeout 120 ci/html-check/check.lua

bench: all
	sh ci/bench.sh $(KVENGINE)

# Scenarios at scale, outside the suite's glob (docs/bench.md); one file at a
# time: each stack takes most of a small machine.
scale-scenarios: all
	$(KVENGINE) -j 1 'scenarios/scale/*.lua'

# The suite on two targets, outcomes and decisions side by side (ci/conformance/run.lua).
# The kthena target runs the project's runtime unless KTHENA_RUNTIME says
# otherwise: the comparison is of the routers, and it reads what each target
# lacks from the target module's capabilities table, which a started driver
# running Kthena's runtime narrows.
CONFORMANCE_TARGETS ?= local,kthena
conformance: all
	@case ",$(CONFORMANCE_TARGETS)," in *,kthena,*) $(MAKE) --no-print-directory kthena-build \
	  KTHENA_RUNTIME="$(or $(KTHENA_RUNTIME),local)";; esac
	KTHENA_DIR="$(KTHENA_DIR)" KTHENA_VERSION="$(KTHENA_VERSION)" KTHENA_RUNTIME="$(or $(KTHENA_RUNTIME),local)" \
	  $(KVENGINE) serve ci/conformance/run.lua --targets $(CONFORMANCE_TARGETS) $(SUITE)

# The suite on every router that builds here, a table per scenario file, the
# routing-quality figures and the added latency per router, and the same in
# build/scoreboard/scoreboard.html, read back in Chromium as html-check does
# (ci/scoreboard/run.lua, docs/scoreboard.md). Kthena: the pinned release in
# build/kthena and, with KTHENA_DIR, that checkout in KTHENA_MAIN_BIN (built
# unless up to date). A router that cannot run is listed with why.
KTHENA_MAIN_BIN ?= $(BUILD)/kthena-main
scoreboard: deps
	@command -v chromium >/dev/null && command -v identify >/dev/null || bash ci/html-check/install.sh
	@$(MAKE) --no-print-directory all
	@if command -v go >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory kthena-build KTHENA_DIR= KTHENA_VERSION= KTHENA_RUNTIME=local; \
	  if [ -n "$(KTHENA_DIR)" ]; then KTHENA_DIR="$(KTHENA_DIR)" KTHENA_OUT="$(KTHENA_MAIN_BIN)" KTHENA_RUNTIME=local \
	    sh ci/kthena/build.sh --check || KTHENA_DIR="$(KTHENA_DIR)" KTHENA_OUT="$(KTHENA_MAIN_BIN)" \
	    KTHENA_RUNTIME=local sh ci/kthena/build.sh; fi; \
	else echo "make scoreboard: no Go on PATH: the kthena routers are listed as missing"; fi
	KTHENA_DIR="$(KTHENA_DIR)" KVENGINE_KTHENA_MAIN_BIN="$(KTHENA_MAIN_BIN)" $(KVENGINE) serve ci/scoreboard/run.lua \
	  --out $(BUILD)/scoreboard $(SUITE)
	SCOREBOARD_DIR=$(BUILD)/scoreboard $(KVENGINE) --timeout 120 ci/scoreboard/html_check.lua

# What `make test` runs, 20 consecutive times; a failing run's log is kept.
soak: deps
	@$(MAKE) --no-print-directory all $(FUZZ_TARGETS)
	@if command -v go >/dev/null 2>&1; then $(MAKE) --no-print-directory kthena-build; fi
	KVENGINE_FUZZ_DIR=$(BUILD)/fuzz sh ci/soak.sh $(KVENGINE) $(TEST_PATHS)

# Every mutant of ci/mutation/catalogue.lua must fail a test (docs/mutation.md);
# TARGET=kthena KTHENA_DIR=<checkout>: those of ci/mutation/kthena.lua, made
# of a copy of that checkout's router source and run on the kthena target.
MUTATION_ARGS ?=
TARGET ?=
mutation: all
	KTHENA_DIR="$(KTHENA_DIR)" KTHENA_RUNTIME="$(or $(KTHENA_RUNTIME),local)" \
	  $(KVENGINE) serve ci/mutation/run.lua $(if $(TARGET),--target $(TARGET)) $(MUTATION_ARGS)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/kvengine $(DESTDIR)$(PREFIX)/share/kvengine
	install -m 755 $(KVENGINE) $(DESTDIR)$(PREFIX)/bin/kvengine
	install -m 644 $(MODULE_SO) $(DESTDIR)$(PREFIX)/lib/kvengine/
	cp -R fixtures $(DESTDIR)$(PREFIX)/share/kvengine/

clean:
	rm -rf build build-asan

-include $(wildcard bindings/*/*.mk)
