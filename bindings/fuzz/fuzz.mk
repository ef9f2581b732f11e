# fuzz.mk - the libFuzzer targets (included by the Makefile): the KV-event
# decoder, the HTTP request parser and the line framing of streamed bodies.
#
#   make fuzz-events                 build build/fuzz/fuzz_events, fuzz for FUZZ_TIME s (10)
#   make fuzz-http                   build build/fuzz/fuzz_http, fuzz for FUZZ_TIME s
#   make fuzz-lines                  build build/fuzz/fuzz_lines, fuzz for FUZZ_TIME s
#   make fuzz-events FUZZ_TIME=600   longer
#
# libFuzzer comes with clang, so FUZZ_CC defaults to clang whatever CC is.  A
# run works on a copy of the target's seed corpus (bindings/fuzz/corpus/events,
# regenerated with bindings/fuzz/gen_corpus.lua, bindings/fuzz/corpus/http or
# bindings/fuzz/corpus/lines),
# so new inputs do not land in the tree; crashes are written to build/fuzz/.

FUZZ_CC     ?= clang
FUZZ_TIME   ?= 10
FUZZ_DIR    := $(BUILD)/fuzz
FUZZ_FLAGS  ?= -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
               -fno-sanitize-recover=undefined
FUZZ_COMPILE = $(FUZZ_CC) -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE $(FUZZ_FLAGS) -Ibindings
# The kv module and the engine files it uses (its buffers, classes and option checks).
FUZZ_KV_SRC := $(wildcard bindings/kv*.c) engine/buf.c engine/dialect.c engine/strict_options.c

LUA_CFLAGS     ?= $(shell pkg-config --cflags lua5.4 libuv)
LUA_LIBS       ?= $(shell pkg-config --libs lua5.4)
MSGPACK_CFLAGS ?= $(shell pkg-config --cflags msgpack)
MSGPACK_LIBS   ?= $(shell pkg-config --libs msgpack)
CRYPTO_CFLAGS  ?= $(shell pkg-config --cflags libcrypto)
CRYPTO_LIBS    ?= $(shell pkg-config --libs libcrypto)

.PHONY: fuzz-events fuzz-http fuzz-lines

$(FUZZ_DIR)/fuzz_events: bindings/fuzz/fuzz_events.c $(FUZZ_KV_SRC) bindings/kv.h engine/engine.h
	@mkdir -p $(FUZZ_DIR)
	$(FUZZ_COMPILE) -Iengine $(LUA_CFLAGS) $(MSGPACK_CFLAGS) $(CRYPTO_CFLAGS) -o $@ \
	  bindings/fuzz/fuzz_events.c $(FUZZ_KV_SRC) $(LUA_LIBS) $(MSGPACK_LIBS) $(CRYPTO_LIBS) -lm

# The HTTP target needs only bindings/http_parse.c and -lhttp_parser.
$(FUZZ_DIR)/fuzz_http: bindings/fuzz/fuzz_http.c bindings/http_parse.c bindings/http_parse.h
	@mkdir -p $(FUZZ_DIR)
	$(FUZZ_COMPILE) -o $@ bindings/fuzz/fuzz_http.c bindings/http_parse.c -lhttp_parser

# The line framing is pure: bindings/http_lines.c alone.
$(FUZZ_DIR)/fuzz_lines: bindings/fuzz/fuzz_lines.c bindings/http_lines.c bindings/http_lines.h
	@mkdir -p $(FUZZ_DIR)
	$(FUZZ_COMPILE) -o $@ bindings/fuzz/fuzz_lines.c bindings/http_lines.c

# $(call fuzz_run,NAME,MAX_LEN): build/fuzz/fuzz_NAME for FUZZ_TIME s, on a
# fresh copy of bindings/fuzz/corpus/NAME, inputs up to MAX_LEN bytes.
define fuzz_run
rm -rf $(FUZZ_DIR)/corpus-$(1)
mkdir -p $(FUZZ_DIR)/corpus-$(1)
cp bindings/fuzz/corpus/$(1)/* $(FUZZ_DIR)/corpus-$(1)/
$(FUZZ_DIR)/fuzz_$(1) -max_total_time=$(FUZZ_TIME) -max_len=$(2) -timeout=10 \
  -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus-$(1)
endef

fuzz-events: $(FUZZ_DIR)/fuzz_events
	$(call fuzz_run,events,4096)

fuzz-http: $(FUZZ_DIR)/fuzz_http
	$(call fuzz_run,http,8192)

fuzz-lines: $(FUZZ_DIR)/fuzz_lines
	$(call fuzz_run,lines,4096)
