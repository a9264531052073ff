package driver

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// gatedLinks holds the netlink calls on one link name until the test lets
// them go, and counts the macvlans created per name.
type gatedLinks struct {
	*drivertest.Links
	fake    *drivertest.Links
	name    string
	entered chan string   // a held call has begun (its kind)
	gate    chan struct{} // closed: held calls go on
	created sync.Map      // name -> *atomic.Int32
	delay   time.Duration // every CreateMacvlan waits this long
	lookup  bool          // LinkByName of the name is held too
}

func newGatedLinks(name string) *gatedLinks {
	f := drivertest.NewLinks("p0")
	return &gatedLinks{Links: f, fake: f, name: name, entered: make(chan string, 16), gate: make(chan struct{})}
}

// open lets the held calls go on (again and again: a closed gate stays
// open).
func (g *gatedLinks) open() {
	select {
	case <-g.gate:
	default:
		close(g.gate)
	}
}

func (g *gatedLinks) hold(name, kind string) {
	if name == g.name {
		g.entered <- kind
		<-g.gate
	}
}

func (g *gatedLinks) CreateMacvlan(s netns.MacvlanSpec) (netns.Link, error) {
	g.hold(s.Name, "create")
	time.Sleep(g.delay)
	c, _ := g.created.LoadOrStore(s.Name, new(atomic.Int32))
	c.(*atomic.Int32).Add(1)
	return g.Links.CreateMacvlan(s)
}

func (g *gatedLinks) LinkByName(name string) (netns.Link, error) {
	if g.lookup {
		g.hold(name, "lookup")
	}
	return g.Links.LinkByName(name)
}

func (g *gatedLinks) DeleteLink(name string) error {
	if g.Has(name) { // the stale-link check before a create deletes nothing
		g.hold(name, "delete")
	}
	return g.Links.DeleteLink(name)
}

// linksOf hides the embedded field's name, which clashes with the
// interface's Links method.
type linksOf struct{ *gatedLinks }

func (l linksOf) Links() ([]netns.Link, error) { return l.fake.Links() }

func (g *gatedLinks) count(name string) int32 {
	c, ok := g.created.Load(name)
	if !ok {
		return 0
	}
	return c.(*atomic.Int32).Load()
}

// within fails the test if fn does not return within d.
func within(t *testing.T, d time.Duration, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(d):
		t.Fatalf("%s did not return within %v while another endpoint's netlink call was under way: the driver holds its lock across netlink", what, d)
	}
}

// gatedDriver runs a driver whose netlink calls go through g, with
// network n1 on p0.
func gatedDriver(t *testing.T, g *gatedLinks) testDriver {
	t.Helper()
	d := newTestDriverAt(t, g.fake, t.TempDir(), mlx5Root(t, rdmatest.MLX5Options{TableSize: 64}))
	d.links = linksOf{g}
	t.Cleanup(func() { g.open() }) // a failed test must not leave a call held: Close waits for it
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	return d
}

// lifeCycle runs the whole life cycle of endpoint eid of network nid, and
// a status.
func lifeCycle(d testDriver, nid, eid, ip string) func() error {
	return func() error {
		if _, err := d.CreateEndpoint(ep(nid, eid, ip)); err != nil {
			return err
		}
		if _, err := d.Join(nid, eid, "/sb/"+eid); err != nil {
			return err
		}
		if err := d.Leave(nid, eid); err != nil {
			return err
		}
		if err := d.DeleteEndpoint(nid, eid); err != nil {
			return err
		}
		_ = d.Status()
		return nil
	}
}

// A netlink call for one endpoint does not hold up the calls of another:
// CreateEndpoint and DeleteEndpoint do their kernel work without d.mu.
func TestLinkCallsDoNotHoldOtherEndpoints(t *testing.T) {
	for _, held := range []string{"create", "delete"} {
		t.Run(held, func(t *testing.T) {
			g := newGatedLinks(LinkName("slow"))
			d := gatedDriver(t, g)
			slowErr := make(chan error, 1)
			if held == "create" {
				go func() { _, err := d.CreateEndpoint(ep("n1", "slow", "10.5.0.2/24")); slowErr <- err }()
			} else {
				g.open()
				if _, err := d.CreateEndpoint(ep("n1", "slow", "10.5.0.2/24")); err != nil {
					t.Fatal(err)
				}
				<-g.entered // the create's, let through
				g.gate = make(chan struct{})
				go func() { slowErr <- d.DeleteEndpoint("n1", "slow") }()
			}
			if k := <-g.entered; k != held {
				t.Fatalf("held a %s, want a %s", k, held)
			}
			within(t, 5*time.Second, "another endpoint's life cycle", lifeCycle(d, "n1", "fast", "10.5.0.3/24"))
			g.open()
			if err := <-slowErr; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Network calls hold no lock the endpoint calls and /v1/status need while
// they wait on the kernel: CreateNetwork looking up its parent, and
// DeleteNetwork deleting the link of one of its endpoints.
func TestNetworkCallsDoNotHoldOtherEndpoints(t *testing.T) {
	for _, held := range []string{"lookup", "delete"} {
		t.Run(held, func(t *testing.T) {
			g := newGatedLinks(LinkName("slow"))
			if held == "lookup" {
				g = newGatedLinks("p0.20")
				g.lookup = true
			}
			d := gatedDriver(t, g)
			slowErr := make(chan error, 1)
			if held == "lookup" {
				go func() { slowErr <- d.CreateNetwork(netReq("n2", "parent", "p0.20")) }()
			} else {
				g.open()
				if err := d.CreateNetwork(netReq("n2", "parent", "p0")); err != nil {
					t.Fatal(err)
				}
				if _, err := d.CreateEndpoint(ep("n2", "slow", "10.6.0.2/24")); err != nil {
					t.Fatal(err)
				}
				<-g.entered // the create's, let through
				g.gate = make(chan struct{})
				go func() { slowErr <- d.DeleteNetwork("n2") }()
			}
			if k := <-g.entered; k != held {
				t.Fatalf("held a %s, want a %s", k, held)
			}
			within(t, 5*time.Second, "an endpoint's life cycle on another network", lifeCycle(d, "n1", "fast", "10.5.0.3/24"))
			if held == "delete" {
				// No endpoint is created on a network being removed.
				_, err := d.CreateEndpoint(ep("n2", "late", "10.6.0.3/24"))
				if !errors.Is(err, ErrNetworkNotFound) || !strings.Contains(err.Error(), "is being removed") {
					t.Fatalf("CreateEndpoint on a network being removed: %v; want it refused as being removed", err)
				}
			}
			g.open()
			if err := <-slowErr; err != nil {
				t.Fatal(err)
			}
			if held == "delete" && (g.Has(LinkName("slow")) || len(d.Status().Networks) != 1) {
				t.Fatal("DeleteNetwork left its endpoint's link or the network")
			}
		})
	}
}

// An endpoint whose CreateEndpoint is under way is reserved: its address,
// and on passthru the parent's one container, are held against other
// creates, but it does not exist yet for anything else: the status does
// not list it and EndpointOperInfo has nothing to show, until the create
// has recorded it.
func TestReservedEndpointIsNotYetKnown(t *testing.T) {
	g := newGatedLinks(LinkName("e1"))
	d := gatedDriver(t, g)
	// hold runs CreateEndpoint of eid until its link is to be created,
	// runs check, then lets it finish.
	hold := func(nid, eid, ip string, check func()) {
		t.Helper()
		for len(g.entered) > 0 { // the held calls before
			<-g.entered
		}
		g.name, g.gate = LinkName(eid), make(chan struct{})
		created := make(chan error, 1)
		go func() { _, err := d.CreateEndpoint(ep(nid, eid, ip)); created <- err }()
		select {
		case <-g.entered:
		case err := <-created:
			t.Fatalf("CreateEndpoint of %s ended before it created its link: %v", eid, err)
		}
		check()
		g.open()
		if err := <-created; err != nil {
			t.Fatal(err)
		}
	}
	hold("n1", "e1", "10.5.0.2/24", func() {
		for _, n := range d.Status().Networks {
			for _, e := range n.Endpoints {
				t.Errorf("the status lists endpoint %s (%+v) while its CreateEndpoint is under way", e.ID, e)
			}
		}
		if info, err := d.EndpointInfo("n1", "e1"); err != nil || len(info) != 0 {
			t.Errorf("EndpointOperInfo of a reserved endpoint: %v, %v; want nothing to show", info, err)
		}
		if _, err := d.CreateEndpoint(ep("n1", "e2", "10.5.0.2/24")); err == nil || !strings.Contains(err.Error(), "already held") {
			t.Errorf("a second endpoint with the reserved one's address: %v; want it refused as already held", err)
		}
	})
	if info, err := d.EndpointInfo("n1", "e1"); err != nil || info["host_ifname"] != LinkName("e1") {
		t.Fatalf("EndpointOperInfo once created: %v, %v; want its link", info, err)
	}
	waitStatus(t, d, "e1", time.Second, func(api.Endpoint) bool { return true })
	// Passthru needs the parent to itself.
	if err := d.DeleteEndpoint("n1", "e1"); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteNetwork("n1"); err != nil {
		t.Fatal(err)
	}
	if err := d.CreateNetwork(netReq("pt", "parent", "p0", "macvlan_mode", "passthru")); err != nil {
		t.Fatal(err)
	}
	hold("pt", "p1", "10.5.0.3/24", func() {
		if _, err := d.CreateEndpoint(ep("pt", "p2", "10.5.0.4/24")); err == nil || !strings.Contains(err.Error(), "passthru allows one container") {
			t.Errorf("a second endpoint on passthru while the first is created: %v; want it refused", err)
		}
	})
}

// Calls for the same endpoint while one is under way wait for it and then
// see its outcome: a repeated CreateEndpoint creates no second link and
// answers the same MAC; a DeleteEndpoint deletes what the create made.
func TestSameEndpointCallsWait(t *testing.T) {
	g := newGatedLinks(LinkName("e1"))
	d := newTestDriverAt(t, g.fake, t.TempDir(), mlx5Root(t, rdmatest.MLX5Options{TableSize: 64}))
	d.links = linksOf{g}
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	type res struct {
		mac string
		err error
	}
	first, second := make(chan res, 1), make(chan res, 1)
	go func() { r, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); first <- res{r.MAC, err} }()
	<-g.entered
	go func() { r, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); second <- res{r.MAC, err} }()
	select {
	case r := <-second:
		t.Fatalf("second CreateEndpoint returned (%+v) while the first was still creating the link", r)
	case <-time.After(100 * time.Millisecond):
	}
	close(g.gate)
	r1, r2 := <-first, <-second
	if r1.err != nil || r2.err != nil {
		t.Fatalf("creates: %v, %v", r1.err, r2.err)
	}
	if r1.mac == "" || r1.mac != r2.mac {
		t.Fatalf("MACs %q and %q: want the same one", r1.mac, r2.mac)
	}
	if n := g.count(LinkName("e1")); n != 1 {
		t.Fatalf("%d links created for one endpoint, want 1", n)
	}
	if err := d.DeleteEndpoint("n1", "e1"); err != nil {
		t.Fatal(err)
	}

	// A delete during the create waits for it, then deletes what it made.
	for len(g.entered) > 0 {
		<-g.entered
	}
	g.gate = make(chan struct{})
	go func() { r, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); first <- res{r.MAC, err} }()
	<-g.entered
	deleted := make(chan error, 1)
	go func() { deleted <- d.DeleteEndpoint("n1", "e1") }()
	select {
	case err := <-deleted:
		t.Fatalf("DeleteEndpoint returned (%v) while CreateEndpoint was still creating the link", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(g.gate)
	if r := <-first; r.err != nil {
		t.Fatal(r.err)
	}
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if g.Has(LinkName("e1")) || len(d.Status().Networks[0].Endpoints) != 0 {
		t.Fatal("endpoint left after its delete")
	}
}

// Admission decided under the lock with the link work outside it still
// never overcommits: with every CreateEndpoint's netlink call slow, all
// of them are between admission and record at once.
func TestRDMAConcurrentAdmissionSlowLinks(t *testing.T) {
	g := newGatedLinks("")
	close(g.gate)
	g.delay = 20 * time.Millisecond
	// 22 slots: 20 free, room for exactly 10 IPv4 endpoints.
	d := newTestDriverAt(t, g.fake, t.TempDir(), mlx5Root(t, rdmatest.MLX5Options{TableSize: 22}))
	d.links = linksOf{g}
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	var (
		wg       sync.WaitGroup
		admitted atomic.Int32
	)
	for i := range 25 {
		wg.Go(func() {
			_, err := d.CreateEndpoint(ep("n1", fmt.Sprintf("c%02d", i), fmt.Sprintf("10.5.1.%d/24", i+2)))
			if err == nil {
				admitted.Add(1)
			} else if !strings.Contains(err.Error(), "too full") {
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n != 10 {
		t.Fatalf("%d endpoints admitted concurrently, want exactly 10", n)
	}
	// The refused ones gave their reservations back: deleting one admitted
	// endpoint makes room for exactly one more.
	var one string
	for _, e := range d.Status().Networks[0].Endpoints {
		one = e.ID
		break
	}
	if err := d.DeleteEndpoint("n1", one); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateEndpoint(ep("n1", "x1", "10.5.2.1/24")); err != nil {
		t.Fatalf("no room after a delete: %v", err)
	}
	if _, err := d.CreateEndpoint(ep("n1", "x2", "10.5.2.2/24")); err == nil {
		t.Fatal("admitted past the table's capacity after a delete")
	}
}
