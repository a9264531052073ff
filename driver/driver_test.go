package driver

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
	"github.com/sirupsen/logrus"
)

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

func newTestDriverAt(t testing.TB, links *drivertest.Links, dir, root string) testDriver {
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
func newTestDriver(t *testing.T, links *drivertest.Links, dir string) testDriver {
	t.Helper()
	var parents []string
	for _, n := range links.Names() {
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
	links := drivertest.NewLinks("p0")
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
	if !links.Has("p0.10") {
		t.Fatal("vlan deleted while n2 uses it")
	}
	must(d.DeleteNetwork("n2"))
	if links.Has("p0.10") {
		t.Fatal("vlan left after the last network that shares it")
	}

	// Pre-existing VLANs are never deleted.
	if _, err := links.CreateVLAN("p0.20", "p0", 20, ""); err != nil {
		t.Fatal(err)
	}
	must(d.CreateNetwork(netReq("n3", "parent", "p0.20")))
	must(d.DeleteNetwork("n3"))
	if !links.Has("p0.20") {
		t.Fatal("pre-existing vlan deleted")
	}

	// A VLAN replaced by something else under the same name is left alone.
	must(d.CreateNetwork(netReq("n4", "parent", "p0.30")))
	must(links.DeleteLink("p0.30"))
	if _, err := links.CreateVLAN("p0.30", "p0", 31, ""); err != nil {
		t.Fatal(err)
	}
	must(d.DeleteNetwork("n4"))
	if !links.Has("p0.30") {
		t.Fatal("deleted a vlan with another id than the one the driver made")
	}
}

func TestVLANRestoredAtStart(t *testing.T) {
	links := drivertest.NewLinks("p0")
	dir := t.TempDir()
	d := newTestDriver(t, links, dir)
	if err := d.CreateNetwork(netReq("n1", "parent", "p0.10")); err != nil {
		t.Fatal(err)
	}
	if _, err := links.CreateVLAN("p0.11", "p0", 11, ""); err != nil {
		t.Fatal(err)
	}
	if err := d.CreateNetwork(netReq("n2", "parent", "p0.11")); err != nil {
		t.Fatal(err)
	}
	d.Close()
	_ = links.DeleteLink("p0.10")
	_ = links.DeleteLink("p0.11")
	newTestDriver(t, links, dir)
	if !links.Has("p0.10") {
		t.Fatal("owned vlan not re-created at start")
	}
	if links.Has("p0.11") {
		t.Fatal("a vlan the driver did not create was re-created")
	}
}

func TestVLANUnsupportedKernel(t *testing.T) {
	links := drivertest.NewLinks("p0")
	links.NoVLAN = true
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
	links := drivertest.NewLinks("p0")
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
	before := links.Names()
	err := d.CreateNetwork(netReq("n1", "parent", "p0.10"))
	if err == nil || !strings.Contains(err.Error(), "save network") {
		t.Fatalf("error %v", err)
	}
	if got := links.Names(); !slices.Equal(got, before) {
		t.Fatalf("links after a failed create: %v, want %v", got, before)
	}
	if len(d.Status().Networks) != 0 {
		t.Fatal("network kept in memory after a failed create")
	}
}

func TestCreateEndpointRollsBackWhenStateCannotBeWritten(t *testing.T) {
	links := drivertest.NewLinks("p0")
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
	if links.Has(LinkName("e1")) {
		t.Fatal("link left after a failed CreateEndpoint")
	}
}

func TestEndpointLinkNameCollision(t *testing.T) {
	links := drivertest.NewLinks("p0")
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
	if !links.Has(LinkName(a)) {
		t.Fatal("the first endpoint's link was touched")
	}
}

func TestCreateEndpointIdempotent(t *testing.T) {
	links := drivertest.NewLinks("p0")
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
	links := drivertest.NewLinks("p0")
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
	if n := len(links.Names()); n != 2+16 {
		t.Fatalf("%d links, want lo, p0 and 16 endpoint links: %v", n, links.Names())
	}
}

func TestUnjoinedEndpointsDeletedAfterGrace(t *testing.T) {
	links := drivertest.NewLinks("p0")
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
	// The deletion is done when the link and the endpoint are both gone
	// (the link goes first, without the driver's lock).
	deadline := time.Now().Add(3 * time.Second)
	for {
		var ids []string
		for _, e := range d2.Status().Networks[0].Endpoints {
			ids = append(ids, e.ID)
		}
		if !links.Has(LinkName("lost")) && !slices.Contains(ids, "lost") {
			if !slices.Equal(ids, []string{"late", "running"}) {
				t.Fatalf("endpoints after the grace: %v", ids)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint never joined after the restart was not deleted (endpoints %v)", ids)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, endpointsDir, "lost.json")); !os.IsNotExist(err) {
		t.Fatalf("state of the deleted endpoint left: %v", err)
	}
}

// TestStatusVersion: /v1/status carries the daemon's version as "version"
// and its GID timeout as "gid_timeout", next to the networks; so does the
// brief status.
func TestStatusVersion(t *testing.T) {
	dir := t.TempDir()
	root := hosts(t)
	d, err := New(Config{StateDir: dir, Links: drivertest.NewLinks("p0"), Log: quietLog(), Sysfs: rdma.NewSysfs(root),
		CDIDir: filepath.Join(t.TempDir(), "cdi"), Version: "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	b, err := json.Marshal(d.Status())
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"version":"v1.2.3","gid_timeout":"10s","networks":[]}`; string(b) != want {
		t.Fatalf("status %s, want %s", b, want)
	}
	if b, _ = json.Marshal(d.Brief()); string(b) != `{"version":"v1.2.3","gid_timeout":"10s","networks":[]}` {
		t.Fatalf("brief status %s", b)
	}
}
