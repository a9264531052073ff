package rdmatest

// Bonds of ConnectX ports, as sysfs shows them with and without RoCE LAG.
// Soft-RoCE on a bond (rxe on bond0) is BuildRXE with the bond as netdev;
// what it cannot show is hardware LAG, modelled here.

// BondOptions describe a bond of two mlx5 ports, each its own PCI function
// of one NIC.
type BondOptions struct {
	Bond  string // bond0
	Ports [2]string
	// MACs of the two ports; the bond takes the first (an active-backup
	// bond gives its MAC to every port).
	MACs      [2]string
	TableSize int // 255
}

func (o *BondOptions) defaults() {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&o.Bond, "bond0")
	def(&o.Ports[0], "ens3f0np0")
	def(&o.Ports[1], "ens3f1np1")
	def(&o.MACs[0], "a0:88:c2:5b:10:00")
	def(&o.MACs[1], "a0:88:c2:5b:10:01")
	if o.TableSize == 0 {
		o.TableSize = 255
	}
}

// Bond PCI functions: one NIC, two functions.
const (
	bondPCI0 = MLX5PCIBus + "/0000:05:00.0"
	bondPCI1 = MLX5PCIBus + "/0000:05:00.1"
)

// BuildMLX5LAG builds a RoCE LAG host under root: one RDMA device,
// mlx5_bond_0, for the bond, under the FIRST port's PCI function (so
// sys/class/net/<port 0>/device/infiniband lists it), whose port 1's
// netdev is the bond: its default GID pair at 0/1 derives from the bond's
// MAC and names the bond. The second port's PCI function has no RDMA
// device. The bond is a virtual netdev (no device link). This is what
// mlx5 makes of a bond of both ports of one NIC; Soft-RoCE cannot show it.
func BuildMLX5LAG(root string, o BondOptions) error {
	o.defaults()
	def, err := DefaultGID(o.MACs[0])
	if err != nil {
		return err
	}
	for i, pci := range []string{bondPCI0, bondPCI1} {
		if err := buildPCIDevice(root, pci[len(MLX5PCIBus)+1:], pci, "mlx5_core", "0x15b3", "0x1017"); err != nil {
			return err
		}
		if err := AddNetdev(root, NetdevSpec{Name: o.Ports[i], MAC: o.MACs[0], PCIDir: pci}); err != nil {
			return err
		}
	}
	if err := AddNetdev(root, NetdevSpec{Name: o.Bond, MAC: o.MACs[0]}); err != nil {
		return err
	}
	if err := BuildHCA(root, HCASpec{Name: "mlx5_bond_0", PCIDir: bondPCI0, Driver: "mlx5_core", NodeGUID: nodeGUID(o.MACs[0]),
		Ports: []PortSpec{{Port: 1, TableSize: o.TableSize, Entries: Pair(0, def, o.Bond), DefaultTypes: []string{TypeV1, TypeV2}}}}); err != nil {
		return err
	}
	return hostWide(root, "", "10:57", false, "")
}

// BuildMLX5BondNoLAG builds a bond without RoCE LAG under root: each port
// keeps its own RDMA device (mlx5_0 on port 0, mlx5_1 on port 1; their
// default GIDs name the ports), the bond has none, and the active port's
// table (port 0's) also holds the bond's default GID pair, named after the
// bond, at 2/3: what sysfs detection alone would take for the bond's port.
func BuildMLX5BondNoLAG(root string, o BondOptions) error {
	o.defaults()
	for i := range 2 {
		if err := BuildMLX5(root, MLX5Options{HCA: "mlx5_" + string(rune('0'+i)), Netdev: o.Ports[i], MAC: o.MACs[i],
			PCIAddr: []string{bondPCI0, bondPCI1}[i][len(MLX5PCIBus)+1:], Uverbs: i, TableSize: o.TableSize}); err != nil {
			return err
		}
	}
	if err := AddNetdev(root, NetdevSpec{Name: o.Bond, MAC: o.MACs[0]}); err != nil {
		return err
	}
	def, err := DefaultGID(o.MACs[0])
	if err != nil {
		return err
	}
	for _, e := range Pair(2, def, o.Bond) {
		if err := SetGID(root, "mlx5_0", 1, e.Index, e.GID, e.Type, e.Ndev); err != nil {
			return err
		}
	}
	return nil
}
