# Build: make docker-build IMG=registry.example/webapp-operator:v0.1.0
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum hack/image-deps.txt ./
# The dependencies compile in a layer of their own (the list comes from `make generate`), so a change to the
# operator's code rebuilds only its own packages.
RUN go mod download && CGO_ENABLED=0 GOOS=linux go build -trimpath -tags=fieldsv1string $(cat image-deps.txt)
COPY main.go ./
COPY apis/ apis/
COPY applyconfig/ applyconfig/
COPY controller/ controller/
COPY conversion/ conversion/
# fieldsv1string: apimachinery keeps each managedFields entry's field set interned (unique.Handle), so the cached
# objects of one shape share one copy of it instead of one each (see docs/scale.md).
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -tags=fieldsv1string -ldflags="-s -w" -o /manager .

# Static binary on distroless: no shell, no package manager, runs as uid 65532.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
