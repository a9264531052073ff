package commands

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
)

func TestMetadata(t *testing.T) {
	w := newWorld(t)
	if rc := w.run("docker-cli-plugin-metadata"); rc != 0 {
		t.Fatalf("status %d", rc)
	}
	var m map[string]string
	if err := json.Unmarshal(w.stdout.Bytes(), &m); err != nil {
		t.Fatalf("not JSON: %v: %q", err, w.stdout.String())
	}
	if m["SchemaVersion"] != "0.1.0" || m["Vendor"] != "rdma-macvlan" || m["Version"] != "1.2.3" || m["ShortDescription"] == "" {
		t.Errorf("metadata %v", m)
	}
	if len(w.docker.calls()) != 0 {
		t.Errorf("metadata ran docker: %q", w.docker.calls())
	}
}

func TestCommandLine(t *testing.T) {
	tests := []struct {
		args   []string
		rc     int
		stdout string
		stderr string
	}{
		{args: []string{"rdma", "--help"}, rc: 0, stdout: "Usage:  docker rdma"},
		{args: []string{"--help"}, rc: 0, stdout: "Commands:"},
		{args: []string{"rdma", "help"}, rc: 0, stdout: "doctor"},
		{args: []string{"rdma"}, rc: exitUsage, stderr: "Usage:  docker rdma"},
		{args: []string{"rdma", "frob"}, rc: exitUsage, stderr: `unknown command "frob"`},
		{args: []string{"rdma", "--frob", "ls"}, rc: exitUsage, stderr: "unknown option --frob"},
		{args: []string{"rdma", "--version"}, rc: 0, stdout: "docker rdma version 1.2.3"},
		// No engine answers: the CLI's version is printed, the status says the rest failed.
		{args: []string{"rdma", "version"}, rc: 1, stdout: "docker rdma:  1.2.3"},
		{args: []string{"-D", "rdma", "ls", "--help"}, rc: 0, stdout: "docker rdma ls [--format table|json]"},
		{args: []string{"rdma", "run", "--help"}, rc: 0, stdout: "--memlock SIZE"},
		{args: []string{"rdma", "run"}, rc: exitRunFailed, stderr: "Usage:  docker rdma run"},
		{args: []string{"rdma", "doctor", "--memlock", "x"}, rc: exitUsage, stderr: "--memlock"},
		{args: []string{"rdma", "inspect", "--format", "xml", "c"}, rc: exitUsage, stderr: `--format "xml"`},
		{args: []string{"rdma", "--plugin"}, rc: exitUsage, stderr: "--plugin needs a value"},
	}
	for _, tt := range tests {
		w := newWorld(t)
		rc := w.run(tt.args...)
		if rc != tt.rc || !strings.Contains(w.stdout.String(), tt.stdout) || !strings.Contains(w.stderr.String(), tt.stderr) {
			t.Errorf("%q: status %d (want %d)\nstdout: %s\nstderr: %s", tt.args, rc, tt.rc, w.stdout.String(), w.stderr.String())
		}
	}
}

// TestPluginOption: --plugin (or RDMA_MACVLAN_PLUGIN) names a network plugin
// docker rdma does not recognise by its manifest, and its networks are RDMA
// ones.
func TestPluginOption(t *testing.T) {
	w := newWorld(t)
	w.info("20.10.24")
	w.plugin("rdma-macvlan:latest", "7a7a7a7a7a7a", true, nil)
	w.plugins[0]["Config"] = map[string]any{"Entrypoint": []string{"/bin/other"},
		"Interface": map[string]any{"Types": []string{"docker.networkdriver/1.0"}, "Socket": "other.sock"}}
	w.plugin("roce-net:v2", pluginID, true, nil)
	w.plugins[1]["Config"] = w.plugins[0]["Config"]
	w.setPlugins()
	w.daemonAt(filepath.Join(w.pluginsDir, pluginID, "other.sock"), readFixture(t, "status.json"))
	w.network("roce", netRoce, "roce-net:v2", map[string]string{"parent": "ens3np0"}, nil)
	w.network("named", netRoce2, "rdma-macvlan:latest", map[string]string{"parent": "ens3np0"}, nil)
	rc := w.run("rdma", "run", "--no-wait", "--dry-run", "--net", "roce", "img")
	if rc != exitRunFailed || !strings.Contains(w.stderr.String(), "driver roce-net:v2) is not rdma-macvlan") ||
		!strings.Contains(w.stderr.String(), "docker rdma --plugin roce-net:v2") {
		t.Errorf("without --plugin: status %d, stderr %s", rc, w.stderr.String())
	}
	// A name is not enough: this rdma-macvlan:latest has another manifest.
	if rc := w.run("rdma", "run", "--no-wait", "--dry-run", "--net", "named", "img"); rc != exitRunFailed || !strings.Contains(w.stderr.String(), "driver rdma-macvlan:latest) is not rdma-macvlan") {
		t.Errorf("a plugin named rdma-macvlan with another manifest: status %d, stderr %s", rc, w.stderr.String())
	}
	if rc := w.run("rdma", "--plugin", "roce-net", "run", "--no-wait", "--dry-run", "--net", "roce", "img"); rc != 0 || !strings.Contains(w.stdout.String(), " run --runtime rdma-macvlan ") {
		t.Errorf("--plugin before the command: status %d\n%s%s", rc, w.stdout.String(), w.stderr.String())
	}
	if rc := w.run("rdma", "run", "--plugin=roce-net:v2", "--no-wait", "--dry-run", "--net", "roce", "img"); rc != 0 {
		t.Errorf("--plugin among run's flags: status %d\n%s", rc, w.stderr.String())
	}
	w.vars[envPlugin] = "roce-net"
	if rc := w.run("rdma", "ls"); rc != 0 || !strings.Contains(w.stdout.String(), "roce-net:v2") {
		t.Errorf("RDMA_MACVLAN_PLUGIN: status %d\n%s%s", rc, w.stdout.String(), w.stderr.String())
	}
}

// TestPluginByManifest: a plugin installed under any name or alias (docker
// plugin install REPO:TAG --alias roce) is rdma-macvlan by its manifest,
// without --plugin; the repository's own config.json is such a manifest.
func TestPluginByManifest(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p docker.Plugin
	if err := json.Unmarshal(b, &p.Config); err != nil {
		t.Fatal(err)
	}
	if !isRDMAPlugin(p) {
		t.Fatalf("config.json is not recognised as rdma-macvlan's manifest: %+v", p.Config)
	}

	w := newWorld(t)
	w.info("28.2.2")
	w.plugin("roce:latest", pluginID, true, nil)
	w.daemon(pluginID, readFixture(t, "status.json"))
	w.network("fabric", netRoce, "roce:latest", map[string]string{"parent": "ens3np0"}, nil)
	w.network("plain", netOther, "bridge", map[string]string{}, nil)
	if rc := w.run("rdma", "run", "--no-wait", "--dry-run", "--net", "fabric", "img"); rc != 0 || !strings.Contains(w.stdout.String(), " run --runtime rdma-macvlan ") {
		t.Errorf("run on a network of plugin roce:latest: status %d\n%s%s", rc, w.stdout.String(), w.stderr.String())
	}
	if rc := w.run("rdma", "ls"); rc != 0 || !strings.Contains(w.stdout.String(), "fabric") {
		t.Errorf("ls: status %d\n%s%s", rc, w.stdout.String(), w.stderr.String())
	}
	// Not rdma-macvlan: the message names the driver to use, exactly.
	rc := w.run("rdma", "run", "--no-wait", "--dry-run", "--net", "plain", "img")
	if want := "create one: docker network create -d roce:latest "; rc != exitRunFailed || !strings.Contains(w.stderr.String(), want) {
		t.Errorf("run on a bridge network: status %d, want %q in\n%s", rc, want, w.stderr.String())
	}
	if rc := w.run("rdma", "inspect", "plain"); rc != 1 || !strings.Contains(w.stderr.String(), "network plain has driver bridge, not rdma-macvlan") {
		t.Errorf("inspect plain: status %d\n%s", rc, w.stderr.String())
	}
}

func TestSocketOption(t *testing.T) {
	w := newWorld(t)
	w.info("20.10.24")
	sock := w.daemon("elsewhere", readFixture(t, "status.json"))
	w.network("roce", netRoce, "rdma-macvlan", map[string]string{"parent": "ens3np0"}, nil)
	// run asks no daemon: its --socket is accepted and changes nothing.
	if rc := w.run("rdma", "run", "--socket", sock, "--no-wait", "--dry-run", "--net", "roce", "img"); rc != 0 || !strings.Contains(w.stdout.String(), " run --runtime rdma-macvlan ") {
		t.Errorf("status %d\n%s%s", rc, w.stdout.String(), w.stderr.String())
	}
	w.vars[envSocket] = sock
	if rc := w.run("rdma", "ls"); rc != 0 || !strings.Contains(w.stdout.String(), "mlx5_0") {
		t.Errorf("RDMA_MACVLAN_SOCKET: status %d\n%s%s", rc, w.stdout.String(), w.stderr.String())
	}
}

func TestNames(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		same bool
	}{
		{"rdma-macvlan", "rdma-macvlan:latest", true},
		{"rdma-macvlan:latest", "rdma-macvlan:latest", true},
		{"rdma-macvlan:v1", "rdma-macvlan:latest", false},
		{"localhost:5000/rdma-macvlan", "localhost:5000/rdma-macvlan:latest", true},
		{"localhost:5000/rdma-macvlan", "rdma-macvlan", false},
	} {
		if got := sameName(tt.a, tt.b); got != tt.same {
			t.Errorf("sameName(%q, %q) = %v", tt.a, tt.b, got)
		}
	}
	if baseName("registry.example.com:5000/team/rdma-macvlan:v1") != "rdma-macvlan" {
		t.Error("baseName")
	}
}

// TestLegacyPlugin: a daemon run by hand serves <plugins dir>/rdma-macvlan.sock
// and the driver is called rdma-macvlan.
func TestLegacyPlugin(t *testing.T) {
	w := newWorld(t)
	w.info("20.10.24")
	w.daemonAt(filepath.Join(w.pluginsDir, "rdma-macvlan.sock"), readFixture(t, "status.json"))
	w.network("roce", netRoce, "rdma-macvlan", map[string]string{"parent": "ens3np0"}, nil)
	if rc := w.run("run", "--no-wait", "--dry-run", "--net", "roce", "img"); rc != 0 || !strings.Contains(w.stdout.String(), " run --runtime rdma-macvlan ") {
		t.Errorf("status %d\n%s%s", rc, w.stdout.String(), w.stderr.String())
	}
	if rc := w.run("ls", "--format", "json"); rc != 0 || !strings.Contains(w.stdout.String(), `"source": "daemon"`) {
		t.Errorf("ls: status %d\n%s%s", rc, w.stdout.String(), w.stderr.String())
	}
}

// TestRemoteEngine: when Docker runs on another host, neither the plugin
// socket nor sysfs here are the engine's; docker rdma says so instead of
// reading them. docker rdma run needs neither: the runtime runs on the
// engine's host.
func TestRemoteEngine(t *testing.T) {
	w := newWorld(t)
	w.docker.on([]string{"info", "--format", "{{json .}}"}, `{"Name":"otherhost","ServerVersion":"28.2.2","CDISpecDirs":[],"Runtimes":{"rdma-macvlan":{"path":"/x"}}}`, "", 0)
	w.docker.on([]string{"version", "--format", "{{.Client.APIVersion}} {{.Server.APIVersion}}"}, "1.50 1.50\n", "", 0)
	// The plugin's socket is on the other host.
	w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"sysfs": "/sys"})
	w.network("roce", netRoce, "rdma-macvlan:latest", map[string]string{"parent": "ens3np0"}, nil)
	w.run("inspect", "roce")
	for _, s := range []string{"the Docker daemon runs on otherhost", "whose sysfs and CDI specs cannot be read from here"} {
		if !strings.Contains(w.stderr.String()+w.stdout.String(), s) {
			t.Errorf("ls does not say %q:\n%s%s", s, w.stdout.String(), w.stderr.String())
		}
	}
	if rc := w.run("run", "--no-wait", "--dry-run", "--net", "roce", "img"); rc != 0 || !strings.Contains(w.stdout.String(), " run --runtime rdma-macvlan ") {
		t.Errorf("run: status %d\n%s%s", rc, w.stdout.String(), w.stderr.String())
	}
}

// TestSynopsisNamesEveryOption: each command's synopsis names every option
// its --help lists, but --plugin and --socket, which docker rdma --help
// gives for every command; doctor's says it checks GPU placement.
func TestSynopsisNamesEveryOption(t *testing.T) {
	for name := range usages {
		w := newWorld(t)
		if rc := w.run("rdma", name, "--help"); rc != 0 {
			t.Fatalf("%s --help: status %d", name, rc)
		}
		help := w.stdout.String()
		synopsis, _, _ := strings.Cut(help, "\n")
		listed := 0
		for _, line := range strings.Split(help, "\n") {
			f := strings.Fields(line)
			if !strings.HasPrefix(line, "  -") || len(f) == 0 {
				continue
			}
			listed++
			opt := "-" + f[0]
			if opt != "--plugin" && opt != "--socket" && !strings.Contains(synopsis, "["+opt+" ") {
				t.Errorf("docker rdma %s: the synopsis %q does not name %s", name, synopsis, opt)
			}
		}
		if listed < 3 {
			t.Errorf("docker rdma %s --help lists %d options:\n%s", name, listed, help)
		}
	}
	w := newWorld(t)
	w.run("rdma", "doctor", "--help")
	if !strings.Contains(w.stdout.String(), "GPU placement") {
		t.Errorf("doctor --help does not say it checks GPU placement:\n%s", w.stdout.String())
	}
}
