package commands

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestRunDryRun: docker rdma run is docker run --runtime rdma-macvlan,
// its own flags as the runtime's variables in front of the user's
// arguments, which are kept as given.
func TestRunDryRun(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // the command after "<docker> run "
		note string // a line stderr must hold
	}{
		{
			name: "the runtime and nothing else",
			args: []string{"run", "--dry-run", "-it", "--rm", "--network", "roce", "img", "sh"},
			want: "--runtime rdma-macvlan -it --rm --network roce img sh",
		},
		{
			name: "each own flag as the runtime's variable",
			args: []string{"run", "--no-wait", "--gid-timeout", "3s", "--roce-version=1", "--gid-family", "ipv6", "--accept-gid-mismatch", "--dry-run", "--net=roce", "img"},
			want: "--runtime rdma-macvlan -e RDMA_MACVLAN_NO_WAIT=1 -e RDMA_MACVLAN_GID_TIMEOUT=3s -e RDMA_MACVLAN_ROCE_VERSION=1 -e RDMA_MACVLAN_GID_FAMILY=ipv6 -e RDMA_MACVLAN_ACCEPT_GID_MISMATCH=1 --net=roce img",
		},
		{
			name: "--no-wait=false and --accept-gid-mismatch=false set nothing",
			args: []string{"run", "--no-wait=false", "--accept-gid-mismatch=false", "--dry-run", "--net", "roce", "img"},
			want: "--runtime rdma-macvlan --net roce img",
		},
		{
			name: "memlock, advanced network syntax, env and a command with flags",
			args: []string{"run", "--memlock", "8M", "--dry-run", "-e", "A=b c", "--network", "name=roce,driver-opt=mtu=1400", "img", "sh", "-c", "echo $A"},
			want: `--runtime rdma-macvlan --ulimit memlock=8388608:8388608 -e 'A=b c' --network name=roce,driver-opt=mtu=1400 img sh -c 'echo $A'`,
		},
		{
			name: "the user's own runtime and ulimit are kept",
			args: []string{"run", "--dry-run", "--runtime", "runc", "--ulimit", "memlock=65536:65536", "--net", "roce", "img"},
			want: "--runtime runc --ulimit memlock=65536:65536 --net roce img",
		},
		{
			name: "a non-RDMA network beside the RDMA one",
			args: []string{"run", "--dry-run", "--network", "plain", "--network", "roce", "img"},
			want: "--runtime rdma-macvlan --network plain --network roce img",
		},
		{
			name: "the network by ID, -- before IMAGE",
			args: []string{"run", "--dry-run", "--network", netRoce, "--", "img", "--network", "x"},
			want: "--runtime rdma-macvlan --network " + netRoce + " -- img --network x",
		},
		{
			name: "--device-mode is ignored, with a note",
			args: []string{"run", "--dry-run", "--device-mode", "nodes", "--net", "roce", "img"},
			want: "--runtime rdma-macvlan --net roce img",
			note: "docker rdma run: note: --device-mode is ignored: the rdma-macvlan runtime",
		},
		{
			name: "--exec-helper is ignored, with a note",
			args: []string{"run", "--dry-run", "--exec-helper", "/opt/rdma-exec", "--net", "roce", "img"},
			want: "--runtime rdma-macvlan --net roce img",
			note: "docker rdma run: note: --exec-helper is ignored: the rdma-macvlan runtime",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := standardWorld(t)
			if rc := w.run(tt.args...); rc != 0 {
				t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
			}
			want := w.docker.path + " run " + tt.want + "\n"
			if got := w.stdout.String(); got != want {
				t.Errorf("dry run printed\n  %s\nwant\n  %s", got, want)
			}
			if tt.note != "" && !strings.Contains(w.stderr.String(), tt.note) {
				t.Errorf("stderr does not say %q:\n%s", tt.note, w.stderr.String())
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
	w.docker.on(append(global, "info", "--format", "{{json .}}"), `{"Name":"testhost","ServerVersion":"20.10.24","Runtimes":{"runc":{"path":"runc"},"rdma-macvlan":{"path":"/x"}}}`, "", 0)
	w.docker.on(append(global, "network", "inspect", "--", "roce"), `[{"Name":"roce","Id":"`+netRoce+`","Driver":"rdma-macvlan:latest","Options":{"parent":"ens3np0"}}]`, "", 0)
	w.docker.on(append(global, "plugin", "ls", "--no-trunc", "--format", "{{.ID}}"), pluginID+"\n", "", 0)
	w.docker.on(append(global, "plugin", "inspect", pluginID), `[{"Id":"`+pluginID+`","Name":"rdma-macvlan:latest","Enabled":true,"Config":{"Entrypoint":["/rdma-macvlan"],"Interface":{"Types":["docker.networkdriver/1.0"],"Socket":"rdma-macvlan.sock"}}}]`, "", 0)
	if rc := w.run("--context", "lab", "-D", "rdma", "run", "--no-wait", "--dry-run", "--net", "roce", "img"); rc != 0 {
		t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
	}
	want := w.docker.path + " --context lab -D run --runtime rdma-macvlan -e RDMA_MACVLAN_NO_WAIT=1 --net roce img\n"
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
		name string
		args []string
		want []string // substrings of stderr
	}{
		{name: "no network", args: []string{"run", "--rm", "img"}, want: []string{"no --network", "docker rdma ls"}},
		{name: "not an RDMA network", args: []string{"run", "--network", "plain", "img"}, want: []string{"network plain (driver bridge) is not rdma-macvlan", "docker network create -d rdma-macvlan"}},
		{name: "network mode", args: []string{"run", "--network", "container:x", "img"}, want: []string{`"container:x" is not rdma-macvlan`}},
		{name: "no such network", args: []string{"run", "--network", "nope", "img"}, want: []string{`network "nope"`, "docker network ls"}},
		{name: "no IMAGE", args: []string{"run", "--network", "roce"}, want: []string{"no IMAGE"}},
		{name: "bad memlock", args: []string{"run", "--memlock", "lots", "--network", "roce", "img"}, want: []string{"--memlock", "lots"}},
		{name: "bad GID timeout", args: []string{"run", "--gid-timeout", "soon", "--network", "roce", "img"}, want: []string{`--gid-timeout "soon"`}},
		{name: "bad RoCE version", args: []string{"run", "--roce-version", "3", "--network", "roce", "img"}, want: []string{`--roce-version "3"`}},
		{name: "bad GID family", args: []string{"run", "--gid-family", "ipx", "--network", "roce", "img"}, want: []string{`--gid-family "ipx"`}},
		{name: "bad device mode", args: []string{"run", "--device-mode", "sometimes", "--network", "roce", "img"}, want: []string{`--device-mode "sometimes"`}},
		{name: "flag without value", args: []string{"run", "--network"}, want: []string{"--network needs a value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := standardWorld(t)
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

// TestRunRefusesWithoutTheRuntime: on an engine that does not list the
// rdma-macvlan runtime docker rdma run runs nothing, exits with 125 and
// says how to install it; a --runtime of the user's own needs none.
func TestRunRefusesWithoutTheRuntime(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--net", "roce", "img"},
		{"run", "--dry-run", "--net", "roce", "img"},
		{"run", "--runtime", "rdma-macvlan", "--net", "roce", "img"},
		{"run", "-d", "--net", "roce", "--net", "roce2", "img"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			w := standardWorld(t)
			w.infoRuntimes("20.10.24", []string{"runc", "nvidia"})
			w.docker.onFirst("run", "", "", 0)
			w.docker.onFirst("create", "0123\n", "", 0)
			if rc := w.run(args...); rc != exitRunFailed {
				t.Errorf("status %d, want %d", rc, exitRunFailed)
			}
			for _, s := range []string{"docker rdma run: the engine has no rdma-macvlan runtime (it has: nvidia, runc)", "docker rdma runtime install"} {
				if !strings.Contains(w.stderr.String(), s) {
					t.Errorf("stderr does not say %q:\n%s", s, w.stderr.String())
				}
			}
			if w.stdout.Len() != 0 || w.docker.lastCall("run") != nil || w.docker.lastCall("create") != nil {
				t.Errorf("docker ran (calls %q), stdout %q", w.docker.calls(), w.stdout.String())
			}
		})
	}
	t.Run("the user's own runtime", func(t *testing.T) {
		w := standardWorld(t)
		w.infoRuntimes("28.2.2", []string{"runc"})
		w.docker.onFirst("run", "", "", 0)
		if rc := w.run("run", "--runtime", "runc", "--net", "roce", "img"); rc != 0 {
			t.Fatalf("status %d: %s", rc, w.stderr.String())
		}
		if got := w.docker.lastCall("run"); !reflect.DeepEqual(got, []string{"run", "--runtime", "runc", "--net", "roce", "img"}) {
			t.Errorf("docker ran %q", got)
		}
	})
}

func TestRunExecutesDocker(t *testing.T) {
	t.Run("exit status and arguments", func(t *testing.T) {
		w := standardWorld(t)
		w.docker.onFirst("run", "hello from the container\n", "", 7)
		rc := w.run("run", "--no-wait", "--rm", "--net", "roce", "img", "sh", "-c", "exit 7")
		if rc != 7 {
			t.Errorf("status %d, want docker's 7; stderr:\n%s", rc, w.stderr.String())
		}
		want := []string{"run", "--runtime", "rdma-macvlan", "-e", "RDMA_MACVLAN_NO_WAIT=1", "--rm", "--net", "roce", "img", "sh", "-c", "exit 7"}
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
		rc := w.run("run", "--net", "roce", "img")
		if rc != 126 {
			t.Errorf("status %d, want docker's 126", rc)
		}
		for _, s := range []string{msg, "could not set the locked-memory limit memlock=unlimited (the runtime's default)", "--memlock 8M", "LimitMEMLOCK=infinity"} {
			if !strings.Contains(w.stderr.String(), s) {
				t.Errorf("stderr does not say %q:\n%s", s, w.stderr.String())
			}
		}
	})
	t.Run("other failures are not blamed on memlock", func(t *testing.T) {
		w := standardWorld(t)
		w.docker.onFirst("run", "", "docker: Error response from daemon: No such image: img.\n", 125)
		if rc := w.run("run", "--net", "roce", "img"); rc != 125 {
			t.Errorf("status %d, want 125", rc)
		}
		if strings.Contains(w.stderr.String(), "locked-memory") {
			t.Errorf("blamed memlock:\n%s", w.stderr.String())
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
		rc := w.run("run", "--memlock", "8M", "--rm", "-i", "--net", "roce", "--network", "name=roce2,ip=10.0.2.5", "img", "sh")
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
			{"create", "--runtime", "rdma-macvlan", "--ulimit", "memlock=8388608:8388608", "--rm", "-i", "--network", "roce", "img", "sh"},
			{"network", "connect", "--ip", "10.0.2.5", "roce2", id},
			{"start", "--attach", "--interactive", id},
		}
		if !reflect.DeepEqual(got, want) || w.stdout.String() != "from the container\n" {
			t.Errorf("docker ran\n  %q\nwant\n  %q\nstdout %q", got, want, w.stdout.String())
		}
	})
	t.Run("dry run", func(t *testing.T) {
		w := standardWorld(t)
		w.info("20.10.24")
		if rc := w.run("run", "--dry-run", "--no-wait", "-d", "--net", "roce", "--net", "roce2", "img"); rc != 0 {
			t.Fatalf("status %d: %s", rc, w.stderr.String())
		}
		d := w.docker.path
		want := d + " create --runtime rdma-macvlan -e RDMA_MACVLAN_NO_WAIT=1 --network roce img >cid\n" +
			d + ` network connect roce2 "$(cat cid)"` + "\n" + d + ` start "$(cat cid)"` + "\n"
		if got := w.stdout.String(); got != want {
			t.Errorf("printed\n%s\nwant\n%s", got, want)
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
