package commands

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
)

// fakeRuntime makes an executable file to register as the runtime.
func fakeRuntime(t *testing.T, path string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexec runc \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// installed returns runtimes.rdma-macvlan and default-runtime of a
// daemon.json.
func installed(t *testing.T, file string) (entry map[string]any, def string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Runtimes map[string]map[string]any `json:"runtimes"`
		Default  string                    `json:"default-runtime"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v\n%s", file, err, b)
	}
	return cfg.Runtimes["rdma-macvlan"], cfg.Default
}

func TestRuntimeCommandLine(t *testing.T) {
	for _, c := range []struct {
		name   string
		args   []string
		status int
		stderr string
	}{
		{"no subcommand", []string{"runtime"}, exitUsage, "Usage:  docker rdma runtime install"},
		{"unknown subcommand", []string{"runtime", "add"}, exitUsage, `unknown command "add"`},
		{"unknown option", []string{"runtime", "install", "--force"}, exitUsage, "-force"},
		{"argument", []string{"runtime", "install", "extra"}, exitUsage, `unexpected argument "extra"`},
		{"uninstall argument", []string{"runtime", "uninstall", "--default"}, exitUsage, "-default"},
		{"empty next runtime", []string{"runtime", "install", "--next-runtime="}, exitUsage, "--next-runtime needs a runtime"},
		{"missing default path", []string{"runtime", "install"}, 1, "rdma-macvlan-runtime does not exist; install it with make install-cli, or copy it out of the managed plugin"},
		{"missing path", []string{"runtime", "install", "--path", "/nonexistent/rt"}, 1, "--path: /nonexistent/rt does not exist"},
		{"missing next runtime", []string{"runtime", "install", "--next-runtime", "/nonexistent/nvidia"}, 1, "--next-runtime: /nonexistent/nvidia does not exist"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			if got := w.run(c.args...); got != c.status {
				t.Errorf("status %d, want %d; stderr:\n%s", got, c.status, w.stderr.String())
			}
			if !strings.Contains(w.stderr.String(), c.stderr) {
				t.Errorf("stderr does not say %q:\n%s", c.stderr, w.stderr.String())
			}
			if _, err := os.Stat(w.env.DaemonJSON); err == nil {
				t.Errorf("a refused install wrote %s", w.env.DaemonJSON)
			}
		})
	}
	t.Run("not executable", func(t *testing.T) {
		w := newWorld(t)
		p := fakeRuntime(t, filepath.Join(t.TempDir(), "rt"))
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		if got := w.run("runtime", "install", "--path", p); got != 1 || !strings.Contains(w.stderr.String(), "is not executable (chmod 0755") {
			t.Errorf("status %d, stderr:\n%s", got, w.stderr.String())
		}
	})
	t.Run("usage lists it", func(t *testing.T) {
		w := newWorld(t)
		w.run("--help")
		if !strings.Contains(w.stdout.String(), "\n  runtime   ") {
			t.Errorf("docker rdma --help does not list runtime:\n%s", w.stdout.String())
		}
	})
}

func TestRuntimeHost(t *testing.T) {
	for _, c := range []struct {
		host, want, err string
	}{
		{"unix:///var/run/docker.sock", "unix:///var/run/docker.sock", ""},
		{"unix://", "unix:///var/run/docker.sock", ""},
		{"unix:///tmp/e1/docker.sock", "unix:///tmp/e1/docker.sock", ""},
		{"tcp://10.0.0.2:2376", "", "not a unix socket on this host"},
		{"ssh://me@node2", "", "not a unix socket on this host"},
		{"", "", "cannot tell which engine"},
	} {
		got, err := runtimeHost(docker.Endpoint{Host: c.host, Why: "why"})
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("runtimeHost(%q) = %q, %v; want %q, %q", c.host, got, err, c.want, c.err)
		}
	}
}

func TestRuntimeArgs(t *testing.T) {
	for _, c := range []struct {
		host, cdi, next string
		want            []string
	}{
		{"unix:///var/run/docker.sock", "/var/run/cdi", "", nil},
		{"unix:///tmp/e1/docker.sock", "/var/run/cdi", "", []string{"--docker-host", "unix:///tmp/e1/docker.sock"}},
		{"unix:///var/run/docker.sock", "/etc/cdi", "", []string{"--cdi-dir", "/etc/cdi"}},
		{"unix:///var/run/docker.sock", "/var/run/cdi", "nvidia-container-runtime", []string{"--next-runtime", "nvidia-container-runtime"}},
	} {
		if got := runtimeArgs(c.host, c.cdi, c.next); !reflect.DeepEqual(got, c.want) {
			t.Errorf("runtimeArgs(%q, %q, %q) = %q, want %q", c.host, c.cdi, c.next, got, c.want)
		}
	}
}

// install and uninstall through the command line: the options the engine
// and the plugin call for, the record, the file's mode, idempotence, the
// file back byte for byte.
func TestRuntimeInstallUninstall(t *testing.T) {
	w := newWorld(t)
	w.plugin("rdma-macvlan:latest", "pid1", true, map[string]string{"cdi": "/etc/cdi", "state": "/var/lib/rdma-macvlan"})
	rt := fakeRuntime(t, w.env.RuntimeBinary)
	file := w.env.DaemonJSON
	orig := "{\n  \"log-level\": \"warn\",\n  \"default-runtime\": \"runc\"\n}\n"
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}

	if got := w.run("runtime", "install", "--default"); got != 0 {
		t.Fatalf("install: status %d\n%s", got, w.stderr.String())
	}
	entry, def := installed(t, file)
	wantEntry := map[string]any{"path": rt, "runtimeArgs": []any{"--docker-host", w.env.DefaultHost, "--cdi-dir", "/etc/cdi"}}
	if !reflect.DeepEqual(entry, wantEntry) || def != "rdma-macvlan" {
		t.Errorf("daemon.json has %v, default-runtime %q; want %v, rdma-macvlan", entry, def, wantEntry)
	}
	for _, s := range []string{"+ runtimes: {}", "+ runtimes.rdma-macvlan: ", `~ default-runtime: "runc" -> "rdma-macvlan"`, file + ".rdma-macvlan", "kill -HUP"} {
		if !strings.Contains(w.stdout.String(), s) {
			t.Errorf("install does not say %q:\n%s", s, w.stdout.String())
		}
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("daemon.json mode after install: %v, %v; want 0600 as before", fi.Mode(), err)
	}
	if _, err := os.Stat(file + ".rdma-macvlan"); err != nil {
		t.Errorf("no record: %v", err)
	}
	installedBytes, _ := os.ReadFile(file)

	if got := w.run("runtime", "install", "--default"); got != 0 || !strings.Contains(w.stdout.String(), "nothing changed") {
		t.Errorf("second install: status %d, stdout:\n%s", got, w.stdout.String())
	}
	if b, _ := os.ReadFile(file); string(b) != string(installedBytes) {
		t.Errorf("second install changed the file:\n%s", b)
	}

	if got := w.run("runtime", "uninstall"); got != 0 {
		t.Fatalf("uninstall: status %d\n%s", got, w.stderr.String())
	}
	if b, _ := os.ReadFile(file); string(b) != orig {
		t.Errorf("after uninstall:\n%s\nwant\n%s", b, orig)
	}
	if !strings.Contains(w.stdout.String(), "systemctl restart docker") {
		t.Errorf("uninstall removed a runtime but does not say dockerd must restart:\n%s", w.stdout.String())
	}
	if _, err := os.Stat(file + ".rdma-macvlan"); !os.IsNotExist(err) {
		t.Errorf("the record is still there: %v", err)
	}
	if got := w.run("runtime", "uninstall"); got != 0 || !strings.Contains(w.stdout.String(), "nothing to undo") {
		t.Errorf("second uninstall: status %d, stdout:\n%s", got, w.stdout.String())
	}
}

func TestRuntimeInstallCreatesTheFile(t *testing.T) {
	w := newWorld(t)
	rt := fakeRuntime(t, w.env.RuntimeBinary)
	file := w.env.DaemonJSON
	if got := w.run("runtime", "install", "--next-runtime", "nvidia-container-runtime"); got != 0 {
		t.Fatalf("install: status %d\n%s", got, w.stderr.String())
	}
	b, _ := os.ReadFile(file)
	want := "{\n  \"runtimes\": {\n    \"rdma-macvlan\": {\n      \"path\": \"" + rt + "\",\n      \"runtimeArgs\": [\n        \"--docker-host\",\n        \"" + w.env.DefaultHost + "\",\n        \"--next-runtime\",\n        \"nvidia-container-runtime\"\n      ]\n    }\n  }\n}\n"
	if string(b) != want {
		t.Errorf("created\n%s\nwant\n%s", b, want)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("created with mode %v, %v; want 0644", fi.Mode(), err)
	}
	if got := w.run("runtime", "uninstall"); got != 0 {
		t.Fatalf("uninstall: status %d\n%s", got, w.stderr.String())
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("uninstall left the file install created: %v", err)
	}
}

func TestRuntimeInstallRefuses(t *testing.T) {
	for _, c := range []struct {
		name, doc, host, stderr string
	}{
		{"invalid JSON", "{\n  \"debug\": true,\n}\n", "", "daemon.json: invalid JSON at byte 20 (line 3, column 1)"},
		{"default runtime taken", `{"default-runtime": "nvidia", "runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}}}`, "",
			`default-runtime is "nvidia"; --default replaces only runc: to keep nvidia under rdma-macvlan, chain them: docker rdma runtime install --next-runtime /usr/bin/nvidia-container-runtime`},
		{"remote engine", `{}`, "tcp://10.0.0.2:2376", "the engine is tcp://10.0.0.2:2376 (DOCKER_HOST), not a unix socket on this host"},
		{"args a shell would split", `{}`, "unix:///tmp/my engine/docker.sock", "dockerd writes a runtime with runtimeArgs into a shell script, unquoted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			if c.host != "" {
				w.vars["DOCKER_HOST"] = c.host
			}
			fakeRuntime(t, w.env.RuntimeBinary)
			file := w.env.DaemonJSON
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(c.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := w.run("runtime", "install", "--default"); got != 1 {
				t.Errorf("status %d, want 1", got)
			}
			if !strings.Contains(w.stderr.String(), c.stderr) {
				t.Errorf("stderr does not say %q:\n%s", c.stderr, w.stderr.String())
			}
			if b, _ := os.ReadFile(file); string(b) != c.doc {
				t.Errorf("a refused install changed the file:\n%s", b)
			}
			if _, err := os.Stat(file + ".rdma-macvlan"); !os.IsNotExist(err) {
				t.Errorf("a refused install left a record: %v", err)
			}
		})
	}
}

// A plugin whose cdi mount is the runtime's default adds no --cdi-dir;
// plugins that disagree are refused.
func TestRuntimeCDIDir(t *testing.T) {
	for _, c := range []struct {
		name    string
		plugins map[string]string // plugin name -> cdi source
		want    []any
		err     string
	}{
		{"legacy plugin only", nil, nil, ""},
		{"default source", map[string]string{"rdma-macvlan:latest": "/var/run/cdi"}, nil, ""},
		{"etc cdi", map[string]string{"rdma-macvlan:latest": "/etc/cdi"}, []any{"--cdi-dir", "/etc/cdi"}, ""},
		{"two that disagree", map[string]string{"a:latest": "/etc/cdi", "b:latest": "/srv/cdi"}, nil, "write their CDI specs to different directories (a:latest in /etc/cdi; b:latest in /srv/cdi)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			names := []string{"a:latest", "b:latest", "rdma-macvlan:latest"}
			for i, n := range names {
				if src, ok := c.plugins[n]; ok {
					w.plugin(n, "id"+n[:1]+string(rune('0'+i)), true, map[string]string{"cdi": src})
				}
			}
			fakeRuntime(t, w.env.RuntimeBinary)
			got := w.run("runtime", "install")
			if c.err != "" {
				if got != 1 || !strings.Contains(w.stderr.String(), c.err) {
					t.Fatalf("status %d, stderr:\n%s", got, w.stderr.String())
				}
				return
			}
			if got != 0 {
				t.Fatalf("status %d\n%s", got, w.stderr.String())
			}
			entry, _ := installed(t, w.env.DaemonJSON)
			args, _ := entry["runtimeArgs"].([]any)
			// The world's engine is not the default socket: --docker-host first.
			if want := append([]any{"--docker-host", w.env.DefaultHost}, c.want...); !reflect.DeepEqual(args, want) {
				t.Errorf("runtimeArgs %v, want --docker-host ... then %v", args, c.want)
			}
		})
	}
}
