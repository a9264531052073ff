package driver

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/sirupsen/logrus"
)

// networkRDMA is what a network knows of the RDMA device behind its parent.
type networkRDMA struct {
	HCA    string `json:"hca"`
	Port   int    `json:"port"`
	Netdev string `json:"netdev"` // the real device: the parent, or its VLAN's lower device
	// Types is the number of RoCE types (GID entries per address) of the
	// port; 0 in records of older versions, filled in on first use.
	Types int `json:"roce_types,omitempty"`
	// CDIName is the CDI device name of the port (cdi.Name): the HCA's
	// name, or <hca>-p<port> on an HCA with more than one port. Records of
	// older versions have none; restore fills it in.
	CDIName string `json:"cdi_name,omitempty"`
	// NodeGUID and PCI identify the HCA across reboots and renames (its
	// name follows probe order): see identity.go. Records of older
	// versions have neither; restore fills them in.
	NodeGUID string `json:"node_guid,omitempty"`
	PCI      string `json:"pci,omitempty"`
}

// identity is what r records of its HCA's identity.
func (r *networkRDMA) identity() rdma.Identity {
	return rdma.Identity{NodeGUID: r.NodeGUID, PCI: r.PCI}
}

// cdiName is the CDI device name of r: the one recorded, else the HCA's
// (what versions before per-port names published).
func (r *networkRDMA) cdiName() string {
	if r.CDIName != "" {
		return r.CDIName
	}
	return r.HCA
}

// detectRDMA maps the parent to its HCA port and checks that containers on
// it can use RDMA: Ethernet link layer, the shared RDMA netns mode and a
// uverbs node. A port that is down is only a warning: it may come up later.
func (d *Driver) detectRDMA(parent, netdev, override string, log *logrus.Entry) (*networkRDMA, error) {
	hca, port, err := rdma.OnePort(netdev, d.hcaPortsForNetdev)
	switch {
	case override != "" && err == nil && hca != override:
		return nil, invalidf("rdma_device %q does not belong to parent %q: its RDMA device is %s port %d (check: rdma link show): leave rdma_device out, or pass the parent of %s",
			override, parent, hca, port, override)
	case override != "" && err != nil:
		hca, port, err = d.overrideRDMA(parent, netdev, override, err)
		if err != nil {
			return nil, err
		}
	case errors.Is(err, rdma.ErrNoRDMADevice):
		return nil, hostSetupf("parent %q has no RDMA device (check: rdma link show): pass -o parent=<RoCE netdev>, or load its RDMA driver (e.g. modprobe mlx5_ib; for Soft-RoCE: rdma link add rxe0 type rxe netdev %s)",
			parent, netdev)
	case errors.Is(err, rdma.ErrAmbiguousRDMADevice):
		return nil, invalidf("parent %q: %v: pass -o rdma_device=<one of them>", parent, err)
	case err != nil:
		return nil, fmt.Errorf("find the RDMA device of parent %q: %w", parent, err)
	}

	pi, err := d.rdma.Port(hca, port)
	if err != nil {
		return nil, fmt.Errorf("read RDMA device %s port %d of parent %q: %w", hca, port, parent, err)
	}
	if pi.LinkLayer != "Ethernet" {
		return nil, hostSetupf("RDMA device %s port %d (parent %q) has link layer %s; rdma-macvlan needs RoCE, i.e. an Ethernet port (check: rdma link show %s/%d): use an Ethernet port, or switch the port type (e.g. mlxconfig ... LINK_TYPE_P%d=2)",
			hca, port, parent, pi.LinkLayer, hca, port, port)
	}
	if !pi.Active() {
		log.WithFields(logrus.Fields{"ibdev": hca, "port": port, "state": pi.State}).
			Warn("RDMA port is not active; containers get no RDMA traffic until it is (check: rdma link show)")
	}
	mode, source, err := rdma.NetnsMode(d.netnsMode, d.rdma)
	if err != nil {
		return nil, fmt.Errorf("cannot tell the RDMA netns mode (check: rdma system show netns): %w", err)
	}
	if mode != rdma.NetnsShared {
		return nil, hostSetupf("the RDMA subsystem is in %s netns mode (read from %s), which binds %s to one network namespace: containers need the shared mode. Fix at boot, before any container runs: rdma system set netns shared, or the ib_core module option netns_mode=1",
			mode, source, hca)
	}
	if _, err := d.rdma.DeviceNodes(hca); err != nil && !errors.Is(err, rdma.ErrNoRdmaCM) {
		return nil, fmt.Errorf("device nodes of RDMA device %s (parent %q): %w (check: ls /dev/infiniband; load ib_uverbs)", hca, parent, err)
	}
	cdiName, err := cdi.NameOnHost(d.rdma, hca, port)
	if err != nil {
		return nil, fmt.Errorf("CDI device name of RDMA device %s port %d (parent %q): %w", hca, port, parent, err)
	}
	id, err := d.rdma.Identity(hca)
	if err != nil {
		return nil, fmt.Errorf("identity of RDMA device %s (parent %q): %w", hca, parent, err)
	}
	return &networkRDMA{HCA: hca, Port: port, Netdev: netdev, Types: d.rdma.RoCETypesPerAddress(hca, port), CDIName: cdiName,
		NodeGUID: id.NodeGUID, PCI: id.PCI}, nil
}

// overrideRDMA checks -o rdma_device when detection found nothing or more
// than one device: the named device must have a port on netdev.
func (d *Driver) overrideRDMA(parent, netdev, override string, detectErr error) (string, int, error) {
	cands, err := d.hcaPortsForNetdev(netdev)
	if err != nil && !errors.Is(err, rdma.ErrAmbiguousRDMADevice) {
		cands = nil
	}
	var names []string
	for _, c := range cands {
		if c.HCA == override {
			return c.HCA, c.Port, nil
		}
		names = append(names, c.String())
	}
	if len(names) == 0 {
		return "", 0, invalidf("rdma_device %q does not belong to parent %q, which has no RDMA device (%v; check: rdma link show): pass the parent of %s",
			override, parent, detectErr, override)
	}
	return "", 0, invalidf("rdma_device %q does not belong to parent %q, whose RDMA devices are %s: pass one of them",
		override, parent, strings.Join(names, ", "))
}
