# syntax=docker/dockerfile:1
# flink-autoscale-coordinator: a static (musl) binary on distroless/static, running as uid 65532.
# The SQLite database lives in /var/lib/flink-autoscale-coordinator (mount a volume there), or
# point --database / FLINK_AUTOSCALE_COORDINATOR__DATABASE__URL at PostgreSQL.
# Build from the repository root:
#   docker build -f packaging/docker/coordinator.Dockerfile -t flink-autoscale-coordinator .
# The image's entrypoint is the binary; the default command runs the daemon on the config the
# Kubernetes manifest mounts at /etc/flink-autoscale/coordinator.toml.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-alpine AS build
# musl-dev and gcc: the C parts of dependencies (ring's assembly, bundled SQLite).
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
 && cargo build --release --locked --target "$target" -p flink-autoscale-coordinator --bin flink-autoscale-coordinator \
 && install -D -m 0755 "target/$target/release/flink-autoscale-coordinator" /out/flink-autoscale-coordinator \
 && mkdir -p /out/state

# distroless/static ships CA certificates, tzdata, /etc/passwd and the nonroot user (65532).
FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.title="flink-autoscale-coordinator" \
      org.opencontainers.image.description="Central gate approving Flink rescale proposals, with a durable audit" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/flink-autoscale-coordinator /usr/local/bin/flink-autoscale-coordinator
COPY packaging/coordinator.toml /etc/flink-autoscale/coordinator.toml
# The default database directory, writable by the non-root user even without a volume.
COPY --from=build --chown=65532:65532 /out/state /var/lib/flink-autoscale-coordinator
USER 65532:65532
EXPOSE 8470
ENTRYPOINT ["/usr/local/bin/flink-autoscale-coordinator"]
CMD ["run", "--config", "/etc/flink-autoscale/coordinator.toml", "--listen", "0.0.0.0:8470"]
