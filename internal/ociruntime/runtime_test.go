package ociruntime

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaexec"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

const cid = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// containerdArgs is how containerd's runc shim runs a runtime's create
// (seen on Docker 28.5.2), before the runtime's own options.
func containerdArgs(bundle string) []string {
	return []string{"--root", "/run/x/runtime-runc/moby", "--log", filepath.Join(bundle, "log.json"), "--log-format", "json",
		"create", "--bundle", bundle, "--pid-file", filepath.Join(bundle, "init.pid"), cid}
}

func TestParse(t *testing.T) {
	args := append([]string{"--docker-host", "unix:///d.sock", "--cdi-dir=/c", "--systemd-cgroup"}, containerdArgs("/b")...)
	inv, err := Parse(args)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Own.DockerHost != "unix:///d.sock" || inv.Own.CDIDir != "/c" || inv.Own.Next != DefaultNext {
		t.Errorf("own options %+v", inv.Own)
	}
	if want := append([]string{"--systemd-cgroup"}, containerdArgs("/b")...); !reflect.DeepEqual(inv.Pass, want) {
		t.Errorf("passed on %q, want %q", inv.Pass, want)
	}
	if inv.Command != "create" || inv.Root != "/run/x/runtime-runc/moby" || inv.Log != "/b/log.json" || inv.LogFormat != "json" {
		t.Errorf("command %q root %q log %q %q", inv.Command, inv.Root, inv.Log, inv.LogFormat)
	}
	bundle, id, err := inv.Container()
	if err != nil || bundle != "/b" || id != cid {
		t.Errorf("Container() = %q %q %v", bundle, id, err)
	}
	for _, a := range [][]string{{"--docker-host"}, {"--cdi-dir="}} {
		if _, err := Parse(a); err == nil {
			t.Errorf("Parse(%q) took it", a)
		}
	}
	inv, _ = Parse([]string{"--root=/r", "delete", "--force", cid})
	if inv.DeleteID() != cid || inv.Root != "/r" {
		t.Errorf("delete: id %q root %q", inv.DeleteID(), inv.Root)
	}
}

// world is a plugin socket, an engine socket and a CDI directory.
type world struct {
	dir, plugin, engine, cdi string
	brief                    api.Status
	networks                 map[string]EngineNetwork // by ID and by name
	record                   map[string]string        // the container's networks: name -> ID
	engineDown               bool
	asked                    []string
	briefs                   int // requests to the plugin
}

func newWorld(t *testing.T) *world {
	t.Helper()
	dir, err := os.MkdirTemp("", "rt") // unix socket paths are short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w := &world{dir: dir, plugin: filepath.Join(dir, "p.sock"), engine: filepath.Join(dir, "d.sock"), cdi: filepath.Join(dir, "cdi"),
		networks: map[string]EngineNetwork{}, record: map[string]string{}}
	serve(t, w.plugin, func(rw http.ResponseWriter, r *http.Request) {
		w.briefs++
		if r.URL.Path != api.StatusPath || r.URL.RawQuery != api.BriefQuery {
			http.Error(rw, "not brief", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(rw).Encode(w.brief)
	})
	serve(t, w.engine, func(rw http.ResponseWriter, r *http.Request) {
		w.asked = append(w.asked, r.URL.Path)
		if w.engineDown {
			http.Error(rw, "down", http.StatusInternalServerError)
			return
		}
		n, ok := w.networks[strings.TrimPrefix(r.URL.Path, "/networks/")]
		if !ok {
			http.NotFound(rw, r)
			return
		}
		_ = json.NewEncoder(rw).Encode(n)
	})
	return w
}

func serve(t *testing.T, path string, h http.HandlerFunc) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// rdmaNet makes network id (name, on hca port 1, 10.7.0.0/24, traffic
// class 106) with its CDI spec, as the plugin and the engine would, and
// puts the container on it.
func (w *world) rdmaNet(t *testing.T, id, name, hca string, uverbs uint32) {
	t.Helper()
	tc := 106
	w.brief.GIDTimeout = "7s"
	w.brief.Networks = append(w.brief.Networks, api.Network{ID: id, HCA: hca, Port: 1, CDIDevice: cdi.Qualified(hca), TrafficClass: &tc,
		Subnets: []string{"10.7.0.0/24"}})
	w.networks[id] = EngineNetwork{ID: id, Name: name, Driver: "rdma-macvlan:latest"}
	w.networks[name] = w.networks[id]
	w.record[name] = id
	if _, err := cdi.WriteSpec(w.cdi, cdi.Device{HCA: hca, Port: 1, Nodes: []rdma.DeviceNode{
		{Path: "/dev/infiniband/uverbs" + string(rune('0'+uverbs)), Major: 231, Minor: 192 + uverbs, Type: "c"},
		{Path: "/dev/infiniband/rdma_cm", Major: 10, Minor: 58, Type: "c"}}}); err != nil {
		t.Fatal(err)
	}
}

// bundle writes a config.json as Docker would for a container in its own
// network namespace, with env, and the engine's record of the container.
func (w *world) bundle(t *testing.T, env ...string) (string, []byte) {
	t.Helper()
	b := filepath.Join(w.dir, "bundle")
	cdir := filepath.Join(w.dir, "containers", cid)
	for _, d := range []string{b, cdir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rec := map[string]any{"ID": cid, "NetworkSettings": map[string]any{"Networks": map[string]any{}}}
	for name, id := range w.record {
		rec["NetworkSettings"].(map[string]any)["Networks"].(map[string]any)[name] = map[string]string{"NetworkID": id, "EndpointID": ""}
	}
	raw, _ := json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(cdir, "config.v2.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	spec := specs.Spec{Version: "1.0.2", Process: &specs.Process{Args: []string{"sh", "-c", "echo hi"}, Env: append([]string{"PATH=/bin"}, env...),
		Capabilities: &specs.LinuxCapabilities{Bounding: []string{"CAP_CHOWN"}, Effective: []string{"CAP_CHOWN"}, Permitted: []string{"CAP_CHOWN"}}},
		Root: &specs.Root{Path: "rootfs"}, Hostname: "c",
		Mounts: []specs.Mount{{Destination: "/etc/hostname", Type: "bind", Source: filepath.Join(cdir, "hostname"), Options: []string{"rbind"}}},
		Linux:  &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace}}}}
	raw, _ = json.MarshalIndent(&spec, "", "\t")
	raw = append(raw, '\n')
	if err := os.WriteFile(filepath.Join(b, "config.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return b, raw
}

type execCall struct {
	argv0 string
	argv  []string
}

// run runs Main for a create of bundle; it returns the exec'ed command
// (nil when none), the exit status and stderr.
func (w *world) run(t *testing.T, bundle string, sysRoot string) (*execCall, int, string) {
	t.Helper()
	var stderr bytes.Buffer
	var got *execCall
	next := filepath.Join(w.dir, "runc")
	if err := os.WriteFile(next, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(w.dir, "rdma-exec")
	if err := os.WriteFile(helper, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sys := &Sys{Stderr: &stderr, Self: filepath.Join(w.dir, "rdma-macvlan-runtime"), SysRoot: sysRoot, Now: time.Now,
		Exec: func(argv0 string, argv, _ []string) error {
			got = &execCall{argv0, argv}
			return nil
		},
		Run: func(string, []string) (int, error) { return 0, nil }}
	args := append([]string{"--docker-host", "unix://" + w.engine, "--cdi-dir", w.cdi, "--next-runtime", next,
		"--plugin-socket", w.plugin, "--state-dir", filepath.Join(w.dir, "state")}, containerdArgs(bundle)...)
	code := Main(args, sys)
	if got != nil && (got.argv0 != next || !reflect.DeepEqual(got.argv[1:], containerdArgs(bundle))) {
		t.Errorf("exec %q %q, want %q with containerd's arguments %q", got.argv0, got.argv[1:], next, containerdArgs(bundle))
	}
	return got, code, stderr.String()
}

func readSpec(t *testing.T, bundle string) specs.Spec {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContainerOnNoRDMANetworkReachesRuncByteForByte(t *testing.T) {
	w := newWorld(t)
	w.rdmaNet(t, "n1", "roce", "mlx5_0", 0)
	// The container is on a user bridge and the default one, not on n1.
	w.record = map[string]string{"mybridge": "b1", "bridge": ""}
	w.networks["b1"] = EngineNetwork{ID: "b1", Name: "mybridge", Driver: "bridge"}
	for _, env := range [][]string{nil, {"RDMA_MACVLAN_DEVICES=auto"}} {
		b, raw := w.bundle(t, env...)
		got, code, stderr := w.run(t, b, "/nonexistent")
		if got == nil || code != 0 {
			t.Fatalf("not exec'ed: %d %s", code, stderr)
		}
		now, _ := os.ReadFile(filepath.Join(b, "config.json"))
		if !bytes.Equal(now, raw) {
			t.Errorf("config.json of a container on no rdma-macvlan network changed:\n%s", now)
		}
	}
	if len(w.asked) != 0 {
		t.Errorf("the engine was asked %q about networks whose IDs the record has", w.asked)
	}
	// A network it was never started on: its ID is asked, by name.
	w.record = map[string]string{"mybridge": ""}
	w.networks["mybridge"] = w.networks["b1"]
	b, _ := w.bundle(t)
	w.run(t, b, "/nonexistent")
	if !reflect.DeepEqual(w.asked, []string{"/networks/mybridge"}) {
		t.Errorf("asked %q, want the network's ID by name", w.asked)
	}
	// On the engine's own networks only: neither the plugin nor the
	// engine is asked.
	w.record = map[string]string{"none": ""}
	w.asked, w.briefs = nil, 0
	b, _ = w.bundle(t)
	w.run(t, b, "/nonexistent")
	if w.briefs != 0 || len(w.asked) != 0 {
		t.Errorf("--net none: %d requests to the plugin, %q to the engine", w.briefs, w.asked)
	}
	// No rdma-macvlan network at all: the engine is not asked.
	w.record = map[string]string{"mybridge": ""}
	b, _ = w.bundle(t)
	w.brief.Networks = nil
	w.asked = nil
	w.run(t, b, "/nonexistent")
	if len(w.asked) != 0 {
		t.Errorf("the engine was asked %q while the plugin has no network", w.asked)
	}
}

func TestNoneLeavesTheSpecAlone(t *testing.T) {
	w := newWorld(t)
	w.rdmaNet(t, "n1", "roce", "mlx5_0", 0)
	b, raw := w.bundle(t, "RDMA_MACVLAN_DEVICES=none")
	if got, code, stderr := w.run(t, b, "/nonexistent"); got == nil || code != 0 {
		t.Fatalf("not exec'ed: %s", stderr)
	}
	if now, _ := os.ReadFile(filepath.Join(b, "config.json")); !bytes.Equal(now, raw) {
		t.Errorf("RDMA_MACVLAN_DEVICES=none changed config.json")
	}
	if len(w.asked) != 0 {
		t.Errorf("none asked the engine %q", w.asked)
	}
}

func TestRDMAContainerGetsItsHCA(t *testing.T) {
	w := newWorld(t)
	w.rdmaNet(t, "n1", "roce", "mlx5_0", 0)
	w.rdmaNet(t, "n2", "other", "mlx5_1", 1)
	delete(w.record, "other") // not this container's
	b, _ := w.bundle(t)
	got, code, stderr := w.run(t, b, "/nonexistent")
	if got == nil || code != 0 {
		t.Fatalf("not exec'ed (%d): %s", code, stderr)
	}
	s := readSpec(t, b)
	var devs []string
	for _, d := range s.Linux.Devices {
		devs = append(devs, d.Path)
	}
	if want := []string{"/dev/infiniband/uverbs0", "/dev/infiniband/rdma_cm"}; !reflect.DeepEqual(devs, want) {
		t.Errorf("devices %q, want %q (its network's HCA only)", devs, want)
	}
	var memlock *specs.POSIXRlimit
	for i, r := range s.Process.Rlimits {
		if r.Type == "RLIMIT_MEMLOCK" {
			memlock = &s.Process.Rlimits[i]
		}
	}
	if memlock == nil || memlock.Hard != memlockUnlimited || memlock.Soft != memlockUnlimited {
		t.Errorf("memlock %+v, want unlimited", memlock)
	}
	c := s.Process.Capabilities
	for name, set := range map[string][]string{"bounding": c.Bounding, "effective": c.Effective, "permitted": c.Permitted} {
		if !slices.Contains(set, "CAP_IPC_LOCK") {
			t.Errorf("%s capabilities %q lack CAP_IPC_LOCK", name, set)
		}
	}
	wantArgs := []string{rdmaexec.ContainerPath, "--net", "name=roce,hca=mlx5_0,port=1,subnet=10.7.0.0/24,traffic_class=106",
		"--timeout", "7s", "--", "sh", "-c", "echo hi"}
	if !reflect.DeepEqual(s.Process.Args, wantArgs) {
		t.Errorf("args %q, want %q", s.Process.Args, wantArgs)
	}
	if !slices.ContainsFunc(s.Mounts, func(m specs.Mount) bool {
		return m.Destination == rdmaexec.ContainerPath && m.Source == filepath.Join(w.dir, "rdma-exec") && slices.Contains(m.Options, "ro")
	}) {
		t.Errorf("rdma-exec is not mounted read-only: %+v", s.Mounts)
	}
	if !slices.Contains(s.Process.Env, "RDMA_MACVLAN_DEVICE_mlx5_0=mlx5_0:1") {
		t.Errorf("the CDI device's variables are not in the env: %q", s.Process.Env)
	}
}

func TestOwnChoicesKept(t *testing.T) {
	w := newWorld(t)
	w.rdmaNet(t, "n1", "roce", "mlx5_0", 0)
	b, raw := w.bundle(t, "RDMA_MACVLAN_NO_WAIT=1", "RDMA_MACVLAN_IPC_LOCK=0", "RDMA_MACVLAN_RDMA_LIMIT=hca_handle=2,hca_object=100")
	var spec specs.Spec
	_ = json.Unmarshal(raw, &spec)
	spec.Process.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_MEMLOCK", Hard: 8 << 20, Soft: 4 << 20}}
	raw, _ = json.Marshal(&spec)
	_ = os.WriteFile(filepath.Join(b, "config.json"), raw, 0o600)
	if got, code, stderr := w.run(t, b, "/nonexistent"); got == nil || code != 0 {
		t.Fatalf("not exec'ed: %s", stderr)
	}
	s := readSpec(t, b)
	if want := []specs.POSIXRlimit{{Type: "RLIMIT_MEMLOCK", Hard: 8 << 20, Soft: 4 << 20}}; !reflect.DeepEqual(s.Process.Rlimits, want) {
		t.Errorf("rlimits %+v, want the container's own %+v", s.Process.Rlimits, want)
	}
	if slices.Contains(s.Process.Capabilities.Bounding, "CAP_IPC_LOCK") {
		t.Errorf("RDMA_MACVLAN_IPC_LOCK=0 still added CAP_IPC_LOCK")
	}
	if !reflect.DeepEqual(s.Process.Args, []string{"sh", "-c", "echo hi"}) {
		t.Errorf("RDMA_MACVLAN_NO_WAIT=1: args %q", s.Process.Args)
	}
	r, ok := s.Linux.Resources.Rdma["mlx5_0"]
	if !ok || r.HcaHandles == nil || *r.HcaHandles != 2 || r.HcaObjects == nil || *r.HcaObjects != 100 {
		t.Errorf("rdma cgroup limits %+v", s.Linux.Resources.Rdma)
	}
}

func TestDevicesList(t *testing.T) {
	w := newWorld(t)
	w.rdmaNet(t, "n1", "roce", "mlx5_0", 0)
	w.rdmaNet(t, "n2", "other", "mlx5_1", 1)
	delete(w.record, "other")
	b, _ := w.bundle(t, "RDMA_MACVLAN_DEVICES=rdma-macvlan/hca=mlx5_1", "RDMA_MACVLAN_NO_WAIT=1")
	if got, code, stderr := w.run(t, b, "/nonexistent"); got == nil || code != 0 {
		t.Fatalf("not exec'ed: %s", stderr)
	}
	s := readSpec(t, b)
	if len(s.Linux.Devices) != 2 || s.Linux.Devices[0].Path != "/dev/infiniband/uverbs1" {
		t.Errorf("devices %+v, want mlx5_1's as the list names", s.Linux.Devices)
	}
	b, raw := w.bundle(t, "RDMA_MACVLAN_DEVICES=mlx5_9")
	got, code, stderr := w.run(t, b, "/nonexistent")
	if got != nil || code == 0 || !strings.Contains(stderr, `RDMA_MACVLAN_DEVICES names "mlx5_9", which no rdma-macvlan network serves (served: mlx5_0, mlx5_1)`) {
		t.Errorf("an unknown name: exec %v, status %d, %s", got, code, stderr)
	}
	if now, _ := os.ReadFile(filepath.Join(b, "config.json")); !bytes.Equal(now, raw) {
		t.Errorf("a refused create changed config.json")
	}
	// The message lands in runc's JSON log, where containerd finds it.
	log, _ := os.ReadFile(filepath.Join(b, "log.json"))
	var entry map[string]string
	if err := json.Unmarshal(bytes.TrimSpace(log), &entry); err != nil || entry["level"] != "error" || !strings.Contains(entry["msg"], "mlx5_9") {
		t.Errorf("log.json %q: %v", log, err)
	}
}

func TestBadVariablesNamed(t *testing.T) {
	for _, v := range []string{"RDMA_MACVLAN_NO_WAIT=maybe", "RDMA_MACVLAN_GID_TIMEOUT=soon", "RDMA_MACVLAN_ROCE_VERSION=3",
		"RDMA_MACVLAN_SYSFS=all", "RDMA_MACVLAN_RDMA_LIMIT=hca_handle=-1", "RDMA_MACVLAN_RDMA_LIMIT=handles=2", "RDMA_MACVLAN_DEVICES=,"} {
		if _, err := ParseChoice([]string{v}); err == nil || !strings.Contains(err.Error(), strings.SplitN(v, "=", 2)[0]) {
			t.Errorf("%s: %v", v, err)
		}
	}
}

func TestEngineOrPluginTroubleFailsOnlyRDMAContainers(t *testing.T) {
	w := newWorld(t)
	w.rdmaNet(t, "n1", "roce", "mlx5_0", 0)
	w.engineDown = true
	b, _ := w.bundle(t)
	// The record has the ID: the engine is not needed (dockerd starting
	// up serves no API while it restarts containers).
	if got, code, stderr := w.run(t, b, "/nonexistent"); got == nil || code != 0 {
		t.Errorf("engine down, network ID recorded: %d %s", code, stderr)
	}
	w.record["roce"] = ""
	b, _ = w.bundle(t)
	got, code, stderr := w.run(t, b, "/nonexistent")
	if got != nil || code == 0 || !strings.Contains(stderr, "network roce: the engine did not give its ID") {
		t.Errorf("engine down, ID not recorded: exec %v status %d %s", got, code, stderr)
	}
	// The plugin lost the network's HCA: refused with the plugin's reason.
	w.engineDown = false
	w.brief.Networks[0].HCA = ""
	w.brief.Networks[0].Problems = []string{"its HCA mlx5_0 is gone"}
	got, code, stderr = w.run(t, b, "/nonexistent")
	if got != nil || code == 0 || !strings.Contains(stderr, "network roce: its HCA mlx5_0 is gone") {
		t.Errorf("no HCA: exec %v status %d %s", got, code, stderr)
	}
	// A legacy plugin socket that does not answer: a container on a
	// network of its driver fails, one on another network starts.
	w2 := newWorld(t)
	dead := filepath.Join(w2.dir, "plugins", "rdma-macvlan.sock")
	_ = os.MkdirAll(filepath.Dir(dead), 0o755)
	_ = os.WriteFile(dead, nil, 0o600)
	w2.plugin = dead
	w2.networks["n1"] = EngineNetwork{ID: "n1", Name: "roce", Driver: "rdma-macvlan"}
	w2.networks["b1"] = EngineNetwork{ID: "b1", Name: "mybridge", Driver: "bridge"}
	w2.record = map[string]string{"mybridge": "b1"}
	b, _ = w2.bundle(t)
	if got, code, stderr := w2.run(t, b, "/nonexistent"); got == nil || code != 0 {
		t.Errorf("dead plugin, container on no network of it: %d %s", code, stderr)
	}
	w2.record["roce"] = "n1"
	b, _ = w2.bundle(t)
	got, code, stderr = w2.run(t, b, "/nonexistent")
	if got != nil || code == 0 || !strings.Contains(stderr, "network roce: its rdma-macvlan plugin (rdma-macvlan) does not answer at "+dead) {
		t.Errorf("dead plugin, container on its network: exec %v status %d %s", got, code, stderr)
	}
}

func TestSysfsViewAndItsRemoval(t *testing.T) {
	w := newWorld(t)
	w.rdmaNet(t, "n1", "roce", "mlx5_0", 0)
	sys := filepath.Join(w.dir, "sys-root")
	class := filepath.Join(sys, "sys/class")
	for _, l := range [][2]string{
		{"infiniband/mlx5_0", "../../devices/pci0000:00/0000:00:02.0/infiniband/mlx5_0"},
		{"infiniband/mlx5_1", "../../devices/pci0000:00/0000:00:03.0/infiniband/mlx5_1"},
	} {
		_ = os.MkdirAll(filepath.Join(class, filepath.Dir(l[0])), 0o755)
		_ = os.Symlink(l[1], filepath.Join(class, l[0]))
	}
	for i, hca := range []string{"mlx5_0", "mlx5_1"} {
		dev := filepath.Join(sys, "sys/devices/uv", hca)
		_ = os.MkdirAll(dev, 0o755)
		_ = os.WriteFile(filepath.Join(dev, "ibdev"), []byte(hca+"\n"), 0o644)
		_ = os.MkdirAll(filepath.Join(class, "infiniband_verbs"), 0o755)
		_ = os.Symlink(dev, filepath.Join(class, "infiniband_verbs", "uverbs"+string(rune('0'+i))))
	}
	_ = os.WriteFile(filepath.Join(class, "infiniband_verbs/abi_version"), []byte("6\n"), 0o644)
	b, _ := w.bundle(t)
	if got, code, stderr := w.run(t, b, sys); got == nil || code != 0 {
		t.Fatalf("not exec'ed: %s", stderr)
	}
	s := readSpec(t, b)
	var view string
	for _, m := range s.Mounts {
		if m.Destination == "/sys/class/infiniband" {
			view = filepath.Dir(m.Source)
		}
	}
	if view == "" {
		t.Fatalf("no view mounted: %+v", s.Mounts)
	}
	if got := names(t, filepath.Join(view, "infiniband")); !reflect.DeepEqual(got, []string{"mlx5_0"}) {
		t.Errorf("view's infiniband %q, want mlx5_0 only", got)
	}
	if got := names(t, filepath.Join(view, "infiniband_verbs")); !reflect.DeepEqual(got, []string{"abi_version", "uverbs0"}) {
		t.Errorf("view's infiniband_verbs %q", got)
	}
	if t1, _ := os.Readlink(filepath.Join(view, "infiniband/mlx5_0")); t1 != "../../devices/pci0000:00/0000:00:02.0/infiniband/mlx5_0" {
		t.Errorf("link %q is not the host's", t1)
	}
	// RDMA_MACVLAN_SYSFS=host: none.
	b2, _ := w.bundle(t, "RDMA_MACVLAN_SYSFS=host")
	w.run(t, b2, sys)
	if slices.ContainsFunc(readSpec(t, b2).Mounts, func(m specs.Mount) bool { return strings.HasPrefix(m.Destination, "/sys/") }) {
		t.Errorf("RDMA_MACVLAN_SYSFS=host still mounted a view")
	}
	// delete removes it once the next runtime has no such container;
	// a failed delete (a running container) keeps it.
	runcRoot := "/run/x/runtime-runc/moby"
	inv := func(status int) int {
		sys := &Sys{Stderr: &bytes.Buffer{}, Now: time.Now, Run: func(string, []string) (int, error) { return status, nil }}
		return Main([]string{"--next-runtime", "/bin/true", "--state-dir", filepath.Join(w.dir, "state"), "--root", runcRoot, "delete", cid}, sys)
	}
	if inv(1); !exists(view) {
		t.Errorf("a failed delete removed the view")
	}
	if code := inv(0); code != 0 || exists(view) {
		t.Errorf("delete: status %d, view still there: %v", code, exists(view))
	}
	// A crash left one behind: the next start sweeps it once it is old.
	stale := filepath.Join(filepath.Dir(view), "crashed")
	_ = os.MkdirAll(stale, 0o755)
	Sweep(filepath.Dir(view), runcRoot, time.Now())
	if !exists(stale) {
		t.Errorf("a fresh view (a create in progress) was swept")
	}
	Sweep(filepath.Dir(view), runcRoot, time.Now().Add(2*sweepAge))
	if exists(stale) {
		t.Errorf("a crashed container's view was not swept")
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestPassThrough(t *testing.T) {
	var got *execCall
	sys := &Sys{Stderr: &bytes.Buffer{}, Now: time.Now, Exec: func(argv0 string, argv, _ []string) error {
		got = &execCall{argv0, argv}
		return nil
	}}
	for _, args := range [][]string{{"--version"}, {"features"}, {"--root", "/r", "start", cid}, {"--root", "/r", "exec", "--process", "/p.json", cid}} {
		got = nil
		Main(append([]string{"--next-runtime", "/bin/true"}, args...), sys)
		if got == nil || !reflect.DeepEqual(got.argv[1:], args) {
			t.Errorf("%q: exec %+v", args, got)
		}
	}
	if code := Main([]string{"--next-runtime", "/nonexistent/runc", "start", cid}, sys); code == 0 {
		t.Errorf("a missing next runtime: status 0")
	}
}

// TestExecGetsTheCreatesCapAndMemlock: docker exec's processes in an RDMA
// container get the CAP_IPC_LOCK and memlock its create got (without the
// capability they could not even read PID 1's environ); an exec in another
// container is not touched.
func TestExecGetsTheCreatesCapAndMemlock(t *testing.T) {
	w := newWorld(t)
	w.rdmaNet(t, "n1", "roce", "mlx5_0", 0)
	b, _ := w.bundle(t)
	if got, code, stderr := w.run(t, b, "/nonexistent"); got == nil || code != 0 {
		t.Fatalf("create: %s", stderr)
	}
	proc := filepath.Join(w.dir, "process.json")
	raw, _ := json.Marshal(specs.Process{Args: []string{"sh"}, Capabilities: &specs.LinuxCapabilities{
		Bounding: []string{"CAP_CHOWN"}, Effective: []string{"CAP_CHOWN"}, Permitted: []string{"CAP_CHOWN"}}})
	exec := func(id string) {
		t.Helper()
		_ = os.WriteFile(proc, raw, 0o600)
		sys := &Sys{Stderr: &bytes.Buffer{}, Now: time.Now, Exec: func(string, []string, []string) error { return nil }}
		if code := Main([]string{"--next-runtime", "/bin/true", "--state-dir", filepath.Join(w.dir, "state"), "--root", "/run/x/runtime-runc/moby",
			"exec", "--process", proc, "--detach", "--pid-file", "/p.pid", id}, sys); code != 0 {
			t.Fatalf("exec: status %d: %s", code, sys.Stderr)
		}
	}
	exec(cid)
	var p specs.Process
	now, _ := os.ReadFile(proc)
	if err := json.Unmarshal(now, &p); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Capabilities.Effective, "CAP_IPC_LOCK") || !slices.Contains(p.Capabilities.Permitted, "CAP_IPC_LOCK") {
		t.Errorf("exec's capabilities %+v lack CAP_IPC_LOCK", p.Capabilities)
	}
	if want := []specs.POSIXRlimit{{Type: "RLIMIT_MEMLOCK", Hard: memlockUnlimited, Soft: memlockUnlimited}}; !reflect.DeepEqual(p.Rlimits, want) {
		t.Errorf("exec's rlimits %+v, want %+v", p.Rlimits, want)
	}
	exec("another")
	if now, _ := os.ReadFile(proc); !bytes.Equal(now, raw) {
		t.Errorf("an exec in a container the runtime did not change was rewritten: %s", now)
	}
}

// TestBadVariableOnlyForRDMAContainers: an invalid RDMA_MACVLAN_* value
// (from an image, say) stops a container on an rdma-macvlan network, with
// its name, and no other container.
func TestBadVariableOnlyForRDMAContainers(t *testing.T) {
	w := newWorld(t)
	w.rdmaNet(t, "n1", "roce", "mlx5_0", 0)
	b, _ := w.bundle(t, "RDMA_MACVLAN_IPC_LOCK=off")
	if got, code, stderr := w.run(t, b, "/nonexistent"); got != nil || code == 0 || !strings.Contains(stderr, "RDMA_MACVLAN_IPC_LOCK") {
		t.Errorf("an RDMA container with a bad variable: exec %v status %d %s", got, code, stderr)
	}
	w.record = map[string]string{"none": ""}
	b, raw := w.bundle(t, "RDMA_MACVLAN_IPC_LOCK=off")
	if got, code, stderr := w.run(t, b, "/nonexistent"); got == nil || code != 0 {
		t.Errorf("a --net none container with a bad variable did not start: %d %s", code, stderr)
	}
	if now, _ := os.ReadFile(filepath.Join(b, "config.json")); !bytes.Equal(now, raw) {
		t.Errorf("config.json changed")
	}
}
