package main

import (
	"bytes"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// serve answers GET /v1/status with body on a unix socket in a temp dir.
func serve(t *testing.T, body string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "p.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}

func TestLines(t *testing.T) {
	body := `{"networks":[{"id":"n1","parent":"veth0","hca":"mlx5_0","port":1,"netns_mode":"shared",
		"gid_check":"strict","gid_check_note":"works as warn",
		"gid_table":{"size":255,"used":4,"free":251},"extra":"ignored",
		"endpoints":[{"id":"e1","ifname":"rmve10000000000","ipv4":"10.0.0.2","mac":"02:00:00:00:00:01",
			"gids":[{"index":2,"type":"IB/RoCE v1","gid":"x"},{"index":3,"type":"RoCE v2","gid":"x"}],"rdma_ready":true},
			{"id":"e2","ifname":"rmve20000000000","ipv4":"10.0.0.3","mac":"02:00:00:00:00:02","gids":[],
			"rdma_ready":false,"rdma_reason":"waiting for the kernel",
			"address_conflicts":[{"address":"10.0.0.3","mac":"02:00:00:00:00:99","seen":"2026-11-28T00:00:00Z"}]}]}]}`
	sock := serve(t, body)
	var out bytes.Buffer
	if err := run([]string{"-socket", sock}, &out); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"network n1 parent=veth0 hca=mlx5_0 port=1 netns_mode=shared gid_size=255 gid_used=4 gid_free=251 endpoints=2 gid_check=strict gid_check_note=\"works as warn\"",
		`endpoint n1 e1 ifname=rmve10000000000 ipv4=10.0.0.2 ipv6=- mac=02:00:00:00:00:01 rdma_ready=true gids=2,3 reason="" conflicts=-`,
		`endpoint n1 e2 ifname=rmve20000000000 ipv4=10.0.0.3 ipv6=- mac=02:00:00:00:00:02 rdma_ready=false gids=- reason="waiting for the kernel" conflicts=10.0.0.3@02:00:00:00:00:99`,
	}
	if got := strings.TrimSpace(out.String()); got != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}

func TestRefusesWhatIsNoStatus(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"no networks field", `{"nets":[]}`},
		{"not json", `hello`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := serve(t, tc.body)
			if err := run([]string{"-socket", sock}, &bytes.Buffer{}); err == nil {
				t.Errorf("body %q: want an error", tc.body)
			}
		})
	}
	if err := run([]string{"-socket", filepath.Join(t.TempDir(), "none.sock")}, &bytes.Buffer{}); err == nil {
		t.Error("no daemon: want an error")
	}
}

// A missing rdma_ready is shown as such, not read as false.
func TestMissingReady(t *testing.T) {
	sock := serve(t, `{"networks":[{"id":"n","endpoints":[{"id":"e"}]}]}`)
	var out bytes.Buffer
	if err := run([]string{"-socket", sock}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "rdma_ready=missing") {
		t.Errorf("want rdma_ready=missing in %q", out.String())
	}
}
