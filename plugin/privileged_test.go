package plugin_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/go-plugins-helpers/network"
	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/netns/netnstest"
	"github.com/rdma-macvlan/rdma-macvlan/plugin/plugintest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

func TestPrivilegedLifecycle(t *testing.T) {
	for _, mode := range []string{"bridge", "private", "vepa", "passthru"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			nid, eid := id("aa01"), id("ee01")
			e.must(e.createNetwork(nid, map[string]string{"parent": "p0", "mtu": "1400", "macvlan_mode": mode}, "10.9.0.0/24 gw 10.9.0.254/24"))

			mac, err := e.createEndpoint(nid, eid, "10.9.0.2/24", "", nil)
			e.must(err)
			ifname := driver.LinkName(eid)
			l, ok := e.link(ifname)
			if !ok {
				t.Fatalf("link %s not created; links: %v", ifname, linkNames(t, e.host))
			}
			p0, _ := e.link("p0")
			if l.Kind != "macvlan" || l.MacvlanMode != mode || l.MTU != 1400 || l.ParentIndex != p0.Index {
				t.Fatalf("link %+v: want macvlan mode %s mtu 1400 on p0 (index %d)", l, mode, p0.Index)
			}
			if mode != "passthru" && (mac == "" || mac != l.MAC.String()) {
				t.Fatalf("CreateEndpoint answered MAC %q, link has %s", mac, l.MAC)
			}

			res, err := e.join(nid, eid)
			e.must(err)
			if res.InterfaceName.SrcName != ifname || res.InterfaceName.DstPrefix != "eth" || res.Gateway != "10.9.0.254" || !res.DisableGatewayService {
				t.Fatalf("Join answered %+v", res)
			}

			// What libnetwork does after Join.
			ctr := sandbox(t)
			e.must(netnstest.MoveInto(e.host, ctr, ifname, "eth0", nil, cidr(t, "10.9.0.2/24")))
			if _, ok := e.link(ifname); ok {
				t.Fatal("link still in the host namespace after the move")
			}
			in, err := ctr.LinkByName("eth0")
			if err != nil || !in.Up || in.MTU != 1400 {
				t.Fatalf("container link: %+v %v", in, err)
			}
			st, err := e.c.Status()
			e.must(err)
			if len(st.Networks) != 1 || len(st.Networks[0].Endpoints) != 1 || st.Networks[0].Endpoints[0].IPv4 != "10.9.0.2" ||
				st.Networks[0].Endpoints[0].Ifname != ifname || st.Networks[0].Parent != "p0" {
				t.Fatalf("status: %+v", st)
			}

			e.must(e.c.Call("Leave", network.LeaveRequest{NetworkID: nid, EndpointID: eid}, nil))
			e.must(netnstest.MoveBack(ctr, e.host, "eth0", ifname))
			e.must(e.c.Call("DeleteEndpoint", network.DeleteEndpointRequest{NetworkID: nid, EndpointID: eid}, nil))
			if _, ok := e.link(ifname); ok {
				t.Fatal("DeleteEndpoint left the link")
			}
			e.must(e.c.Call("DeleteNetwork", network.DeleteNetworkRequest{NetworkID: nid}, nil))
			if got := linkNames(t, e.host); !slices.Equal(got, []string{"lo", "p0", "p0peer"}) {
				t.Fatalf("links left: %v", got)
			}
			if f := e.stateFiles(); len(f) != 0 {
				t.Fatalf("state left: %v", f)
			}
		})
	}
}

func TestPrivilegedMACAndEndpointMTU(t *testing.T) {
	e := newEnv(t)
	nid, eid := id("aa02"), id("ee02")
	e.must(e.createNetwork(nid, map[string]string{"parent": "p0"}, "10.9.0.0/24"))
	mac, err := e.createEndpoint(nid, eid, "10.9.0.3/24", "02:42:0a:09:00:03", map[string]any{
		"mtu": "1300", "com.docker.network.endpoint.exposedports": []any{map[string]any{"Proto": 6, "Port": 80}},
	})
	e.must(err)
	if mac != "" {
		t.Fatalf("driver answered a MAC (%s) although Docker sent one", mac)
	}
	l, ok := e.link(driver.LinkName(eid))
	if !ok || l.MAC.String() != "02:42:0a:09:00:03" || l.MTU != 1300 {
		t.Fatalf("link %+v: want Docker's MAC and mtu 1300", l)
	}
	// The network's MTU is the parent's when not given.
	st, _ := e.c.Status()
	if st.Networks[0].MTU != 1500 {
		t.Fatalf("network MTU %d, want the parent's 1500", st.Networks[0].MTU)
	}
}

// Without -o mtu a new container takes the parent's MTU at its start, as
// with the built-in macvlan: raising the parent after the network was
// created raises new containers' MTU; lowering it below a network's -o mtu
// is refused in words instead of the kernel's EINVAL.
func TestPrivilegedMTUFollowsParent(t *testing.T) {
	e := newEnv(t)
	follow, fixed := id("aa0f"), id("aa0e")
	e.must(e.createNetwork(follow, map[string]string{"parent": "p0"}, "10.9.0.0/24"))
	e.must(netnstest.SetMTU(e.host, "p0", 1600))
	eid := id("ee0f")
	_, err := e.createEndpoint(follow, eid, "10.9.0.3/24", "", nil)
	e.must(err)
	if l, ok := e.link(driver.LinkName(eid)); !ok || l.MTU != 1600 {
		t.Fatalf("link %+v: want the parent's new MTU 1600", l)
	}
	st, _ := e.c.Status()
	if n := st.Networks[0]; n.MTU != 1600 || !n.MTUFromParent {
		t.Fatalf("status mtu %d from parent %v: want 1600 from the parent", n.MTU, n.MTUFromParent)
	}

	e.must(e.createNetwork(fixed, map[string]string{"parent": "p0", "com.docker.network.driver.mtu": "1550"}, "10.9.1.0/24"))
	eid2 := id("ee0e")
	_, err = e.createEndpoint(fixed, eid2, "10.9.1.3/24", "", nil)
	e.must(err)
	if l, ok := e.link(driver.LinkName(eid2)); !ok || l.MTU != 1550 {
		t.Fatalf("link %+v: want the network's mtu 1550 (given as com.docker.network.driver.mtu)", l)
	}
	e.must(netnstest.SetMTU(e.host, "p0", 1500))
	_, err = e.createEndpoint(fixed, id("ee0d"), "10.9.1.4/24", "", nil)
	if err == nil || !strings.Contains(err.Error(), "now has MTU 1500") || !strings.Contains(err.Error(), "ip link set p0 mtu 1550") {
		t.Fatalf("endpoint on a network whose mtu 1550 exceeds its parent's 1500: %v", err)
	}
	// The restart keeps following the parent.
	e.restart()
	eid3 := id("ee0c")
	_, err = e.createEndpoint(follow, eid3, "10.9.0.5/24", "", nil)
	e.must(err)
	if l, ok := e.link(driver.LinkName(eid3)); !ok || l.MTU != 1500 {
		t.Fatalf("link %+v after restart: want the parent's MTU 1500", l)
	}
}

func TestPrivilegedVLANLifecycle(t *testing.T) {
	e := newEnv(t)
	e.requireVLAN()
	n1, n2, n3 := id("aa11"), id("aa12"), id("aa13")
	e.must(e.createNetwork(n1, map[string]string{"parent": "p0.42"}))
	v, ok := e.link("p0.42")
	p0, _ := e.link("p0")
	if !ok || v.Kind != "vlan" || v.VLANID != 42 || v.ParentIndex != p0.Index || !v.Up {
		t.Fatalf("vlan sub-interface: %+v %v", v, ok)
	}
	// A second network on the same VLAN shares it; it goes with the last.
	e.must(e.createNetwork(n2, map[string]string{"parent": "p0.42"}))
	e.must(e.c.Call("DeleteNetwork", network.DeleteNetworkRequest{NetworkID: n1}, nil))
	if _, ok := e.link("p0.42"); !ok {
		t.Fatal("vlan deleted while another network still uses it")
	}
	eid := id("ee11")
	_, err := e.createEndpoint(n2, eid, "10.1.0.2/24", "", nil)
	e.must(err)
	if l, _ := e.link(driver.LinkName(eid)); l.ParentIndex != v.Index {
		t.Fatalf("endpoint link not on the vlan: %+v", l)
	}
	e.must(e.c.Call("DeleteEndpoint", network.DeleteEndpointRequest{NetworkID: n2, EndpointID: eid}, nil))
	e.must(e.c.Call("DeleteNetwork", network.DeleteNetworkRequest{NetworkID: n2}, nil))
	if _, ok := e.link("p0.42"); ok {
		t.Fatal("vlan the driver created survived its last network")
	}

	// A VLAN that existed before is never deleted.
	if _, err := e.host.CreateVLAN("p0.43", "p0", 43, ""); err != nil {
		t.Fatal(err)
	}
	e.must(e.createNetwork(n3, map[string]string{"parent": "p0.43"}))
	e.must(e.c.Call("DeleteNetwork", network.DeleteNetworkRequest{NetworkID: n3}, nil))
	if _, ok := e.link("p0.43"); !ok {
		t.Fatal("DeleteNetwork deleted a vlan it did not create")
	}
}

func TestPrivilegedRestartMidLife(t *testing.T) {
	e := newEnv(t)
	nid, eid, eid2 := id("aa21"), id("ee21"), id("ee22")
	e.must(e.createNetwork(nid, map[string]string{"parent": "p0", "mtu": "1450"}, "10.7.0.0/24 gw 10.7.0.1/24"))
	_, err := e.createEndpoint(nid, eid, "10.7.0.2/24", "", nil)
	e.must(err)
	_, err = e.join(nid, eid)
	e.must(err)
	ctr := sandbox(t)
	ifname := driver.LinkName(eid)
	e.must(netnstest.MoveInto(e.host, ctr, ifname, "eth0", nil, cidr(t, "10.7.0.2/24")))
	_, err = e.createEndpoint(nid, eid2, "10.7.0.3/24", "", nil)
	e.must(err)

	e.stop()
	// While the daemon is down the second endpoint's link is lost (a crash
	// between its record and Join, an operator's ip link del).
	e.must(e.host.DeleteLink(driver.LinkName(eid2)))
	e.start()

	// Join re-creates it.
	res, err := e.join(nid, eid2)
	e.must(err)
	if l, ok := e.link(res.InterfaceName.SrcName); !ok || l.MTU != 1450 || l.Kind != "macvlan" {
		t.Fatalf("Join after restart: link %+v %v", l, ok)
	}
	// A repeated CreateNetwork for a restored network (the same request,
	// options in another order) succeeds.
	e.must(e.createNetwork(nid, map[string]string{"mtu": "1450", "parent": "p0"}, "10.7.0.0/24 gw 10.7.0.1/24"))
	st, err := e.c.Status()
	e.must(err)
	if len(st.Networks) != 1 || len(st.Networks[0].Endpoints) != 2 || st.Networks[0].MTU != 1450 {
		t.Fatalf("status after restart: %+v", st)
	}

	// Finish both life cycles.
	e.must(e.c.Call("Leave", network.LeaveRequest{NetworkID: nid, EndpointID: eid}, nil))
	e.must(netnstest.MoveBack(ctr, e.host, "eth0", ifname))
	e.must(e.c.Call("DeleteEndpoint", network.DeleteEndpointRequest{NetworkID: nid, EndpointID: eid}, nil))
	e.must(e.c.Call("Leave", network.LeaveRequest{NetworkID: nid, EndpointID: eid2}, nil))
	e.must(e.c.Call("DeleteEndpoint", network.DeleteEndpointRequest{NetworkID: nid, EndpointID: eid2}, nil))
	e.must(e.c.Call("DeleteNetwork", network.DeleteNetworkRequest{NetworkID: nid}, nil))
	if got := linkNames(t, e.host); !slices.Equal(got, []string{"lo", "p0", "p0peer"}) {
		t.Fatalf("links left: %v", got)
	}
	if f := e.stateFiles(); len(f) != 0 {
		t.Fatalf("state left: %v", f)
	}
}

func TestPrivilegedRestartRestoresVLAN(t *testing.T) {
	e := newEnv(t)
	e.requireVLAN()
	nid := id("aa23")
	e.must(e.createNetwork(nid, map[string]string{"parent": "p0.7"}))
	e.stop()
	e.must(e.host.DeleteLink("p0.7"))
	e.start()
	if v, ok := e.link("p0.7"); !ok || v.VLANID != 7 {
		t.Fatal("owned vlan sub-interface not re-created at start")
	}
	e.must(e.c.Call("DeleteNetwork", network.DeleteNetworkRequest{NetworkID: nid}, nil))
	if _, ok := e.link("p0.7"); ok {
		t.Fatal("vlan left after its network was deleted")
	}
}

func TestPrivilegedRestartKeepsContainerLink(t *testing.T) {
	e := newEnv(t)
	nid, eid := id("aa31"), id("ee31")
	e.must(e.createNetwork(nid, map[string]string{"parent": "p0"}, "10.3.0.0/24"))
	_, err := e.createEndpoint(nid, eid, "10.3.0.2/24", "", nil)
	e.must(err)
	_, err = e.join(nid, eid)
	e.must(err)
	ctr := sandbox(t)
	ifname := driver.LinkName(eid)
	e.must(netnstest.MoveInto(e.host, ctr, ifname, "eth0", nil, cidr(t, "10.3.0.2/24")))

	e.restart()
	if _, err := ctr.LinkByName("eth0"); err != nil {
		t.Fatalf("container lost its link across a plugin restart: %v", err)
	}
	e.must(e.c.Call("Leave", network.LeaveRequest{NetworkID: nid, EndpointID: eid}, nil))
	e.must(netnstest.MoveBack(ctr, e.host, "eth0", ifname))
	// A restart between Leave and DeleteEndpoint must not sweep the link
	// (it belongs to a known endpoint)...
	e.restart()
	if _, ok := e.link(ifname); !ok {
		t.Fatal("restart swept a known endpoint's link")
	}
	// ...and DeleteEndpoint afterwards removes it.
	e.must(e.c.Call("DeleteEndpoint", network.DeleteEndpointRequest{NetworkID: nid, EndpointID: eid}, nil))
	if _, ok := e.link(ifname); ok {
		t.Fatal("link left after DeleteEndpoint")
	}
}

func TestPrivilegedOrphanSweep(t *testing.T) {
	e := newEnv(t)
	nid, kept, lost := id("aa41"), id("ee41"), id("ee42")
	e.must(e.createNetwork(nid, map[string]string{"parent": "p0"}))
	for _, eid := range []string{kept, lost} {
		_, err := e.createEndpoint(nid, eid, "", "", nil)
		e.must(err)
	}
	e.stop()
	// A crash between creating a link and recording its endpoint leaves a
	// link of this instance that no record owns: simulate it by losing the
	// record.
	e.must(os.Remove(filepath.Join(e.stateDir, "endpoints", lost+".json")))
	// So does a crash between creating a link and marking it: an unmarked
	// macvlan with the prefix on the network's parent.
	if _, err := e.host.CreateMacvlan(netns.MacvlanSpec{Name: "rmvdeadbeef0002", Parent: "p0", Mode: "bridge"}); err != nil {
		t.Fatal(err)
	}
	// Links this instance did not make stay: another rdma-macvlan instance's
	// (same prefix, another ifalias), an unmarked macvlan with the prefix
	// on a parent of no network of this instance, a non-macvlan with the
	// prefix, anything else.
	e.must(func() error {
		_, err := e.host.CreateMacvlan(netns.MacvlanSpec{Name: "rmvdeadbeef0001", Parent: "p0", Mode: "bridge", Alias: "rdma-macvlan 00000000000000ff"})
		return err
	}())
	e.must(netnstest.CreateVeth(e.host, "p1", "p1peer", 1500))
	for _, l := range [][2]string{{"rmvdeadbeef0003", "p1"}, {"other0", "p0"}} {
		if _, err := e.host.CreateMacvlan(netns.MacvlanSpec{Name: l[0], Parent: l[1], Mode: "bridge"}); err != nil {
			t.Fatal(err)
		}
	}
	e.must(netnstest.CreateVeth(e.host, "rmvveth0", "rmvveth1", 1500))
	e.start()
	got := linkNames(t, e.host)
	want := []string{"lo", "other0", "p0", "p0peer", "p1", "p1peer", driver.LinkName(kept), "rmvdeadbeef0001", "rmvdeadbeef0003", "rmvveth0", "rmvveth1"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after the sweep links are %v, want %v", got, want)
	}
}

func TestPrivilegedUnknownIDs(t *testing.T) {
	e := newEnv(t)
	nid, eid := id("aa51"), id("ee51")
	e.must(e.c.Call("Leave", network.LeaveRequest{NetworkID: nid, EndpointID: eid}, nil))
	e.must(e.c.Call("DeleteEndpoint", network.DeleteEndpointRequest{NetworkID: nid, EndpointID: eid}, nil))
	e.must(e.c.Call("DeleteNetwork", network.DeleteNetworkRequest{NetworkID: nid}, nil))
	var info network.InfoResponse
	e.must(e.c.Call("EndpointOperInfo", network.InfoRequest{NetworkID: nid, EndpointID: eid}, &info))
	_, err := e.join(nid, eid)
	if err == nil || !strings.Contains(err.Error(), "not known to rdma-macvlan") {
		t.Fatalf("Join of an unknown endpoint: %v", err)
	}
	_, err = e.createEndpoint(nid, eid, "", "", nil)
	if err == nil || !strings.Contains(err.Error(), "docker network rm") {
		t.Fatalf("CreateEndpoint on an unknown network: %v", err)
	}
	for _, op := range []string{"DiscoverNew", "DiscoverDelete", "ProgramExternalConnectivity", "RevokeExternalConnectivity", "FreeNetwork"} {
		e.must(e.c.Call(op, map[string]any{"NetworkID": nid, "EndpointID": eid}, nil))
	}
	var caps struct {
		Scope, ConnectivityScope string
		GwAllocChecker           bool
	}
	e.must(e.c.Call("GetCapabilities", struct{}{}, &caps))
	if caps.Scope != "local" || caps.ConnectivityScope != "global" || !caps.GwAllocChecker {
		t.Fatalf("capabilities %+v: want local scope, global connectivity and GwAllocChecker (as the built-in macvlan since Docker 28)", caps)
	}
	// As the built-in macvlan: no gateway reserved unless the user gives one;
	// except for gid_check=strict, which Docker consults only on a gateway
	// endpoint.
	for _, c := range []struct {
		generic map[string]string
		skip    bool
	}{
		{map[string]string{"parent": "x", "com.docker.network.enable_ipv4": "true"}, true},
		{map[string]string{"parent": "x", "gid_check": "warn"}, true},
		{map[string]string{"parent": "x", "gid_check": "strict"}, false},
	} {
		var gw struct{ SkipIPv4, SkipIPv6 bool }
		e.must(e.c.Call("GwAllocCheck", map[string]any{"Options": map[string]any{"com.docker.network.generic": c.generic,
			"com.docker.network.enable_ipv6": false}}, &gw))
		if gw.SkipIPv4 != c.skip || gw.SkipIPv6 != c.skip {
			t.Fatalf("GwAllocCheck for %v answered %+v: want skip %v", c.generic, gw, c.skip)
		}
	}
}

func TestPrivilegedTornStateStillServes(t *testing.T) {
	e := newEnv(t)
	good, torn := id("aa61"), id("aa62")
	e.must(e.createNetwork(good, map[string]string{"parent": "p0"}))
	e.must(netnstest.CreateVeth(e.host, "p1", "p1peer", 1500))
	e.addHCA("p1")
	e.must(e.createNetwork(torn, map[string]string{"parent": "p1"}))
	e.stop()
	path := e.stateDir + "/networks/" + torn + ".json"
	data, err := os.ReadFile(path)
	e.must(err)
	e.must(os.WriteFile(path, data[:len(data)/3], 0o600))
	e.start()
	_, err = e.createEndpoint(good, id("ee61"), "10.0.0.2/24", "", nil)
	e.must(err)
	if _, err := os.Stat(path + ".corrupt"); err != nil {
		t.Fatalf("torn file not kept aside: %v", err)
	}
}

// Every bad request is refused with a message naming the object and the fix,
// and leaves no link, no VLAN sub-interface and no state behind.
func TestPrivilegedBadInputLeavesNothing(t *testing.T) {
	e := newEnv(t)
	e.must(netnstest.CreateVeth(e.host, "q0", "q0peer", 1500))
	e.must(netnstest.CreateVeth(e.host, "pt0", "pt0peer", 1500))
	e.addHCA("q0")
	e.addHCA("pt0")
	tun := "tun0"
	haveTun := netnstest.CreateTun(e.host, tun) == nil

	base, pt := id("ab01"), id("ab02")
	e.must(e.createNetwork(base, map[string]string{"parent": "q0"}))
	e.must(e.createNetwork(pt, map[string]string{"parent": "pt0", "macvlan_mode": "passthru"}))
	_, err := e.createEndpoint(pt, id("ec01"), "", "", nil)
	e.must(err)
	wantLinks := linkNames(t, e.host)
	wantState := e.stateFiles()

	type tc struct {
		name string
		call func() error
		want []string
	}
	net := func(generic map[string]string) func() error {
		return func() error { return e.createNetwork(id("bad0"), generic, "10.99.0.0/24") }
	}
	raw := func(op, body string) func() error {
		return func() error { return e.c.CallRaw(op, []byte(body), nil) }
	}
	cases := []tc{
		{"missing parent", net(map[string]string{}), []string{"option parent is required"}},
		{"parent not found", net(map[string]string{"parent": "nope0"}), []string{`parent "nope0" not found`, "ip link show"}},
		{"loopback parent", net(map[string]string{"parent": "lo"}), []string{`parent "lo" is a loopback device`}},
		{"bad mode", net(map[string]string{"parent": "p0", "macvlan_mode": "l3"}), []string{"not a macvlan mode"}},
		{"mtu above parent", net(map[string]string{"parent": "p0", "mtu": "9000"}), []string{"larger than the MTU 1500 of parent \"p0\""}},
		{"mtu above parent on a new vlan", net(map[string]string{"parent": "p0.55", "mtu": "9000"}), []string{"larger than the MTU 1500"}},
		{"vlan id 0", net(map[string]string{"parent": "p0.0"}), []string{"VLAN id 0 is outside 1-4094"}},
		{"vlan id 4095", net(map[string]string{"parent": "p0.4095"}), []string{"VLAN id 4095 is outside 1-4094"}},
		{"vlan lower missing", net(map[string]string{"parent": "nope0.5"}), []string{`lower device "nope0" not found`}},
		{"vlan on loopback", net(map[string]string{"parent": "lo.5"}), []string{"loopback"}},
		{"passthru on a used parent", net(map[string]string{"parent": "q0", "macvlan_mode": "passthru"}), []string{"passthru needs parent \"q0\" to itself"}},
		{"bridge on a passthru parent", net(map[string]string{"parent": "pt0"}), []string{"taken by network", "passthru"}},
		{"unknown option", net(map[string]string{"parent": "p0", "vlan": "5"}), []string{`unknown option "vlan"`, "parent, macvlan_mode, mtu, rdma_device"}},
		{"control character", net(map[string]string{"parent": "p0", "rdma_device": "mlx5\x07"}), []string{"control character"}},
		{"duplicate option", raw("CreateNetwork", `{"NetworkID":"`+id("bad1")+`","Options":{"com.docker.network.generic":{"parent":"p0","parent":"q0"}}}`),
			[]string{"given more than once"}},
		{"non-string option", raw("CreateNetwork", `{"NetworkID":"`+id("bad2")+`","Options":{"com.docker.network.generic":{"parent":"p0","mtu":1500}}}`),
			[]string{`option "mtu" must be a string`}},
		{"malformed json", raw("CreateNetwork", `{"NetworkID":`), []string{"malformed request"}},
		{"path-like network id", raw("CreateNetwork", `{"NetworkID":"../../etc","Options":{"com.docker.network.generic":{"parent":"p0"}}}`),
			[]string{"invalid network ID"}},
		{"second endpoint on passthru", func() error { _, err := e.createEndpoint(pt, id("ec02"), "", "", nil); return err },
			[]string{"passthru mode", "allows one container"}},
		{"endpoint bad MAC", func() error { _, err := e.createEndpoint(base, id("ec03"), "", "zz:zz", nil); return err },
			[]string{`MAC address "zz:zz"`}},
		{"endpoint multicast MAC", func() error { _, err := e.createEndpoint(base, id("ec04"), "", "01:00:5e:00:00:01", nil); return err },
			[]string{"multicast"}},
		{"endpoint unknown option", func() error {
			_, err := e.createEndpoint(base, id("ec05"), "", "", map[string]any{"foo": "1"})
			return err
		}, []string{`unknown option "foo"`, "mtu"}},
		{"endpoint network option", func() error {
			_, err := e.createEndpoint(base, id("ec06"), "", "", map[string]any{"parent": "p0"})
			return err
		}, []string{"applies to the whole network"}},
		{"endpoint mtu above network", func() error {
			_, err := e.createEndpoint(base, id("ec07"), "", "", map[string]any{"mtu": "9000"})
			return err
		}, []string{"larger than the MTU 1500 of network"}},
		{"endpoint bad address", func() error { _, err := e.createEndpoint(base, id("ec08"), "10.0.0.300/24", "", nil); return err },
			[]string{"not in CIDR form"}},
		{"endpoint id path-like", func() error { _, err := e.createEndpoint(base, "../x", "", "", nil); return err },
			[]string{"invalid endpoint ID"}},
	}
	if haveTun {
		cases = append(cases, tc{"non-ethernet parent", net(map[string]string{"parent": tun}), []string{"not an Ethernet device"}})
	} else {
		t.Log("no /dev/net/tun here: the non-Ethernet parent case is covered by the unit tests only")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			var ce *plugintest.CallError
			if !errors.As(err, &ce) {
				t.Fatalf("want an error answer, got %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(ce.Msg, w) {
					t.Errorf("error %q does not say %q", ce.Msg, w)
				}
			}
			if got := linkNames(t, e.host); !slices.Equal(got, wantLinks) {
				t.Errorf("links changed: %v, want %v", got, wantLinks)
			}
			if got := e.stateFiles(); !slices.Equal(got, wantState) {
				t.Errorf("state changed: %v, want %v", got, wantState)
			}
		})
	}
}

// The daemon path of RDMA awareness on a real veth parent: the fake sysfs
// plays the kernel's part (adding the GID entries when the address lands).
func TestPrivilegedRDMAStatusAndCDI(t *testing.T) {
	e := newEnv(t)
	nid, eid := id("aa71"), id("ee71")
	e.must(e.createNetwork(nid, map[string]string{"parent": "p0"}, "10.71.0.0/24"))
	cdi := cdi.SpecPath(e.cdiDir, "mlx5_0")
	if _, err := os.Stat(cdi); err != nil {
		t.Fatalf("no CDI spec: %v", err)
	}
	_, err := e.createEndpoint(nid, eid, "10.71.0.2/24", "", nil)
	e.must(err)
	res, err := e.join(nid, eid)
	e.must(err)
	ctr := sandbox(t)
	e.must(netnstest.MoveInto(e.host, ctr, res.InterfaceName.SrcName, "eth0", nil, cidr(t, "10.71.0.2/24")))
	if _, err := rdmatest.AddAddress(e.sysfs, "mlx5_0", 1, "10.71.0.2", "eth0"); err != nil {
		t.Fatal(err)
	}
	var ep api.Endpoint
	deadline := time.Now().Add(3 * time.Second)
	for {
		st, err := e.c.Status()
		e.must(err)
		ep = st.Networks[0].Endpoints[0]
		if ep.RDMAReady || time.Now().After(deadline) {
			if st.Networks[0].HCA != "mlx5_0" || st.Networks[0].GIDTable.Used != 4 || len(st.Networks[0].Devices) != 2 {
				t.Fatalf("network status %+v", st.Networks[0])
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !ep.RDMAReady || len(ep.GIDs) != 2 || ep.GIDs[0].Index != 2 || ep.GIDs[1].Type != rdma.GIDTypeRoCEv2 {
		t.Fatalf("endpoint status %+v", ep)
	}
	e.must(e.c.Call("Leave", network.LeaveRequest{NetworkID: nid, EndpointID: eid}, nil))
	e.must(netnstest.MoveBack(ctr, e.host, "eth0", res.InterfaceName.SrcName))
	if _, err := rdmatest.RemoveAddress(e.sysfs, "mlx5_0", 1, "10.71.0.2"); err != nil {
		t.Fatal(err)
	}
	e.must(e.c.Call("DeleteEndpoint", network.DeleteEndpointRequest{NetworkID: nid, EndpointID: eid}, nil))
	e.must(e.c.Call("DeleteNetwork", network.DeleteNetworkRequest{NetworkID: nid}, nil))
	if _, err := os.Stat(cdi); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("CDI spec left after the last network: %v", err)
	}
}

// 50 containers start and stop at once over the real socket (run with the
// race detector by make test-root): every call succeeds, each gets its own
// link, and nothing is left.
func TestPrivilegedConcurrentLifecycle(t *testing.T) {
	e := newEnv(t)
	nid := id("aa81")
	e.must(e.createNetwork(nid, map[string]string{"parent": "p0"}, "10.81.0.0/24"))
	const n = 50
	ctrs := make([]*netns.Handle, n)
	for i := range ctrs {
		ctrs[i] = sandbox(t)
	}
	errs := make(chan error, 4*n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			eid := id(fmt.Sprintf("ee81%02d", i))
			addr := fmt.Sprintf("10.81.0.%d/24", i+2)
			if _, err := e.createEndpoint(nid, eid, addr, "", nil); err != nil {
				errs <- fmt.Errorf("CreateEndpoint %d: %w", i, err)
				return
			}
			res, err := e.join(nid, eid)
			if err != nil {
				errs <- fmt.Errorf("Join %d: %w", i, err)
				return
			}
			if err := netnstest.MoveInto(e.host, ctrs[i], res.InterfaceName.SrcName, "eth0", nil, cidr(t, addr)); err != nil {
				errs <- fmt.Errorf("move %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	st, err := e.c.Status()
	e.must(err)
	if got := len(st.Networks[0].Endpoints); got != n {
		t.Fatalf("%d endpoints in status, want %d", got, n)
	}
	seen := map[string]bool{}
	for _, ep := range st.Networks[0].Endpoints {
		if seen[ep.Ifname] || seen[ep.IPv4] {
			t.Fatalf("duplicate link or address: %+v", ep)
		}
		seen[ep.Ifname], seen[ep.IPv4] = true, true
	}
	for i := range n {
		wg.Go(func() {
			eid := id(fmt.Sprintf("ee81%02d", i))
			if err := e.c.Call("Leave", network.LeaveRequest{NetworkID: nid, EndpointID: eid}, nil); err != nil {
				errs <- fmt.Errorf("Leave %d: %w", i, err)
				return
			}
			if err := netnstest.MoveBack(ctrs[i], e.host, "eth0", driver.LinkName(eid)); err != nil {
				errs <- fmt.Errorf("move back %d: %w", i, err)
				return
			}
			if err := e.c.Call("DeleteEndpoint", network.DeleteEndpointRequest{NetworkID: nid, EndpointID: eid}, nil); err != nil {
				errs <- fmt.Errorf("DeleteEndpoint %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := linkNames(t, e.host); !slices.Equal(got, []string{"lo", "p0", "p0peer"}) {
		t.Fatalf("links left: %v", got)
	}
	if f := e.stateFiles(); !slices.Equal(f, []string{"networks/" + nid + ".json"}) {
		t.Fatalf("state left: %v", f)
	}
}

// A container removed while the daemon was down (its namespace destroyed
// without Leave or DeleteEndpoint) loses its endpoint at the next start;
// a running container's endpoint stays. Real namespaces, real netlink.
func TestPrivilegedCollectsRemovedContainers(t *testing.T) {
	e := newEnv(t)
	nid := id("aa0c")
	e.must(e.createNetwork(nid, map[string]string{"parent": "p0"}, "10.9.0.0/24"))
	gone, running := id("ee0a"), id("ee0b")
	sbGone, sbRunning := sandbox(t), sandbox(t)
	for _, c := range []struct {
		eid, addr string
		sb        *netns.Handle
	}{{gone, "10.9.0.3/24", sbGone}, {running, "10.9.0.4/24", sbRunning}} {
		mac, err := e.createEndpoint(nid, c.eid, c.addr, "", nil)
		e.must(err)
		_, err = e.join(nid, c.eid)
		e.must(err)
		hw, _ := net.ParseMAC(mac)
		e.must(netnstest.MoveInto(e.host, c.sb, driver.LinkName(c.eid), "eth0", hw, cidr(t, c.addr)))
	}
	e.stop()
	data, err := os.ReadFile(filepath.Join(e.stateDir, "instance"))
	e.must(err)
	alias := "rdma-macvlan " + strings.TrimSpace(string(data))
	sbGone.Close() // docker rm -f while the plugin is down
	deadline := time.Now().Add(5 * time.Second)
	for { // the kernel destroys a namespace asynchronously
		ls, err := e.host.PeerLinks(alias)
		e.must(err)
		if len(ls) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the removed container's namespace is still there: %+v", ls)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.start()
	st, err := e.c.Status()
	e.must(err)
	if eps := st.Networks[0].Endpoints; len(eps) != 1 || eps[0].ID != running {
		t.Fatalf("endpoints after restart: %+v, want only the running container's %s", eps, running[:12])
	}
	if _, err := os.Stat(filepath.Join(e.stateDir, "endpoints", gone+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("record of the removed container's endpoint: %v", err)
	}
}

// The interface name asked for inside the container
// (com.docker.network.endpoint.ifname, compose's interface_name) comes back
// as Join's DstName, which Docker 28+ applies as it does for its built-in
// macvlan; it survives a restart, and a name the kernel would refuse is
// refused at CreateEndpoint.
func TestPrivilegedContainerIfname(t *testing.T) {
	e := newEnv(t)
	nid, eid, plain := id("aa0d"), id("ee0d"), id("ee0e")
	e.must(e.createNetwork(nid, map[string]string{"parent": "p0"}, "10.9.0.0/24"))
	_, err := e.createEndpoint(nid, eid, "10.9.0.3/24", "", map[string]any{driver.OptEndpointIfname: "data0"})
	e.must(err)
	_, err = e.createEndpoint(nid, plain, "10.9.0.4/24", "", nil)
	e.must(err)
	join := func(eid string) (src, prefix, dst string) {
		t.Helper()
		var res struct {
			InterfaceName struct{ SrcName, DstPrefix, DstName string }
		}
		e.must(e.c.Call("Join", network.JoinRequest{NetworkID: nid, EndpointID: eid, SandboxKey: "/var/run/docker/netns/test"}, &res))
		return res.InterfaceName.SrcName, res.InterfaceName.DstPrefix, res.InterfaceName.DstName
	}
	if src, prefix, dst := join(eid); src != driver.LinkName(eid) || prefix != "eth" || dst != "data0" {
		t.Fatalf("Join answered %s/%s/%s: want the host link, prefix eth and DstName data0", src, prefix, dst)
	}
	if _, _, dst := join(plain); dst != "" {
		t.Fatalf("Join of an endpoint with no name asked answered DstName %q", dst)
	}
	e.restart()
	if _, _, dst := join(eid); dst != "data0" {
		t.Fatalf("after a restart Join answered DstName %q, want data0", dst)
	}
	_, err = e.createEndpoint(nid, id("ee0f"), "10.9.0.5/24", "", map[string]any{driver.OptEndpointIfname: "data/0"})
	if err == nil || !strings.Contains(err.Error(), `option com.docker.network.endpoint.ifname "data/0" is not a valid interface name`) {
		t.Fatalf("CreateEndpoint with an interface name the kernel refuses: %v", err)
	}
}
