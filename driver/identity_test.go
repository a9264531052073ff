package driver

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// twoRails builds mlx5_0 on p0 (uverbs0) and mlx5_1 on p1 (uverbs1), with
// GID tables of 8 slots.
func twoRails(t *testing.T) string {
	t.Helper()
	return buildRoot(t, func(root string) error {
		for i, nd := range []string{"p0", "p1"} {
			if err := rdmatest.BuildMLX5(root, rdmatest.MLX5Options{HCA: fmt.Sprintf("mlx5_%d", i), Netdev: nd, Uverbs: i, TableSize: 8,
				PCIAddr: fmt.Sprintf("0000:%02x:00.0", 3+i), MAC: fmt.Sprintf("a0:88:c2:5b:03:%02x", i)}); err != nil {
				return err
			}
		}
		return nil
	})
}

// netStatus returns the status of network nid.
func netStatus(t *testing.T, d testDriver, nid string) api.Network {
	t.Helper()
	for _, n := range d.Status().Networks {
		if n.ID == nid {
			return n
		}
	}
	t.Fatalf("network %s not in the status", nid)
	return api.Network{}
}

// specOf returns the text of the CDI spec of device name, "" if none.
func specOf(t *testing.T, d testDriver, name string) string {
	t.Helper()
	b, err := os.ReadFile(cdi.SpecPath(d.cdiDir, name))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A restart after the HCAs' names and uverbs numbers were swapped under the
// parents (another probe order at boot): each network follows its parent's
// NIC, by its recorded identity or, for a record of a version before
// identities, because the parent has one HCA: the status, the CDI spec and
// admission all name the new HCA and uverbs node, and the record is saved.
func TestRenamedHCAIsFollowedAtStart(t *testing.T) {
	for _, old := range []bool{false, true} {
		t.Run(map[bool]string{false: "identity recorded", true: "record of an older version"}[old], func(t *testing.T) {
			links := drivertest.NewLinks("p0", "p1")
			root, dir := twoRails(t), t.TempDir()
			d := newTestDriverAt(t, links, dir, root)
			for i, p := range []string{"p0", "p1"} {
				if err := d.CreateNetwork(netReq(fmt.Sprintf("n%d", i), "parent", p)); err != nil {
					t.Fatal(err)
				}
			}
			if n := netStatus(t, d, "n0"); n.NodeGUID != "a088:c203:005b:0300" || n.PCI != "0000:03:00.0" {
				t.Fatalf("status of n0 has identity %q %q, want its HCA's node GUID and PCI function", n.NodeGUID, n.PCI)
			}
			if old {
				for _, nid := range []string{"n0", "n1"} {
					n := d.networks[nid]
					n.RDMA.NodeGUID, n.RDMA.PCI = "", ""
					if err := d.store.saveNetwork(n.network); err != nil {
						t.Fatal(err)
					}
				}
			}
			d.Close()
			if err := rdmatest.SwapHCAs(root, "mlx5_0", "mlx5_1"); err != nil {
				t.Fatal(err)
			}
			// The NIC of p1, now named mlx5_0, has a full table.
			for i := 2; i < 8; i++ {
				if err := rdmatest.SetGID(root, "mlx5_0", 1, i, rdmatest.IPv4GID(fmt.Sprintf("10.7.0.%d", i)), rdmatest.TypeV2, "eth0"); err != nil {
					t.Fatal(err)
				}
			}
			log, hook := logtest.NewNullLogger()
			dd, err := New(Config{StateDir: dir, Links: links, Log: log, Sysfs: rdma.NewSysfs(root), CDIDir: d.cdiDir,
				GIDTimeout: 2 * time.Second, GIDPoll: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(dd.Close)
			d = testDriver{Driver: dd, root: root, cdiDir: d.cdiDir}
			renamed := 0
			for _, e := range hook.AllEntries() {
				if strings.Contains(e.Message, "RDMA device was renamed") {
					renamed++
				}
			}
			if renamed != 2 {
				t.Errorf("%d renames logged, want one per network", renamed)
			}
			for nid, want := range map[string]struct {
				hca    string
				minor  uint32
				uverbs string
			}{"n0": {"mlx5_1", 193, "uverbs1"}, "n1": {"mlx5_0", 192, "uverbs0"}} {
				n := netStatus(t, d, nid)
				if n.HCA != want.hca || n.CDIDevice != cdi.Qualified(want.hca) || len(n.Devices) == 0 || n.Devices[0].Minor != want.minor || len(n.Problems) > 0 {
					t.Errorf("after the swap %s is on %s (%s, devices %+v, problems %q), want %s with %s", nid, n.HCA, n.CDIDevice, n.Devices, n.Problems, want.hca, want.uverbs)
				}
				if s := specOf(t, d, want.hca); !strings.Contains(s, "/dev/infiniband/"+want.uverbs) {
					t.Errorf("CDI spec of %s does not give %s:\n%s", want.hca, want.uverbs, s)
				}
			}
			if _, err := d.CreateEndpoint(ep("n0", "e0", "10.5.0.2/24")); err != nil {
				t.Errorf("admission on n0 counted another NIC's full table: %v", err)
			}
			var full *TableFullError
			if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.3/24")); !errors.As(err, &full) || full.HCA != "mlx5_0" {
				t.Errorf("n1's NIC (now mlx5_0) has a full table: got %v, want a refusal naming mlx5_0", err)
			}
			b, err := os.ReadFile(d.store.networkPath("n0"))
			if err != nil || !strings.Contains(string(b), `"hca": "mlx5_1"`) || !strings.Contains(string(b), `"pci": "0000:03:00.0"`) {
				t.Errorf("record of n0 not saved with its HCA now (%v):\n%s", err, b)
			}
		})
	}
}

// A device gone, its name taken by no other: the spec of the name, left
// from before the restart, is removed, not rewritten for the network.
func TestGoneHCASpecRemoved(t *testing.T) {
	links := drivertest.NewLinks("p0", "p1")
	root, dir := twoRails(t), t.TempDir()
	d := newTestDriverAt(t, links, dir, root)
	if err := d.CreateNetwork(netReq("n0", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	if specOf(t, d, "mlx5_0") == "" {
		t.Fatal("no spec of mlx5_0 to begin with")
	}
	d.Close()
	if err := rdmatest.RemoveHCA(root, "mlx5_0"); err != nil {
		t.Fatal(err)
	}
	d = newTestDriverAt(t, links, dir, root)
	if s := specOf(t, d, "mlx5_0"); s != "" {
		t.Errorf("the spec of the gone mlx5_0 is left:\n%s", s)
	}
	if p := netStatus(t, d, "n0").Problems; len(p) != 1 {
		t.Errorf("problems %q, want the gone device", p)
	}
}

// A parent whose RDMA device is gone is a problem of its network: the
// status says so, its endpoints are refused, and its CDI spec is removed;
// the name it recorded, now another NIC's, is not taken for it.
func TestGoneHCAIsAProblemOfItsNetwork(t *testing.T) {
	links := drivertest.NewLinks("p0", "p1")
	root, dir := twoRails(t), t.TempDir()
	d := newTestDriverAt(t, links, dir, root)
	for i, p := range []string{"p0", "p1"} {
		if err := d.CreateNetwork(netReq(fmt.Sprintf("n%d", i), "parent", p)); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
	// p0's NIC is gone; p1's comes up as mlx5_0.
	if err := rdmatest.RemoveHCA(root, "mlx5_0"); err != nil {
		t.Fatal(err)
	}
	if err := rdmatest.RenameHCA(root, "mlx5_1", "mlx5_0", 1); err != nil {
		t.Fatal(err)
	}
	d = newTestDriverAt(t, links, dir, root)
	n0 := netStatus(t, d, "n0")
	if n0.HCA != "" || n0.CDIDevice != "" || len(n0.Problems) != 1 || !strings.Contains(n0.Problems[0], `RDMA device of parent "p0" is gone (it was mlx5_0 port 1`) {
		t.Errorf("n0 on %q (%s), problems %q: want no HCA and the problem named", n0.HCA, n0.CDIDevice, n0.Problems)
	}
	if n1 := netStatus(t, d, "n1"); n1.HCA != "mlx5_0" || len(n1.Problems) > 0 {
		t.Errorf("n1 on %q, problems %q, want mlx5_0", n1.HCA, n1.Problems)
	}
	if s := specOf(t, d, "mlx5_0"); !strings.Contains(s, "/dev/infiniband/uverbs1") {
		t.Errorf("the spec of mlx5_0 is not the one of p1's NIC (uverbs1):\n%s", s)
	}
	if s := specOf(t, d, "mlx5_1"); s != "" {
		t.Errorf("a spec of mlx5_1 is left:\n%s", s)
	}
	// A network coming and going on p1's NIC rewrites the spec for the
	// networks left on it: n1, not n0, whose recorded name is mlx5_0 too.
	if err := d.CreateNetwork(netReq("n2", "parent", "p1")); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteNetwork("n2"); err != nil {
		t.Fatal(err)
	}
	if s := specOf(t, d, "mlx5_0"); !strings.Contains(s, "RDMA_MACVLAN_NETDEV_mlx5_0=p1") {
		t.Errorf("the spec of mlx5_0 rewritten from n0's stale record, not n1's (netdev p1):\n%s", s)
	}
	_, err := d.CreateEndpoint(ep("n0", "e0", "10.5.0.2/24"))
	var hs *HostSetupError
	if !errors.As(err, &hs) || !strings.Contains(err.Error(), "network n0 cannot take containers") || !strings.Contains(err.Error(), "rdma link show") {
		t.Errorf("an endpoint of n0: got %v, want a host set-up refusal naming the network and the check", err)
	}
	// Deleting it leaves the other network's spec alone.
	if err := d.DeleteNetwork("n0"); err != nil {
		t.Fatal(err)
	}
	if s := specOf(t, d, "mlx5_0"); s == "" {
		t.Error("deleting the network without HCA removed the spec of another network")
	}
}

// A parent whose RDMA device was not there at start (the plugin started
// before mlx5_ib registered it) is taken again once the device is there:
// the next CreateEndpoint finds it, the network loses its problem, gets its
// CDI spec back and takes the container; no restart needed.
func TestHCAFoundAfterStart(t *testing.T) {
	links := drivertest.NewLinks("p0", "p1")
	root, dir := twoRails(t), t.TempDir()
	d := newTestDriverAt(t, links, dir, root)
	if err := d.CreateNetwork(netReq("n0", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	// A container joined before the restart, still waiting for its entries.
	if _, err := d.CreateEndpoint(ep("n0", "er", "10.5.0.9/24")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Join("n0", "er", "/sb/r"); err != nil {
		t.Fatal(err)
	}
	if _, err := links.MoveToSandbox(LinkName("er")); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if err := rdmatest.RemoveHCA(root, "mlx5_0"); err != nil {
		t.Fatal(err)
	}
	d = newTestDriverAt(t, links, dir, root)
	if p := netStatus(t, d, "n0").Problems; len(p) != 1 {
		t.Fatalf("problems %q, want the device not found", p)
	}
	if _, err := d.CreateEndpoint(ep("n0", "e0", "10.5.0.2/24")); err == nil {
		t.Fatal("a container was taken on a network without its RDMA device")
	}
	// The driver registers the device now.
	if err := rdmatest.BuildMLX5(root, rdmatest.MLX5Options{HCA: "mlx5_0", Netdev: "p0", Uverbs: 0, TableSize: 8,
		PCIAddr: "0000:03:00.0", MAC: "a0:88:c2:5b:03:00"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateEndpoint(ep("n0", "e1", "10.5.0.3/24")); err != nil {
		t.Fatalf("the device is back, yet: %v", err)
	}
	n0 := netStatus(t, d, "n0")
	if n0.HCA != "mlx5_0" || len(n0.Problems) > 0 {
		t.Errorf("n0 on %q, problems %q: want mlx5_0 and none", n0.HCA, n0.Problems)
	}
	if s := specOf(t, d, "mlx5_0"); !strings.Contains(s, "/dev/infiniband/uverbs0") {
		t.Errorf("no CDI spec of mlx5_0 giving uverbs0 after the device came:\n%s", s)
	}
	// The container restored while the device was missing is tracked and
	// watched again: its entries count in admission and make it ready.
	if !d.gids.Watching("er") {
		t.Error("the endpoint restored while the device was missing is not watched once it is found")
	}
}
