package driver

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// A container removed while the daemon was down leaves a joined endpoint
// whose link went with the container's namespace: the restart collects it.
// Endpoints whose link is in a container, still in the host (an engine that
// joins before it moves the link), or not joined yet are kept.
func TestCollectGoneAtRestart(t *testing.T) {
	links := drivertest.NewLinks("p0")
	dir := t.TempDir()
	root := mlx5Root(t, rdmatest.MLX5Options{})
	d := newTestDriverAt(t, links, dir, root)
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	for i, eid := range []string{"running", "gone", "joining", "created"} {
		if _, err := d.CreateEndpoint(ep("n1", eid, fmt.Sprintf("10.5.0.%d/24", i+2))); err != nil {
			t.Fatal(err)
		}
		if eid == "created" {
			continue
		}
		if _, err := d.Join("n1", eid, "/var/run/docker/netns/"+eid); err != nil {
			t.Fatal(err)
		}
		if eid != "joining" {
			if _, err := links.MoveToSandbox(LinkName(eid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	d.Close()
	links.DestroySandbox(LinkName("gone"))

	d2 := newTestDriverAt(t, links, dir, root)
	var left []string
	for _, e := range d2.Status().Networks[0].Endpoints {
		left = append(left, e.ID)
	}
	if strings.Join(left, " ") != "created joining running" {
		t.Fatalf("endpoints after restart: %v, want created joining running (gone collected)", left)
	}
	// Docker may still ask to delete it: an unknown endpoint is done.
	if err := d2.Leave("n1", "gone"); err != nil {
		t.Fatal(err)
	}
	if err := d2.DeleteEndpoint("n1", "gone"); err != nil {
		t.Fatal(err)
	}
}

// Nothing is collected when other namespaces cannot be read, or when a
// link with this daemon's mark carries a MAC no endpoint has (then the MACs
// cannot be trusted to tell containers apart).
func TestCollectGoneNeverGuesses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(links *drivertest.Links, owner string)
	}{
		{"peers unreadable", func(links *drivertest.Links, _ string) { links.PeerErr = errors.New("operation not permitted") }},
		{"unknown MAC", func(links *drivertest.Links, owner string) {
			links.Add(drivertest.MacvlanOf(links, "stray", "p0", owner))
			if _, err := links.MoveToSandbox("stray"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			links := drivertest.NewLinks("p0")
			dir := t.TempDir()
			root := mlx5Root(t, rdmatest.MLX5Options{})
			d := newTestDriverAt(t, links, dir, root)
			if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
				t.Fatal(err)
			}
			if _, err := d.CreateEndpoint(ep("n1", "gone", "10.5.0.2/24")); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Join("n1", "gone", "/sb/gone"); err != nil {
				t.Fatal(err)
			}
			if _, err := links.MoveToSandbox(LinkName("gone")); err != nil {
				t.Fatal(err)
			}
			owner := d.owner
			d.Close()
			links.DestroySandbox(LinkName("gone"))
			tc.setup(links, owner)
			d2 := newTestDriverAt(t, links, dir, root)
			if n := len(d2.Status().Networks[0].Endpoints); n != 1 {
				t.Fatalf("%d endpoints after restart: want the endpoint kept", n)
			}
		})
	}
}

// A GID table refusal first collects endpoints of removed containers: the
// daemon kept running (a legacy plugin across a dockerd crash) while their
// containers went, and their reservations were what filled the table.
func TestCollectGoneOnTableFull(t *testing.T) {
	links := drivertest.NewLinks("p0")
	root := buildRoot(t, func(r string) error { return rdmatest.BuildRXE(r, rdmatest.RXEOptions{Netdev: "p0", TableSize: 4}) })
	d, err := New(Config{StateDir: t.TempDir(), Links: links, Log: quietLog(), Sysfs: rdma.NewSysfs(root), CDIDir: t.TempDir(),
		GIDTimeout: time.Hour, GIDPoll: time.Hour}) // their entries never show: they stay held
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		eid := fmt.Sprintf("e%d", i)
		if _, err := d.CreateEndpoint(ep("n1", eid, fmt.Sprintf("10.5.0.%d/24", i+2))); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Join("n1", eid, "/sb/"+eid); err != nil {
			t.Fatal(err)
		}
		if _, err := links.MoveToSandbox(LinkName(eid)); err != nil {
			t.Fatal(err)
		}
	}
	// 3 free slots, 3 held: full while all three containers live.
	if _, err := d.CreateEndpoint(ep("n1", "e3", "10.5.0.9/24")); err == nil {
		t.Fatal("admitted into a table held by three live containers")
	}
	links.DestroySandbox(LinkName("e1"))
	// A refusal reads the namespaces at most every collectEvery.
	if _, err := d.CreateEndpoint(ep("n1", "e3", "10.5.0.9/24")); err == nil {
		t.Fatal("namespaces read again before collectEvery passed")
	}
	d.mu.Lock()
	d.lastCollect = time.Now().Add(-d.collectEvery)
	d.mu.Unlock()
	if _, err := d.CreateEndpoint(ep("n1", "e3", "10.5.0.9/24")); err != nil {
		t.Fatalf("the removed container's reservation was not collected: %v", err)
	}
	if n := len(d.Status().Networks[0].Endpoints); n != 3 {
		t.Fatalf("%d endpoints, want e0, e2 and e3", n)
	}
}

// Watches resumed at start-up finish (and touch the driver's maps) while
// the restore is still going: run with -race, this caught restore starting
// watches without the driver's lock.
func TestRestoreResumesWatchesWithoutRace(t *testing.T) {
	links := drivertest.NewLinks("p0")
	dir := memDir(t) // 600 fsync'd state writes: in memory, where fsync costs nothing
	root := memDir(t)
	if err := rdmatest.BuildRXE(root, rdmatest.RXEOptions{Netdev: "p0", TableSize: 256}); err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{StateDir: dir, Links: links, Log: quietLog(), Sysfs: rdma.NewSysfs(root), CDIDir: memDir(t),
		GIDTimeout: time.Hour, GIDPoll: time.Hour}) // no watch finishes before the restart
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		eid, ip := fmt.Sprintf("e%03d", i), fmt.Sprintf("10.5.%d.%d", i/200, i%200+2)
		r := ep("n1", eid, ip+"/16")
		if _, err := d.CreateEndpoint(r); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Join("n1", eid, "/sb/"+eid); err != nil {
			t.Fatal(err)
		}
		if _, err := links.MoveToSandbox(LinkName(eid)); err != nil {
			t.Fatal(err)
		}
		if _, err := rdmatest.AddAddress(root, "rxe0", 1, ip, "eth0"); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
	d2, err := New(Config{StateDir: dir, Links: links, Log: quietLog(), Sysfs: rdma.NewSysfs(root), CDIDir: memDir(t),
		GIDTimeout: 10 * time.Second, GIDPoll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ready := 0
		d2.mu.Lock()
		for _, e := range d2.endpoints {
			if e.RDMAReady {
				ready++
			}
		}
		d2.mu.Unlock()
		if ready == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d restored endpoints ready", ready, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// memDir is a temporary directory in /dev/shm when there is one (tmpfs),
// else in the default temporary directory.
func memDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "rdma-macvlan-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
