package driver

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

func TestRDMACDISpecLifecycle(t *testing.T) {
	links := drivertest.NewLinks("p0")
	dir := t.TempDir()
	root := mlx5Root(t, rdmatest.MLX5Options{Uverbs: 2})
	d := newTestDriverAt(t, links, dir, root)
	for _, n := range []string{"n1", "n2"} {
		if err := d.CreateNetwork(netReq(n, "parent", "p0")); err != nil {
			t.Fatal(err)
		}
	}
	path := cdi.SpecPath(d.cdiDir, "mlx5_0")
	var spec cdi.Spec
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Kind != "rdma-macvlan/hca" || len(spec.Devices) != 1 || spec.Devices[0].Name != "mlx5_0" {
		t.Fatalf("spec %+v", spec)
	}
	var nodes []string
	for _, n := range spec.Devices[0].ContainerEdits.DeviceNodes {
		nodes = append(nodes, fmt.Sprintf("%s %d:%d", n.Path, n.Major, n.Minor))
	}
	if !slices.Equal(nodes, []string{"/dev/infiniband/uverbs2 231:194", "/dev/infiniband/rdma_cm 10:57"}) {
		t.Fatalf("device nodes %v: want only the HCA's uverbs and rdma_cm, numbers from sysfs", nodes)
	}
	if !slices.Contains(spec.Devices[0].ContainerEdits.Env, "RDMA_MACVLAN_DEVICE_mlx5_0=mlx5_0:1") {
		t.Fatalf("env %v", spec.Devices[0].ContainerEdits.Env)
	}

	// Kept while a network uses the HCA.
	if err := d.DeleteNetwork("n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal("spec removed while n2 still uses mlx5_0")
	}
	// Rewritten at start; stale specs of this daemon swept.
	d.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	stale, err := cdi.WriteSpec(d.cdiDir, cdi.Device{HCA: "mlx5_9", Port: 1, Owner: d.owner,
		Nodes: []rdma.DeviceNode{{Path: "/dev/infiniband/uverbs9", Major: 231, Minor: 201}}})
	if err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(d.cdiDir, "vendor-gpu.json")
	if err := os.WriteFile(foreign, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	d2 := newTestDriverAt(t, links, dir, root)
	if _, err := os.Stat(path); err != nil {
		t.Fatal("spec of a restored network not rewritten at start")
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("stale spec of an HCA no network uses not removed")
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Fatal("removed another vendor's CDI spec")
	}
	if err := d2.DeleteNetwork("n2"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("spec left after the last network on the HCA")
	}
}

// specQoS reads the traffic class and service level variables of the spec
// of the CDI device mlx5_0: "" when the spec does not set one.
func specQoS(t *testing.T, d testDriver) (tc, sl string) {
	t.Helper()
	spec, ok, err := cdi.ReadSpec(d.cdiDir, "mlx5_0")
	if err != nil || !ok {
		t.Fatalf("spec of mlx5_0: %v (there: %v)", err, ok)
	}
	for _, e := range spec.Devices[0].ContainerEdits.Env {
		if v, ok := strings.CutPrefix(e, "RDMA_MACVLAN_TRAFFIC_CLASS_mlx5_0="); ok {
			tc = v
		}
		if v, ok := strings.CutPrefix(e, "RDMA_MACVLAN_SERVICE_LEVEL_mlx5_0="); ok {
			sl = v
		}
		if strings.HasPrefix(e, "NCCL_") || strings.HasPrefix(e, "UCX_") {
			t.Errorf("the spec sets %s: a device sets only variables named after itself", e)
		}
	}
	return tc, sl
}

// The CDI device of a port carries a traffic class and a service level
// only when every network on the port sets the same one: the device is
// shared by them, and a container given it may be on any of them. Each
// network that comes or goes rewrites the spec; a restart writes the same.
func TestCDISpecQoS(t *testing.T) {
	links := drivertest.NewLinks("p0")
	dir := t.TempDir()
	root := mlx5Root(t, rdmatest.MLX5Options{})
	d := newTestDriverAt(t, links, dir, root)
	step := func(what string, err error, wantTC, wantSL string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if tc, sl := specQoS(t, d); tc != wantTC || sl != wantSL {
			t.Fatalf("after %s: the spec carries traffic class %q, service level %q; want %q, %q", what, tc, sl, wantTC, wantSL)
		}
	}
	step("n1 with traffic_class=106 service_level=3", d.CreateNetwork(netReq("n1", "parent", "p0", "traffic_class", "106", "service_level", "3")), "106", "3")
	step("n2 on the same port with traffic_class=106 and no service level",
		d.CreateNetwork(netReq("n2", "parent", "p0.10", "traffic_class", "106")), "106", "")
	step("n3 on the same port with traffic_class=96", d.CreateNetwork(netReq("n3", "parent", "p0.20", "traffic_class", "96", "service_level", "3")), "", "")
	step("n3 deleted", d.DeleteNetwork("n3"), "106", "")
	step("n2 deleted", d.DeleteNetwork("n2"), "106", "3")
	d.Close()
	d = newTestDriverAt(t, links, dir, root)
	step("a restart", nil, "106", "3")
	step("n4 without QoS on the same port", d.CreateNetwork(netReq("n4", "parent", "p0.30")), "", "")
}

// specNodes are the device nodes the CDI spec of name lists.
func specNodes(t *testing.T, dir, name string) []string {
	t.Helper()
	spec, ok, err := cdi.ReadSpec(dir, name)
	if err != nil || !ok {
		t.Fatalf("spec %s: %v %v", name, ok, err)
	}
	var nodes []string
	for _, n := range spec.Devices[0].ContainerEdits.DeviceNodes {
		nodes = append(nodes, fmt.Sprintf("%s %d:%d", n.Path, n.Major, n.Minor))
	}
	return nodes
}

// A device registered again while the daemon runs comes back with another
// uverbs node: the next status read says so (a problem of the network) and
// rewrites the spec, and so does the next container's CreateEndpoint,
// before the engine asks the runtime to create the container.
func TestReregisteredDeviceRewritesItsSpec(t *testing.T) {
	links := drivertest.NewLinks("p0")
	root := mlx5Root(t, rdmatest.MLX5Options{Uverbs: 2})
	d := newTestDriverAt(t, links, t.TempDir(), root)
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	if got := specNodes(t, d.cdiDir, "mlx5_0"); got[0] != "/dev/infiniband/uverbs2 231:194" {
		t.Fatalf("spec at create: %v", got)
	}
	if err := rdmatest.Reregister(root, "mlx5_0", 5); err != nil {
		t.Fatal(err)
	}
	problems := func() []string {
		for _, n := range d.Status().Networks {
			if n.ID == "n1" {
				return n.Problems
			}
		}
		t.Fatal("n1 not in the status")
		return nil
	}
	p := strings.Join(problems(), "\n")
	if !strings.Contains(p, "the CDI spec of rdma-macvlan/hca=mlx5_0 lists /dev/infiniband/uverbs2 (231:194)") || !strings.Contains(p, "mlx5_0 has /dev/infiniband/uverbs5 (231:197)") {
		t.Fatalf("status problems after the re-registration: %q", p)
	}
	if got := specNodes(t, d.cdiDir, "mlx5_0"); got[0] != "/dev/infiniband/uverbs5 231:197" {
		t.Fatalf("spec after the status read: %v", got)
	}
	if p := problems(); len(p) != 0 {
		t.Fatalf("problems once the spec is rewritten: %q", p)
	}
	// Again, and a container starts: its CreateEndpoint rewrites the spec.
	if err := rdmatest.Reregister(root, "mlx5_0", 7); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); err != nil {
		t.Fatal(err)
	}
	if got := specNodes(t, d.cdiDir, "mlx5_0"); got[0] != "/dev/infiniband/uverbs7 231:199" {
		t.Fatalf("spec after CreateEndpoint: %v", got)
	}
}
