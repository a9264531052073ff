package netns_test

import (
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/netns/netnstest"
)

// A link moved into another namespace is found there through the
// namespace ID its move gave, by its ifalias, until that namespace goes.
func TestPrivilegedPeerLinks(t *testing.T) {
	host := netnstest.NewHost(t)
	const alias = "rdma-macvlan peer-test"
	mk := func(name string) netns.Link {
		t.Helper()
		l, err := host.CreateMacvlan(netns.MacvlanSpec{Name: name, Parent: "p0", Mode: "bridge", Alias: alias})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := mk("rmvpeera"), mk("rmvpeerb")
	mk("rmvpeerc") // stays in host: not a peer link
	if _, err := host.CreateMacvlan(netns.MacvlanSpec{Name: "other", Parent: "p0", Mode: "bridge", Alias: "someone else"}); err != nil {
		t.Fatal(err)
	}
	sbA, err := netnstest.Make()
	if err != nil {
		t.Fatal(err)
	}
	defer sbA.Close()
	sbB, err := netnstest.Make()
	if err != nil {
		t.Fatal(err)
	}
	defer sbB.Close()
	if err := netnstest.MoveInto(host, sbA, "rmvpeera", "eth0", nil); err != nil {
		t.Fatal(err)
	}
	if err := netnstest.MoveInto(host, sbB, "rmvpeerb", "eth0", nil); err != nil {
		t.Fatal(err)
	}
	if err := netnstest.MoveInto(host, sbB, "other", "eth1", nil); err != nil {
		t.Fatal(err)
	}
	macs := func() map[string]string {
		t.Helper()
		ls, err := host.PeerLinks(alias)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, l := range ls {
			out[l.MAC.String()] = l.Name
		}
		return out
	}
	// Twice: the first look gives the host an ID of its own in itself
	// (the moved macvlans' lower device is there); the second must not
	// count the host's own links.
	var got map[string]string
	for range 2 {
		got = macs()
		if len(got) != 2 || got[a.MAC.String()] != "eth0" || got[b.MAC.String()] != "eth0" {
			t.Fatalf("peer links %v: want %s and %s, both renamed eth0 (and not the host's own or another alias)", got, a.MAC, b.MAC)
		}
	}
	sbA.Close() // the container goes: its namespace and its macvlan with it
	// The kernel destroys a namespace asynchronously.
	deadline := time.Now().Add(5 * time.Second)
	for {
		got = macs()
		if len(got) == 1 && got[b.MAC.String()] == "eth0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("peer links %v after namespace A went: want only %s", got, b.MAC)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
