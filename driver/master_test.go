package driver

import (
	"errors"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
)

// wantHostSetup fails t unless err is a HostSetupError whose text says
// every one of want.
func wantHostSetup(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	var hs *HostSetupError
	if !errors.As(err, &hs) {
		t.Fatalf("%s: %v (%T), want a HostSetupError", what, err, err)
	}
	for _, w := range want {
		if !strings.Contains(hs.Msg, w) {
			t.Errorf("%s: error %q does not say %q", what, hs.Msg, w)
		}
	}
}

// A port of a bond, bridge, OVS bridge or team gives no macvlan a home
// (its master holds its receive handler; the kernel answers EBUSY):
// CreateNetwork refuses it, and a new VLAN on it, naming the master and the
// fix, and changes nothing. Freed from its master, the same parent is
// taken.
func TestParentPortOfMasterRefused(t *testing.T) {
	for _, c := range []struct {
		kind, master string
		words        string // how the message names the master's kind
		fix          []string
		vlanFix      string
	}{
		{"bridge", "br0", "bridge", []string{"-o parent=br0)", "ip link set p0 nomaster"}, "-o parent=br0.7"},
		{"bond", "bond0", "bond", []string{"-o parent=bond0)", "ip link set p0 nomaster"}, "-o parent=bond0.7"},
		{"team", "team0", "team", []string{"-o parent=team0)", "ip link set p0 nomaster"}, "-o parent=team0.7"},
		{"openvswitch", "ovs-system", "Open vSwitch datapath", []string{"out of its Open vSwitch bridge (ovs-vsctl del-port p0)", "internal port"}, "ovs-vsctl del-port p0"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			links := drivertest.NewLinks("p0")
			links.Add(netns.Link{Name: c.master, Kind: c.kind, EncapType: "ether", MTU: 1500, Up: true})
			if err := links.SetMaster("p0", c.master); err != nil {
				t.Fatal(err)
			}
			d := newTestDriver(t, links, t.TempDir())
			before := links.Dump()

			err := d.CreateNetwork(netReq("n1", "parent", "p0"))
			wantHostSetup(t, "CreateNetwork on a port", err,
				append([]string{`parent "p0" is a port of ` + c.words + ` "` + c.master + `"`, "master " + c.master, "EBUSY"}, c.fix...)...)

			err = d.CreateNetwork(netReq("n2", "parent", "p0.7"))
			wantHostSetup(t, "CreateNetwork on a new VLAN of a port", err,
				`parent "p0.7" would be a new VLAN sub-interface of "p0", which is a port of `+c.words+` "`+c.master+`"`, "bypass "+c.master, c.vlanFix)

			if got := links.Dump(); got != before {
				t.Errorf("refused requests changed the links:\n%s\nwant\n%s", got, before)
			}
			if n := len(d.Status().Networks); n != 0 {
				t.Errorf("status shows %d networks after refusals", n)
			}

			if err := links.SetMaster("p0", ""); err != nil {
				t.Fatal(err)
			}
			if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
				t.Fatalf("CreateNetwork on p0 freed from %s: %v", c.master, err)
			}
			if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); err != nil {
				t.Fatalf("CreateEndpoint on p0 freed from %s: %v", c.master, err)
			}
		})
	}
}

// A VRF links its ports as an upper device and takes no receive handler:
// the kernel makes a macvlan on a VRF port, so the driver takes the port as
// a parent, and as the lower device of a new VLAN.
func TestParentPortOfVRFAccepted(t *testing.T) {
	links := drivertest.NewLinks("p0")
	links.Add(netns.Link{Name: "vrf-blue", Kind: "vrf", EncapType: "ether", MTU: 65575, Up: true})
	if err := links.SetMaster("p0", "vrf-blue"); err != nil {
		t.Fatal(err)
	}
	d := newTestDriver(t, links, t.TempDir())
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatalf("CreateNetwork on a VRF port: %v", err)
	}
	if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); err != nil {
		t.Fatalf("CreateEndpoint on a VRF port: %v", err)
	}
	if l, err := links.LinkByName(LinkName("e1")); err != nil || l.Kind != "macvlan" {
		t.Fatalf("container link on a VRF port: %+v, %v", l, err)
	}
	if err := d.CreateNetwork(netReq("n2", "parent", "p0.8")); err != nil {
		t.Fatalf("CreateNetwork on a new VLAN of a VRF port: %v", err)
	}
}

// A parent enslaved after its network was created: CreateEndpoint, and
// Join re-creating a link a crash lost, say what CreateNetwork would have
// said (which master, what to do) instead of the kernel's bare EBUSY, and
// leave nothing behind; freed again, the network serves containers.
func TestParentEnslavedAfterCreation(t *testing.T) {
	links := drivertest.NewLinks("p0")
	links.Add(netns.Link{Name: "bond0", Kind: "bond", EncapType: "ether", MTU: 1500, Up: true})
	d := newTestDriver(t, links, t.TempDir())
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); err != nil {
		t.Fatal(err)
	}
	// A crash lost e1's link; then the administrator put p0 into bond0
	// (which the kernel allows only once no macvlan is left on p0).
	if err := links.DeleteLink(LinkName("e1")); err != nil {
		t.Fatal(err)
	}
	if err := links.SetMaster("p0", "bond0"); err != nil {
		t.Fatal(err)
	}
	words := []string{`parent "p0" is a port of bond "bond0"`, "-o parent=bond0)", "ip link set p0 nomaster"}

	_, err := d.CreateEndpoint(ep("n1", "e2", "10.5.0.3/24"))
	wantHostSetup(t, "CreateEndpoint on a parent enslaved later", err, append([]string{"network " + ShortID("n1") + ": "}, words...)...)
	if links.Has(LinkName("e2")) {
		t.Error("refused CreateEndpoint left a link")
	}
	_, err = d.Join("n1", "e1", "/sb/e1")
	wantHostSetup(t, "Join re-creating a lost link on a parent enslaved later", err, words...)

	if err := links.SetMaster("p0", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateEndpoint(ep("n1", "e2", "10.5.0.3/24")); err != nil {
		t.Fatalf("CreateEndpoint once p0 is freed: %v", err)
	}
	if _, err := d.Join("n1", "e1", "/sb/e1"); err != nil {
		t.Fatalf("Join once p0 is freed: %v", err)
	}
}
