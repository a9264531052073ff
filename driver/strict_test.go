package driver

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// railsEngine plays the current engine's calls for one container joining
// a strict network on p0 (endpoint "ea" on "na") and a network on p1 ("eb"
// on "nb") in a given order: for each network Join, the move of the link
// into the container, ProgramExternalConnectivity for the endpoint that
// becomes the gateway, then EndpointOperInfo for every endpoint joined so
// far. The kernel adds an endpoint's entries a moment after its link moves
// (unless never is set for it). It returns the first error, as the engine
// fails the start with it, and whether, when the start went on, ea's
// entries were there.
type railsEngine struct {
	t     *testing.T
	d     testDriver
	links *drivertest.Links
	root  string
	never map[string]bool
}

func newRailsEngine(t *testing.T, bStrict bool) *railsEngine {
	t.Helper()
	links := drivertest.NewLinks("p0", "p1")
	root := twoRails(t)
	dd, err := New(Config{StateDir: t.TempDir(), Links: links, Log: quietLog(), Sysfs: rdma.NewSysfs(root), CDIDir: t.TempDir(),
		GIDTimeout: 300 * time.Millisecond, GIDPoll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dd.Close)
	d := testDriver{Driver: dd, root: root}
	b := netReq("nb", "parent", "p1")
	if bStrict {
		b = netReq("nb", "parent", "p1", "gid_check", "strict")
	}
	c := netReq("nc", "parent", "p1")
	c.IPv4 = []Subnet{{Pool: "10.7.0.0/24", Gateway: "10.7.0.1/24"}}
	for _, n := range []CreateNetworkRequest{netReq("na", "parent", "p0", "gid_check", "strict"), b, c} {
		if err := d.CreateNetwork(n); err != nil {
			t.Fatal(err)
		}
	}
	return &railsEngine{t: t, d: d, links: links, root: root, never: map[string]bool{}}
}

var railOf = map[string]struct{ nid, hca, ip string }{
	"ea": {"na", "mlx5_0", "10.5.0.2"},
	"eb": {"nb", "mlx5_1", "10.6.0.2"},
	"ec": {"nc", "mlx5_1", "10.7.0.2"},
}

// start joins the endpoints in order; gateway names the endpoint that is
// the container's gateway once both are joined (the other one is until
// then, if joined first).
func (r *railsEngine) start(order []string, gateway string) error {
	r.t.Helper()
	var joined []string
	gw := ""
	for _, eid := range order {
		rail := railOf[eid]
		if _, err := r.d.CreateEndpoint(ep(rail.nid, eid, rail.ip+"/24")); err != nil {
			r.t.Fatal(err)
		}
		if _, err := r.d.Join(rail.nid, eid, "/sb/c1"); err != nil {
			r.t.Fatal(err)
		}
		if _, err := r.links.MoveToSandbox(LinkName(eid)); err != nil {
			r.t.Fatal(err)
		}
		if !r.never[eid] {
			go func() {
				time.Sleep(20 * time.Millisecond)
				_, _ = rdmatest.AddAddress(r.root, rail.hca, 1, rail.ip, "eth0")
			}()
		}
		joined = append(joined, eid)
		if gw == "" || eid == gateway {
			// The engine programs the endpoint that takes the gateway
			// over (and revokes the one before: a no-op here).
			gw = eid
			if err := r.d.ProgramExternalConnectivity(rail.nid, eid); err != nil {
				return err
			}
		}
		for _, o := range joined {
			if _, err := r.d.EndpointInfo(railOf[o].nid, o); err != nil {
				r.t.Fatal(err)
			}
		}
	}
	return nil
}

// ready reports whether ea's entries are in the table now.
func (r *railsEngine) ready(eid string) bool {
	table, err := rdma.NewSysfs(r.root).Table(railOf[eid].hca, 1)
	return err == nil && len(table.ByGID[rdma.GIDFromIP(net.ParseIP(railOf[eid].ip))]) == 2
}

// A container on a strict network and another network starts once its
// entries are there, whichever network the engine joins first and
// whichever ends up the gateway.
func TestStrictHoldsWhateverTheJoinOrder(t *testing.T) {
	for _, bStrict := range []bool{false, true} {
		for _, order := range [][]string{{"ea", "eb"}, {"eb", "ea"}} {
			for _, gateway := range []string{"ea", "eb"} {
				name := fmt.Sprintf("b strict %v, order %v, gateway %s", bStrict, order, gateway)
				t.Run(name, func(t *testing.T) {
					r := newRailsEngine(t, bStrict)
					if err := r.start(order, gateway); err != nil {
						t.Fatalf("start refused although the entries appeared: %v", err)
					}
					for _, eid := range []string{"ea", "eb"} {
						if (eid == "ea" || bStrict) && !r.ready(eid) {
							t.Fatalf("the start went on before the entries of strict endpoint %s were there", eid)
						}
					}
				})
			}
		}
	}
}

// Entries that never come fail the start when the strict endpoint is the
// gateway or joined before it; when it joined after the gateway, the
// engine gives no call that can fail the start: it goes on after the
// watch's time, and the network's status says why.
func TestStrictEntriesThatNeverCome(t *testing.T) {
	for _, tc := range []struct {
		order   []string
		gateway string
		refused bool
	}{
		{[]string{"ea", "eb"}, "ea", true},
		{[]string{"ea", "eb"}, "eb", true},
		{[]string{"eb", "ea"}, "ea", true},
		{[]string{"eb", "ea"}, "eb", false},
		// A third network takes the gateway over after the strict one
		// joined behind the first: its call holds (and fails) the
		// strict endpoint too.
		{[]string{"eb", "ea", "ec"}, "ec", true},
	} {
		t.Run(fmt.Sprintf("order %v, gateway %s", tc.order, tc.gateway), func(t *testing.T) {
			r := newRailsEngine(t, false)
			r.never["ea"] = true
			err := r.start(tc.order, tc.gateway)
			if tc.refused {
				if err == nil || !strings.Contains(err.Error(), "network na has gid_check=strict") || !strings.Contains(err.Error(), "did not appear") {
					t.Fatalf("got %v, want the start refused with network na's reason", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused in a call that cannot refuse: %v", err)
			}
			note := r.d.Status().Networks[0].GIDCheckNote
			if !strings.Contains(note, "joined after the container's gateway") || !strings.Contains(note, "gw-priority") {
				t.Fatalf("network na's note %q does not say why strict let the start through", note)
			}
		})
	}
}

// After a restart, the watch of a strict endpoint that joined before it
// (its container runs) is resumed, and the engine's EndpointOperInfo calls
// for it (at dockerd's start, after a disconnect) are no start: they
// answer at once instead of waiting out the watch, one endpoint after
// another. Once its container starts again (Leave, Join), the watch is the
// Join's own, and EndpointOperInfo holds the start until the entries come.
func TestStrictDoesNotHoldResumedWatches(t *testing.T) {
	links := drivertest.NewLinks("p0")
	root, dir := twoRails(t), t.TempDir()
	cfg := func() Config {
		return Config{StateDir: dir, Links: links, Log: quietLog(), Sysfs: rdma.NewSysfs(root), CDIDir: t.TempDir(),
			GIDTimeout: 5 * time.Second, GIDPoll: 5 * time.Millisecond}
	}
	d1, err := New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	if err := d1.CreateNetwork(netReq("na", "parent", "p0", "gid_check", "strict")); err != nil {
		t.Fatal(err)
	}
	if _, err := d1.CreateEndpoint(ep("na", "ea", "10.5.0.2/24")); err != nil {
		t.Fatal(err)
	}
	if _, err := d1.Join("na", "ea", "/sb/c1"); err != nil {
		t.Fatal(err)
	}
	moved, err := links.MoveToSandbox(LinkName("ea"))
	if err != nil {
		t.Fatal(err)
	}
	d1.Close()

	d2, err := New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d2.Close)
	if !d2.gids.Watching("ea") {
		t.Fatal("the watch of the joined, not ready endpoint was not resumed")
	}
	if _, err := d2.EndpointInfo("na", "ea"); err != nil {
		t.Fatal(err)
	}
	if !d2.gids.Watching("ea") {
		t.Fatal("EndpointOperInfo of a container that already ran waited for its watch to end")
	}

	// Started again (Leave, Join), the container's start is held again:
	// the watch is the Join's own now.
	if err := d2.Leave("na", "ea"); err != nil {
		t.Fatal(err)
	}
	links.MoveBack(moved)
	if _, err := d2.Join("na", "ea", "/sb/c2"); err != nil {
		t.Fatal(err)
	}
	if _, err := links.MoveToSandbox(LinkName("ea")); err != nil {
		t.Fatal(err)
	}
	info := make(chan error, 1)
	go func() { _, err := d2.EndpointInfo("na", "ea"); info <- err }()
	select {
	case err := <-info:
		t.Fatalf("EndpointOperInfo after a Join of this process did not wait for the GID entries (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := rdmatest.AddAddress(root, "mlx5_0", 1, "10.5.0.2", "eth0"); err != nil {
		t.Fatal(err)
	}
	// The hold ends when the entries come, well before the watch's 5 s.
	select {
	case <-info:
	case <-time.After(2 * time.Second):
		t.Fatal("EndpointOperInfo still holds the start 2 s after the entries came")
	}
	waitStatus(t, testDriver{Driver: d2, root: root}, "ea", time.Second, func(e api.Endpoint) bool { return e.RDMAReady })
}
