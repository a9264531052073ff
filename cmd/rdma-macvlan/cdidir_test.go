package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/go-plugins-helpers/network"
	"github.com/rdma-macvlan/rdma-macvlan/plugin/plugintest"
)

// TestPrivilegedDaemonWithFIFOsInCDIDir: the CDI directory is shared with
// other CDI producers, and a FIFO there named like one of the plugin's
// specs blocks whoever opens it for reading. The daemon started with one
// there becomes ready (start() gives it 10 s); with one at the spec path
// of a new network, CreateNetwork is refused with the file's name and the
// fix, and /v1/status asked meanwhile answers.
func TestPrivilegedDaemonWithFIFOsInCDIDir(t *testing.T) {
	d := hostDaemon(t)
	fifo := func(name string) string {
		t.Helper()
		path := filepath.Join(d.cdiDir, "rdma-macvlan-"+name+".json")
		if err := os.MkdirAll(d.cdiDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(path, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// Lets a reader stuck on it (a failed test) go on.
			if fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				syscall.Close(fd)
			}
		})
		return path
	}

	unused := fifo("mlx5_9")
	d.start()
	if !strings.Contains(d.log(), unused) {
		t.Errorf("start-up did not warn about %s:\n%s", unused, d.log())
	}

	spec := fifo("mlx5_0")
	c := plugintest.NewClient(d.sock)
	created := make(chan error, 1)
	go func() {
		created <- c.Call("CreateNetwork", map[string]any{
			"NetworkID": strings.Repeat("a2", 32),
			"Options":   map[string]any{"com.docker.network.generic": map[string]string{"parent": "p0"}},
			"IPv4Data":  []network.IPAMData{{Pool: "10.9.0.0/24", Gateway: "10.9.0.1/24"}},
		}, nil)
	}()
	// /v1/status is asked again and again until CreateNetwork answers.
	deadline := time.Now().Add(20 * time.Second)
	status := make(chan error, 1)
	for asked := 1; ; asked++ {
		go func() { _, err := c.Status(); status <- err }()
		select {
		case err := <-status:
			if err != nil {
				t.Fatalf("/v1/status: %v", err)
			}
		case <-time.After(time.Until(deadline)):
			t.Fatalf("/v1/status asked while CreateNetwork was under way (%d times) did not answer within 20 s\n%s", asked, d.log())
		}
		var err error
		select {
		case err = <-created:
		default:
			continue
		}
		if err == nil || !strings.Contains(err.Error(), spec+" is a FIFO") || !strings.Contains(err.Error(), "move it away") {
			t.Errorf("CreateNetwork with a FIFO at %s: %v; want a refusal naming it and the fix", spec, err)
		}
		break
	}
	for _, p := range []string{unused, spec} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			t.Errorf("%s is no longer the FIFO planted there: %v, %v", p, fi, err)
		}
	}
}
