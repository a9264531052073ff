package commands

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// answerFor returns what the fake docker prints for exactly args: its
// stdout and exit status; ok is false when it has no answer for them.
func (f *fakeDocker) answerFor(args []string) (stdout string, rc int, ok bool) {
	key := filepath.Join(f.dir, argsKey(args))
	rcb, err := os.ReadFile(key + ".rc")
	if err != nil {
		return "", 0, false
	}
	out, _ := os.ReadFile(key + ".out")
	rc, _ = strconv.Atoi(strings.TrimSpace(string(rcb)))
	return string(out), rc, true
}

// apiLog is the paths an engine API served by engineAPI was asked.
type apiLog struct {
	mu    sync.Mutex
	paths []string
}

func (l *apiLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.paths...)
}

// engineAPI serves the engine API (speaking version) on the world's
// default engine socket, answering each question with what the fake docker
// CLI prints for it: a world holds one set of answers, and a command must
// come out the same whichever way it asks.
func (w *world) engineAPI(version string) *apiLog {
	w.t.Helper()
	sock, _ := strings.CutPrefix(w.env.DefaultHost, "unix://")
	log := &apiLog{}
	fromCLI := func(rw http.ResponseWriter, args []string, one bool, wrap func(string) string) {
		out, rc, ok := w.docker.answerFor(args)
		if !ok || rc != 0 {
			rw.WriteHeader(http.StatusNotFound)
			_, _ = rw.Write([]byte(`{"message":"no such object: ` + args[len(args)-1] + `"}`))
			return
		}
		if one {
			var list []json.RawMessage
			if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 {
				rw.WriteHeader(http.StatusInternalServerError)
				return
			}
			out = string(list[0])
		}
		if wrap != nil {
			out = wrap(out)
		}
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write([]byte(out))
	}
	h := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		log.mu.Lock()
		log.paths = append(log.paths, r.URL.Path)
		log.mu.Unlock()
		if r.URL.Path == "/_ping" {
			rw.Header().Set("Api-Version", version)
			_, _ = rw.Write([]byte("OK"))
			return
		}
		p, ok := strings.CutPrefix(r.URL.Path, "/v"+version)
		if !ok {
			rw.WriteHeader(http.StatusBadRequest)
			return
		}
		switch {
		case p == "/info":
			fromCLI(rw, []string{"info", "--format", "{{json .}}"}, false, nil)
		case p == "/plugins":
			b, _ := json.Marshal(w.plugins)
			if len(w.plugins) == 0 {
				b = []byte("[]")
			}
			_, _ = rw.Write(b)
		case p == "/networks":
			b, _ := json.Marshal(w.networks)
			_, _ = rw.Write(b)
		case strings.HasPrefix(p, "/networks/"):
			fromCLI(rw, []string{"network", "inspect", "--", strings.TrimPrefix(p, "/networks/")}, true, nil)
		case strings.HasPrefix(p, "/containers/") && strings.HasSuffix(p, "/json"):
			fromCLI(rw, []string{"container", "inspect", "--", strings.TrimSuffix(strings.TrimPrefix(p, "/containers/"), "/json")}, true, nil)
		case strings.HasPrefix(p, "/images/") && strings.HasSuffix(p, "/json"):
			name := strings.TrimSuffix(strings.TrimPrefix(p, "/images/"), "/json")
			fromCLI(rw, []string{"image", "inspect", "--format", "{{json .Config}}", "--", name}, false,
				func(cfg string) string { return `{"Id":"sha256:1234","Config":` + strings.TrimSpace(cfg) + `}` })
		default:
			rw.WriteHeader(http.StatusNotFound)
			_, _ = rw.Write([]byte(`{"message":"page not found"}`))
		}
	})
	l, err := net.Listen("unix", sock)
	if err != nil {
		w.t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(l) }()
	w.t.Cleanup(func() { _ = srv.Close() })
	return log
}

// inspections are the docker CLI calls docker rdma makes to read Docker.
func inspections(calls [][]string) []string {
	var out []string
	for _, c := range calls {
		line := strings.Join(c, " ")
		for _, p := range []string{"info ", "network ", "plugin ", "container inspect "} {
			if strings.HasPrefix(line, p) || strings.Contains(line, " "+p) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

// TestRunAPIPath: docker rdma run prints and runs the same through the
// engine API as through the docker CLI, on engines of both API
// generations, and runs no docker command to read Docker when the API
// answers; what the API does not know is asked with the docker CLI, so the
// errors are the same too.
func TestRunAPIPath(t *testing.T) {
	cases := []struct {
		name      string
		args      []string
		cliOnly   bool // the API cannot answer everything: the docker CLI is run too
		wantFails bool
	}{
		{"one network", []string{"run", "--dry-run", "--net", "roce", "img"}, false, false},
		{"--no-wait", []string{"run", "--dry-run", "--no-wait", "--net", "roce", "img", "true"}, false, false},
		{"two networks", []string{"run", "--dry-run", "--net", "roce", "--net", "roce2", "img"}, false, false},
		{"a network that is not rdma-macvlan", []string{"run", "--dry-run", "--net", "plain", "img"}, false, true},
		{"an unknown network", []string{"run", "--dry-run", "--net", "nosuch", "img"}, true, true},
		{"--plugin", []string{"--plugin", "rdma-macvlan", "run", "--dry-run", "--no-wait", "--net", "roce", "img"}, false, false},
	}
	for _, version := range []string{"1.41", "1.56"} {
		for _, tc := range cases {
			t.Run(version+"/"+tc.name, func(t *testing.T) {
				viaCLI := standardWorld(t)
				rcCLI := viaCLI.run(tc.args...)
				viaAPI := standardWorld(t)
				log := viaAPI.engineAPI(version)
				rcAPI := viaAPI.run(tc.args...)
				// The worlds differ in their temporary directories only.
				outCLI := strings.ReplaceAll(viaCLI.stdout.String()+viaCLI.stderr.String(), viaCLI.docker.path, "DOCKER")
				outAPI := strings.ReplaceAll(viaAPI.stdout.String()+viaAPI.stderr.String(), viaAPI.docker.path, "DOCKER")
				if rcCLI != rcAPI || outCLI != outAPI {
					t.Fatalf("through the docker CLI: status %d\n%s\nthrough the API: status %d\n%s", rcCLI, outCLI, rcAPI, outAPI)
				}
				if (rcAPI != 0) != tc.wantFails {
					t.Fatalf("status %d: %s", rcAPI, viaAPI.stderr.String())
				}
				asked := inspections(viaAPI.docker.calls())
				if !tc.cliOnly && len(asked) > 0 {
					t.Errorf("the docker CLI was run to read Docker although the API answers: %q", asked)
				}
				if tc.cliOnly && len(asked) == 0 {
					t.Errorf("the API did not know the answer and the docker CLI was not asked")
				}
				if len(inspections(viaCLI.docker.calls())) == 0 {
					t.Errorf("the world without an API did not run the docker CLI")
				}
				paths := log.all()
				if len(paths) == 0 || paths[0] != "/_ping" {
					t.Fatalf("API requests %q: want /_ping first", paths)
				}
				for _, p := range paths[1:] {
					if !strings.HasPrefix(p, "/v"+version+"/") {
						t.Errorf("request %s not in the engine's version %s", p, version)
					}
				}
			})
		}
	}
}

// TestRunAPIExecutesDocker: through the API, the only docker command is
// docker run itself, with the same arguments and exit status.
func TestRunAPIExecutesDocker(t *testing.T) {
	w := standardWorld(t)
	w.engineAPI("1.56")
	w.docker.onFirst("run", "hello\n", "", 7)
	if rc := w.run("run", "--rm", "--net", "roce", "img"); rc != 7 {
		t.Fatalf("status %d, want docker's 7: %s", rc, w.stderr.String())
	}
	calls := w.docker.calls()
	if len(calls) != 1 || calls[0][0] != "run" {
		t.Fatalf("docker calls %q: want docker run alone", calls)
	}
	if w.stdout.String() != "hello\n" {
		t.Errorf("stdout %q", w.stdout.String())
	}
}

// TestEngineDebugLines: docker's -D makes docker rdma say which way it
// asks Docker and log each call; DOCKER_HOST on tcp goes through the
// docker CLI.
func TestEngineDebugLines(t *testing.T) {
	t.Run("the API", func(t *testing.T) {
		w := standardWorld(t)
		w.engineAPI("1.41")
		if rc := w.run("-D", "rdma", "run", "--dry-run", "--net", "roce", "img"); rc != 0 {
			t.Fatalf("status %d: %s", rc, w.stderr.String())
		}
		for _, s := range []string{
			"docker rdma: engine " + w.env.DefaultHost + " (the default): asking its API on ",
			"docker rdma: engine API GET /_ping: 200",
			"docker rdma: engine API GET /v1.41/networks/roce: 200",
			"docker rdma: engine API GET /v1.41/info: 200",
		} {
			if !strings.Contains(w.stderr.String(), s) {
				t.Errorf("stderr does not say %q:\n%s", s, w.stderr.String())
			}
		}
		if !strings.HasPrefix(w.stdout.String(), w.docker.path+" -D run ") {
			t.Errorf("stdout %q", w.stdout.String())
		}
	})
	t.Run("DOCKER_HOST on tcp", func(t *testing.T) {
		w := standardWorld(t)
		log := w.engineAPI("1.41")
		w.vars["DOCKER_HOST"] = "tcp://127.0.0.1:2375"
		w.run("-D", "rdma", "run", "--dry-run", "--net", "roce", "img")
		want := "docker rdma: engine tcp://127.0.0.1:2375 (DOCKER_HOST): not a local unix socket: asking Docker through the docker CLI (" + w.docker.path + ")"
		if !strings.Contains(w.stderr.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, w.stderr.String())
		}
		if !strings.Contains(w.stderr.String(), "docker rdma: running "+w.docker.path+" -D network inspect -- roce") {
			t.Errorf("no debug line for the docker CLI call:\n%s", w.stderr.String())
		}
		if got := log.all(); len(got) != 0 {
			t.Errorf("the API was asked: %q", got)
		}
		if len(inspections(w.docker.calls())) == 0 {
			t.Error("the docker CLI was not run")
		}
	})
	t.Run("silent without -D", func(t *testing.T) {
		w := standardWorld(t)
		w.engineAPI("1.41")
		if rc := w.run("run", "--dry-run", "--net", "roce", "img"); rc != 0 || strings.Contains(w.stderr.String(), "docker rdma:") {
			t.Errorf("status %d, stderr:\n%s", rc, w.stderr.String())
		}
	})
}
