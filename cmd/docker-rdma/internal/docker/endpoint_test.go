package docker

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeContext puts context name, with the docker endpoint host, into the
// context store of config dir dir; tls adds TLS material.
func writeContext(t *testing.T, dir, name, host string, tls bool) {
	t.Helper()
	meta := filepath.Join(dir, "contexts", "meta", contextID(name))
	if err := os.MkdirAll(meta, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := `{"Name":"` + name + `","Metadata":{},"Endpoints":{"docker":{"Host":"` + host + `","SkipTLSVerify":false}}}`
	if err := os.WriteFile(filepath.Join(meta, "meta.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if tls {
		td := filepath.Join(dir, "contexts", "tls", contextID(name), "docker")
		if err := os.MkdirAll(td, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(td, "ca.pem"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func writeConfig(t *testing.T, dir, doc string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestResolveEndpoint(t *testing.T) {
	root := t.TempDir()
	cfg := filepath.Join(root, "cfg")       // DOCKER_CONFIG: current context "lab"
	other := filepath.Join(root, "other")   // --config: current context "remote"
	home := filepath.Join(root, "home")     // HOME: ~/.docker, current context "homectx"
	empty := filepath.Join(root, "empty")   // no config.json
	broken := filepath.Join(root, "broken") // config.json is not JSON
	notls := filepath.Join(root, "notls")   // current context "" explicitly
	writeConfig(t, cfg, `{"currentContext":"lab"}`)
	writeContext(t, cfg, "lab", "unix:///run/lab.sock", false)
	writeContext(t, cfg, "secure", "unix:///run/secure.sock", true)
	writeContext(t, cfg, "tcpctx", "tcp://10.0.0.1:2375", false)
	writeContext(t, cfg, "sshctx", "ssh://user@host", false)
	writeConfig(t, other, `{"currentContext":"remote"}`)
	writeContext(t, other, "remote", "unix:///run/remote.sock", false)
	writeContext(t, other, "lab", "unix:///run/other-lab.sock", false)
	writeConfig(t, filepath.Join(home, ".docker"), `{"currentContext":"homectx"}`)
	writeContext(t, filepath.Join(home, ".docker"), "homectx", "unix:///run/home.sock", false)
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, broken, `{"currentContext":`)
	writeConfig(t, notls, `{"auths":{}}`)

	const def = "unix:///run/default.sock"
	tests := []struct {
		name   string
		global []string
		env    map[string]string
		socket string // "" expects the docker CLI
		why    string // part of Why when socket is ""
		from   string // part of From
	}{
		{"nothing set: the default socket", nil, map[string]string{"DOCKER_CONFIG": empty}, "/run/default.sock", "", "default"},
		{"-H unix", []string{"-H", "unix:///run/h.sock"}, map[string]string{"DOCKER_CONFIG": cfg}, "/run/h.sock", "", "-H"},
		{"-H glued", []string{"-Hunix:///run/h.sock"}, nil, "/run/h.sock", "", "-H"},
		{"--host=", []string{"--host=unix:///run/h.sock"}, nil, "/run/h.sock", "", "-H"},
		{"-H wins over DOCKER_HOST", []string{"-H", "unix:///run/h.sock"}, map[string]string{"DOCKER_HOST": "unix:///run/env.sock"}, "/run/h.sock", "", "-H"},
		{"-H tcp", []string{"-H", "tcp://127.0.0.1:2375"}, nil, "", "not a local unix socket", "-H"},
		{"-H twice", []string{"-H", "unix:///a", "-H", "unix:///b"}, nil, "", "more than once", ""},
		{"--context and -H", []string{"--context", "lab", "-H", "unix:///a"}, map[string]string{"DOCKER_CONFIG": cfg}, "", "both --context and -H", ""},
		{"DOCKER_HOST unix", nil, map[string]string{"DOCKER_HOST": "unix:///run/env.sock", "DOCKER_CONFIG": cfg}, "/run/env.sock", "", "DOCKER_HOST"},
		{"DOCKER_HOST with spaces", nil, map[string]string{"DOCKER_HOST": " unix:///run/env.sock "}, "/run/env.sock", "", "DOCKER_HOST"},
		{"DOCKER_HOST unix:// alone is the default socket", nil, map[string]string{"DOCKER_HOST": "unix://"}, "/var/run/docker.sock", "", "DOCKER_HOST"},
		{"DOCKER_HOST tcp", nil, map[string]string{"DOCKER_HOST": "tcp://127.0.0.1:2375"}, "", "not a local unix socket", "DOCKER_HOST"},
		{"DOCKER_HOST ssh", nil, map[string]string{"DOCKER_HOST": "ssh://me@engine"}, "", "not a local unix socket", "DOCKER_HOST"},
		{"DOCKER_HOST a bare path", nil, map[string]string{"DOCKER_HOST": "/run/env.sock"}, "", "not a local unix socket", "DOCKER_HOST"},
		{"DOCKER_HOST wins over DOCKER_CONTEXT", nil, map[string]string{"DOCKER_HOST": "unix:///run/env.sock", "DOCKER_CONTEXT": "lab", "DOCKER_CONFIG": cfg}, "/run/env.sock", "", "DOCKER_HOST"},
		{"DOCKER_HOST wins over the current context", nil, map[string]string{"DOCKER_HOST": "unix:///run/env.sock", "DOCKER_CONFIG": cfg}, "/run/env.sock", "", "DOCKER_HOST"},
		{"--context wins over DOCKER_HOST", []string{"--context", "lab"}, map[string]string{"DOCKER_HOST": "unix:///run/env.sock", "DOCKER_CONFIG": cfg}, "/run/lab.sock", "", "context lab (--context)"},
		{"-c glued", []string{"-clab"}, map[string]string{"DOCKER_CONFIG": cfg}, "/run/lab.sock", "", "context lab"},
		{"--context default uses DOCKER_HOST", []string{"--context", "default"}, map[string]string{"DOCKER_HOST": "unix:///run/env.sock", "DOCKER_CONFIG": cfg}, "/run/env.sock", "", "context default"},
		{"--context default without DOCKER_HOST", []string{"--context=default"}, map[string]string{"DOCKER_CONFIG": cfg}, "/run/default.sock", "", "context default"},
		{"--context missing", []string{"--context", "nosuch"}, map[string]string{"DOCKER_CONFIG": cfg}, "", "cannot read context nosuch", ""},
		{"--context with TLS material", []string{"--context", "secure"}, map[string]string{"DOCKER_CONFIG": cfg}, "", "TLS material", ""},
		{"--context tcp", []string{"--context", "tcpctx"}, map[string]string{"DOCKER_CONFIG": cfg}, "", "not a local unix socket", ""},
		{"--context ssh", []string{"--context", "sshctx"}, map[string]string{"DOCKER_CONFIG": cfg}, "", "not a local unix socket", ""},
		{"DOCKER_CONTEXT", nil, map[string]string{"DOCKER_CONTEXT": "lab", "DOCKER_CONFIG": other}, "/run/other-lab.sock", "", "context lab (DOCKER_CONTEXT)"},
		{"DOCKER_CONTEXT wins over the current context", nil, map[string]string{"DOCKER_CONTEXT": "lab", "DOCKER_CONFIG": cfg}, "/run/lab.sock", "", "DOCKER_CONTEXT"},
		{"the current context of DOCKER_CONFIG", nil, map[string]string{"DOCKER_CONFIG": cfg, "HOME": home}, "/run/lab.sock", "", "current context in " + cfg},
		{"--config wins over DOCKER_CONFIG", []string{"--config", other}, map[string]string{"DOCKER_CONFIG": cfg}, "/run/remote.sock", "", "context remote"},
		{"--config also holds the contexts", []string{"--config=" + other, "--context", "lab"}, map[string]string{"DOCKER_CONFIG": cfg}, "/run/other-lab.sock", "", "context lab"},
		{"~/.docker without DOCKER_CONFIG", nil, map[string]string{"HOME": home}, "/run/home.sock", "", "context homectx"},
		{"no config.json: the default", nil, map[string]string{"DOCKER_CONFIG": empty}, "/run/default.sock", "", "default"},
		{"config.json without a current context", nil, map[string]string{"DOCKER_CONFIG": notls}, "/run/default.sock", "", "default"},
		{"config.json unreadable", nil, map[string]string{"DOCKER_CONFIG": broken}, "", "cannot read the docker CLI's config", ""},
		{"no config dir at all", nil, nil, "", "cannot tell the docker CLI's config directory", ""},
		{"--tlsverify", []string{"--tlsverify", "-H", "unix:///run/h.sock"}, nil, "", "--tlsverify is given", ""},
		{"--tls", []string{"--tls"}, map[string]string{"DOCKER_CONFIG": empty}, "", "--tls is given", ""},
		{"--tls=false", []string{"--tls=false"}, map[string]string{"DOCKER_CONFIG": empty}, "/run/default.sock", "", "default"},
		{"--tlscacert", []string{"--tlscacert", "/ca.pem", "-H", "unix:///run/h.sock"}, nil, "", "--tlscacert is given", ""},
		{"DOCKER_TLS_VERIFY", nil, map[string]string{"DOCKER_HOST": "unix:///run/env.sock", "DOCKER_TLS_VERIFY": "1"}, "", "DOCKER_TLS_VERIFY is set", ""},
		{"DOCKER_TLS", nil, map[string]string{"DOCKER_HOST": "unix:///run/env.sock", "DOCKER_TLS": "1"}, "", "DOCKER_TLS is set", ""},
		{"a context ignores the TLS variables", []string{"--context", "lab"}, map[string]string{"DOCKER_CONFIG": cfg, "DOCKER_TLS_VERIFY": "1"}, "/run/lab.sock", "", "context lab"},
		{"debug and log level do not matter", []string{"-D", "-l", "debug", "-H", "unix:///run/h.sock"}, nil, "/run/h.sock", "", "-H"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			e := ResolveEndpoint(tt.global, getenv, def)
			if e.Socket != tt.socket {
				t.Fatalf("socket %q, want %q (endpoint %+v)", e.Socket, tt.socket, e)
			}
			if tt.socket == "" && !strings.Contains(e.Why, tt.why) {
				t.Errorf("why %q, want it to say %q", e.Why, tt.why)
			}
			if tt.socket != "" && e.Why != "" {
				t.Errorf("direct endpoint with a reason not to be: %+v", e)
			}
			if !strings.Contains(e.From, tt.from) {
				t.Errorf("from %q, want it to say %q", e.From, tt.from)
			}
			if e.Direct() != (tt.socket != "") {
				t.Errorf("Direct() = %v", e.Direct())
			}
		})
	}
}

func TestDebugAsked(t *testing.T) {
	for _, tt := range []struct {
		global []string
		want   bool
	}{
		{nil, false},
		{[]string{"-D"}, true},
		{[]string{"--debug"}, true},
		{[]string{"--debug=false"}, false},
		{[]string{"-l", "debug"}, true},
		{[]string{"--log-level=DEBUG"}, true},
		{[]string{"-ldebug"}, true},
		{[]string{"-l", "info"}, false},
		{[]string{"-H", "unix:///x"}, false},
	} {
		if got := DebugAsked(tt.global); got != tt.want {
			t.Errorf("DebugAsked(%q) = %v, want %v", tt.global, got, tt.want)
		}
	}
}

// TestResolveEndpointReadsOnlyRegularFiles: a config.json or a context's
// meta.json that is a FIFO or a link to a device is refused, naming the
// file, instead of hanging on the FIFO or reading the device without end.
func TestResolveEndpointReadsOnlyRegularFiles(t *testing.T) {
	fifoCfg := filepath.Join(t.TempDir(), "cfg")
	if err := os.MkdirAll(fifoCfg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(fifoCfg, "config.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	zeroCtx := filepath.Join(t.TempDir(), "cfg")
	writeContext(t, zeroCtx, "lab", "unix:///run/lab.sock", false)
	meta := filepath.Join(zeroCtx, "contexts", "meta", contextID("lab"), "meta.json")
	if err := os.Remove(meta); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", meta); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		global []string
		cfg    string
		why    string
	}{
		{"config.json a FIFO", nil, fifoCfg, "cannot read the docker CLI's config " + filepath.Join(fifoCfg, "config.json") + ": read " + filepath.Join(fifoCfg, "config.json") + ": a FIFO (named pipe), not a regular file"},
		{"meta.json a link to /dev/zero", []string{"--context", "lab"}, zeroCtx, "cannot read context lab: read " + meta + ": a character device, not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan Endpoint, 1)
			go func() {
				done <- ResolveEndpoint(tc.global, func(k string) string { return map[string]string{"DOCKER_CONFIG": tc.cfg}[k] }, DefaultHost)
			}()
			select {
			case e := <-done:
				if e.Direct() || !strings.Contains(e.Why, tc.why) {
					t.Errorf("endpoint %+v: want the docker CLI, saying %q", e, tc.why)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("ResolveEndpoint did not return in 10 s")
			}
		})
	}
}
