package commands

import (
	"encoding/json"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaenv"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

func containerJSON(name, id, netName, netID, eid, ip string, withRDMA bool) map[string]any {
	hc := map[string]any{}
	if withRDMA {
		hc = map[string]any{
			"CapAdd": []string{"IPC_LOCK"},
			"Devices": []map[string]string{
				{"PathOnHost": "/dev/infiniband/uverbs0", "PathInContainer": "/dev/infiniband/uverbs0", "CgroupPermissions": "rwm"},
				{"PathOnHost": "/dev/infiniband/rdma_cm", "PathInContainer": "/dev/infiniband/rdma_cm", "CgroupPermissions": "rwm"},
			},
			"Ulimits": []map[string]any{{"Name": "memlock", "Soft": 8388608, "Hard": 8388608}},
		}
	}
	return map[string]any{
		"Id": id, "Name": "/" + name, "State": map[string]any{"Running": true, "Status": "running"},
		"HostConfig": hc,
		"NetworkSettings": map[string]any{"Networks": map[string]any{
			netName: map[string]any{"NetworkID": netID, "EndpointID": eid, "IPAddress": ip, "IPPrefixLen": 24, "MacAddress": "02:42:c0:a8:07:02"},
		}},
	}
}

func TestInspectContainer(t *testing.T) {
	w := standardWorld(t)
	w.container("c1", containerJSON("c1", "c1c1c1c1c1c1c1c1", "roce", netRoce, "aaaa00000001"+strings.Repeat("0", 52), "192.168.7.2", true))
	if rc := w.run("inspect", "c1"); rc != 0 {
		t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
	}
	out := w.stdout.String()
	t.Logf("\n%s", out)
	for _, s := range []string{
		"container c1 (c1c1c1c1c1c1), running",
		"devices    /dev/infiniband/uverbs0 /dev/infiniband/rdma_cm",
		"IPC_LOCK   yes",
		"memlock    8388608:8388608",
		"network roce (111111111111), driver rdma-macvlan:latest",
		"HCA        mlx5_0 port 1 ACTIVE Ethernet",
		"interface  - (host link rmvaaaa00000001)",
		"addresses  IPv4 192.168.7.2, MAC 02:42:c0:a8:07:02",
		"GIDs       4  IB/RoCE v1  0000:0000:0000:0000:0000:ffff:c0a8:0702",
		"           5  RoCE v2     0000:0000:0000:0000:0000:ffff:c0a8:0702",
		"RDMA       ready",
		"gid check  strict (works as warn here: the engine asks before the container has its addresses)",
		"QoS        traffic class 106 (DSCP 26), service level 3",
		"\nNCCL_IB_HCA==mlx5_0:1\nNCCL_IB_GID_INDEX=5\nUCX_NET_DEVICES=mlx5_0:1\nUCX_IB_GID_INDEX=5\nNCCL_IB_TC=106\nUCX_IB_TRAFFIC_CLASS=106\nNCCL_IB_SL=3\nUCX_IB_SL=3\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q", s)
		}
	}
	if strings.Contains(out, "problem") {
		t.Errorf("problems reported for a well set up container:\n%s", out)
	}

	if rc := w.run("inspect", "--format", "json", "c1"); rc != 0 {
		t.Fatalf("json: status %d", rc)
	}
	var got inspectOutput
	if err := json.Unmarshal(w.stdout.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, w.stdout.String())
	}
	if len(got.Containers) != 1 || len(got.Containers[0].Networks) != 1 || len(got.Containers[0].Networks[0].Endpoints) != 1 {
		t.Fatalf("shape: %s", w.stdout.String())
	}
	c := got.Containers[0]
	ep := c.Networks[0].Endpoints[0]
	if ep.GIDIndex == nil || *ep.GIDIndex != 5 || ep.RDMAReady == nil || !*ep.RDMAReady || ep.IPv4 != "192.168.7.2" || len(ep.GIDs) != 2 {
		t.Errorf("endpoint = %+v", ep)
	}
	wantEnv := []string{"NCCL_IB_HCA==mlx5_0:1", "NCCL_IB_GID_INDEX=5", "UCX_NET_DEVICES=mlx5_0:1", "UCX_IB_GID_INDEX=5",
		"NCCL_IB_TC=106", "UCX_IB_TRAFFIC_CLASS=106", "NCCL_IB_SL=3", "UCX_IB_SL=3"}
	if !reflect.DeepEqual(c.Env, wantEnv) || !c.IPCLock || c.Memlock != "8388608:8388608" {
		t.Errorf("container = %+v", c)
	}
}

func TestInspectContainerWithoutRDMASetup(t *testing.T) {
	w := standardWorld(t)
	w.container("c2", containerJSON("c2", "c2c2c2c2c2c2c2c2", "roce", netRoce, "bbbb00000002"+strings.Repeat("0", 52), "192.168.7.3", false))
	if rc := w.run("inspect", "c2"); rc != 0 {
		t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
	}
	out := w.stdout.String()
	for _, s := range []string{
		"RDMA       not ready: waiting for the kernel to add its GID entries",
		"problem: no device of mlx5_0 was given to the container: RDMA software in it will find no RDMA devices",
		"problem: no CAP_IPC_LOCK",
		"problem: no --ulimit memlock",
		"NCCL_IB_HCA==mlx5_0:1\nUCX_NET_DEVICES=mlx5_0:1\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "GID_INDEX=") {
		t.Errorf("a GID index without GID entries:\n%s", out)
	}
	if !strings.Contains(out, "# NCCL_IB_GID_INDEX not known") {
		t.Errorf("the missing GID index is not explained:\n%s", out)
	}
}

// TestInspectContainerOfTheRuntime: a container the rdma-macvlan runtime
// runs (docker rdma run) has no device, capability or memlock of its own
// in the engine's record: the runtime gives them, so inspect reports none
// missing; its RDMA_MACVLAN_* variables say what the runtime was asked.
func TestInspectContainerOfTheRuntime(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      []string
		problems []string
		choice   string
	}{
		{name: "as docker rdma run starts it", choice: "RoCE v2, auto"},
		{name: "RoCE v1 asked", env: []string{"RDMA_MACVLAN_ROCE_VERSION=1", "RDMA_MACVLAN_GID_FAMILY=ipv6"}, choice: "RoCE v1, ipv6"},
		{name: "RDMA_MACVLAN_DEVICES=none", env: []string{"RDMA_MACVLAN_DEVICES=none"}, choice: "RoCE v2, auto",
			problems: []string{"problem: no device of mlx5_0", "problem: no CAP_IPC_LOCK", "problem: no --ulimit memlock"}},
		{name: "RDMA_MACVLAN_IPC_LOCK=0", env: []string{"RDMA_MACVLAN_IPC_LOCK=0"}, choice: "RoCE v2, auto", problems: []string{"problem: no CAP_IPC_LOCK"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := standardWorld(t)
			c := containerJSON("c2", "c2c2c2c2c2c2c2c2", "roce", netRoce, "aaaa00000001"+strings.Repeat("0", 52), "192.168.7.2", false)
			c["HostConfig"] = map[string]any{"Runtime": "rdma-macvlan"}
			c["Config"] = map[string]any{"Env": tc.env}
			w.container("c2", c)
			if rc := w.run("inspect", "--format", "json", "c2"); rc != 0 {
				t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
			}
			var got inspectOutput
			if err := json.Unmarshal(w.stdout.Bytes(), &got); err != nil || len(got.Containers) != 1 {
				t.Fatalf("%v: %s", err, w.stdout.String())
			}
			ic := got.Containers[0]
			if ic.GIDChoice != tc.choice {
				t.Errorf("GID choice %q, want %q", ic.GIDChoice, tc.choice)
			}
			w.run("inspect", "c2")
			out := w.stdout.String()
			for _, p := range tc.problems {
				if !strings.Contains(out, p) {
					t.Errorf("output lacks %q:\n%s", p, out)
				}
			}
			if len(tc.problems) == 0 && (strings.Contains(out, "problem") || !strings.Contains(out, "IPC_LOCK   yes") || !strings.Contains(out, "memlock    the runtime's")) {
				t.Errorf("a container of the runtime:\n%s", out)
			}
		})
	}
}

func TestInspectNetwork(t *testing.T) {
	w := standardWorld(t)
	if rc := w.run("inspect", "roce"); rc != 0 {
		t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
	}
	out := w.stdout.String()
	t.Logf("\n%s", out)
	lines := strings.Split(out, "\n")
	var rows []string
	for i, l := range lines {
		if strings.HasPrefix(l, "CONTAINER") {
			for _, r := range lines[i+1:] {
				if r != "" {
					rows = append(rows, strings.Join(strings.Fields(r), " "))
				}
			}
		}
	}
	want := []string{
		"c1 - 192.168.7.2 - 5 4,5 - ready",
		"c2 - 192.168.7.3 - - - - not ready: waiting for the kernel to add its GID entries",
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("rows\n  %q\nwant\n  %q", rows, want)
	}
}

// Entries that moved after the container was ready (the daemon's
// gid_drift) are shown next to the current ones, in the network's table
// and in the container's view.
func TestInspectShowsMovedEntries(t *testing.T) {
	status := strings.Replace(string(readFixture(t, "status.json")), `"rdma_ready": true`,
		`"rdma_ready": true, "gid_drift": [{"gid": "0000:0000:0000:0000:0000:ffff:c0a8:0702", "type": "RoCE v2", "given_index": 3, "index": 5}]`, 1)
	w := standardWorldWith(t, []byte(status))
	if rc := w.run("inspect", "roce"); rc != 0 {
		t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
	}
	var row string
	for _, l := range strings.Split(w.stdout.String(), "\n") {
		if strings.HasPrefix(l, "c1 ") {
			row = strings.Join(strings.Fields(l), " ")
		}
	}
	if row != "c1 - 192.168.7.2 - 5 4,5 3->5 ready" {
		t.Errorf("row of c1 %q, want the move 3->5 beside the current index 5:\n%s", row, w.stdout.String())
	}
	w.stdout.Reset()
	w.container("c1", containerJSON("c1", "c1c1c1c1c1c1c1c1", "roce", netRoce, "aaaa00000001"+strings.Repeat("0", 52), "192.168.7.2", true))
	if rc := w.run("inspect", "c1"); rc != 0 {
		t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
	}
	if want := "moved      3->5 (given->now, -1: gone): the workload keeps the index it was given"; !strings.Contains(w.stdout.String(), want) {
		t.Errorf("the container's view lacks %q:\n%s", want, w.stdout.String())
	}
}

// An address another host holds (the daemon's address_conflicts) is shown
// in the container's view with the fix.
func TestInspectShowsDuplicateAddress(t *testing.T) {
	status := strings.Replace(string(readFixture(t, "status.json")), `"rdma_ready": true`,
		`"rdma_ready": true, "address_conflicts": [{"address": "192.168.7.2", "mac": "02:42:c0:a8:07:99", "seen": "2026-11-28T00:00:00Z"}, {"address": "192.168.7.2", "mac": "02:42:c0:a8:07:98", "seen": "2026-11-28T00:00:01Z", "probed": true}]`, 1)
	w := standardWorldWith(t, []byte(status))
	w.container("c1", containerJSON("c1", "c1c1c1c1c1c1c1c1", "roce", netRoce, "aaaa00000001"+strings.Repeat("0", 52), "192.168.7.2", true))
	if rc := w.run("inspect", "c1"); rc != 0 {
		t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
	}
	if want := "DUPLICATE  192.168.7.2 is also held by MAC 02:42:c0:a8:07:99 on the parent's segment"; !strings.Contains(w.stdout.String(), want) ||
		!strings.Contains(w.stdout.String(), "--ip-range") {
		t.Errorf("the container's view lacks %q and the fix:\n%s", want, w.stdout.String())
	}
	if want := "DUPLICATE  192.168.7.2 was probed for by MAC 02:42:c0:a8:07:98"; !strings.Contains(w.stdout.String(), want) {
		t.Errorf("the container's view lacks %q:\n%s", want, w.stdout.String())
	}
}

// A network's subnet is shown with this host's --ip-range of it, the
// plan of several hosts on one subnet; without one, the view says so.
func TestInspectNetworkShowsIPRange(t *testing.T) {
	w := standardWorld(t)
	w.ipam("roce", map[string]string{"Subnet": "192.168.7.0/24", "IPRange": "192.168.7.32/27"}, map[string]string{"Subnet": "fd07::/64"})
	if rc := w.run("inspect", "roce"); rc != 0 {
		t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
	}
	out := w.stdout.String()
	for _, want := range []string{"subnet     192.168.7.0/24, this host's range 192.168.7.32/27\n", "subnet     fd07::/64 (no --ip-range"} {
		if !strings.Contains(out, want) {
			t.Errorf("the network's view lacks %q:\n%s", want, out)
		}
	}
	w.stdout.Reset()
	if rc := w.run("ls", "--format", "json"); rc != 0 {
		t.Fatalf("ls: status %d, stderr:\n%s", rc, w.stderr.String())
	}
	if want := `"subnets":[{"subnet":"192.168.7.0/24","ip_range":"192.168.7.32/27"},{"subnet":"fd07::/64"}]`; !strings.Contains(strings.Join(strings.Fields(w.stdout.String()), ""), want) {
		t.Errorf("ls --format json lacks %s:\n%s", want, w.stdout.String())
	}
}

func TestInspectErrors(t *testing.T) {
	w := standardWorld(t)
	if rc := w.run("inspect", "nothing"); rc != 1 || !strings.Contains(w.stderr.String(), "nothing: no such container or network") {
		t.Errorf("status %d, stderr %q", rc, w.stderr.String())
	}
	if rc := w.run("inspect", "plain"); rc != 1 || !strings.Contains(w.stderr.String(), "network plain has driver bridge, not rdma-macvlan") {
		t.Errorf("status %d, stderr %q", rc, w.stderr.String())
	}
	if rc := w.run("inspect"); rc != exitUsage {
		t.Errorf("no argument: status %d", rc)
	}
	w.container("web", map[string]any{"Id": "w", "Name": "/web", "NetworkSettings": map[string]any{"Networks": map[string]any{"plain": map[string]any{"NetworkID": netOther}}}})
	if rc := w.run("inspect", "web"); rc != 1 || !strings.Contains(w.stderr.String(), "container web is on no rdma-macvlan network") {
		t.Errorf("status %d, stderr %q", rc, w.stderr.String())
	}
}

// TestInspectWithoutDaemon: without the daemon's status the GID index and
// the interface name come from the GID table in sysfs.
func TestInspectWithoutDaemon(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{
		Netdev: "ens3np0", HostIPv4: "10.0.0.1",
		Extra: rdmatest.Pair(4, rdmatest.IPv4GID("192.168.7.2"), "eth1"),
	})
	w := newWorld(t)
	w.info("20.10.24")
	w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"sysfs": filepath.Join(root, "sys")})
	w.network("roce", netRoce, "rdma-macvlan:latest", map[string]string{"parent": "ens3np0"}, nil)
	w.container("c1", containerJSON("c1", "c1c1c1c1c1c1c1c1", "roce", netRoce, "e1", "192.168.7.2", true))
	if rc := w.run("inspect", "c1"); rc != 0 {
		t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
	}
	out := w.stdout.String()
	t.Logf("\n%s", out)
	for _, s := range []string{
		"interface  eth1",
		"GIDs       4  IB/RoCE v1",
		"RDMA       GID entries present (readiness not known without the daemon)",
		"not known: daemon status: the daemon's socket",
		"NCCL_IB_HCA==mlx5_0:1\nNCCL_IB_GID_INDEX=5\nNCCL_SOCKET_IFNAME==eth1\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q", s)
		}
	}
}

// A container started through rdma-exec with --roce-version 1 shows the v1
// index, as the helper exported it.
func TestInspectContainerStartedByHelper(t *testing.T) {
	w := standardWorld(t)
	c := containerJSON("c1", "c1c1c1c1c1c1c1c1", "roce", netRoce, "aaaa00000001"+strings.Repeat("0", 52), "192.168.7.2", true)
	c["Path"] = "/.rdma-macvlan/rdma-exec"
	c["Args"] = []string{"--net", "name=roce", "--timeout", "10s", "--roce-version", "1", "--", "sh", "--roce-version", "2"}
	w.container("c1", c)
	if rc := w.run("inspect", "c1"); rc != 0 {
		t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
	}
	if out := w.stdout.String(); !strings.Contains(out, "GID: RoCE v1, auto)\nNCCL_IB_HCA==mlx5_0:1\nNCCL_IB_GID_INDEX=4\n") {
		t.Errorf("output:\n%s", out)
	}
}

// inspect shows what rdma-exec gave the workload: the devices in the order
// of rdma-exec's --net flags (not by network name), the container's own
// -e/ENV values kept, and the mismatch when indexes differ per rail.
func TestContainerEnvFollowsRDMAExec(t *testing.T) {
	c := docker.Container{Path: "/.rdma-macvlan/rdma-exec", Args: []string{
		"--net", "name=zz,hca=mlx5_1,port=1", "--net", "name=aa,hca=mlx5_0,port=1", "--accept-gid-mismatch", "--", "sh", "--net", "name=x"}}
	choice, order, accept := helperArgs(c)
	names := []string{"aa", "other", "zz"}
	byHelperOrder(names, order)
	if !reflect.DeepEqual(names, []string{"zz", "aa", "other"}) || !accept || choice != rdmaenv.DefaultChoice {
		t.Fatalf("order %v, accept %v, choice %v", names, accept, choice)
	}
	a := netip.MustParseAddr
	idx := func(i int) *int { return &i }
	net := func(hca, ifname, ip string, index int, table []rdmaenv.Entry) inspectNetwork {
		sub, _ := a(ip).Prefix(24)
		return inspectNetwork{lsNetwork: lsNetwork{netFacts: netFacts{HCA: hca, Port: 1}}, Endpoints: []inspectEndpoint{{Ifname: ifname, GIDIndex: idx(index), addr: a(ip), table: table}},
			subnets: []netip.Prefix{sub}}
	}
	e := func(i int, ip, ndev string) rdmaenv.Entry {
		return rdmaenv.Entry{Index: i, GID: rdmaenv.GIDOf(a(ip)), Type: rdmaenv.TypeV2, Ndev: ndev}
	}
	nets := []inspectNetwork{
		net("mlx5_1", "eth1", "10.0.2.5", 3, []rdmaenv.Entry{e(3, "10.0.2.5", "eth1")}),
		net("mlx5_0", "eth0", "10.0.1.5", 5, []rdmaenv.Entry{e(3, "10.0.1.1", "ens0"), e(5, "10.0.1.5", "eth0")}),
	}
	env, notes, mismatch, _ := containerEnv(nets, rdmaenv.DefaultChoice, []string{"PATH=/bin", "NCCL_IB_HCA=mine"})
	if env[0] != "NCCL_IB_HCA=mine" || !slices.Contains(env, "UCX_NET_DEVICES=mlx5_1:1,mlx5_0:1") || !slices.Contains(env, "NCCL_SOCKET_IFNAME==eth1,eth0") {
		t.Errorf("env %q", env)
	}
	// NCCL: no range holds the two rails' addresses and no neighbour's;
	// UCX: its own choice on mlx5_0 is 10.0.1.1's entry, so it gets the
	// container's addresses as UCX_IB_ROCE_SUBNETS.
	if !strings.Contains(strings.Join(notes, "\n"), "NCCL_IB_HCA=mine is the container's own setting") || len(mismatch) != 1 ||
		!strings.Contains(mismatch[0], "10.0.0.0/22 also holds 10.0.2.0, an address of subnet 10.0.2.0/24") || !slices.Contains(env, "UCX_IB_ROCE_SUBNETS=10.0.2.5/32,10.0.1.5/32") {
		t.Errorf("env %q, notes %q, mismatch %q", env, notes, mismatch)
	}
}

// inspect's environment carries the networks' QoS as rdma-exec exports it:
// the user's own value kept and noted, a conflict between rails reported.
func TestContainerEnvQoS(t *testing.T) {
	n := func(name, hca string, tc, sl *int) inspectNetwork {
		i := 3
		return inspectNetwork{lsNetwork: lsNetwork{Name: name, netFacts: netFacts{HCA: hca, Port: 1, TrafficClass: tc, ServiceLevel: sl}},
			Endpoints: []inspectEndpoint{{Ifname: "eth0", GIDIndex: &i}}}
	}
	v := func(x int) *int { return &x }
	env, notes, _, conflict := containerEnv([]inspectNetwork{n("a", "mlx5_0", v(106), v(3))}, rdmaenv.DefaultChoice, []string{"NCCL_IB_TC=96"})
	for _, w := range []string{"NCCL_IB_TC=96", "UCX_IB_TRAFFIC_CLASS=106", "NCCL_IB_SL=3", "UCX_IB_SL=3"} {
		if !slices.Contains(env, w) {
			t.Errorf("env %q lacks %s", env, w)
		}
	}
	if !strings.Contains(strings.Join(notes, "\n"), "NCCL_IB_TC=96 is the container's own setting (-e or the image's ENV), kept; what it would get here: 106") || conflict != nil {
		t.Errorf("notes %q, conflict %q", notes, conflict)
	}
	env, _, _, conflict = containerEnv([]inspectNetwork{n("a", "mlx5_0", v(106), nil), n("b", "mlx5_1", v(96), nil)}, rdmaenv.DefaultChoice, nil)
	if strings.Contains(strings.Join(env, " "), "_TC=") || len(conflict) != 1 || !strings.Contains(conflict[0], "traffic_class differs per network (a 106, b 96)") {
		t.Errorf("rails with different classes: env %q, conflict %q", env, conflict)
	}
}
