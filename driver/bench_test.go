package driver

import (
	"fmt"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// BenchmarkLifeCycle is one container's endpoint life cycle (CreateEndpoint,
// Join, Leave, DeleteEndpoint) while live other endpoints exist on the same
// RDMA port, on fake links and a fake sysfs: the driver's cost without
// netlink's (make bench measures the daemon with it). It includes the
// fsynced writes of the state files and the reads of the fake GID table
// (what most of a cycle is), and the GID watch each Join starts; what grows
// with the endpoints the driver holds is the difference between live=10 and
// live=1000. The setup (live endpoints created) runs again for each b.N the
// framework tries: give -benchtime as a count. Compare two builds side by
// side, or read a -cpuprofile by function:
//
//	go test -run '^$' -bench LifeCycle -benchtime 200x ./driver/
func BenchmarkLifeCycle(b *testing.B) {
	for _, live := range []int{10, 1000} {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			links := drivertest.NewLinks("p0")
			// Soft-RoCE's table, as make bench's: room for 1000 IPv4
			// endpoints (one entry each) and the default GID.
			root := buildRoot(b, func(r string) error { return rdmatest.BuildRXE(r, rdmatest.RXEOptions{Netdev: "p0", TableSize: 1024}) })
			d := newTestDriverAt(b, links, b.TempDir(), root)
			req := netReq("n1", "parent", "p0")
			req.IPv4 = []Subnet{{Pool: "10.0.0.0/16", Gateway: "10.0.0.1/16"}}
			if err := d.CreateNetwork(req); err != nil {
				b.Fatal(err)
			}
			addr := func(i int) string { return fmt.Sprintf("10.0.%d.%d/16", 1+i/250, 1+i%250) }
			for i := range live {
				if _, err := d.CreateEndpoint(ep("n1", fmt.Sprintf("held%d", i), addr(i))); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				eid := fmt.Sprintf("cycle%d", i)
				if _, err := d.CreateEndpoint(ep("n1", eid, addr(live))); err != nil {
					b.Fatal(err)
				}
				if _, err := d.Join("n1", eid, "/sb/"+eid); err != nil {
					b.Fatal(err)
				}
				if err := d.Leave("n1", eid); err != nil {
					b.Fatal(err)
				}
				if err := d.DeleteEndpoint("n1", eid); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
