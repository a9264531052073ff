package driver

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

func buildRoot(t testing.TB, build func(root string) error) string {
	t.Helper()
	root := t.TempDir()
	if err := build(root); err != nil {
		t.Fatal(err)
	}
	return root
}

func mlx5Root(t testing.TB, o rdmatest.MLX5Options) string {
	t.Helper()
	if o.Netdev == "" {
		o.Netdev = "p0"
	}
	return buildRoot(t, func(r string) error { return rdmatest.BuildMLX5(r, o) })
}

func ep(nid, eid, ipv4 string) CreateEndpointRequest {
	return CreateEndpointRequest{NetworkID: nid, EndpointID: eid, IPv4: ipv4}
}

// waitStatus polls the status of endpoint eid until cond holds or the
// deadline passes.
func waitStatus(t *testing.T, d testDriver, eid string, within time.Duration, cond func(api.Endpoint) bool) api.Endpoint {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, n := range d.Status().Networks {
			for _, e := range n.Endpoints {
				if e.ID == eid && cond(e) {
					return e
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint %s: condition not reached within %s; status: %+v", eid, within, d.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Admission counts free slots minus what starting endpoints will take:
// endpoints are admitted exactly up to the table's capacity.
func TestRDMAAdmissionUpToCapacity(t *testing.T) {
	tests := []struct {
		name     string
		root     func(t *testing.T) string
		hca      string
		admitted int
		ipv6     bool
	}{
		// 12 slots, default pair used: 10 free, 2 per IPv4 address.
		{name: "mlx5 v1+v2 pairs", root: func(t *testing.T) string { return mlx5Root(t, rdmatest.MLX5Options{TableSize: 12}) }, hca: "mlx5_0", admitted: 5},
		// 11 slots: 9 free, the 5th endpoint misses by one entry.
		{name: "mlx5 full by one entry", root: func(t *testing.T) string { return mlx5Root(t, rdmatest.MLX5Options{TableSize: 11}) }, hca: "mlx5_0", admitted: 4},
		// rxe: one entry per address, default GID at 0.
		{name: "rxe one entry per address", root: func(t *testing.T) string {
			return buildRoot(t, func(r string) error { return rdmatest.BuildRXE(r, rdmatest.RXEOptions{Netdev: "p0", TableSize: 8}) })
		}, hca: "rxe0", admitted: 7},
		// IPv6 networks also pay for the link-local address.
		{name: "mlx5 with IPv6 link-local", root: func(t *testing.T) string { return mlx5Root(t, rdmatest.MLX5Options{TableSize: 12}) }, hca: "mlx5_0", admitted: 2, ipv6: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			links := drivertest.NewLinks("p0")
			d := newTestDriverAt(t, links, t.TempDir(), tt.root(t))
			req := netReq("n1", "parent", "p0")
			req.EnableIPv6 = tt.ipv6
			if err := d.CreateNetwork(req); err != nil {
				t.Fatal(err)
			}
			n := 0
			var lastErr error
			for i := range 20 {
				if _, lastErr = d.CreateEndpoint(ep("n1", fmt.Sprintf("e%02d", i), fmt.Sprintf("10.5.0.%d/24", i+2))); lastErr != nil {
					break
				}
				n++
			}
			if n != tt.admitted {
				t.Fatalf("admitted %d endpoints, want %d (last error %v)", n, tt.admitted, lastErr)
			}
			for _, w := range []string{"GID table of RDMA device " + tt.hca + " port 1", "are held for", "stop or disconnect containers"} {
				if lastErr == nil || !strings.Contains(lastErr.Error(), w) {
					t.Fatalf("refusal %v does not say %q", lastErr, w)
				}
			}
			if links.Has(LinkName(fmt.Sprintf("e%02d", n))) {
				t.Fatal("refused endpoint left its link")
			}
			// Freeing one endpoint makes room for one more.
			if err := d.DeleteEndpoint("n1", "e00"); err != nil {
				t.Fatal(err)
			}
			if _, err := d.CreateEndpoint(ep("n1", "e99", "10.5.0.99/24")); err != nil {
				t.Fatalf("no room after a delete: %v", err)
			}
		})
	}
}

// Populated endpoints count through the table, not twice.
func TestRDMAAdmissionCountsTheTable(t *testing.T) {
	links := drivertest.NewLinks("p0")
	root := mlx5Root(t, rdmatest.MLX5Options{TableSize: 8})
	d := newTestDriverAt(t, links, t.TempDir(), root)
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	for i, ip := range []string{"10.5.0.2", "10.5.0.3"} {
		eid := fmt.Sprintf("e%d", i)
		if _, err := d.CreateEndpoint(ep("n1", eid, ip+"/24")); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Join("n1", eid, "/sb/"+eid); err != nil {
			t.Fatal(err)
		}
		if _, err := rdmatest.AddAddress(root, "mlx5_0", 1, ip, "eth0"); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, d, eid, 2*time.Second, func(e api.Endpoint) bool { return e.RDMAReady })
	}
	// 8 slots: default pair + 2 ready endpoints = 6 used, 2 free: one more.
	if _, err := d.CreateEndpoint(ep("n1", "e2", "10.5.0.4/24")); err != nil {
		t.Fatalf("room for one more: %v", err)
	}
	if _, err := d.CreateEndpoint(ep("n1", "e3", "10.5.0.5/24")); err == nil {
		t.Fatal("admitted past the table's capacity")
	}
}

func TestRDMAConcurrentAdmission(t *testing.T) {
	links := drivertest.NewLinks("p0")
	// 22 slots: 20 free, room for exactly 10 IPv4 endpoints.
	d := newTestDriverAt(t, links, t.TempDir(), mlx5Root(t, rdmatest.MLX5Options{TableSize: 22}))
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted int
	)
	for i := range 25 {
		wg.Go(func() {
			_, err := d.CreateEndpoint(ep("n1", fmt.Sprintf("c%02d", i), fmt.Sprintf("10.5.1.%d/24", i+2)))
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				admitted++
			} else if !strings.Contains(err.Error(), "too full") {
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
	wg.Wait()
	if admitted != 10 {
		t.Fatalf("%d endpoints admitted concurrently, want exactly 10", admitted)
	}
}

func TestRDMAReadinessLateGIDAndIndexHole(t *testing.T) {
	links := drivertest.NewLinks("p0")
	// Slots 2-5 hold other containers' pairs; 2/3 then go, leaving a hole.
	extra := append(rdmatest.Pair(2, rdmatest.IPv4GID("10.5.0.50"), "eth0"), rdmatest.Pair(4, rdmatest.IPv4GID("10.5.0.51"), "eth0")...)
	root := mlx5Root(t, rdmatest.MLX5Options{Extra: extra})
	dir := t.TempDir()
	d := newTestDriverAt(t, links, dir, root)
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); err != nil {
		t.Fatal(err)
	}
	if _, err := rdmatest.RemoveAddress(root, "mlx5_0", 1, "10.5.0.50"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Join("n1", "e1", "/sb/e1"); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, d, "e1", time.Second, func(e api.Endpoint) bool { return true })
	if st.RDMAReady || !strings.Contains(st.RDMAReason, "waiting") {
		t.Fatalf("ready before the kernel added anything: %+v", st)
	}
	// The kernel adds the entries some time after Join: into the hole.
	time.Sleep(50 * time.Millisecond)
	if _, err := rdmatest.AddAddress(root, "mlx5_0", 1, "10.5.0.2", "eth0"); err != nil {
		t.Fatal(err)
	}
	st = waitStatus(t, d, "e1", 2*time.Second, func(e api.Endpoint) bool { return e.RDMAReady })
	want := []api.GID{{Index: 2, Type: rdma.GIDTypeRoCEv1, GID: rdmatest.IPv4GID("10.5.0.2")}, {Index: 3, Type: rdma.GIDTypeRoCEv2, GID: rdmatest.IPv4GID("10.5.0.2")}}
	if !slices.Equal(st.GIDs, want) {
		t.Fatalf("GIDs %+v, want %+v", st.GIDs, want)
	}
	// Recorded in the endpoint's state too.
	waitRecorded(t, dir, "e1", []endpointGID{{Index: 2, Type: rdma.GIDTypeRoCEv1, GID: rdmatest.IPv4GID("10.5.0.2")}, {Index: 3, Type: rdma.GIDTypeRoCEv2, GID: rdmatest.IPv4GID("10.5.0.2")}})
}

func waitRecorded(t *testing.T, dir, eid string, want []endpointGID) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		var r endpointRecord
		data, err := os.ReadFile(filepath.Join(dir, endpointsDir, eid+".json"))
		if err == nil && json.Unmarshal(data, &r) == nil && r.Endpoint.RDMAReady && slices.Equal(r.Endpoint.GIDs, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint state does not record GIDs %+v: %s", want, data)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRDMAReadinessGIDNeverAppears(t *testing.T) {
	links := drivertest.NewLinks("p0")
	root := mlx5Root(t, rdmatest.MLX5Options{})
	d, err := New(Config{StateDir: t.TempDir(), Links: links, Log: quietLog(), Sysfs: rdma.NewSysfs(root), CDIDir: t.TempDir(),
		GIDTimeout: 150 * time.Millisecond, GIDPoll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	td := testDriver{Driver: d}
	for _, n := range []CreateNetworkRequest{netReq("n1", "parent", "p0"), netReq("n2", "parent", "p0", "gid_check", "strict")} {
		if err := d.CreateNetwork(n); err != nil {
			t.Fatal(err)
		}
	}
	for i, nid := range []string{"n1", "n2"} {
		eid := "e" + nid
		if _, err := d.CreateEndpoint(ep(nid, eid, fmt.Sprintf("10.5.0.%d/24", 7+i))); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Join(nid, eid, "/sb/"+eid); err != nil {
			t.Fatal(err)
		}
	}
	// warn: the container starts; status says why it is not ready.
	if err := d.ProgramExternalConnectivity("n1", "en1"); err != nil {
		t.Fatalf("gid_check=warn failed the start: %v", err)
	}
	st := waitStatus(t, td, "en1", 2*time.Second, func(e api.Endpoint) bool { return strings.Contains(e.RDMAReason, "did not appear") })
	if st.RDMAReady || !strings.Contains(st.RDMAReason, rdmatest.IPv4GID("10.5.0.7")) || !strings.Contains(st.RDMAReason, "mlx5_0 port 1") {
		t.Fatalf("status %+v", st)
	}
	// strict: the start fails with the reason (Docker 28: the link is in
	// the container when it asks).
	if _, err := links.MoveToSandbox(LinkName("en2")); err != nil {
		t.Fatal(err)
	}
	err = d.ProgramExternalConnectivity("n2", "en2")
	if err == nil || !strings.Contains(err.Error(), "gid_check=strict") || !strings.Contains(err.Error(), "did not appear") {
		t.Fatalf("strict: %v", err)
	}
}

func TestRDMAStrictSucceedsWhenGIDsAppear(t *testing.T) {
	links := drivertest.NewLinks("p0")
	root := mlx5Root(t, rdmatest.MLX5Options{})
	d := newTestDriverAt(t, links, t.TempDir(), root)
	if err := d.CreateNetwork(netReq("n1", "parent", "p0", "gid_check", "strict")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.8/24")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Join("n1", "e1", "/sb/e1"); err != nil {
		t.Fatal(err)
	}
	moved, err := links.MoveToSandbox(LinkName("e1")) // Docker 28: moved before it asks
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		_, _ = rdmatest.AddAddress(root, "mlx5_0", 1, "10.5.0.8", "eth0")
	}()
	if err := d.ProgramExternalConnectivity("n1", "e1"); err != nil {
		t.Fatalf("strict start failed although the GIDs appeared: %v", err)
	}
	if note := d.Status().Networks[0].GIDCheckNote; note != "" {
		t.Fatalf("strict held the start, yet status says %q", note)
	}
	// Leave forgets the GIDs (the addresses go with the move back).
	links.MoveBack(moved)
	if err := d.Leave("n1", "e1"); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, d, "e1", time.Second, func(api.Endpoint) bool { return true })
	if st.RDMAReady {
		t.Fatalf("ready after Leave: %+v", st)
	}
}

// An endpoint whose entries are in the table but whose watch has not seen
// them yet is not counted twice.
func TestRDMAAdmissionNoDoubleCount(t *testing.T) {
	links := drivertest.NewLinks("p0")
	root := mlx5Root(t, rdmatest.MLX5Options{TableSize: 8})
	d, err := New(Config{StateDir: t.TempDir(), Links: links, Log: quietLog(), Sysfs: rdma.NewSysfs(root), CDIDir: t.TempDir(),
		GIDTimeout: time.Hour, GIDPoll: time.Hour}) // the watch does not look before the test ends
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	for i, ip := range []string{"10.5.0.2", "10.5.0.3"} {
		eid := fmt.Sprintf("e%d", i)
		if _, err := d.CreateEndpoint(ep("n1", eid, ip+"/24")); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Join("n1", eid, "/sb/"+eid); err != nil {
			t.Fatal(err)
		}
		if _, err := rdmatest.AddAddress(root, "mlx5_0", 1, ip, "eth0"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.CreateEndpoint(ep("n1", "e2", "10.5.0.4/24")); err != nil {
		t.Fatalf("room for one more (6 of 8 used): %v", err)
	}
	if _, err := d.CreateEndpoint(ep("n1", "e3", "10.5.0.5/24")); err == nil {
		t.Fatal("admitted past the table's capacity")
	}
}

// A container of a dual-stack network with IPv6 disabled in it has neither
// its IPv6 address nor a link-local address: it is RDMA-ready with its IPv4
// entries alone, and from then on it holds only those in admission.
func TestRDMAIPv6DisabledContainer(t *testing.T) {
	links := drivertest.NewLinks("p0")
	root := buildRoot(t, func(r string) error { return rdmatest.BuildRXE(r, rdmatest.RXEOptions{Netdev: "p0", TableSize: 6}) })
	// Admission works from the last table read (the watch's), as the
	// daemon's does within GIDTableMaxAge: what e0 holds is then what it
	// recorded, not the table.
	dd, err := New(Config{StateDir: t.TempDir(), Links: links, Log: quietLog(), Sysfs: rdma.NewSysfs(root), CDIDir: t.TempDir(),
		GIDTimeout: 2 * time.Second, GIDPoll: 5 * time.Millisecond, GIDTableMaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dd.Close)
	d := testDriver{Driver: dd}
	req := netReq("n1", "parent", "p0", "gid_check", "strict")
	req.IPv6 = []Subnet{{Pool: "fd00:5::/64"}}
	req.EnableIPv6 = true
	if err := d.CreateNetwork(req); err != nil {
		t.Fatal(err)
	}
	dual := func(eid, v4, v6 string) CreateEndpointRequest {
		r := ep("n1", eid, v4+"/24")
		r.IPv6 = v6 + "/64"
		return r
	}
	if _, err := d.CreateEndpoint(dual("e0", "10.5.0.2", "fd00:5::2")); err != nil {
		t.Fatal(err)
	}
	// 5 free slots (rxe: one entry per address, slot 0 is the default GID);
	// a dual-stack container is expected to take 3 (IPv4, IPv6, link-local).
	if _, err := d.CreateEndpoint(dual("e1", "10.5.0.3", "fd00:5::3")); err == nil {
		t.Fatal("admitted 2 dual-stack containers (6 entries) into 5 free slots")
	}
	if _, err := d.Join("n1", "e0", "/sb/e0"); err != nil {
		t.Fatal(err)
	}
	if _, err := links.MoveToSandbox(LinkName("e0")); err != nil { // Docker 28: moved before it asks
		t.Fatal(err)
	}
	if _, err := rdmatest.AddAddress(root, "rxe0", 1, "10.5.0.2", "eth0"); err != nil {
		t.Fatal(err)
	}
	// Only the IPv4 entry comes: strict lets the start go on.
	if err := d.ProgramExternalConnectivity("n1", "e0"); err != nil {
		t.Fatalf("strict failed a container with IPv6 disabled although its IPv4 GID is there: %v", err)
	}
	st := waitStatus(t, d, "e0", time.Second, func(e api.Endpoint) bool { return e.RDMAReady })
	if len(st.GIDs) != 1 || st.GIDs[0].GID != rdmatest.IPv4GID("10.5.0.2") {
		t.Fatalf("status GIDs %+v: want the IPv4 entry only", st.GIDs)
	}
	// e0 holds 1 entry, not 3: room for one more dual-stack container.
	if _, err := d.CreateEndpoint(dual("e1", "10.5.0.3", "fd00:5::3")); err != nil {
		t.Fatalf("e0's IPv6 entries that never came are still held: %v", err)
	}
}

// On an IPv4-only network the engines disable IPv6 in the container, so
// admission counts the IPv4 entries alone; a container that turns IPv6 on
// gets its link-local entry, and status reports it with the others.
func TestRDMAIPv4OnlyLinkLocal(t *testing.T) {
	links := drivertest.NewLinks("p0")
	root := buildRoot(t, func(r string) error { return rdmatest.BuildRXE(r, rdmatest.RXEOptions{Netdev: "p0", TableSize: 6}) })
	d := newTestDriverAt(t, links, t.TempDir(), root)
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	res, err := d.CreateEndpoint(ep("n1", "e0", "10.5.0.2/24"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Join("n1", "e0", "/sb/e0"); err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC(res.MAC)
	ll, _ := netip.ParseAddr(rdma.DefaultGID(mac))
	for _, ip := range []string{"10.5.0.2", ll.String()} {
		if _, err := rdmatest.AddAddress(root, "rxe0", 1, ip, "eth0"); err != nil {
			t.Fatal(err)
		}
	}
	st := waitStatus(t, d, "e0", time.Second, func(e api.Endpoint) bool { return e.RDMAReady && len(e.GIDs) == 2 })
	if st.GIDs[1].GID != rdma.DefaultGID(mac) {
		t.Fatalf("status GIDs %+v: want the IPv4 and the link-local entry", st.GIDs)
	}
	// 6 slots: default + e0's two = 3 used; IPv4 containers take 1 each.
	admitted := 0
	for i := range 4 {
		if _, err := d.CreateEndpoint(ep("n1", fmt.Sprintf("e%d", i+1), fmt.Sprintf("10.5.0.%d/24", i+3))); err != nil {
			break
		}
		admitted++
	}
	if admitted != 3 {
		t.Fatalf("admitted %d IPv4 containers into 3 free slots, want 3", admitted)
	}
}

// Engines before Docker 28 call ProgramExternalConnectivity inside Join,
// before the link leaves the host namespace and gets its addresses: strict
// cannot hold the start there, so it must not fail it. Status says why.
func TestRDMAStrictOnEnginesBefore28(t *testing.T) {
	links := drivertest.NewLinks("p0")
	root := mlx5Root(t, rdmatest.MLX5Options{})
	d := newTestDriverAt(t, links, t.TempDir(), root)
	if err := d.CreateNetwork(netReq("n1", "parent", "p0", "gid_check", "strict")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.8/24")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Join("n1", "e1", "/sb/e1"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := d.ProgramExternalConnectivity("n1", "e1"); err != nil {
		t.Fatalf("strict failed a start on an engine that asks before the addresses exist: %v", err)
	}
	if waited := time.Since(t0); waited > time.Second {
		t.Fatalf("strict waited %s although the addresses can only come after it answers", waited)
	}
	n := d.Status().Networks[0]
	if !strings.Contains(n.GIDCheckNote, "Docker before 28") || !strings.Contains(n.GIDCheckNote, "works as warn") {
		t.Fatalf("status gid_check_note %q: want why strict works as warn here", n.GIDCheckNote)
	}
	// The watch still follows the container.
	if _, err := rdmatest.AddAddress(root, "mlx5_0", 1, "10.5.0.8", "eth0"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, "e1", time.Second, func(e api.Endpoint) bool { return e.RDMAReady })

	// The engine is upgraded to one that asks once the link has moved:
	// the note goes, also when the container's entries are there before
	// it asks (waited for below, so that the test does not depend on how
	// fast the watch is).
	if _, err := d.CreateEndpoint(ep("n1", "e2", "10.5.0.9/24")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Join("n1", "e2", "/sb/e2"); err != nil {
		t.Fatal(err)
	}
	if _, err := links.MoveToSandbox(LinkName("e2")); err != nil {
		t.Fatal(err)
	}
	if _, err := rdmatest.AddAddress(root, "mlx5_0", 1, "10.5.0.9", "eth0"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		d.mu.Lock()
		ready := d.endpoints["e2"].RDMAReady
		d.mu.Unlock()
		if ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("e2's watch did not find its entries in 5 s")
		}
	}
	if err := d.ProgramExternalConnectivity("n1", "e2"); err != nil {
		t.Fatalf("strict start on an engine that asks late: %v", err)
	}
	if note := d.Status().Networks[0].GIDCheckNote; note != "" {
		t.Fatalf("strict held a start, yet status still says %q", note)
	}
}
