package driver

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// The status is built from the persisted records by conversion: the VLAN
// record and the GID entries reach the wire types whole.
func TestStatusConvertsRecords(t *testing.T) {
	links := drivertest.NewLinks("p0")
	root := mlx5Root(t, rdmatest.MLX5Options{})
	d := newTestDriverAt(t, links, t.TempDir(), root)
	if err := d.CreateNetwork(netReq("n1", "parent", "p0.10", "gid_check", "strict")); err != nil {
		t.Fatal(err)
	}
	if _, err := links.CreateVLAN("p0.20", "p0", 20, ""); err != nil {
		t.Fatal(err)
	}
	if err := d.CreateNetwork(netReq("n2", "parent", "p0.20")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Join("n1", "e1", "/sb/e1"); err != nil {
		t.Fatal(err)
	}
	if _, err := rdmatest.AddAddress(root, "mlx5_0", 1, "10.5.0.2", "eth0"); err != nil {
		t.Fatal(err)
	}
	e := waitStatus(t, d, "e1", 2*time.Second, func(e api.Endpoint) bool { return e.RDMAReady })

	st := d.Status()
	if len(st.Networks) != 2 {
		t.Fatalf("networks %+v", st.Networks)
	}
	n1, n2 := st.Networks[0], st.Networks[1]
	if n1.VLAN == nil || !reflect.DeepEqual(*n1.VLAN, api.VLAN{Lower: "p0", ID: 10, Created: true, Stack: []int{10}, Chain: "p0.10: vlan 10 on p0"}) {
		t.Fatalf("n1 vlan %+v: want p0 id 10, created by the driver", n1.VLAN)
	}
	if n2.VLAN == nil || !reflect.DeepEqual(*n2.VLAN, api.VLAN{Lower: "p0", ID: 20, Created: false, Stack: []int{20}, Chain: "p0.20: vlan 20 on p0"}) {
		t.Fatalf("n2 vlan %+v: want p0 id 20, found (not created)", n2.VLAN)
	}
	if n1.Parent != "p0.10" || n1.Mode != "bridge" || n1.GIDCheck != api.GIDCheckStrict || n1.HCA != "mlx5_0" || n1.Port != 1 {
		t.Fatalf("n1 %+v", n1)
	}
	ip := rdmatest.IPv4GID("10.5.0.2")
	want := []api.GID{{Index: 2, Type: rdma.GIDTypeRoCEv1, GID: ip}, {Index: 3, Type: rdma.GIDTypeRoCEv2, GID: ip}}
	if e.Ifname != LinkName("e1") || e.IPv4 != "10.5.0.2" || e.Sandbox != "/sb/e1" || !slices.Equal(e.GIDs, want) {
		t.Fatalf("endpoint %+v: want link %s, 10.5.0.2, sandbox /sb/e1, GIDs %+v", e, LinkName("e1"), want)
	}
}

// The QoS options reach the status as given, 0 included; a network without
// them has none (absent, not 0). A repeated CreateNetwork asking for another
// class is refused, naming the option.
func TestStatusQoS(t *testing.T) {
	links := drivertest.NewLinks("p0", "p1", "p2")
	d := newTestDriver(t, links, t.TempDir())
	for _, r := range []CreateNetworkRequest{
		netReq("n1", "parent", "p0", "traffic_class", "106", "service_level", "3"),
		netReq("n2", "parent", "p1", "traffic_class", "0", "service_level", "0"),
		netReq("n3", "parent", "p2"),
	} {
		if err := d.CreateNetwork(r); err != nil {
			t.Fatal(err)
		}
	}
	st := d.Status()
	if len(st.Networks) != 3 {
		t.Fatalf("networks %+v", st.Networks)
	}
	got := func(p *int) string {
		if p == nil {
			return "none"
		}
		return fmt.Sprint(*p)
	}
	for i, want := range [][2]string{{"106", "3"}, {"0", "0"}, {"none", "none"}} {
		n := st.Networks[i]
		if tc, sl := got(n.TrafficClass), got(n.ServiceLevel); tc != want[0] || sl != want[1] {
			t.Errorf("network %s: traffic class %s, service level %s; want %s, %s", n.ID, tc, sl, want[0], want[1])
		}
	}
	err := d.CreateNetwork(netReq("n1", "parent", "p0", "traffic_class", "96", "service_level", "3"))
	if err == nil || !strings.Contains(err.Error(), "traffic_class 106 (asked: 96)") {
		t.Fatalf("CreateNetwork again with another traffic class: %v; want a refusal naming traffic_class 106 (asked: 96)", err)
	}
	err = d.CreateNetwork(netReq("n3", "parent", "p2", "service_level", "5"))
	if err == nil || !strings.Contains(err.Error(), "service_level none (asked: 5)") {
		t.Fatalf("CreateNetwork again with a service level: %v; want a refusal naming service_level none (asked: 5)", err)
	}
	if err := d.CreateNetwork(netReq("n1", "parent", "p0", "service_level", "3", "traffic_class", "106")); err != nil {
		t.Fatalf("the same CreateNetwork again: %v", err)
	}
}
