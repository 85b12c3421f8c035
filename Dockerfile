# syntax=docker/dockerfile:1
# Multi-stage build of the cloudstack-ccm image.
#
#   docker build -t cloudstack-ccm:dev .
#
# The binary links glibc dynamically (rustls with ring, no OpenSSL), so the runtime image
# is distroless `cc` (glibc + libgcc, no shell), running as the `nonroot` user (65532).

FROM rust:1.95-bookworm AS builder
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
# Sources may embed files from examples/ (simulator scenarios) at compile time.
COPY examples ./examples
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release -p cloudstack-ccm --locked \
    && install -D -m 0755 target/release/cloudstack-ccm /out/cloudstack-ccm

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /out/cloudstack-ccm /usr/local/bin/cloudstack-ccm
USER nonroot:nonroot
# Health and metrics (plain HTTP): /healthz, /readyz, /metrics.
EXPOSE 10258
ENTRYPOINT ["/usr/local/bin/cloudstack-ccm"]
