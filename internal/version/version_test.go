package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	for _, c := range []struct {
		main, rev, want string
	}{
		{"(devel)", "", "dev"},
		{"", "0123456789abcdef", "dev+0123456789ab"},
		{"v0.1.0", "0123456789abcdef", "v0.1.0+0123456789ab"},
		{"v0.1.0", "short", "v0.1.0"},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Version: c.main}}
		if c.rev != "" {
			bi.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: c.rev}}
		}
		if got := fromBuildInfo(bi); got != c.want {
			t.Errorf("main %q rev %q: %q, want %q", c.main, c.rev, got, c.want)
		}
	}
}

func TestLinkerValueWins(t *testing.T) {
	old := version
	defer func() { version = old }()
	version = "v9.9.9"
	if got := String(); got != "v9.9.9" {
		t.Fatalf("String() = %q with the linker's value v9.9.9", got)
	}
}
