package commands

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/compose"
)

// composeModel is what docker compose config prints for a project with a
// worker on the external rdma-macvlan network roce, a trainer on a
// network compose creates with the plugin, a sidecar in the worker's
// namespace and a web server on the default network.
const composeModel = `{"name": "p",
	"networks": {"roce": {"name": "roce", "external": true}, "fab": {"name": "p_fab", "driver": "rdma-macvlan:latest"}, "default": {"name": "p_default"}},
	"services": {
		"worker": {"image": "img", "networks": {"roce": null}},
		"trainer": {"image": "img", "networks": {"fab": null, "default": null}},
		"side": {"image": "img", "network_mode": "service:worker"},
		"web": {"image": "nginx", "networks": {"default": null}}}}`

func composeWorld(t *testing.T, model string) (*world, string) {
	t.Helper()
	w := standardWorld(t)
	file := filepath.Join(t.TempDir(), "compose.yaml")
	if err := os.WriteFile(file, []byte("services: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.docker.on([]string{"compose", "--file", file, "config", "--format", "json"}, model, "", 0)
	return w, file
}

// TestComposePrintOverride: the override sets runtime: rdma-macvlan on
// the services on rdma-macvlan networks and nothing else, and docker rdma
// compose's own options as the runtime's variables and ulimits memlock.
func TestComposePrintOverride(t *testing.T) {
	w, file := composeWorld(t, composeModel)
	if rc := w.run("compose", "-f", file, "--print-override"); rc != 0 {
		t.Fatalf("status %d: %s", rc, w.stderr.String())
	}
	runtime := "    runtime: \"rdma-macvlan\"\n"
	want := compose.Header + "services:\n" +
		"  \"side\":\n    # on roce\n" + runtime +
		"  \"trainer\":\n    # on p_fab\n" + runtime +
		"  \"worker\":\n    # on roce\n" + runtime
	if got := w.stdout.String(); got != want {
		t.Errorf("override\n%s\nwant\n%s", got, want)
	}

	if rc := w.run("compose", "--no-wait", "--gid-timeout", "3s", "--memlock", "8M", "--device-mode", "cdi", "-f", file, "--print-override"); rc != 0 {
		t.Fatalf("status %d: %s", rc, w.stderr.String())
	}
	extra := "    environment:\n      \"RDMA_MACVLAN_NO_WAIT\": \"1\"\n      \"RDMA_MACVLAN_GID_TIMEOUT\": \"3s\"\n" +
		"    ulimits:\n      memlock:\n        soft: 8388608\n        hard: 8388608\n"
	want = compose.Header + "services:\n" +
		"  \"side\":\n    # on roce\n" + runtime + extra +
		"  \"trainer\":\n    # on p_fab\n" + runtime + extra +
		"  \"worker\":\n    # on roce\n" + runtime + extra
	if got := w.stdout.String(); got != want {
		t.Errorf("override\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(w.stderr.String(), "docker rdma compose: note: --device-mode is ignored") {
		t.Errorf("no note on --device-mode:\n%s", w.stderr.String())
	}
}

// TestComposeRuns: the override goes after the user's files; docker
// compose's status is docker rdma compose's.
func TestComposeRuns(t *testing.T) {
	w, file := composeWorld(t, composeModel)
	w.docker.onFirst("compose", "", "", 3)
	if rc := w.run("compose", "-f", file, "up", "-d"); rc != 3 {
		t.Fatalf("status %d, want compose's 3: %s", rc, w.stderr.String())
	}
	up := w.docker.lastCall("compose")
	if len(up) != 7 || up[1] != "--file" || up[2] != file || up[3] != "--file" || !strings.Contains(up[4], "docker-rdma-compose-") || up[5] != "up" || up[6] != "-d" {
		t.Errorf("docker %q", up)
	}
}

// TestComposeRefusesWithoutTheRuntime: on an engine without the
// rdma-macvlan runtime a project with services on rdma-macvlan networks is
// not started (status 125, how to install it); one without needs none.
func TestComposeRefusesWithoutTheRuntime(t *testing.T) {
	w, file := composeWorld(t, composeModel)
	w.infoRuntimes("28.2.2", []string{"runc"})
	w.docker.onFirst("compose", "", "", 0)
	if rc := w.run("compose", "-f", file, "up", "-d"); rc != exitRunFailed {
		t.Errorf("status %d, want %d", rc, exitRunFailed)
	}
	for _, s := range []string{"docker rdma compose: the engine has no rdma-macvlan runtime", "docker rdma runtime install"} {
		if !strings.Contains(w.stderr.String(), s) {
			t.Errorf("stderr does not say %q:\n%s", s, w.stderr.String())
		}
	}
	if up := w.docker.lastCall("compose"); up[len(up)-1] != "json" {
		t.Errorf("docker compose ran: %q", up)
	}

	w, file = composeWorld(t, `{"name": "p", "networks": {"default": {"name": "p_default"}}, "services": {"web": {"image": "nginx", "networks": {"default": null}}}}`)
	w.infoRuntimes("28.2.2", []string{"runc"})
	w.docker.onFirst("compose", "", "", 0)
	if rc := w.run("compose", "-f", file, "up", "-d"); rc != 0 {
		t.Errorf("a project without rdma-macvlan networks: status %d: %s", rc, w.stderr.String())
	}
}
