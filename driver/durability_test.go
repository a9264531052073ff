package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/internal/atomicfile"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// What each call of a container's life cycle costs in fsyncs: CreateEndpoint
// and DeleteEndpoint make the endpoint's existence durable (a record and its
// directory; a removal and its directory); Join, the GID watch's result and
// Leave record kernel facts a system crash destroys anyway, and make none.
// Each record is still on disk, with what the call learned.
func TestLifeCycleFsyncs(t *testing.T) {
	root := mlx5Root(t, rdmatest.MLX5Options{})
	dir := t.TempDir()
	d := newTestDriverAt(t, drivertest.NewLinks("p0"), dir, root)
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	record := func() endpoint {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, endpointsDir, "e1.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rec endpointRecord
		if err := decodeRecord(data, &rec, &rec.Version); err != nil {
			t.Fatal(err)
		}
		return *rec.Endpoint
	}
	step := func(name string, want int64, fn func() error) {
		t.Helper()
		before := atomicfile.Syncs()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := atomicfile.Syncs() - before; got != want {
			t.Errorf("%s made %d fsyncs, want %d", name, got, want)
		}
	}
	step("CreateEndpoint", 2, func() error { _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); return err })
	step("Join", 0, func() error { _, err := d.Join("n1", "e1", "/sb/e1"); return err })
	if got := record().Sandbox; got != "/sb/e1" {
		t.Errorf("record after Join: sandbox %q", got)
	}
	step("the GID watch's result", 0, func() error {
		if _, err := rdmatest.AddAddress(root, "mlx5_0", 1, "10.5.0.2", "eth0"); err != nil {
			return err
		}
		// The status reads the table itself; the watch records a moment
		// later.
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if rec := record(); rec.RDMAReady && len(rec.GIDs) > 0 {
				return nil
			}
			if time.Now().After(deadline) {
				rec := record()
				return fmt.Errorf("record 2 s after the GIDs came: ready %v, GIDs %v", rec.RDMAReady, rec.GIDs)
			}
		}
	})
	step("Leave", 0, func() error { return d.Leave("n1", "e1") })
	if rec := record(); rec.Sandbox != "" || rec.RDMAReady {
		t.Errorf("record after Leave: sandbox %q, ready %v", rec.Sandbox, rec.RDMAReady)
	}
	step("DeleteEndpoint", 1, func() error { return d.DeleteEndpoint("n1", "e1") })
}
