package driver

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// joinedEndpoint is a driver with the GID timeout given and endpoint e1 of
// network n1 (10.5.0.2, on mlx5_0 through p0) joined to a container; the
// kernel has added none of its entries yet.
func joinedEndpoint(t *testing.T, timeout time.Duration) (testDriver, string, *logtest.Hook) {
	t.Helper()
	links := drivertest.NewLinks("p0")
	root := mlx5Root(t, rdmatest.MLX5Options{TableSize: 16})
	log, hook := logtest.NewNullLogger()
	dd, err := New(Config{StateDir: t.TempDir(), Links: links, Log: log, Sysfs: rdma.NewSysfs(root), CDIDir: t.TempDir(),
		GIDTimeout: timeout, GIDPoll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dd.Close)
	d := testDriver{Driver: dd, root: root}
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Join("n1", "e1", "/sb/e1"); err != nil {
		t.Fatal(err)
	}
	if _, err := links.MoveToSandbox(LinkName("e1")); err != nil {
		t.Fatal(err)
	}
	return d, root, hook
}

// moveEntries makes the kernel add the port's entries again, the host's
// address first (a bond failover), and returns the moves of e1's entries
// (2 and 3 before).
func moveEntries(t *testing.T, root string) []api.GIDMove {
	t.Helper()
	if _, err := rdmatest.RemoveAddress(root, "mlx5_0", 1, "10.5.0.2"); err != nil {
		t.Fatal(err)
	}
	for _, ip := range []string{"10.9.0.1", "10.5.0.2"} {
		if _, err := rdmatest.AddAddress(root, "mlx5_0", 1, ip, "eth0"); err != nil {
			t.Fatal(err)
		}
	}
	g := rdmatest.IPv4GID("10.5.0.2")
	return []api.GIDMove{{GID: g, Type: rdma.GIDTypeRoCEv1, GivenIndex: 2, Index: 4}, {GID: g, Type: rdma.GIDTypeRoCEv2, GivenIndex: 3, Index: 5}}
}

// After an endpoint is ready, the kernel adds the port's entries again in
// another order (a bond failover): /v1/status shows the index the workload
// was given next to the current one, and the daemon logs it once.
func TestDriftShownInStatusAndLoggedOnce(t *testing.T) {
	d, root, hook := joinedEndpoint(t, 2*time.Second)
	if _, err := rdmatest.AddAddress(root, "mlx5_0", 1, "10.5.0.2", "eth0"); err != nil { // 2, 3
		t.Fatal(err)
	}
	// Ready as the watch recorded it: the entries its workload is given.
	st := waitStatus(t, d, "e1", 2*time.Second, func(e api.Endpoint) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return e.RDMAReady && d.endpoints["e1"].RDMAReady
	})
	if len(st.GIDDrift) != 0 {
		t.Fatalf("drift %+v before anything moved", st.GIDDrift)
	}
	// The port's entries go and come back, the host's address first.
	want := moveEntries(t, root)
	for range 2 {
		st = waitStatus(t, d, "e1", time.Second, func(api.Endpoint) bool { return true })
		if !slices.Equal(st.GIDDrift, want) {
			t.Fatalf("status drift %+v, want %+v", st.GIDDrift, want)
		}
	}
	logged := 0
	for _, e := range hook.AllEntries() {
		if strings.Contains(e.Message, "GID entries moved") {
			logged++
			if m, _ := e.Data["moves"].(string); m != "IB/RoCE v1 2->4, RoCE v2 3->5" {
				t.Errorf("logged moves %q", m)
			}
		}
	}
	if logged != 1 {
		t.Fatalf("the move is logged %d times, want once", logged)
	}
}

// A start slower than the GID timeout: the watch, begun at Join, ends
// before the addresses come. The first status read that finds the entries
// records the endpoint as ready at them, so that a later move is reported
// as for any other endpoint (the VM's bond failover found it so).
func TestLateReadyEndpointsDriftIsReported(t *testing.T) {
	d, root, hook := joinedEndpoint(t, 50*time.Millisecond)
	// The watch is over once its outcome is recorded: it stops watching
	// before it writes the record, under the claim a status read then
	// finds taken.
	deadline := time.Now().Add(2 * time.Second)
	for {
		d.mu.Lock()
		e := d.endpoints["e1"].endpoint
		d.mu.Unlock()
		if e.RDMAReady {
			t.Fatal("the watch found entries that are not there")
		}
		if e.RDMAReason != "" && !d.gids.Watching("e1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watch did not time out")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := rdmatest.AddAddress(root, "mlx5_0", 1, "10.5.0.2", "eth0"); err != nil { // 2, 3
		t.Fatal(err)
	}
	st := waitStatus(t, d, "e1", time.Second, func(e api.Endpoint) bool { return e.RDMAReady })
	if len(st.GIDDrift) != 0 {
		t.Fatalf("drift %+v before anything moved", st.GIDDrift)
	}
	d.mu.Lock()
	rec := d.endpoints["e1"].endpoint
	d.mu.Unlock()
	if !rec.RDMAReady || len(rec.GIDs) != 2 || rec.GIDs[0].Index != 2 || rec.GIDs[1].Index != 3 {
		t.Fatalf("after the status read the endpoint is recorded as %+v, want ready at 2 and 3", rec)
	}
	want := moveEntries(t, root)
	if st = waitStatus(t, d, "e1", time.Second, func(api.Endpoint) bool { return true }); !slices.Equal(st.GIDDrift, want) {
		t.Fatalf("status drift %+v, want %+v", st.GIDDrift, want)
	}
	found := false
	for _, e := range hook.AllEntries() {
		found = found || strings.Contains(e.Message, "found by a status read after its watch timed out")
	}
	if !found {
		t.Error("the late readiness is not logged")
	}
}
