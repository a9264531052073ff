// Package version is the release version of the binaries (the daemon,
// docker rdma): set at build time with
//
//	-ldflags "-X github.com/rdma-macvlan/rdma-macvlan/internal/version.version=v0.1.0"
//
// from `git describe` (the Makefile and scripts/plugin.sh do it), and the
// source commit with
//
//	-X github.com/rdma-macvlan/rdma-macvlan/internal/version.commit=$(git rev-parse HEAD)
package version

import "runtime/debug"

// version and commit are set by the linker; empty in a plain go build.
var version, commit string

// String is the version set at build time, else the module version and VCS
// revision Go recorded in the binary, else "dev".
func String() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "dev"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "+" + s.Value[:12]
		}
	}
	return v
}

// Commit is the source commit set at build time, else the VCS revision Go
// recorded in the binary, else "unknown".
func Commit() string {
	if commit != "" {
		return commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return "unknown"
}
