package gid

import (
	"fmt"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// testTracker is a Tracker on a fake sysfs tree, whose reported outcomes
// the test reads from outcomes (taken, as the driver takes them).
type testTracker struct {
	*Tracker
	root     string
	outcomes chan Outcome
}

func newTestTracker(t *testing.T, root string, cfg Config) *testTracker {
	t.Helper()
	tt := &testTracker{root: root, outcomes: make(chan Outcome, 100)}
	cfg.Sysfs = rdma.NewSysfs(root)
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Poll == 0 {
		cfg.Poll = 5 * time.Millisecond
	}
	cfg.Report = func(o Outcome) {
		if o.Take() {
			tt.outcomes <- o
		}
	}
	tt.Tracker = New(cfg)
	t.Cleanup(tt.Close)
	return tt
}

// mlx5Tracker runs a tracker on an mlx5 port (two RoCE types) of size slots,
// the default GID pair in slots 0 and 1.
func mlx5Tracker(t *testing.T, size int, cfg Config) *testTracker {
	t.Helper()
	return newTestTracker(t, rdmatest.MLX5(t, rdmatest.MLX5Options{Netdev: "p0", TableSize: size}), cfg)
}

var mlx5Port = Port{HCA: "mlx5_0", Port: 1}

// ipv4Request asks room for an endpoint with IPv4 address ip on an IPv4
// network of the mlx5 port.
func ipv4Request(ip string) Request {
	return Request{Port: mlx5Port, Want: Expect(ip+"/24", "", "", false), Types: 2}
}

// outcome waits for the next reported outcome.
func (tt *testTracker) outcome(t *testing.T, within time.Duration) Outcome {
	t.Helper()
	select {
	case o := <-tt.outcomes:
		return o
	case <-time.After(within):
		t.Fatalf("no watch outcome within %s", within)
		return Outcome{}
	}
}

func (tt *testTracker) addAddress(t *testing.T, hca, ip string) {
	t.Helper()
	if _, err := rdmatest.AddAddress(tt.root, hca, 1, ip, "eth0"); err != nil {
		t.Fatal(err)
	}
}

func id(i int) string { return fmt.Sprintf("e%02d", i) }
