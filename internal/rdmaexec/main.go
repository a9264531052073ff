package rdmaexec

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaenv"
)

// ContainerPath is where docker rdma run mounts rdma-exec in a container.
const ContainerPath = "/.rdma-macvlan/rdma-exec"

// Usage is rdma-exec's help.
const Usage = `Usage: rdma-exec [OPTIONS] -- COMMAND [ARG...]

Waits until the container's RoCE GID entries are in its HCA ports' GID
tables, exports NCCL_IB_HCA, NCCL_IB_GID_INDEX (or, when the indexes differ
per rail or NCCL_IB_GID_INDEX=-1 is set, NCCL_IB_ADDR_RANGE with the RoCE
version and family), NCCL_SOCKET_IFNAME, UCX_NET_DEVICES and
UCX_IB_GID_INDEX (or UCX_IB_ROCE_SUBNETS), and the networks' traffic class and
service level as NCCL_IB_TC, UCX_IB_TRAFFIC_CLASS, NCCL_IB_SL and UCX_IB_SL
(each unless already set) and execs COMMAND. docker rdma run starts it; it
is not meant to be run by hand.

Options:
  --net name=N,hca=H,port=P,subnet=S[,subnet=S...][,traffic_class=T][,service_level=L]
                        an rdma-macvlan network of the container (repeat for each)
  --timeout DURATION    how long to wait (default 10s)
  --roce-version 1|2    the RoCE version of the entry to use (default 2)
  --gid-family auto|ipv4|ipv6
                        the address family of the entry (default auto: IPv4
                        when the interface has an IPv4 address)
  --accept-gid-mismatch start the workload even when NCCL or UCX would use
                        another entry than the container's on some rail

Exit status: 122 when the GID entries did not appear in time, 121 when they
did but their indexes differ per rail and no setting makes NCCL and UCX use
them on every rail, 120 when the networks ask for different traffic classes
or service levels and no value of the variables was given (in these cases
the workload is not started), 123 for invalid options, 128+N when signal N
ends the wait (143 for SIGTERM, as docker stop sends; 130 for SIGINT; the
workload is not started), 126/127 when COMMAND cannot be run or is not found;
otherwise COMMAND's own status, as rdma-exec becomes COMMAND.
`

// Sys is what Main uses from the outside world.
type Sys struct {
	Stderr  io.Writer
	Environ []string
	Ifaces  func() ([]Iface, error)
	// Exec replaces the process with argv0 (a path) and argv; it returns
	// only on failure.
	Exec func(argv0 string, argv, env []string) error
	// Signals are delivered while waiting; nil means none.
	Signals <-chan os.Signal
}

// System is the real world.
func System() *Sys {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	return &Sys{Stderr: os.Stderr, Environ: os.Environ(), Ifaces: SystemIfaces, Exec: syscall.Exec, Signals: sigs}
}

// Main runs rdma-exec with args (without the program name) and returns the
// exit status; on success it does not return (the process is COMMAND).
func Main(args []string, sys *Sys) int {
	cfg, cmd, err := parse(args, sys)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(sys.Stderr, Usage)
			return 0
		}
		fmt.Fprintf(sys.Stderr, "rdma-exec: %v\n%s", err, Usage)
		return api.ExitUsage
	}
	timing, _ := LookupEnv(sys.Environ, api.EnvExecTiming)
	env := withoutVar(withoutVar(sys.Environ, api.EnvExecSysfsRoot), api.EnvExecTiming)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got os.Signal
	if sys.Signals != nil {
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case got = <-sys.Signals:
				cancel()
			case <-done:
			}
		}()
	}
	if len(cfg.Networks) > 0 {
		// Known from the arguments: refused before any wait.
		qos := make([]rdmaenv.QoS, 0, len(cfg.Networks))
		for _, n := range cfg.Networks {
			qos = append(qos, n.QoS())
		}
		if q := rdmaenv.QoSVars(qos, func(name string) (string, bool) { return LookupEnv(env, name) }); len(q.Conflict) > 0 {
			fmt.Fprintf(sys.Stderr, "rdma-exec: %v\n", &QoSConflictError{Conflict: q.Conflict})
			return api.ExitQoSConflict
		}
		// Each look at the tables lists the interfaces once.
		looks, ifaces := 0, cfg.Ifaces
		cfg.Ifaces = func() ([]Iface, error) { looks++; return ifaces() }
		t0 := time.Now()
		ports, err := Wait(ctx, cfg)
		waited := time.Since(t0)
		if err != nil {
			if ctx.Err() != nil && got != nil {
				fmt.Fprintf(sys.Stderr, "rdma-exec: %v while waiting for the container's GID entries: the workload was not started\n", got)
				if s, ok := got.(syscall.Signal); ok {
					return api.ExitSignal + int(s)
				}
				return api.ExitNotReady
			}
			fmt.Fprintf(sys.Stderr, "rdma-exec: %v\n", err)
			return api.ExitNotReady
		}
		if timing == "1" {
			fmt.Fprintf(sys.Stderr, "rdma-exec: GID entries ready after %.3f ms (%d %s)\n",
				float64(waited)/float64(time.Millisecond), looks, plural(looks, "look", "looks"))
		}
		var mismatch []string
		env, mismatch = Export(env, ports, cfg.Choice, sys.Stderr)
		if len(mismatch) > 0 {
			err := &MismatchError{Ports: ports, Mismatch: mismatch}
			if !cfg.AcceptMismatch {
				fmt.Fprintf(sys.Stderr, "rdma-exec: %v\n", err)
				return api.ExitGIDMismatch
			}
			fmt.Fprintf(sys.Stderr, "rdma-exec: warning: --accept-gid-mismatch given: starting although NCCL or UCX will use another entry than the container's:\n  %s\n",
				strings.Join(mismatch, "\n  "))
		}
	}
	return execCommand(cmd, env, sys)
}

// Export adds the variables of rdmaenv.Vars to env, keeping any already
// set (by docker run -e, --env-file or the image's ENV), and says on w when
// a kept value differs from the container's own. mismatch is not empty when
// NCCL or UCX would then use another entry than the container's on some
// port (see rdmaenv.Plan).
func Export(env []string, ports []rdmaenv.Port, c rdmaenv.Choice, w io.Writer) (out []string, mismatch []string) {
	plan := rdmaenv.Vars(ports, c, func(name string) (string, bool) { return LookupEnv(env, name) })
	for _, n := range plan.Notes {
		fmt.Fprintf(w, "rdma-exec: note: %s\n", n)
	}
	for _, v := range plan.Vars {
		if old, ok := LookupEnv(env, v.Name); ok {
			if old != v.Value {
				fmt.Fprintf(w, "rdma-exec: keeping %s=%s from the environment (this container's own: %s)\n", v.Name, old, v.Value)
			}
			continue
		}
		env = append(env, v.String())
	}
	return env, plan.Mismatch
}

// MismatchError is rdma-exec's refusal to start a workload that NCCL or UCX
// would run on another entry than the container's own on some port.
type MismatchError struct {
	Ports    []rdmaenv.Port
	Mismatch []string
}

func (e *MismatchError) Error() string {
	var rails []string
	for _, p := range e.Ports {
		rails = append(rails, fmt.Sprintf("%s:%d (%s %s, index %d)", p.HCA, max(p.Port, 1), p.Ifname, p.Addr, p.Index))
	}
	return fmt.Sprintf("the container's own GID entries have different indexes on its rails %s, and no setting makes every library use them:\n  %s\n"+
		"The workload was not started. To start it anyway, knowing the library named above may then use the host's or another container's address on those rails "+
		"(a workload that does not use it, e.g. one on UCX alone when only NCCL is named, loses nothing): "+
		"docker rdma run --accept-gid-mismatch (RDMA_MACVLAN_ACCEPT_GID_MISMATCH=1 with the runtime; rdma-exec --accept-gid-mismatch); or set %s / %s yourself (-e) for a workload that uses one rail",
		strings.Join(rails, ", "), strings.Join(e.Mismatch, "\n  "), rdmaenv.NCCLGIDIndex, rdmaenv.UCXGIDIndex)
}

// QoSConflictError is rdma-exec's refusal to start a workload whose
// networks ask for different traffic classes or service levels.
type QoSConflictError struct {
	Conflict []string
}

func (e *QoSConflictError) Error() string {
	return fmt.Sprintf("the container's networks ask for different QoS, and NCCL and UCX send on one for every device:\n  %s\n"+
		"The workload was not started. Give every network of the container the same -o traffic_class and -o service_level (or none), "+
		"or choose yourself: docker rdma run -e %s=N -e %s=N (-e %s=N -e %s=N for the service level)",
		strings.Join(e.Conflict, "\n  "), rdmaenv.NCCLTrafficClass, rdmaenv.UCXTrafficClass, rdmaenv.NCCLServiceLevel, rdmaenv.UCXServiceLevel)
}

func parse(args []string, sys *Sys) (Config, []string, error) {
	cfg := Config{Ifaces: sys.Ifaces, Timeout: api.DefaultGIDTimeout}
	fs := flag.NewFlagSet("rdma-exec", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var nets []string
	fs.Func("net", "", func(v string) error { nets = append(nets, v); return nil })
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "")
	version := fs.String("roce-version", "2", "")
	family := fs.String("gid-family", "auto", "")
	fs.BoolVar(&cfg.AcceptMismatch, "accept-gid-mismatch", false, "")
	if err := fs.Parse(args); err != nil {
		return cfg, nil, err
	}
	cmd := fs.Args()
	if len(cmd) == 0 {
		return cfg, nil, errors.New("no COMMAND: the image has no entrypoint or command, and none was given")
	}
	if cfg.Timeout < 0 {
		return cfg, nil, fmt.Errorf("--timeout %s: must not be negative", cfg.Timeout)
	}
	var err error
	if cfg.Choice, err = rdmaenv.ParseChoice(*version, *family); err != nil {
		return cfg, nil, err
	}
	for _, v := range nets {
		n, err := parseNet(v)
		if err != nil {
			return cfg, nil, err
		}
		cfg.Networks = append(cfg.Networks, n)
	}
	if root, ok := LookupEnv(sys.Environ, api.EnvExecSysfsRoot); ok {
		cfg.SysfsRoot = root
	}
	return cfg, cmd, nil
}

// FormatNet is the --net value of a network (parseNet's inverse).
func FormatNet(n Network) string {
	f := []string{"name=" + n.Name}
	if n.HCA != "" {
		f = append(f, "hca="+n.HCA)
	}
	if n.Port > 0 {
		f = append(f, "port="+strconv.Itoa(n.Port))
	}
	for _, s := range n.Subnets {
		f = append(f, "subnet="+s.String())
	}
	if n.TrafficClass != nil {
		f = append(f, "traffic_class="+strconv.Itoa(*n.TrafficClass))
	}
	if n.ServiceLevel != nil {
		f = append(f, "service_level="+strconv.Itoa(*n.ServiceLevel))
	}
	return strings.Join(f, ",")
}

func parseNet(v string) (Network, error) {
	var n Network
	for _, f := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(f, "=")
		if !ok {
			return n, fmt.Errorf("--net %q: field %q is not key=value", v, f)
		}
		switch k {
		case "name":
			n.Name = val
		case "hca":
			if err := rdmaenv.CheckDeviceName(val); err != nil {
				return n, fmt.Errorf("--net %q: hca: %w", v, err)
			}
			n.HCA = val
		case "port":
			p, err := strconv.Atoi(val)
			if err != nil || p < 1 {
				return n, fmt.Errorf("--net %q: port %q is not a port number", v, val)
			}
			n.Port = p
		case "subnet":
			p, err := netip.ParsePrefix(val)
			if err != nil {
				return n, fmt.Errorf("--net %q: subnet %q: %v", v, val, err)
			}
			n.Subnets = append(n.Subnets, p.Masked())
		case api.OptTrafficClass, api.OptServiceLevel:
			limit := map[string]int{api.OptTrafficClass: api.TrafficClassMax, api.OptServiceLevel: api.ServiceLevelMax}[k]
			q, err := strconv.Atoi(val)
			if err != nil || q < 0 || q > limit {
				return n, fmt.Errorf("--net %q: %s %q is not a number from 0 to %d", v, k, val, limit)
			}
			if k == api.OptTrafficClass {
				n.TrafficClass = &q
			} else {
				n.ServiceLevel = &q
			}
		default:
			return n, fmt.Errorf("--net %q: unknown field %q (want name, hca, port, subnet, traffic_class, service_level)", v, k)
		}
	}
	if n.HCA != "" && n.Port == 0 {
		n.Port = 1
	}
	if n.Name == "" {
		n.Name = "?"
	}
	return n, nil
}

// execCommand becomes cmd, looked up in env's PATH as execvp does.
func execCommand(cmd, env []string, sys *Sys) int {
	path, err := lookPath(cmd[0], env)
	if err == nil {
		err = sys.Exec(path, cmd, env)
	}
	fmt.Fprintf(sys.Stderr, "rdma-exec: exec %s: %v\n", cmd[0], err)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, errNotFound) {
		return api.ExitNotFound
	}
	return api.ExitCannotExec
}

var errNotFound = errors.New("executable file not found in $PATH")

// lookPath finds file as the container runtime does: a name with a slash
// as is, else the first executable regular file in env's PATH.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	path, ok := LookupEnv(env, "PATH")
	if !ok {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errNotFound
}

// LookupEnv is the value of name in a process environment (the last one
// wins, as in execve's consumers).
func LookupEnv(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func withoutVar(env []string, name string) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		if !strings.HasPrefix(e, name+"=") {
			out = append(out, e)
		}
	}
	return out
}
