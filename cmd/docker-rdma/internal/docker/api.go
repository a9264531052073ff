package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/internal/engines"
)

// MaxAPIVersion is the newest engine API version docker rdma asks in, the
// newest engine's of the table (internal/engines): an engine that speaks a
// newer one is asked in this one, an older engine in its own (Docker 20.10
// speaks 1.41 and no newer; the current engines accept nothing older than
// 1.44, so no one version suits both). The tests hold answers recorded
// from the table's oldest and newest engines.
var MaxAPIVersion = engines.Newest().API

// DefaultTimeout bounds each question docker rdma asks the engine, by its
// API or with the docker CLI. Every one of them is a read the engine
// answers from memory (ping, info, inspect, ls): none waits for anything
// to happen, so none needs longer; an engine that takes this long is hung.
const DefaultTimeout = 30 * time.Second

// MaxAnswer bounds the size of an answer read from the engine. The largest
// real ones are a network's inspect (each container on it adds about 300
// bytes: 10,000 containers are 3 MB), GET /networks on an engine with
// thousands of networks, and docker compose config of a big project; all
// stay in single megabytes. 32 MiB leaves room and keeps a runaway answer
// from taking the memory of the host.
const MaxAnswer = 32 << 20

// NoAnswerError is a question the engine did not answer in time.
type NoAnswerError struct {
	// What was asked: "engine API GET PATH" or "docker ARGS".
	What string
	// Engine is the engine's address.
	Engine string
	After  time.Duration
}

func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("%s: the engine at %s did not answer in %s: check that dockerd runs and answers (docker info; systemctl status docker)", e.What, e.Engine, e.After)
}

// TooLargeError is an answer over MaxAnswer bytes, not read past that.
type TooLargeError struct {
	What   string
	Engine string
	Max    int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s: the answer of the engine at %s is over %d MiB, more than Docker sends for this: not read (is it a Docker engine?)", e.What, e.Engine, e.Max>>20)
}

// final reports whether err is one the docker CLI is not asked again
// after: it would wait on the same engine, or read the same answer.
func final(err error) bool {
	var na *NoAnswerError
	var tl *TooLargeError
	return errors.As(err, &na) || errors.As(err, &tl)
}

// errNoAnswer is the cause of a request's own deadline.
var errNoAnswer = errors.New("the engine did not answer in time")

// API asks a Docker engine's HTTP API on its unix socket for what docker
// rdma reads before docker run: one process instead of a docker CLI start
// per question. Safe for concurrent use.
type API struct {
	socket string
	pinned string
	hc     *http.Client
	logf   func(format string, a ...any)
	// timeout bounds each request, answer included; maxAnswer bounds
	// each answer's body.
	timeout   time.Duration
	maxAnswer int64

	once    sync.Once // negotiates version
	version string
	verErr  error

	mu    sync.Mutex     // guards stuck
	stuck *NoAnswerError // the first request the engine did not answer
}

// NewAPI returns a client of the engine listening on the unix socket.
// pinned is DOCKER_API_VERSION: the version to use as is, as the docker
// CLI does; "" negotiates it with the engine (GET /_ping). logf, when not
// nil, gets a line per request.
func NewAPI(socket, pinned string, logf func(format string, a ...any)) *API {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &API{socket: socket, pinned: pinned, hc: &http.Client{Transport: tr}, logf: logf,
		timeout: DefaultTimeout, maxAnswer: MaxAnswer}
}

// APIError is an engine's answer other than 200 OK.
type APIError struct {
	Path       string
	StatusCode int
	Message    string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("engine API GET %s: %d %s: %s", e.Path, e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// Version returns the API version requests are made in: the pinned one,
// else the engine's (from GET /_ping) up to MaxAPIVersion. Asked once.
func (a *API) Version(ctx context.Context) (string, error) {
	a.once.Do(func() {
		if a.pinned != "" {
			if _, ok := parseVersion(a.pinned); !ok {
				a.verErr = fmt.Errorf("DOCKER_API_VERSION %q is not an API version such as 1.41", a.pinned)
				return
			}
			a.version = a.pinned
			return
		}
		resp, _, err := a.fetch(ctx, "/_ping")
		if err != nil {
			a.verErr = err
			return
		}
		if resp.StatusCode != http.StatusOK {
			a.verErr = &APIError{Path: "/_ping", StatusCode: resp.StatusCode}
			return
		}
		srv := resp.Header.Get("Api-Version")
		sv, ok := parseVersion(srv)
		if !ok {
			a.verErr = fmt.Errorf("engine API GET /_ping: no API version in its answer (Api-Version %q)", srv)
			return
		}
		a.version = srv
		if mv, _ := parseVersion(MaxAPIVersion); lessVersion(mv, sv) {
			a.version = MaxAPIVersion
		}
	})
	return a.version, a.verErr
}

// parseVersion reads an API version MAJOR.MINOR.
func parseVersion(v string) ([2]int, bool) {
	maj, min, ok := strings.Cut(v, ".")
	if !ok {
		return [2]int{}, false
	}
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if err1 != nil || err2 != nil || a < 0 || b < 0 {
		return [2]int{}, false
	}
	return [2]int{a, b}, true
}

func lessVersion(a, b [2]int) bool {
	return a[0] < b[0] || a[0] == b[0] && a[1] < b[1]
}

// fetch sends GET path (already versioned, or unversioned) to the engine
// and reads the answer, within the API's deadline and size bound. Once the
// engine has let a request run out of time, every later one fails at once
// with that error: a hung engine costs one deadline, not one per
// question.
func (a *API) fetch(ctx context.Context, path string) (*http.Response, []byte, error) {
	a.mu.Lock()
	stuck := a.stuck
	a.mu.Unlock()
	if stuck != nil {
		return nil, nil, stuck
	}
	rctx, cancel := context.WithTimeoutCause(ctx, a.timeout, errNoAnswer)
	defer cancel()
	resp, err := a.do(rctx, path)
	if err != nil {
		return nil, nil, a.late(rctx, path, err)
	}
	defer resp.Body.Close()
	// One byte more than the bound tells an answer over it.
	body, err := io.ReadAll(io.LimitReader(resp.Body, a.maxAnswer+1))
	if err != nil {
		return nil, nil, a.late(rctx, path, fmt.Errorf("engine API GET %s: read the answer: %w", path, err))
	}
	if int64(len(body)) > a.maxAnswer {
		a.logf("engine API GET %s: answer over %d bytes", path, a.maxAnswer)
		return nil, nil, &TooLargeError{What: "engine API GET " + path, Engine: "unix://" + a.socket, Max: a.maxAnswer}
	}
	return resp, body, nil
}

// late returns a *NoAnswerError when the request failed because its own
// deadline passed, else err.
func (a *API) late(rctx context.Context, path string, err error) error {
	if !errors.Is(context.Cause(rctx), errNoAnswer) {
		return err
	}
	e := &NoAnswerError{What: "engine API GET " + path, Engine: "unix://" + a.socket, After: a.timeout}
	a.mu.Lock()
	if a.stuck == nil {
		a.stuck = e
	}
	a.mu.Unlock()
	return e
}

// do sends GET path to the engine.
func (a *API) do(ctx context.Context, path string) (*http.Response, error) {
	u := url.URL{Scheme: "http", Host: "docker", Path: path}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "docker-rdma")
	t0 := time.Now()
	resp, err := a.hc.Do(req)
	if err != nil {
		a.logf("engine API GET %s on %s: %v", path, a.socket, err)
		return nil, fmt.Errorf("engine API GET %s on %s: %w", path, a.socket, err)
	}
	a.logf("engine API GET %s: %d in %.1f ms", path, resp.StatusCode, float64(time.Since(t0).Microseconds())/1000)
	return resp, nil
}

// get sends GET /vVERSION/path and decodes the answer into v.
func (a *API) get(ctx context.Context, path string, v any) error {
	ver, err := a.Version(ctx)
	if err != nil {
		return err
	}
	full := "/v" + ver + path
	resp, body, err := a.fetch(ctx, full)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var msg struct{ Message string }
		if json.Unmarshal(body, &msg) != nil || msg.Message == "" {
			msg.Message = strings.TrimSpace(string(body))
		}
		return &APIError{Path: full, StatusCode: resp.StatusCode, Message: msg.Message}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("engine API GET %s: decode the answer: %w", full, err)
	}
	return nil
}

// ref puts a name or ID into a path as the docker CLI does: as it is,
// refusing what would change the path's meaning.
func ref(kind, name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "?#%") {
		return "", fmt.Errorf("%s %q cannot be asked by name over the engine API", kind, name)
	}
	return name, nil
}

// Info is GET /info.
func (a *API) Info(ctx context.Context) (Info, error) {
	var i Info
	err := a.get(ctx, "/info", &i)
	return i, err
}

// Networks is GET /networks, sorted by name.
func (a *API) Networks(ctx context.Context) ([]NetworkSummary, error) {
	var nets []struct {
		ID                  string `json:"Id"`
		Name, Driver, Scope string
	}
	if err := a.get(ctx, "/networks", &nets); err != nil {
		return nil, err
	}
	out := make([]NetworkSummary, 0, len(nets))
	for _, n := range nets {
		out = append(out, NetworkSummary{ID: n.ID, Name: n.Name, Driver: n.Driver, Scope: n.Scope})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// NetworkInspect is GET /networks/NAME.
func (a *API) NetworkInspect(ctx context.Context, name string) (Network, error) {
	var n Network
	r, err := ref("network", name)
	if err != nil {
		return n, err
	}
	err = a.get(ctx, "/networks/"+r, &n)
	if err == nil && n.ID == "" {
		err = fmt.Errorf("engine API GET /networks/%s: an answer without a network ID", r)
	}
	return n, err
}

// ContainerInspect is GET /containers/NAME/json.
func (a *API) ContainerInspect(ctx context.Context, name string) (Container, error) {
	var c Container
	r, err := ref("container", name)
	if err != nil {
		return c, err
	}
	err = a.get(ctx, "/containers/"+r+"/json", &c)
	if err == nil && c.ID == "" {
		err = fmt.Errorf("engine API GET /containers/%s/json: an answer without a container ID", r)
	}
	return c, err
}

// Plugins is GET /plugins: every managed plugin, in full.
func (a *API) Plugins(ctx context.Context) ([]Plugin, error) {
	var ps []Plugin
	if err := a.get(ctx, "/plugins", &ps); err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, nil
	}
	return ps, nil
}
