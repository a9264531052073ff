package plugin_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/go-plugins-helpers/network"
	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/netns/netnstest"
	"github.com/rdma-macvlan/rdma-macvlan/plugin"
	"github.com/rdma-macvlan/rdma-macvlan/plugin/plugintest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// env is one privileged test's world: its own network namespace standing in
// for the host, a veth parent p0 in it, a state directory and the daemon's
// real HTTP handler on a temporary unix socket.
type env struct {
	t        *testing.T
	host     *netns.Handle
	stateDir string
	sysfs    string // fake sysfs root: one mlx5 HCA per parent
	hcas     int
	cdiDir   string
	sock     string
	c        *plugintest.Client
	stop     func()
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces and links); run: sudo make test-root")
	}
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newEnv(t *testing.T) *env {
	t.Helper()
	requireRoot(t)
	host := netnstest.NewHost(t) // the namespace and every link in it go with the test
	e := &env{t: t, host: host, stateDir: t.TempDir(), sysfs: t.TempDir(), cdiDir: t.TempDir(), sock: filepath.Join(t.TempDir(), "p.sock")}
	e.addHCA("p0")
	e.start()
	t.Cleanup(func() { e.stop() })
	return e
}

func (e *env) start() {
	e.t.Helper()
	log := logrus.New()
	log.SetOutput(testLogWriter{e.t})
	log.SetLevel(logrus.DebugLevel)
	d, err := driver.New(driver.Config{StateDir: e.stateDir, Links: e.host, Log: log,
		Sysfs: rdma.NewSysfs(e.sysfs), CDIDir: e.cdiDir, GIDTimeout: 3 * time.Second, GIDPoll: 5 * time.Millisecond})
	if err != nil {
		e.t.Fatalf("driver.New: %v", err)
	}
	l, err := plugin.Listen(e.sock)
	if err != nil {
		d.Close()
		e.t.Fatal(err)
	}
	srv := plugin.NewServer(log)
	srv.SetDriver(d)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	e.c = plugintest.NewClient(e.sock)
	stopped := false
	e.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("serve: %v", err)
		}
		d.Close()
	}
}

// addHCA gives netdev an mlx5 HCA (mlx5_0 for the first, mlx5_1, ...) in
// the fake sysfs, with the netdev's real MAC.
func (e *env) addHCA(netdev string) string {
	e.t.Helper()
	l, err := e.host.LinkByName(netdev)
	if err != nil {
		e.t.Fatal(err)
	}
	hca := fmt.Sprintf("mlx5_%d", e.hcas)
	if err := rdmatest.BuildMLX5(e.sysfs, rdmatest.MLX5Options{HCA: hca, Netdev: netdev, MAC: l.MAC.String(),
		Uverbs: e.hcas, PCIAddr: fmt.Sprintf("0000:%02x:00.0", 3+e.hcas)}); err != nil {
		e.t.Fatal(err)
	}
	e.hcas++
	return hca
}

// restart stops the daemon and starts a new one on the same state.
func (e *env) restart() {
	e.t.Helper()
	e.stop()
	e.start()
}

func (e *env) createNetwork(id string, generic map[string]string, ipv4 ...string) error {
	req := map[string]any{
		"NetworkID": id,
		"Options":   map[string]any{"com.docker.network.generic": generic},
	}
	var pools []*network.IPAMData
	for _, p := range ipv4 {
		pool, gw, _ := strings.Cut(p, " gw ")
		pools = append(pools, &network.IPAMData{AddressSpace: "LocalDefault", Pool: pool, Gateway: gw})
	}
	req["IPv4Data"] = pools
	return e.c.Call("CreateNetwork", req, nil)
}

func (e *env) createEndpoint(nid, eid, addr, mac string, opts map[string]any) (string, error) {
	var res network.CreateEndpointResponse
	err := e.c.Call("CreateEndpoint", network.CreateEndpointRequest{
		NetworkID: nid, EndpointID: eid,
		Interface: &network.EndpointInterface{Address: addr, MacAddress: mac},
		Options:   opts,
	}, &res)
	if err != nil || res.Interface == nil {
		return "", err
	}
	return res.Interface.MacAddress, nil
}

func (e *env) join(nid, eid string) (network.JoinResponse, error) {
	var res network.JoinResponse
	err := e.c.Call("Join", network.JoinRequest{NetworkID: nid, EndpointID: eid, SandboxKey: "/var/run/docker/netns/test"}, &res)
	return res, err
}

func (e *env) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// linkNames lists the links of ns, sorted.
func linkNames(t *testing.T, ns *netns.Handle) []string {
	t.Helper()
	ls, err := ns.Links()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range ls {
		names = append(names, l.Name)
	}
	slices.Sort(names)
	return names
}

func (e *env) link(name string) (netns.Link, bool) {
	e.t.Helper()
	l, err := e.host.LinkByName(name)
	if err != nil {
		return l, false
	}
	return l, true
}

// stateFiles lists the network and endpoint records on disk.
func (e *env) stateFiles() []string {
	e.t.Helper()
	var out []string
	for _, sub := range []string{"networks", "endpoints"} {
		ents, _ := os.ReadDir(filepath.Join(e.stateDir, sub))
		for _, ent := range ents {
			out = append(out, sub+"/"+ent.Name())
		}
	}
	return out
}

// sandbox makes a namespace standing in for a container and returns it.
func sandbox(t *testing.T) *netns.Handle {
	t.Helper()
	ns, err := netnstest.Make()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	return ns
}

func cidr(t *testing.T, s string) *net.IPNet {
	t.Helper()
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	n.IP = ip
	return n
}

func id(prefix string) string {
	// 64 hex characters, like Docker's IDs, distinct in their first 12.
	return (prefix + strings.Repeat("0", 64))[:64]
}

// requireVLAN skips when the kernel cannot make 802.1Q sub-interfaces (the
// CI machines' kernel is built without CONFIG_VLAN_8021Q; the driver's VLAN
// logic is also covered by the driver package's tests on a fake link table).
func (e *env) requireVLAN() {
	e.t.Helper()
	_, err := e.host.CreateVLAN("vlanprobe", "p0", 4000, "")
	if errors.Is(err, unix.EOPNOTSUPP) {
		e.t.Skip("kernel has no 802.1Q VLAN support (CONFIG_VLAN_8021Q); make test-kernel runs this test in its VM, where it must pass")
	}
	if err != nil {
		e.t.Fatal(err)
	}
	e.must(e.host.DeleteLink("vlanprobe"))
}
