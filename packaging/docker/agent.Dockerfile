# syntax=docker/dockerfile:1
# flink-autoscale-agent: a static (musl) binary on distroless/static, running as uid 65532.
# Build from the repository root:
#   docker build -f packaging/docker/agent.Dockerfile -t flink-autoscale-agent .
# The image's entrypoint is the binary; the default command runs the daemon on the config the
# Kubernetes manifest mounts at /etc/flink-autoscale/agent.toml.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-alpine AS build
# musl-dev and gcc: for dependencies with C parts (none today; kept so a new one builds).
RUN apk add --no-cache musl-dev gcc
WORKDIR /src
# The whole workspace is needed to resolve it, even for one binary.
COPY Cargo.toml Cargo.lock ./
COPY agent agent
COPY core core
COPY coordinator coordinator
COPY shared shared
COPY simulator simulator
COPY tests tests
COPY testkit testkit
COPY demo demo
COPY whatif whatif
# On Alpine the musl target links statically by default; the target is named explicitly so
# build scripts and proc macros still run as host programs.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    target="$(uname -m)-unknown-linux-musl" \
 && cargo build --release --locked --target "$target" -p flink-autoscale-agent --bin flink-autoscale-agent \
 && install -D -m 0755 "target/$target/release/flink-autoscale-agent" /out/flink-autoscale-agent

# distroless/static ships CA certificates, tzdata, /etc/passwd and the nonroot user (65532).
FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.title="flink-autoscale-agent" \
      org.opencontainers.image.description="Sidecar that rescales Flink jobs with coordinator approval" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/flink-autoscale-agent /usr/local/bin/flink-autoscale-agent
COPY packaging/agent.toml /etc/flink-autoscale/agent.toml
USER 65532:65532
EXPOSE 9249
ENTRYPOINT ["/usr/local/bin/flink-autoscale-agent"]
CMD ["run", "--config", "/etc/flink-autoscale/agent.toml", "--listen", "0.0.0.0:9249"]
