// Package ociruntime is rdma-macvlan-runtime: an OCI runtime with runc's
// command line that makes a container on rdma-macvlan networks RDMA-ready
// and hands every container to the next runtime (runc by default).
//
// On create (and run) it reads the bundle's config.json, finds the
// container's rdma-macvlan networks (the engine's record of the container
// names its networks, the plugin's brief status their HCA ports), edits the
// spec (the ports' CDI devices, memlock, CAP_IPC_LOCK, rdma-exec in front
// of the process, a /sys/class/infiniband view, RDMA cgroup limits) and
// execs the next runtime. Every other command, and every container that is
// on no rdma-macvlan network, goes to the next runtime untouched.
//
// Files: args.go (the command line), find.go (which networks and HCA
// ports: plugin and engine), edit.go (the spec's edits), view.go (the
// sysfs view directories and their removal), runtime.go (Main).
package ociruntime

import (
	"fmt"
	"strings"
)

// Options are the runtime's own options. They come before runc's command
// line (daemon.json's runtimeArgs) and are not passed on.
type Options struct {
	DockerHost  string // the engine's API: unix:///path
	CDIDir      string // where the plugin writes its CDI specs
	Next        string // the next runtime: a path, or a name looked up in PATH
	ExecHelper  string // rdma-exec on the host; "" is next to this binary, else InstalledHelper
	StateDir    string // the sysfs views' directories
	PluginGlobs []string
}

// Defaults of Options.
const (
	DefaultDockerHost = "unix:///var/run/docker.sock"
	DefaultCDIDir     = "/var/run/cdi"
	DefaultNext       = "runc"
	DefaultStateDir   = "/run/rdma-macvlan-runtime"
	// InstalledHelper is where make install-cli puts rdma-exec.
	InstalledHelper = "/usr/local/lib/rdma-macvlan/rdma-exec"
)

// DefaultPluginGlobs are where the plugin's socket is: a managed plugin's
// under the engine's fixed plugin directory (named by plugin ID), the
// legacy plugin's in that directory itself.
var DefaultPluginGlobs = []string{"/run/docker/plugins/*/rdma-macvlan.sock", "/run/docker/plugins/rdma-macvlan.sock"}

// ownFlags are the runtime's options and where each goes.
var ownFlags = map[string]func(o *Options, v string){
	"--docker-host":   func(o *Options, v string) { o.DockerHost = v },
	"--cdi-dir":       func(o *Options, v string) { o.CDIDir = v },
	"--next-runtime":  func(o *Options, v string) { o.Next = v },
	"--exec-helper":   func(o *Options, v string) { o.ExecHelper = v },
	"--state-dir":     func(o *Options, v string) { o.StateDir = v },
	"--plugin-socket": func(o *Options, v string) { o.PluginGlobs = append(o.PluginGlobs, v) },
}

// runcValueFlags are runc's global options that take a value (urfave/cli:
// "--root X", "--root=X", "-root X").
var runcValueFlags = map[string]bool{"root": true, "log": true, "log-format": true, "criu": true, "rootless": true}

// createValueFlags are create's and run's options that take a value.
var createValueFlags = map[string]bool{"bundle": true, "b": true, "console-socket": true, "pidfd-socket": true,
	"pid-file": true, "preserve-fds": true}

// Invocation is one command line, split as runc reads it.
type Invocation struct {
	Own Options
	// Pass is what the next runtime gets: runc's options, the command and
	// its arguments, the runtime's own options removed.
	Pass []string
	// Command is runc's command ("create", "run", "delete", ...); "" when
	// there is none (--version, --help).
	Command string
	// CommandArgs are the command's own arguments (after Command).
	CommandArgs []string
	// Root, Log and LogFormat are runc's --root, --log and --log-format.
	Root, Log, LogFormat string
}

// Parse splits args (without the program name).
func Parse(args []string) (*Invocation, error) {
	inv := &Invocation{Own: Options{DockerHost: DefaultDockerHost, CDIDir: DefaultCDIDir, Next: DefaultNext, StateDir: DefaultStateDir}}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			break
		}
		name, val, hasVal := strings.Cut(a, "=")
		if set, ok := ownFlags[name]; ok {
			if !hasVal {
				if i+1 >= len(args) {
					return nil, fmt.Errorf("%s needs a value", name)
				}
				i++
				val = args[i]
			}
			if val == "" {
				return nil, fmt.Errorf("%s: empty value", name)
			}
			set(&inv.Own, val)
			continue
		}
		inv.Pass = append(inv.Pass, a)
		bare := strings.TrimLeft(name, "-")
		if !runcValueFlags[bare] {
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				break
			}
			i++
			val = args[i]
			inv.Pass = append(inv.Pass, val)
		}
		switch bare {
		case "root":
			inv.Root = val
		case "log":
			inv.Log = val
		case "log-format":
			inv.LogFormat = val
		}
	}
	if len(inv.Own.PluginGlobs) == 0 {
		inv.Own.PluginGlobs = DefaultPluginGlobs
	}
	if inv.Root == "" {
		inv.Root = "/run/runc"
	}
	if i < len(args) {
		inv.Command = args[i]
		inv.CommandArgs = args[i+1:]
		inv.Pass = append(inv.Pass, args[i:]...)
	}
	return inv, nil
}

// Container is what create and run name: the bundle and the ID.
func (inv *Invocation) Container() (bundle, id string, err error) {
	bundle = "."
	var pos []string
	a := inv.CommandArgs
	for i := 0; i < len(a); i++ {
		if a[i] == "--" {
			pos = append(pos, a[i+1:]...)
			break
		}
		if !strings.HasPrefix(a[i], "-") || a[i] == "-" {
			pos = append(pos, a[i])
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a[i], "-"), "=")
		if !createValueFlags[name] {
			continue
		}
		if !hasVal {
			if i+1 >= len(a) {
				return "", "", fmt.Errorf("%s: --%s needs a value", inv.Command, name)
			}
			i++
			val = a[i]
		}
		if name == "bundle" || name == "b" {
			bundle = val
		}
	}
	if len(pos) != 1 {
		return "", "", fmt.Errorf("%s: want one container ID, got %d arguments", inv.Command, len(pos))
	}
	return bundle, pos[0], nil
}

// DeleteID is the container ID of delete ("" when it has none).
func (inv *Invocation) DeleteID() string {
	for _, a := range inv.CommandArgs {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}
