package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/go-plugins-helpers/network"
	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/netns/netnstest"
	"github.com/rdma-macvlan/rdma-macvlan/plugin/plugintest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
	"golang.org/x/sys/unix"
)

// crashWorld is one run of the life cycle against a daemon built with the
// crashpoints tag, in its own namespace.
type crashWorld struct {
	t    *testing.T
	d    *daemon
	host *netns.Handle
	ctr  *netns.Handle
	c    *plugintest.Client
	nid  string
	eid  string
	sc   crashScenario
	// moved is true while the endpoint's link is in the container.
	moved bool
}

// crashScenario is one life cycle; together they reach every crash point.
type crashScenario struct {
	name   string
	parent string // p0, or p0.VLAN for a VLAN sub-interface the driver creates
	// loseLink deletes the endpoint's link between CreateEndpoint and Join,
	// as a reboot between the two would: Join re-creates it.
	loseLink bool
}

var crashScenarios = []crashScenario{
	{name: "plain", parent: "p0"},
	{name: "link lost before Join", parent: "p0", loseLink: true},
	{name: "VLAN parent created", parent: "p0.7"},
}

// crashPointsNeeding names the crash points that only a kernel capability
// lets a scenario reach, with that capability: they may go unreached on a
// kernel without it, and on no other.
var crashPointsNeeding = map[string]string{
	"create-network:vlan-created": "802.1Q",
	"delete-network:vlan-deleted": "802.1Q",
}

func newCrashWorld(t *testing.T, bin string, sc crashScenario, env ...string) *crashWorld {
	t.Helper()
	host, err := netnstest.Make()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(host.Close)
	ctr, err := netnstest.Make()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctr.Close)
	if err := netnstest.CreateVeth(host, "p0", "p0peer", 1500); err != nil {
		t.Fatal(err)
	}
	p0, err := host.LinkByName("p0")
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	d := &daemon{t: t, bin: bin, host: host, sock: filepath.Join(base, "run", "p.sock"), stateDir: filepath.Join(base, "state"),
		sysfs: rdmatest.MLX5(t, rdmatest.MLX5Options{Netdev: "p0", MAC: p0.MAC.String()}), cdiDir: filepath.Join(base, "cdi"),
		env: env, args: []string{"--unjoined-grace", "300ms"}}
	t.Cleanup(func() { _ = d.stop(syscall.SIGKILL) })
	return &crashWorld{t: t, d: d, host: host, ctr: ctr, c: plugintest.NewClient(d.sock),
		nid: strings.Repeat("c1", 32), eid: strings.Repeat("d1", 32), sc: sc}
}

// steps is the life cycle as Docker drives it, with what libnetwork does to
// the link in between.
func (w *crashWorld) steps() []func() error {
	ifname := driver.LinkName(w.eid)
	steps := []func() error{
		func() error {
			return w.c.Call("CreateNetwork", map[string]any{
				"NetworkID": w.nid,
				"Options":   map[string]any{"com.docker.network.generic": map[string]string{"parent": w.sc.parent}},
				"IPv4Data":  []network.IPAMData{{Pool: "10.44.0.0/24", Gateway: "10.44.0.1/24"}},
			}, nil)
		},
		func() error {
			return w.c.Call("CreateEndpoint", network.CreateEndpointRequest{NetworkID: w.nid, EndpointID: w.eid,
				Interface: &network.EndpointInterface{Address: "10.44.0.2/24"}}, nil)
		},
	}
	if w.sc.loseLink {
		steps = append(steps, func() error { return w.host.DeleteLink(ifname) })
	}
	return append(steps, []func() error{
		func() error {
			return w.c.Call("Join", network.JoinRequest{NetworkID: w.nid, EndpointID: w.eid, SandboxKey: "/sb/c"}, nil)
		},
		func() error {
			_, ipnet, _ := net.ParseCIDR("10.44.0.2/24")
			ipnet.IP = net.ParseIP("10.44.0.2")
			if err := netnstest.MoveInto(w.host, w.ctr, ifname, "eth0", nil, ipnet); err != nil {
				return err
			}
			w.moved = true
			return nil
		},
		func() error {
			return w.c.Call("Leave", network.LeaveRequest{NetworkID: w.nid, EndpointID: w.eid}, nil)
		},
		func() error {
			if err := netnstest.MoveBack(w.ctr, w.host, "eth0", ifname); err != nil {
				return err
			}
			w.moved = false
			return nil
		},
		func() error {
			return w.c.Call("DeleteEndpoint", network.DeleteEndpointRequest{NetworkID: w.nid, EndpointID: w.eid}, nil)
		},
		func() error {
			return w.c.Call("DeleteNetwork", network.DeleteNetworkRequest{NetworkID: w.nid}, nil)
		},
	}...)
}

// crashed reports whether the daemon died (and reaps it).
func (w *crashWorld) crashed() bool {
	select {
	case <-w.d.exited:
		w.d.cmd = nil
		return true
	case <-time.After(2 * time.Second):
		return false
	}
}

// cleanUp does, after a restart, what Docker and its user do after a failed
// call: the container's link comes back from the sandbox, Leave and
// DeleteEndpoint are retried (unless CreateEndpoint failed: then Docker
// forgets the endpoint and the daemon's own garbage collection must remove
// it), and the network is removed.
func (w *crashWorld) cleanUp(point string) {
	w.t.Helper()
	must := func(err error) {
		w.t.Helper()
		if err != nil {
			w.t.Fatalf("after a crash at %s: %v\n%s", point, err, w.d.log())
		}
	}
	if w.moved {
		must(netnstest.MoveBack(w.ctr, w.host, "eth0", driver.LinkName(w.eid)))
		w.moved = false
	}
	if strings.HasPrefix(point, "create-endpoint:") {
		deadline := time.Now().Add(5 * time.Second)
		for {
			st, err := w.c.Status()
			must(err)
			if len(st.Networks) == 0 || len(st.Networks[0].Endpoints) == 0 {
				break
			}
			if time.Now().After(deadline) {
				w.t.Fatalf("after a crash at %s the endpoint Docker never learned of was not collected: %+v", point, st)
			}
			time.Sleep(20 * time.Millisecond)
		}
	} else {
		must(w.c.Call("Leave", network.LeaveRequest{NetworkID: w.nid, EndpointID: w.eid}, nil))
		must(w.c.Call("DeleteEndpoint", network.DeleteEndpointRequest{NetworkID: w.nid, EndpointID: w.eid}, nil))
	}
	must(w.c.Call("DeleteNetwork", network.DeleteNetworkRequest{NetworkID: w.nid}, nil))
}

func (w *crashWorld) assertNothingLeft(point string) {
	w.t.Helper()
	links, err := w.host.Links()
	if err != nil {
		w.t.Fatal(err)
	}
	for _, l := range links {
		if strings.HasPrefix(l.Name, driver.LinkPrefix) || strings.Contains(l.Name, ".") {
			w.t.Errorf("crash at %s: link %s left", point, l.Name)
		}
	}
	for _, sub := range []string{"networks", "endpoints"} {
		if ents, _ := os.ReadDir(filepath.Join(w.d.stateDir, sub)); len(ents) != 0 {
			w.t.Errorf("crash at %s: state left in %s: %v", point, sub, ents)
		}
	}
	if ents, _ := os.ReadDir(w.d.cdiDir); len(ents) != 0 {
		w.t.Errorf("crash at %s: CDI files left: %v", point, ents)
	}
}

func TestPrivilegedCrashPoints(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces and links); run: sudo make test-root")
	}
	bin := buildDaemon(t, "crashpoints")

	// Which points does each life cycle reach on this kernel? Each point is
	// then tested in the first scenario that reaches it.
	missing := map[string]bool{} // kernel capabilities this kernel lacks
	if !vlanSupported(t) {
		missing["802.1Q"] = true
	}
	scenarioOf := map[string]crashScenario{}
	for i, sc := range crashScenarios {
		if strings.Contains(sc.parent, ".") && missing["802.1Q"] {
			t.Logf("scenario %q not run: this kernel has no 802.1Q VLAN support (CONFIG_VLAN_8021Q; modprobe 8021q)", sc.name)
			continue
		}
		trace := filepath.Join(t.TempDir(), fmt.Sprintf("trace%d", i))
		w := newCrashWorld(t, bin, sc, "RDMA_MACVLAN_CRASH_TRACE="+trace)
		w.d.start()
		for j, step := range w.steps() {
			if err := step(); err != nil {
				t.Fatalf("scenario %q: step %d without a crash: %v\n%s", sc.name, j, err, w.d.log())
			}
		}
		if err := w.d.stop(syscall.SIGTERM); err != nil {
			t.Fatalf("scenario %q: stop: %v", sc.name, err)
		}
		for _, p := range readTrace(t, trace) {
			if !slices.Contains(driver.CrashPoints, p) {
				t.Errorf("scenario %q reached crash point %q, which driver.CrashPoints does not list", sc.name, p)
			}
			if _, ok := scenarioOf[p]; !ok {
				scenarioOf[p] = sc
			}
		}
	}
	var covered []string
	for _, p := range driver.CrashPoints {
		if _, ok := scenarioOf[p]; ok {
			covered = append(covered, p)
			continue
		}
		if c, ok := crashPointsNeeding[p]; ok && missing[c] {
			t.Run(p, func(t *testing.T) {
				t.Skipf("not tested: this point needs %s, which this kernel lacks; make test-kernel runs it in its VM, where it must pass", c)
			})
			continue
		}
		t.Errorf("crash point %s is reached by no scenario: add one that reaches it", p)
	}

	for _, point := range covered {
		t.Run(point, func(t *testing.T) {
			w := newCrashWorld(t, bin, scenarioOf[point], "RDMA_MACVLAN_CRASH_AT="+point)
			w.d.start()
			var failed error
			for _, step := range w.steps() {
				if failed = step(); failed != nil {
					break
				}
			}
			if failed == nil {
				t.Fatalf("the life cycle %q finished without reaching %s", w.sc.name, point)
			}
			if !w.crashed() {
				t.Fatalf("call failed without a crash: %v\n%s", failed, w.d.log())
			}
			// Restart without the crash and let Docker and the user finish.
			w.d.env = nil
			w.d.start()
			w.cleanUp(point)
			w.assertNothingLeft(point)
			if err := w.d.stop(syscall.SIGTERM); err != nil {
				t.Fatalf("stop: %v", err)
			}
		})
	}
	t.Logf("crash points covered: %d of %d", len(covered), len(driver.CrashPoints))
}

// vlanSupported reports whether this kernel makes 802.1Q sub-interfaces.
func vlanSupported(t *testing.T) bool {
	t.Helper()
	h, err := netnstest.Make()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := netnstest.CreateVeth(h, "v0", "v0peer", 1500); err != nil {
		t.Fatal(err)
	}
	_, err = h.CreateVLAN("v0.7", "v0", 7, "")
	if errors.Is(err, unix.EOPNOTSUPP) {
		return false
	}
	if err != nil {
		t.Fatalf("probe for 802.1Q support: %v", err)
	}
	return true
}

func readTrace(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if !slices.Contains(out, sc.Text()) {
			out = append(out, sc.Text())
		}
	}
	return out
}
