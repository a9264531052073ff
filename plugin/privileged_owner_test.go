package plugin_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/go-plugins-helpers/network"
	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/netns/netnstest"
)

// owner is the mark of the env's daemon instance.
func (e *env) owner() string {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join(e.stateDir, "instance"))
	e.must(err)
	return "rdma-macvlan " + strings.TrimSpace(string(data))
}

// On real links: CreateEndpoint deletes a link with the name it needs only
// if this instance made it; any other is a conflict that names the link and
// the fix, and stays. DeleteEndpoint leaves a link that is not its own.
func TestPrivilegedEndpointLinkOwnership(t *testing.T) {
	e := newEnv(t)
	nid := id("aa91")
	e.must(e.createNetwork(nid, map[string]string{"parent": "p0"}, "10.91.0.0/24"))
	others := []struct {
		name  string
		plant func(ifname string) error
	}{
		{"veth", func(n string) error { return netnstest.CreateVeth(e.host, n, "rmvpeer91", 1500) }},
		{"macvlan of another instance", func(n string) error {
			_, err := e.host.CreateMacvlan(netns.MacvlanSpec{Name: n, Parent: "p0", Mode: "bridge", Alias: "rdma-macvlan 00000000000000ff"})
			return err
		}},
		{"unmarked macvlan", func(n string) error {
			_, err := e.host.CreateMacvlan(netns.MacvlanSpec{Name: n, Parent: "p0", Mode: "bridge"})
			return err
		}},
	}
	for i, c := range others {
		eid := id("ee9" + string(rune('1'+i)))
		ifname := driver.LinkName(eid)
		e.must(c.plant(ifname))
		before, _ := e.link(ifname)
		_, err := e.createEndpoint(nid, eid, "10.91.0.2/24", "", nil)
		if err == nil || !strings.Contains(err.Error(), ifname) || !strings.Contains(err.Error(), "ip link del "+ifname) {
			t.Fatalf("%s under the endpoint's link name: CreateEndpoint %v; want a conflict naming the link and the fix", c.name, err)
		}
		if after, ok := e.link(ifname); !ok || after.Index != before.Index {
			t.Fatalf("%s: the link that is not ours was deleted or replaced", c.name)
		}
		e.must(e.host.DeleteLink(ifname))
	}

	// Ours, left by a crash: replaced.
	eid := id("ee95")
	ifname := driver.LinkName(eid)
	stale, err := e.host.CreateMacvlan(netns.MacvlanSpec{Name: ifname, Parent: "p0", Mode: "bridge", Alias: e.owner()})
	e.must(err)
	_, err = e.createEndpoint(nid, eid, "10.91.0.3/24", "", nil)
	e.must(err)
	if l, ok := e.link(ifname); !ok || l.Index == stale.Index || l.Alias != e.owner() {
		t.Fatalf("stale link of this instance not replaced by a marked new one: %+v %v", l, ok)
	}

	// Someone else's link in the place of the endpoint's: left.
	e.must(e.host.DeleteLink(ifname))
	_, err = e.host.CreateMacvlan(netns.MacvlanSpec{Name: ifname, Parent: "p0", Mode: "bridge", Alias: "someone else"})
	e.must(err)
	e.must(e.c.Call("DeleteEndpoint", network.DeleteEndpointRequest{NetworkID: nid, EndpointID: eid}, nil))
	if _, ok := e.link(ifname); !ok {
		t.Fatal("DeleteEndpoint deleted a link it did not make")
	}
	e.must(e.host.DeleteLink(ifname))
}

// On real links: the VLAN sub-interfaces the driver creates carry its mark;
// one of another owner is never deleted; an orphan of its own (a crash
// lost the network's record) is swept at start.
func TestPrivilegedVLANOwnerMark(t *testing.T) {
	e := newEnv(t)
	e.requireVLAN()
	n1, n2 := id("aa92"), id("aa93")
	e.must(e.createNetwork(n1, map[string]string{"parent": "p0.44"}))
	if v, ok := e.link("p0.44"); !ok || v.Alias != e.owner() {
		t.Fatalf("created vlan %+v: want ifalias %q", v, e.owner())
	}
	_, err := e.host.CreateVLAN("p0.45", "p0", 45, "rdma-macvlan 00000000000000ff")
	e.must(err)
	e.must(e.createNetwork(n2, map[string]string{"parent": "p0.45"}))
	e.must(e.c.Call("DeleteNetwork", network.DeleteNetworkRequest{NetworkID: n2}, nil))
	if _, ok := e.link("p0.45"); !ok {
		t.Fatal("deleted another instance's vlan")
	}
	e.stop()
	e.must(os.Remove(filepath.Join(e.stateDir, "networks", n1+".json")))
	e.start()
	if _, ok := e.link("p0.44"); ok {
		t.Fatal("orphan vlan of this instance not swept at start")
	}
	if _, ok := e.link("p0.45"); !ok {
		t.Fatal("another instance's vlan swept at start")
	}
	e.must(e.host.DeleteLink("p0.45"))
}
