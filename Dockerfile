# kubemedic's container image: a static binary on distroless/static, running as non-root.
#
#   docker build -t ghcr.io/kubemedic/kubemedic:0.1.0 .
#
# Not built or tested on the project's machines (they have no container runtime and reach no
# image registry); it is written to be checked the first time it is built somewhere that can.
#
# Stage 1 compiles for x86_64-unknown-linux-musl: a fully static executable (musl libc linked
# in), so the final image needs no libc at all. Everything kubemedic links is Rust or vendored
# C that builds with musl-gcc: TLS is rustls with ring (no OpenSSL), SQLite is sqlx's bundled
# copy. musl's allocator is slower than glibc's under many threads, and the figures in
# docs/benchmarks.md were measured with a glibc build: measure a musl build before relying on
# them for a storm (mimalloc, tried in place of glibc's, doubled the RSS and was not kept).
# The toolchain is the one rust-toolchain.toml pins (rustup reads it during the build).
FROM docker.io/library/rust:1.95-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends musl-tools \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN rustup target add x86_64-unknown-linux-musl \
    && cargo build --release --locked --target x86_64-unknown-linux-musl --bin kubemedic \
    && cp target/x86_64-unknown-linux-musl/release/kubemedic /kubemedic \
    # Fail the build if anything made the binary dynamic.
    && if ldd /kubemedic 2>/dev/null | grep -q '=>'; then echo "kubemedic is not static" >&2; exit 1; fi

# Stage 2: distroless/static has CA certificates, /etc/passwd with `nonroot` (65532) and tzdata,
# and nothing else: no shell, no package manager. The policy, workflow catalog and playbooks
# are compiled into the binary; the Helm chart mounts overrides from ConfigMaps.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /kubemedic /usr/local/bin/kubemedic
# The licence and the notices of every crate the binary links and of gitleaks' rules it embeds
# (scripts/licenses keeps THIRD-PARTY-NOTICES.md current; CI fails when it is stale).
COPY LICENSE THIRD-PARTY-NOTICES.md /usr/share/doc/kubemedic/
LABEL org.opencontainers.image.licenses="Apache-2.0"
# The state directory (SQLite file, audit key when none is given): a volume in the chart.
WORKDIR /var/lib/kubemedic
ENV KUBEMEDIC_DATA_DIR=/var/lib/kubemedic \
    KUBEMEDIC_LISTEN=0.0.0.0:8080 \
    KUBEMEDIC_LOG_FORMAT=json
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/kubemedic"]
CMD ["serve"]
