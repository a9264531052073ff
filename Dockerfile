# The release binaries of one architecture, and the licences of what they link, built with Docker
# alone (no Go on the host): scripts/release.sh and scripts/plugin.sh use it when the host has no
# Go or with BUILD=docker (make release BUILD=docker, make plugin BUILD=docker). It uses nothing
# the classic builder lacks; make e2e-release runs it with Docker 20.10's classic builder (BuildKit
# and the golang:1.26.8 image it names are not tried here: the tests cannot pull).
#
#   docker build --build-arg GOARCH=arm64 --build-arg VERSION=v1.2.3 --build-arg COMMIT=$(git rev-parse HEAD) .
#
# The result is an image with the files scripts/build.sh writes, at its root: the same bytes as a
# build with the host's Go of the same version (the e2e compares them).
ARG GO_IMAGE=golang:1.26.8
FROM ${GO_IMAGE} AS build
ARG GOARCH=amd64
ARG VERSION=dev
ARG COMMIT=unknown
# Where modules come from: the image's default (proxy.golang.org) unless given.
ARG GOPROXY
ARG GOSUMDB
ARG GOFLAGS
WORKDIR /src
COPY . .
RUN GOARCH=${GOARCH} VERSION=${VERSION} COMMIT=${COMMIT} sh scripts/build.sh /out

FROM scratch
COPY --from=build /out/ /
