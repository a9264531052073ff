package ociruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/internal/atomicfile"
)

// Usage is the runtime's help.
const Usage = `Usage: rdma-macvlan-runtime [OPTIONS] [RUNC OPTIONS] COMMAND [ARG...]

An OCI runtime with runc's command line. On create and run it makes a
container on rdma-macvlan networks RDMA-ready, then execs the next runtime
(runc) with the edited config.json; every other command, and every other
container, goes to the next runtime untouched (config.json not rewritten).

Register it once per host: docker rdma runtime install [--default]

A container on one or more rdma-macvlan networks gets those networks' HCA
ports: their CDI devices (uverbs node and rdma_cm), RLIMIT_MEMLOCK unlimited
unless it set its own (--ulimit memlock), CAP_IPC_LOCK, rdma-exec in front
of its process (the process starts once the container's GID entries exist,
with NCCL_IB_HCA, NCCL_IB_GID_INDEX, UCX_NET_DEVICES, ... set: see docker
rdma run --help), and /sys/class/infiniband and /sys/class/infiniband_verbs
showing its HCAs only.

The container's environment steers it:
  RDMA_MACVLAN_DEVICES=auto|none|LIST
                          auto (or unset): the HCA ports of its networks;
                          none: no change at all; LIST: comma-separated HCA
                          names or CDI device names (mlx5_0,
                          rdma-macvlan/hca=mlx5_1) of ports the plugin serves
                          (any network's, e.g. for --net host)
  RDMA_MACVLAN_NO_WAIT=1  start the process directly, without rdma-exec
  RDMA_MACVLAN_GID_TIMEOUT=DURATION
                          rdma-exec's wait (default: the plugin's)
  RDMA_MACVLAN_ROCE_VERSION=1|2, RDMA_MACVLAN_GID_FAMILY=auto|ipv4|ipv6
                          the GID entry to use (default 2, auto)
  RDMA_MACVLAN_ACCEPT_GID_MISMATCH=1
                          start even when the GID indexes differ per rail
  RDMA_MACVLAN_IPC_LOCK=0 no CAP_IPC_LOCK
  RDMA_MACVLAN_SYSFS=host the host's /sys/class/infiniband* unfiltered
  RDMA_MACVLAN_RDMA_LIMIT=hca_handle=N,hca_object=M
                          the RDMA cgroup's rdma.max for each of its HCAs

Options (before runc's; daemon.json's runtimeArgs):
  --docker-host URL     the engine's API (default unix:///var/run/docker.sock)
  --cdi-dir DIR         the plugin's CDI specs (default /var/run/cdi)
  --next-runtime PATH   the runtime it hands containers to (default runc)
  --exec-helper PATH    rdma-exec on the host (default: next to this
                        binary, else /usr/local/lib/rdma-macvlan/rdma-exec)
  --state-dir DIR       the sysfs views (default /run/rdma-macvlan-runtime)
  --plugin-socket GLOB  the plugin's socket (repeatable; default
                        /run/docker/plugins/*/rdma-macvlan.sock and
                        /run/docker/plugins/rdma-macvlan.sock)

Which networks a container is on comes from the engine's record of it
(config.v2.json beside the /etc/hostname it mounts), their HCA ports from
the plugin's brief status; the engine's API is asked only a network's ID
(network inspect) for a network the container was never started on, and
nothing that waits on the container being started. When the runtime cannot
make a container on an rdma-macvlan network RDMA-ready, create fails with
the reason (docker run shows it); it never starts one half-ready.
`

// requestTimeout bounds each request to the plugin and the engine.
const requestTimeout = 10 * time.Second

// Sys is what Main uses from the outside world.
type Sys struct {
	Stderr io.Writer
	// Exec replaces the process; it returns only on failure.
	Exec func(argv0 string, argv, env []string) error
	// Run runs the next runtime as a child and returns its exit status.
	Run func(argv0 string, argv []string) (int, error)
	// Self is this binary's path (rdma-exec is looked for next to it).
	Self string
	// SysRoot is where the host's sysfs is (the view's links): "/".
	SysRoot string
	Now     func() time.Time
}

// System is the real world.
func System() *Sys {
	self, _ := os.Executable()
	return &Sys{Stderr: os.Stderr, Exec: syscall.Exec, Run: runChild, Self: self, SysRoot: "/", Now: time.Now}
}

func runChild(argv0 string, argv []string) (int, error) {
	c := exec.Command(argv0, argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

// Main runs the runtime with args (without the program name); it returns
// only when it does not exec the next runtime.
func Main(args []string, sys *Sys) int {
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
		fmt.Fprint(os.Stdout, Usage)
		return 0
	}
	inv, err := Parse(args)
	if err != nil {
		fmt.Fprintf(sys.Stderr, "rdma-macvlan-runtime: %v\n", err)
		return 1
	}
	next, err := nextRuntime(inv.Own.Next, sys.Self)
	if err != nil {
		inv.fail(sys, err)
		return 1
	}
	argv := append([]string{next}, inv.Pass...)
	switch inv.Command {
	case "create", "run":
		if err := prepare(inv, sys); err != nil {
			inv.fail(sys, err)
			return 1
		}
	case "exec":
		if err := editExec(inv); err != nil {
			inv.fail(sys, err)
			return 1
		}
	case "delete":
		// A container with a view: the view goes once the container is
		// gone (a delete that fails, of a running container, must leave
		// it as it was), so runc runs as a child. Others: exec, as for
		// every other command.
		root := viewRoot(inv.Own.StateDir, inv.Root)
		id := inv.DeleteID()
		if id == "" || !exists(filepath.Join(root, id)) {
			Sweep(root, inv.Root, sys.Now())
			break
		}
		status, err := sys.Run(next, argv)
		if err != nil {
			inv.fail(sys, err)
			return 1
		}
		if status == 0 && !exists(filepath.Join(inv.Root, id)) {
			_ = RemoveView(root, id)
		}
		Sweep(root, inv.Root, sys.Now())
		return status
	}
	if err := sys.Exec(next, argv, os.Environ()); err != nil {
		inv.fail(sys, fmt.Errorf("exec %s: %w", next, err))
		return 1
	}
	return 0
}

// nextRuntime resolves the next runtime, refusing this binary itself (a
// loop).
func nextRuntime(name, self string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("the next runtime %q: %w (the runtime's --next-runtime)", name, err)
	}
	if a, err := filepath.EvalSymlinks(p); err == nil && self != "" {
		if b, err := filepath.EvalSymlinks(self); err == nil && a == b {
			return "", fmt.Errorf("the next runtime %q is rdma-macvlan-runtime itself: set --next-runtime to runc", name)
		}
	}
	return p, nil
}

// prepare edits the bundle's config.json of a create or run, or leaves it
// alone when the container is not an RDMA one.
func prepare(inv *Invocation, sys *Sys) error {
	bundle, id, err := inv.Container()
	if err != nil {
		return err
	}
	path := filepath.Join(bundle, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var spec specs.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if spec.Process == nil {
		return nil
	}
	// An invalid variable matters only to a container the runtime would
	// change: it is reported once the container is known to be one.
	choice, choiceErr := ParseChoice(spec.Process.Env)
	if choice.None {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*requestTimeout)
	defer cancel()
	engine, err := NewEngine(inv.Own.DockerHost, requestTimeout)
	if err != nil {
		return err
	}
	finder := &Finder{Globs: inv.Own.PluginGlobs, Engine: engine, Timeout: requestTimeout}
	found := &Found{Ports: map[string]string{}}
	if ownNetns(&spec) {
		if found, err = finder.Find(ctx, &spec, id, choice.Devices != nil); err != nil {
			return err
		}
	} else if choice.Devices != nil {
		// --net host or container:X: no networks of its own; only a
		// list it names can give it ports.
		for _, p := range finder.brief() {
			for _, n := range p.status.Networks {
				if n.CDIDevice != "" {
					found.Ports[n.CDIDevice] = n.HCA
				}
			}
		}
	}
	if len(found.Rails) == 0 && choice.Devices == nil {
		return nil
	}
	if choiceErr != nil {
		return choiceErr
	}
	plan, err := Decide(choice, found)
	if err != nil {
		return err
	}
	edit := Edit{CDIDir: inv.Own.CDIDir, GIDTimeout: choice.GIDTimeout}
	if edit.GIDTimeout == 0 {
		edit.GIDTimeout = found.GIDTimeout
	}
	if edit.GIDTimeout == 0 {
		edit.GIDTimeout = api.DefaultGIDTimeout
	}
	if !choice.NoWait && len(plan.Rails) > 0 {
		if edit.Helper, err = helperPath(inv.Own.ExecHelper, sys.Self); err != nil {
			return err
		}
	}
	root := viewRoot(inv.Own.StateDir, inv.Root)
	Sweep(root, inv.Root, sys.Now())
	if !choice.HostSysfs {
		if edit.View, err = MakeView(sys.SysRoot, root, id, plan.HCAs); err != nil {
			return err
		}
	}
	x, err := Apply(&spec, plan, choice, edit)
	if err == nil {
		err = writeExecEdits(root, id, x)
	}
	if err != nil {
		_ = RemoveView(root, id)
		return err
	}
	out, err := json.Marshal(&spec)
	if err != nil {
		_ = RemoveView(root, id)
		return err
	}
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := atomicfile.WriteUnsynced(path, out, mode, nil); err != nil {
		_ = RemoveView(root, id)
		return err
	}
	return nil
}

// execFile is the record, in a container's directory under the state dir,
// of what docker exec's processes get too (ExecEdits).
const execFile = "exec.json"

func writeExecEdits(root, id string, x ExecEdits) error {
	if !validID(id) {
		return fmt.Errorf("container ID %q", id)
	}
	dir := filepath.Join(root, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, _ := json.Marshal(x)
	return atomicfile.WriteUnsynced(filepath.Join(dir, execFile), b, 0o644, nil)
}

// execValueFlags are exec's options that take a value.
var execValueFlags = map[string]bool{"console-socket": true, "pidfd-socket": true, "cwd": true, "env": true, "e": true,
	"user": true, "u": true, "additional-gids": true, "g": true, "process": true, "p": true, "apparmor": true,
	"process-label": true, "pid-file": true, "cap": true, "c": true, "preserve-fds": true, "cgroup": true}

// editExec gives the process of an exec (its --process file, as containerd
// runs it) in a container the runtime made RDMA-ready the create's
// capability and memlock (ExecEdits). Other containers' execs are not
// touched.
func editExec(inv *Invocation) error {
	var proc, id string
	a := inv.CommandArgs
	for i := 0; i < len(a); i++ {
		if !strings.HasPrefix(a[i], "-") {
			if id == "" {
				id = a[i]
			}
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a[i], "-"), "=")
		if !execValueFlags[name] {
			continue
		}
		if !hasVal && i+1 < len(a) {
			i++
			val = a[i]
		}
		if name == "process" || name == "p" {
			proc = val
		}
	}
	if proc == "" || !validID(id) {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(viewRoot(inv.Own.StateDir, inv.Root), id, execFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var x ExecEdits
	if err := json.Unmarshal(b, &x); err != nil {
		return fmt.Errorf("%s: %w", execFile, err)
	}
	raw, err := os.ReadFile(proc)
	if err != nil {
		return err
	}
	var p specs.Process
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("%s: %w", proc, err)
	}
	x.Apply(&p)
	out, err := json.Marshal(&p)
	if err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(proc); err == nil {
		mode = fi.Mode().Perm()
	}
	return atomicfile.WriteUnsynced(proc, out, mode, nil)
}

// ownNetns reports whether the container gets a network namespace of its
// own (an entry without a path): only then can it be on networks.
func ownNetns(spec *specs.Spec) bool {
	if spec.Linux == nil {
		return false
	}
	for _, ns := range spec.Linux.Namespaces {
		if ns.Type == specs.NetworkNamespace {
			return ns.Path == ""
		}
	}
	return false
}

// helperPath is rdma-exec on the host: given, else next to this binary,
// else where make install-cli puts it.
func helperPath(given, self string) (string, error) {
	cands := []string{given}
	if given == "" {
		cands = []string{filepath.Join(filepath.Dir(self), "rdma-exec"), InstalledHelper}
	}
	for _, c := range cands {
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
			return c, nil
		}
	}
	return "", fmt.Errorf("rdma-exec is not at %s: install it (make install-cli, or copy it out of the plugin as the README's Quick start does), or start the container with RDMA_MACVLAN_NO_WAIT=1", strings.Join(cands, " or "))
}

// fail reports err where the engine shows it: containerd reads the last
// error of runc's --log (JSON) into the message docker run prints.
func (inv *Invocation) fail(sys *Sys, err error) {
	msg := "rdma-macvlan-runtime: " + err.Error()
	fmt.Fprintln(sys.Stderr, msg)
	if inv == nil || inv.Log == "" {
		return
	}
	f, ferr := os.OpenFile(inv.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if ferr != nil {
		return
	}
	defer f.Close()
	if inv.LogFormat == "json" {
		b, _ := json.Marshal(map[string]string{"level": "error", "msg": msg, "time": time.Now().Format(time.RFC3339Nano)})
		_, _ = f.Write(append(b, '\n'))
		return
	}
	fmt.Fprintf(f, "time=%q level=error msg=%q\n", time.Now().Format(time.RFC3339Nano), msg)
}
