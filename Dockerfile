# The operator's image: the manager and lockwrap, static, on a distroless non-root base.
# Where no Docker engine or registry exists (CI, the local cluster), hack/cluster/images.sh
# builds the same image as a tarball with go-containerregistry and imports it into containerd.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/manager && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/lockwrap ./cmd/lockwrap

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/manager /manager
COPY --from=build /out/lockwrap /lockwrap
USER 65532:65532
ENTRYPOINT ["/manager"]
