package commands

import (
	"context"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
)

// session is what docker rdma knows of the engine and its rdma-macvlan
// daemons: the engine's info, its plugins and which of them are
// rdma-macvlan, each daemon's socket and status (locate.go), each asked
// once per command; and each network's RDMA facts, built from the daemon's
// status or else from sysfs and the CDI specs (netview.go). Its methods are that backend and
// nothing else: each command is a function of it in a file of its own
// (ls.go, inspect.go, run.go, compose.go, runtime.go, doctor.go,
// selftest.go, version.go).
type session struct {
	env  *Env
	cli  *docker.CLI
	opts options
	ctx  context.Context
	// global are docker's global options docker rdma was given.
	global []string

	infoDone bool
	info     docker.Info
	infoErr  error

	pluginsDone bool
	plugins     []docker.Plugin
	pluginsErr  error

	backends map[string]*backend // by socket path

	// sysfsRootFlag is --sysfs-root; "" picks the root per plugin.
	sysfsRootFlag string
}

// options are docker rdma's own global options.
type options struct {
	plugin string // --plugin / RDMA_MACVLAN_PLUGIN
	socket string // --socket / RDMA_MACVLAN_SOCKET
}

func newSession(ctx context.Context, env *Env, global []string, opts options) *session {
	return &session{
		env:      env,
		cli:      newCLI(env, global),
		global:   global,
		opts:     opts,
		ctx:      ctx,
		backends: map[string]*backend{},
	}
}

// newCLI is how the session asks Docker: the engine's API on its unix
// socket when the docker CLI would use such an engine (the same -H,
// DOCKER_HOST, context and config), else the docker CLI. With docker's -D
// (or -l debug) it says on stderr which, and logs each call.
func newCLI(env *Env, global []string) *docker.CLI {
	cli := &docker.CLI{Path: env.dockerPath(), Global: global}
	if docker.DebugAsked(global) {
		cli.Debug = env.Stderr
	}
	ep := docker.ResolveEndpoint(global, env.Getenv, firstNonEmpty(env.DefaultHost, docker.DefaultHost))
	cli.Engine = ep.Host
	if !ep.Direct() {
		cli.Debugf("engine %s: %s: asking Docker through the docker CLI (%s)", ep, ep.Why, cli.Path)
		return cli
	}
	cli.Debugf("engine %s: asking its API on %s directly", ep, ep.Socket)
	cli.API = docker.NewAPI(ep.Socket, env.Getenv("DOCKER_API_VERSION"), cli.Debugf)
	return cli
}

func (s *session) dockerInfo() (docker.Info, error) {
	if !s.infoDone {
		s.info, s.infoErr = s.cli.Info(s.ctx)
		s.infoDone = true
	}
	return s.info, s.infoErr
}

// local reports whether the Docker daemon runs on this host, so that its
// plugin sockets, sysfs and CDI directories are the ones here. When it
// cannot tell, it says yes: a wrong guess only makes a socket or file
// lookup fail.
func (s *session) local() (bool, string) {
	info, err := s.dockerInfo()
	if err != nil || info.Name == "" {
		return true, ""
	}
	h, err := s.env.Hostname()
	if err != nil || h == "" {
		return true, ""
	}
	if strings.EqualFold(h, info.Name) || strings.EqualFold(strings.SplitN(h, ".", 2)[0], strings.SplitN(info.Name, ".", 2)[0]) {
		return true, ""
	}
	return false, info.Name
}
