package commands

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/plugin"
)

// driverPrefix is how the driver names of rdma-macvlan start: the legacy
// plugin's "rdma-macvlan", a managed plugin's "rdma-macvlan:latest", or
// an alias such as "rdma-macvlan-test:latest".
const driverPrefix = "rdma-macvlan"

// networkDriverType is the interface a network driver plugin implements.
const networkDriverType = "docker.networkdriver/1.0"

// Errors about the plugin, shown to the user.
var (
	ErrNoPlugin       = errors.New("no rdma-macvlan plugin")
	ErrPluginDisabled = errors.New("rdma-macvlan plugin disabled")
)

// trimTag removes a :tag from a plugin or driver name (not a registry port:
// localhost:5000/x:latest -> localhost:5000/x).
func trimTag(name string) string {
	slash := strings.LastIndex(name, "/")
	if i := strings.LastIndex(name, ":"); i > slash {
		return name[:i]
	}
	return name
}

// baseName is a plugin or driver name without registry, path and tag:
// registry.example.com/team/rdma-macvlan:v1 -> rdma-macvlan.
func baseName(name string) string {
	n := trimTag(name)
	return n[strings.LastIndex(n, "/")+1:]
}

// tagOf returns the tag of a plugin or driver name, "" when it has none.
func tagOf(name string) string {
	if t := trimTag(name); t != name {
		return name[len(t)+1:]
	}
	return ""
}

// sameName reports whether two plugin or driver names name the same plugin:
// a missing tag matches any (Docker 20.10 keeps ":latest" in driver names,
// an --alias has none).
func sameName(a, b string) bool {
	if trimTag(a) != trimTag(b) {
		return false
	}
	ta, tb := tagOf(a), tagOf(b)
	return ta == "" || tb == "" || ta == tb
}

// isRDMADriver reports whether a network driver is rdma-macvlan: the
// --plugin name when one is given, else any name starting with
// rdma-macvlan, or the name of an installed rdma-macvlan plugin.
func (s *session) isRDMADriver(drv string) bool {
	if s.opts.plugin != "" {
		return sameName(drv, s.opts.plugin) || sameName(baseName(drv), s.opts.plugin)
	}
	if strings.HasPrefix(baseName(drv), driverPrefix) {
		return true
	}
	for _, p := range s.rdmaPlugins() {
		if sameName(p.Name, drv) {
			return true
		}
	}
	return false
}

// allPlugins lists the daemon's managed plugins once.
func (s *session) allPlugins() ([]docker.Plugin, error) {
	if !s.pluginsDone {
		s.plugins, s.pluginsErr = s.cli.Plugins(s.ctx)
		s.pluginsDone = true
	}
	return s.plugins, s.pluginsErr
}

// rdmaPlugins are the managed network driver plugins that are rdma-macvlan:
// the one named by --plugin, else every one whose name starts with
// rdma-macvlan.
func (s *session) rdmaPlugins() []docker.Plugin {
	all, _ := s.allPlugins()
	var out []docker.Plugin
	for _, p := range all {
		if !isNetworkDriver(p) {
			continue
		}
		if s.opts.plugin != "" {
			if sameName(p.Name, s.opts.plugin) {
				out = append(out, p)
			}
			continue
		}
		if strings.HasPrefix(baseName(p.Name), driverPrefix) {
			out = append(out, p)
		}
	}
	return out
}

func isNetworkDriver(p docker.Plugin) bool {
	for _, t := range p.Config.Interface.Types {
		if t == networkDriverType {
			return true
		}
	}
	return len(p.Config.Interface.Types) == 0
}

// backend is one rdma-macvlan daemon, found as a managed plugin, a legacy
// plugin socket or through --socket.
type backend struct {
	// Plugin is the managed plugin; nil for a legacy plugin or --socket.
	Plugin *docker.Plugin
	Socket string
	// How says how the socket was found, for messages.
	How string

	done   bool
	status *driver.Status
	err    error
}

// pluginSocket is where Docker puts the socket of a managed plugin.
func (s *session) pluginSocket(p docker.Plugin) string {
	sock := p.Config.Interface.Socket
	if sock == "" {
		sock = "rdma-macvlan.sock"
	}
	return filepath.Join(s.env.PluginsDir, p.ID, sock)
}

// backendFor finds the daemon serving driver drv: --socket when given, the
// managed plugin of that name (it must be enabled), else the legacy socket
// <plugins dir>/<drv>.sock.
func (s *session) backendFor(drv string) (*backend, error) {
	if s.opts.socket != "" {
		return s.backendAt(s.opts.socket, nil, "--socket"), nil
	}
	var named []docker.Plugin
	all, listErr := s.allPlugins()
	for _, p := range all {
		if sameName(p.Name, drv) {
			named = append(named, p)
		}
	}
	for i := range named {
		if named[i].Enabled {
			return s.backendAt(s.pluginSocket(named[i]), &named[i], "managed plugin "+named[i].Name), nil
		}
	}
	if len(named) > 0 {
		return nil, fmt.Errorf("%w: network driver %s is the managed plugin %s, which is disabled (enable it: docker plugin enable %s)",
			ErrPluginDisabled, drv, named[0].Name, named[0].Name)
	}
	legacy := filepath.Join(s.env.PluginsDir, trimTag(drv)+".sock")
	_, err := os.Stat(legacy)
	switch {
	case err == nil:
		return s.backendAt(legacy, nil, "legacy plugin socket"), nil
	case errors.Is(err, fs.ErrPermission):
		// It may be there; the status call will say it cannot be read.
		return s.backendAt(legacy, nil, "legacy plugin socket"), nil
	}
	hint := "install it (docker plugin install <repo>/rdma-macvlan --alias rdma-macvlan, or make install from source)"
	if listErr != nil {
		hint = fmt.Sprintf("docker plugin ls failed: %v", listErr)
	}
	if local, host := s.local(); !local {
		return nil, fmt.Errorf("%w serves network driver %s: no managed plugin of that name, and the daemon runs on %s, where a legacy plugin socket cannot be checked from here; %s",
			ErrNoPlugin, drv, host, hint)
	}
	return nil, fmt.Errorf("%w serves network driver %s: no managed plugin of that name (docker plugin ls) and no legacy plugin socket %s; %s",
		ErrNoPlugin, drv, legacy, hint)
}

func (s *session) backendAt(sock string, p *docker.Plugin, how string) *backend {
	if b, ok := s.backends[sock]; ok {
		return b
	}
	b := &backend{Plugin: p, Socket: sock, How: how}
	s.backends[sock] = b
	return b
}

// status fetches the daemon's GET /v1/status once. It refuses to read a
// socket on this host when Docker runs on another one.
func (s *session) status(b *backend) (*driver.Status, error) {
	if b.done {
		return b.status, b.err
	}
	b.done = true
	if local, host := s.local(); !local && s.opts.socket == "" {
		b.err = fmt.Errorf("the Docker daemon runs on %s: its plugin socket %s is not reachable from here", host, b.Socket)
		return nil, b.err
	}
	st, err := plugin.NewClient(b.Socket).Status()
	switch {
	case err == nil:
		b.status = &st
	case errors.Is(err, fs.ErrPermission):
		b.err = fmt.Errorf("cannot read the daemon's socket %s as uid %d (GID readiness needs it: run as root, e.g. with sudo)", b.Socket, s.env.UID)
	case errors.Is(err, fs.ErrNotExist):
		b.err = fmt.Errorf("the daemon's socket %s does not exist (is the %s running?)", b.Socket, b.How)
	default:
		b.err = fmt.Errorf("ask the daemon at %s: %w", b.Socket, err)
	}
	return b.status, b.err
}

// findNetwork returns the status of the network with the given ID.
func findNetwork(st *driver.Status, id string) *driver.NetworkStatus {
	if st == nil {
		return nil
	}
	for i := range st.Networks {
		if st.Networks[i].ID == id {
			return &st.Networks[i]
		}
	}
	return nil
}
