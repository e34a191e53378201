# syncledger: build with Go 1.27.3, run on a slim Debian (a shell is kept for
# `docker compose` one-liners and for commands run by `syncledger exec`).
FROM golang:1.26 AS build
# The image's Go 1.26 fetches Go 1.27.3 from the Go module proxy and builds with
# it: the binaries carry its standard library, not one with vulnerabilities
# syncledger's code reaches (README, "Which Go").
ENV GOTOOLCHAIN=go1.27.3
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
# Two builds of one command: syncledger (every command; serve hands over to the
# server build beside it) and syncledger-server (the same CLI with the embedded
# nats-server and the Prometheus client linked in, which only serve and consume
# metrics need: README, "Two binaries"), both with the tags that leave out the GCS
# client's unused gRPC parts (README; BENCHMARKS.md, B11).
RUN CGO_ENABLED=0 go build -trimpath -tags disable_grpc_modules,grpcnotrace -ldflags="-s -w -X main.version=${VERSION}" -o /out/syncledger ./cmd/syncledger \
 && CGO_ENABLED=0 go build -trimpath -tags server,disable_grpc_modules,grpcnotrace -ldflags="-s -w -X main.version=${VERSION}" -o /out/syncledger-server ./cmd/syncledger \
 && mkdir -p /out/cache

FROM debian:trixie-slim
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/syncledger /out/syncledger-server /usr/local/bin/
RUN useradd --system --uid 10001 --home-dir /cache syncledger
COPY --from=build --chown=10001:10001 /out/cache /cache
USER 10001
WORKDIR /cache
ENV SYNCLEDGER_CACHE=/cache
ENTRYPOINT ["/usr/local/bin/syncledger"]
CMD ["--help"]
