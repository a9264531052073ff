package cdi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func mlx5CDIDevice() cdi.Device {
	return cdi.Device{
		HCA:  "mlx5_0",
		Port: 1,
		Nodes: []rdma.DeviceNode{
			{Path: "/dev/infiniband/uverbs0", Major: 231, Minor: 192, Type: "c"},
			{Path: "/dev/infiniband/rdma_cm", Major: 10, Minor: 57, Type: "c"},
		},
		Netdev: "ens3np0",
		Owner:  "rdma-macvlan 0123456789abcdef",
	}
}

// TestWriteCDISpecContent parses the written spec as a generic document, so
// it checks the JSON names a CDI consumer reads, not this package's structs.
func TestWriteCDISpecContent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cdi") // created on demand
	path, err := cdi.WriteSpec(dir, mlx5CDIDevice())
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "rdma-macvlan-mlx5_0.json"); path != want || cdi.SpecPath(dir, "mlx5_0") != want {
		t.Errorf("spec path = %q, SpecPath = %q; want %q", path, cdi.SpecPath(dir, "mlx5_0"), want)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("spec is not JSON: %v", err)
	}
	want := map[string]any{
		"cdiVersion":  "0.6.0",
		"kind":        "rdma-macvlan/hca",
		"annotations": map[string]any{"rdma-macvlan/owner": "rdma-macvlan 0123456789abcdef"},
		"devices": []any{map[string]any{
			"name": "mlx5_0",
			"containerEdits": map[string]any{
				"env": []any{
					"RDMA_MACVLAN_DEVICE_mlx5_0=mlx5_0:1",
					"RDMA_MACVLAN_NETDEV_mlx5_0=ens3np0",
				},
				"deviceNodes": []any{
					map[string]any{"path": "/dev/infiniband/uverbs0", "type": "c", "major": 231.0, "minor": 192.0, "fileMode": 438.0, "permissions": "rw"},
					map[string]any{"path": "/dev/infiniband/rdma_cm", "type": "c", "major": 10.0, "minor": 57.0, "fileMode": 438.0, "permissions": "rw"},
				},
			},
		}},
	}
	if !reflect.DeepEqual(doc, want) {
		got, _ := json.MarshalIndent(doc, "", "  ")
		t.Errorf("spec =\n%s", got)
	}
	if got := cdi.Qualified("mlx5_0"); got != "rdma-macvlan/hca=mlx5_0" {
		t.Errorf("Qualified = %q", got)
	}

	golden := filepath.Join("testdata", "cdi-mlx5_0.json")
	if *update {
		if err := os.WriteFile(golden, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if g, err := os.ReadFile(golden); err != nil || !bytes.Equal(g, data) {
		t.Errorf("spec differs from %s (%v); run go test ./rdma -run CDI -update to review the change", golden, err)
	}

	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o644 {
		t.Errorf("spec mode = %v (%v), want 0644", info.Mode().Perm(), err)
	}
	assertOnlyFiles(t, dir, "rdma-macvlan-mlx5_0.json")
}

// A dual-port HCA gets one CDI device per port, each with its own port's
// environment; a single-port HCA keeps its plain name.
func TestCDINamePerPort(t *testing.T) {
	root := t.TempDir()
	if err := rdmatest.BuildMLX4DualPort(root); err != nil {
		t.Fatal(err)
	}
	if err := rdmatest.BuildMLX5(root, rdmatest.MLX5Options{Netdev: "p0", PCIAddr: "0000:05:00.0", MAC: "a0:88:c2:5b:03:05", Uverbs: 1}); err != nil {
		t.Fatal(err)
	}
	s := rdma.NewSysfs(root)
	for _, c := range []struct {
		hca        string
		port       int
		want       string
		wantNCCLIB string
	}{
		{"mlx4_0", 1, "mlx4_0-p1", "NCCL_IB_HCA==mlx4_0:1"},
		{"mlx4_0", 2, "mlx4_0-p2", "NCCL_IB_HCA==mlx4_0:2"},
		{"mlx5_0", 1, "mlx5_0", "NCCL_IB_HCA==mlx5_0:1"},
	} {
		got, err := cdi.NameOnHost(s, c.hca, c.port)
		if err != nil || got != c.want {
			t.Fatalf("NameOnHost(%s, %d) = %q, %v; want %q", c.hca, c.port, got, err, c.want)
		}
	}
	dir := t.TempDir()
	for _, port := range []int{2, 1} {
		nodes, err := s.DeviceNodes("mlx4_0")
		if err != nil && !errors.Is(err, rdma.ErrNoRdmaCM) {
			t.Fatal(err)
		}
		name, _ := cdi.NameOnHost(s, "mlx4_0", port)
		if _, err := cdi.WriteSpec(dir, cdi.Device{Name: name, HCA: "mlx4_0", Port: port, Nodes: nodes, Netdev: fmt.Sprintf("eth%d", port+1)}); err != nil {
			t.Fatal(err)
		}
	}
	names, err := cdi.SpecNames(dir)
	if err != nil || !slices.Equal(names, []string{"mlx4_0-p1", "mlx4_0-p2"}) {
		t.Fatalf("SpecNames = %v, %v", names, err)
	}
	for _, port := range []int{1, 2} {
		name := fmt.Sprintf("mlx4_0-p%d", port)
		spec, ok, err := cdi.ReadSpec(dir, name)
		if err != nil || !ok || len(spec.Devices) != 1 || spec.Devices[0].Name != name {
			t.Fatalf("spec of %s: %+v %v %v", name, spec, ok, err)
		}
		env := spec.Devices[0].ContainerEdits.Env
		for _, want := range []string{fmt.Sprintf("RDMA_MACVLAN_DEVICE_mlx4_0_p%d=mlx4_0:%d", port, port), fmt.Sprintf("RDMA_MACVLAN_NETDEV_mlx4_0_p%d=eth%d", port, port+1)} {
			if !slices.Contains(env, want) {
				t.Errorf("%s: env %v lacks %s", name, env, want)
			}
		}
	}
	if got := cdi.Unqualified(cdi.Qualified("mlx4_0-p2")); got != "mlx4_0-p2" {
		t.Errorf("Unqualified = %q", got)
	}
	if got := cdi.Unqualified("vendor.com/gpu=0"); got != "" {
		t.Errorf("Unqualified(other kind) = %q", got)
	}
}

// TestWriteCDISpecFromFixture writes the spec of what DeviceNodes found,
// the way the driver does on network create.
func TestWriteCDISpecFromFixture(t *testing.T) {
	s := rdma.NewSysfs(rdmatest.RXE(t, rdmatest.RXEOptions{}))
	nodes, err := s.DeviceNodes("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path, err := cdi.WriteSpec(dir, cdi.Device{HCA: "rxe0", Port: 1, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	var spec cdi.Spec
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	d := spec.Devices[0]
	if d.Name != "rxe0" || len(d.ContainerEdits.DeviceNodes) != 2 ||
		d.ContainerEdits.DeviceNodes[0].Path != "/dev/infiniband/uverbs0" ||
		d.ContainerEdits.DeviceNodes[1].Path != "/dev/infiniband/rdma_cm" || d.ContainerEdits.DeviceNodes[1].Minor != 124 {
		t.Errorf("rxe0 spec = %s", data)
	}
	for _, e := range d.ContainerEdits.Env {
		if strings.HasPrefix(e, cdi.EnvNetdevPrefix) {
			t.Errorf("env %q set without a netdev", e)
		}
	}
}

func TestWriteCDISpecReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	d := mlx5CDIDevice()
	if _, err := cdi.WriteSpec(dir, d); err != nil {
		t.Fatal(err)
	}
	d.Port = 2
	d.Nodes = d.Nodes[:1]
	path, err := cdi.WriteSpec(dir, d)
	if err != nil {
		t.Fatal(err)
	}
	var spec cdi.Spec
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	if env := spec.Devices[0].ContainerEdits.Env; env[0] != "RDMA_MACVLAN_DEVICE_mlx5_0=mlx5_0:2" || len(spec.Devices[0].ContainerEdits.DeviceNodes) != 1 {
		t.Errorf("rewritten spec = %s", data)
	}
	assertOnlyFiles(t, dir, "rdma-macvlan-mlx5_0.json")
}

func TestWriteCDISpecRejects(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	good := mlx5CDIDevice()
	tests := []struct {
		name    string
		dir     string
		mutate  func(d *cdi.Device)
		wantErr error
	}{
		{name: "path in name", mutate: func(d *cdi.Device) { d.HCA = "../mlx5_0" }, wantErr: rdma.ErrInvalidName},
		{name: "name CDI refuses", mutate: func(d *cdi.Device) { d.HCA = "mlx5_0-" }, wantErr: rdma.ErrInvalidName},
		{name: "empty name", mutate: func(d *cdi.Device) { d.HCA = "" }, wantErr: rdma.ErrInvalidName},
		{name: "no nodes", mutate: func(d *cdi.Device) { d.Nodes = nil }, wantErr: rdma.ErrNoUverbs},
		{name: "no port", mutate: func(d *cdi.Device) { d.Port = 0 }},
		{name: "cdi dir is a file", dir: notADir, mutate: func(*cdi.Device) {}, wantErr: syscall.ENOTDIR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.dir
			if dir == "" {
				dir = t.TempDir()
			}
			d := good
			tt.mutate(&d)
			path, err := cdi.WriteSpec(dir, d)
			if err == nil {
				t.Fatalf("WriteSpec(%+v) = %s, want an error", d, path)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
			if tt.dir == "" {
				assertOnlyFiles(t, dir)
			}
		})
	}
}

func TestRemoveCDISpec(t *testing.T) {
	dir := t.TempDir()
	if _, err := cdi.WriteSpec(dir, mlx5CDIDevice()); err != nil {
		t.Fatal(err)
	}
	// A temporary file left by a crash mid-write, and another HCA's spec.
	if err := os.WriteFile(filepath.Join(dir, ".rdma-macvlan-mlx5_0.json.tmp-123"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := mlx5CDIDevice()
	other.HCA = "mlx5_1"
	if _, err := cdi.WriteSpec(dir, other); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := cdi.RemoveSpec(dir, "mlx5_0"); err != nil {
			t.Fatalf("RemoveSpec #%d: %v", i+1, err)
		}
		assertOnlyFiles(t, dir, "rdma-macvlan-mlx5_1.json")
	}
	if err := cdi.RemoveSpec(filepath.Join(dir, "missing"), "mlx5_0"); err != nil {
		t.Errorf("RemoveSpec in a missing directory: %v", err)
	}
	if err := cdi.RemoveSpec(dir, "../x"); !errors.Is(err, rdma.ErrInvalidName) {
		t.Errorf("RemoveSpec(../x) error = %v, want ErrInvalidName", err)
	}
}

func assertOnlyFiles(t *testing.T, dir string, want ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if want == nil {
		want = []string{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s holds %q, want %q", dir, got, want)
	}
}

// TestReadCDISpecRefusesWhatThePluginDidNotWrite: the CDI directory is
// shared with other CDI producers, so ReadSpec reads only a regular
// file of at most MaxSpecBytes, not through a symbolic link, without
// blocking on a FIFO, and says of anything else at a spec's path that it
// is not one of this plugin's specs.
func TestReadCDISpecRefusesWhatThePluginDidNotWrite(t *testing.T) {
	cases := []struct {
		name  string
		plant func(t *testing.T, path string)
		want  string
	}{
		{"FIFO", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				// Lets a reader stuck on it (a failed test) go on.
				if fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					syscall.Close(fd)
				}
			})
		}, "is a FIFO"},
		{"symlink to /dev/zero", func(t *testing.T, path string) {
			if err := os.Symlink("/dev/zero", path); err != nil {
				t.Fatal(err)
			}
		}, `is a symbolic link (to "/dev/zero")`},
		{"symlink to a spec", func(t *testing.T, path string) {
			written, err := cdi.WriteSpec(t.TempDir(), mlx5CDIDevice())
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(written, path); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "is a directory"},
		{"file of 1.5 GB (sparse)", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, 1536<<20); err != nil {
				t.Fatal(err)
			}
		}, fmt.Sprintf("is 1610612736 bytes long, more than the %d", cdi.MaxSpecBytes)},
		{"not JSON", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("garbage\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "is not a CDI spec"},
		{"spec of another kind", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(`{"cdiVersion":"0.6.0","kind":"example.com/nic","devices":[]}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, `is of kind "example.com/nic", not "rdma-macvlan/hca"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := cdi.SpecPath(dir, "mlx5_0")
			c.plant(t, path)
			type result struct {
				ok  bool
				err error
			}
			done := make(chan result, 1)
			go func() {
				_, ok, err := cdi.ReadSpec(dir, "mlx5_0")
				done <- result{ok, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("ReadSpec of a %s did not return within 20 s", c.name)
			}
			if !r.ok || !errors.Is(r.err, cdi.ErrForeignSpec) || !strings.Contains(r.err.Error(), path) || !strings.Contains(r.err.Error(), c.want) {
				t.Fatalf("ReadSpec = ok %v, %v; want an ErrForeignSpec naming %s and saying %q", r.ok, r.err, path, c.want)
			}
		})
	}
	// What the plugin writes is read; a missing spec is none.
	dir := t.TempDir()
	if _, err := cdi.WriteSpec(dir, mlx5CDIDevice()); err != nil {
		t.Fatal(err)
	}
	if spec, ok, err := cdi.ReadSpec(dir, "mlx5_0"); err != nil || !ok || spec.Owner() != mlx5CDIDevice().Owner {
		t.Fatalf("ReadSpec of a written spec = %+v, %v, %v", spec, ok, err)
	}
	if _, ok, err := cdi.ReadSpec(dir, "mlx5_1"); err != nil || ok {
		t.Fatalf("ReadSpec of a missing spec = %v, %v; want none", ok, err)
	}
}

// TestWriteCDISpecReplacesALinkNotItsTarget: a symbolic link at a spec's
// path is replaced by the spec (WriteSpec renames a new file over the
// path); what the link pointed at is not written.
func TestWriteCDISpecReplacesALinkNotItsTarget(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("not a spec\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := cdi.SpecPath(dir, "mlx5_0")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if _, err := cdi.WriteSpec(dir, mlx5CDIDevice()); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(target); string(data) != "not a spec\n" {
		t.Fatalf("the link's target was written: %q", data)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the spec's path after the write: %v, %v; want a regular file", fi, err)
	}
}

// applyCDIEnv applies the env edits of devices to env as the CDI library
// does (an edit replaces a variable already set) after the user's -e and
// the image's ENV, as the engine does.
func applyCDIEnv(env []string, specs ...cdi.Spec) []string {
	out := append([]string{}, env...)
	for _, s := range specs {
		for _, e := range s.Devices[0].ContainerEdits.Env {
			name, _, _ := strings.Cut(e, "=")
			replaced := false
			for i, o := range out {
				if strings.HasPrefix(o, name+"=") {
					out[i], replaced = e, true
				}
			}
			if !replaced {
				out = append(out, e)
			}
		}
	}
	return out
}

// Eight rails' devices (and the two ports of a dual-port HCA) given to one
// container: every device's port survives the merge, in the devices'
// order, and the user's own NCCL and UCX variables are not replaced: no
// device sets a variable another device or the user sets. Each rail's
// traffic class and service level, different per rail here, are its own.
func TestCDIEnvOfSeveralDevicesMerges(t *testing.T) {
	var specs []cdi.Spec
	var want, wantQoS []string
	for i := 0; i < 8; i++ {
		tc, sl := 96+i, i%8
		d := cdi.Device{HCA: fmt.Sprintf("mlx5_%d", i), Port: 1, Nodes: mlx5CDIDevice().Nodes, Netdev: fmt.Sprintf("ens%d", i),
			TrafficClass: &tc, ServiceLevel: &sl}
		wantQoS = append(wantQoS, fmt.Sprintf("RDMA_MACVLAN_TRAFFIC_CLASS_mlx5_%d=%d", i, tc), fmt.Sprintf("RDMA_MACVLAN_SERVICE_LEVEL_mlx5_%d=%d", i, sl))
		s, err := cdi.NewSpec(d)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, s)
		want = append(want, d.HCA+":1")
	}
	for port := 1; port <= 2; port++ {
		s, err := cdi.NewSpec(cdi.Device{Name: cdi.Name("mlx4_0", port, 2), HCA: "mlx4_0", Port: port, Nodes: mlx5CDIDevice().Nodes})
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, s)
		want = append(want, fmt.Sprintf("mlx4_0:%d", port))
	}
	user := []string{"NCCL_IB_HCA=mine", "UCX_NET_DEVICES=mine:1", "NCCL_IB_TC=mine", "UCX_IB_SL=mine", "PATH=/bin"}
	env := applyCDIEnv(user, specs...)
	if got := cdi.PortsInEnv(env); !slices.Equal(got, want) {
		t.Errorf("ports in the merged env %v, want %v", got, want)
	}
	if !slices.Equal(env[:len(user)], user) {
		t.Errorf("the user's variables were replaced: %v", env[:len(user)])
	}
	for _, w := range wantQoS {
		if !slices.Contains(env, w) {
			t.Errorf("the merged env lacks %s: %v", w, env)
		}
	}
	seen := map[string]bool{}
	for _, e := range env[len(user):] {
		name, _, _ := strings.Cut(e, "=")
		if seen[name] || strings.HasPrefix(name, "NCCL_") || strings.HasPrefix(name, "UCX_") {
			t.Errorf("variable %s set twice or shared with NCCL/UCX: %v", name, env)
		}
		seen[name] = true
	}
	if got := cdi.EnvKey("mlx4_0-p2.x:y"); got != "mlx4_0_p2_x_y" {
		t.Errorf("EnvKey = %q", got)
	}
}
