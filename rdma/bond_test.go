package rdma_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// What sysfs shows of a bond with RoCE LAG and without: the LAG device
// under the first port's PCI function, its port's netdev the bond; without
// LAG, each port's own device, and the bond's default GID in the active
// port's table too, so that only the netdev a port's default GID names
// (PortNetdev) tells the port's own netdev.
func TestBondFixtures(t *testing.T) {
	lag := t.TempDir()
	if err := rdmatest.BuildMLX5LAG(lag, rdmatest.BondOptions{}); err != nil {
		t.Fatal(err)
	}
	s := rdma.NewSysfs(lag)
	bondPort := []rdma.HCAPort{{HCA: "mlx5_bond_0", Port: 1}}
	for _, nd := range []string{"bond0", "ens3f0np0"} {
		if got, err := s.HCAPortsForNetdev(nd); err != nil || !reflect.DeepEqual(got, bondPort) {
			t.Errorf("LAG: ports of %s: %v %v, want %v", nd, got, err, bondPort)
		}
	}
	if _, err := s.HCAPortsForNetdev("ens3f1np1"); !errors.Is(err, rdma.ErrNoRDMADevice) {
		t.Errorf("LAG: the second port has an RDMA device: %v", err)
	}
	if got := s.PortNetdev("mlx5_bond_0", 1); got != "bond0" {
		t.Errorf("LAG: mlx5_bond_0 port 1 names %q, want bond0", got)
	}

	noLAG := t.TempDir()
	if err := rdmatest.BuildMLX5BondNoLAG(noLAG, rdmatest.BondOptions{}); err != nil {
		t.Fatal(err)
	}
	s = rdma.NewSysfs(noLAG)
	if got, err := s.HCAPortsForNetdev("bond0"); err != nil || !reflect.DeepEqual(got, []rdma.HCAPort{{HCA: "mlx5_0", Port: 1}}) {
		t.Errorf("no LAG: sysfs's candidates for bond0: %v %v, want the active port's mlx5_0/1", got, err)
	}
	for hca, want := range map[string]string{"mlx5_0": "ens3f0np0", "mlx5_1": "ens3f1np1", "mlx5_9": ""} {
		if got := s.PortNetdev(hca, 1); got != want {
			t.Errorf("no LAG: %s port 1 names %q, want %q", hca, got, want)
		}
	}
}
