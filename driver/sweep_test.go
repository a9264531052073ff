package driver

import (
	"reflect"
	"slices"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
)

// The orphan sweep at start deletes the links this instance made that no
// record owns, and nothing else: not its recorded endpoints' links, not
// another instance's links with the same prefix, not an unmarked macvlan
// with the prefix on a parent of no network of this instance (see
// TestOrphanSweepDeletesUnmarkedLinksOfACrash for those on its networks'
// parents), not a link of another kind. (TestPrivilegedOrphanSweep does
// the same on real links.)
func TestOrphanSweepDeletesOnlyOwnOrphans(t *testing.T) {
	links := drivertest.NewLinks("p0", "p1")
	dir := t.TempDir()
	root := hosts(t, "p0")
	d := newTestDriverAt(t, links, dir, root)
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateEndpoint(CreateEndpointRequest{NetworkID: "n1", EndpointID: "kept"}); err != nil {
		t.Fatal(err)
	}
	owner := d.owner
	d.Close()

	orphan, foreign, unmarked, veth := LinkName("orphan"), LinkName("foreign"), LinkName("unmarked"), LinkName("veth")
	links.Add(drivertest.MacvlanOf(links, orphan, "p0", owner))
	links.Add(drivertest.MacvlanOf(links, foreign, "p0", "rdma-macvlan 00000000000000ff"))
	links.Add(drivertest.MacvlanOf(links, unmarked, "p1", ""))
	links.Add(netns.Link{Name: veth, Kind: "veth", EncapType: "ether", MTU: 1500, Alias: owner})
	before := links.Names()

	d2 := newTestDriverAt(t, links, dir, root)
	defer d2.Close()
	want := slices.DeleteFunc(before, func(n string) bool { return n == orphan })
	if got := links.Names(); !slices.Equal(got, want) {
		t.Fatalf("links after the sweep %v, want %v (only %s, this instance's link without a record, deleted)", got, want, orphan)
	}
}

// A crash between creating a container link and setting its mark (two
// netlink calls: the kernel ignores an ifalias given at creation) leaves a
// link with no mark at all. The sweep at the next start deletes such a
// link when it is a macvlan with the driver's prefix on the parent of one
// of this instance's networks (a VLAN it made included) that no record
// names; an unmarked one on a parent of no network of this instance,
// another instance's, one without the prefix and a recorded endpoint's
// stay.
func TestOrphanSweepDeletesUnmarkedLinksOfACrash(t *testing.T) {
	links := drivertest.NewLinks("p0", "p1", "p2")
	dir := t.TempDir()
	root := hosts(t, "p0", "p1")
	d := newTestDriverAt(t, links, dir, root)
	for _, n := range []struct{ id, parent, pool, gw string }{{"n1", "p0", "10.5.0.0/24", "10.5.0.1/24"}, {"n2", "p1.100", "10.6.0.0/24", "10.6.0.1/24"}} {
		req := netReq(n.id, "parent", n.parent)
		req.IPv4 = []Subnet{{Pool: n.pool, Gateway: n.gw}}
		if err := d.CreateNetwork(req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.CreateEndpoint(CreateEndpointRequest{NetworkID: "n1", EndpointID: "kept"}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	// The recorded endpoint's link lost its mark (a crash of the release
	// before the mark, or someone's ip link set alias ""): still its.
	if err := links.SetAlias(LinkName("kept"), ""); err != nil {
		t.Fatal(err)
	}
	crashed0, crashed1 := LinkName("crash0"), LinkName("crash1")
	links.Add(drivertest.MacvlanOf(links, crashed0, "p0", ""))
	links.Add(drivertest.MacvlanOf(links, crashed1, "p1.100", ""))
	elsewhere, foreign := LinkName("elsewhere"), LinkName("foreign")
	links.Add(drivertest.MacvlanOf(links, elsewhere, "p2", ""))
	links.Add(drivertest.MacvlanOf(links, foreign, "p0", "rdma-macvlan 00000000000000ff"))
	links.Add(drivertest.MacvlanOf(links, "mv0", "p0", ""))
	before := links.Names()

	d2 := newTestDriverAt(t, links, dir, root)
	defer d2.Close()
	want := slices.DeleteFunc(before, func(n string) bool { return n == crashed0 || n == crashed1 })
	if got := links.Names(); !slices.Equal(got, want) {
		t.Fatalf("links after the sweep %v, want %v (only %s and %s, unmarked links with the prefix on the parents of this instance's networks, deleted)", got, want, crashed0, crashed1)
	}
}

// Join re-creates an endpoint's link lost since CreateEndpoint (a reboot
// between the two) as CreateEndpoint made it: same name, parent, MAC, MTU,
// mode and owner alias, so that the engine finds the link it was told of.
func TestJoinRecreatesLostLink(t *testing.T) {
	links := drivertest.NewLinks("p0")
	d := newTestDriverAt(t, links, t.TempDir(), hosts(t, "p0"))
	if err := d.CreateNetwork(netReq("n1", "parent", "p0", "macvlan_mode", "private", "mtu", "1400")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateEndpoint(CreateEndpointRequest{NetworkID: "n1", EndpointID: "e1", IPv4: "10.5.0.2/24"}); err != nil {
		t.Fatal(err)
	}
	name := LinkName("e1")
	made, err := links.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := links.DeleteLink(name); err != nil {
		t.Fatal(err)
	}
	resp, err := d.Join("n1", "e1", "/sb/e1")
	if err != nil {
		t.Fatalf("Join after the link was lost: %v", err)
	}
	got, err := links.LinkByName(name)
	if err != nil {
		t.Fatalf("Join answered %+v without re-creating link %s: %v", resp, name, err)
	}
	got.Index, made.Index = 0, 0
	if !reflect.DeepEqual(got, made) || got.Alias != d.owner {
		t.Fatalf("link re-created as %+v, CreateEndpoint made %+v", got, made)
	}
}
