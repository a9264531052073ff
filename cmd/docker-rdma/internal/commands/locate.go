package commands

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
)

// legacyName is the driver name of the legacy plugin: the daemon run on
// the host serves /run/docker/plugins/rdma-macvlan.sock.
const legacyName = "rdma-macvlan"

// What identifies an rdma-macvlan managed plugin, whatever name or alias it
// was installed under: its manifest (config.json) declares a network driver
// serving rdma-macvlan.sock, run as /rdma-macvlan.
const (
	networkDriverType = "docker.networkdriver/1.0"
	manifestSocket    = "rdma-macvlan.sock"
	manifestEntry     = "/rdma-macvlan"
)

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

// isRDMAPlugin reports whether a managed plugin is rdma-macvlan, by its
// manifest: a network driver whose socket is rdma-macvlan.sock and whose
// entrypoint is /rdma-macvlan. Its name says nothing: `docker plugin install
// REPO:TAG --alias roce` is rdma-macvlan as well.
func isRDMAPlugin(p docker.Plugin) bool {
	return isNetworkDriver(p) && p.Config.Interface.Socket == manifestSocket &&
		len(p.Config.Entrypoint) > 0 && p.Config.Entrypoint[0] == manifestEntry
}

// isRDMADriver reports whether a network driver is rdma-macvlan: the
// --plugin name when one is given; else an installed plugin of that name
// decides by its manifest (isRDMAPlugin), whatever its name; a driver no
// installed plugin has (the legacy plugin, or a managed one removed or not
// listable) is rdma-macvlan when its name is rdma-macvlan's.
func (s *session) isRDMADriver(drv string) bool {
	if s.opts.plugin != "" {
		return sameName(drv, s.opts.plugin) || sameName(baseName(drv), s.opts.plugin)
	}
	all, _ := s.allPlugins()
	named := false
	for _, p := range all {
		if sameName(p.Name, drv) {
			if isRDMAPlugin(p) {
				return true
			}
			named = true
		}
	}
	return !named && strings.HasPrefix(baseName(drv), legacyName)
}

// allPlugins lists the daemon's managed plugins once.
func (s *session) allPlugins() ([]docker.Plugin, error) {
	if !s.pluginsDone {
		s.plugins, s.pluginsErr = s.cli.Plugins(s.ctx)
		s.pluginsDone = true
	}
	return s.plugins, s.pluginsErr
}

// rdmaPlugins are the managed plugins that are rdma-macvlan: the one named
// by --plugin (a network driver), else every one with rdma-macvlan's
// manifest.
func (s *session) rdmaPlugins() []docker.Plugin {
	all, _ := s.allPlugins()
	var out []docker.Plugin
	for _, p := range all {
		if s.opts.plugin != "" {
			if isNetworkDriver(p) && sameName(p.Name, s.opts.plugin) {
				out = append(out, p)
			}
			continue
		}
		if isRDMAPlugin(p) {
			out = append(out, p)
		}
	}
	return out
}

func isNetworkDriver(p docker.Plugin) bool {
	return slices.Contains(p.Config.Interface.Types, networkDriverType) || len(p.Config.Interface.Types) == 0
}

// driverNames are the names `docker network create -d` takes for the
// rdma-macvlan plugins of this engine: each enabled managed plugin's full
// name with its tag (rdma-macvlan:latest: the engines do not resolve
// rdma-macvlan without it), then the legacy plugin's when its socket is
// there. Disabled plugins come last.
func (s *session) driverNames() []string {
	var on, off []string
	for _, p := range s.rdmaPlugins() {
		if p.Enabled {
			on = append(on, p.Name)
		} else {
			off = append(off, p.Name)
		}
	}
	if local, _ := s.local(); local && s.opts.plugin == "" {
		if _, err := os.Stat(filepath.Join(s.env.PluginsDir, legacyName+".sock")); err == nil || errors.Is(err, fs.ErrPermission) {
			on = append(on, legacyName)
		}
	}
	return append(on, off...)
}

// installHint says how to get the plugin.
const installHint = "docker plugin install REPO:VERSION --alias rdma-macvlan --grant-all-permissions, then use -d rdma-macvlan:latest (see docs/install.md)"

// createHint is the command that creates an rdma-macvlan network on this
// engine, with the exact driver name to give -d, or how to install the
// plugin first.
func (s *session) createHint() string {
	if names := s.driverNames(); len(names) > 0 {
		return "create one: docker network create -d " + names[0] + " -o parent=<RoCE netdev> --subnet ... NAME"
	}
	return "no rdma-macvlan plugin is installed: " + installHint
}

// pluginHint is how to tell docker rdma that network driver drv is an
// rdma-macvlan plugin it did not recognise.
func pluginHint(drv string) string {
	return "if " + drv + " is an rdma-macvlan plugin, name it: docker rdma --plugin " + drv + " COMMAND ..."
}

// notRDMAHint is what to say about a network whose driver drv is not
// rdma-macvlan: which drivers are, and --plugin.
func (s *session) notRDMAHint(drv string) string {
	if names := s.driverNames(); len(names) > 0 {
		return "rdma-macvlan here is -d " + strings.Join(names, ", -d ") + "; " + pluginHint(drv)
	}
	return "no rdma-macvlan plugin is installed; " + pluginHint(drv)
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
	status *api.Status
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
	hint := "install it: " + installHint
	if names := s.driverNames(); len(names) > 0 {
		// Another name serves rdma-macvlan here: the network was made
		// with a driver name that is gone (or never resolved).
		hint = "the rdma-macvlan plugin here is network driver " + strings.Join(names, ", ") +
			": networks made with -d " + drv + " need that name back (docker plugin install ... --alias " + trimTag(drv) + "), or re-create the network with -d " + names[0]
	}
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
func (s *session) status(b *backend) (*api.Status, error) {
	if b.done {
		return b.status, b.err
	}
	b.done = true
	if local, host := s.local(); !local && s.opts.socket == "" {
		b.err = fmt.Errorf("the Docker daemon runs on %s: its plugin socket %s is not reachable from here", host, b.Socket)
		return nil, b.err
	}
	st, err := api.NewClient(b.Socket).Status()
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
func findNetwork(st *api.Status, id string) *api.Network {
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
