package driver

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// fakePorts stands in for the kernel's RDMA netlink view.
type fakePorts struct {
	ports []netns.RdmaPortNetdev
	err   error
	calls int
}

func (f *fakePorts) RdmaPortNetdevs() ([]netns.RdmaPortNetdev, error) {
	f.calls++
	return f.ports, f.err
}

// portOf is the kernel's line for hca's port, whose netdev is link name of
// links.
func portOf(t *testing.T, links *drivertest.Links, hca string, port int, name string) netns.RdmaPortNetdev {
	t.Helper()
	l, err := links.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return netns.RdmaPortNetdev{HCA: hca, Port: port, NetdevIndex: l.Index, Netdev: name}
}

// bondLinks is a bond0 of two ports (physical functions), as the LAG and
// no-LAG fixtures of rdmatest name them.
func bondLinks(t *testing.T) *drivertest.Links {
	t.Helper()
	links := drivertest.NewLinks()
	links.Add(netns.Link{Name: "bond0", Kind: "bond", EncapType: "ether", MTU: 1500, Up: true})
	for _, p := range []string{"ens3f0np0", "ens3f1np1"} {
		links.Add(netns.Link{Name: p, Kind: "device", EncapType: "ether", MTU: 1500, Up: true})
		if err := links.SetMaster(p, "bond0"); err != nil {
			t.Fatal(err)
		}
	}
	return links
}

func networkRDMAOf(t *testing.T, d testDriver, nid string) networkRDMA {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.networks[nid]
	if !ok || n.RDMA == nil {
		t.Fatalf("network %s not recorded with an RDMA device", nid)
	}
	return *n.RDMA
}

// The kernel's view (RDMA netlink) is asked first: a port that names the
// parent there is its port even where sysfs finds none (no device link,
// no GID entry naming it yet). Without the view (a fake sysfs root, or a
// kernel without RDMA netlink), or when the view names a port that sysfs
// does not show, sysfs decides.
func TestParentPortFromKernelView(t *testing.T) {
	root := t.TempDir()
	if err := rdmatest.BuildMLX5(root, rdmatest.MLX5Options{HCA: "mlx5_0", Netdev: "p0"}); err != nil {
		t.Fatal(err)
	}
	// rxe1 names no netdev in sysfs: only the kernel ties it to p1.
	if err := rdmatest.BuildHCA(root, rdmatest.HCASpec{Name: "rxe1", Uverbs: 1, Ports: []rdmatest.PortSpec{{TableSize: 16, DefaultTypes: []string{rdmatest.TypeV2}}}}); err != nil {
		t.Fatal(err)
	}
	links := drivertest.NewLinks("p0", "p1")
	d := newTestDriverAt(t, links, t.TempDir(), root)
	if d.rdmaPorts != nil {
		t.Fatal("a driver on a fake sysfs root asks the kernel's view")
	}

	err := d.CreateNetwork(netReq("n1", "parent", "p1"))
	var hs *HostSetupError
	if !errors.As(err, &hs) || !strings.Contains(hs.Msg, `parent "p1" has no RDMA device`) {
		t.Fatalf("p1 without the kernel's view: %v, want no RDMA device", err)
	}

	view := &fakePorts{ports: []netns.RdmaPortNetdev{portOf(t, links, "mlx5_0", 1, "p0"), portOf(t, links, "rxe1", 1, "p1")}}
	d.rdmaPorts = view
	if err := d.CreateNetwork(netReq("n1", "parent", "p1")); err != nil {
		t.Fatalf("p1, which the kernel ties to rxe1: %v", err)
	}
	if r := networkRDMAOf(t, d, "n1"); r.HCA != "rxe1" || r.Port != 1 || r.Netdev != "p1" {
		t.Fatalf("n1 on %+v, want rxe1 port 1 on p1", r)
	}
	if view.calls == 0 {
		t.Fatal("the kernel's view was not asked")
	}

	// A port the kernel names that sysfs lacks: sysfs decides (p0 is mlx5_0's).
	view.ports = []netns.RdmaPortNetdev{portOf(t, links, "mlx5_9", 1, "p0")}
	if err := d.CreateNetwork(netReq("n2", "parent", "p0")); err != nil {
		t.Fatalf("p0 with a kernel port sysfs lacks: %v", err)
	}
	if r := networkRDMAOf(t, d, "n2"); r.HCA != "mlx5_0" {
		t.Fatalf("n2 on %+v, want sysfs's mlx5_0", r)
	}
	// A kernel without RDMA netlink: sysfs decides.
	view.ports, view.err = nil, fmt.Errorf("list: %w", netns.ErrNoRdmaNetlink)
	if err := d.CreateNetwork(netReq("n3", "parent", "p0")); err != nil {
		t.Fatalf("p0 without RDMA netlink: %v", err)
	}
}

// The view is used only on the host's own sysfs: a fake tree describes
// other devices than the kernel's.
func TestKernelViewOnlyOnHostSysfs(t *testing.T) {
	view := &fakePorts{}
	links := drivertest.NewLinks("p0")
	fake, err := New(Config{StateDir: t.TempDir(), Links: links, Log: quietLog(), Sysfs: rdma.NewSysfs(hosts(t, "p0")),
		CDIDir: t.TempDir(), RDMAPorts: view})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	if err := fake.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	if fake.rdmaPorts != nil || view.calls != 0 {
		t.Fatalf("a driver on a fake sysfs root asked the kernel's view (%d calls)", view.calls)
	}
	host, err := New(Config{StateDir: t.TempDir(), Links: drivertest.NewLinks(), Log: quietLog(), Sysfs: rdma.NewSysfs("/"),
		CDIDir: t.TempDir(), RDMAPorts: view})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	if host.rdmaPorts != view {
		t.Fatal("a driver on the host's sysfs does not ask the kernel's view")
	}
}

// RoCE LAG: mlx5_bond_0 sits under the first port's PCI function and its
// port's netdev is the bond. The bond, and a VLAN of it, resolve to it, by
// sysfs and by the kernel's view; the first port, enslaved, is refused as
// a port of the bond even though its device link shows mlx5_bond_0.
func TestRoCELAGParent(t *testing.T) {
	for _, withView := range []bool{false, true} {
		t.Run(fmt.Sprintf("kernel view %v", withView), func(t *testing.T) {
			root := t.TempDir()
			if err := rdmatest.BuildMLX5LAG(root, rdmatest.BondOptions{}); err != nil {
				t.Fatal(err)
			}
			links := bondLinks(t)
			d := newTestDriverAt(t, links, t.TempDir(), root)
			if withView {
				d.rdmaPorts = &fakePorts{ports: []netns.RdmaPortNetdev{portOf(t, links, "mlx5_bond_0", 1, "bond0")}}
			}
			if err := d.CreateNetwork(netReq("n1", "parent", "bond0")); err != nil {
				t.Fatalf("parent bond0 with RoCE LAG: %v", err)
			}
			if r := networkRDMAOf(t, d, "n1"); r.HCA != "mlx5_bond_0" || r.Port != 1 || r.Netdev != "bond0" {
				t.Fatalf("bond0 on %+v, want mlx5_bond_0 port 1", r)
			}
			if err := d.CreateNetwork(netReq("n2", "parent", "bond0.7")); err != nil {
				t.Fatalf("parent bond0.7 with RoCE LAG: %v", err)
			}
			if r := networkRDMAOf(t, d, "n2"); r.HCA != "mlx5_bond_0" || r.Port != 1 || r.Netdev != "bond0" {
				t.Fatalf("bond0.7 on %+v, want mlx5_bond_0 port 1 on bond0", r)
			}
			err := d.CreateNetwork(netReq("n3", "parent", "ens3f0np0"))
			wantHostSetup(t, "the bond's first port", err, `parent "ens3f0np0" is a port of bond "bond0"`, "-o parent=bond0)")
		})
	}
}

// A bond whose ports each have their own RDMA device and the bond none (no
// RoCE LAG) is refused, the bond, a new VLAN of it and an existing one,
// by sysfs (where the active port's table holds the bond's default GID,
// which detection alone took for the bond's port) and by the kernel's
// view, naming each port and its HCA, why and the fix.
func TestBondWithoutLAGRefused(t *testing.T) {
	for _, withView := range []bool{false, true} {
		t.Run(fmt.Sprintf("kernel view %v", withView), func(t *testing.T) {
			root := t.TempDir()
			if err := rdmatest.BuildMLX5BondNoLAG(root, rdmatest.BondOptions{}); err != nil {
				t.Fatal(err)
			}
			links := bondLinks(t)
			if _, err := links.CreateVLAN("bond0.9", "bond0", 9, ""); err != nil {
				t.Fatal(err)
			}
			d := newTestDriverAt(t, links, t.TempDir(), root)
			if withView {
				d.rdmaPorts = &fakePorts{ports: []netns.RdmaPortNetdev{
					portOf(t, links, "mlx5_0", 1, "ens3f0np0"), portOf(t, links, "mlx5_1", 1, "ens3f1np1")}}
			}
			before := links.Dump()
			for i, parent := range []string{"bond0", "bond0.7", "bond0.9"} {
				err := d.CreateNetwork(netReq(fmt.Sprintf("nb%d", i), "parent", parent))
				want := []string{`bond "bond0"`, "has no RDMA device of its own",
					"ens3f0np0 (RDMA device mlx5_0 port 1), ens3f1np1 (RDMA device mlx5_1 port 1)",
					"every container's GID entries to every port's table", "sends on its own port",
					"RoCE LAG", "mlx5_bond_0", "ip link set ens3f0np0 nomaster"}
				if parent != "bond0" {
					want = append(want, fmt.Sprintf(`(the real device of parent %q)`, parent))
				}
				wantHostSetup(t, "parent "+parent, err, want...)
			}
			if got := links.Dump(); got != before {
				t.Errorf("refusals changed the links:\n%s\nwant\n%s", got, before)
			}
			// A port taken out of the bond is a parent like any other.
			if err := links.SetMaster("ens3f1np1", ""); err != nil {
				t.Fatal(err)
			}
			if err := d.CreateNetwork(netReq("n1", "parent", "ens3f1np1")); err != nil {
				t.Fatalf("a port freed from the bond: %v", err)
			}
			if r := networkRDMAOf(t, d, "n1"); r.HCA != "mlx5_1" {
				t.Fatalf("ens3f1np1 on %+v, want mlx5_1", r)
			}
		})
	}
}

// With the kernel's view the bond has no port of its own even when the
// active port's default slots name the bond (GID tables hold a bond's
// entries on its ports' tables, and sysfs alone cannot tell): only a port
// the kernel ties to the bond would be its own.
func TestBondWithoutLAGRefusedByTheKernelsView(t *testing.T) {
	root := t.TempDir()
	if err := rdmatest.BuildMLX5BondNoLAG(root, rdmatest.BondOptions{}); err != nil {
		t.Fatal(err)
	}
	def, err := rdmatest.DefaultGID("a0:88:c2:5b:10:00")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range rdmatest.Pair(0, def, "bond0") {
		if err := rdmatest.SetGID(root, "mlx5_0", 1, e.Index, e.GID, e.Type, e.Ndev); err != nil {
			t.Fatal(err)
		}
	}
	links := bondLinks(t)
	d := newTestDriverAt(t, links, t.TempDir(), root)
	d.rdmaPorts = &fakePorts{ports: []netns.RdmaPortNetdev{
		portOf(t, links, "mlx5_0", 1, "ens3f0np0"), portOf(t, links, "mlx5_1", 1, "ens3f1np1")}}
	wantHostSetup(t, "parent bond0", d.CreateNetwork(netReq("nb", "parent", "bond0")),
		`bond "bond0"`, "has no RDMA device of its own", "ens3f1np1 (RDMA device mlx5_1 port 1)")
}

// A network on a bond that loses its own device (RoCE LAG switched off,
// its ports' devices back) says so in its status: nothing else would.
func TestBondThatLostItsDeviceIsAProblem(t *testing.T) {
	root := t.TempDir()
	if err := rdmatest.BuildMLX5BondNoLAG(root, rdmatest.BondOptions{}); err != nil {
		t.Fatal(err)
	}
	links := bondLinks(t)
	d := newTestDriverAt(t, links, t.TempDir(), root)
	// At creation the kernel tied mlx5_0's port to the bond (LAG).
	view := &fakePorts{ports: []netns.RdmaPortNetdev{portOf(t, links, "mlx5_0", 1, "bond0")}}
	d.rdmaPorts = view
	mustT(t, d.CreateNetwork(netReq("n1", "parent", "bond0")))
	if p := d.Status().Networks[0].Problems; len(p) != 0 {
		t.Fatalf("with the bond's own device: problems %q", p)
	}
	view.ports = []netns.RdmaPortNetdev{portOf(t, links, "mlx5_0", 1, "ens3f0np0"), portOf(t, links, "mlx5_1", 1, "ens3f1np1")}
	p := d.Status().Networks[0].Problems
	if len(p) != 1 || !strings.Contains(p[0], `bond "bond0" has no RDMA device of its own`) || !strings.Contains(p[0], "RoCE LAG") {
		t.Fatalf("problems %q, want the bond without a device of its own", p)
	}
}

// CreateNetwork on a parent that is no bond, bridge or other master looks
// its links up one by one: it works while the host's link table churns so
// fast that a dump of it keeps failing (the kernel interrupts it). A
// bond's ports are found by a dump, whose failure is named.
func TestCreateNetworkWhileLinksChurn(t *testing.T) {
	links := bondLinks(t)
	links.Add(netns.Link{Name: "p9", Kind: "veth", EncapType: "ether", MTU: 1500})
	d := newTestDriverAt(t, links, t.TempDir(), hosts(t, "p9"))
	links.ListErr = errors.New("list links: results may be incomplete or inconsistent")
	for i, parent := range []string{"p9", "p9.100"} {
		req := netReq(fmt.Sprintf("n%d", i), "parent", parent)
		req.IPv4 = []Subnet{{Pool: fmt.Sprintf("10.%d.0.0/24", 50+i), Gateway: fmt.Sprintf("10.%d.0.1/24", 50+i)}}
		if err := d.CreateNetwork(req); err != nil {
			t.Errorf("CreateNetwork on %s while the link table churns: %v", parent, err)
		}
	}
	err := d.CreateNetwork(netReq("nbond", "parent", "bond0"))
	if err == nil || !strings.Contains(err.Error(), `list links to find the ports of "bond0"`) || !strings.Contains(err.Error(), "results may be incomplete") {
		t.Errorf("CreateNetwork on a bond while its ports cannot be listed: %v, want the failed listing named", err)
	}
}

// qinqLinks is p0 with VLAN 100 on it and VLAN 200 on that, made by hand.
func qinqLinks(t *testing.T) *drivertest.Links {
	t.Helper()
	links := drivertest.NewLinks("p0")
	for _, v := range []struct {
		name, lower string
		id          int
	}{{"p0.100", "p0", 100}, {"p0.100.200", "p0.100", 200}} {
		if _, err := links.CreateVLAN(v.name, v.lower, v.id, ""); err != nil {
			t.Fatal(err)
		}
	}
	return links
}

// QinQ: a VLAN on a VLAN (any depth, up to the bound) resolves to the real
// device at the bottom, made by hand or by the plugin on a VLAN lower;
// status shows the stack. A stack whose bottom is a port of a bond is
// refused as a new VLAN of such a port is. Soft-RoCE, which sends through
// the netdev stack and so carries every tag, takes such a stack.
func TestQinQParent(t *testing.T) {
	links := qinqLinks(t)
	root := t.TempDir()
	if err := rdmatest.BuildRXE(root, rdmatest.RXEOptions{HCA: "rxe0", Netdev: "p0"}); err != nil {
		t.Fatal(err)
	}
	d := newTestDriverAt(t, links, t.TempDir(), root)
	if err := d.CreateNetwork(netReq("n1", "parent", "p0.100.200")); err != nil {
		t.Fatalf("QinQ parent made by hand: %v", err)
	}
	if err := d.CreateNetwork(netReq("n2", "parent", "p0.100.300")); err != nil {
		t.Fatalf("QinQ parent the plugin makes on p0.100: %v", err)
	}
	for _, nid := range []string{"n1", "n2"} {
		if r := networkRDMAOf(t, d, nid); r.HCA != "rxe0" || r.Netdev != "p0" {
			t.Errorf("%s on %+v, want rxe0 on p0", nid, r)
		}
	}
	if l, err := links.LinkByName("p0.100.300"); err != nil || l.VLANID != 300 {
		t.Fatalf("p0.100.300 not created: %+v %v", l, err)
	}
	st := d.Status()
	for i, want := range []struct {
		lower string
		stack []int
		chain string
	}{
		{"p0.100", []int{100, 200}, "p0.100.200: vlan 200 on p0.100, vlan 100 on p0"},
		{"p0.100", []int{100, 300}, "p0.100.300: vlan 300 on p0.100, vlan 100 on p0"},
	} {
		v := st.Networks[i].VLAN
		if v == nil || v.Lower != want.lower || !reflect.DeepEqual(v.Stack, want.stack) || v.Chain != want.chain {
			t.Errorf("status of %s: vlan %+v, want lower %s, stack %v, chain %q", st.Networks[i].ID, v, want.lower, want.stack, want.chain)
		}
		if p := st.Networks[i].Problems; len(p) != 0 {
			t.Errorf("status of %s on Soft-RoCE: problems %q", st.Networks[i].ID, p)
		}
	}

	// Deeper than the bound: refused, naming the stack.
	lower := "p0"
	for i := 1; i <= maxVLANDepth+1; i++ {
		name := fmt.Sprintf("q%d", i)
		if _, err := links.CreateVLAN(name, lower, i, ""); err != nil {
			t.Fatal(err)
		}
		lower = name
	}
	err := d.CreateNetwork(netReq("n3", "parent", lower))
	var inv *InvalidOptionError
	if !errors.As(err, &inv) || !strings.Contains(err.Error(), fmt.Sprintf("more than %d VLANs", maxVLANDepth)) || !strings.Contains(err.Error(), lower+" on ") {
		t.Fatalf("a stack of %d VLANs: %v, want refused naming it", maxVLANDepth+1, err)
	}

	// The bottom enslaved to a bond: the stack is refused, by the words a
	// new VLAN of a port gets.
	links.Add(netns.Link{Name: "bond1", Kind: "bond", EncapType: "ether", MTU: 1500, Up: true})
	if err := d.DeleteNetwork("n2"); err != nil {
		t.Fatal(err)
	}
	if err := links.SetMaster("p0", "bond1"); err != nil {
		t.Fatal(err)
	}
	err = d.CreateNetwork(netReq("n4", "parent", "p0.100.200"))
	wantHostSetup(t, "a QinQ stack on a bond's port", err,
		`parent "p0.100.200" is a VLAN sub-interface stacked on p0.100 on "p0", which is a port of bond "bond1"`, "bypass bond1", "-o parent=bond1.100.200", "ip link set p0 nomaster")
	err = d.CreateNetwork(netReq("n5", "parent", "p0.100"))
	wantHostSetup(t, "a VLAN on a bond's port", err,
		`parent "p0.100" is a VLAN sub-interface of "p0", which is a port of bond "bond1"`, "bypass bond1", "-o parent=bond1.100")
	err = d.CreateNetwork(netReq("n6", "parent", "p0.100.400"))
	wantHostSetup(t, "a new QinQ VLAN on a bond's port", err,
		`parent "p0.100.400" would be a new VLAN sub-interface stacked on p0.100 on "p0", which is a port of bond "bond1"`, "-o parent=bond1.100.400")
}

// A NIC that builds RoCE frames itself (ConnectX: mlx5) tags each with one
// VLAN, the GID netdev's own: on a VLAN on a VLAN the containers' RoCE
// frames would carry the inner tag only. CreateNetwork refuses such a
// stack, made by hand or to be made on a VLAN, naming the parent, the
// device, its driver, the tag that would be lost and the fix, and creates
// nothing; one VLAN on the port is taken. A network whose parent becomes
// such a stack later names the same reason among its status problems.
func TestQinQParentRefusedWhereTheNICTags(t *testing.T) {
	links := qinqLinks(t)
	d := newTestDriverAt(t, links, t.TempDir(), hosts(t, "p0"))
	err := d.CreateNetwork(netReq("n1", "parent", "p0.100.200"))
	wantHostSetup(t, "QinQ made by hand on mlx5", err,
		`parent "p0.100.200" is a VLAN on a VLAN (p0.100.200 on p0.100 on p0)`, "RDMA device mlx5_0 (kernel driver mlx5_core)",
		"only the inner tag 200, without the outer tag 100", "a single VLAN on the port (-o parent=p0.<vlan id>)", "Soft-RoCE (rxe)")
	err = d.CreateNetwork(netReq("n2", "parent", "p0.100.300"))
	wantHostSetup(t, "QinQ to be made on mlx5", err,
		`parent "p0.100.300" would be a VLAN on a VLAN (p0.100.300 on p0.100 on p0)`, "mlx5_0 (kernel driver mlx5_core)", "only the inner tag 300")
	if links.Has("p0.100.300") {
		t.Error("p0.100.300 created for a refused network")
	}
	if st := d.Status(); len(st.Networks) != 0 {
		t.Fatalf("refused networks recorded: %+v", st.Networks)
	}

	mustT(t, d.CreateNetwork(netReq("n3", "parent", "p0.100")))
	if p := d.Status().Networks[0].Problems; len(p) != 0 {
		t.Fatalf("one VLAN on mlx5: problems %q", p)
	}
	// p0.100 made again by hand, as VLAN 100 on another VLAN.
	mustT(t, links.DeleteLink("p0.100.200"))
	mustT(t, links.DeleteLink("p0.100"))
	for _, v := range []struct {
		name, lower string
		id          int
	}{{"p0.7", "p0", 7}, {"p0.100", "p0.7", 100}} {
		if _, err := links.CreateVLAN(v.name, v.lower, v.id, ""); err != nil {
			t.Fatal(err)
		}
	}
	p := d.Status().Networks[0].Problems
	if len(p) != 1 || !strings.Contains(p[0], `parent "p0.100" is a VLAN on a VLAN (p0.100 on p0.7 on p0)`) || !strings.Contains(p[0], "only the inner tag 100, without the outer tag 7") {
		t.Fatalf("status problems %q, want the stack on mlx5 named", p)
	}
}
