package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/internal/engines"
)

// Recorded engines: testdata/api-VERSION holds what an engine answered on
// its socket (NAME.json, NAME.status, ping.headers) and what its docker CLI
// printed for the same questions (cli-NAME.json), recorded by
// testdata/record.sh: the oldest and the newest engine of the table
// (internal/engines), Debian's Docker 20.10 (API 1.41, CLI 20.10) and the
// current engine (moby 2.0.0-beta.24, API 1.56, CLI 28.2). A new oldest or
// newest engine needs its recording.
var recorded = []string{engines.Oldest().API, engines.Newest().API}

// Names in the recordings.
const (
	recNetwork   = "rmvrec"
	recContainer = "rmvrec-c"
	recPlugin    = "rmvrec:latest"
)

// engine serves recorded answers on a unix socket and counts requests.
type engine struct {
	sock string
	mu   sync.Mutex
	reqs []string
}

func (e *engine) requests() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.reqs...)
}

// recordedEngine serves testdata/api-dir as an engine whose /_ping says
// apiVersion ("" keeps the recorded header). Paths are answered in the
// recorded version only (the engine refuses others, as one that does not
// speak them would).
func recordedEngine(t *testing.T, dir, apiVersion string) *engine {
	t.Helper()
	base := filepath.Join("testdata", "api-"+dir)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(base, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	hdr, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(read("ping.headers")))), nil)
	if err != nil {
		t.Fatal(err)
	}
	if apiVersion == "" {
		apiVersion = hdr.Header.Get("Api-Version")
	}
	routes := map[string]string{
		"/info":                                 "info",
		"/plugins":                              "plugins",
		"/networks":                             "networks",
		"/networks/" + recNetwork:               "network",
		"/networks/no-such-net":                 "network-missing",
		"/containers/" + recContainer + "/json": "container",
	}
	e := &engine{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.reqs = append(e.reqs, r.URL.Path)
		e.mu.Unlock()
		if r.URL.Path == "/_ping" {
			w.Header().Set("Api-Version", apiVersion)
			_, _ = w.Write([]byte("OK"))
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/v"+dir+"/")
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"message":"client version not supported by this recording"}`))
			return
		}
		name, ok := routes["/"+rest]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"page not found"}`))
			return
		}
		code, _ := strconv.Atoi(strings.TrimSpace(string(read(name + ".status"))))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write(read(name + ".json"))
	}))
	sockDir, err := os.MkdirTemp("", "drapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	e.sock = filepath.Join(sockDir, "docker.sock")
	l, err := net.Listen("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return e
}

func readJSON(t *testing.T, dir, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "api-"+dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestAPIAnswersAsTheCLI: for each recorded engine, every question asked
// through the API decodes to exactly what the docker CLI's output of the
// same question decodes to.
func TestAPIAnswersAsTheCLI(t *testing.T) {
	ctx := context.Background()
	for _, ver := range recorded {
		t.Run(ver, func(t *testing.T) {
			e := recordedEngine(t, ver, "")
			a := NewAPI(e.sock, "", nil)

			info, err := a.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var cliInfo Info
			readJSON(t, ver, "cli-info.json", &cliInfo)
			if !reflect.DeepEqual(info, cliInfo) {
				t.Errorf("info: API %+v\nCLI %+v", info, cliInfo)
			}
			if info.Name == "" || info.ServerVersion == "" || !contains(info.Plugins.Network, "macvlan") {
				t.Errorf("info lacks the fields docker rdma reads: %+v", info)
			}
			if ver == "1.56" && len(info.CDISpecDirs) == 0 {
				t.Errorf("the current engine's info has no CDISpecDirs: %+v", info)
			}

			ps, err := a.Plugins(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var cliPs []Plugin
			readJSON(t, ver, "cli-plugins.json", &cliPs)
			if !reflect.DeepEqual(ps, cliPs) {
				t.Errorf("plugins: API %+v\nCLI %+v", ps, cliPs)
			}
			if len(ps) != 1 || ps[0].Name != recPlugin || ps[0].Config.Interface.Socket != "rdma-macvlan.sock" || ps[0].MountSource("sysfs") == "" {
				t.Errorf("plugins lack the fields docker rdma reads: %+v", ps)
			}

			n, err := a.NetworkInspect(ctx, recNetwork)
			if err != nil {
				t.Fatal(err)
			}
			var cliNets []Network
			readJSON(t, ver, "cli-network.json", &cliNets)
			if len(cliNets) != 1 || !reflect.DeepEqual(n, cliNets[0]) {
				t.Errorf("network: API %+v\nCLI %+v", n, cliNets)
			}
			if n.Driver != recPlugin || n.Options["parent"] == "" || len(n.IPAM.Config) != 1 || len(n.Containers) != 1 {
				t.Errorf("network lacks the fields docker rdma reads: %+v", n)
			}

			c, err := a.ContainerInspect(ctx, recContainer)
			if err != nil {
				t.Fatal(err)
			}
			var cliCs []Container
			readJSON(t, ver, "cli-container.json", &cliCs)
			if len(cliCs) != 1 || !reflect.DeepEqual(c, cliCs[0]) {
				t.Errorf("container: API %+v\nCLI %+v", c, cliCs)
			}
			if !c.State.Running || c.State.Pid == 0 || !(contains(c.HostConfig.CapAdd, "IPC_LOCK") || contains(c.HostConfig.CapAdd, "CAP_IPC_LOCK")) || len(c.HostConfig.Ulimits) != 1 || len(c.NetworkSettings.Networks) != 1 {
				t.Errorf("container lacks the fields docker rdma reads: %+v", c)
			}

			nets, err := a.Networks(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var cliList []NetworkSummary
			b, _ := os.ReadFile(filepath.Join("testdata", "api-"+ver, "cli-networks.json"))
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var s NetworkSummary
				if err := json.Unmarshal([]byte(line), &s); err != nil {
					t.Fatal(err)
				}
				cliList = append(cliList, s)
			}
			sort.Slice(cliList, func(i, j int) bool { return cliList[i].Name < cliList[j].Name })
			if !reflect.DeepEqual(nets, cliList) {
				t.Errorf("networks: API %+v\nCLI %+v", nets, cliList)
			}

			for _, r := range e.requests() {
				if r != "/_ping" && !strings.HasPrefix(r, "/v"+ver+"/") {
					t.Errorf("request %s not in the engine's version %s", r, ver)
				}
			}
			if got := e.requests(); len(got) == 0 || got[0] != "/_ping" || count(got, "/_ping") != 1 {
				t.Errorf("requests %q: want one /_ping, first", got)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

func TestAPIVersionNegotiation(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name, dir, engineSays, pinned, want string
	}{
		{"20.10 speaks 1.41", "1.41", "", "", "1.41"},
		{"the current engine speaks 1.56", "1.56", "", "", "1.56"},
		{"a newer engine is asked in MaxAPIVersion", "1.56", "1.99", "", MaxAPIVersion},
		{"a newer major version too", "1.56", "2.3", "", MaxAPIVersion},
		{"DOCKER_API_VERSION is used as is", "1.41", "1.56", "1.41", "1.41"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := recordedEngine(t, tt.dir, tt.engineSays)
			a := NewAPI(e.sock, tt.pinned, nil)
			v, err := a.Version(ctx)
			if err != nil || v != tt.want {
				t.Fatalf("Version() = %q, %v; want %q", v, err, tt.want)
			}
			if _, err := a.Info(ctx); err != nil && tt.want == tt.dir {
				t.Fatalf("Info in %s: %v", v, err)
			}
			pings := count(e.requests(), "/_ping")
			if tt.pinned != "" && pings != 0 || tt.pinned == "" && pings != 1 {
				t.Errorf("%d pings with DOCKER_API_VERSION %q", pings, tt.pinned)
			}
		})
	}
	for _, bad := range []string{"", "1", "x.y", "1.41.0", "1.-1"} {
		if _, ok := parseVersion(bad); ok {
			t.Errorf("parseVersion(%q) accepted", bad)
		}
	}
	a := NewAPI(filepath.Join(t.TempDir(), "none.sock"), "latest", nil)
	if _, err := a.Version(ctx); err == nil || !strings.Contains(err.Error(), "DOCKER_API_VERSION") {
		t.Errorf("DOCKER_API_VERSION=latest: %v", err)
	}
}

func TestAPIErrors(t *testing.T) {
	ctx := context.Background()
	for _, ver := range recorded {
		e := recordedEngine(t, ver, "")
		a := NewAPI(e.sock, "", nil)
		_, err := a.NetworkInspect(ctx, "no-such-net")
		var ae *APIError
		if !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Message != "network no-such-net not found" {
			t.Errorf("%s: missing network: %v", ver, err)
		}
		if _, err := a.NetworkInspect(ctx, "a?b"); err == nil {
			t.Errorf("%s: a name with ? was asked", ver)
		}
	}
	a := NewAPI(filepath.Join(t.TempDir(), "none.sock"), "", nil)
	if _, err := a.Info(ctx); err == nil || !strings.Contains(err.Error(), "none.sock") {
		t.Errorf("no engine: %v", err)
	}
}

// fakeCLI is a docker executable that logs its arguments to DIR/calls and
// answers network inspect with out, anything else with an error.
func fakeCLI(t *testing.T, out string) (path, calls string) {
	t.Helper()
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$*\" >>'" + calls + "'\n" +
		"case \"$*\" in\n\"network inspect -- \"*) cat <<'EOF'\n" + out + "\nEOF\n;;\n" +
		"\"container inspect -- \"*) echo 'Error: No such container: '\"$4\" >&2; exit 1;;\n" +
		"*) echo \"fake docker: $*\" >&2; exit 99;;\nesac\n"
	path = filepath.Join(dir, "docker")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, calls
}

func readCalls(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestCLIAsksTheAPIFirst: with an API, the CLI's methods answer from it
// and run no docker command; what the API does not answer with 200 is
// asked with the docker CLI, whose error (or answer) is returned.
func TestCLIAsksTheAPIFirst(t *testing.T) {
	ctx := context.Background()
	e := recordedEngine(t, "1.41", "")
	path, calls := fakeCLI(t, `[{"Name":"other","Id":"fromcli","Driver":"bridge"}]`)
	var dbg strings.Builder
	c := &CLI{Path: path, Debug: &dbg}
	c.API = NewAPI(e.sock, "", c.Debugf)

	n, err := c.NetworkInspect(ctx, recNetwork)
	if err != nil || n.Name != recNetwork || n.Driver != recPlugin {
		t.Fatalf("network from the API: %+v, %v", n, err)
	}
	if _, err := c.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if ps, err := c.Plugins(ctx); err != nil || len(ps) != 1 {
		t.Fatalf("plugins: %v %v", ps, err)
	}
	if ct, err := c.ContainerInspect(ctx, recContainer); err != nil || !ct.State.Running {
		t.Fatalf("container: %+v %v", ct, err)
	}
	if got := readCalls(t, calls); got != nil {
		t.Fatalf("docker ran with an API that answers: %q", got)
	}
	if !strings.Contains(dbg.String(), "docker rdma: engine API GET /v1.41/networks/"+recNetwork+": 200") {
		t.Errorf("debug lines:\n%s", dbg.String())
	}

	// The API says 404: the docker CLI is asked, and its answer counts.
	n, err = c.NetworkInspect(ctx, "no-such-net")
	if err != nil || n.ID != "fromcli" {
		t.Fatalf("network the API does not know: %+v, %v", n, err)
	}
	_, err = c.ContainerInspect(ctx, "no-such-ctr")
	var de *Error
	if !errors.As(err, &de) || !strings.Contains(de.Stderr, "No such container: no-such-ctr") {
		t.Fatalf("missing container: want the docker CLI's error, got %v", err)
	}
	want := []string{"network inspect -- no-such-net", "container inspect -- no-such-ctr"}
	if got := readCalls(t, calls); !reflect.DeepEqual(got, want) {
		t.Errorf("docker calls %q, want %q", got, want)
	}
	if !strings.Contains(dbg.String(), "404 Not Found: network no-such-net not found: asking the docker CLI instead") {
		t.Errorf("debug lines:\n%s", dbg.String())
	}

	// No engine on the socket: everything goes to the docker CLI.
	path, calls = fakeCLI(t, `[{"Name":"x","Id":"fromcli"}]`)
	c = &CLI{Path: path, API: NewAPI(filepath.Join(t.TempDir(), "gone.sock"), "", nil)}
	if n, err := c.NetworkInspect(ctx, "x"); err != nil || n.ID != "fromcli" {
		t.Fatalf("without an engine: %+v %v", n, err)
	}
	if got := readCalls(t, calls); len(got) != 1 {
		t.Errorf("docker calls %q", got)
	}
}

// TestPrefetch: questions asked ahead are answered once, side by side;
// the answer is taken by the first call, the next asks again.
func TestPrefetch(t *testing.T) {
	ctx := context.Background()
	e := recordedEngine(t, "1.56", "")
	path, calls := fakeCLI(t, "[]")
	c := &CLI{Path: path, API: NewAPI(e.sock, "", nil)}
	c.Prefetch(ctx, Ahead{Info: true, Plugins: true, Networks: []string{recNetwork, recNetwork}})
	// Asked before any call asks them.
	want := []string{"/v1.56/info", "/v1.56/plugins", "/v1.56/networks/" + recNetwork}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		missing := 0
		for _, w := range want {
			if count(e.requests(), w) == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prefetch did not ask %q ahead; asked %q", want, e.requests())
		}
	}
	if n, err := c.NetworkInspect(ctx, recNetwork); err != nil || n.Name != recNetwork {
		t.Fatalf("network: %+v %v", n, err)
	}
	if _, err := c.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Plugins(ctx); err != nil {
		t.Fatal(err)
	}
	reqs := e.requests()
	if count(reqs, "/v1.56/networks/"+recNetwork) != 1 || count(reqs, "/v1.56/info") != 1 || count(reqs, "/v1.56/plugins") != 1 || count(reqs, "/_ping") != 1 {
		t.Errorf("requests after prefetch and one call each: %q", reqs)
	}
	if _, err := c.NetworkInspect(ctx, recNetwork); err != nil {
		t.Fatal(err)
	}
	if count(e.requests(), "/v1.56/networks/"+recNetwork) != 2 {
		t.Errorf("a second call used the answer asked ahead again: %q", e.requests())
	}
	if got := readCalls(t, calls); got != nil {
		t.Errorf("docker ran: %q", got)
	}
	// Without an API, Prefetch asks nothing.
	(&CLI{Path: path}).Prefetch(ctx, Ahead{Info: true})
}

// serveEngine serves h on a unix socket in a short temporary directory and
// returns the socket. A handler that waits must also wait on a channel
// the test closes in a cleanup registered after this call (cleanups run
// last first): closing the server waits for its handlers.
func serveEngine(t *testing.T, h http.HandlerFunc) (sock string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "drapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock = filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return sock
}

// within runs f and fails the test when it has not returned in 10 s.
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return in 10 s", what)
		return nil
	}
}

// TestAPIDeadline: an engine that does not answer, or stops halfway
// through its answer, costs one deadline: the error names the request and
// the engine and says it did not answer in time; the docker CLI is not
// run to ask it again, and later questions fail at once.
func TestAPIDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		// hang is the path the engine does not answer; halfway sends the
		// headers and part of the body first.
		hang    string
		halfway bool
		what    string
	}{
		{"no answer to the ping", "/_ping", false, "engine API GET /_ping"},
		{"no answer", "/v1.41/info", false, "engine API GET /v1.41/info"},
		{"an answer that stops halfway", "/v1.41/info", true, "engine API GET /v1.41/info"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var asked []string
			release := make(chan struct{})
			sock := serveEngine(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				asked = append(asked, r.URL.Path)
				mu.Unlock()
				if r.URL.Path == tc.hang {
					if tc.halfway {
						w.Header().Set("Content-Type", "application/json")
						_, _ = w.Write([]byte(`{"Name":`))
						w.(http.Flusher).Flush()
					}
					select {
					case <-release:
					case <-r.Context().Done():
					}
					return
				}
				if r.URL.Path == "/_ping" {
					w.Header().Set("Api-Version", "1.41")
					_, _ = w.Write([]byte("OK"))
					return
				}
				_, _ = w.Write([]byte(`[]`))
			})
			t.Cleanup(func() { close(release) })
			path, calls := fakeCLI(t, "[]")
			a := NewAPI(sock, "", nil)
			a.timeout = timeout
			c := &CLI{Path: path, API: a}
			err := within(t, "Info", func() error { _, err := c.Info(context.Background()); return err })
			var na *NoAnswerError
			want := tc.what + ": the engine at unix://" + sock + " did not answer in 300ms: check that dockerd runs"
			if !errors.As(err, &na) || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v; want a *NoAnswerError saying %q", err, want)
			}
			if got := readCalls(t, calls); got != nil {
				t.Errorf("the docker CLI was run after the engine did not answer: %q", got)
			}
			mu.Lock()
			before := len(asked)
			mu.Unlock()
			err = within(t, "Networks", func() error { _, err := c.Networks(context.Background()); return err })
			if !errors.As(err, &na) {
				t.Errorf("a question after the engine did not answer: %v, want its *NoAnswerError", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != before {
				t.Errorf("the engine was asked again after it did not answer: %q", asked[before:])
			}
		})
	}
}

// TestAPIAnswerBound: an answer over the bound, finite or endless, is not
// read past the bound: the error names the request and the engine, and
// the docker CLI is not run to read it again. An answer of exactly the
// bound is read.
func TestAPIAnswerBound(t *testing.T) {
	const bound = 1 << 20
	// stopAt ends an endless answer that nobody stops reading (in
	// bytes), so that a client without a bound fails instead of eating the
	// memory of the test.
	const stopAt = 64 * bound
	info := func(size int) []byte {
		b := []byte(`{"Name":"`)
		b = append(b, strings.Repeat("a", size-len(b)-2)...)
		return append(b, `"}`...)
	}
	for _, tc := range []struct {
		name    string
		body    []byte // nil: endless
		tooBig  bool
		maxSent int64 // the most the engine may have sent; 0: no check
	}{
		{"exactly the bound", info(bound), false, 0},
		{"one byte over", info(bound + 1), true, 0},
		{"endless", nil, true, stopAt / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent atomic.Int64
			sock := serveEngine(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/_ping" {
					w.Header().Set("Api-Version", "1.41")
					_, _ = w.Write([]byte("OK"))
					return
				}
				if tc.body != nil {
					_, _ = w.Write(tc.body)
					return
				}
				chunk := []byte(strings.Repeat("a", 64<<10))
				_, _ = w.Write([]byte(`{"Name":"`))
				for sent.Load() < stopAt {
					n, err := w.Write(chunk)
					sent.Add(int64(n))
					if err != nil {
						return
					}
				}
			})
			path, calls := fakeCLI(t, "[]")
			a := NewAPI(sock, "", nil)
			a.maxAnswer = bound
			c := &CLI{Path: path, API: a}
			var got Info
			err := within(t, "Info", func() error {
				var err error
				got, err = c.Info(context.Background())
				return err
			})
			if !tc.tooBig {
				if err != nil || len(got.Name) != bound-len(`{"Name":""}`) {
					t.Fatalf("an answer of the bound: %d bytes of name, %v", len(got.Name), err)
				}
				return
			}
			var tl *TooLargeError
			want := "engine API GET /v1.41/info: the answer of the engine at unix://" + sock + " is over 1 MiB"
			if !errors.As(err, &tl) || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v; want a *TooLargeError saying %q", err, want)
			}
			if got := readCalls(t, calls); got != nil {
				t.Errorf("the docker CLI was run to read the answer again: %q", got)
			}
			if tc.maxSent > 0 && sent.Load() > tc.maxSent {
				t.Errorf("the engine sent %d bytes before the client stopped reading", sent.Load())
			}
		})
	}
}

// TestAPIReadsABigNetwork: the bound is far above a real answer: a
// network with 10,000 containers is read.
func TestAPIReadsABigNetwork(t *testing.T) {
	containers := map[string]NetworkContainer{}
	for i := range 10000 {
		id := fmt.Sprintf("%064x", i)
		containers[id] = NetworkContainer{Name: "worker-" + strconv.Itoa(i), EndpointID: id, MacAddress: "02:42:c0:a8:07:02",
			IPv4Address: "10.1.2.3/16", IPv6Address: "fd00::1:2:3/64"}
	}
	body, err := json.Marshal(map[string]any{"Name": "big", "Id": strings.Repeat("b", 64), "Driver": "rdma-macvlan:latest", "Containers": containers})
	if err != nil {
		t.Fatal(err)
	}
	sock := serveEngine(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/_ping" {
			w.Header().Set("Api-Version", "1.41")
			return
		}
		_, _ = w.Write(body)
	})
	n, err := NewAPI(sock, "", nil).NetworkInspect(context.Background(), "big")
	if err != nil || len(n.Containers) != 10000 {
		t.Fatalf("a network of %d bytes with 10,000 containers: %d containers, %v", len(body), len(n.Containers), err)
	}
}

// slowCLI is a docker executable that logs its arguments to DIR/calls and
// then waits far longer than any test.
func slowCLI(t *testing.T) (path, calls string) {
	t.Helper()
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$*\" >>'" + calls + "'\nexec sleep 600\n"
	path = filepath.Join(dir, "docker")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, calls
}

// TestCLIDeadline: through the docker CLI too, each question that reads
// from the engine has a deadline, and the error names the engine.
func TestCLIDeadline(t *testing.T) {
	path, _ := slowCLI(t)
	c := &CLI{Path: path, Engine: "tcp://10.0.0.1:2375", Timeout: 300 * time.Millisecond}
	ctx := context.Background()
	for _, q := range []struct {
		what string
		ask  func() error
	}{
		{"docker info --format {{json .}}", func() error { _, err := c.Info(ctx); return err }},
		{"docker network ls --no-trunc --format {{json .}}", func() error { _, err := c.Networks(ctx); return err }},
		{"docker network inspect -- roce", func() error { _, err := c.NetworkInspect(ctx, "roce"); return err }},
		{"docker container inspect -- c1", func() error { _, err := c.ContainerInspect(ctx, "c1"); return err }},
		{"docker plugin ls --no-trunc --format {{.ID}}", func() error { _, err := c.Plugins(ctx); return err }},
		{"docker version --format", func() error { _, _, err := c.APIVersions(ctx); return err }},
	} {
		t.Run(q.what, func(t *testing.T) {
			err := within(t, q.what, q.ask)
			var na *NoAnswerError
			want := q.what
			if !errors.As(err, &na) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ": the engine at tcp://10.0.0.1:2375 did not answer in 300ms") {
				t.Fatalf("error %v; want a *NoAnswerError about %q and the engine", err, want)
			}
		})
	}
}

// TestCLIOutputBound: a docker command's output over the bound is not
// read past it, endless or not.
func TestCLIOutputBound(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "docker")
	// A JSON string of MaxAnswer bytes and one more (a network ls line
	// that decodes), then, for "endless", far more.
	script := "#!/bin/sh\nprintf '{\"Name\":\"'\nif [ \"$DRT_ENDLESS\" ]; then head -c " + strconv.Itoa(8*MaxAnswer) + " /dev/zero | tr '\\0' a; exit; fi\n" +
		"head -c " + strconv.Itoa(MaxAnswer-len(`{"Name":"`)-len(`"}`)+1) + " /dev/zero | tr '\\0' a\nprintf '\"}'\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &CLI{Path: path, Engine: "tcp://10.0.0.1:2375"}
	for _, endless := range []bool{false, true} {
		if endless {
			t.Setenv("DRT_ENDLESS", "1")
		}
		err := within(t, "Networks", func() error { _, err := c.Networks(context.Background()); return err })
		var tl *TooLargeError
		want := "docker network ls --no-trunc --format {{json .}}: the answer of the engine at tcp://10.0.0.1:2375 is over 32 MiB"
		if !errors.As(err, &tl) || !strings.Contains(err.Error(), want) {
			t.Errorf("endless %v: error %v; want a *TooLargeError saying %q", endless, err, want)
		}
	}
}
