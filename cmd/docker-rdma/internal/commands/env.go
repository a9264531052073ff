// Package commands implements docker rdma's subcommands. The session
// (session.go, locate.go, netview.go) is the backend they all use: it asks
// Docker (package docker) and the rdma-macvlan daemons through their
// sockets (GET /v1/status, once per daemon and command), and falls back on
// what Docker, sysfs and the CDI specs show when a socket cannot be read. Each
// subcommand is a function of the session in a file of its own; Env (this
// file) is what they use of the outside world.
package commands

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/fabric"
)

// Env is what the commands use from the outside world, so tests can run
// them against a fake docker, a fake daemon socket and a fake sysfs tree.
type Env struct {
	// Stdin, Stdout and Stderr are given to docker run; when they are
	// terminals docker sees the terminals.
	Stdin          *os.File
	Stdout, Stderr io.Writer
	// Getenv reads the environment.
	Getenv func(string) string
	// PluginsDir is where Docker keeps plugin sockets: managed plugins in
	// <dir>/<plugin-id>/<socket>, legacy plugins as <dir>/<name>.sock.
	PluginsDir string
	// DevRoot is the root under which doctor looks for /dev/infiniband.
	DevRoot string
	// Hostname is this host's name, compared with the daemon's to tell
	// whether Docker runs here (only then are sysfs and the socket the
	// daemon's).
	Hostname func() (string, error)
	// UID is the user's id, for messages about permissions.
	UID int
	// DieBy ends the process with a signal (docker run was killed by it);
	// nil leaves the exit status 128+signal.
	DieBy func(syscall.Signal)
	// Executable is the path of this program, to find rdma-exec next to
	// it; nil looks only at the installed path.
	Executable func() (string, error)
	// MountSource describes a host directory a plugin mounts: what stat
	// says of it and the statfs magic of the filesystem it is on, for
	// doctor's check that the plugin's mount sources survive a reboot; nil
	// skips that check.
	MountSource func(path string) (fs.FileInfo, int64, error)
	// DefaultHost is the engine the docker CLI uses when nothing (-H,
	// DOCKER_HOST, a context) names one: docker.DefaultHost.
	DefaultHost string
	// Kernel opens what doctor's fabric checks ask the kernel (DCB netlink,
	// link MTUs) and returns how to close it; nil asks the kernel of the
	// namespace docker rdma runs in, and only when the sysfs root is /.
	Kernel func() (fabric.Kernel, func(), error)
	// DaemonJSON is dockerd's config file that runtime install and
	// uninstall change without --config-file; "" is DefaultDaemonJSON.
	DaemonJSON string
	// RuntimeBinary is the runtime runtime install registers without
	// --path; "" is InstalledRuntime.
	RuntimeBinary string
}

// System is the real environment.
func System() *Env {
	return &Env{
		Stdin:       os.Stdin,
		Stdout:      os.Stdout,
		Stderr:      os.Stderr,
		Getenv:      os.Getenv,
		PluginsDir:  "/run/docker/plugins",
		DevRoot:     "/",
		Hostname:    os.Hostname,
		UID:         os.Getuid(),
		DieBy:       DieBy,
		Executable:  os.Executable,
		MountSource: mountSource,
		DefaultHost: docker.DefaultHost,
	}
}

func mountSource(path string) (fs.FileInfo, int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return fi, 0, err
	}
	return fi, int64(st.Type), nil
}

// reexecEnv is how the docker CLI tells a CLI plugin which docker binary
// ran it; docker rdma runs the same one.
const reexecEnv = "DOCKER_CLI_PLUGIN_ORIGINAL_CLI_COMMAND"

// Environment variables of docker rdma's own options.
const (
	envPlugin = "RDMA_MACVLAN_PLUGIN"
	envSocket = "RDMA_MACVLAN_SOCKET"
)

// dockerPath returns the docker executable to run: the one that ran this
// plugin, else docker from PATH.
func (e *Env) dockerPath() string {
	if p := e.Getenv(reexecEnv); p != "" {
		return p
	}
	return "docker"
}

func (e *Env) daemonJSON() string { return firstNonEmpty(e.DaemonJSON, DefaultDaemonJSON) }

func (e *Env) installedRuntime() string { return firstNonEmpty(e.RuntimeBinary, InstalledRuntime) }

// devPath returns p under DevRoot.
func (e *Env) devPath(p string) string {
	if e.DevRoot == "" || e.DevRoot == "/" {
		return p
	}
	return filepath.Join(e.DevRoot, p)
}
