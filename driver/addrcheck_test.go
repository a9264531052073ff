package driver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

// fakeSegment answers probes as a segment where other hosts hold some
// addresses: held maps an address to the MAC that holds it.
type fakeSegment struct {
	mu     sync.Mutex
	held   map[string]string
	asked  []string // parent/address, in order
	err    error
	gate   chan struct{} // if not nil, each probe waits for it
	probed chan struct{} // if not nil, told of each probe's start
}

func (f *fakeSegment) probe(ctx context.Context, parent string, addr netip.Addr, own net.HardwareAddr) ([]net.HardwareAddr, error) {
	f.mu.Lock()
	f.asked = append(f.asked, parent+"/"+addr.String())
	mac, err, gate, probed := f.held[addr.String()], f.err, f.gate, f.probed
	f.mu.Unlock()
	if probed != nil {
		probed <- struct{}{}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if mac == "" || mac == own.String() {
		return nil, nil
	}
	m, _ := net.ParseMAC(mac)
	return []net.HardwareAddr{m}, nil
}

func (f *fakeSegment) questions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

func networkStatus(d testDriver, nid string) api.Network {
	for _, n := range d.Status().Networks {
		if n.ID == nid {
			return n
		}
	}
	return api.Network{}
}

// A duplicate of a container's address on the parent's segment (another
// host gave out the same address) is found after Join answered, without
// holding it up; it is an endpoint problem in the status, survives a
// restart, and goes with Leave.
func TestAddressConflictReportedAfterJoin(t *testing.T) {
	links := drivertest.NewLinks("p0")
	dir := t.TempDir()
	d := newTestDriver(t, links, dir)
	seg := &fakeSegment{held: map[string]string{"10.5.0.2": "02:42:0a:05:00:99"}, gate: make(chan struct{})}
	d.probe = seg.probe
	mustT(t, d.CreateNetwork(netReq("n1", "parent", "p0")))
	mustT(t, d.CreateNetwork(CreateNetworkRequest{NetworkID: "n2", Options: opts("parent", "p0"), IPv4: []Subnet{{Pool: "10.6.0.0/24"}}}))
	if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateEndpoint(ep("n2", "e2", "10.6.0.3/24")); err != nil {
		t.Fatal(err)
	}
	// The probe is held: Join answers anyway.
	joined := make(chan error, 1)
	go func() {
		_, err := d.Join("n1", "e1", "/sb/e1")
		joined <- err
	}()
	select {
	case err := <-joined:
		mustT(t, err)
	case <-time.After(callBound):
		t.Fatal("Join waited for the address probe on an address_check=warn network")
	}
	if _, err := d.Join("n2", "e2", "/sb/e2"); err != nil {
		t.Fatal(err)
	}
	close(seg.gate)
	e := waitStatus(t, d, "e1", 5*time.Second, func(e api.Endpoint) bool { return len(e.AddressConflicts) > 0 })
	if c := e.AddressConflicts; len(c) != 1 || c[0].Address != "10.5.0.2" || c[0].MAC != "02:42:0a:05:00:99" || c[0].Seen == "" {
		t.Errorf("conflicts %+v, want 10.5.0.2 held by 02:42:0a:05:00:99", c)
	}
	n := networkStatus(d, "n1")
	if n.AddressCheck != api.AddressCheckWarn || len(n.Problems) != 1 ||
		!strings.Contains(n.Problems[0], "10.5.0.2") || !strings.Contains(n.Problems[0], "02:42:0a:05:00:99") || !strings.Contains(n.Problems[0], "--ip-range") {
		t.Errorf("network n1: address_check %q, problems %q: want warn and one naming the address, the MAC and the fix", n.AddressCheck, n.Problems)
	}
	waitStatus(t, d, "e2", 5*time.Second, func(e api.Endpoint) bool { return true })
	time.Sleep(50 * time.Millisecond) // e2's probe has an answer of no one by now
	if p := networkStatus(d, "n2").Problems; len(p) != 0 {
		t.Errorf("network n2, whose address no one else holds: problems %q", p)
	}
	if q := seg.questions(); !strings.Contains(strings.Join(q, " "), "p0/10.5.0.2") || !strings.Contains(strings.Join(q, " "), "p0/10.6.0.3") {
		t.Errorf("probes %v, want each endpoint's address on its parent p0", q)
	}

	// Recorded: a restarted daemon still reports it.
	d.Close()
	d2 := newTestDriverAt(t, links, dir, d.root)
	if c := waitStatus(t, d2, "e1", time.Second, func(api.Endpoint) bool { return true }).AddressConflicts; len(c) != 1 {
		t.Errorf("after a restart the conflicts are %+v, want the one found", c)
	}
	mustT(t, d2.Leave("n1", "e1"))
	if c := waitStatus(t, d2, "e1", time.Second, func(api.Endpoint) bool { return true }).AddressConflicts; len(c) != 0 {
		t.Errorf("after Leave the conflicts are %+v, want none", c)
	}
	if p := networkStatus(d2, "n1").Problems; len(p) != 0 {
		t.Errorf("after Leave network n1 has problems %q", p)
	}
}

// address_check=strict: Join probes before it answers and refuses a
// duplicate, naming the address, the other MAC and the fix; a probe that
// cannot be sent is a refusal too (strict promises the check). off sends
// nothing.
func TestAddressCheckStrictAndOff(t *testing.T) {
	links := drivertest.NewLinks("p0", "p1")
	d := newTestDriver(t, links, t.TempDir())
	seg := &fakeSegment{held: map[string]string{"10.5.0.2": "02:42:0a:05:00:99"}}
	d.probe = seg.probe
	mustT(t, d.CreateNetwork(netReq("strict", "parent", "p0", "address_check", "strict")))
	if n := networkStatus(d, "strict"); n.AddressCheck != api.AddressCheckStrict {
		t.Errorf("address_check %q, want strict", n.AddressCheck)
	}
	for _, id := range []string{"e1", "e2"} {
		addr := map[string]string{"e1": "10.5.0.2/24", "e2": "10.5.0.3/24"}[id]
		if _, err := d.CreateEndpoint(ep("strict", id, addr)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := d.Join("strict", "e1", "/sb/e1")
	var ace *AddressConflictError
	if !errors.As(err, &ace) || !strings.Contains(err.Error(), "10.5.0.2") || !strings.Contains(err.Error(), "02:42:0a:05:00:99") || !strings.Contains(err.Error(), "--ip-range") {
		t.Errorf("Join of a duplicate address: %v, want a refusal naming the address, the MAC and --ip-range", err)
	}
	if e := waitStatus(t, d, "e1", time.Second, func(api.Endpoint) bool { return true }); e.Sandbox != "" {
		t.Errorf("a refused Join left the endpoint in sandbox %q", e.Sandbox)
	}
	if _, err := d.Join("strict", "e2", "/sb/e2"); err != nil {
		t.Errorf("Join of an address no one else holds: %v", err)
	}
	seg.mu.Lock()
	seg.err = errors.New("operation not permitted")
	seg.mu.Unlock()
	if _, err := d.Join("strict", "e1", "/sb/e1"); err == nil || !strings.Contains(err.Error(), "could not probe") || !strings.Contains(err.Error(), "CAP_NET_RAW") {
		t.Errorf("Join when the probe cannot be sent: %v, want a refusal that says why", err)
	}
	seg.mu.Lock()
	seg.err = nil
	seg.mu.Unlock()

	before := len(seg.questions())
	mustT(t, d.CreateNetwork(CreateNetworkRequest{NetworkID: "off", Options: opts("parent", "p1", "address_check", "off"), IPv4: []Subnet{{Pool: "10.5.0.0/24"}}}))
	if _, err := d.CreateEndpoint(ep("off", "e3", "10.5.0.2/24")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Join("off", "e3", "/sb/e3"); err != nil {
		t.Errorf("Join on an address_check=off network: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if q := seg.questions(); len(q) != before {
		t.Errorf("address_check=off probed %v", q[before:])
	}
}

func TestAddressCheckOption(t *testing.T) {
	o, err := ParseNetworkOptions([]Option{{api.OptParent, "p0"}})
	if err != nil || o.AddressCheck != api.AddressCheckWarn {
		t.Errorf("default: %q, %v; want warn", o.AddressCheck, err)
	}
	for _, v := range []string{api.AddressCheckWarn, api.AddressCheckStrict, api.AddressCheckOff} {
		if o, err := ParseNetworkOptions([]Option{{api.OptParent, "p0"}, {api.OptAddressCheck, v}}); err != nil || o.AddressCheck != v {
			t.Errorf("%s: %q, %v", v, o.AddressCheck, err)
		}
	}
	if _, err := ParseNetworkOptions([]Option{{api.OptParent, "p0"}, {api.OptAddressCheck, "yes"}}); err == nil || !strings.Contains(err.Error(), "strict") {
		t.Errorf("address_check=yes: %v, want a refusal listing the values", err)
	}
}

// fakeWatch is a segment's frames as the daemon's watch of each parent
// would see them.
type fakeWatch struct {
	mu      sync.Mutex
	claims  map[string]func(netip.Addr, net.HardwareAddr, bool) // watched parent: its callback
	started chan string
	fails   int // so many watches fail at once (the parent down)
}

func newFakeWatch() *fakeWatch {
	return &fakeWatch{claims: map[string]func(netip.Addr, net.HardwareAddr, bool){}, started: make(chan string, 16)}
}

func (f *fakeWatch) watch(ctx context.Context, parent string, claim func(netip.Addr, net.HardwareAddr, bool)) error {
	f.mu.Lock()
	if f.fails > 0 {
		f.fails--
		f.mu.Unlock()
		return errors.New("receive: network is down")
	}
	f.claims[parent] = claim
	f.mu.Unlock()
	f.started <- parent
	<-ctx.Done()
	f.mu.Lock()
	delete(f.claims, parent)
	f.mu.Unlock()
	return nil
}

func (f *fakeWatch) watching(parent string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.claims[parent] != nil
}

// send is a frame on parent's segment in which mac claims (or probes for)
// addr; it reports whether the parent was watched.
func (f *fakeWatch) send(parent, addr, mac string, probe bool) bool {
	f.mu.Lock()
	claim := f.claims[parent]
	f.mu.Unlock()
	if claim == nil {
		return false
	}
	m, _ := net.ParseMAC(mac)
	claim(netip.MustParseAddr(addr), m, probe)
	return true
}

func waitWatch(t *testing.T, f *fakeWatch, parent string) {
	t.Helper()
	select {
	case p := <-f.started:
		if p != parent {
			t.Fatalf("watch started on %s, want %s", p, parent)
		}
	case <-time.After(callBound):
		t.Fatalf("no watch of %s's segment started", parent)
	}
}

// The host whose container started first finds no one when it probes: it
// learns of the duplicate from the other host's probe for the address, or
// from a frame of the other holder, seen by its watch of the parent's
// segment. The watch runs while the parent has a joined endpoint on a
// network that checks, and again after a restart.
func TestAddressClaimsWatchedOnSegment(t *testing.T) {
	// Put back after the drivers' Close (cleanups run last first).
	idle := watchIdle
	t.Cleanup(func() { watchIdle = idle })
	watchIdle = 10 * time.Millisecond
	links := drivertest.NewLinks("p0", "p1")
	dir := t.TempDir()
	d := newTestDriver(t, links, dir)
	fw := newFakeWatch()
	d.watch = fw.watch
	mustT(t, d.CreateNetwork(netReq("n1", "parent", "p0")))
	mustT(t, d.CreateNetwork(CreateNetworkRequest{NetworkID: "off", Options: opts("parent", "p1", "address_check", "off"), IPv4: []Subnet{{Pool: "10.6.0.0/24"}}}))
	for _, r := range []CreateEndpointRequest{ep("n1", "e1", "10.5.0.2/24"), ep("off", "e3", "10.6.0.2/24")} {
		if _, err := d.CreateEndpoint(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Join("off", "e3", "/sb/e3"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Join("n1", "e1", "/sb/e1"); err != nil {
		t.Fatal(err)
	}
	waitWatch(t, fw, "p0")
	own := waitStatus(t, d, "e1", time.Second, func(api.Endpoint) bool { return true }).MAC
	const other = "02:42:0a:05:00:99"
	fw.send("p0", "10.5.0.2", own, false) // the container's own frame
	fw.send("p0", "10.5.0.9", other, true)
	if fw.send("p1", "10.6.0.2", other, true) {
		t.Error("the parent of an address_check=off network only is watched")
	}
	fw.send("p0", "10.5.0.2", other, true)
	e := waitStatus(t, d, "e1", time.Second, func(e api.Endpoint) bool { return len(e.AddressConflicts) > 0 })
	if c := e.AddressConflicts; len(c) != 1 || c[0].Address != "10.5.0.2" || c[0].MAC != other || !c[0].Probed {
		t.Errorf("after another MAC's probe for 10.5.0.2: conflicts %+v, want that MAC, probed", c)
	}
	if p := networkStatus(d, "n1").Problems; len(p) != 1 || !strings.Contains(p[0], "probed for address 10.5.0.2") || !strings.Contains(p[0], "--ip-range") {
		t.Errorf("network n1's problems %q, want the probe named with the fix", p)
	}
	fw.send("p0", "10.5.0.2", other, false) // the other holder's ARP request
	e = waitStatus(t, d, "e1", time.Second, func(e api.Endpoint) bool { return len(e.AddressConflicts) == 1 && !e.AddressConflicts[0].Probed })
	if c := e.AddressConflicts; len(c) != 1 {
		t.Errorf("after the other holder's frame: conflicts %+v, want the one, held", c)
	}

	d.Close()
	if fw.watching("p0") {
		t.Error("Close left the watch of p0 running")
	}
	d2, err := New(Config{StateDir: dir, Links: links, Log: quietLog(), Sysfs: rdma.NewSysfs(d.root), CDIDir: d.cdiDir, WatchClaims: fw.watch})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	td2 := testDriver{Driver: d2, root: d.root, cdiDir: d.cdiDir}
	waitWatch(t, fw, "p0")
	if c := waitStatus(t, td2, "e1", time.Second, func(api.Endpoint) bool { return true }).AddressConflicts; len(c) != 1 {
		t.Errorf("after a restart the conflicts are %+v, want the one seen", c)
	}
	mustT(t, d2.Leave("n1", "e1"))
	deadline := time.Now().Add(callBound)
	for fw.watching("p0") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if fw.watching("p0") {
		t.Error("the watch of p0 goes on with no joined endpoint there")
	}
}

// A watch that fails (the parent went down, or is gone for a while) starts
// again while the parent has an endpoint to watch for: a link flap does not
// end duplicate detection for the containers already running.
func TestAddressWatchRetried(t *testing.T) {
	// Put back after the driver's Close (cleanups run last first).
	i, r := watchIdle, watchRetry
	t.Cleanup(func() { watchIdle, watchRetry = i, r })
	watchIdle, watchRetry = 10*time.Millisecond, 5*time.Millisecond
	links := drivertest.NewLinks("p0")
	d := newTestDriver(t, links, t.TempDir())
	fw := newFakeWatch()
	fw.fails = 3
	d.watch = fw.watch
	mustT(t, d.CreateNetwork(netReq("n1", "parent", "p0")))
	if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Join("n1", "e1", "/sb/e1"); err != nil {
		t.Fatal(err)
	}
	waitWatch(t, fw, "p0")
	fw.send("p0", "10.5.0.2", "02:42:0a:05:00:99", false)
	if c := waitStatus(t, d, "e1", time.Second, func(e api.Endpoint) bool { return len(e.AddressConflicts) > 0 }).AddressConflicts; len(c) != 1 {
		t.Errorf("after the watch came back: conflicts %+v, want the one claimed", c)
	}
}
