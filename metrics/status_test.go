package metrics

import (
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/api"
)

// Every readiness the status reports maps to a fixed label value; the
// free text (GIDs, ports, counts) never becomes one.
func TestReadinessIsBounded(t *testing.T) {
	for _, c := range []struct {
		e             api.Endpoint
		state, reason string
	}{
		{api.Endpoint{RDMAReady: true}, StateReady, ReasonNone},
		{api.Endpoint{RDMAReason: "not in a container"}, StateNotReady, ReasonNotInContainer},
		{api.Endpoint{RDMAReason: "waiting for the kernel to add its GID entries"}, StateNotReady, ReasonWaiting},
		{api.Endpoint{RDMAReason: "GID entries for 0000:0000:0000:0000:0000:ffff:0a05:0003 did not appear in the table of mlx5_0 port 1 within 10s (6 of 10 entries free) (check: ...)"}, StateNotReady, ReasonGIDTimeout},
		{api.Endpoint{RDMAReason: "its GID entries are not in the table"}, StateNotReady, ReasonGIDsMissing},
		{api.Endpoint{}, StateNotReady, ReasonUnknown},
		{api.Endpoint{RDMAReason: "something a later version says"}, StateNotReady, ReasonOther},
	} {
		if s, r := Readiness(c.e); s != c.state || r != c.reason {
			t.Errorf("%+v: %s/%s, want %s/%s", c.e, s, r, c.state, c.reason)
		}
	}
}

// A port that two networks use is counted once; the headroom is the free
// slots over the entries of one IPv4 container (one per RoCE type).
func TestGaugesPerPort(t *testing.T) {
	table := &api.GIDTable{Size: 255, Used: 10, Free: 245}
	st := api.Status{Networks: []api.Network{
		{ID: "n1", HCA: "mlx5_0", Port: 1, RoCETypes: 2, GIDTable: table, Endpoints: []api.Endpoint{{RDMAReady: true}, {RDMAReady: true}}},
		{ID: "n2", HCA: "mlx5_0", Port: 1, RoCETypes: 2, GIDTable: table, Endpoints: []api.Endpoint{{RDMAReady: true}, {RDMAReason: "not in a container"}}},
		{ID: "n3", HCA: "rxe0", Port: 1, RoCETypes: 1, GIDTable: &api.GIDTable{Size: 1024, Used: 1, Free: 1023}},
		{ID: "n4", Problems: []string{"parent gone", "no table"}, Endpoints: []api.Endpoint{{}}},
	}}
	g := Gauges(st)
	want := []PortGauges{{HCA: "mlx5_0", Port: 1, Size: 255, Used: 10, Free: 245, Headroom: 122}, {HCA: "rxe0", Port: 1, Size: 1024, Used: 1, Free: 1023, Headroom: 1023}}
	if len(g.Ports) != len(want) {
		t.Fatalf("ports %+v, want %+v", g.Ports, want)
	}
	for i := range want {
		if g.Ports[i] != want[i] {
			t.Errorf("port %d: %+v, want %+v", i, g.Ports[i], want[i])
		}
	}
	if g.Networks != 4 || g.Problems != 2 {
		t.Errorf("networks %d problems %d, want 4 and 2", g.Networks, g.Problems)
	}
	eps := map[EndpointKey]int{
		{HCA: "mlx5_0", Port: 1, State: StateReady, Reason: ReasonNone}:              3,
		{HCA: "mlx5_0", Port: 1, State: StateNotReady, Reason: ReasonNotInContainer}: 1,
		{State: StateNotReady, Reason: ReasonUnknown}:                                1,
	}
	if len(g.Endpoints) != len(eps) {
		t.Errorf("endpoints %v, want %v", g.Endpoints, eps)
	}
	for k, n := range eps {
		if g.Endpoints[k] != n {
			t.Errorf("endpoints %+v: %d, want %d", k, g.Endpoints[k], n)
		}
	}
}

// Every address another MAC holds counts, on any network.
func TestGaugesCountAddressConflicts(t *testing.T) {
	c := api.AddressConflict{Address: "10.5.0.2", MAC: "02:42:0a:05:00:99"}
	st := api.Status{Networks: []api.Network{
		{ID: "n1", Endpoints: []api.Endpoint{{ID: "e1", AddressConflicts: []api.AddressConflict{c, c}}, {ID: "e2"}}},
		{ID: "n2", Endpoints: []api.Endpoint{{ID: "e3", AddressConflicts: []api.AddressConflict{c}}}},
	}}
	if g := Gauges(st); g.Conflicts != 3 {
		t.Errorf("conflicts %d, want 3", g.Conflicts)
	}
	if g := Gauges(api.Status{Networks: []api.Network{{ID: "n1", Endpoints: []api.Endpoint{{ID: "e1"}}}}}); g.Conflicts != 0 {
		t.Errorf("conflicts %d with none, want 0", g.Conflicts)
	}
}
