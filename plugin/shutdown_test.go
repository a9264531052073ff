package plugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/go-plugins-helpers/network"
	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/plugin"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// A stopping server ends a gid_check=strict wait in progress (which may
// last longer than the engine lets a stopping plugin live) with an answer
// that says why, and stops at once instead of cutting the call.
func TestShutdownEndsStrictWaits(t *testing.T) {
	sysfs := t.TempDir()
	if err := rdmatest.BuildMLX5(sysfs, rdmatest.MLX5Options{Netdev: "p0"}); err != nil {
		t.Fatal(err)
	}
	links := newFuzzLinks()
	// Longer than the server's own wait for calls in progress.
	d, err := driver.New(driver.Config{StateDir: t.TempDir(), Links: links, Log: quietLogger(), Sysfs: rdma.NewSysfs(sysfs),
		CDIDir: t.TempDir(), GIDTimeout: time.Minute, GIDPoll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sock := filepath.Join(t.TempDir(), "p.sock")
	l, err := plugin.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := plugin.NewServer(quietLogger())
	srv.SetDriver(d)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()

	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	call := func(op string, req any) (string, error) {
		body, _ := json.Marshal(req)
		resp, err := client.Post("http://plugin/NetworkDriver."+op, "application/json", bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	const nid, eid = "5a000000000000000000000000000000000000000000000000000000000000aa", "5e000000000000000000000000000000000000000000000000000000000000ee"
	for _, c := range []struct {
		op  string
		req any
	}{
		{"CreateNetwork", map[string]any{"NetworkID": nid,
			"Options":  map[string]any{"com.docker.network.generic": map[string]string{"parent": "p0", "gid_check": "strict"}},
			"IPv4Data": []*network.IPAMData{{AddressSpace: "LocalDefault", Pool: "10.5.0.0/24", Gateway: "10.5.0.1/24"}}}},
		{"CreateEndpoint", network.CreateEndpointRequest{NetworkID: nid, EndpointID: eid, Interface: &network.EndpointInterface{Address: "10.5.0.2/24"}}},
		{"Join", network.JoinRequest{NetworkID: nid, EndpointID: eid, SandboxKey: "/var/run/docker/netns/5c0000000001"}},
	} {
		if ans, err := call(c.op, c.req); err != nil || strings.Contains(ans, `"Err":"`) {
			t.Fatalf("%s: %s %v", c.op, ans, err)
		}
	}
	// Docker 28+ moves the link into the container before it asks; the
	// GID entries never come.
	if _, err := links.MoveToSandbox(driver.LinkName(eid)); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		body string
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		b, err := call("ProgramExternalConnectivity", network.ProgramExternalConnectivityRequest{NetworkID: nid, EndpointID: eid})
		answered <- answer{b, err}
	}()
	select {
	case a := <-answered:
		t.Fatalf("strict answered before the stop: %s %v", a.body, a.err)
	case <-time.After(300 * time.Millisecond):
	}

	start := time.Now()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v (the strict wait in progress held the stop)", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return")
	}
	took := time.Since(start)
	a := <-answered
	if a.err != nil || !strings.Contains(a.body, "rdma-macvlan is stopping") || !strings.Contains(a.body, "gid_check=strict") {
		t.Fatalf("strict call answered %q (%v); want an error saying the plugin is stopping", a.body, a.err)
	}
	t.Logf("stopped in %s, strict call answered: %s", took.Round(time.Millisecond), strings.TrimSpace(a.body))
}
