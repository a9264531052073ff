package rdma

import (
	"net"
	"net/netip"
	"reflect"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// matchNdev looks at the reserved default slots first and reads a port's
// whole table only when they do not settle it: on every host it must say
// what the whole tables say.
func TestMatchNdevAsTheWholeTables(t *testing.T) {
	const mac = "02:00:00:00:00:02"
	def, _ := rdmatest.DefaultGID(mac)
	// rxe0 on an eth0 of another namespace (another MAC); rxe1 on the
	// host's eth0 (built last: its MAC is the one sysfs shows); mlx5_0
	// has the default GID of eth0's MAC in slot 0 but under another
	// netdev name, and names eth0 only with an address.
	mixed := rdmatest.RXE(t, rdmatest.RXEOptions{Netdev: "eth0", MAC: "02:00:00:00:00:01"})
	steps := []error{
		rdmatest.BuildRXE(mixed, rdmatest.RXEOptions{HCA: "rxe1", Netdev: "eth0", MAC: mac, Uverbs: 1}),
		rdmatest.BuildHCA(mixed, rdmatest.HCASpec{Name: "mlx5_0", Uverbs: 2, Ports: []rdmatest.PortSpec{{TableSize: 16, Entries: []rdmatest.Entry{
			{Index: 0, GID: def, Type: rdmatest.TypeV2, Ndev: "eth9"},
			{Index: 5, GID: rdmatest.IPv4GID("192.168.7.9"), Type: rdmatest.TypeV2, Ndev: "eth0"},
		}}}}),
	}
	for _, err := range steps {
		if err != nil {
			t.Fatal(err)
		}
	}
	bond := t.TempDir()
	if err := rdmatest.BuildMLX5BondNoLAG(bond, rdmatest.BondOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []struct{ root, netdev string }{
		{mixed, "eth0"}, {mixed, "eth9"}, {mixed, "veth1"},
		{bond, "bond0"}, {bond, "ens3f0np0"}, {bond, "ens3f1np1"},
	} {
		s := NewSysfs(h.root)
		var cands []HCAPort
		hcas, _ := s.Devices()
		for _, hca := range hcas {
			ports, _ := s.Ports(hca)
			for _, p := range ports {
				cands = append(cands, HCAPort{hca, p})
			}
		}
		named, withDefault, known := s.matchNdev(h.netdev, cands)
		wantNamed, wantDefault := matchByTables(t, s, h.netdev, cands)
		if !reflect.DeepEqual(named, wantNamed) || known && !reflect.DeepEqual(withDefault, wantDefault) {
			t.Errorf("%s under %s: named %v, with its default GID %v; the whole tables say %v and %v",
				h.netdev, h.root, named, withDefault, wantNamed, wantDefault)
		}
	}
}

// matchByTables is what matchNdev answers from the whole tables.
func matchByTables(t *testing.T, s *Sysfs, netdev string, cands []HCAPort) (named, withDefault []HCAPort) {
	var def netip.Addr
	if v, err := readTrimmed(s.path("sys/class/net", netdev, "address")); err == nil {
		mac, _ := net.ParseMAC(v)
		def, _ = netip.ParseAddr(DefaultGID(mac))
	}
	for _, c := range cands {
		gids, err := s.GIDs(c.HCA, c.Port)
		if err != nil {
			t.Fatal(err)
		}
		isNamed, isDefault := false, false
		for _, g := range gids {
			if g.Ndev == netdev {
				isNamed = true
				isDefault = isDefault || def.IsValid() && g.GID == def
			}
		}
		if isNamed {
			named = append(named, c)
		}
		if isDefault {
			withDefault = append(withDefault, c)
		}
	}
	return named, withDefault
}
