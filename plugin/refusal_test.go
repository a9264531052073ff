package plugin_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/plugin"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
	"github.com/sirupsen/logrus"
)

// A refused request is logged once as a warning and a failed one as an
// error: the engine shows plugin errors in its own log, and an operator
// looks there for failures, not for users' typos.
func TestRefusalsLogWarnFailuresLogError(t *testing.T) {
	sysfs := t.TempDir()
	if err := rdmatest.BuildMLX5(sysfs, rdmatest.MLX5Options{Netdev: "p0"}); err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	d, err := driver.New(driver.Config{StateDir: stateDir, Links: drivertest.NewLinks("p0"), Log: quietLogger(),
		Sysfs: rdma.NewSysfs(sysfs), CDIDir: t.TempDir(), GIDTimeout: time.Second, GIDPoll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var logged bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logged)
	log.SetFormatter(&logrus.JSONFormatter{})
	srv := plugin.NewServer(log)
	srv.SetDriver(d)

	create := func(opts map[string]string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{
			"NetworkID": "n1",
			"Options":   map[string]any{"com.docker.network.generic": opts},
			"IPv4Data":  []map[string]string{{"AddressSpace": "LocalDefault", "Pool": "10.5.0.0/24", "Gateway": "10.5.0.1/24"}},
		})
		logged.Reset()
		if rec := serve(t, srv, "CreateNetwork", body); rec.Code == http.StatusOK {
			t.Fatalf("CreateNetwork %s succeeded: %s", body, rec.Body)
		}
	}
	lastLine := func() map[string]any {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
			t.Fatalf("log %q: %v", logged.String(), err)
		}
		return m
	}

	create(map[string]string{"parent": "p0", "macvlan_mod": "bridge"})
	if m := lastLine(); m["level"] != "warning" || m["msg"] != "request refused" {
		t.Errorf("an unknown option is logged as %v %q, want a warning", m["level"], m["msg"])
	}
	// The state directory cannot take the network's record: a failure.
	netDir := filepath.Join(stateDir, "networks")
	if err := os.RemoveAll(netDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(netDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	create(map[string]string{"parent": "p0"})
	if m := lastLine(); m["level"] != "error" || m["msg"] != "request failed" {
		t.Errorf("a state write failure is logged as %v %q, want an error", m["level"], m["msg"])
	}
}
