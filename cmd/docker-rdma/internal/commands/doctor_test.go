package commands

import (
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// healthyStatus is testdata/status.json without its second network (whose
// port is down).
func healthyStatus(t *testing.T) []byte {
	var st map[string][]any
	if err := json.Unmarshal(readFixture(t, "status.json"), &st); err != nil {
		t.Fatal(err)
	}
	st["networks"] = st["networks"][:1]
	b, _ := json.Marshal(st)
	return b
}

// mknodAll creates the device nodes of the mlx5 fixture under the world's
// DevRoot; it skips the test when this user cannot make device nodes.
func mknodAll(t *testing.T, w *world, mode uint32) {
	t.Helper()
	dir := filepath.Join(w.env.DevRoot, "dev/infiniband")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []struct {
		name         string
		major, minor uint32
	}{{"uverbs0", 231, 192}, {"rdma_cm", 10, 57}} {
		p := filepath.Join(dir, n.name)
		if err := unix.Mknod(p, unix.S_IFCHR|mode, int(unix.Mkdev(n.major, n.minor))); err != nil {
			if errors.Is(err, unix.EPERM) {
				t.Skipf("cannot make device nodes here: %v", err)
			}
			t.Fatal(err)
		}
		if err := os.Chmod(p, os.FileMode(mode)); err != nil {
			t.Fatal(err)
		}
	}
}

// doctorWorld is an engine with the plugin (its daemon answering with a
// healthy status) and an mlx5 host built with o.
func doctorWorld(t *testing.T, o rdmatest.MLX5Options) (*world, string) {
	w := newWorld(t)
	w.info("20.10.24")
	w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"sysfs": "/sys", "cdi": "/var/run/cdi"})
	w.daemon(pluginID, healthyStatus(t))
	w.network("roce", netRoce, "rdma-macvlan:latest", map[string]string{"parent": "ens3np0"}, nil)
	return w, rdmatest.MLX5(t, o)
}

// checkOf returns the status and detail of the first check called name.
func checkOf(out doctorOutput, name string) (check, bool) {
	for _, c := range out.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return check{}, false
}

func runDoctor(t *testing.T, w *world, args ...string) (int, doctorOutput) {
	t.Helper()
	rc := w.run(append([]string{"doctor", "--format", "json"}, args...)...)
	var out doctorOutput
	if err := json.Unmarshal(w.stdout.Bytes(), &out); err != nil {
		t.Fatalf("not JSON (status %d): %v\n%s\n%s", rc, err, w.stdout.String(), w.stderr.String())
	}
	return rc, out
}

func TestDoctorHealthyHost(t *testing.T) {
	w, root := doctorWorld(t, rdmatest.MLX5Options{HostIPv4: "10.0.0.1"})
	mknodAll(t, w, 0o666)
	rc := w.run("doctor", "--sysfs-root", root)
	t.Logf("\n%s", w.stdout.String())
	if rc != 0 {
		t.Fatalf("status %d for a healthy host:\n%s", rc, w.stdout.String())
	}
	out := w.stdout.String()
	for _, s := range []string{
		"OK    docker",
		"OK    plugin",
		"managed plugin rdma-macvlan:latest (id 9f1e2d3c4b5a) is enabled",
		"plugin rdma-macvlan:latest reads sysfs from /sys; the checks below read " + root + "/sys",
		"answers on ",
		"1 network(s), 2 endpoint(s), 1 RDMA-ready",
		"OK    netns mode",
		"shared (from sysfs)",
		"OK    netns mode at boot",
		"shared after a reboot too (set by: kernel default)",
		"OK    port mlx5_0/1",
		"ACTIVE LinkUp Ethernet, netdev ens3np0",
		"OK    GIDs mlx5_0/1",
		"[#.........] 4/255 used, room for 125 more IPv4 container(s) (2 entries each)",
		"OK    devices mlx5_0",
		"/dev/infiniband/uverbs0 231:192, /dev/infiniband/rdma_cm 10:57",
		"INFO  CDI",
		"does not resolve CDI devices",
		"INFO  memlock",
		"not measured (pass --image IMAGE",
		"WARN  network roce",
		"is not RDMA-ready: waiting for the kernel",
		"nothing blocks RDMA; 1 warning(s)",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("doctor does not say %q", s)
		}
	}
}

func TestDoctorFindsProblems(t *testing.T) {
	tests := []struct {
		name   string
		opts   rdmatest.MLX5Options
		nodes  bool
		setup  func(t *testing.T, w *world, root string) string // returns the sysfs root to use
		args   []string
		check  string
		status string
		detail string
		fix    string
	}{
		{
			name: "exclusive netns mode", opts: rdmatest.MLX5Options{NetnsMode: "exclusive"}, nodes: true,
			check: "netns mode", status: statusFail, detail: "exclusive (from sysfs)", fix: "rdma system set netns shared",
		},
		{
			name: "exclusive netns mode, booted shared", opts: rdmatest.MLX5Options{NetnsMode: "exclusive"}, nodes: true,
			check: "netns mode at boot", status: statusInfo, detail: "a reboot starts shared (set by: kernel default)",
		},
		{
			name: "shared now, exclusive after a reboot", nodes: true,
			setup: func(t *testing.T, w *world, root string) string {
				writeFile(t, filepath.Join(root, "etc/modprobe.d/ib_core.conf"), "options ib_core netns_mode=0\n")
				return root
			},
			check: "netns mode at boot", status: statusWarn,
			detail: "shared now, but the next boot starts exclusive (set by: /etc/modprobe.d/ib_core.conf:1)",
			fix:    "options ib_core netns_mode=1 in /etc/modprobe.d/ib_core.conf",
		},
		{
			name: "exclusive now and at boot", opts: rdmatest.MLX5Options{NetnsMode: "exclusive"}, nodes: true,
			setup: func(t *testing.T, w *world, root string) string {
				writeFile(t, filepath.Join(root, "proc/cmdline"), "root=/dev/vda ib_core.netns_mode=N\n")
				return root
			},
			check: "netns mode at boot", status: statusInfo, detail: "exclusive at boot too (set by: /proc/cmdline (ib_core.netns_mode=N))",
			fix: "options ib_core netns_mode=1",
		},
		{
			name: "port down", opts: rdmatest.MLX5Options{State: "DOWN"}, nodes: true,
			check: "RDMA ports", status: statusFail, detail: "no active RoCE (Ethernet) port", fix: "ip link set",
		},
		{
			name: "InfiniBand port", opts: rdmatest.MLX5Options{LinkLayer: "InfiniBand"}, nodes: true,
			check: "RDMA ports", status: statusFail, detail: "no active RoCE",
		},
		{
			name: "GID table full", opts: rdmatest.MLX5Options{TableSize: 6, HostIPv4: "10.0.0.1", Extra: rdmatest.Pair(4, rdmatest.IPv4GID("10.0.0.2"), "eth0")}, nodes: true,
			check: "GIDs mlx5_0/1", status: statusFail, detail: "[##########] 6/6 used, room for 0 more", fix: "remove stopped containers",
		},
		{
			name: "GID table nearly full", opts: rdmatest.MLX5Options{TableSize: 20, HostIPv4: "10.0.0.1", Extra: pairs(4, 7)}, nodes: true,
			check: "GIDs mlx5_0/1", status: statusWarn, detail: "18/20 used, room for 1 more",
		},
		{
			name: "no device nodes", nodes: false,
			check: "devices mlx5_0", status: statusFail, detail: "/dev/infiniband/uverbs0 (231:192) missing", fix: "mknod -m 666 /dev/infiniband/uverbs0 c 231 192",
		},
		{
			name: "no rdma_cm", opts: rdmatest.MLX5Options{NoRdmaCM: true}, nodes: true,
			check: "rdma_cm", status: statusWarn, detail: "rdma_cm is not registered", fix: "modprobe rdma_ucm",
		},
		{
			name: "no RDMA stack", nodes: true,
			setup: func(t *testing.T, w *world, root string) string { return t.TempDir() },
			check: "RDMA devices", status: statusFail, detail: "is ib_core loaded?",
		},
		{
			name: "no plugin", nodes: true,
			setup: func(t *testing.T, w *world, root string) string {
				w.plugins = nil
				w.setPlugins()
				return root
			},
			check: "plugin", status: statusFail, detail: "no rdma-macvlan plugin", fix: "docker plugin install",
		},
		{
			name: "plugin disabled", nodes: true,
			setup: func(t *testing.T, w *world, root string) string {
				w.plugins = nil
				w.plugin("rdma-macvlan:latest", pluginID, false, nil)
				return root
			},
			check: "plugin", status: statusFail, detail: "is disabled", fix: "docker plugin enable rdma-macvlan:latest",
		},
		{
			name: "daemon not answering", nodes: true,
			setup: func(t *testing.T, w *world, root string) string {
				w.plugins = nil
				w.plugin("rdma-macvlan:latest", "deadbeef", true, nil)
				return root
			},
			check: "daemon", status: statusFail, detail: "does not exist",
		},
		{
			name: "CDI specs where the engine does not look", nodes: true,
			setup: func(t *testing.T, w *world, root string) string {
				w.info("28.2.2", "/etc/cdi", "/var/run/cdi")
				w.plugins = nil
				w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"cdi": "/srv/cdi"})
				return root
			},
			check: "CDI", status: statusOK, detail: "the engine reads CDI specs from /etc/cdi, /var/run/cdi",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, root := doctorWorld(t, tt.opts)
			if tt.nodes {
				mknodAll(t, w, 0o666)
			}
			if tt.setup != nil {
				root = tt.setup(t, w, root)
			}
			rc, out := runDoctor(t, w, append([]string{"--sysfs-root", root}, tt.args...)...)
			c, ok := checkOf(out, tt.check)
			if !ok {
				t.Fatalf("no check %q in %+v", tt.check, out.Checks)
			}
			if c.Status != tt.status || !strings.Contains(c.Detail, tt.detail) || !strings.Contains(c.Fix, tt.fix) {
				t.Errorf("check %s = %+v\nwant status %s, detail ~%q, fix ~%q", tt.check, c, tt.status, tt.detail, tt.fix)
			}
			wantRC := 0
			if out.Failures > 0 {
				wantRC = 1
			}
			if rc != wantRC || out.OK != (rc == 0) {
				t.Errorf("status %d, ok %v with %d failures", rc, out.OK, out.Failures)
			}
			if tt.status == statusFail && rc == 0 {
				t.Errorf("a blocking problem and status 0")
			}
		})
	}
}

// pairs returns n v1/v2 pairs of container addresses from index on.
func pairs(index, n int) []rdmatest.Entry {
	var e []rdmatest.Entry
	for i := 0; i < n; i++ {
		e = append(e, rdmatest.Pair(index+2*i, rdmatest.IPv4GID("10.1.0."+strconv.Itoa(i+2)), "eth0")...)
	}
	return e
}

func TestDoctorCDIMismatch(t *testing.T) {
	w, root := doctorWorld(t, rdmatest.MLX5Options{})
	mknodAll(t, w, 0o666)
	w.info("28.2.2", "/etc/cdi", "/var/run/cdi")
	w.plugins = nil
	w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"cdi": "/srv/cdi"})
	_, out := runDoctor(t, w, "--sysfs-root", root)
	var found bool
	for _, c := range out.Checks {
		if c.Name == "CDI" && c.Status == statusWarn && strings.Contains(c.Detail, "writes its CDI specs to /srv/cdi, which the engine does not read") &&
			strings.Contains(c.Fix, "docker plugin set rdma-macvlan:latest cdi.source=/etc/cdi") {
			found = true
		}
	}
	if !found {
		t.Errorf("no CDI warning in %+v", out.Checks)
	}
}

func TestDoctorNodePermissions(t *testing.T) {
	w, root := doctorWorld(t, rdmatest.MLX5Options{})
	mknodAll(t, w, 0o600)
	_, out := runDoctor(t, w, "--sysfs-root", root)
	c, _ := checkOf(out, "devices mlx5_0")
	if c.Status != statusWarn || !strings.Contains(c.Detail, "only root in a container can open it") {
		t.Errorf("devices check = %+v", c)
	}
}

func TestDoctorMemlock(t *testing.T) {
	limits := "Limit                     Soft Limit           Hard Limit           Units\nMax locked memory         8388608              8388608              bytes\n"
	base := []string{"run", "--rm", "--pull", "never", "--network", "none", "--entrypoint", "cat"}
	refused := "docker: Error response from daemon: ... error setting rlimit type 8: operation not permitted: unknown.\n"
	t.Run("refused", func(t *testing.T) {
		w, root := doctorWorld(t, rdmatest.MLX5Options{})
		mknodAll(t, w, 0o666)
		w.docker.on(append(base, "--", "img", "/proc/self/limits"), limits, "", 0)
		w.docker.on(append(base, "--ulimit", "memlock=-1:-1", "--", "img", "/proc/self/limits"), "", refused, 126)
		rc, out := runDoctor(t, w, "--sysfs-root", root, "--image", "img")
		c, _ := checkOf(out, "memlock")
		if rc != 1 || c.Status != statusFail || !strings.Contains(c.Detail, "containers get 8388608:8388608 by default; the engine refuses memlock=-1:-1") ||
			!strings.Contains(c.Fix, "LimitMEMLOCK=infinity") {
			t.Errorf("status %d, memlock check %+v", rc, c)
		}
	})
	t.Run("accepted", func(t *testing.T) {
		w, root := doctorWorld(t, rdmatest.MLX5Options{})
		mknodAll(t, w, 0o666)
		w.docker.on(append(base, "--", "img", "/proc/self/limits"), limits, "", 0)
		w.docker.on(append(base, "--ulimit", "memlock=4194304:8388608", "--", "img", "/proc/self/limits"),
			strings.Replace(limits, "8388608              8388608", "4194304              8388608", 1), "", 0)
		rc, out := runDoctor(t, w, "--sysfs-root", root, "--image", "img", "--memlock", "4M:8M")
		c, _ := checkOf(out, "memlock")
		if rc != 0 || c.Status != statusOK || !strings.Contains(c.Detail, "memlock=4194304:8388608 is accepted (gives 4194304:8388608)") {
			t.Errorf("status %d, memlock check %+v", rc, c)
		}
	})
}

func TestDoctorWithoutDocker(t *testing.T) {
	w := newWorld(t)
	w.docker.on([]string{"info", "--format", "{{json .}}"}, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n", 1)
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	rc, out := runDoctor(t, w, "--sysfs-root", root)
	c, _ := checkOf(out, "docker")
	if rc != 1 || c.Status != statusFail || !strings.Contains(c.Detail, "Cannot connect to the Docker daemon") {
		t.Errorf("status %d, docker check %+v", rc, c)
	}
	if _, ok := checkOf(out, "port mlx5_0/1"); !ok {
		t.Errorf("host checks skipped without Docker: %+v", out.Checks)
	}
}

// TestDoctorImageIsNotAFlag: --image takes an image name; a value that
// docker run would read as a flag (or split) is refused before anything
// runs, and the image is passed after "--" in any case.
func TestDoctorImageIsNotAFlag(t *testing.T) {
	for _, img := range []string{"--privileged", "-v/:/host", "img --privileged", "img\n"} {
		w, root := doctorWorld(t, rdmatest.MLX5Options{})
		rc := w.run("doctor", "--sysfs-root", root, "--image", img)
		if rc != exitUsage || !strings.Contains(w.stderr.String(), "is not an image name") {
			t.Errorf("--image %q: status %d, stderr %q", img, rc, w.stderr.String())
		}
		for _, c := range w.docker.calls() {
			if len(c) > 0 && c[0] == "run" {
				t.Errorf("--image %q: docker %q was run", img, c)
			}
		}
	}
}

// fakeMounts answers Env.MountSource for a few host paths: dirs on a disk,
// dirs on a tmpfs, a file, and nothing else exists.
type fakeMounts struct{ disk, tmpfs, files map[string]bool }

func (f fakeMounts) stat(t *testing.T) func(string) (fs.FileInfo, int64, error) {
	dir, err := os.Stat(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	return func(p string) (fs.FileInfo, int64, error) {
		switch {
		case f.disk[p]:
			return dir, 0xef53, nil // ext4
		case f.tmpfs[p]:
			return dir, tmpfsMagic, nil
		case f.files[p]:
			return fi, 0xef53, nil
		}
		return nil, 0, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
	}
}

// TestDoctorMountSources: a state or cdi source that is missing, not a
// directory, or on a tmpfs (which a reboot empties, after which Docker
// cannot enable the plugin and panics at start-up) fails, naming the path
// and the fix; sources on a disk pass.
func TestDoctorMountSources(t *testing.T) {
	disk := map[string]bool{"/var/lib/rdma-macvlan": true, "/etc/cdi": true, "/srv/state": true}
	for _, tc := range []struct {
		name, state, cdi string
		staleCDI         string // what Settings.Mounts still shows, if it lags
		enabled          bool
		want             map[string]string // check name -> status
		detail, fix      []string
	}{
		{name: "defaults on a disk", state: "/var/lib/rdma-macvlan", cdi: "/etc/cdi", enabled: true,
			want: map[string]string{"mount state": statusOK, "mount cdi": statusOK}},
		{name: "cdi on the tmpfs of v0.1.0's default", state: "/var/lib/rdma-macvlan", cdi: "/var/run/cdi", enabled: true,
			want:   map[string]string{"mount state": statusOK, "mount cdi": statusFail},
			detail: []string{"/var/run/cdi, on a tmpfs that a reboot empties", "panics"},
			fix:    []string{"mkdir -p /etc/cdi && docker plugin disable -f rdma-macvlan:latest && docker plugin set rdma-macvlan:latest cdi.source=/etc/cdi && docker plugin enable rdma-macvlan:latest"}},
		{name: "set after an upgrade: Config.Mounts counts, not the stale Settings", state: "/var/lib/rdma-macvlan", cdi: "/var/run/cdi", staleCDI: "/etc/cdi", enabled: true,
			want:   map[string]string{"mount state": statusOK, "mount cdi": statusFail},
			detail: []string{"/var/run/cdi, on a tmpfs"}},
		{name: "missing cdi under /run", state: "/srv/state", cdi: "/run/cdi", enabled: false,
			want:   map[string]string{"mount state": statusOK, "mount cdi": statusFail},
			detail: []string{"/run/cdi, which does not exist: Docker cannot enable the plugin"},
			fix:    []string{"mkdir -p /etc/cdi && docker plugin disable -f rdma-macvlan:latest && docker plugin set rdma-macvlan:latest cdi.source=/etc/cdi"}},
		{name: "missing state on a disk", state: "/srv/gone", cdi: "/etc/cdi", enabled: false,
			want:   map[string]string{"mount state": statusFail, "mount cdi": statusOK},
			detail: []string{"its networks and endpoints from /srv/gone, which does not exist"},
			fix:    []string{"mkdir -p /srv/gone && docker plugin enable rdma-macvlan:latest"}},
		{name: "state is a file", state: "/srv/file", cdi: "/etc/cdi", enabled: true,
			want:   map[string]string{"mount state": statusFail, "mount cdi": statusOK},
			detail: []string{"/srv/file, which is not a directory"},
			fix:    []string{"docker plugin set rdma-macvlan:latest state.source=/var/lib/rdma-macvlan"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.info("20.10.24")
			mounts := map[string]string{"state": tc.state, "sysfs": "/sys", "cdi": tc.cdi}
			stale := maps.Clone(mounts)
			if tc.staleCDI != "" {
				stale["cdi"] = tc.staleCDI
			}
			w.pluginStale("rdma-macvlan:latest", pluginID, tc.enabled, mounts, stale)
			w.daemon(pluginID, healthyStatus(t))
			w.env.MountSource = fakeMounts{disk: disk, tmpfs: map[string]bool{"/var/run/cdi": true}, files: map[string]bool{"/srv/file": true}}.stat(t)
			_, out := runDoctor(t, w, "--sysfs-root", rdmatest.MLX5(t, rdmatest.MLX5Options{}))
			var got []check
			for _, c := range out.Checks {
				if strings.HasPrefix(c.Name, "mount ") {
					got = append(got, c)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("mount checks %+v, want %v", got, tc.want)
			}
			for _, c := range got {
				if c.Status != tc.want[c.Name] {
					t.Errorf("%s: status %s, want %s (%s)", c.Name, c.Status, tc.want[c.Name], c.Detail)
				}
				if c.Status != statusFail {
					continue
				}
				if out.OK {
					t.Errorf("doctor says OK with %s failing", c.Name)
				}
				for _, s := range tc.detail {
					if !strings.Contains(c.Detail, s) {
						t.Errorf("%s: detail %q lacks %q", c.Name, c.Detail, s)
					}
				}
				for _, s := range tc.fix {
					if !strings.Contains(c.Fix, s) {
						t.Errorf("%s: fix %q lacks %q", c.Name, c.Fix, s)
					}
				}
			}
		})
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
