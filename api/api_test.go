package api_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/api"
)

// full sets every field of the document, so that each JSON name is in the
// golden file.
func full() api.Status {
	return api.Status{
		Version:    "v0.1.0-3-gabcdef0",
		GIDTimeout: "10s",
		Networks: []api.Network{
			{
				ID: "1111111111111111111111111111111111111111111111111111111111111111", Parent: "ens3np0.10",
				VLAN: &api.VLAN{Lower: "ens3np0", ID: 10, Created: true}, Mode: "bridge", MTU: 9000, MTUFromParent: true,
				GIDCheck: api.GIDCheckStrict, GIDCheckNote: "the engine asks before the container has its addresses",
				HCA: "mlx5_0", Port: 1, PortState: "ACTIVE", LinkLayer: "Ethernet", NetnsMode: "shared", RoCETypes: 2,
				GIDTable:  &api.GIDTable{Size: 255, Used: 8, Free: 247, Room: intp(245)},
				Devices:   []api.Device{{Path: "/dev/infiniband/uverbs0", Major: 231, Minor: 192}, {Path: "/dev/infiniband/rdma_cm", Major: 10, Minor: 57}},
				CDIDevice: "rdma-macvlan/hca=mlx5_0", Problems: []string{"a problem"},
				Endpoints: []api.Endpoint{
					{
						ID: "2222222222222222222222222222222222222222222222222222222222222222", Ifname: "rmv222222222222",
						IPv4: "192.168.7.2", IPv6: "fd00::2", MAC: "02:42:c0:a8:07:02", Sandbox: "/var/run/docker/netns/abc",
						GIDs:      []api.GID{{Index: 4, Type: "IB/RoCE v1", GID: "0000:0000:0000:0000:0000:ffff:c0a8:0702"}, {Index: 5, Type: "RoCE v2", GID: "0000:0000:0000:0000:0000:ffff:c0a8:0702"}},
						RDMAReady: true,
						GIDDrift:  []api.GIDMove{{GID: "0000:0000:0000:0000:0000:ffff:c0a8:0702", Type: "RoCE v2", GivenIndex: 3, Index: 5}},
					},
					{ID: "3333333333333333333333333333333333333333333333333333333333333333", Ifname: "rmv333333333333", MAC: "02:42:c0:a8:07:03",
						GIDs: []api.GID{}, RDMAReason: "not in a container"},
				},
				RDMADevice: "mlx5_0", Subnets: []string{"192.168.7.0/24", "fd00::/64"}, TrafficClass: intp(106), ServiceLevel: intp(3),
				NodeGUID: "a088:c203:005b:03ec", PCI: "0000:03:00.0",
			},
			{ID: "4444444444444444444444444444444444444444444444444444444444444444", Parent: "eth1", Mode: "private", MTU: 1500, Endpoints: []api.Endpoint{}},
			// Zero is a traffic class and a service level, not their absence.
			{ID: "5555555555555555555555555555555555555555555555555555555555555555", Parent: "eth2", Mode: "bridge", MTU: 1500, Endpoints: []api.Endpoint{},
				TrafficClass: intp(0), ServiceLevel: intp(0)},
		},
	}
}

func intp(n int) *int { return &n }

// The JSON names of /v1/status are a contract: the document is encoded as
// the daemon encodes it (two-space indent) and compared byte for byte with
// the golden file, which was written by the types this package replaced.
// A renamed, dropped or reordered field, or a changed omitempty, fails here;
// a deliberate change of the contract rewrites the file in the same commit.
func TestStatusGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/status.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	enc := json.NewEncoder(&got)
	enc.SetIndent("", "  ")
	if err := enc.Encode(full()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("/v1/status document changed; got:\n%s\nwant (testdata/status.golden.json):\n%s", got.Bytes(), want)
	}
	// And it reads back into the same value: no field is write-only.
	var back api.Status
	if err := json.Unmarshal(want, &back); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	enc = json.NewEncoder(&again)
	enc.SetIndent("", "  ")
	if err := enc.Encode(back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), want) {
		t.Fatalf("the golden document does not survive a decode and encode:\n%s", again.Bytes())
	}
}
