package docker

import (
	"reflect"
	"testing"
)

func TestSplitGlobal(t *testing.T) {
	tests := []struct {
		args         []string
		global, rest []string
	}{
		{[]string{"rdma", "ls"}, nil, []string{"rdma", "ls"}},
		{[]string{"--context", "lab", "rdma", "ls"}, []string{"--context", "lab"}, []string{"rdma", "ls"}},
		{[]string{"-c", "lab", "-D", "rdma"}, []string{"-c", "lab", "-D"}, []string{"rdma"}},
		{[]string{"--host=unix:///x.sock", "--tlsverify", "--tlscacert", "ca.pem", "run"}, []string{"--host=unix:///x.sock", "--tlsverify", "--tlscacert", "ca.pem"}, []string{"run"}},
		{[]string{"-Hunix:///x.sock", "-l", "debug", "--config", "/c", "rdma", "run", "-H", "x"}, []string{"-Hunix:///x.sock", "-l", "debug", "--config", "/c"}, []string{"rdma", "run", "-H", "x"}},
		{[]string{"--plugin", "x", "ls"}, nil, []string{"--plugin", "x", "ls"}},
		{nil, nil, nil},
	}
	for _, tt := range tests {
		g, r, err := SplitGlobal(tt.args)
		if err != nil || !reflect.DeepEqual(g, tt.global) || !reflect.DeepEqual(r, tt.rest) {
			t.Errorf("SplitGlobal(%q) = %q, %q, %v; want %q, %q", tt.args, g, r, err, tt.global, tt.rest)
		}
	}
	if _, _, err := SplitGlobal([]string{"--context"}); err == nil {
		t.Error("--context without a value: no error")
	}
}
