package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/userfile"
)

// DefaultHost is the engine the docker CLI talks to when nothing names
// one.
const DefaultHost = "unix:///var/run/docker.sock"

// Endpoint is the engine the docker CLI would talk to, worked out from what
// the CLI reads to pick it, and whether docker rdma can ask that engine's
// API itself.
type Endpoint struct {
	// Host is the engine's address (unix:///var/run/docker.sock,
	// tcp://host:2376, ssh://...); "" when it cannot be told.
	Host string
	// From names the rule that chose it: -H, DOCKER_HOST, a context and
	// where its name came from, or the default.
	From string
	// Socket is the engine's unix socket when docker rdma asks its API
	// directly; "" when it runs the docker CLI instead.
	Socket string
	// Why says why Socket is "": the endpoint is not a plain local unix
	// socket, or the CLI's choice cannot be told for certain.
	Why string
}

// Direct reports whether the engine's API is asked directly.
func (e Endpoint) Direct() bool { return e.Socket != "" }

// String describes the endpoint for a debug line.
func (e Endpoint) String() string {
	host := e.Host
	if host == "" {
		host = "unknown engine"
	}
	if e.From != "" {
		host += " (" + e.From + ")"
	}
	return host
}

// globalFlags are docker's global options, parsed: the values of each
// option by its long name, in order.
type globalFlags map[string][]string

// longNames are the long names of docker's short global options.
var longNames = map[string]string{"-H": "--host", "-c": "--context", "-l": "--log-level", "-D": "--debug"}

// parseGlobal reads the global options SplitGlobal took off the command
// line.
func parseGlobal(global []string) globalFlags {
	g := globalFlags{}
	for i := 0; i < len(global); i++ {
		a := global[i]
		name, val, hasVal := strings.Cut(a, "=")
		if !strings.HasPrefix(a, "--") && len(a) > 2 {
			// -Hunix:///x, -cname
			name, val, hasVal = a[:2], a[2:], true
		}
		if l, ok := longNames[name]; ok {
			name = l
		}
		switch {
		case globalBool[name]:
			if !hasVal {
				val = "true"
			}
		case !hasVal && i+1 < len(global):
			val = global[i+1]
			i++
		}
		g[name] = append(g[name], val)
	}
	return g
}

// on reports whether a boolean option is set and true; an unreadable value
// counts as set (the docker CLI will refuse it).
func (g globalFlags) on(name string) bool {
	vs := g[name]
	if len(vs) == 0 {
		return false
	}
	b, err := strconv.ParseBool(vs[len(vs)-1])
	return err != nil || b
}

func (g globalFlags) last(name string) string {
	if vs := g[name]; len(vs) > 0 {
		return vs[len(vs)-1]
	}
	return ""
}

// DebugAsked reports whether docker's global options ask for debug output
// (-D, --debug, -l debug).
func DebugAsked(global []string) bool {
	g := parseGlobal(global)
	return g.on("--debug") || strings.EqualFold(g.last("--log-level"), "debug")
}

// ResolveEndpoint works out the engine the docker CLI would use, by the
// CLI's rules in its order: --context; -H/--host; DOCKER_HOST;
// DOCKER_CONTEXT; the current context in the CLI's config
// (--config, DOCKER_CONFIG or ~/.docker); else defaultHost. A context other
// than "default" is read from the config's context store. The API is asked
// directly only for a plain unix socket without TLS; anything else (tcp,
// ssh, TLS options, TLS material in the context, options the CLI would
// refuse) leaves the docker CLI to do the talking, and Why says so.
func ResolveEndpoint(global []string, getenv func(string) string, defaultHost string) Endpoint {
	g := parseGlobal(global)
	hosts, ctxFlag := g["--host"], g.last("--context")
	switch {
	case ctxFlag != "" && len(hosts) > 0:
		return Endpoint{Why: "both --context and -H are given (the docker CLI refuses that)"}
	case len(hosts) > 1:
		return Endpoint{Why: "-H is given more than once (the docker CLI refuses that)"}
	case ctxFlag != "":
		return contextEndpoint(g, getenv, defaultHost, ctxFlag, "--context")
	case len(hosts) == 1:
		return defaultEndpoint(g, getenv, hosts[0], "-H")
	case getenv("DOCKER_HOST") != "":
		return defaultEndpoint(g, getenv, getenv("DOCKER_HOST"), "DOCKER_HOST")
	case getenv("DOCKER_CONTEXT") != "":
		return contextEndpoint(g, getenv, defaultHost, getenv("DOCKER_CONTEXT"), "DOCKER_CONTEXT")
	}
	dir, err := configDir(g, getenv)
	if err != nil {
		return Endpoint{Why: err.Error()}
	}
	cfgPath := filepath.Join(dir, "config.json")
	b, err := userfile.Read(cfgPath, userfile.MaxSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return defaultEndpoint(g, getenv, defaultHost, "the default")
	case err != nil:
		return Endpoint{Why: fmt.Sprintf("cannot read the docker CLI's config %s: %v", cfgPath, err)}
	}
	var cfg struct{ CurrentContext string }
	if err := json.Unmarshal(b, &cfg); err != nil {
		return Endpoint{Why: fmt.Sprintf("cannot read the docker CLI's config %s: %v", cfgPath, err)}
	}
	if cfg.CurrentContext != "" {
		return contextEndpoint(g, getenv, defaultHost, cfg.CurrentContext, "current context in "+cfgPath)
	}
	return defaultEndpoint(g, getenv, defaultHost, "the default")
}

// configDir is the docker CLI's config directory: --config, DOCKER_CONFIG,
// else .docker in the home directory.
func configDir(g globalFlags, getenv func(string) string) (string, error) {
	if d := g.last("--config"); d != "" {
		return d, nil
	}
	if d := getenv("DOCKER_CONFIG"); d != "" {
		return d, nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".docker"), nil
	}
	return "", errors.New("cannot tell the docker CLI's config directory (no --config, DOCKER_CONFIG or HOME)")
}

// defaultEndpoint is the default context: host (from -H, DOCKER_HOST or
// the default), spoken to with TLS when the TLS options or variables ask
// for it.
func defaultEndpoint(g globalFlags, getenv func(string) string, host, from string) Endpoint {
	e := Endpoint{Host: strings.TrimSpace(host), From: from}
	for _, f := range []string{"--tls", "--tlsverify"} {
		if g.on(f) {
			e.Why = f + " is given"
			return e
		}
	}
	for _, f := range []string{"--tlscacert", "--tlscert", "--tlskey"} {
		if len(g[f]) > 0 {
			e.Why = f + " is given"
			return e
		}
	}
	for _, v := range []string{"DOCKER_TLS_VERIFY", "DOCKER_TLS"} {
		if getenv(v) != "" {
			e.Why = v + " is set"
			return e
		}
	}
	return withSocket(e)
}

// contextEndpoint is the endpoint of context name, read from the context
// store of the CLI's config directory.
func contextEndpoint(g globalFlags, getenv func(string) string, defaultHost, name, from string) Endpoint {
	if name == "default" {
		host := defaultHost
		if h := getenv("DOCKER_HOST"); h != "" {
			host = h
		}
		return defaultEndpoint(g, getenv, host, "context default ("+from+")")
	}
	e := Endpoint{From: "context " + name + " (" + from + ")"}
	dir, err := configDir(g, getenv)
	if err != nil {
		e.Why = err.Error()
		return e
	}
	id := contextID(name)
	metaPath := filepath.Join(dir, "contexts", "meta", id, "meta.json")
	b, err := userfile.Read(metaPath, userfile.MaxSize)
	if err != nil {
		e.Why = fmt.Sprintf("cannot read context %s: %v", name, err)
		return e
	}
	var meta struct {
		Endpoints map[string]struct {
			Host          string
			SkipTLSVerify bool
		}
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		e.Why = fmt.Sprintf("cannot read context %s: %v", name, err)
		return e
	}
	ep, ok := meta.Endpoints["docker"]
	if !ok || ep.Host == "" {
		e.Why = fmt.Sprintf("context %s has no docker endpoint in %s", name, metaPath)
		return e
	}
	e.Host = strings.TrimSpace(ep.Host)
	tlsDir := filepath.Join(dir, "contexts", "tls", id, "docker")
	if ents, err := os.ReadDir(tlsDir); err == nil && len(ents) > 0 {
		e.Why = "context " + name + " has TLS material in " + tlsDir
		return e
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		e.Why = fmt.Sprintf("cannot tell whether context %s has TLS material: %v", name, err)
		return e
	}
	if ep.SkipTLSVerify {
		e.Why = "context " + name + " sets SkipTLSVerify"
		return e
	}
	return withSocket(e)
}

// contextID is the directory name of a context in the context store.
func contextID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}

// withSocket sets the endpoint's socket when its host is a local unix
// socket, else says why not.
func withSocket(e Endpoint) Endpoint {
	if sock, ok := UnixSocket(e.Host); ok {
		e.Socket = sock
		if e.Host == "" {
			e.Host = "unix://" + sock
		}
		return e
	}
	e.Why = "not a local unix socket"
	return e
}

// UnixSocket returns the socket path of a unix:// engine address, as the
// docker CLI reads it (unix:// alone is the default socket); false for any
// other address.
func UnixSocket(host string) (string, bool) {
	h := strings.TrimSpace(host)
	if h == "" {
		h = DefaultHost
	}
	path, ok := strings.CutPrefix(h, "unix://")
	if !ok || strings.Contains(path, "://") {
		return "", false
	}
	if path == "" {
		path, _ = strings.CutPrefix(DefaultHost, "unix://")
	}
	return path, true
}
