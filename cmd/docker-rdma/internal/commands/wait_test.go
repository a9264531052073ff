package commands

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/driver"
)

// waitWorld is the standard world with the roce network's subnet, an
// image with an entrypoint and a command, and rdma-exec next to
// docker-rdma.
func waitWorld(t *testing.T) (*world, string) {
	t.Helper()
	w := standardWorld(t)
	for _, n := range w.networks {
		if n["Name"] == "roce" {
			n["IPAM"] = map[string]any{"Config": []any{map[string]any{"Subnet": "192.168.7.0/24"}}}
			b, _ := json.Marshal([]any{n})
			w.docker.on([]string{"network", "inspect", "--", "roce"}, string(b)+"\n", "", 0)
		}
	}
	w.docker.on([]string{"image", "inspect", "--format", "{{json .Config}}", "--", "img"}, `{"Entrypoint":["/entry.sh"],"Cmd":["serve","--port","1"]}`+"\n", "", 0)
	dir := t.TempDir()
	helper := filepath.Join(dir, "rdma-exec")
	if err := os.WriteFile(helper, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.env.Executable = func() (string, error) { return filepath.Join(dir, "docker-rdma"), nil }
	return w, helper
}

func TestRunWrapsWorkloadInHelper(t *testing.T) {
	nodes := "--device /dev/infiniband/uverbs0 --device /dev/infiniband/rdma_cm --cap-add IPC_LOCK --ulimit memlock=-1:-1"
	wrap := func(helper string) string {
		return "--entrypoint /.rdma-macvlan/rdma-exec --mount " + shellQuote("type=bind,"+csvField("source="+helper)+",target=/.rdma-macvlan/rdma-exec,readonly")
	}
	// roce has traffic class 106 and service level 3 (the daemon says), roce2
	// service level 5 (Docker's options say).
	const net = "--net name=roce,hca=mlx5_0,port=1,subnet=192.168.7.0/24,traffic_class=106,service_level=3"
	tests := []struct {
		name string
		args []string
		want string // after "<docker> run "; %W is the wrap flags
	}{
		{"the image's entrypoint and command", []string{"--net", "roce", "img"},
			nodes + " --net roce %W img " + net + " --timeout 10s -- /entry.sh serve --port 1"},
		{"the user's command after the image's entrypoint", []string{"-it", "--net", "roce", "img", "sh", "-c", "exit 3"},
			nodes + " -it --net roce %W img " + net + " --timeout 10s -- /entry.sh sh -c 'exit 3'"},
		{"the user's entrypoint drops the image's command", []string{"--entrypoint", "/bin/x", "--net", "roce", "img"},
			nodes + " --net roce %W img " + net + " --timeout 10s -- /bin/x"},
		{"--entrypoint= resets it", []string{"--entrypoint=", "--net", "roce", "img", "cmd", "a"},
			nodes + " --net roce %W img " + net + " --timeout 10s -- cmd a"},
		{"timeout, version and family", []string{"--gid-timeout", "3s", "--roce-version", "1", "--gid-family=ipv6", "--net", "roce", "--", "img", "x"},
			nodes + " --net roce %W -- img " + net + " --timeout 3s --roce-version 1 --gid-family ipv6 -- /entry.sh x"},
		{"two networks, the second's subnet not known", []string{"--init", "--user", "1000", "--net", "roce", "--net", "roce2", "img"},
			strings.Replace(nodes, " --cap-add", " --device /dev/infiniband/uverbs1 --cap-add", 1) + " --init --user 1000 --net roce --net roce2 %W img " + net + " --net name=roce2,hca=mlx5_1,port=1,service_level=5 --timeout 10s -- /entry.sh serve --port 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, helper := waitWorld(t)
			if rc := w.run(append([]string{"run", "--dry-run"}, tt.args...)...); rc != 0 {
				t.Fatalf("status %d: %s", rc, w.stderr.String())
			}
			want := w.docker.path + " run " + strings.ReplaceAll(tt.want, "%W", wrap(helper))
			if got := strings.TrimSpace(w.stdout.String()); got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

func TestRunTimeoutFromPlugin(t *testing.T) {
	w, _ := waitWorld(t)
	w.plugins[0]["Settings"].(map[string]any)["Env"] = []string{"RDMA_MACVLAN_LOG_LEVEL=info", "RDMA_MACVLAN_GID_TIMEOUT=25s"}
	w.setPlugins()
	if rc := w.run("run", "--dry-run", "--net", "roce", "img"); rc != 0 || !strings.Contains(w.stdout.String(), " --timeout 25s -- ") {
		t.Fatalf("status %d: %s %s", rc, w.stdout.String(), w.stderr.String())
	}
}

func TestRunWaitErrors(t *testing.T) {
	t.Run("helper not installed", func(t *testing.T) {
		w, helper := waitWorld(t)
		os.Remove(helper)
		w.env.Executable = func() (string, error) { return "/nonexistent/bin/docker-rdma", nil }
		if rc := w.run("run", "--net", "roce", "img"); rc != exitRunFailed {
			t.Fatalf("status %d", rc)
		}
		for _, s := range []string{"rdma-exec helper", "is not installed", "/nonexistent/bin/rdma-exec", "make install-cli", "--no-wait"} {
			if !strings.Contains(w.stderr.String(), s) {
				t.Errorf("stderr lacks %q: %s", s, w.stderr.String())
			}
		}
		if w.docker.lastCall("run") != nil {
			t.Error("docker run was called")
		}
	})
	t.Run("image not there and --pull never", func(t *testing.T) {
		w, _ := waitWorld(t)
		w.docker.on([]string{"image", "inspect", "--format", "{{json .Config}}", "--", "img"}, "", "Error: No such image: img\n", 1)
		if rc := w.run("run", "--pull", "never", "--net", "roce", "img"); rc != exitRunFailed || !strings.Contains(w.stderr.String(), "image img is not on the engine and --pull=never") {
			t.Fatalf("status %d: %s", rc, w.stderr.String())
		}
	})
	t.Run("image pulled when missing", func(t *testing.T) {
		w, _ := waitWorld(t)
		w.docker.on([]string{"image", "inspect", "--format", "{{json .Config}}", "--", "img"}, "", "Error: No such image: img\n", 1)
		w.docker.onFirst("pull", "pulled\n", "", 0)
		w.run("run", "--platform", "linux/arm64", "--net", "roce", "img")
		if got := strings.Join(w.docker.lastCall("pull"), " "); got != "pull --platform linux/arm64 -- img" {
			t.Errorf("pull call %q; stderr %s", got, w.stderr.String())
		}
	})
	t.Run("no command at all", func(t *testing.T) {
		w, _ := waitWorld(t)
		w.docker.on([]string{"image", "inspect", "--format", "{{json .Config}}", "--", "img"}, `{"Entrypoint":null,"Cmd":null}`, "", 0)
		if rc := w.run("run", "--net", "roce", "img"); rc != exitRunFailed || !strings.Contains(w.stderr.String(), "image img has no ENTRYPOINT or CMD") {
			t.Fatalf("status %d: %s", rc, w.stderr.String())
		}
	})
	t.Run("bad version", func(t *testing.T) {
		w, _ := waitWorld(t)
		if rc := w.run("run", "--roce-version", "3", "--net", "roce", "img"); rc != exitRunFailed || !strings.Contains(w.stderr.String(), "--roce-version") {
			t.Fatalf("status %d: %s", rc, w.stderr.String())
		}
	})
}

// On a remote engine the helper is expected at the installed path there;
// when the engine refuses the mount, docker rdma run says how to install
// it.
func TestRunRemoteEngineHelper(t *testing.T) {
	w, _ := waitWorld(t)
	w.docker.on([]string{"info", "--format", "{{json .}}"}, `{"Name":"otherhost","ServerVersion":"28.2.2","CDISpecDirs":[]}`, "", 0)
	sock := w.daemon("tunnel", readFixture(t, "status.json"))
	w.docker.onFirst("run", "", "docker: Error response from daemon: invalid mount config for type \"bind\": bind source path does not exist: /usr/local/lib/rdma-macvlan/rdma-exec.\n", 125)
	if rc := w.run("run", "--socket", sock, "--net", "roce", "img"); rc != 125 {
		t.Fatalf("status %d", rc)
	}
	for _, s := range []string{"Docker runs on otherhost: using the rdma-exec helper at /usr/local/lib/rdma-macvlan/rdma-exec there",
		"the engine's host has no /usr/local/lib/rdma-macvlan/rdma-exec", "make install-cli", "--exec-helper PATH", "--no-wait"} {
		if !strings.Contains(w.stderr.String(), s) {
			t.Errorf("stderr lacks %q:\n%s", s, w.stderr.String())
		}
	}
	if got := strings.Join(w.docker.lastCall("run"), " "); !strings.Contains(got, "source=/usr/local/lib/rdma-macvlan/rdma-exec,") {
		t.Errorf("docker run %s", got)
	}
}

// The CLI's fallback GID timeout is the daemon's default (the CLI does not
// link the driver, so it keeps its own copy).
func TestDefaultGIDTimeoutIsTheDaemons(t *testing.T) {
	if defaultGIDTimeout != driver.DefaultGIDTimeout {
		t.Fatalf("docker rdma assumes %s, the daemon's default is %s", defaultGIDTimeout, driver.DefaultGIDTimeout)
	}
}
