package plugin_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/docker/go-plugins-helpers/network"
	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/plugin"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
	"github.com/sirupsen/logrus"
)

// newFuzzLinks is the link table of the handler fixture: two veth parents
// (MTU 1500 and 9000) and an InfiniBand netdev the driver must refuse.
func newFuzzLinks() *drivertest.Links {
	f := drivertest.NewLinks("p0")
	f.Add(netns.Link{Name: "p1", Kind: "veth", EncapType: "ether", MTU: 9000})
	f.Add(netns.Link{Name: "ib0", Kind: "ipoib", EncapType: "infiniband", MTU: 2044})
	return f
}

// IDs of the handler fixture's objects; the seed corpus uses them.
const (
	fuzzNet1 = "5d1c2e3f4a5b6c7d8e9f00112233445566778899aabbccddeeff001122334455" // bridge on p0
	fuzzNet2 = "7b2a3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809" // passthru on p1, gid_check=strict
	fuzzEP1  = "e1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f80" // on net1, joined, RDMA ready
	fuzzEP2  = "e2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091" // on net2, not joined
	fuzzEP3  = "e3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2" // on net1, not joined
)

// fuzzOps are the paths the fuzzer's op byte picks from.
var fuzzOps = []string{
	"CreateNetwork", "DeleteNetwork", "CreateEndpoint", "DeleteEndpoint", "EndpointOperInfo",
	"Join", "Leave", "ProgramExternalConnectivity", "RevokeExternalConnectivity",
	"DiscoverNew", "DiscoverDelete", "AllocateNetwork", "FreeNetwork", "GetCapabilities",
	"GwAllocCheck",
}

// answerWithin bounds every answer. The slowest legitimate one is
// ProgramExternalConnectivity waiting for a GID watch (fixtureGIDTimeout).
const (
	answerWithin      = 5 * time.Second
	fixtureGIDTimeout = 100 * time.Millisecond
	maxErrorText      = 1024
)

// handlerFixture is the world every fuzzed request starts from: two RDMA
// networks with three endpoints (one joined and RDMA-ready), recorded in a
// template state directory and link table that each run copies.
type handlerFixture struct {
	sysfs    string
	stateDir string
	cdiDir   string
	links    *drivertest.Links
}

func quietLogger() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// serve runs one request through h and returns the answer, failing on a
// panic or on no answer within answerWithin.
func serve(t testing.TB, h http.Handler, op string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/NetworkDriver."+op, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/vnd.docker.plugins.v1.2+json")
	rec := httptest.NewRecorder()
	done := make(chan string, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Sprintf("panic: %v\n%s", p, debug.Stack())
			}
		}()
		h.ServeHTTP(rec, req)
		done <- ""
	}()
	select {
	case p := <-done:
		if p != "" {
			t.Fatalf("%s %.300q: %s", op, body, p)
		}
	case <-time.After(answerWithin):
		t.Fatalf("%s %.300q: no answer within %s", op, body, answerWithin)
	}
	return rec
}

// start opens a driver on stateDir and returns the server that answers with it.
func (fx *handlerFixture) start(t testing.TB, stateDir, cdiDir string, links driver.Links, gidTimeout time.Duration) (*plugin.Server, *driver.Driver) {
	t.Helper()
	d, err := driver.New(driver.Config{StateDir: stateDir, Links: links, Log: quietLogger(), Sysfs: rdma.NewSysfs(fx.sysfs),
		CDIDir: cdiDir, GIDTimeout: gidTimeout, GIDPoll: 5 * time.Millisecond})
	if err != nil {
		t.Fatalf("driver.New: %v", err)
	}
	srv := plugin.NewServer(quietLogger())
	srv.SetDriver(d)
	return srv, d
}

func newHandlerFixture(f *testing.F) *handlerFixture {
	f.Helper()
	fx := &handlerFixture{sysfs: f.TempDir(), stateDir: f.TempDir(), cdiDir: f.TempDir(), links: newFuzzLinks()}
	for i, nd := range []string{"p0", "p1"} {
		o := rdmatest.MLX5Options{HCA: fmt.Sprintf("mlx5_%d", i), Netdev: nd, Uverbs: i,
			PCIAddr: fmt.Sprintf("0000:%02x:00.0", 3+i), MAC: fmt.Sprintf("a0:88:c2:5b:03:%02x", i)}
		if err := rdmatest.BuildMLX5(fx.sysfs, o); err != nil {
			f.Fatal(err)
		}
	}
	srv, d := fx.start(f, fx.stateDir, fx.cdiDir, fx.links, 5*time.Second)
	defer d.Close()
	must := func(op string, req any) {
		body, err := json.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		if rec := serve(f, srv, op, body); rec.Code != http.StatusOK {
			f.Fatalf("fixture %s: %s", op, rec.Body)
		}
	}
	must("CreateNetwork", map[string]any{"NetworkID": fuzzNet1,
		"Options":  map[string]any{"com.docker.network.enable_ipv6": false, "com.docker.network.generic": map[string]string{"parent": "p0"}},
		"IPv4Data": []*network.IPAMData{{AddressSpace: "LocalDefault", Pool: "10.5.0.0/24", Gateway: "10.5.0.1/24"}}})
	must("CreateNetwork", map[string]any{"NetworkID": fuzzNet2,
		"Options":  map[string]any{"com.docker.network.generic": map[string]string{"parent": "p1", "macvlan_mode": "passthru", "gid_check": "strict"}},
		"IPv4Data": []*network.IPAMData{{AddressSpace: "LocalDefault", Pool: "10.6.0.0/24", Gateway: "10.6.0.1/24"}}})
	must("CreateEndpoint", network.CreateEndpointRequest{NetworkID: fuzzNet1, EndpointID: fuzzEP1,
		Interface: &network.EndpointInterface{Address: "10.5.0.2/24"}})
	must("CreateEndpoint", network.CreateEndpointRequest{NetworkID: fuzzNet2, EndpointID: fuzzEP2,
		Interface: &network.EndpointInterface{Address: "10.6.0.2/24"}})
	must("CreateEndpoint", network.CreateEndpointRequest{NetworkID: fuzzNet1, EndpointID: fuzzEP3,
		Interface: &network.EndpointInterface{Address: "10.5.0.3/24", MacAddress: "02:42:0a:05:00:03"}})
	must("Join", network.JoinRequest{NetworkID: fuzzNet1, EndpointID: fuzzEP1, SandboxKey: "/var/run/docker/netns/4c1b0a9f8e7d"})
	// What the kernel does once libnetwork sets the container's address.
	if _, err := rdmatest.AddAddress(fx.sysfs, "mlx5_0", 1, "10.5.0.2", "eth0"); err != nil {
		f.Fatal(err)
	}
	// Wait until the watch has recorded it: a recorded ready endpoint gets
	// no new watch when a run starts, so nothing writes in the background.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		rec, err := os.ReadFile(filepath.Join(fx.stateDir, "endpoints", fuzzEP1+".json"))
		if err != nil {
			f.Fatal(err)
		}
		if strings.Contains(string(rec), `"rdma_ready": true`) {
			break
		}
		if time.Now().After(deadline) {
			f.Fatalf("fixture endpoint never recorded as RDMA-ready: %s", rec)
		}
	}
	return fx
}

// copyTree copies the regular files of src into dst.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// treeDump lists every entry under dir with the content of regular files.
func treeDump(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v\n", rel, d.Type())
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.Write(data)
			b.WriteByte('\n')
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// checkErrorText holds for every error the daemon answers with: the docker
// CLI prints it, so it is short and has no control characters.
func checkErrorText(t testing.TB, op, msg string) {
	t.Helper()
	switch {
	case msg == "":
		t.Errorf("%s: empty Err", op)
	case strings.ContainsFunc(msg, unicode.IsControl):
		t.Errorf("%s: error holds a control character: %q", op, msg)
	case len(msg) > maxErrorText:
		t.Errorf("%s: error is %d bytes long, more than %d: %.200q...", op, len(msg), maxErrorText, msg)
	}
}

// FuzzHandlers sends arbitrary bodies to every /NetworkDriver.* path of the
// real HTTP handler, driving a driver on a fake link table and a fake sysfs.
// Every request is answered within answerWithin without a panic; an answer
// other than 200 is a JSON {"Err": "..."} with a short printable text; a 200
// carries no Err; and a refused request leaves the link table, the state
// directory and the CDI directory exactly as they were.
func FuzzHandlers(f *testing.F) {
	fx := newHandlerFixture(f)
	f.Fuzz(func(t *testing.T, op uint8, body []byte) {
		path := fuzzOps[int(op)%len(fuzzOps)]
		base := t.TempDir()
		stateDir, cdiDir := filepath.Join(base, "state"), filepath.Join(base, "cdi")
		copyTree(t, fx.stateDir, stateDir)
		copyTree(t, fx.cdiDir, cdiDir)
		links := fx.links.Clone()
		srv, d := fx.start(t, stateDir, cdiDir, links, fixtureGIDTimeout)
		defer d.Close()
		beforeLinks, beforeState, beforeCDI := links.Dump(), treeDump(t, stateDir), treeDump(t, cdiDir)

		rec := serve(t, srv, path, body)

		var answer map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
			t.Fatalf("%s %.300q: answer %d is not a JSON object: %v: %q", path, body, rec.Code, err, rec.Body)
		}
		errText, hasErr := answer["Err"].(string)
		if rec.Code == http.StatusOK {
			if hasErr && errText != "" {
				t.Fatalf("%s %.300q: 200 with Err %q", path, body, errText)
			}
			return
		}
		if rec.Code != http.StatusInternalServerError || !hasErr {
			t.Fatalf("%s %.300q: answer %d %q is not an error answer {\"Err\": ...}", path, body, rec.Code, rec.Body)
		}
		checkErrorText(t, path, errText)
		d.Close() // stop GID watches before looking at the files
		if got := links.Dump(); got != beforeLinks {
			t.Fatalf("%s %.300q refused (%s) but changed the links:\n%s\nwas:\n%s", path, body, errText, got, beforeLinks)
		}
		if got := treeDump(t, stateDir); got != beforeState {
			t.Fatalf("%s %.300q refused (%s) but changed the state:\n%s\nwas:\n%s", path, body, errText, got, beforeState)
		}
		if got := treeDump(t, cdiDir); got != beforeCDI {
			t.Fatalf("%s %.300q refused (%s) but changed the CDI specs:\n%s\nwas:\n%s", path, body, errText, got, beforeCDI)
		}
	})
}
