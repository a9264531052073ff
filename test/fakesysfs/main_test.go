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
