package ociruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/rdma-macvlan/rdma-macvlan/api"
)

// Rail is one rdma-macvlan network of a container and the HCA port behind
// it, as the plugin knows them.
type Rail struct {
	NetworkID, Name string
	HCA             string
	Port            int
	CDIDevice       string // qualified (rdma-macvlan/hca=NAME)
	Subnets         []netip.Prefix
	TrafficClass    *int
	ServiceLevel    *int
}

// Finder finds a container's rails.
type Finder struct {
	// Globs match the plugin's sockets.
	Globs []string
	// Engine is the engine's API.
	Engine *Engine
	// Timeout bounds each request.
	Timeout time.Duration
}

// plugin is one plugin socket and what it answered.
type plugin struct {
	socket string
	status api.Status
	err    error
}

// brief asks every plugin socket the globs match for its brief status.
func (f *Finder) brief() []plugin {
	var out []plugin
	seen := map[string]bool{}
	for _, g := range f.Globs {
		matches, _ := filepath.Glob(g)
		for _, m := range matches {
			if seen[m] {
				continue
			}
			seen[m] = true
			c := api.NewClient(m)
			c.HTTP.Timeout = f.Timeout
			st, err := c.Brief()
			out = append(out, plugin{socket: m, status: st, err: err})
		}
	}
	return out
}

// Found is what Find learnt: the container's rails, and every HCA port the
// plugins serve (what RDMA_MACVLAN_DEVICES may name), by CDI name.
type Found struct {
	Rails []Rail
	// Ports are the qualified CDI names of the plugins' networks' ports,
	// each with its HCA.
	Ports map[string]string
	// GIDTimeout is the longest of the plugins' GID timeouts.
	GIDTimeout time.Duration
}

// builtinNetworks are the engine's predefined networks: no plugin's.
var builtinNetworks = map[string]bool{"bridge": true, "host": true, "none": true}

// Find returns the rails of container id: the networks the engine's record
// of the container names (containerNetworks) that an rdma-macvlan plugin
// serves. The engine's API is asked only for the ID of a network the
// container was never started on (the record has its name only then), so
// a container restarted while dockerd starts up (restart policies: the
// API is not served until they have started) needs no answer from it.
//
// A container on the engine's own networks only (none, host, the default
// bridge) costs no request at all, unless needPorts (a list of devices to
// check against the ports the plugins serve).
func (f *Finder) Find(ctx context.Context, spec *specs.Spec, id string, needPorts bool) (*Found, error) {
	found := &Found{Ports: map[string]string{}}
	nets, err := containerNetworks(spec, id)
	if err != nil {
		return nil, err
	}
	for name := range nets {
		if builtinNetworks[name] {
			delete(nets, name)
		}
	}
	if len(nets) == 0 && !needPorts {
		return found, nil
	}
	served := map[string]api.Network{}
	var dead []plugin
	for _, p := range f.brief() {
		if p.err != nil {
			dead = append(dead, p)
			continue
		}
		if d, err := time.ParseDuration(p.status.GIDTimeout); err == nil && d > found.GIDTimeout {
			found.GIDTimeout = d
		}
		for _, n := range p.status.Networks {
			served[n.ID] = n
			if n.CDIDevice != "" {
				found.Ports[n.CDIDevice] = n.HCA
			}
		}
	}
	if len(served) == 0 && len(dead) == 0 {
		return found, nil
	}
	var unserved []string
	for _, name := range slices.Sorted(maps.Keys(nets)) {
		nid := nets[name]
		if nid == "" {
			nw, ok, err := f.Engine.Network(ctx, name)
			if err != nil {
				return nil, fmt.Errorf("network %s: the engine did not give its ID: %w", name, err)
			}
			if !ok {
				continue
			}
			nid = nw.ID
		}
		n, ok := served[nid]
		if !ok {
			unserved = append(unserved, nid)
			continue
		}
		if n.HCA == "" || n.CDIDevice == "" {
			why := "the plugin knows no RDMA device for it"
			if len(n.Problems) > 0 {
				why = strings.Join(n.Problems, "; ")
			}
			return nil, fmt.Errorf("network %s: %s: the container cannot be made RDMA-ready (see `docker rdma doctor`; %s=none starts it without RDMA)", name, why, api.EnvDevices)
		}
		r := Rail{NetworkID: nid, Name: name, HCA: n.HCA, Port: n.Port, CDIDevice: n.CDIDevice,
			TrafficClass: n.TrafficClass, ServiceLevel: n.ServiceLevel}
		for _, sn := range n.Subnets {
			if pr, err := netip.ParsePrefix(sn); err == nil {
				r.Subnets = append(r.Subnets, pr.Masked())
			}
		}
		found.Rails = append(found.Rails, r)
	}
	if len(dead) > 0 && len(unserved) > 0 {
		if err := f.onDeadPlugin(ctx, unserved, dead); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// maxRecord bounds what the runtime reads of the engine's container record.
const maxRecord = 16 << 20

// containerNetworks reads the engine's record of container id (Docker's
// config.v2.json, in the container's directory under the data root, which
// the spec names as the source of the /etc/hostname, /etc/hosts and
// /etc/resolv.conf it mounts): the networks the container is connected to,
// by name, with their IDs ("" for one it was never started on: the engine
// records the ID at the first start, after the runtime's create). A
// container the engine keeps no such record of (not Docker's) has none.
func containerNetworks(spec *specs.Spec, id string) (map[string]string, error) {
	for _, m := range spec.Mounts {
		switch m.Destination {
		case "/etc/hostname", "/etc/hosts", "/etc/resolv.conf":
		default:
			continue
		}
		dir := filepath.Dir(m.Source)
		if filepath.Base(dir) != id {
			continue
		}
		file, err := os.Open(filepath.Join(dir, "config.v2.json"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("the engine's record of the container: %w", err)
		}
		defer file.Close()
		var rec struct {
			NetworkSettings struct {
				Networks map[string]struct {
					NetworkID string `json:"NetworkID"`
				} `json:"Networks"`
			} `json:"NetworkSettings"`
		}
		if err := json.NewDecoder(io.LimitReader(file, maxRecord)).Decode(&rec); err != nil {
			return nil, fmt.Errorf("the engine's record of the container, %s: %w", file.Name(), err)
		}
		nets := make(map[string]string, len(rec.NetworkSettings.Networks))
		for name, n := range rec.NetworkSettings.Networks {
			nets[name] = n.NetworkID
		}
		return nets, nil
	}
	return nil, nil
}

// onDeadPlugin fails when the container is on a network (of unserved: IDs
// no plugin that answered has) of a plugin whose socket exists but does
// not answer (a crashed or restarting plugin): the container would
// otherwise start without RDMA. A container on no such network passes.
func (f *Finder) onDeadPlugin(ctx context.Context, unserved []string, dead []plugin) error {
	drivers := map[string]string{} // driver name -> socket
	var ids []string
	for _, p := range dead {
		dir := filepath.Dir(p.socket)
		if filepath.Base(dir) == "plugins" {
			drivers["rdma-macvlan"] = p.socket
			continue
		}
		ids = append(ids, filepath.Base(dir))
	}
	if len(ids) > 0 {
		plugins, err := f.Engine.Plugins(ctx)
		if err != nil {
			return fmt.Errorf("the rdma-macvlan plugin at %s does not answer (%v), and the engine's plugin list failed: %w", dead[0].socket, dead[0].err, err)
		}
		for _, pl := range plugins {
			for _, p := range dead {
				if filepath.Base(filepath.Dir(p.socket)) == pl.ID {
					drivers[pl.Name] = p.socket
				}
			}
		}
	}
	for _, nid := range unserved {
		nw, ok, err := f.Engine.Network(ctx, nid)
		if err != nil {
			return fmt.Errorf("the rdma-macvlan plugin at %s does not answer, and the engine's inspect of network %s failed: %w", dead[0].socket, short(nid), err)
		}
		if sock, mine := drivers[nw.Driver]; ok && mine {
			return fmt.Errorf("network %s: its rdma-macvlan plugin (%s) does not answer at %s, so the container cannot be made RDMA-ready: check `docker plugin ls` and the plugin's log, then start the container again", nw.Name, nw.Driver, sock)
		}
	}
	return nil
}

// short is an ID as docker ps shows it.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Engine is the little of the Docker API the runtime uses: network inspect
// and the plugin list, neither of which waits on a container being started
// (a container inspect would: the engine holds the container's lock while
// it creates the task).
type Engine struct {
	http *http.Client
	// Host is the API's address, for messages.
	Host string
}

// maxAnswer bounds what the runtime reads of one answer.
const maxAnswer = 32 << 20

// NewEngine returns the API client of host (unix:///path; a bare path is
// taken as one).
func NewEngine(host string, timeout time.Duration) (*Engine, error) {
	path := host
	if strings.Contains(host, "://") {
		u, err := url.Parse(host)
		if err != nil || u.Scheme != "unix" {
			return nil, fmt.Errorf("--docker-host %q: the runtime reaches the engine on its own host only: want unix:///path", host)
		}
		path = u.Path
	}
	return &Engine{Host: host, http: &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}}, nil
}

// EngineNetwork is the part of a network inspect the runtime reads.
type EngineNetwork struct {
	ID     string `json:"Id"`
	Name   string `json:"Name"`
	Driver string `json:"Driver"`
}

// Network inspects network id (or name); ok is false when the engine has
// none.
func (e *Engine) Network(ctx context.Context, id string) (n EngineNetwork, ok bool, err error) {
	status, err := e.get(ctx, "/networks/"+url.PathEscape(id), &n)
	if status == http.StatusNotFound {
		return n, false, nil
	}
	return n, err == nil, err
}

// EnginePlugin is the part of a plugin listing the runtime reads.
type EnginePlugin struct {
	ID   string `json:"Id"`
	Name string `json:"Name"`
}

// Plugins lists the engine's managed plugins.
func (e *Engine) Plugins(ctx context.Context) ([]EnginePlugin, error) {
	var ps []EnginePlugin
	_, err := e.get(ctx, "/plugins", &ps)
	return ps, err
}

func (e *Engine) get(ctx context.Context, path string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker"+path, nil)
	if err != nil {
		return 0, err
	}
	r, err := e.http.Do(req)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("the engine's API %s does not exist (the runtime's --docker-host)", e.Host)
		}
		return 0, fmt.Errorf("the engine's API %s: %w", e.Host, err)
	}
	defer r.Body.Close()
	body := io.LimitReader(r.Body, maxAnswer)
	if r.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(body, 4096))
		return r.StatusCode, fmt.Errorf("GET %s: HTTP %d: %s", path, r.StatusCode, strings.TrimSpace(string(b)))
	}
	if err := json.NewDecoder(body).Decode(v); err != nil {
		return r.StatusCode, fmt.Errorf("GET %s: %w", path, err)
	}
	return r.StatusCode, nil
}
