package rdma_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

func TestNetnsMode(t *testing.T) {
	errNetlink := errors.New("netlink: operation not supported")
	shared := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	exclusive := rdmatest.MLX5(t, rdmatest.MLX5Options{NetnsMode: "exclusive"})
	garbage := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	if err := os.WriteFile(filepath.Join(garbage, "sys/module/ib_core/parameters/netns_mode"), []byte("X\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	answer := func(mode string, err error) func() (string, error) {
		return func() (string, error) { return mode, err }
	}
	tests := []struct {
		name       string
		netlink    func() (string, error)
		root       string
		wantMode   string
		wantSource string
		wantErr    []error
	}{
		{name: "netlink shared wins over sysfs", netlink: answer("shared", nil), root: exclusive, wantMode: "shared", wantSource: "netlink"},
		{name: "netlink exclusive", netlink: answer("exclusive", nil), root: shared, wantMode: "exclusive", wantSource: "netlink"},
		{name: "netlink fails, sysfs Y", netlink: answer("", errNetlink), root: shared, wantMode: "shared", wantSource: "sysfs"},
		{name: "netlink fails, sysfs N", netlink: answer("", errNetlink), root: exclusive, wantMode: "exclusive", wantSource: "sysfs"},
		{name: "no netlink", netlink: nil, root: exclusive, wantMode: "exclusive", wantSource: "sysfs"},
		{name: "netlink answers nonsense", netlink: answer("weird", nil), root: shared, wantMode: "shared", wantSource: "sysfs"},
		{name: "both fail", netlink: answer("", errNetlink), root: t.TempDir(), wantErr: []error{errNetlink, os.ErrNotExist}},
		{name: "sysfs value unknown", netlink: answer("", errNetlink), root: garbage, wantErr: []error{errNetlink}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mode, source, err := rdma.NetnsMode(tt.netlink, rdma.NewSysfs(tt.root))
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("NetnsMode() = %s from %s, want an error", mode, source)
				}
				for _, want := range tt.wantErr {
					if !errors.Is(err, want) {
						t.Errorf("NetnsMode() error %q does not wrap %v", err, want)
					}
				}
				return
			}
			if err != nil || mode != tt.wantMode || source != tt.wantSource {
				t.Errorf("NetnsMode() = %q, %q, %v; want %q from %q", mode, source, err, tt.wantMode, tt.wantSource)
			}
		})
	}
}

func TestNetnsModeFromSysfs(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	s := rdma.NewSysfs(root)
	for _, c := range []struct{ set, want string }{{"exclusive", "exclusive"}, {"shared", "shared"}} {
		if err := rdmatest.SetNetnsMode(root, c.set); err != nil {
			t.Fatal(err)
		}
		if got, err := s.NetnsModeFromSysfs(); err != nil || got != c.want {
			t.Errorf("after setting %s: NetnsModeFromSysfs() = %q, %v", c.set, got, err)
		}
	}
}

// The sysfs fallback is logged to the Sysfs's logger, the one the daemon
// gives it, never to logrus's global one.
func TestNetnsModeLogsToItsLogger(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	own, ownHook := logtest.NewNullLogger()
	own.SetLevel(logrus.DebugLevel)
	global := logtest.NewGlobal()
	defer global.Reset()
	oldLevel := logrus.GetLevel()
	logrus.SetLevel(logrus.DebugLevel)
	defer logrus.SetLevel(oldLevel)

	failing := func() (string, error) { return "", errors.New("netlink: operation not supported") }
	mode, source, err := rdma.NetnsMode(failing, rdma.NewSysfs(root).WithLog(own))
	if err != nil || mode != rdma.NetnsShared || source != rdma.SourceSysfs {
		t.Fatalf("NetnsMode = %q, %q, %v; want shared from sysfs", mode, source, err)
	}
	if e := ownHook.LastEntry(); e == nil || e.Level != logrus.DebugLevel || !strings.Contains(e.Message, "mode shared read from sysfs: netlink failed: netlink: operation not supported") {
		t.Errorf("the Sysfs's logger got %v, want the debug line of the sysfs fallback", ownHook.AllEntries())
	}
	if n := len(global.AllEntries()); n != 0 {
		t.Errorf("logrus's global logger got %d lines, want none: %v", n, global.AllEntries())
	}

	// Without a logger the line goes nowhere, not to the global logger.
	global.Reset()
	if _, _, err := rdma.NetnsMode(failing, rdma.NewSysfs(root)); err != nil {
		t.Fatal(err)
	}
	if n := len(global.AllEntries()); n != 0 {
		t.Errorf("a Sysfs without a logger logged %d lines to the global logger: %v", n, global.AllEntries())
	}
}
