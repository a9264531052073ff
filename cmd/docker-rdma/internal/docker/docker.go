// Package docker talks to Docker for docker rdma: through the engine's API
// on its unix socket when the engine the docker CLI would use is known to
// be one (ResolveEndpoint), else, and for anything the API does not answer,
// by running the docker CLI, so that contexts, DOCKER_HOST, TLS settings
// and the CLI's config apply exactly as they do for the user's own
// commands, and errors read as the CLI's.
package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// CLI runs one docker executable with the global options the user gave.
type CLI struct {
	// Path is the docker executable (a name is looked up in PATH).
	Path string
	// Global are docker's global options (--context, -H, --config, --tls*,
	// ...), put before every command.
	Global []string
	// API, when not nil, answers the inspections (info, network,
	// container, plugin and image) in place of the docker CLI. A question
	// it does not answer with 200 OK is asked again with the docker CLI,
	// so that errors are the CLI's own.
	API *API
	// Debug, when not nil, gets a line per docker command run and per
	// API request.
	Debug io.Writer
	// Engine is the engine's address, for messages; "" when not known.
	Engine string
	// Timeout bounds each docker command that only reads from the engine
	// (info, version, inspect, ls); 0 is DefaultTimeout.
	Timeout time.Duration

	debugMu sync.Mutex // guards writes to Debug

	mu      sync.Mutex // guards pending
	pending map[string]*answer
}

// answer is one API question asked ahead (Prefetch).
type answer struct {
	done chan struct{}
	v    any
	err  error
}

// Debugf writes a debug line, when Debug is set.
func (c *CLI) Debugf(format string, a ...any) {
	if c.Debug == nil {
		return
	}
	c.debugMu.Lock()
	defer c.debugMu.Unlock()
	fmt.Fprintf(c.Debug, "docker rdma: "+format+"\n", a...)
}

// Ahead says which API questions Prefetch asks.
type Ahead struct {
	Info, Plugins bool
	Networks      []string
}

// Prefetch asks the engine's API, all at once, the questions the caller is
// about to ask one after the other. Each answer is taken by the first call
// that asks that question (the next one asks again). Without an API it does
// nothing.
func (c *CLI) Prefetch(ctx context.Context, q Ahead) {
	if c.API == nil {
		return
	}
	if q.Info {
		c.ahead("info", func() (any, error) { return c.API.Info(ctx) })
	}
	if q.Plugins {
		c.ahead("plugins", func() (any, error) { return c.API.Plugins(ctx) })
	}
	for _, n := range q.Networks {
		c.ahead("network "+n, func() (any, error) { return c.API.NetworkInspect(ctx, n) })
	}
}

func (c *CLI) ahead(key string, ask func() (any, error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		c.pending = map[string]*answer{}
	}
	if _, ok := c.pending[key]; ok {
		return
	}
	a := &answer{done: make(chan struct{})}
	c.pending[key] = a
	go func() {
		a.v, a.err = ask()
		close(a.done)
	}()
}

// take removes and returns the answer asked ahead under key, nil when
// none was.
func (c *CLI) take(key string) *answer {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.pending[key]
	delete(c.pending, key)
	return a
}

// fromAPI answers a question from the API: the answer asked ahead under
// key, else a request now. ok is false when there is no API or it did not
// answer; the caller then runs the docker CLI. An engine that did not
// answer in time, or answered too much, is not asked again with the
// docker CLI: ok is true and err says so.
func fromAPI[T any](c *CLI, key string, ask func(*API) (T, error)) (v T, ok bool, err error) {
	if c.API == nil {
		return v, false, nil
	}
	var got any
	if a := c.take(key); a != nil {
		<-a.done
		got, err = a.v, a.err
	} else {
		got, err = ask(c.API)
	}
	if final(err) {
		return v, true, err
	}
	if err != nil {
		c.Debugf("%v: asking the docker CLI instead", err)
		return v, false, nil
	}
	return got.(T), true, nil
}

// Error is a docker command that failed.
type Error struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("docker %s: %s", strings.Join(e.Args, " "), msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Argv returns the arguments for the docker executable: the global options,
// then args.
func (c *CLI) Argv(args ...string) []string {
	return append(append([]string{}, c.Global...), args...)
}

// maxStderr bounds the standard error of a docker command kept for its
// *Error: the CLI's messages are a few lines.
const maxStderr = 64 << 10

// Output runs docker with args and returns its standard output, refusing
// more than MaxAnswer bytes of it (a *TooLargeError). A non-zero exit is an
// *Error carrying the standard error.
func (c *CLI) Output(ctx context.Context, args ...string) ([]byte, error) {
	c.Debugf("running %s %s", c.Path, strings.Join(c.Argv(args...), " "))
	cmd := exec.CommandContext(ctx, c.Path, c.Argv(args...)...)
	// A process the docker CLI started that holds its output open does
	// not keep Output waiting once the CLI is killed.
	cmd.WaitDelay = time.Second
	stdout := &bounded{max: MaxAnswer, refuse: true}
	stderr := &bounded{max: maxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	out := stdout.buf.Bytes()
	if stdout.over {
		return nil, &TooLargeError{What: "docker " + strings.Join(args, " "), Engine: c.engine(), Max: MaxAnswer}
	}
	if err != nil {
		return out, &Error{Args: args, Stderr: stderr.buf.String(), Err: err}
	}
	return out, nil
}

// bounded keeps what is written to it up to max bytes; past that it
// refuses the write (the docker CLI then stops on a broken pipe) or, for
// messages, drops the rest.
type bounded struct {
	buf    bytes.Buffer
	max    int
	refuse bool
	over   bool
}

var errOverBound = errors.New("output over its bound")

func (b *bounded) Write(p []byte) (int, error) {
	room := b.max - b.buf.Len()
	if len(p) <= room {
		return b.buf.Write(p)
	}
	b.over = true
	if b.refuse {
		return 0, errOverBound
	}
	b.buf.Write(p[:max(room, 0)])
	return len(p), nil
}

func (c *CLI) engine() string {
	if c.Engine == "" {
		return "the docker CLI's endpoint"
	}
	return c.Engine
}

// query runs a docker command that only reads from the engine, within
// Timeout.
func (c *CLI) query(ctx context.Context, args ...string) ([]byte, error) {
	t := c.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	qctx, cancel := context.WithTimeoutCause(ctx, t, errNoAnswer)
	defer cancel()
	out, err := c.Output(qctx, args...)
	if err != nil && errors.Is(context.Cause(qctx), errNoAnswer) {
		return nil, &NoAnswerError{What: "docker " + strings.Join(args, " "), Engine: c.engine(), After: t}
	}
	return out, err
}

// outputJSON runs a docker command that reads from the engine and decodes
// its output into v.
func (c *CLI) outputJSON(ctx context.Context, v any, args ...string) error {
	out, err := c.query(ctx, args...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("decode the output of docker %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// Info is the part of `docker info` read here.
type Info struct {
	ID              string
	Name            string // the daemon host's name
	ServerVersion   string
	OperatingSystem string
	KernelVersion   string
	// CDISpecDirs lists where the daemon reads CDI specs; empty on engines
	// without CDI (Docker < 25) or with CDI turned off.
	CDISpecDirs []string
	// Runtimes are the engine's OCI runtimes by name (runc, and those of
	// daemon.json's runtimes).
	Runtimes map[string]struct {
		Path string `json:"path"`
	}
	Plugins struct {
		Network []string
	}
	Warnings []string
}

// Info asks GET /info, or runs docker info.
func (c *CLI) Info(ctx context.Context) (Info, error) {
	if i, ok, err := fromAPI(c, "info", func(a *API) (Info, error) { return a.Info(ctx) }); ok {
		return i, err
	}
	var i Info
	err := c.outputJSON(ctx, &i, "info", "--format", "{{json .}}")
	return i, err
}

// APIVersions returns the engine API versions the docker CLI speaks and
// the engine serves (docker version), for what depends on the version the
// CLI's requests carry.
func (c *CLI) APIVersions(ctx context.Context) (client, server string, err error) {
	out, err := c.query(ctx, "version", "--format", "{{.Client.APIVersion}} {{.Server.APIVersion}}")
	if err != nil {
		return "", "", err
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return "", "", fmt.Errorf("docker version: want the client's and the engine's API versions, got %q", out)
	}
	return f[0], f[1], nil
}

// AtLeast reports whether API version v (MAJOR.MINOR) is at least want;
// false when v is not a version.
func AtLeast(v, want string) bool {
	a, ok := parseVersion(v)
	b, _ := parseVersion(want)
	return ok && !lessVersion(a, b)
}

// NetworkSummary is one line of docker network ls.
type NetworkSummary struct {
	ID, Name, Driver, Scope string
}

// Networks lists every network.
func (c *CLI) Networks(ctx context.Context) ([]NetworkSummary, error) {
	if nets, ok, err := fromAPI(c, "networks", func(a *API) ([]NetworkSummary, error) { return a.Networks(ctx) }); ok {
		return nets, err
	}
	out, err := c.query(ctx, "network", "ls", "--no-trunc", "--format", "{{json .}}")
	if err != nil {
		return nil, err
	}
	var nets []NetworkSummary
	for _, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var n NetworkSummary
		if err := json.Unmarshal([]byte(line), &n); err != nil {
			return nil, fmt.Errorf("decode docker network ls line %q: %w", line, err)
		}
		nets = append(nets, n)
	}
	return nets, nil
}

// Network is the part of docker network inspect read here.
type Network struct {
	Name       string
	ID         string `json:"Id"`
	Driver     string
	Scope      string
	Options    map[string]string
	Containers map[string]NetworkContainer
	IPAM       struct {
		Config []struct{ Subnet, IPRange string }
	}
}

// NetworkContainer is one container on a network.
type NetworkContainer struct {
	Name        string
	EndpointID  string
	MacAddress  string
	IPv4Address string
	IPv6Address string
}

// NetworkInspect inspects one network by name or ID.
func (c *CLI) NetworkInspect(ctx context.Context, name string) (Network, error) {
	if n, ok, err := fromAPI(c, "network "+name, func(a *API) (Network, error) { return a.NetworkInspect(ctx, name) }); ok {
		return n, err
	}
	var nets []Network
	if err := c.outputJSON(ctx, &nets, "network", "inspect", "--", name); err != nil {
		return Network{}, err
	}
	if len(nets) != 1 {
		return Network{}, fmt.Errorf("docker network inspect %s: %d networks answered", name, len(nets))
	}
	return nets[0], nil
}

// Container is the part of docker container inspect read here.
type Container struct {
	ID   string `json:"Id"`
	Name string
	// Path and Args are the process the container runs (its entrypoint
	// and command).
	Path   string
	Args   []string
	Config struct {
		// Env is the container's environment as the engine gives it to
		// its process: the image's ENV and docker run -e.
		Env []string
	}
	State struct {
		Status   string
		Running  bool
		Pid      int
		ExitCode int
	}
	HostConfig struct {
		// Runtime is the OCI runtime the container runs with (the
		// engine's default when it named none).
		Runtime        string
		Privileged     bool
		CapAdd         []string
		CapDrop        []string
		Devices        []DeviceMapping
		DeviceRequests []DeviceRequest
		Ulimits        []Ulimit
	}
	NetworkSettings struct {
		Networks map[string]EndpointSettings
	}
}

// DeviceMapping is a --device host path.
type DeviceMapping struct {
	PathOnHost, PathInContainer, CgroupPermissions string
}

// DeviceRequest is how Docker 28 records --device with a CDI name (Driver
// "cdi").
type DeviceRequest struct {
	Driver    string
	DeviceIDs []string
}

// Ulimit is one --ulimit.
type Ulimit struct {
	Name       string
	Soft, Hard int64
}

// EndpointSettings is a container's endpoint on one network.
type EndpointSettings struct {
	NetworkID         string
	EndpointID        string
	IPAddress         string
	IPPrefixLen       int
	GlobalIPv6Address string
	MacAddress        string
}

// ContainerInspect inspects one container by name or ID.
func (c *CLI) ContainerInspect(ctx context.Context, name string) (Container, error) {
	if ct, ok, err := fromAPI(c, "container "+name, func(a *API) (Container, error) { return a.ContainerInspect(ctx, name) }); ok {
		return ct, err
	}
	var cs []Container
	if err := c.outputJSON(ctx, &cs, "container", "inspect", "--", name); err != nil {
		return Container{}, err
	}
	if len(cs) != 1 {
		return Container{}, fmt.Errorf("docker container inspect %s: %d containers answered", name, len(cs))
	}
	return cs[0], nil
}

// Plugin is the part of docker plugin inspect read here.
type Plugin struct {
	ID      string `json:"Id"`
	Name    string
	Enabled bool
	Config  struct {
		Entrypoint []string
		Interface  struct {
			Types  []string
			Socket string
		}
		Mounts []PluginMount
	}
	Settings struct {
		Mounts []PluginMount
		Env    []string
	}
}

// PluginMount is one mount of a managed plugin.
type PluginMount struct {
	Name        string
	Source      string
	Destination string
}

// MountSource returns the source of the plugin's mount called name as the
// engine mounts it: from Config.Mounts, where `docker plugin set` writes.
// Settings.Mounts can lag behind: after `docker plugin install` or
// `upgrade` it keeps the sources of that moment whatever is set later
// (seen on Docker 20.10 and the current engine).
func (p Plugin) MountSource(name string) string {
	for _, ms := range [][]PluginMount{p.Config.Mounts, p.Settings.Mounts} {
		for _, m := range ms {
			if m.Name == name {
				return m.Source
			}
		}
	}
	return ""
}

// Plugins lists the managed plugins of the daemon.
func (c *CLI) Plugins(ctx context.Context) ([]Plugin, error) {
	if ps, ok, err := fromAPI(c, "plugins", func(a *API) ([]Plugin, error) { return a.Plugins(ctx) }); ok {
		return ps, err
	}
	out, err := c.query(ctx, "plugin", "ls", "--no-trunc", "--format", "{{.ID}}")
	if err != nil {
		return nil, err
	}
	ids := strings.Fields(string(out))
	if len(ids) == 0 {
		return nil, nil
	}
	var ps []Plugin
	if err := c.outputJSON(ctx, &ps, append([]string{"plugin", "inspect"}, ids...)...); err != nil {
		return nil, err
	}
	return ps, nil
}
