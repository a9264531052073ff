package rdmaexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaenv"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

func ifaces(list ...Iface) func() ([]Iface, error) {
	return func() ([]Iface, error) { return list, nil }
}

func iface(name string, cidrs ...string) Iface {
	ifc := Iface{Name: name}
	for _, c := range cidrs {
		ifc.Addrs = append(ifc.Addrs, netip.MustParsePrefix(c))
	}
	return ifc
}

var lo = iface("lo", "127.0.0.1/8", "::1/128")

func roce(hca string, subnets ...string) Network {
	n := Network{Name: "roce", HCA: hca, Port: 1}
	for _, s := range subnets {
		n.Subnets = append(n.Subnets, netip.MustParsePrefix(s))
	}
	return n
}

// The entries appear while the helper waits, as the kernel adds them once
// the engine sets the address; other containers' eth0 entries are in the
// same table.
func TestWaitFindsOwnEntryAmongOthers(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{HostIPv4: "10.9.0.1"})
	for _, ip := range []string{"10.7.0.2", "10.7.0.3"} {
		if _, err := rdmatest.AddAddress(root, "mlx5_0", 1, ip, "eth0"); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{
		Networks:  []Network{roce("mlx5_0", "10.7.0.0/24")},
		Choice:    rdmaenv.DefaultChoice,
		Timeout:   5 * time.Second,
		Poll:      10 * time.Millisecond,
		SysfsRoot: root,
		Ifaces:    ifaces(lo, iface("eth0", "10.7.0.4/24", "fe80::1/64")),
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		if _, err := rdmatest.AddAddress(root, "mlx5_0", 1, "10.7.0.4", "eth0"); err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	ports, err := Wait(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 90*time.Millisecond {
		t.Fatalf("returned after %s, before the entry was added", time.Since(start))
	}
	// default pair 0/1, host 2/3, 10.7.0.2 4/5, 10.7.0.3 6/7, ours 8/9.
	if len(ports) != 1 || ports[0].Index != 9 || ports[0].Ifname != "eth0" || ports[0].HCA != "mlx5_0" || ports[0].Addr != netip.MustParseAddr("10.7.0.4") {
		t.Fatalf("ports = %+v", ports)
	}
	cfg.Choice = rdmaenv.Choice{Version: 1}
	if ports, err = Wait(context.Background(), cfg); err != nil || ports[0].Index != 8 {
		t.Fatalf("v1: %+v %v", ports, err)
	}
}

// Two networks on two HCAs; and a network whose HCA docker rdma run did
// not know is looked for on every port.
func TestWaitTwoNetworksAndUnknownHCA(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	if err := rdmatest.BuildMLX5(root, rdmatest.MLX5Options{HCA: "mlx5_1", Netdev: "ens4", MAC: "02:00:00:00:01:02", PCIAddr: "0000:04:00.0", Uverbs: 1}); err != nil {
		t.Fatal(err)
	}
	rdmatest.AddAddress(root, "mlx5_0", 1, "10.7.0.4", "eth0")
	rdmatest.AddAddress(root, "mlx5_1", 1, "10.8.0.9", "eth0") // another container's
	rdmatest.AddAddress(root, "mlx5_1", 1, "10.8.0.4", "eth1")
	cfg := Config{
		Networks:  []Network{roce("mlx5_0", "10.7.0.0/24"), {Name: "roce2", Subnets: []netip.Prefix{netip.MustParsePrefix("10.8.0.0/24")}}},
		Choice:    rdmaenv.DefaultChoice,
		Timeout:   time.Second,
		SysfsRoot: root,
		Ifaces:    ifaces(lo, iface("eth0", "10.7.0.4/24"), iface("eth1", "10.8.0.4/24")),
	}
	ports, err := Wait(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 2 || ports[0].Index != 3 || ports[1].HCA != "mlx5_1" || ports[1].Index != 5 || ports[1].Ifname != "eth1" {
		t.Fatalf("ports = %+v", ports)
	}
}

func notReady(t *testing.T, cfg Config) string {
	t.Helper()
	cfg.Timeout, cfg.Poll = 150*time.Millisecond, 20*time.Millisecond
	if cfg.Choice.Version == 0 {
		cfg.Choice = rdmaenv.DefaultChoice
	}
	_, err := Wait(context.Background(), cfg)
	var nr *NotReadyError
	if !errors.As(err, &nr) {
		t.Fatalf("Wait = %v, want a NotReadyError", err)
	}
	return err.Error()
}

func TestWaitSaysWhy(t *testing.T) {
	eth0 := iface("eth0", "10.7.0.4/24")
	t.Run("table full", func(t *testing.T) {
		root := rdmatest.MLX5(t, rdmatest.MLX5Options{TableSize: 8})
		for _, ip := range []string{"10.7.0.2", "10.7.0.3", "10.7.0.5"} {
			rdmatest.AddAddress(root, "mlx5_0", 1, ip, "eth0")
		}
		msg := notReady(t, Config{Networks: []Network{roce("mlx5_0", "10.7.0.0/24")}, SysfsRoot: root, Ifaces: ifaces(lo, eth0)})
		for _, want := range []string{"network roce: the RoCE v2 entry of 10.7.0.4 on eth0 did not appear in the table of mlx5_0 port 1",
			"the table is full (8 of 8 entries used", "workload was not started"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%q\nlacks %q", msg, want)
			}
		}
	})
	t.Run("port down", func(t *testing.T) {
		root := rdmatest.MLX5(t, rdmatest.MLX5Options{State: "DOWN"})
		msg := notReady(t, Config{Networks: []Network{roce("mlx5_0", "10.7.0.0/24")}, SysfsRoot: root, Ifaces: ifaces(lo, eth0)})
		if !strings.Contains(msg, "(253 of 255 entries free); the port is DOWN (check the cable and: rdma link show mlx5_0/1)") {
			t.Errorf("%q", msg)
		}
	})
	t.Run("no address", func(t *testing.T) {
		root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
		msg := notReady(t, Config{Networks: []Network{roce("mlx5_0", "10.7.0.0/24")}, SysfsRoot: root, Ifaces: ifaces(lo, iface("eth0"))})
		if !strings.Contains(msg, "no interface in the container has an address in 10.7.0.0/24 (interfaces: lo [127.0.0.1/8, ::1/128], eth0 [none])") {
			t.Errorf("%q", msg)
		}
	})
	t.Run("wrong HCA", func(t *testing.T) {
		root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
		rdmatest.BuildMLX5(root, rdmatest.MLX5Options{HCA: "mlx5_1", Netdev: "ens4", MAC: "02:00:00:00:01:02", PCIAddr: "0000:04:00.0", Uverbs: 1})
		rdmatest.AddAddress(root, "mlx5_1", 1, "10.7.0.4", "eth0")
		msg := notReady(t, Config{Networks: []Network{roce("mlx5_0", "10.7.0.0/24")}, SysfsRoot: root, Ifaces: ifaces(lo, eth0)})
		if !strings.Contains(msg, "it is in the table of mlx5_1 port 1 instead") {
			t.Errorf("%q", msg)
		}
	})
	t.Run("HCA not visible", func(t *testing.T) {
		root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
		msg := notReady(t, Config{Networks: []Network{roce("mlx5_3", "10.7.0.0/24")}, SysfsRoot: root, Ifaces: ifaces(lo, eth0)})
		if !strings.Contains(msg, "RDMA device mlx5_3 is not visible in the container") || !strings.Contains(msg, "exclusive netns mode") {
			t.Errorf("%q", msg)
		}
	})
	t.Run("same address, another netdev", func(t *testing.T) {
		root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
		rdmatest.AddAddress(root, "mlx5_0", 1, "10.7.0.4", "net1")
		msg := notReady(t, Config{Networks: []Network{roce("mlx5_0", "10.7.0.0/24")}, SysfsRoot: root, Ifaces: ifaces(lo, eth0)})
		if !strings.Contains(msg, "the table has that address at index 2 for netdev net1, index 3 for netdev net1: another container or the host has the same address") {
			t.Errorf("%q", msg)
		}
	})
	t.Run("v1 on rxe", func(t *testing.T) {
		root := rdmatest.RXE(t, rdmatest.RXEOptions{})
		rdmatest.AddAddress(root, "rxe0", 1, "10.7.0.4", "eth0")
		msg := notReady(t, Config{Networks: []Network{roce("rxe0", "10.7.0.0/24")}, Choice: rdmaenv.Choice{Version: 1}, SysfsRoot: root, Ifaces: ifaces(lo, eth0)})
		if !strings.Contains(msg, "the port adds only RoCE v2 entries for it (choose that version: docker rdma run --roce-version 2)") {
			t.Errorf("%q", msg)
		}
	})
}

func TestWaitStopsWithContext(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Wait(ctx, Config{Networks: []Network{roce("mlx5_0", "10.7.0.0/24")}, Choice: rdmaenv.DefaultChoice, Timeout: time.Minute,
		SysfsRoot: root, Ifaces: ifaces(lo, iface("eth0", "10.7.0.4/24"))})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v", err)
	}
}

// SystemIfaces reads this namespace: lo has 127.0.0.1/8 here as in every
// container.
func TestSystemIfaces(t *testing.T) {
	list, err := SystemIfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range list {
		if ifc.Name == "lo" {
			for _, a := range ifc.Addrs {
				if a == netip.MustParsePrefix("127.0.0.1/8") {
					return
				}
			}
			t.Fatalf("lo has %v, not 127.0.0.1/8", ifc.Addrs)
		}
	}
	t.Fatalf("no lo in %+v", list)
}

func TestParseNet(t *testing.T) {
	n, err := parseNet("name=roce,hca=mlx5_0,port=2,subnet=10.7.0.9/24,subnet=fd00::/64")
	if err != nil || FormatNet(n) != "name=roce,hca=mlx5_0,port=2,subnet=10.7.0.0/24,subnet=fd00::/64" {
		t.Fatalf("%+v %v: %s", n, err, FormatNet(n))
	}
	for _, bad := range []string{"name=x,port=0", "name=x,subnet=10.0.0.0", "name=x,colour=red", "roce"} {
		if _, err := parseNet(bad); err == nil {
			t.Errorf("parseNet(%q) accepted", bad)
		}
	}
	for _, good := range []string{"mlx5_0", "rocep3s0f0", "rxe0", strings.Repeat("x", 63)} {
		if n, err := parseNet("name=x,hca=" + good); err != nil || n.HCA != good {
			t.Errorf("hca=%s: %+v, %v", good, n, err)
		}
	}
}

// An HCA name that could not be the kernel's is refused with the other
// invalid options, before any wait, naming the value and what a name is.
func TestNetRejectsBadHCA(t *testing.T) {
	for _, bad := range []string{"../../../etc", "..", ".", "mlx5_0/ports", "/mlx5_0", strings.Repeat("x", 64), "mlx5\x00", "mlx5\t0", "mlx5\xff"} {
		var stderr bytes.Buffer
		sys := &Sys{Stderr: &stderr, Ifaces: ifaces(lo), Exec: func(string, []string, []string) error { return errors.New("exec stopped by the test") }}
		v := "name=x,hca=" + bad + ",port=1"
		code := Main([]string{"--net", v, "--timeout", "100ms", "--", "true"}, sys)
		want := fmt.Sprintf("rdma-exec: --net %q: hca: RDMA device name %q is not valid: a name is 1 to 63 bytes of printable characters, without \"/\", and not \".\" or \"..\"", v, bad)
		if code != api.ExitUsage || !strings.Contains(stderr.String(), want) {
			t.Errorf("hca=%q: status %d, stderr %q; want %d, %q", bad, code, stderr.String(), api.ExitUsage, want)
		}
	}
}

// replaceWith puts a FIFO (target "") or a symbolic link to target where
// the file at rel under the port's directory was.
func replaceWith(t *testing.T, root, rel, target string) {
	t.Helper()
	p := filepath.Join(rdmaenv.PortDir(root, "mlx5_0", 1), rel)
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var err error
	if target == "" {
		err = syscall.Mkfifo(p, 0o644)
	} else {
		err = os.Symlink(target, p)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// waitPromptly runs Wait and fails the test if it has not returned within
// 10 seconds of cfg's timeout.
func waitPromptly(t *testing.T, ctx context.Context, cfg Config) ([]rdmaenv.Port, error) {
	t.Helper()
	var ports []rdmaenv.Port
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		ports, err = Wait(ctx, cfg)
	}()
	select {
	case <-done:
		return ports, err
	case <-time.After(cfg.Timeout + 10*time.Second):
		t.Fatalf("Wait still runs 10s past its timeout of %s", cfg.Timeout)
		return nil, nil
	}
}

// A FIFO or a link to /dev/zero where sysfs has an attribute neither
// blocks rdma-exec nor makes it read without end: the entry next to them
// is found, and a state that is no attribute is named when the entry is
// missing.
func TestWaitFIFOAndDevZeroInTheTree(t *testing.T) {
	cfg := func(root string) Config {
		return Config{Networks: []Network{roce("mlx5_0", "10.7.0.0/24")}, Choice: rdmaenv.DefaultChoice, Timeout: 300 * time.Millisecond,
			Poll: 20 * time.Millisecond, SysfsRoot: root, Ifaces: ifaces(lo, iface("eth0", "10.7.0.4/24"))}
	}
	t.Run("entry found", func(t *testing.T) {
		root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
		rdmatest.AddAddress(root, "mlx5_0", 1, "10.7.0.4", "eth0")
		replaceWith(t, root, "gids/200", "")
		replaceWith(t, root, "gid_attrs/types/201", "")
		replaceWith(t, root, "gid_attrs/ndevs/0", "/dev/zero")
		ports, err := waitPromptly(t, context.Background(), cfg(root))
		if err != nil || len(ports) != 1 || ports[0].Index != 3 {
			t.Fatalf("Wait = %+v, %v; want the entry at index 3", ports, err)
		}
	})
	for _, tc := range []struct {
		name, target, what string
	}{
		{"state is a FIFO", "", "is a FIFO"},
		{"state is a link to the zero device", "/dev/zero", "is a symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
			replaceWith(t, root, "state", tc.target)
			_, err := waitPromptly(t, context.Background(), cfg(root))
			var nr *NotReadyError
			state := filepath.Join(rdmaenv.PortDir(root, "mlx5_0", 1), "state")
			want := "; the port's state cannot be read: " + state + " " + tc.what + ", not a sysfs attribute (a regular file of at most 4096 bytes)"
			if !errors.As(err, &nr) || !strings.Contains(err.Error(), want) {
				t.Fatalf("Wait = %v\nwant a NotReadyError saying %q", err, want)
			}
		})
	}
}

// Wait returns at its deadline, or when its context ends, even while a
// look at the tables does not return (here the listing of interfaces,
// which stands for any read that hangs).
func TestWaitDeadlineWhateverAReadDoes(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hang := func() ([]Iface, error) { <-release; return nil, errors.New("released") }
	cfg := Config{Networks: []Network{roce("mlx5_0", "10.7.0.0/24")}, Choice: rdmaenv.DefaultChoice, Timeout: 200 * time.Millisecond,
		SysfsRoot: root, Ifaces: hang}
	start := time.Now()
	_, err := waitPromptly(t, context.Background(), cfg)
	var nr *NotReadyError
	if !errors.As(err, &nr) || !strings.Contains(err.Error(), "a look at the container's interfaces and GID tables did not finish in time: a read under "+root+"/sys/class/infiniband") {
		t.Fatalf("Wait = %v; want a NotReadyError saying the look did not finish", err)
	}
	if waited := time.Since(start); waited < cfg.Timeout {
		t.Errorf("Wait gave up after %s, before its timeout of %s", waited, cfg.Timeout)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	cfg.Timeout = time.Minute
	done := make(chan error, 1)
	go func() { _, err := Wait(ctx, cfg); done <- err }()
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait still runs 5s after its context ended")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want the context's error", err)
	}
}
