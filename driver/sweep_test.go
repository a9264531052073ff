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
// with the prefix, not a link of another kind. (TestPrivilegedOrphanSweep
// does the same on real links.)
func TestOrphanSweepDeletesOnlyOwnOrphans(t *testing.T) {
	links := drivertest.NewLinks("p0")
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
	links.Add(drivertest.MacvlanOf(links, unmarked, "p0", ""))
	links.Add(netns.Link{Name: veth, Kind: "veth", EncapType: "ether", MTU: 1500, Alias: owner})
	before := links.Names()

	d2 := newTestDriverAt(t, links, dir, root)
	defer d2.Close()
	want := slices.DeleteFunc(before, func(n string) bool { return n == orphan })
	if got := links.Names(); !slices.Equal(got, want) {
		t.Fatalf("links after the sweep %v, want %v (only %s, this instance's link without a record, deleted)", got, want, orphan)
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
