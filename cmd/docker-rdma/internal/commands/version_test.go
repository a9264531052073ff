package commands

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersion: docker rdma version shows the CLI's version, each rdma-macvlan
// daemon's from its /v1/status with the -d name of its networks, and the
// engine's version and CDI support.
func TestVersion(t *testing.T) {
	w := newWorld(t)
	w.info("28.2.2", "/etc/cdi", "/var/run/cdi")
	w.plugin("roce:latest", pluginID, true, nil)
	w.daemon(pluginID, []byte(`{"version":"v0.2.0","networks":[]}`))
	w.plugin("rdma-macvlan-old:latest", "5e5e5e5e5e5e", true, nil)
	w.daemon("5e5e5e5e5e5e", readFixture(t, "status.json"))
	w.plugin("rdma-macvlan-off:latest", "6f6f6f6f6f6f", false, nil)
	w.daemonAt(filepath.Join(w.pluginsDir, "rdma-macvlan.sock"), []byte(`{"version":"v0.1.0","networks":[]}`))
	if rc := w.run("rdma", "version"); rc != 0 {
		t.Fatalf("status %d\n%s%s", rc, w.stdout.String(), w.stderr.String())
	}
	out := strings.Join(strings.Fields(w.stdout.String()), " ")
	for _, want := range []string{
		"docker rdma: 1.2.3",
		"engine: Docker 28.2.2, reads CDI specs from /etc/cdi, /var/run/cdi",
		"plugin roce:latest (id " + pluginID + "): v0.2.0 network driver: docker network create -d roce:latest ...",
		"plugin rdma-macvlan-old:latest (id 5e5e5e5e5e5e): unknown: its /v1/status has no version",
		"plugin rdma-macvlan-off:latest (id 6f6f6f6f6f6f): unknown: disabled (docker plugin enable rdma-macvlan-off:latest)",
		"plugin rdma-macvlan (legacy): v0.1.0 network driver: docker network create -d rdma-macvlan ...",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("docker rdma version does not say %q:\n%s", want, w.stdout.String())
		}
	}

	if rc := w.run("rdma", "version", "--format", "json"); rc != 0 {
		t.Fatalf("--format json: status %d\n%s", rc, w.stderr.String())
	}
	var v versionOutput
	if err := json.Unmarshal(w.stdout.Bytes(), &v); err != nil {
		t.Fatalf("--format json: %v\n%s", err, w.stdout.String())
	}
	if v.CLI != "1.2.3" || v.Engine != "28.2.2" || !v.CDI || len(v.Plugins) != 4 || v.Plugins[0].Version != "v0.2.0" || v.Plugins[0].Driver != "roce:latest" {
		t.Errorf("--format json: %+v", v)
	}

	// An engine without CDI; no plugin at all.
	w = newWorld(t)
	w.info("20.10.24")
	if rc := w.run("rdma", "version"); rc != 0 {
		t.Fatalf("status %d\n%s", rc, w.stderr.String())
	}
	out = strings.Join(strings.Fields(w.stdout.String()), " ")
	for _, want := range []string{"engine: Docker 20.10.24, no CDI", "plugin: none installed (docker plugin install REPO:VERSION --alias rdma-macvlan"} {
		if !strings.Contains(out, want) {
			t.Errorf("docker rdma version does not say %q:\n%s", want, w.stdout.String())
		}
	}
}

// TestDriverNameShown: where a user needs the driver name, docker rdma prints
// the exact one of this engine's plugin (with its tag).
func TestDriverNameShown(t *testing.T) {
	w := newWorld(t)
	w.info("28.2.2")
	w.plugin("roce:latest", pluginID, true, nil)
	w.daemon(pluginID, readFixture(t, "status.json"))
	// A network made with a name that no plugin has any more.
	w.network("gone", netRoce, "rdma-macvlan:v1", map[string]string{"parent": "ens3np0"}, nil)
	w.run("rdma", "ls")
	if want := "the rdma-macvlan plugin here is network driver roce:latest"; !strings.Contains(w.stdout.String()+w.stderr.String(), want) {
		t.Errorf("ls of a network whose driver is gone does not say %q:\n%s%s", want, w.stdout.String(), w.stderr.String())
	}
	w.run("rdma", "doctor")
	if want := "managed plugin roce:latest (id " + pluginID + ") is enabled; its networks: docker network create -d roce:latest"; !strings.Contains(w.stdout.String(), want) {
		t.Errorf("doctor does not say %q:\n%s", want, w.stdout.String())
	}
}
