package rdmatest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Renamed HCAs. The kernel names RDMA devices in probe order (mlx5_0,
// mlx5_1, ...) and numbers uverbsN likewise; rdma-core's udev rules may
// rename them again. A reboot that probes the PCI functions in another
// order (or a RoCE LAG switched on) gives each NIC another name and
// another uverbs node, while what identifies the NIC stays: its PCI
// function (the device link of the HCA and of its netdevs), its node GUID,
// its ports and their GID tables. RenameHCAs does that to a fake tree.

// Rename is one HCA's new name and uverbs number.
type Rename struct {
	From, To string
	// Uverbs is N of the new uverbsN (umadN/issmN follow, one per port);
	// -1 keeps the current number.
	Uverbs int
}

// hcaNodes is what RenameHCAs moves of one HCA.
type hcaNodes struct {
	r      Rename
	dir    string // the device's directory relative to root: <parent>/infiniband/<From>
	parent string // the PCI function's directory, or sys/devices/virtual
	uverbs int
	ports  []PortSpec // port numbers only, for the umad/issm nodes
	tmp    string     // where the directory waits between the two phases
}

// RenameHCAs renames HCAs as a reboot with another probe order does: each
// From becomes To with uverbs node Uverbs, under the same PCI function, with
// the same node GUID, ports and GID tables; the class entries and the
// uverbs, umad and issm nodes follow. Renames are applied together, so a
// swap or a rotation needs no spare name. The daemon must not be running
// (as across a reboot): the tree is briefly without the devices.
// Equivalent, on a host: a reboot, or rdma dev set FROM name TO.
func RenameHCAs(root string, renames ...Rename) error {
	nodes := make([]*hcaNodes, 0, len(renames))
	from, to, uv := map[string]bool{}, map[string]bool{}, map[int]bool{}
	for _, r := range renames {
		if err := checkHCAName(r.To); err != nil {
			return err
		}
		n, err := findHCA(root, r)
		if err != nil {
			return err
		}
		if from[r.From] || to[r.To] || uv[n.r.Uverbs] {
			return fmt.Errorf("rename %s to %s (uverbs%d): a name or uverbs number appears twice in one rename", r.From, r.To, n.r.Uverbs)
		}
		from[r.From], to[r.To], uv[n.r.Uverbs] = true, true, true
		nodes = append(nodes, n)
	}
	// Names and uverbs numbers taken by devices that keep theirs.
	others, err := os.ReadDir(filepath.Join(root, "sys/class/infiniband_verbs"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, e := range others {
		n, ok := strings.CutPrefix(e.Name(), "uverbs")
		i, err := strconv.Atoi(n)
		if !ok || err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(root, "sys/class/infiniband_verbs", e.Name(), "ibdev"))
		owner := strings.TrimSpace(string(b))
		if !from[owner] && uv[i] {
			return fmt.Errorf("rename to uverbs%d: %s keeps that node; rename it too", i, owner)
		}
	}
	for name := range to {
		if _, err := os.Lstat(filepath.Join(root, "sys/class/infiniband", name)); err == nil && !from[name] {
			return fmt.Errorf("rename to %s: an HCA of that name exists and keeps it; rename it too", name)
		}
	}

	// Phase 1: every device leaves its name and nodes.
	if err := os.MkdirAll(filepath.Join(root, templateDir), 0o755); err != nil {
		return err
	}
	for i, n := range nodes {
		n.tmp = filepath.Join(templateDir, fmt.Sprintf("rename-%d-%d", os.Getpid(), i))
		if err := os.Rename(filepath.Join(root, n.dir), filepath.Join(root, n.tmp)); err != nil {
			return fmt.Errorf("rename %s: %w", n.r.From, err)
		}
		if err := removeCharDevs(root, n); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(root, "sys/class/infiniband", n.r.From)); err != nil {
			return fmt.Errorf("rename %s: %w", n.r.From, err)
		}
	}
	// Phase 2: every device takes its new name and nodes.
	for _, n := range nodes {
		dir := filepath.Join(n.parent, "infiniband", n.r.To)
		if err := os.Rename(filepath.Join(root, n.tmp), filepath.Join(root, dir)); err != nil {
			return fmt.Errorf("rename %s to %s: %w", n.r.From, n.r.To, err)
		}
		if err := symlink(root, dir, filepath.Join("sys/class/infiniband", n.r.To)); err != nil {
			return err
		}
		if err := writeCharDevs(root, n.parent, n.r.To, n.r.Uverbs, n.ports); err != nil {
			return err
		}
	}
	return nil
}

// SwapHCAs swaps the names and uverbs numbers of HCAs a and b, the two
// NICs of a host rebooted with the other probe order.
func SwapHCAs(root, a, b string) error {
	ua, err := UverbsOf(root, a)
	if err != nil {
		return err
	}
	ub, err := UverbsOf(root, b)
	if err != nil {
		return err
	}
	return RenameHCAs(root, Rename{From: a, To: b, Uverbs: ub}, Rename{From: b, To: a, Uverbs: ua})
}

// UverbsOf returns N of the uverbsN node of hca.
func UverbsOf(root, hca string) (int, error) {
	ents, err := os.ReadDir(filepath.Join(root, "sys/class/infiniband_verbs"))
	if err != nil {
		return 0, fmt.Errorf("uverbs node of %s: %w", hca, err)
	}
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), "uverbs")
		i, err := strconv.Atoi(n)
		if !ok || err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, "sys/class/infiniband_verbs", e.Name(), "ibdev"))
		if err == nil && strings.TrimSpace(string(b)) == hca {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no uverbs node names RDMA device %s in %s", hca, root)
}

func checkHCAName(name string) error {
	if name == "" || strings.ContainsAny(name, "/ \t\n") || strings.HasPrefix(name, ".") || len(name) > 63 {
		return fmt.Errorf("HCA name %q: want a device name such as mlx5_0", name)
	}
	return nil
}

// findHCA finds what RenameHCAs moves of r.From.
func findHCA(root string, r Rename) (*hcaNodes, error) {
	class := filepath.Join(root, "sys/class/infiniband", r.From)
	target, err := filepath.EvalSymlinks(class)
	if err != nil {
		return nil, fmt.Errorf("rename %s: no such RDMA device in %s: %w", r.From, root, err)
	}
	absRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Rel(absRoot, target)
	if err != nil {
		return nil, err
	}
	n := &hcaNodes{r: r, dir: dir, parent: filepath.Dir(filepath.Dir(dir))}
	if n.uverbs, err = UverbsOf(root, r.From); err != nil {
		return nil, fmt.Errorf("rename %s: %w", r.From, err)
	}
	if n.r.Uverbs < 0 {
		n.r.Uverbs = n.uverbs
	}
	ports, err := os.ReadDir(filepath.Join(root, dir, "ports"))
	if err != nil {
		return nil, fmt.Errorf("rename %s: %w", r.From, err)
	}
	for _, p := range ports {
		if i, err := strconv.Atoi(p.Name()); err == nil {
			n.ports = append(n.ports, PortSpec{Port: i})
		}
	}
	return n, nil
}

// removeCharDevs removes the uverbs, umad and issm nodes of n (as
// writeCharDevs made them) and their class entries.
func removeCharDevs(root string, n *hcaNodes) error {
	names := []string{"infiniband_verbs/uverbs" + strconv.Itoa(n.uverbs)}
	for i := range n.ports {
		names = append(names, "infiniband_mad/umad"+strconv.Itoa(n.uverbs+i), "infiniband_mad/issm"+strconv.Itoa(n.uverbs+i))
	}
	for _, name := range names {
		for _, p := range []string{filepath.Join(n.parent, name), filepath.Join("sys/class", name)} {
			if err := os.RemoveAll(filepath.Join(root, p)); err != nil {
				return fmt.Errorf("rename %s: %w", n.r.From, err)
			}
		}
	}
	return nil
}

// RenameHCA renames one HCA: old becomes new with uverbs node uverbs (-1
// keeps its number), as RenameHCAs does.
func RenameHCA(root, old, new string, uverbs int) error {
	return RenameHCAs(root, Rename{From: old, To: new, Uverbs: uverbs})
}

// RemoveHCA takes RDMA device hca out of the tree, as when its driver is
// unloaded or the NIC is gone: its class entry, its directory and its
// uverbs, umad and issm nodes. The PCI function and its netdevs stay.
func RemoveHCA(root, hca string) error {
	n, err := findHCA(root, Rename{From: hca, To: hca, Uverbs: -1})
	if err != nil {
		return fmt.Errorf("remove HCA %s: %w", hca, err)
	}
	if err := removeCharDevs(root, n); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(root, "sys/class/infiniband", hca)); err != nil {
		return fmt.Errorf("remove HCA %s: %w", hca, err)
	}
	return os.RemoveAll(filepath.Join(root, n.dir))
}
