# http.mk - libFuzzer target for the HTTP request parser (included by the Makefile).
#
#   make fuzz-http                 build build/fuzz/fuzz_http, fuzz for FUZZ_TIME s (10)
#   make fuzz-http FUZZ_TIME=600   longer
#
# The target needs only bindings/http_parse.c and -lhttp_parser.  The run
# works on a copy of the seed corpus (bindings/fuzz/corpus/http), so new
# inputs do not land in the tree; crashes are written to build/fuzz/.

FUZZ_CC    ?= clang
FUZZ_TIME  ?= 10
FUZZ_FLAGS ?= -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=undefined
HTTP_FUZZ_DIR := $(BUILD)/fuzz

.PHONY: fuzz-http

$(HTTP_FUZZ_DIR)/fuzz_http: bindings/fuzz/fuzz_http.c bindings/http_parse.c bindings/http_parse.h
	@mkdir -p $(HTTP_FUZZ_DIR)
	$(FUZZ_CC) -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE $(FUZZ_FLAGS) -Ibindings -o $@ \
	  bindings/fuzz/fuzz_http.c bindings/http_parse.c -lhttp_parser

fuzz-http: $(HTTP_FUZZ_DIR)/fuzz_http
	rm -rf $(HTTP_FUZZ_DIR)/corpus-http
	mkdir -p $(HTTP_FUZZ_DIR)/corpus-http
	cp bindings/fuzz/corpus/http/* $(HTTP_FUZZ_DIR)/corpus-http/
	$(HTTP_FUZZ_DIR)/fuzz_http -max_total_time=$(FUZZ_TIME) -max_len=8192 -timeout=10 \
	  -artifact_prefix=$(HTTP_FUZZ_DIR)/ $(HTTP_FUZZ_DIR)/corpus-http
