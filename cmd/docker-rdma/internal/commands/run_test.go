package commands

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

func TestRunDryRun(t *testing.T) {
	nodes := "--device /dev/infiniband/uverbs0 --device /dev/infiniband/rdma_cm"
	tests := []struct {
		name string
		cdi  bool // the engine reads CDI specs and has mlx5_0's
		args []string
		want string // the command after "<docker> run "
	}{
		{
			name: "engine without CDI gets device nodes",
			args: []string{"run", "--no-wait", "--dry-run", "-it", "--rm", "--network", "roce", "img", "sh"},
			want: nodes + " --cap-add IPC_LOCK --ulimit memlock=-1:-1 -it --rm --network roce img sh",
		},
		{
			name: "engine with CDI gets the CDI device",
			cdi:  true,
			args: []string{"run", "--no-wait", "--dry-run", "--net=roce", "img"},
			want: "--device rdma-macvlan/hca=mlx5_0 --cap-add IPC_LOCK --ulimit memlock=-1:-1 --net=roce img",
		},
		{
			name: "device-mode nodes on a CDI engine",
			cdi:  true,
			args: []string{"run", "--no-wait", "--dry-run", "--device-mode", "nodes", "--net", "roce", "img"},
			want: nodes + " --cap-add IPC_LOCK --ulimit memlock=-1:-1 --net roce img",
		},
		{
			name: "memlock, advanced network syntax, env and a command with flags",
			args: []string{"run", "--memlock", "8M", "--no-wait", "--dry-run", "-e", "A=b c", "--network", "name=roce,driver-opt=mtu=1400", "img", "sh", "-c", "echo $A"},
			want: nodes + ` --cap-add IPC_LOCK --ulimit memlock=8388608:8388608 -e 'A=b c' --network name=roce,driver-opt=mtu=1400 img sh -c 'echo $A'`,
		},
		{
			name: "the user's own ulimit memlock, device and cap-add are kept",
			args: []string{"run", "--no-wait", "--dry-run", "--ulimit", "memlock=65536:65536", "--device", "/dev/infiniband/uverbs0", "--cap-add=IPC_LOCK", "--net", "roce", "img"},
			want: "--device /dev/infiniband/rdma_cm --ulimit memlock=65536:65536 --device /dev/infiniband/uverbs0 --cap-add=IPC_LOCK --net roce img",
		},
		{
			name: "a non-RDMA network beside the RDMA one",
			args: []string{"run", "--no-wait", "--dry-run", "--network", "plain", "--network", "roce", "img"},
			want: nodes + " --cap-add IPC_LOCK --ulimit memlock=-1:-1 --network plain --network roce img",
		},
		{
			name: "two RDMA networks on two HCAs",
			args: []string{"run", "--no-wait", "--dry-run", "--network", "roce", "--network", "roce2", "img"},
			want: nodes + " --device /dev/infiniband/uverbs1 --cap-add IPC_LOCK --ulimit memlock=-1:-1 --network roce --network roce2 img",
		},
		{
			name: "the network by ID",
			args: []string{"run", "--no-wait", "--dry-run", "--network", netRoce, "--", "img", "--network", "x"},
			want: nodes + " --cap-add IPC_LOCK --ulimit memlock=-1:-1 --network " + netRoce + " -- img --network x",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w *world
			if tt.cdi {
				dir := t.TempDir()
				writeCDISpec(t, dir, "mlx5_0")
				w = standardWorld(t, dir)
			} else {
				w = standardWorld(t)
			}
			if rc := w.run(tt.args...); rc != 0 {
				t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
			}
			want := w.docker.path + " run " + tt.want + "\n"
			if got := w.stdout.String(); got != want {
				t.Errorf("dry run printed\n  %s\nwant\n  %s", got, want)
			}
			if c := w.docker.lastCall("run"); c != nil {
				t.Errorf("dry run ran docker run: %q", c)
			}
		})
	}
}

// TestRunGlobalOptions: the docker CLI runs a plugin as
// docker-rdma [GLOBAL OPTIONS] rdma ...; every docker call carries them.
func TestRunGlobalOptions(t *testing.T) {
	w := newWorld(t)
	global := []string{"--context", "lab", "-D"}
	w.docker.onFirst("--context", "", "fake docker: unexpected call", 98)
	w.docker.on(append(global, "info", "--format", "{{json .}}"), `{"Name":"testhost","ServerVersion":"20.10.24"}`, "", 0)
	w.docker.on(append(global, "network", "inspect", "--", "roce"), `[{"Name":"roce","Id":"`+netRoce+`","Driver":"rdma-macvlan:latest","Options":{"parent":"ens3np0"}}]`, "", 0)
	w.docker.on(append(global, "plugin", "ls", "--no-trunc", "--format", "{{.ID}}"), pluginID+"\n", "", 0)
	w.docker.on(append(global, "plugin", "inspect", pluginID), `[{"Id":"`+pluginID+`","Name":"rdma-macvlan:latest","Enabled":true,"Config":{"Entrypoint":["/rdma-macvlan"],"Interface":{"Types":["docker.networkdriver/1.0"],"Socket":"rdma-macvlan.sock"}}}]`, "", 0)
	w.daemon(pluginID, readFixture(t, "status.json"))
	if rc := w.run("--context", "lab", "-D", "rdma", "run", "--no-wait", "--dry-run", "--net", "roce", "img"); rc != 0 {
		t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
	}
	want := w.docker.path + " --context lab -D run --device /dev/infiniband/uverbs0 --device /dev/infiniband/rdma_cm --cap-add IPC_LOCK --ulimit memlock=-1:-1 --net roce img\n"
	if got := w.stdout.String(); got != want {
		t.Errorf("printed\n  %s\nwant\n  %s", got, want)
	}
	for _, c := range w.docker.calls() {
		if !reflect.DeepEqual(c[:len(global)], global) {
			t.Errorf("docker called without the global options: %q", c)
		}
	}
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(w *world)
		args  []string
		want  []string // substrings of stderr
	}{
		{name: "no network", args: []string{"run", "--rm", "img"}, want: []string{"no --network", "docker rdma ls"}},
		{name: "not an RDMA network", args: []string{"run", "--network", "plain", "img"}, want: []string{"network plain (driver bridge) is not rdma-macvlan", "docker network create -d rdma-macvlan"}},
		{name: "network mode", args: []string{"run", "--network", "container:x", "img"}, want: []string{`"container:x" is not rdma-macvlan`}},
		{name: "no such network", args: []string{"run", "--network", "nope", "img"}, want: []string{`network "nope"`, "docker network ls"}},
		{name: "no IMAGE", args: []string{"run", "--network", "roce"}, want: []string{"no IMAGE"}},
		{name: "bad memlock", args: []string{"run", "--memlock", "lots", "--network", "roce", "img"}, want: []string{"--memlock", "lots"}},
		{name: "flag without value", args: []string{"run", "--network"}, want: []string{"--network needs a value"}},
		{
			name: "plugin disabled",
			setup: func(w *world) {
				w.plugins = nil
				w.plugin("rdma-macvlan:latest", pluginID, false, nil)
			},
			args: []string{"run", "--network", "roce", "img"},
			want: []string{"disabled", "docker plugin enable rdma-macvlan:latest"},
		},
		{
			name: "plugin missing",
			setup: func(w *world) {
				w.plugins = nil
				w.setPlugins()
			},
			args: []string{"run", "--network", "roce", "img"},
			want: []string{"no rdma-macvlan plugin serves network driver rdma-macvlan:latest", "docker plugin install"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := standardWorld(t)
			if tt.setup != nil {
				tt.setup(w)
			}
			rc := w.run(tt.args...)
			t.Logf("stderr: %s", w.stderr.String())
			if rc != exitRunFailed {
				t.Errorf("status %d, want %d", rc, exitRunFailed)
			}
			for _, s := range tt.want {
				if !strings.Contains(w.stderr.String(), s) {
					t.Errorf("stderr does not say %q:\n%s", s, w.stderr.String())
				}
			}
			if c := w.docker.lastCall("run"); c != nil {
				t.Errorf("docker run ran: %q", c)
			}
		})
	}
}

func TestRunExecutesDocker(t *testing.T) {
	t.Run("exit status and arguments", func(t *testing.T) {
		w := standardWorld(t)
		w.docker.onFirst("run", "hello from the container\n", "", 7)
		rc := w.run("run", "--no-wait", "--rm", "--net", "roce", "img", "sh", "-c", "exit 7")
		if rc != 7 {
			t.Errorf("status %d, want docker's 7; stderr:\n%s", rc, w.stderr.String())
		}
		want := []string{"run", "--device", "/dev/infiniband/uverbs0", "--device", "/dev/infiniband/rdma_cm", "--cap-add", "IPC_LOCK",
			"--ulimit", "memlock=-1:-1", "--rm", "--net", "roce", "img", "sh", "-c", "exit 7"}
		if got := w.docker.lastCall("run"); !reflect.DeepEqual(got, want) {
			t.Errorf("docker ran with\n  %q\nwant\n  %q", got, want)
		}
		if w.stdout.String() != "hello from the container\n" {
			t.Errorf("stdout = %q", w.stdout.String())
		}
	})
	t.Run("memlock refused", func(t *testing.T) {
		w := standardWorld(t)
		msg := "docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error setting rlimits for ready process: error setting rlimit type 8: operation not permitted: unknown.\n"
		w.docker.onFirst("run", "", msg, 126)
		rc := w.run("run", "--no-wait", "--net", "roce", "img")
		if rc != 126 {
			t.Errorf("status %d, want docker's 126", rc)
		}
		for _, s := range []string{msg, "could not set the locked-memory limit memlock=-1:-1", "--memlock 8M", "LimitMEMLOCK=infinity"} {
			if !strings.Contains(w.stderr.String(), s) {
				t.Errorf("stderr does not say %q:\n%s", s, w.stderr.String())
			}
		}
	})
	t.Run("other failures are not blamed on memlock", func(t *testing.T) {
		w := standardWorld(t)
		w.docker.onFirst("run", "", "docker: Error response from daemon: No such image: img.\n", 125)
		if rc := w.run("run", "--no-wait", "--net", "roce", "img"); rc != 125 {
			t.Errorf("status %d, want 125", rc)
		}
		if strings.Contains(w.stderr.String(), "locked-memory") {
			t.Errorf("blamed memlock:\n%s", w.stderr.String())
		}
	})
}

// TestRunWithoutDaemon: when the daemon's socket cannot be read, the
// devices come from sysfs (the plugin's sysfs mount) or the CDI spec.
func TestRunWithoutDaemon(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{Netdev: "ens3np0", Uverbs: 2, RdmaCM: "10:58"})
	t.Run("sysfs", func(t *testing.T) {
		w := newWorld(t)
		w.info("20.10.24")
		// Enabled, but its socket is not there (as for a user who cannot
		// reach it).
		w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"sysfs": filepath.Join(root, "sys"), "cdi": t.TempDir()})
		w.network("roce", netRoce, "rdma-macvlan:latest", map[string]string{"parent": "ens3np0"}, nil)
		if rc := w.run("run", "--no-wait", "--dry-run", "--net", "roce", "img"); rc != 0 {
			t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
		}
		want := " run --device /dev/infiniband/uverbs2 --device /dev/infiniband/rdma_cm --cap-add IPC_LOCK"
		if !strings.Contains(w.stdout.String(), want) {
			t.Errorf("printed %q, want %q", w.stdout.String(), want)
		}
	})
	for _, parent := range []string{"ens3np0.10", "ens3np0.10.20"} { // a VLAN, and a VLAN on it (QinQ)
		t.Run("VLAN parent "+parent, func(t *testing.T) {
			w := newWorld(t)
			w.info("20.10.24")
			w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"sysfs": filepath.Join(root, "sys")})
			w.network("roce", netRoce, "rdma-macvlan:latest", map[string]string{"parent": parent}, nil)
			if rc := w.run("run", "--no-wait", "--dry-run", "--net", "roce", "img"); rc != 0 {
				t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
			}
			if !strings.Contains(w.stdout.String(), "--device /dev/infiniband/uverbs2") {
				t.Errorf("printed %q", w.stdout.String())
			}
		})
	}
	t.Run("CDI spec", func(t *testing.T) {
		cdi := t.TempDir()
		writeCDISpec(t, cdi, "mlx5_7")
		w := newWorld(t)
		w.info("28.2.2", cdi)
		w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"sysfs": "/nonexistent/sys", "cdi": cdi})
		w.network("roce", netRoce, "rdma-macvlan:latest", map[string]string{"parent": "ens9"}, nil)
		if rc := w.run("run", "--no-wait", "--dry-run", "--net", "roce", "img"); rc != 0 {
			t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
		}
		if !strings.Contains(w.stdout.String(), "--device rdma-macvlan/hca=mlx5_7 ") {
			t.Errorf("printed %q", w.stdout.String())
		}
	})
	t.Run("nothing to go on", func(t *testing.T) {
		w := newWorld(t)
		w.info("20.10.24")
		w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"sysfs": "/nonexistent/sys", "cdi": t.TempDir()})
		w.network("roce", netRoce, "rdma-macvlan:latest", map[string]string{"parent": "ens9"}, nil)
		if rc := w.run("run", "--net", "roce", "img"); rc != exitRunFailed {
			t.Fatalf("status %d", rc)
		}
		t.Logf("stderr: %s", w.stderr.String())
		for _, s := range []string{"cannot tell which RDMA devices", "does not exist", "run docker rdma as root"} {
			if !strings.Contains(w.stderr.String(), s) {
				t.Errorf("stderr does not say %q:\n%s", s, w.stderr.String())
			}
		}
	})
}

// TestRunFindsDockerOnPath: without the docker CLI's hint, docker rdma
// runs the docker found on PATH.
func TestRunFindsDockerOnPath(t *testing.T) {
	w := standardWorld(t)
	delete(w.vars, reexecEnv)
	t.Setenv("PATH", filepath.Dir(w.docker.path)+string(os.PathListSeparator)+os.Getenv("PATH"))
	w.docker.onFirst("run", "", "", 3)
	if rc := w.run("run", "--no-wait", "--net", "roce", "img"); rc != 3 {
		t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
	}
	if w.docker.lastCall("run") == nil {
		t.Error("the docker on PATH was not run")
	}
}

// TestRunDualPortHCA: a network on port 2 of a dual-port HCA gets that
// port's CDI device, mlx4_0-p2, whether the daemon names it or docker rdma
// works it out from sysfs or finds its spec.
func TestRunDualPortHCA(t *testing.T) {
	const want = "--device rdma-macvlan/hca=mlx4_0-p2 "
	dualPort := func(t *testing.T) string {
		t.Helper()
		root := t.TempDir()
		if err := rdmatest.BuildMLX4DualPort(root); err != nil {
			t.Fatal(err)
		}
		return root
	}
	// The engine's CDI dir holds both ports' specs, as the daemon writes them.
	cdiDir := func(t *testing.T) string {
		t.Helper()
		dir := t.TempDir()
		for port := 1; port <= 2; port++ {
			if _, err := cdi.WriteSpec(dir, cdi.Device{Name: cdi.Name("mlx4_0", port, 2), HCA: "mlx4_0", Port: port,
				Nodes: []rdma.DeviceNode{{Path: "/dev/infiniband/uverbs0", Major: 231, Minor: 192}}}); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	run := func(t *testing.T, w *world) {
		t.Helper()
		if rc := w.run("run", "--no-wait", "--dry-run", "--net", "roce", "img"); rc != 0 {
			t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
		}
		if !strings.Contains(w.stdout.String(), want) {
			t.Errorf("printed %q, want %q in it", w.stdout.String(), want)
		}
	}
	t.Run("daemon", func(t *testing.T) {
		status, err := json.Marshal(api.Status{Networks: []api.Network{{ID: netRoce, Parent: "eth3", Mode: "bridge",
			HCA: "mlx4_0", Port: 2, CDIDevice: "rdma-macvlan/hca=mlx4_0-p2",
			Devices: []api.Device{{Path: "/dev/infiniband/uverbs0", Major: 231, Minor: 192}}}}})
		if err != nil {
			t.Fatal(err)
		}
		w := newWorld(t)
		w.info("28.2.2", cdiDir(t))
		w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"sysfs": "/sys", "cdi": "/var/run/cdi"})
		w.daemon(pluginID, status)
		w.network("roce", netRoce, "rdma-macvlan:latest", map[string]string{"parent": "eth3"}, nil)
		run(t, w)
	})
	t.Run("sysfs", func(t *testing.T) {
		w := newWorld(t)
		dir := cdiDir(t)
		w.info("28.2.2", dir)
		w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"sysfs": filepath.Join(dualPort(t), "sys"), "cdi": dir})
		w.network("roce", netRoce, "rdma-macvlan:latest", map[string]string{"parent": "eth3"}, nil)
		run(t, w)
	})
	t.Run("the only spec", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := cdi.WriteSpec(dir, cdi.Device{Name: "mlx4_0-p2", HCA: "mlx4_0", Port: 2,
			Nodes: []rdma.DeviceNode{{Path: "/dev/infiniband/uverbs0", Major: 231, Minor: 192}}}); err != nil {
			t.Fatal(err)
		}
		w := newWorld(t)
		w.info("28.2.2", dir)
		w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"sysfs": "/nonexistent/sys", "cdi": dir})
		w.network("roce", netRoce, "rdma-macvlan:latest", map[string]string{"parent": "eth3"}, nil)
		run(t, w)
		// The HCA and port come from the spec's environment, not its name.
		w.stdout.Reset()
		if rc := w.run("inspect", "roce"); rc != 0 {
			t.Fatalf("inspect: status %d, stderr:\n%s", rc, w.stderr.String())
		}
		if out := w.stdout.String(); !strings.Contains(out, "mlx4_0 port 2") || !strings.Contains(out, "rdma-macvlan/hca=mlx4_0-p2") {
			t.Errorf("inspect does not show mlx4_0 port 2 and its CDI device:\n%s", out)
		}
	})
}

// TestRunRefusesDevicesOutsideInfiniband: the device nodes docker rdma run
// hands to docker run come from the daemon's socket (or a CDI spec on
// disk). Whatever serves them, only plain nodes in /dev/infiniband go to
// a container: anything else is refused with the path and where it came
// from, and docker run is not run.
func TestRunRefusesDevicesOutsideInfiniband(t *testing.T) {
	status := readFixture(t, "status.json")
	for _, bad := range []string{
		"/dev/sda",
		"/dev/infiniband/../sda",
		"/dev/infiniband/../../etc/shadow",
		"/dev/infiniband//uverbs0",
		"/dev/infiniband/./uverbs0",
		"/dev/infiniband/sub/uverbs0",
		"dev/infiniband/uverbs0",
		"/dev/infiniband",
		"/dev/infiniband/",
		"/dev/infiniband/uverbs0:/dev/sda",
		"/dev/infiniband/uverbs0:rwm",
		"/dev/infinibandx/uverbs0",
		"/dev/infiniband/uverbs0\n--privileged",
	} {
		t.Run(bad, func(t *testing.T) {
			w := newWorld(t)
			w.info("20.10.24")
			w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"sysfs": "/sys", "cdi": t.TempDir()})
			quoted, _ := json.Marshal(bad)
			sock := w.daemon(pluginID, []byte(strings.Replace(string(status), `"/dev/infiniband/uverbs0"`, string(quoted), 1)))
			w.network("roce", netRoce, "rdma-macvlan:latest", map[string]string{"parent": "ens3np0"}, nil)
			w.docker.onFirst("run", "", "", 0)
			if rc := w.run("run", "--no-wait", "--net", "roce", "img"); rc != exitRunFailed {
				t.Errorf("status %d, want %d; stderr:\n%s", rc, exitRunFailed, w.stderr.String())
			}
			t.Logf("stderr: %s", w.stderr.String())
			for _, want := range []string{fmt.Sprintf("device %q", bad), "socket " + sock, "not an RDMA device node (/dev/infiniband/NAME) and is not passed to docker run"} {
				if !strings.Contains(w.stderr.String(), want) {
					t.Errorf("stderr does not say %q:\n%s", want, w.stderr.String())
				}
			}
			if c := w.docker.lastCall("run"); c != nil {
				t.Errorf("docker run was run: %q", c)
			}
		})
	}
	t.Run("from a CDI spec", func(t *testing.T) {
		cdi := t.TempDir()
		spec := `{"cdiVersion":"0.5.0","kind":"rdma-macvlan/hca","devices":[{"name":"mlx5_7","containerEdits":{"deviceNodes":[{"path":"/dev/sda","type":"b","major":8,"minor":0}]}}]}`
		if err := os.WriteFile(filepath.Join(cdi, "rdma-macvlan-mlx5_7.json"), []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
		w := newWorld(t)
		w.info("20.10.24")
		w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"sysfs": "/nonexistent/sys", "cdi": cdi})
		w.network("roce", netRoce, "rdma-macvlan:latest", map[string]string{"parent": "ens9"}, nil)
		if rc := w.run("run", "--no-wait", "--dry-run", "--net", "roce", "img"); rc != exitRunFailed {
			t.Errorf("status %d, want %d; stdout %q", rc, exitRunFailed, w.stdout.String())
		}
		for _, want := range []string{`device "/dev/sda"`, "the CDI spec of rdma-macvlan/hca=mlx5_7"} {
			if !strings.Contains(w.stderr.String(), want) {
				t.Errorf("stderr does not say %q:\n%s", want, w.stderr.String())
			}
		}
	})
	t.Run("nodes in /dev/infiniband pass", func(t *testing.T) {
		w := standardWorld(t)
		if rc := w.run("run", "--no-wait", "--dry-run", "--net", "roce", "img"); rc != 0 {
			t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
		}
		if !strings.Contains(w.stdout.String(), "--device /dev/infiniband/uverbs0 --device /dev/infiniband/rdma_cm ") {
			t.Errorf("printed %q", w.stdout.String())
		}
	})
}

// On an engine before Docker 25 (API 1.41) a run on two rdma-macvlan
// networks is docker create on the first, docker network connect to the
// second and docker start: attached, the container's exit status is docker
// rdma's; with -d the ID is printed; a connect that fails removes the
// container and says why.
func TestRunSeveralNetworksOnAnOldEngine(t *testing.T) {
	const id = "0123456789abcdef"
	t.Run("attached", func(t *testing.T) {
		w := standardWorld(t)
		w.info("20.10.24")
		w.docker.onFirst("create", id+"\n", "", 0)
		w.docker.onFirst("network", "", "", 0)
		w.docker.onFirst("start", "from the container\n", "", 3)
		rc := w.run("run", "--no-wait", "--rm", "-i", "--net", "roce", "--network", "name=roce2,ip=10.0.2.5", "img", "sh")
		if rc != 3 {
			t.Fatalf("status %d, want the container's 3; stderr:\n%s", rc, w.stderr.String())
		}
		var got [][]string
		for _, c := range w.docker.calls() {
			if c[0] == "create" || c[0] == "start" || len(c) > 1 && c[0] == "network" && c[1] == "connect" {
				got = append(got, c)
			}
		}
		want := [][]string{
			{"create", "--device", "/dev/infiniband/uverbs0", "--device", "/dev/infiniband/rdma_cm", "--device", "/dev/infiniband/uverbs1",
				"--cap-add", "IPC_LOCK", "--ulimit", "memlock=-1:-1", "--rm", "-i", "--network", "roce", "img", "sh"},
			{"network", "connect", "--ip", "10.0.2.5", "roce2", id},
			{"start", "--attach", "--interactive", id},
		}
		if !reflect.DeepEqual(got, want) || w.stdout.String() != "from the container\n" {
			t.Errorf("docker ran\n  %q\nwant\n  %q\nstdout %q", got, want, w.stdout.String())
		}
	})
	t.Run("detached", func(t *testing.T) {
		w := standardWorld(t)
		w.info("20.10.24")
		w.docker.onFirst("create", id+"\n", "", 0)
		w.docker.onFirst("network", "", "", 0)
		w.docker.onFirst("start", id+"\n", "", 0)
		if rc := w.run("run", "--no-wait", "-d", "--net", "roce", "--net", "roce2", "img"); rc != 0 || w.stdout.String() != id+"\n" {
			t.Fatalf("status %d, stdout %q; want 0 and the ID; stderr:\n%s", rc, w.stdout.String(), w.stderr.String())
		}
		if got := w.docker.lastCall("start"); !reflect.DeepEqual(got, []string{"start", id}) {
			t.Errorf("docker start %q", got)
		}
	})
	t.Run("connect fails", func(t *testing.T) {
		w := standardWorld(t)
		w.info("20.10.24")
		w.docker.onFirst("create", id+"\n", "", 0)
		w.docker.onFirst("network", "", "Error response from daemon: network roce2 not found\n", 1)
		w.docker.onFirst("rm", "", "", 0)
		if rc := w.run("run", "--no-wait", "--net", "roce", "--net", "roce2", "img"); rc != exitRunFailed {
			t.Fatalf("status %d, want %d", rc, exitRunFailed)
		}
		if got := w.docker.lastCall("rm"); !reflect.DeepEqual(got, []string{"rm", "-f", id}) || w.docker.lastCall("start") != nil ||
			!strings.Contains(w.stderr.String(), "docker network connect roce2") || !strings.Contains(w.stderr.String(), "the container was removed") {
			t.Errorf("rm %q, start %q; stderr:\n%s", got, w.docker.lastCall("start"), w.stderr.String())
		}
	})
	t.Run("a current engine takes both at docker run", func(t *testing.T) {
		w := standardWorld(t)
		w.docker.onFirst("run", "", "", 0)
		if rc := w.run("run", "--no-wait", "--net", "roce", "--net", "roce2", "img"); rc != 0 || w.docker.lastCall("create") != nil {
			t.Fatalf("status %d, create %q", rc, w.docker.lastCall("create"))
		}
	})
}
