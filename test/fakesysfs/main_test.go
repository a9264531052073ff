package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCommands(t *testing.T) {
	root := t.TempDir()
	port := filepath.Join(root, "sys/class/infiniband/rxe0/ports/1")
	steps := []struct {
		args    []string
		wantOut string
		wantErr bool
	}{
		{args: []string{"-root", root, "-kind", "rxe", "-netdev", "veth0", "-mac", "02:00:00:00:00:01", "-size", "8"}},
		{args: []string{"add-ip", "-root", root, "-hca", "rxe0", "-ip", "192.168.7.2", "-ndev", "eth0"}, wantOut: "1"},
		{args: []string{"set-gid", "-root", root, "-hca", "rxe0", "-index", "3", "-gid", "fe80:0000:0000:0000:0000:0000:0000:0001", "-ndev", "eth0"}},
		{args: []string{"clear-gid", "-root", root, "-hca", "rxe0", "-index", "3"}},
		{args: []string{"del-ip", "-root", root, "-hca", "rxe0", "-ip", "192.168.7.2"}, wantOut: "1"},
		{args: []string{"netns-mode", "-root", root, "-mode", "exclusive"}},
		{args: []string{"-root", root, "-kind", "ib"}, wantErr: true},
		{args: []string{"set-gid", "-root", root, "-index", "3"}, wantErr: true},
		{args: []string{"frobnicate"}, wantErr: true},
	}
	for _, s := range steps {
		var out, errOut bytes.Buffer
		err := run(s.args, &out, &errOut)
		if (err != nil) != s.wantErr {
			t.Fatalf("fakesysfs %q: err = %v, want error %v", s.args, err, s.wantErr)
		}
		if got := strings.TrimSpace(out.String()); got != s.wantOut {
			t.Errorf("fakesysfs %q printed %q, want %q", s.args, got, s.wantOut)
		}
	}
	for rel, want := range map[string]string{
		filepath.Join(port, "gids/0"):                                   "fe80:0000:0000:0000:0000:00ff:fe00:0001",
		filepath.Join(port, "gids/1"):                                   "0000:0000:0000:0000:0000:0000:0000:0000",
		filepath.Join(port, "gids/3"):                                   "0000:0000:0000:0000:0000:0000:0000:0000",
		filepath.Join(root, "sys/module/ib_core/parameters/netns_mode"): "N",
	} {
		b, err := os.ReadFile(rel)
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q (%v), want %q", rel, b, err, want)
		}
	}
}

// The pending-delete slot and renamed HCAs, from the command line (make e2e-hca uses swap-hca;
// the others are there for scripts that need them).
func TestPendingAndRenameCommands(t *testing.T) {
	root := t.TempDir()
	steps := []struct {
		args    []string
		wantOut string
		wantErr bool
	}{
		{args: []string{"-root", root, "-hca", "mlx5_0", "-netdev", "p1", "-mac", "02:00:00:00:00:01", "-size", "8", "-pending", "6,7"}},
		{args: []string{"-root", root, "-hca", "mlx5_1", "-netdev", "p2", "-mac", "02:00:00:00:00:02", "-pci", "0000:04:00.0", "-uverbs", "1", "-node-guid", "0202:0000:0000:0002"}},
		{args: []string{"add-ip", "-root", root, "-hca", "mlx5_0", "-ip", "10.0.0.2", "-ndev", "eth0"}, wantOut: "2 3"},
		{args: []string{"del-ip", "-root", root, "-hca", "mlx5_0", "-ip", "10.0.0.2", "-held"}, wantOut: "2 3"},
		{args: []string{"add-ip", "-root", root, "-hca", "mlx5_0", "-ip", "10.0.0.3", "-ndev", "eth0"}, wantOut: "4 5"},
		{args: []string{"add-ip", "-root", root, "-hca", "mlx5_0", "-ip", "10.0.0.4", "-ndev", "eth0"}, wantOut: "", wantErr: true},
		{args: []string{"release", "-root", root, "-hca", "mlx5_0", "-index", "3"}, wantOut: "3"},
		{args: []string{"release", "-root", root, "-hca", "mlx5_0"}, wantOut: "2 6 7"},
		{args: []string{"release", "-root", root, "-hca", "mlx5_0", "-index", "3"}, wantErr: true},
		{args: []string{"add-ip", "-root", root, "-hca", "mlx5_0", "-ip", "10.0.0.4", "-ndev", "eth0"}, wantOut: "2 3"},
		{args: []string{"swap-hca", "-root", root, "-a", "mlx5_0", "-b", "mlx5_1"}},
		{args: []string{"rename-hca", "-root", root, "-from", "mlx5_0", "-to", "mlx5_5"}},
		{args: []string{"swap-hca", "-root", root, "-a", "mlx5_0"}, wantErr: true},
		{args: []string{"-root", root, "-hca", "mlx5_2", "-pending", "x"}, wantErr: true},
	}
	for _, s := range steps {
		var out, errOut bytes.Buffer
		err := run(s.args, &out, &errOut)
		if (err != nil) != s.wantErr {
			t.Fatalf("fakesysfs %q: err = %v, want error %v", s.args, err, s.wantErr)
		}
		if got := strings.TrimSpace(out.String()); got != s.wantOut {
			t.Errorf("fakesysfs %q printed %q, want %q", s.args, got, s.wantOut)
		}
	}
	for rel, want := range map[string]string{
		"sys/class/net/p1/device/infiniband/mlx5_1/ports/1/gids/2": "0000:0000:0000:0000:0000:ffff:0a00:0004",
		"sys/class/net/p2/device/infiniband/mlx5_5/node_guid":      "0202:0000:0000:0002",
		"sys/class/infiniband_verbs/uverbs0/ibdev":                 "mlx5_5",
		"sys/class/infiniband_verbs/uverbs1/ibdev":                 "mlx5_1",
	} {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q (%v), want %q", rel, b, err, want)
		}
	}
}
