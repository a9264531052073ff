package plugin_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/netns/netnstest"
	"github.com/rdma-macvlan/rdma-macvlan/plugin/plugintest"
	"golang.org/x/sys/unix"
)

// wantCallError fails t unless err is an error answer that says every one
// of want.
func wantCallError(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	var ce *plugintest.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: want an error answer, got %v", what, err)
	}
	for _, w := range want {
		if !strings.Contains(ce.Msg, w) {
			t.Errorf("%s: error %q does not say %q", what, ce.Msg, w)
		}
	}
}

// On the real kernel: a port of a Linux bridge takes no macvlan (the kernel
// answers EBUSY), so CreateNetwork refuses it in words and changes nothing;
// a parent put into a bridge after its network was created makes
// CreateEndpoint say the same instead of "device or resource busy"; freed,
// the parent serves containers again, and while a container's link is on
// it the kernel will not enslave it.
func TestPrivilegedEnslavedParent(t *testing.T) {
	e := newEnv(t)
	e.must(netnstest.CreateVeth(e.host, "q0", "q0peer", 1500))
	e.addHCA("q0")
	e.must(netnstest.CreateBridge(e.host, "br0"))
	e.must(netnstest.SetMaster(e.host, "p0", "br0"))

	// What the kernel answers, which the driver puts into words.
	if l, err := e.host.CreateMacvlan(netns.MacvlanSpec{Name: "mvprobe", Parent: "p0", Mode: "bridge"}); !errors.Is(err, unix.EBUSY) {
		if err == nil {
			_ = e.host.DeleteLink(l.Name)
		}
		t.Fatalf("macvlan on a bridge port: %v, want EBUSY from the kernel", err)
	}

	wantLinks, wantState := linkNames(t, e.host), e.stateFiles()
	err := e.createNetwork(id("ba01"), map[string]string{"parent": "p0"}, "10.93.0.0/24")
	wantCallError(t, "CreateNetwork on a bridge port", err,
		`parent "p0" is a port of bridge "br0"`, "EBUSY", "-o parent=br0", "ip link set p0 nomaster")
	if got := linkNames(t, e.host); !slices.Equal(got, wantLinks) {
		t.Errorf("refused CreateNetwork changed the links: %v, want %v", got, wantLinks)
	}
	if got := e.stateFiles(); !slices.Equal(got, wantState) {
		t.Errorf("refused CreateNetwork changed the state: %v, want %v", got, wantState)
	}

	nid := id("ba02")
	e.must(e.createNetwork(nid, map[string]string{"parent": "q0"}, "10.93.1.0/24"))
	e.must(netnstest.SetMaster(e.host, "q0", "br0"))
	eid := id("eb01")
	_, err = e.createEndpoint(nid, eid, "10.93.1.2/24", "", nil)
	wantCallError(t, "CreateEndpoint on a parent enslaved after creation", err,
		"network "+driver.ShortID(nid)+": ", `parent "q0" is a port of bridge "br0"`, "-o parent=br0", "ip link set q0 nomaster")
	if _, ok := e.link(driver.LinkName(eid)); ok {
		t.Error("refused CreateEndpoint left its link")
	}

	e.must(netnstest.SetMaster(e.host, "q0", ""))
	_, err = e.createEndpoint(nid, eid, "10.93.1.2/24", "", nil)
	e.must(err)
	if l, ok := e.link(driver.LinkName(eid)); !ok || l.Kind != "macvlan" {
		t.Fatalf("container link on q0 once freed: %+v", l)
	}
	// The other way round the kernel refuses too: a port with a macvlan
	// cannot join a bridge, so a network's parent is not taken from under
	// its running containers.
	if err := netnstest.SetMaster(e.host, "q0", "br0"); !errors.Is(err, unix.EBUSY) {
		t.Errorf("enslaving q0 with a container link on it: %v, want EBUSY", err)
	}
	if l, ok := e.link("q0"); !ok || l.MasterIndex != 0 {
		t.Errorf("q0 after the refused enslave: %+v", l)
	}
}
