package main

// The Docker side: the daemon as a legacy plugin, requests as libnetwork
// sends them, and what libnetwork does with the link after Join and before
// Leave.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/netns/netnstest"
	"github.com/rdma-macvlan/rdma-macvlan/plugin/plugintest"
	vnetns "github.com/vishvananda/netns"
)

// Where a legacy plugin lives by default (nothing is passed on the daemon's
// command line but the log level).
const (
	pluginSocket = "/run/docker/plugins/rdma-macvlan.sock"
	stateDir     = "/var/lib/rdma-macvlan"
	cdiDir       = "/var/run/cdi"
	daemonLog    = "/run/rmv-daemon.log"
)

type env struct {
	s          *suite
	daemonPath string
	wait       time.Duration

	daemon *exec.Cmd
	c      *plugintest.Client
	host   *netns.Handle
	seq    int // container and ID counter

	parent string // the RoCE netdev: p0, a veth
	hca    string // rxe0
	port   int
	base   int // used GID slots with the parent alone
}

// id returns a 64-hex-digit ID as Docker makes them, unique per run; kind
// (a hex digit) tells networks from endpoints in the logs.
func (e *env) id(kind byte) string {
	e.seq++
	return fmt.Sprintf("%c%011x", kind, e.seq) + strings.Repeat("0", 52)
}

func (e *env) startDaemon() error {
	logf, err := os.Create(daemonLog)
	if err != nil {
		return err
	}
	defer logf.Close()
	e.daemon = exec.Command(e.daemonPath, "--log-level", "debug")
	e.daemon.Stdout, e.daemon.Stderr = logf, logf
	if err := e.daemon.Start(); err != nil {
		return err
	}
	e.c = plugintest.NewClient(pluginSocket)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := e.c.Status()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon not answering on %s: %w", pluginSocket, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// daemonCPU is the CPU time the daemon has used so far (/proc/PID/stat).
func (e *env) daemonCPU() time.Duration {
	if e.daemon == nil || e.daemon.Process == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", e.daemon.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name in parentheses: utime and stime are
	// the 12th and 13th, in clock ticks (100 per second).
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// stopDaemon sends SIGTERM and waits; it reports how the daemon ended.
func (e *env) stopDaemon() error {
	if e.daemon == nil || e.daemon.Process == nil {
		return nil
	}
	_ = e.daemon.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- e.daemon.Wait() }()
	select {
	case err := <-done:
		e.daemon = nil
		return err
	case <-time.After(15 * time.Second):
		_ = e.daemon.Process.Kill()
		<-done
		e.daemon = nil
		return errors.New("daemon did not stop within 15 s of SIGTERM")
	}
}

func (e *env) daemonLogTail(n int) []string {
	b, _ := os.ReadFile(daemonLog)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// network is what a test knows of a network it created.
type network struct {
	id      string
	generic map[string]string
	v4, gw  string // pool and gateway
	v6      string // pool, "" for IPv4-only
}

// createNetwork sends CreateNetwork as libnetwork does for
// docker network create -d rdma-macvlan --subnet ... [--ipv6 --subnet ...] -o ...
func (e *env) createNetwork(n network) error {
	opts := map[string]any{"com.docker.network.generic": n.generic}
	if n.v6 != "" {
		opts["com.docker.network.enable_ipv6"] = true
	}
	req := map[string]any{
		"NetworkID": n.id,
		"Options":   opts,
		"IPv4Data":  []map[string]any{{"AddressSpace": "LocalDefault", "Pool": n.v4, "Gateway": n.gw}},
	}
	if n.v6 != "" {
		req["IPv6Data"] = []map[string]any{{"AddressSpace": "LocalDefault", "Pool": n.v6}}
	}
	return e.c.Call("CreateNetwork", req, nil)
}

func (e *env) deleteNetwork(nid string) error {
	return e.c.Call("DeleteNetwork", map[string]any{"NetworkID": nid}, nil)
}

// endpoint is one container's attachment.
type endpoint struct {
	nid, eid string
	v4, v6   string // CIDR from IPAM
	mac      string // the driver's answer to CreateEndpoint
	srcName  string // Join's SrcName: the link in the host namespace
	ctr      *container
}

// createEndpoint sends CreateEndpoint with IPAM's addresses and no MAC, as
// libnetwork does when the user did not ask for one.
func (e *env) createEndpoint(ep *endpoint) error {
	iface := map[string]any{"Address": ep.v4}
	if ep.v6 != "" {
		iface["AddressIPv6"] = ep.v6
	}
	var res struct{ Interface *struct{ MacAddress string } }
	err := e.c.Call("CreateEndpoint", map[string]any{
		"NetworkID": ep.nid, "EndpointID": ep.eid, "Interface": iface,
		"Options": map[string]any{"com.docker.network.endpoint.exposedports": []any{}, "com.docker.network.portmap": []any{}},
	}, &res)
	if err != nil {
		return err
	}
	if res.Interface == nil || res.Interface.MacAddress == "" {
		return errors.New("CreateEndpoint answered no MAC address")
	}
	ep.mac = res.Interface.MacAddress
	return nil
}

// container is a network namespace standing in for a container's sandbox,
// named so that its sandbox key is /run/netns/<name>.
type container struct {
	name string
	h    *netns.Handle
}

func (c *container) key() string { return "/run/netns/" + c.name }

// newContainer makes a sandbox. noIPv6 does what Docker >= 26 does for a
// container on IPv4-only networks: its interfaces get no IPv6 (and so no
// link-local GID).
func (e *env) newContainer(noIPv6 bool) (*container, error) {
	e.seq++
	c := &container{name: fmt.Sprintf("ctr%d", e.seq)}
	if _, err := cmd("ip", "netns", "add", c.name); err != nil {
		return nil, err
	}
	if noIPv6 {
		for _, k := range []string{"all", "default"} {
			if _, err := cmd("ip", "netns", "exec", c.name, "sysctl", "-q", "-w", "net.ipv6.conf."+k+".disable_ipv6=1"); err != nil {
				c.remove()
				return nil, err
			}
		}
	}
	ns, err := vnetns.GetFromName(c.name)
	if err != nil {
		c.remove()
		return nil, err
	}
	defer ns.Close()
	if c.h, err = netns.At(ns); err != nil {
		c.remove()
		return nil, err
	}
	return c, nil
}

func (c *container) remove() {
	if c.h != nil {
		c.h.Close()
	}
	_, _ = cmd("ip", "netns", "del", c.name)
}

func cidr(s string) (*net.IPNet, error) {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		return nil, err
	}
	n.IP = ip
	return n, nil
}

// join sends Join and then does what libnetwork does before the workload
// starts: move SrcName into the sandbox, rename it eth0, set the MAC and the
// addresses, bring it up.
func (e *env) join(ep *endpoint, noIPv6 bool) error {
	ctr, err := e.newContainer(noIPv6)
	if err != nil {
		return err
	}
	var res struct {
		InterfaceName struct{ SrcName, DstPrefix string }
	}
	if err := e.c.Call("Join", map[string]any{"NetworkID": ep.nid, "EndpointID": ep.eid, "SandboxKey": ctr.key(), "Options": map[string]any{}}, &res); err != nil {
		ctr.remove()
		return err
	}
	ep.srcName = res.InterfaceName.SrcName
	mac, err := net.ParseMAC(ep.mac)
	if err != nil {
		ctr.remove()
		return err
	}
	var addrs []*net.IPNet
	for _, a := range []string{ep.v4, ep.v6} {
		if a == "" {
			continue
		}
		n, err := cidr(a)
		if err != nil {
			ctr.remove()
			return err
		}
		addrs = append(addrs, n)
	}
	if err := netnstest.MoveInto(e.host, ctr.h, ep.srcName, res.InterfaceName.DstPrefix+"0", mac, addrs...); err != nil {
		ctr.remove()
		return err
	}
	ep.ctr = ctr
	return nil
}

// leave sends Leave, moves the link back to the host namespace under its
// SrcName as libnetwork does, and removes the sandbox.
func (e *env) leave(ep *endpoint) error {
	var errs []error
	if err := e.c.Call("Leave", map[string]any{"NetworkID": ep.nid, "EndpointID": ep.eid}, nil); err != nil {
		errs = append(errs, err)
	}
	if ep.ctr != nil {
		if err := netnstest.MoveBack(ep.ctr.h, e.host, "eth0", ep.srcName); err != nil {
			errs = append(errs, err)
		}
		ep.ctr.remove()
		ep.ctr = nil
	}
	return errors.Join(errs...)
}

func (e *env) deleteEndpoint(ep *endpoint) error {
	return e.c.Call("DeleteEndpoint", map[string]any{"NetworkID": ep.nid, "EndpointID": ep.eid}, nil)
}

// status fetches /v1/status and returns the network nid and, when eid is
// not "", its endpoint.
func (e *env) status(nid, eid string) (api.Network, api.Endpoint, error) {
	st, err := e.c.Status()
	if err != nil {
		return api.Network{}, api.Endpoint{}, err
	}
	for _, n := range st.Networks {
		if n.ID != nid {
			continue
		}
		if eid == "" {
			return n, api.Endpoint{}, nil
		}
		for _, ep := range n.Endpoints {
			if ep.ID == eid {
				return n, ep, nil
			}
		}
		return n, api.Endpoint{}, fmt.Errorf("endpoint %.12s not in the status of network %.12s", eid, nid)
	}
	return api.Network{}, api.Endpoint{}, fmt.Errorf("network %.12s not in the status", nid)
}

// waitReady polls the status (which reads the whole GID table) every 250 ms
// until the endpoint is rdma_ready.
func (e *env) waitReady(ep *endpoint) (api.Network, api.Endpoint, time.Duration, error) {
	start := time.Now()
	for {
		n, es, err := e.status(ep.nid, ep.eid)
		if err == nil && es.RDMAReady {
			return n, es, time.Since(start), nil
		}
		if time.Since(start) > e.wait {
			if err == nil {
				err = fmt.Errorf("not rdma_ready after %s: %s", e.wait, es.RDMAReason)
			}
			return n, es, time.Since(start), err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitSettled polls the status until the endpoint is rdma_ready or the
// daemon gave up waiting for its GIDs (a reason other than "waiting ...").
func (e *env) waitSettled(ep *endpoint) (api.Endpoint, error) {
	deadline := time.Now().Add(e.wait)
	for {
		_, es, err := e.status(ep.nid, ep.eid)
		if err == nil && (es.RDMAReady || es.RDMAReason != "" && !strings.HasPrefix(es.RDMAReason, "waiting")) {
			return es, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("still %q after %s", es.RDMAReason, e.wait)
			}
			return es, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stateFiles lists the daemon's network and endpoint records.
func stateFiles() []string {
	var out []string
	for _, d := range []string{"networks", "endpoints"} {
		m, _ := filepath.Glob(filepath.Join(stateDir, d, "*"))
		out = append(out, m...)
	}
	return out
}

// driverLinks lists the links named like the driver's (rmv...) in the
// initial namespace.
func driverLinks() ([]string, error) {
	ls, err := links()
	if err != nil {
		return nil, err
	}
	var out []string
	for name := range ls {
		if strings.HasPrefix(name, driver.LinkPrefix) {
			out = append(out, name)
		}
	}
	return out, nil
}
