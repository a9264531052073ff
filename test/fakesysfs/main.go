// Command fakesysfs builds and changes fake RDMA sysfs trees (package
// rdmatest) for shell end-to-end scripts: point the daemon's --sysfs-root at
// the tree, then add and remove GID entries as the kernel would.
//
//	fakesysfs [build] -root DIR -kind mlx5|rxe [-hca NAME] [-netdev NAME] [-mac MAC]
//	          [-size N] [-state ACTIVE|DOWN] [-link-layer Ethernet|InfiniBand]
//	          [-netns-mode shared|exclusive] [-host-ipv4 IP] [-uverbs N] [-pci ADDR] [-no-rdma-cm]
//	          [-node-guid GUID] [-pending I,J,...]
//	fakesysfs set-gid   -root DIR -hca NAME [-port 1] -index I -gid GID [-type "RoCE v2"] [-ndev NAME]
//	fakesysfs clear-gid -root DIR -hca NAME [-port 1] -index I
//	fakesysfs add-ip    -root DIR -hca NAME [-port 1] -ip IP -ndev NAME   # prints the indices used
//	fakesysfs del-ip    -root DIR -hca NAME [-port 1] -ip IP [-held]      # prints the indices cleared
//	fakesysfs release   -root DIR -hca NAME [-port 1] [-index I]          # prints the slots freed
//	fakesysfs swap-hca  -root DIR -a NAME -b NAME
//	fakesysfs rename-hca -root DIR -from NAME -to NAME [-uverbs N]
//	fakesysfs netns-mode -root DIR -mode shared|exclusive
//
// Pending delete: del-ip -held removes an address whose entries a QP still
// holds: they read empty at once, but add-ip passes over their slots until
// release frees them (all of the port's, or -index I), as the kernel does.
// -pending builds a table with such slots. swap-hca and rename-hca rename
// HCAs as a reboot with another probe order does: names and uverbsN move,
// the PCI functions, node GUIDs, netdevs and GID tables stay (stop the
// daemon first, as across a reboot).
//
// It leaves behind only the tree under -root; remove it with rm -rf.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fakesysfs:", err)
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	cmd := "build"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("fakesysfs "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "", "root of the fake tree (required)")
	hca := fs.String("hca", "", "RDMA device name (build: default mlx5_0 or rxe0)")
	port := fs.Int("port", 1, "port number")
	switch cmd {
	case "build":
		kind := fs.String("kind", "mlx5", "mlx5 or rxe")
		netdev := fs.String("netdev", "", "the port's netdev (default ens3np0 for mlx5, eth0 for rxe)")
		mac := fs.String("mac", "", "the netdev's MAC (the default GID derives from it)")
		size := fs.Int("size", 0, "GID table size (default 255 for mlx5, 1024 for rxe)")
		state := fs.String("state", "ACTIVE", "port state: ACTIVE or DOWN")
		ll := fs.String("link-layer", "Ethernet", "mlx5 link layer: Ethernet or InfiniBand")
		mode := fs.String("netns-mode", "shared", "RDMA netns mode: shared or exclusive")
		hostIP := fs.String("host-ipv4", "", "an IPv4 address on the netdev itself (adds its entries)")
		uverbs := fs.Int("uverbs", 0, "N of uverbsN/umadN/issmN (use 1 for a second device in the same tree)")
		pci := fs.String("pci", "", "mlx5 PCI address (default 0000:03:00.0)")
		noCM := fs.Bool("no-rdma-cm", false, "leave out misc/rdma_cm (rdma_ucm not loaded)")
		guid := fs.String("node-guid", "", "mlx5 node GUID (default: derived from -mac)")
		pending := fs.String("pending", "", "mlx5 slots, comma separated, that read empty but a QP holds (pending delete)")
		if err := parse(fs, args); err != nil {
			return err
		}
		if *root == "" {
			return errors.New("-root is required")
		}
		held, err := indexList(*pending)
		if err != nil {
			return fmt.Errorf("-pending: %w", err)
		}
		switch *kind {
		case "mlx5":
			return rdmatest.BuildMLX5(*root, rdmatest.MLX5Options{
				HCA: *hca, Netdev: *netdev, MAC: *mac, PCIAddr: *pci, TableSize: *size,
				State: *state, LinkLayer: *ll, NetnsMode: *mode, HostIPv4: *hostIP,
				Uverbs: *uverbs, NoRdmaCM: *noCM, NodeGUID: *guid, PendingDelete: held,
			})
		case "rxe":
			return rdmatest.BuildRXE(*root, rdmatest.RXEOptions{
				HCA: *hca, Netdev: *netdev, MAC: *mac, TableSize: *size, State: *state,
				NetnsMode: *mode, HostIPv4: *hostIP, Uverbs: *uverbs, NoRdmaCM: *noCM,
			})
		}
		return fmt.Errorf("-kind %q: want mlx5 or rxe", *kind)
	case "set-gid", "clear-gid":
		index := fs.Int("index", -1, "GID index")
		gid := fs.String("gid", "", "GID in kernel text (set-gid)")
		typ := fs.String("type", rdmatest.TypeV2, `GID type: "IB/RoCE v1" or "RoCE v2" (set-gid)`)
		ndev := fs.String("ndev", "", "netdev name as seen in its namespace (set-gid)")
		if err := parse(fs, args); err != nil {
			return err
		}
		if err := need(*root, *hca); err != nil {
			return err
		}
		if *index < 0 {
			return errors.New("-index is required")
		}
		if cmd == "clear-gid" {
			return rdmatest.ClearGID(*root, *hca, *port, *index)
		}
		if *gid == "" {
			return errors.New("-gid is required")
		}
		return rdmatest.SetGID(*root, *hca, *port, *index, *gid, *typ, *ndev)
	case "add-ip", "del-ip":
		ip := fs.String("ip", "", "IP address")
		ndev := fs.String("ndev", "", "netdev name as seen in its namespace (add-ip)")
		held := fs.Bool("held", false, "a QP still holds the entries: their slots stay taken until release (del-ip)")
		if err := parse(fs, args); err != nil {
			return err
		}
		if err := need(*root, *hca); err != nil {
			return err
		}
		if *ip == "" {
			return errors.New("-ip is required")
		}
		var idx []int
		var err error
		switch {
		case cmd == "add-ip":
			idx, err = rdmatest.AddAddress(*root, *hca, *port, *ip, *ndev)
		case *held:
			idx, err = rdmatest.RemoveAddressHeld(*root, *hca, *port, *ip)
		default:
			idx, err = rdmatest.RemoveAddress(*root, *hca, *port, *ip)
		}
		fmt.Fprintln(stdout, strings.Trim(fmt.Sprint(idx), "[]"))
		return err
	case "release":
		index := fs.Int("index", -1, "the pending-delete slot to free (default: every one of the port)")
		if err := parse(fs, args); err != nil {
			return err
		}
		if err := need(*root, *hca); err != nil {
			return err
		}
		var which []int
		if *index >= 0 {
			which = []int{*index}
		}
		freed, err := rdmatest.ReleasePending(*root, *hca, *port, which...)
		fmt.Fprintln(stdout, strings.Trim(fmt.Sprint(freed), "[]"))
		return err
	case "swap-hca":
		a := fs.String("a", "", "one HCA")
		b := fs.String("b", "", "the other HCA")
		if err := parse(fs, args); err != nil {
			return err
		}
		if *root == "" || *a == "" || *b == "" {
			return errors.New("-root, -a and -b are required")
		}
		return rdmatest.SwapHCAs(*root, *a, *b)
	case "rename-hca":
		from := fs.String("from", "", "the HCA's name now")
		to := fs.String("to", "", "its new name")
		uverbs := fs.Int("uverbs", -1, "N of its new uverbsN (default: keep)")
		if err := parse(fs, args); err != nil {
			return err
		}
		if *root == "" || *from == "" || *to == "" {
			return errors.New("-root, -from and -to are required")
		}
		return rdmatest.RenameHCAs(*root, rdmatest.Rename{From: *from, To: *to, Uverbs: *uverbs})
	case "netns-mode":
		mode := fs.String("mode", "", "shared or exclusive")
		if err := parse(fs, args); err != nil {
			return err
		}
		if *root == "" {
			return errors.New("-root is required")
		}
		return rdmatest.SetNetnsMode(*root, *mode)
	}
	return fmt.Errorf("unknown command %q: want build, set-gid, clear-gid, add-ip, del-ip, release, swap-hca, rename-hca or netns-mode", cmd)
}

// indexList parses "2,3" into slots; "" is none.
func indexList(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || i < 0 {
			return nil, fmt.Errorf("%q is not a slot number", f)
		}
		out = append(out, i)
	}
	return out, nil
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return nil
}

func need(root, hca string) error {
	if root == "" || hca == "" {
		return errors.New("-root and -hca are required")
	}
	return nil
}
