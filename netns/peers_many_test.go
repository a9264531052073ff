package netns_test

import (
	"fmt"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/netns/netnstest"
)

// The kernel lists the namespace IDs of a namespace in batches and (6.1
// here) ends the list after the first: 134 IDs in a one-page batch. With
// 400 containers' namespaces, every link must still be found.
func TestPrivilegedPeerLinksBeyondOneBatch(t *testing.T) {
	host := netnstest.NewHost(t)
	const n = 400
	for i := range n {
		name := fmt.Sprintf("rmvmany%d", i)
		if _, err := host.CreateMacvlan(netns.MacvlanSpec{Name: name, Parent: "p0", Mode: "bridge", Alias: "rdma-macvlan many"}); err != nil {
			t.Fatal(err)
		}
		sb, err := netnstest.Make()
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		if err := netnstest.MoveInto(host, sb, name, "eth0", nil); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := host.PeerLinks("rdma-macvlan many")
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != n {
		t.Fatalf("%d links found in the containers' namespaces, want %d", len(ls), n)
	}
}
