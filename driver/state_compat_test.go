package driver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// An endpoint record written before the endpoint's "options" went (it held
// Docker's endpoint options and nothing read it) still loads, whole, and is
// written back without it.
func TestStoreLoadsEndpointRecordWithOptions(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	want := testEndpoint("eeee2222", "aaaa")
	want.Sandbox = "/var/run/docker/netns/0123456789ab"
	want.DstName = "roce0"
	old := fmt.Sprintf(`{"version":1,"endpoint":{"id":%q,"network_id":"aaaa","ifname":%q,"parent":"p0",`+
		`"macvlan_mode":"bridge","mtu":1500,"mac":"02:42:0a:09:00:02","ipv4":"10.9.0.2/24",`+
		`"options":{"mtu":"1500","com.docker.network.endpoint.exposedports":"[]"},`+
		`"sandbox":%q,"dst_name":"roce0","created":"2023-11-14T22:13:20Z"}}`,
		want.ID, want.Ifname, want.Sandbox)
	if err := os.WriteFile(s.endpointPath(want.ID), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	_, eps, problems, err := s.load()
	if err != nil || len(problems) != 0 {
		t.Fatalf("load: %v, problems %v", err, problems)
	}
	if len(eps) != 1 {
		t.Fatalf("%d endpoints loaded, want the one record", len(eps))
	}
	if got := eps[0]; got.ID != want.ID || got.Ifname != want.Ifname || got.MTU != 1500 || got.MAC != want.MAC ||
		got.IPv4 != want.IPv4 || got.Sandbox != want.Sandbox || got.DstName != want.DstName || !got.Created.Equal(want.Created) {
		t.Fatalf("loaded %+v, want %+v", got, want)
	}
	if err := s.saveEndpoint(eps[0]); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(s.endpointPath(want.ID))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `"options"`) {
		t.Errorf("the record is written back with options: %s", data)
	}
}

// recordsForGolden are a network and an endpoint record with every field
// set.
func recordsForGolden() (networkRecord, endpointRecord) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	n := &network{ID: "n1", Parent: "p0.10", VLAN: &VLAN{Lower: "p0", ID: 10, Created: true}, Mode: "bridge", MTU: 1500,
		RDMADevice: "mlx5_0", RDMA: &networkRDMA{HCA: "mlx5_0", Port: 1, Netdev: "p0", Types: 2, CDIName: "mlx5_0",
			NodeGUID: "a088:c203:005b:03ec", PCI: "0000:03:00.0"},
		GIDCheck: "strict", TrafficClass: intp(106), ServiceLevel: intp(3),
		IPv4: []Subnet{{Pool: "10.5.0.0/24", Gateway: "10.5.0.1/24"}}, IPv6: []Subnet{{Pool: "fd00:5::/64"}},
		EnableIPv6: true, Internal: true, Options: map[string]string{"parent": "p0.10", "mtu": "1500"}, Created: at}
	e := &endpoint{ID: "e1", NetworkID: "n1", Ifname: "rmve1", Parent: "p0.10", Mode: "bridge", MTU: 1500, MAC: "02:42:0a:05:00:02",
		IPv4: "10.5.0.2/24", IPv6: "fd00:5::2/64", Sandbox: "/var/run/docker/netns/1", DstName: "rdma0", Created: at, GIDNeed: 6, GIDTypes: 2,
		GIDs: []endpointGID{{Index: 2, Type: "IB/RoCE v1", GID: "::ffff:10.5.0.2"}}, RDMAReady: true, RDMAReason: "why"}
	return networkRecord{Version: stateVersion, Network: n}, endpointRecord{Version: stateVersion, Endpoint: e}
}

// The records keep the JSON of the versions before: every field's name and
// form is held by testdata/records.golden.json (written by the version
// whose records were exported types with runtime fields beside the
// persisted ones), which decodes back into the same records.
func TestRecordsKeepTheirJSON(t *testing.T) {
	n, e := recordsForGolden()
	var got []byte
	for _, r := range []any{n, e} {
		data, err := encodeRecord("record", r)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, data...)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "records.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("records encode as\n%s\nwant (testdata/records.golden.json)\n%s", got, want)
	}
	dec := json.NewDecoder(bytes.NewReader(want))
	var n2 networkRecord
	var e2 endpointRecord
	if err := dec.Decode(&n2); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&e2); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(n2, n) || !reflect.DeepEqual(e2, e) {
		t.Fatalf("golden records decode as %+v %+v, want %+v %+v", n2.Network, e2.Endpoint, n.Network, e.Endpoint)
	}
}

func intp(n int) *int { return &n }

// A network record written before traffic_class and service_level loads
// with neither set (nil, not 0: absent exports nothing), and is written
// back without them; a record with them, 0 included, keeps them.
func TestStoreNetworkQoSRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	old := `{"version":1,"network":{"id":"aaaa","parent":"p0","macvlan_mode":"bridge","mtu":0,` +
		`"rdma":{"hca":"mlx5_0","port":1,"netdev":"p0","roce_types":2,"cdi_name":"mlx5_0"},"gid_check":"warn",` +
		`"ipv4":[{"pool":"10.9.0.0/24","gateway":"10.9.0.1/24"}],"options":{"parent":"p0"},"created":"2023-11-14T22:13:20Z"}}`
	if err := os.WriteFile(s.networkPath("aaaa"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	zero := testNetwork("bbbb")
	zero.TrafficClass, zero.ServiceLevel = intp(0), intp(0)
	set := testNetwork("cccc")
	set.TrafficClass, set.ServiceLevel = intp(106), intp(3)
	for _, n := range []*network{zero, set} {
		if err := s.saveNetwork(n); err != nil {
			t.Fatal(err)
		}
	}
	nets, _, problems, err := s.load()
	if err != nil || len(problems) != 0 {
		t.Fatalf("load: %v, problems %v", err, problems)
	}
	byID := map[string]*network{}
	for _, n := range nets {
		byID[n.ID] = n
	}
	if n := byID["aaaa"]; n == nil || n.TrafficClass != nil || n.ServiceLevel != nil || n.Parent != "p0" || n.RDMA == nil || n.RDMA.HCA != "mlx5_0" {
		t.Fatalf("old record loaded as %+v: want it whole, with no traffic class and no service level", n)
	}
	for id, want := range map[string][2]int{"bbbb": {0, 0}, "cccc": {106, 3}} {
		n := byID[id]
		if n == nil || n.TrafficClass == nil || n.ServiceLevel == nil || *n.TrafficClass != want[0] || *n.ServiceLevel != want[1] {
			t.Fatalf("record %s loaded as %+v: want traffic class %d, service level %d", id, n, want[0], want[1])
		}
	}
	if err := s.saveNetwork(byID["aaaa"]); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(s.networkPath("aaaa"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "traffic_class") || strings.Contains(string(data), "service_level") {
		t.Errorf("the old record is written back with QoS fields it never had: %s", data)
	}
}
