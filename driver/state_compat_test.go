package driver

import (
	"fmt"
	"os"
	"strings"
	"testing"
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
