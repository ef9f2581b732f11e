# The bridge image of the kind target (docs/kind.md): kvengine built from
# this repository with Debian's packages, running `kvengine serve
# fixtures/bridge.lua`, the ZMQ bridge between llm-d-inference-sim and
# Kthena's runtime in every backend pod (or, in publisher mode, `kvengine
# serve fixtures/publisher.lua`, the vLLM-shaped publisher the runtime
# connects to). ci/kind/up.sh builds it as kvengine-bridge:dev and loads it
# into the Kind cluster:
#
#   docker build -t kvengine-bridge:dev .
#
# procps provides `kill`: the kind driver restarts a pod's containers in
# place by signalling every process of the pod from this container.

FROM debian:bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential pkg-config \
      liblua5.4-dev libuv1-dev libzmq3-dev libhiredis-dev libcurl4-openssl-dev \
      libmsgpack-dev libssl-dev libhttp-parser-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile ./
COPY ci/embed.sh ci/embed.sh
COPY engine engine
COPY bindings bindings
COPY fixtures fixtures
RUN make -j"$(nproc)" all && make install PREFIX=/usr/local DESTDIR=/out

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      liblua5.4-0 libuv1 libzmq5 libhiredis0.14 libcurl4 libmsgpackc2 libssl3 \
      libhttp-parser2.9 lua-cjson lua-yaml procps \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/usr/local /usr/local
# bridge: input (the sim's publisher connects), output (the runtime connects),
# admin HTTP; publisher mode: input 5556, its PUB 5557, admin 5559
EXPOSE 5556 5557 5558 5559
ENTRYPOINT ["kvengine", "serve", "/usr/local/share/kvengine/fixtures/bridge.lua"]
CMD ["--listen", "tcp://0.0.0.0:5557", "--publish", "tcp://127.0.0.1:5558", "--admin", "0.0.0.0:5559"]
