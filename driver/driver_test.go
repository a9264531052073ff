package driver

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// fakeLinks is an in-memory link table with the kernel's rules that matter
// here (names unique, a VLAN or macvlan needs its lower link, deleting a link
// deletes its uppers). It lets the driver's logic run without root and on
// kernels without 802.1Q support; the privileged tests drive the real kernel.
type fakeLinks struct {
	mu     sync.Mutex
	links  map[string]netns.Link
	next   int
	noVLAN bool // behave like a kernel without CONFIG_VLAN_8021Q
}

func newFakeLinks(parents ...string) *fakeLinks {
	f := &fakeLinks{links: map[string]netns.Link{}, next: 1}
	f.add(netns.Link{Name: "lo", Kind: "device", EncapType: "loopback", MTU: 65536})
	for _, p := range parents {
		f.add(netns.Link{Name: p, Kind: "veth", EncapType: "ether", MTU: 1500})
	}
	return f
}

func (f *fakeLinks) add(l netns.Link) netns.Link {
	l.Index = f.next
	f.next++
	if l.MAC == nil {
		l.MAC = net.HardwareAddr{2, 0, 0, 0, 0, byte(l.Index)}
	}
	f.links[l.Name] = l
	return l
}

func (f *fakeLinks) LinkByName(name string) (netns.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return l, fmt.Errorf("link %q: %w", name, netns.ErrLinkNotFound)
	}
	return l, nil
}

func (f *fakeLinks) LinkByIndex(idx int) (netns.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.links {
		if l.Index == idx {
			return l, nil
		}
	}
	return netns.Link{}, fmt.Errorf("index %d: %w", idx, netns.ErrLinkNotFound)
}

func (f *fakeLinks) Links() ([]netns.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []netns.Link
	for _, l := range f.links {
		out = append(out, l)
	}
	return out, nil
}

func (f *fakeLinks) CreateMacvlan(s netns.MacvlanSpec) (netns.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.links[s.Parent]
	if !ok {
		return netns.Link{}, fmt.Errorf("parent %q: %w", s.Parent, netns.ErrLinkNotFound)
	}
	if _, ok := f.links[s.Name]; ok {
		return netns.Link{}, fmt.Errorf("create macvlan %s: %w", s.Name, unix.EEXIST)
	}
	mtu := s.MTU
	if mtu == 0 {
		mtu = p.MTU
	}
	return f.add(netns.Link{Name: s.Name, Kind: "macvlan", EncapType: "ether", MTU: mtu, MAC: s.MAC, ParentIndex: p.Index, MacvlanMode: s.Mode, Alias: s.Alias}), nil
}

func (f *fakeLinks) CreateVLAN(name, lower string, id int) (netns.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noVLAN {
		return netns.Link{}, fmt.Errorf("create vlan %s: %w", name, unix.EOPNOTSUPP)
	}
	p, ok := f.links[lower]
	if !ok {
		return netns.Link{}, fmt.Errorf("lower %q: %w", lower, netns.ErrLinkNotFound)
	}
	if _, ok := f.links[name]; ok {
		return netns.Link{}, fmt.Errorf("create vlan %s: %w", name, unix.EEXIST)
	}
	return f.add(netns.Link{Name: name, Kind: "vlan", EncapType: "ether", MTU: p.MTU, ParentIndex: p.Index, VLANID: id, Up: true}), nil
}

func (f *fakeLinks) DeleteLink(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return nil
	}
	delete(f.links, name)
	for n, u := range f.links {
		if u.ParentIndex == l.Index {
			delete(f.links, n)
		}
	}
	return nil
}

func (f *fakeLinks) has(name string) bool {
	_, err := f.LinkByName(name)
	return err == nil
}

func (f *fakeLinks) names() []string {
	ls, _ := f.Links()
	var out []string
	for _, l := range ls {
		out = append(out, l.Name)
	}
	slices.Sort(out)
	return out
}

func quietLog() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// hosts builds a fake sysfs with one mlx5 HCA per netdev: mlx5_0 on the
// first, mlx5_1 on the second, ...
func hosts(t *testing.T, netdevs ...string) string {
	t.Helper()
	root := t.TempDir()
	for i, nd := range netdevs {
		o := rdmatest.MLX5Options{HCA: fmt.Sprintf("mlx5_%d", i), Netdev: nd, Uverbs: i,
			PCIAddr: fmt.Sprintf("0000:%02x:00.0", 3+i), MAC: fmt.Sprintf("a0:88:c2:5b:03:%02x", i)}
		if err := rdmatest.BuildMLX5(root, o); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

type testDriver struct {
	*Driver
	root   string // sysfs root
	cdiDir string
}

func newTestDriverAt(t *testing.T, links *fakeLinks, dir, root string) testDriver {
	t.Helper()
	cdi := filepath.Join(dir, "..", filepath.Base(dir)+"-cdi")
	d, err := New(Config{StateDir: dir, Links: links, Log: quietLog(), Sysfs: rdma.NewSysfs(root), CDIDir: cdi,
		GIDTimeout: 2 * time.Second, GIDPoll: 5 * time.Millisecond})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(d.Close)
	return testDriver{Driver: d, root: root, cdiDir: cdi}
}

// newTestDriver gives every parent of links an mlx5 HCA.
func newTestDriver(t *testing.T, links *fakeLinks, dir string) testDriver {
	t.Helper()
	var parents []string
	for _, n := range links.names() {
		if l, _ := links.LinkByName(n); l.Kind == "veth" {
			parents = append(parents, n)
		}
	}
	return newTestDriverAt(t, links, dir, hosts(t, parents...))
}

func netReq(id string, kv ...string) CreateNetworkRequest {
	return CreateNetworkRequest{NetworkID: id, Options: opts(kv...), IPv4: []Subnet{{Pool: "10.5.0.0/24", Gateway: "10.5.0.1/24"}}}
}

func TestVLANOwnership(t *testing.T) {
	links := newFakeLinks("p0")
	d := newTestDriver(t, links, t.TempDir())
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(d.CreateNetwork(netReq("n1", "parent", "p0.10")))
	if l, _ := links.LinkByName("p0.10"); l.Kind != "vlan" || l.VLANID != 10 {
		t.Fatalf("vlan not created: %+v", l)
	}
	must(d.CreateNetwork(netReq("n2", "parent", "p0.10")))
	must(d.DeleteNetwork("n1"))
	if !links.has("p0.10") {
		t.Fatal("vlan deleted while n2 uses it")
	}
	must(d.DeleteNetwork("n2"))
	if links.has("p0.10") {
		t.Fatal("vlan left after the last network that shares it")
	}

	// Pre-existing VLANs are never deleted.
	if _, err := links.CreateVLAN("p0.20", "p0", 20); err != nil {
		t.Fatal(err)
	}
	must(d.CreateNetwork(netReq("n3", "parent", "p0.20")))
	must(d.DeleteNetwork("n3"))
	if !links.has("p0.20") {
		t.Fatal("pre-existing vlan deleted")
	}

	// A VLAN replaced by something else under the same name is left alone.
	must(d.CreateNetwork(netReq("n4", "parent", "p0.30")))
	must(links.DeleteLink("p0.30"))
	if _, err := links.CreateVLAN("p0.30", "p0", 31); err != nil {
		t.Fatal(err)
	}
	must(d.DeleteNetwork("n4"))
	if !links.has("p0.30") {
		t.Fatal("deleted a vlan with another id than the one the driver made")
	}
}

func TestVLANRestoredAtStart(t *testing.T) {
	links := newFakeLinks("p0")
	dir := t.TempDir()
	d := newTestDriver(t, links, dir)
	if err := d.CreateNetwork(netReq("n1", "parent", "p0.10")); err != nil {
		t.Fatal(err)
	}
	if _, err := links.CreateVLAN("p0.11", "p0", 11); err != nil {
		t.Fatal(err)
	}
	if err := d.CreateNetwork(netReq("n2", "parent", "p0.11")); err != nil {
		t.Fatal(err)
	}
	d.Close()
	_ = links.DeleteLink("p0.10")
	_ = links.DeleteLink("p0.11")
	newTestDriver(t, links, dir)
	if !links.has("p0.10") {
		t.Fatal("owned vlan not re-created at start")
	}
	if links.has("p0.11") {
		t.Fatal("a vlan the driver did not create was re-created")
	}
}

func TestVLANUnsupportedKernel(t *testing.T) {
	links := newFakeLinks("p0")
	links.noVLAN = true
	dir := t.TempDir()
	d := newTestDriver(t, links, dir)
	err := d.CreateNetwork(netReq("n1", "parent", "p0.10"))
	if err == nil || !strings.Contains(err.Error(), "no 802.1Q VLAN support") || !strings.Contains(err.Error(), "modprobe 8021q") {
		t.Fatalf("error %v", err)
	}
	if got := d.Status(); len(got.Networks) != 0 {
		t.Fatalf("network recorded after a failed create: %+v", got)
	}
}

func TestCreateNetworkRollsBackWhenStateCannotBeWritten(t *testing.T) {
	links := newFakeLinks("p0")
	dir := t.TempDir()
	d := newTestDriver(t, links, dir)
	// Make the networks directory unusable: a file in its place.
	netDir := filepath.Join(dir, networksDir)
	if err := os.RemoveAll(netDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(netDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	before := links.names()
	err := d.CreateNetwork(netReq("n1", "parent", "p0.10"))
	if err == nil || !strings.Contains(err.Error(), "save network") {
		t.Fatalf("error %v", err)
	}
	if got := links.names(); !slices.Equal(got, before) {
		t.Fatalf("links after a failed create: %v, want %v", got, before)
	}
	if len(d.Status().Networks) != 0 {
		t.Fatal("network kept in memory after a failed create")
	}
}

func TestCreateEndpointRollsBackWhenStateCannotBeWritten(t *testing.T) {
	links := newFakeLinks("p0")
	dir := t.TempDir()
	d := newTestDriver(t, links, dir)
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	epDir := filepath.Join(dir, endpointsDir)
	if err := os.RemoveAll(epDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(epDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := d.CreateEndpoint(CreateEndpointRequest{NetworkID: "n1", EndpointID: "e1", IPv4: "10.5.0.2/24"})
	if err == nil || !strings.Contains(err.Error(), "save endpoint") {
		t.Fatalf("error %v", err)
	}
	if links.has(LinkName("e1")) {
		t.Fatal("link left after a failed CreateEndpoint")
	}
}

func TestEndpointLinkNameCollision(t *testing.T) {
	links := newFakeLinks("p0")
	d := newTestDriver(t, links, t.TempDir())
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	a := "0123456789abcdef"
	b := "0123456789abffff"
	if _, err := d.CreateEndpoint(CreateEndpointRequest{NetworkID: "n1", EndpointID: a}); err != nil {
		t.Fatal(err)
	}
	_, err := d.CreateEndpoint(CreateEndpointRequest{NetworkID: "n1", EndpointID: b})
	if err == nil || !strings.Contains(err.Error(), "would reuse link name") {
		t.Fatalf("error %v", err)
	}
	if !links.has(LinkName(a)) {
		t.Fatal("the first endpoint's link was touched")
	}
}

func TestCreateEndpointIdempotent(t *testing.T) {
	links := newFakeLinks("p0")
	d := newTestDriver(t, links, t.TempDir())
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	r1, err := d.CreateEndpoint(CreateEndpointRequest{NetworkID: "n1", EndpointID: "e1"})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := d.CreateEndpoint(CreateEndpointRequest{NetworkID: "n1", EndpointID: "e1"})
	if err != nil || r2.MAC != r1.MAC {
		t.Fatalf("repeat CreateEndpoint: %+v %v, first %+v", r2, err, r1)
	}
}

func TestConcurrentEndpoints(t *testing.T) {
	links := newFakeLinks("p0")
	d := newTestDriver(t, links, t.TempDir())
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 32 {
		wg.Go(func() {
			eid := fmt.Sprintf("e%02d", i)
			if _, err := d.CreateEndpoint(CreateEndpointRequest{NetworkID: "n1", EndpointID: eid, IPv4: fmt.Sprintf("10.5.0.%d/24", i+2)}); err != nil {
				errs <- err
				return
			}
			if _, err := d.Join("n1", eid, "/sb/"+eid); err != nil {
				errs <- err
				return
			}
			if err := d.Leave("n1", eid); err != nil {
				errs <- err
				return
			}
			if i%2 == 0 {
				if err := d.DeleteEndpoint("n1", eid); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	eps := d.Status().Networks[0].Endpoints
	if len(eps) != 16 {
		t.Fatalf("%d endpoints left, want 16", len(eps))
	}
	if n := len(links.names()); n != 2+16 {
		t.Fatalf("%d links, want lo, p0 and 16 endpoint links: %v", n, links.names())
	}
}

func TestUnjoinedEndpointsDeletedAfterGrace(t *testing.T) {
	links := newFakeLinks("p0")
	dir := t.TempDir()
	root := hosts(t, "p0")
	d := newTestDriverAt(t, links, dir, root)
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	for _, eid := range []string{"lost", "running", "late"} {
		if _, err := d.CreateEndpoint(CreateEndpointRequest{NetworkID: "n1", EndpointID: eid}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Join("n1", "running", "/sb/running"); err != nil {
		t.Fatal(err)
	}
	d.Close()

	d2, err := New(Config{StateDir: dir, Links: links, Log: quietLog(), Sysfs: rdma.NewSysfs(root), CDIDir: t.TempDir(),
		UnjoinedGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	// Docker joins "late" within the grace: it stays.
	if _, err := d2.Join("n1", "late", "/sb/late"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for links.has(LinkName("lost")) {
		if time.Now().After(deadline) {
			t.Fatal("endpoint never joined after the restart was not deleted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var ids []string
	for _, e := range d2.Status().Networks[0].Endpoints {
		ids = append(ids, e.ID)
	}
	if !slices.Equal(ids, []string{"late", "running"}) {
		t.Fatalf("endpoints after the grace: %v", ids)
	}
	if _, err := os.Stat(filepath.Join(dir, endpointsDir, "lost.json")); !os.IsNotExist(err) {
		t.Fatalf("state of the deleted endpoint left: %v", err)
	}
}
