package driver

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// dualPortRoot is a host with one dual-port HCA (mlx4 style): port 1 on
// eth2, port 2 on eth3, both on one PCI function.
func dualPortRoot(t *testing.T) string {
	t.Helper()
	return buildRoot(t, rdmatest.BuildMLX4DualPort)
}

func readSpec(t *testing.T, dir, name string) (cdi.Spec, []byte) {
	t.Helper()
	spec, ok, err := cdi.ReadSpec(dir, name)
	if err != nil || !ok {
		t.Fatalf("spec %s: ok %v, %v", name, ok, err)
	}
	data, err := os.ReadFile(cdi.SpecPath(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return spec, data
}

// Two networks on the two ports of one HCA get one CDI device each, with
// their own port's environment, the same across restarts whatever the map
// order; deleting one network removes only its port's spec.
func TestCDIPerPortOfDualPortHCA(t *testing.T) {
	links := drivertest.NewLinks("eth2", "eth3")
	dir := t.TempDir()
	root := dualPortRoot(t)
	d := newTestDriverAt(t, links, dir, root)
	// Several networks per port: a restart meets them in map order.
	for i := range 8 {
		parent := []string{"eth2", "eth3"}[i%2]
		if err := d.CreateNetwork(netReq(fmt.Sprintf("n%d", i), "parent", parent)); err != nil {
			t.Fatal(err)
		}
	}
	names, err := cdi.SpecNames(d.cdiDir)
	if err != nil || !slices.Equal(names, []string{"mlx4_0-p1", "mlx4_0-p2"}) {
		t.Fatalf("specs %v (%v), want one per port: mlx4_0-p1, mlx4_0-p2", names, err)
	}
	first := map[string][]byte{}
	for port, netdev := range map[int]string{1: "eth2", 2: "eth3"} {
		name := fmt.Sprintf("mlx4_0-p%d", port)
		spec, data := readSpec(t, d.cdiDir, name)
		first[name] = data
		env := spec.Devices[0].ContainerEdits.Env
		for _, want := range []string{fmt.Sprintf("RDMA_MACVLAN_DEVICE_mlx4_0_p%d=mlx4_0:%d", port, port), fmt.Sprintf("RDMA_MACVLAN_NETDEV_mlx4_0_p%d=%s", port, netdev)} {
			if !slices.Contains(env, want) {
				t.Errorf("%s: env %v lacks %s", name, env, want)
			}
		}
		if spec.Devices[0].Name != name || spec.Owner() != d.owner {
			t.Errorf("%s: device %q, owner %q; want %q, %q", name, spec.Devices[0].Name, spec.Owner(), name, d.owner)
		}
	}
	for _, n := range d.Status().Networks {
		want := "rdma-macvlan/hca=mlx4_0-p" + fmt.Sprint(n.Port)
		if n.CDIDevice != want {
			t.Errorf("network %s on port %d: cdi_device %q, want %q", n.ID, n.Port, n.CDIDevice, want)
		}
	}
	for range 5 {
		d.Close()
		for name := range first {
			if err := os.Remove(cdi.SpecPath(d.cdiDir, name)); err != nil {
				t.Fatal(err)
			}
		}
		d = newTestDriverAt(t, links, dir, root)
		for name, want := range first {
			if _, got := readSpec(t, d.cdiDir, name); string(got) != string(want) {
				t.Fatalf("spec %s after a restart:\n%s\nwant\n%s", name, got, want)
			}
		}
	}
	for i := 0; i < 8; i += 2 {
		if err := d.DeleteNetwork(fmt.Sprintf("n%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if names, _ := cdi.SpecNames(d.cdiDir); !slices.Equal(names, []string{"mlx4_0-p2"}) {
		t.Fatalf("specs after the port 1 networks went: %v, want mlx4_0-p2 only", names)
	}
}

// A record and a spec of the version that named CDI devices per HCA: the
// record gets the per-port name at start, the old spec (no owner mark) is
// adopted and, unused, removed.
func TestCDIUpgradeFromPerHCANames(t *testing.T) {
	links := drivertest.NewLinks("eth2", "eth3")
	dir := t.TempDir()
	root := dualPortRoot(t)
	d := newTestDriverAt(t, links, dir, root)
	if err := d.CreateNetwork(netReq("n1", "parent", "eth3")); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	n := d.networks["n1"]
	n.RDMA.CDIName = "" // as an older version wrote it
	err := d.store.saveNetwork(n.network)
	d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if err := os.Remove(cdi.SpecPath(d.cdiDir, "mlx4_0-p2")); err != nil {
		t.Fatal(err)
	}
	if _, err := cdi.WriteSpec(d.cdiDir, cdi.Device{HCA: "mlx4_0", Port: 2, Nodes: []rdma.DeviceNode{{Path: "/dev/infiniband/uverbs0", Major: 231, Minor: 192}}}); err != nil {
		t.Fatal(err)
	}
	d = newTestDriverAt(t, links, dir, root)
	if names, _ := cdi.SpecNames(d.cdiDir); !slices.Equal(names, []string{"mlx4_0-p2"}) {
		t.Fatalf("specs after the upgrade: %v, want mlx4_0-p2 only", names)
	}
	if st := d.Status().Networks[0]; st.CDIDevice != "rdma-macvlan/hca=mlx4_0-p2" {
		t.Fatalf("cdi_device %q", st.CDIDevice)
	}
}

// The ownership rule for CDI specs: a spec with another instance's mark is
// never replaced nor removed; a network that needs its name is refused with
// an error that names the file and the fix.
func TestCDISpecOfAnotherInstance(t *testing.T) {
	links := drivertest.NewLinks("p0")
	dir := t.TempDir()
	root := mlx5Root(t, rdmatest.MLX5Options{})
	d := newTestDriverAt(t, links, dir, root)
	other := "rdma-macvlan 00000000000000ff"
	plant := func(name string) []byte {
		t.Helper()
		if _, err := cdi.WriteSpec(d.cdiDir, cdi.Device{HCA: name, Port: 1, Owner: other,
			Nodes: []rdma.DeviceNode{{Path: "/dev/infiniband/uverbs7", Major: 231, Minor: 199}}}); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(cdi.SpecPath(d.cdiDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	theirs := plant("mlx5_0")
	err := d.CreateNetwork(netReq("n1", "parent", "p0"))
	var conflict *ConflictError
	if !errors.As(err, &conflict) || !strings.Contains(err.Error(), cdi.SpecPath(d.cdiDir, "mlx5_0")) || !strings.Contains(err.Error(), other) {
		t.Fatalf("CreateNetwork over another instance's spec: %v; want a conflict naming the file and its owner", err)
	}
	if data, _ := os.ReadFile(cdi.SpecPath(d.cdiDir, "mlx5_0")); string(data) != string(theirs) {
		t.Fatal("another instance's spec was replaced")
	}
	if len(d.Status().Networks) != 0 {
		t.Fatal("network recorded despite the conflict")
	}

	// Unused specs of another instance survive a start; ours go.
	unused := plant("mlx5_9")
	if _, err := cdi.WriteSpec(d.cdiDir, cdi.Device{HCA: "mlx5_8", Port: 1, Owner: d.owner,
		Nodes: []rdma.DeviceNode{{Path: "/dev/infiniband/uverbs8", Major: 231, Minor: 200}}}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	d = newTestDriverAt(t, links, dir, root)
	if data, err := os.ReadFile(cdi.SpecPath(d.cdiDir, "mlx5_9")); err != nil || string(data) != string(unused) {
		t.Fatalf("another instance's unused spec removed or changed at start (%v)", err)
	}
	if _, err := os.Stat(cdi.SpecPath(d.cdiDir, "mlx5_8")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("this instance's unused spec not removed at start")
	}
}

// The ownership rule for container links: CreateEndpoint deletes a link of
// the name it needs only if this instance made it (a crash left it);
// any other link of that name is a conflict and stays. DeleteEndpoint
// leaves a link of the endpoint's name that is not ours.
func TestCreateEndpointLinkOwnership(t *testing.T) {
	links := drivertest.NewLinks("p0")
	d := newTestDriver(t, links, t.TempDir())
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		link     func(ifname string) netns.Link
		conflict bool
	}{
		{"ours, left by a crash", func(n string) netns.Link { return drivertest.MacvlanOf(links, n, "p0", d.owner) }, false},
		{"macvlan of another instance", func(n string) netns.Link {
			return drivertest.MacvlanOf(links, n, "p0", "rdma-macvlan 00000000000000ff")
		}, true},
		{"macvlan without a mark", func(n string) netns.Link { return drivertest.MacvlanOf(links, n, "p0", "") }, true},
		{"a dummy with our mark", func(n string) netns.Link {
			return netns.Link{Name: n, Kind: "dummy", EncapType: "ether", MTU: 1500, Alias: d.owner}
		}, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eid := fmt.Sprintf("e%d%s", i, strings.Repeat("0", 62))
			ifname := LinkName(eid)
			planted := links.Add(c.link(ifname))
			_, err := d.CreateEndpoint(ep("n1", eid, fmt.Sprintf("10.5.0.%d/24", 2+i)))
			got, lerr := links.LinkByName(ifname)
			if !c.conflict {
				if err != nil || lerr != nil || got.Index == planted.Index {
					t.Fatalf("stale link of ours not replaced: err %v, link %+v (%v)", err, got, lerr)
				}
				return
			}
			var conflict *ConflictError
			if !errors.As(err, &conflict) || !strings.Contains(err.Error(), ifname) || !strings.Contains(err.Error(), "ip link del "+ifname) {
				t.Fatalf("CreateEndpoint over %s: %v; want a conflict naming the link and the fix", c.name, err)
			}
			if lerr != nil || got.Index != planted.Index {
				t.Fatalf("the link that is not ours was deleted or replaced: %+v (%v)", got, lerr)
			}
			if err := links.DeleteLink(ifname); err != nil {
				t.Fatal(err)
			}
		})
	}

	// DeleteEndpoint: the endpoint's link replaced by someone else's.
	eid := "f" + strings.Repeat("0", 63)
	if _, err := d.CreateEndpoint(ep("n1", eid, "10.5.0.3/24")); err != nil {
		t.Fatal(err)
	}
	ifname := LinkName(eid)
	if err := links.DeleteLink(ifname); err != nil {
		t.Fatal(err)
	}
	links.Add(drivertest.MacvlanOf(links, ifname, "p0", "someone else"))
	if err := d.DeleteEndpoint("n1", eid); err != nil {
		t.Fatal(err)
	}
	if !links.Has(ifname) {
		t.Fatal("DeleteEndpoint deleted a link another owner put under the endpoint's name")
	}
}

// The ownership rule for VLAN sub-interfaces: the driver marks the ones it
// creates, deletes only marked ones (with their last network, or at start
// when no record names them: a crash lost the record), adopts the ones its
// records say it made before the mark, and never deletes another owner's.
func TestVLANOwnerMark(t *testing.T) {
	links := drivertest.NewLinks("p0")
	dir := t.TempDir()
	d := newTestDriver(t, links, dir)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	alias := func(name string) string {
		l, err := links.LinkByName(name)
		must(err)
		return l.Alias
	}
	must(d.CreateNetwork(netReq("n1", "parent", "p0.10")))
	if got := alias("p0.10"); got != d.owner {
		t.Fatalf("created vlan has ifalias %q, want %q", got, d.owner)
	}

	// Ours without a record (a crash after creating it): taken as ours by
	// the network that asks for it, and deleted with it.
	_, err := links.CreateVLAN("p0.11", "p0", 11, d.owner)
	must(err)
	must(d.CreateNetwork(netReq("n2", "parent", "p0.11")))
	must(d.DeleteNetwork("n2"))
	if links.Has("p0.11") {
		t.Fatal("a vlan with this instance's mark was left after its network")
	}

	// Another instance's: used, never deleted.
	other := "rdma-macvlan 00000000000000ff"
	_, err = links.CreateVLAN("p0.12", "p0", 12, other)
	must(err)
	must(d.CreateNetwork(netReq("n3", "parent", "p0.12")))
	must(d.DeleteNetwork("n3"))
	if !links.Has("p0.12") {
		t.Fatal("deleted another instance's vlan")
	}

	// Ours replaced by an unmarked one with the same id: left alone.
	must(d.CreateNetwork(netReq("n4", "parent", "p0.13")))
	must(links.DeleteLink("p0.13"))
	_, err = links.CreateVLAN("p0.13", "p0", 13, "")
	must(err)
	must(d.DeleteNetwork("n4"))
	if !links.Has("p0.13") {
		t.Fatal("deleted an unmarked vlan that replaced ours")
	}

	// At start: an orphan of ours is swept, another owner's and an
	// unmarked one stay; one the records say we made before the mark is
	// marked, then deleted with its network.
	_, err = links.CreateVLAN("p0.14", "p0", 14, d.owner)
	must(err)
	must(d.CreateNetwork(netReq("n5", "parent", "p0.15")))
	// A VLAN whose network record is lost but whose endpoint's is not:
	// the endpoint's link hangs off it.
	must(d.CreateNetwork(netReq("n6", "parent", "p0.16")))
	_, err = d.CreateEndpoint(ep("n6", "e6", "10.5.0.6/24"))
	must(err)
	d.Close()
	must(os.Remove(d.store.networkPath("n6")))
	must(links.SetAlias("p0.15", ""))
	d = newTestDriverAt(t, links, dir, d.root)
	if links.Has("p0.14") {
		t.Fatal("orphan vlan of this instance not swept at start")
	}
	for _, name := range []string{"p0.10", "p0.12", "p0.13", "p0.16"} {
		if !links.Has(name) {
			t.Fatalf("vlan %s swept at start", name)
		}
	}
	if got := alias("p0.15"); got != d.owner {
		t.Fatalf("recorded vlan made before the mark has ifalias %q after start, want %q", got, d.owner)
	}
	must(d.DeleteNetwork("n5"))
	if links.Has("p0.15") {
		t.Fatal("adopted vlan left after its network")
	}
}

// A lost or damaged instance file does not make the instance a stranger to
// its own links: the ID comes back from the links its records name.
func TestInstanceIDRecoveredFromLinks(t *testing.T) {
	for _, c := range []struct {
		name string
		harm func(path string) error
	}{
		{"missing", os.Remove},
		{"garbage", func(p string) error { return os.WriteFile(p, []byte("not an id!\n"), 0o600) }},
		{"empty", func(p string) error { return os.WriteFile(p, nil, 0o600) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			links := drivertest.NewLinks("p0")
			dir := t.TempDir()
			d := newTestDriver(t, links, dir)
			if err := d.CreateNetwork(netReq("n1", "parent", "p0.10")); err != nil {
				t.Fatal(err)
			}
			if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); err != nil {
				t.Fatal(err)
			}
			owner := d.owner
			// An orphan of this instance that the next start must sweep.
			links.Add(drivertest.MacvlanOf(links, LinkName("e9"), "p0.10", owner))
			d.Close()
			if err := c.harm(dir + "/instance"); err != nil {
				t.Fatal(err)
			}
			d = newTestDriverAt(t, links, dir, d.root)
			if d.owner != owner {
				t.Fatalf("owner after the instance file went %s: %q, want %q", c.name, d.owner, owner)
			}
			if data, err := os.ReadFile(dir + "/instance"); err != nil || "rdma-macvlan "+strings.TrimSpace(string(data)) != owner {
				t.Fatalf("instance file not written back: %q %v", data, err)
			}
			if links.Has(LinkName("e9")) {
				t.Fatal("orphan of the recovered instance not swept")
			}
			if err := d.DeleteNetwork("n1"); err != nil {
				t.Fatal(err)
			}
			if links.Has(LinkName("e1")) || links.Has("p0.10") {
				t.Fatalf("links of the recovered instance left: %v", links.Names())
			}
		})
	}

	// Nothing to recover from: a new ID.
	links := drivertest.NewLinks("p0")
	dir := t.TempDir()
	d := newTestDriver(t, links, dir)
	owner := d.owner
	d.Close()
	if err := os.Remove(dir + "/instance"); err != nil {
		t.Fatal(err)
	}
	if d = newTestDriverAt(t, links, dir, d.root); d.owner == owner || !strings.HasPrefix(d.owner, "rdma-macvlan ") {
		t.Fatalf("owner %q with nothing to recover from (was %q)", d.owner, owner)
	}
}
