package commands

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// fakeDocker is a docker executable that records its arguments and answers
// with canned output, keyed by its exact arguments (or, failing that, by
// its first argument, or a default).
type fakeDocker struct {
	t    *testing.T
	dir  string
	path string
}

func newFakeDocker(t *testing.T) *fakeDocker {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
d='` + dir + `'
printf '%s\037' "$@" >>"$d/calls"
printf '\036' >>"$d/calls"
key=$(printf '%s\037' "$@" | sha256sum | cut -c1-16)
for k in "$key" "first-$1" default; do
	if [ -e "$d/$k.rc" ]; then
		if [ -e "$d/$k.out" ]; then cat "$d/$k.out"; fi
		if [ -e "$d/$k.err" ]; then cat "$d/$k.err" >&2; fi
		exit "$(cat "$d/$k.rc")"
	fi
done
echo "fake docker: no answer for: $*" >&2
exit 99
`
	path := filepath.Join(dir, "docker")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return &fakeDocker{t: t, dir: dir, path: path}
}

func argsKey(args []string) string {
	h := sha256.New()
	for _, a := range args {
		h.Write([]byte(a))
		h.Write([]byte{0x1f})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// on answers the exact args with stdout, stderr and exit status rc.
func (f *fakeDocker) on(args []string, stdout, stderr string, rc int) {
	f.answer(argsKey(args), stdout, stderr, rc)
}

// onFirst answers every call whose first argument is first.
func (f *fakeDocker) onFirst(first, stdout, stderr string, rc int) {
	f.answer("first-"+first, stdout, stderr, rc)
}

func (f *fakeDocker) answer(key, stdout, stderr string, rc int) {
	f.t.Helper()
	for ext, v := range map[string]string{".out": stdout, ".err": stderr, ".rc": strconv.Itoa(rc)} {
		if err := os.WriteFile(filepath.Join(f.dir, key+ext), []byte(v), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
}

// calls returns every invocation's arguments, in order.
func (f *fakeDocker) calls() [][]string {
	data, err := os.ReadFile(filepath.Join(f.dir, "calls"))
	if err != nil {
		return nil
	}
	var out [][]string
	for _, rec := range strings.Split(string(data), "\x1e") {
		if rec == "" {
			continue
		}
		out = append(out, strings.Split(strings.TrimSuffix(rec, "\x1f"), "\x1f"))
	}
	return out
}

// lastCall returns the arguments of the last call whose first non-global
// argument is first.
func (f *fakeDocker) lastCall(first string) []string {
	var last []string
	for _, c := range f.calls() {
		for _, a := range c {
			if a == first {
				last = c
				break
			}
		}
	}
	return last
}

const testHost = "testhost"

// world is a fake Docker host: a fake docker CLI, plugin sockets in a
// short temporary directory, and the Env the commands run in.
type world struct {
	t              *testing.T
	docker         *fakeDocker
	env            *Env
	vars           map[string]string
	stdout, stderr bytes.Buffer
	pluginsDir     string

	networks []map[string]any
	plugins  []map[string]any
}

func newWorld(t *testing.T) *world {
	t.Helper()
	// Unix socket paths must stay under 108 bytes: t.TempDir() can be long.
	pd, err := os.MkdirTemp("", "drp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pd) })
	w := &world{t: t, docker: newFakeDocker(t), pluginsDir: pd, vars: map[string]string{}}
	w.vars[reexecEnv] = w.docker.path
	// The docker CLI's config: no context, so the engine is the default
	// one, a socket of this world where nothing answers unless a test
	// serves the engine API there (engineAPI).
	w.vars["DOCKER_CONFIG"] = t.TempDir()
	w.env = &Env{
		DefaultHost: "unix://" + filepath.Join(pd, "docker.sock"),
		Stdout:      &w.stdout,
		Stderr:      &w.stderr,
		Getenv:      func(k string) string { return w.vars[k] },
		PluginsDir:  pd,
		DevRoot:     t.TempDir(),
		Hostname:    func() (string, error) { return testHost, nil },
		UID:         1000,
		// Never the host's dockerd config or runtime.
		DaemonJSON:    filepath.Join(t.TempDir(), "docker", "daemon.json"),
		RuntimeBinary: filepath.Join(t.TempDir(), "rdma-macvlan-runtime"),
	}
	w.setNetworks()
	w.setPlugins()
	return w
}

// info makes docker info answer for an engine with these CDI spec dirs
// and the runtimes runc and rdma-macvlan.
func (w *world) info(version string, cdiDirs ...string) {
	w.infoRuntimes(version, []string{"runc", "rdma-macvlan"}, cdiDirs...)
}

// infoRuntimes is info with these runtimes.
func (w *world) infoRuntimes(version string, runtimes []string, cdiDirs ...string) {
	if cdiDirs == nil {
		cdiDirs = []string{}
	}
	rts := map[string]any{}
	for _, r := range runtimes {
		rts[r] = map[string]any{"path": "/usr/bin/" + r}
	}
	b, _ := json.Marshal(map[string]any{
		"Name": testHost, "ServerVersion": version, "KernelVersion": "6.1.0-18-amd64", "CDISpecDirs": cdiDirs, "Runtimes": rts,
	})
	w.docker.on([]string{"info", "--format", "{{json .}}"}, string(b)+"\n", "", 0)
	// The API versions the CLI and the engine speak (docker version).
	api := "1.50 1.50"
	if strings.HasPrefix(version, "20.") {
		api = "1.41 1.41"
	}
	w.docker.on([]string{"version", "--format", "{{.Client.APIVersion}} {{.Server.APIVersion}}"}, api+"\n", "", 0)
}

// network adds a network to docker network ls and inspect.
func (w *world) network(name, id, drv string, options map[string]string, containers map[string]any) {
	if containers == nil {
		containers = map[string]any{}
	}
	n := map[string]any{"Name": name, "Id": id, "Driver": drv, "Scope": "local", "Options": options, "Containers": containers}
	b, _ := json.Marshal([]any{n})
	w.docker.on([]string{"network", "inspect", "--", name}, string(b)+"\n", "", 0)
	w.docker.on([]string{"network", "inspect", "--", id}, string(b)+"\n", "", 0)
	w.networks = append(w.networks, n)
	w.setNetworks()
}

// ipam gives network name the engine's IPAM configs (Subnet, IPRange).
func (w *world) ipam(name string, configs ...map[string]string) {
	for _, n := range w.networks {
		if n["Name"] == name {
			n["IPAM"] = map[string]any{"Config": configs}
			b, _ := json.Marshal([]any{n})
			w.docker.on([]string{"network", "inspect", "--", name}, string(b)+"\n", "", 0)
			w.docker.on([]string{"network", "inspect", "--", n["Id"].(string)}, string(b)+"\n", "", 0)
		}
	}
}

func (w *world) setNetworks() {
	var sb strings.Builder
	for _, n := range w.networks {
		b, _ := json.Marshal(map[string]any{"ID": n["Id"], "Name": n["Name"], "Driver": n["Driver"], "Scope": "local"})
		sb.Write(b)
		sb.WriteByte('\n')
	}
	w.docker.on([]string{"network", "ls", "--no-trunc", "--format", "{{json .}}"}, sb.String(), "", 0)
}

// plugin adds a managed network plugin.
func (w *world) plugin(name, id string, enabled bool, mounts map[string]string) {
	w.pluginStale(name, id, enabled, mounts, mounts)
}

// pluginStale adds a plugin whose inspect shows the sources it mounts
// (Config.Mounts) and stale ones under Settings.Mounts, as an engine does
// after `docker plugin set` on an installed or upgraded plugin.
func (w *world) pluginStale(name, id string, enabled bool, mounts, stale map[string]string) {
	w.plugins = append(w.plugins, map[string]any{
		"Id": id, "Name": name, "Enabled": enabled,
		"Config": map[string]any{"Entrypoint": []string{"/rdma-macvlan"},
			"Interface": map[string]any{"Types": []string{"docker.networkdriver/1.0"}, "Socket": "rdma-macvlan.sock"},
			"Mounts":    mountList(mounts)},
		"Settings": map[string]any{"Mounts": mountList(stale), "Env": []string{}},
	})
	w.setPlugins()
}

func mountList(mounts map[string]string) []map[string]any {
	var ms []map[string]any
	keys := make([]string, 0, len(mounts))
	for k := range mounts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ms = append(ms, map[string]any{"Name": k, "Source": mounts[k], "Destination": "/" + k})
	}
	return ms
}

func (w *world) setPlugins() {
	var ids []string
	for _, p := range w.plugins {
		ids = append(ids, p["Id"].(string))
	}
	w.docker.on([]string{"plugin", "ls", "--no-trunc", "--format", "{{.ID}}"}, strings.Join(ids, "\n")+"\n", "", 0)
	if len(ids) > 0 {
		b, _ := json.Marshal(w.plugins)
		w.docker.on(append([]string{"plugin", "inspect"}, ids...), string(b)+"\n", "", 0)
	}
}

// container makes docker container inspect answer for name.
func (w *world) container(name string, c map[string]any) {
	b, _ := json.Marshal([]any{c})
	w.docker.on([]string{"container", "inspect", "--", name}, string(b)+"\n", "", 0)
}

// daemon serves status (JSON) as GET /v1/status on the managed plugin
// socket of plugin id.
func (w *world) daemon(id string, status []byte) string {
	w.t.Helper()
	return w.daemonAt(filepath.Join(w.pluginsDir, id, "rdma-macvlan.sock"), status)
}

// daemonAt serves status as GET /v1/status on the socket sock.
func (w *world) daemonAt(sock string, status []byte) string {
	w.t.Helper()
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		w.t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		w.t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.NotFound(rw, r)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write(status)
	})}
	go func() { _ = srv.Serve(l) }()
	w.t.Cleanup(func() { _ = srv.Close() })
	return sock
}

// run runs docker rdma with args and returns its status; output is in
// w.stdout and w.stderr (reset first).
func (w *world) run(args ...string) int {
	w.stdout.Reset()
	w.stderr.Reset()
	return Main(args, w.env, "1.2.3")
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	netRoce  = "1111111111111111111111111111111111111111111111111111111111111111"
	netRoce2 = "2222222222222222222222222222222222222222222222222222222222222222"
	netOther = "3333333333333333333333333333333333333333333333333333333333333333"
	pluginID = "9f1e2d3c4b5a"
)

// standardWorld is an engine with the managed plugin rdma-macvlan:latest
// (enabled, its daemon answering with testdata/status.json), the networks
// roce (mlx5_0, traffic class 106, service level 3) and roce2 (mlx5_1, port
// down, service level 5) on it, and a bridge network.
// cdiDirs are the engine's CDI spec dirs (none: no CDI).
func standardWorld(t *testing.T, cdiDirs ...string) *world {
	return standardWorldWith(t, readFixture(t, "status.json"), cdiDirs...)
}

// standardWorldWith is standardWorld with the daemon answering status.
func standardWorldWith(t *testing.T, status []byte, cdiDirs ...string) *world {
	w := newWorld(t)
	w.info("28.2.2", cdiDirs...)
	w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"state": "/var/lib/rdma-macvlan", "sysfs": "/sys", "cdi": "/var/run/cdi"})
	w.daemon(pluginID, status)
	w.network("roce", netRoce, "rdma-macvlan:latest", map[string]string{"parent": "ens3np0"}, map[string]any{
		"c1c1c1c1c1c1c1c1": map[string]any{"Name": "c1", "EndpointID": "aaaa00000001" + strings.Repeat("0", 52), "MacAddress": "02:42:c0:a8:07:02", "IPv4Address": "192.168.7.2/24"},
		"c2c2c2c2c2c2c2c2": map[string]any{"Name": "c2", "EndpointID": "bbbb00000002" + strings.Repeat("0", 52), "MacAddress": "02:42:c0:a8:07:03", "IPv4Address": "192.168.7.3/24"},
	})
	// roce2's service level is in Docker's options only (as a daemon
	// before the QoS options would not show it).
	w.network("roce2", netRoce2, "rdma-macvlan:latest", map[string]string{"parent": "ens4np0", "service_level": "5"}, nil)
	w.network("plain", netOther, "bridge", map[string]string{}, nil)
	return w
}

// writeCDISpec puts an rdma-macvlan spec for hca into dir.
func writeCDISpec(t *testing.T, dir, hca string) {
	t.Helper()
	spec := `{"cdiVersion":"0.5.0","kind":"rdma-macvlan/hca","devices":[{"name":"` + hca + `","containerEdits":{"deviceNodes":[{"path":"/dev/infiniband/uverbs0","type":"c","major":231,"minor":192},{"path":"/dev/infiniband/rdma_cm","type":"c","major":10,"minor":57}]}}]}`
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rdma-macvlan-"+hca+".json"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
}
