# fuzz.mk - libFuzzer target for the KV-event decoder (included by the Makefile).
#
#   make fuzz-events                 build build/fuzz/fuzz_events, fuzz for FUZZ_TIME s
#   make fuzz-events FUZZ_TIME=600   longer
#
# libFuzzer comes with clang, so FUZZ_CC defaults to clang whatever CC is.  The
# run works on a copy of the seed corpus (bindings/fuzz/corpus/events, regenerate
# with bindings/fuzz/gen_corpus.lua), so new inputs do not land in the tree;
# crashes are written to build/fuzz/.

FUZZ_CC     ?= clang
FUZZ_TIME   ?= 10
FUZZ_DIR    := $(BUILD)/fuzz
FUZZ_FLAGS  ?= -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
               -fno-sanitize-recover=undefined
# The kv module and the engine files it uses (its buffers, classes and option checks).
FUZZ_KV_SRC := $(wildcard bindings/kv*.c) engine/buf.c engine/dialect.c engine/strict_options.c

LUA_CFLAGS     ?= $(shell pkg-config --cflags lua5.4 libuv)
LUA_LIBS       ?= $(shell pkg-config --libs lua5.4)
MSGPACK_CFLAGS ?= $(shell pkg-config --cflags msgpack)
MSGPACK_LIBS   ?= $(shell pkg-config --libs msgpack)
CRYPTO_CFLAGS  ?= $(shell pkg-config --cflags libcrypto)
CRYPTO_LIBS    ?= $(shell pkg-config --libs libcrypto)

.PHONY: fuzz-events

$(FUZZ_DIR)/fuzz_events: bindings/fuzz/fuzz_events.c $(FUZZ_KV_SRC) bindings/kv.h engine/engine.h
	@mkdir -p $(FUZZ_DIR)
	$(FUZZ_CC) -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE $(FUZZ_FLAGS) -Ibindings -Iengine \
	  $(LUA_CFLAGS) $(MSGPACK_CFLAGS) $(CRYPTO_CFLAGS) -o $@ bindings/fuzz/fuzz_events.c \
	  $(FUZZ_KV_SRC) $(LUA_LIBS) $(MSGPACK_LIBS) $(CRYPTO_LIBS) -lm

fuzz-events: $(FUZZ_DIR)/fuzz_events
	rm -rf $(FUZZ_DIR)/corpus-events
	mkdir -p $(FUZZ_DIR)/corpus-events
	cp bindings/fuzz/corpus/events/* $(FUZZ_DIR)/corpus-events/
	$(FUZZ_DIR)/fuzz_events -max_total_time=$(FUZZ_TIME) -max_len=4096 -timeout=10 \
	  -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus-events
