# shellcheck shell=bash
# Generated from internal/engines/engines.go by go generate ./internal/engines: do not edit.
# shellcheck disable=SC2034 # the scripts that source it read them
#
# The engines, oldest first, as scripts/engines.sh, scripts/dockerd.sh, scripts/check.sh and the
# e2e harness name them. make check runs the oldest, the middle and the newest; an on-demand engine
# runs with make e2e-NAME (scripts/lib/engines.mk). Per engine: its Docker major version (moby v2
# is 29), how scripts/engines.sh gets it (debian: apt; docker-source: a docker/docker release built
# with its vendor.mod; moby-source: go install of a module), the module and version built and the
# variable that overrides the version. Only what a script reads is here.
ENGINE_NAMES=(debian v27 v28 current)
ENGINE_OLDEST=debian
ENGINE_NEWEST=current
ENGINE_MIDDLE=(v28)
declare -A ENGINE_MAJOR=([debian]=20 [v27]=27 [v28]=28 [current]=29)
declare -A ENGINE_BUILD=([debian]=debian [v27]=docker-source [v28]=docker-source [current]=moby-source)
declare -A ENGINE_MODULE=([debian]="" [v27]=github.com/docker/docker [v28]=github.com/docker/docker [current]=github.com/moby/moby/v2)
declare -A ENGINE_VERSION=([debian]="" [v27]=v27.5.1 [v28]=v28.5.2 [current]=v2.0.0-beta.24)
declare -A ENGINE_VERSION_ENV=([debian]="" [v27]=DOCKER27_VERSION [v28]=DOCKER28_VERSION [current]=MOBY_VERSION)
