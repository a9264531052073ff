// Command rdma-macvlan is the plugin daemon: it reads its flags (each with an
// RDMA_MACVLAN_<FLAG> environment twin, so a managed plugin can be configured
// with docker plugin set), sets up logging, listens on the plugin socket
// first and only then loads its state, and stops on SIGTERM without touching
// running containers' links.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/internal/connlimit"
	"github.com/rdma-macvlan/rdma-macvlan/internal/version"
	"github.com/rdma-macvlan/rdma-macvlan/metrics"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/plugin"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/sirupsen/logrus"
)

type config struct {
	socket     string
	stateDir   string
	sysfsRoot  string
	cdiDir     string
	logLevel   string
	logFormat  string
	gidTimeout time.Duration
	grace      time.Duration
	metrics    string // --metrics-address: TCP HOST:PORT for GET /metrics, "" for none
	version    bool   // --version: print the version and exit
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "rdma-macvlan:", err)
		os.Exit(1)
	}
}

// logLevels are the levels --log-level offers. logrus's panic and fatal
// are taken too, though they hide the daemon's errors: a managed plugin
// that an older version let set them must still start after an upgrade (an
// engine that cannot enable a plugin at boot may not come up).
var logLevels = []string{"trace", "debug", "info", "warn", "error"}

func parseFlags(args []string) (config, error) {
	var c config
	fs := newFlagSet(&c)
	// Environment twins first, so that explicit flags override them.
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name, ok := envTwin(f.Name)
		if !ok {
			return
		}
		if v, ok := os.LookupEnv(name); ok && v != "" {
			if err := f.Value.Set(v); err != nil && envErr == nil {
				envErr = fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	})
	if envErr != nil {
		return c, envErr
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	}
	return c, nil
}

// envTwin is the environment variable of the flag named name: the managed
// plugin's config.json declares each one, so that docker plugin set can set
// it. --version has none.
func envTwin(name string) (string, bool) {
	if name == "version" {
		return "", false
	}
	return "RDMA_MACVLAN_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")), true
}

// newFlagSet defines the daemon's flags on c.
func newFlagSet(c *config) *flag.FlagSet {
	fs := flag.NewFlagSet("rdma-macvlan", flag.ContinueOnError)
	fs.StringVar(&c.socket, "socket", "/run/docker/plugins/rdma-macvlan.sock", "unix socket to serve the plugin API on")
	fs.StringVar(&c.stateDir, "state-dir", "/var/lib/rdma-macvlan", "directory for persistent state")
	fs.StringVar(&c.sysfsRoot, "sysfs-root", "/", "root under which sys/class/... RDMA facts are read")
	fs.StringVar(&c.cdiDir, "cdi-dir", "/var/run/cdi", "directory for CDI specs")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: "+strings.Join(logLevels, ", "))
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.DurationVar(&c.grace, "unjoined-grace", driver.DefaultUnjoinedGrace, "after a restart, how long an endpoint without a container may wait for Docker's Join before it is deleted")
	fs.DurationVar(&c.gidTimeout, "gid-timeout", api.DefaultGIDTimeout, "how long to wait for a container's RoCE GID entries after it joins")
	fs.StringVar(&c.metrics, "metrics-address", "", "TCP HOST:PORT to serve GET /metrics on as well (e.g. 127.0.0.1:9464); empty: only on the plugin socket")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: rdma-macvlan [flags]\n\nEvery flag can also be set with RDMA_MACVLAN_<FLAG> (upper case, dashes as underscores);\na flag given on the command line wins.\n\n")
		fs.PrintDefaults()
	}
	return fs
}

// newLogger writes entries at warn, info, debug and trace to stdout and
// entries at error and above to stderr. Docker reads a managed plugin's
// stdout as level=info and its stderr as level=error (both 20.10 and the
// current engine), so this keeps an info line of the plugin from showing as an
// error in the engine's log.
func newLogger(c config) (*logrus.Logger, error) {
	return newLoggerTo(c, os.Stdout, os.Stderr)
}

func newLoggerTo(c config, stdout, stderr io.Writer) (*logrus.Logger, error) {
	log := logrus.New()
	// Every entry goes through the splitting hook; the logger's own output is unused.
	log.SetOutput(io.Discard)
	lvl, err := logrus.ParseLevel(c.logLevel)
	if err != nil {
		return nil, fmt.Errorf("--log-level %q: use one of %s", c.logLevel, strings.Join(logLevels, ", "))
	}
	log.SetLevel(lvl)
	switch c.logFormat {
	case "text":
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	case "json":
		log.SetFormatter(&logrus.JSONFormatter{})
	default:
		return nil, fmt.Errorf("--log-format %q: use text or json", c.logFormat)
	}
	log.AddHook(&levelSplit{formatter: log.Formatter, stdout: stdout, stderr: stderr})
	return log, nil
}

// levelSplit writes each entry, formatted, to stdout or stderr by its level.
type levelSplit struct {
	formatter      logrus.Formatter
	mu             sync.Mutex
	stdout, stderr io.Writer
}

func (h *levelSplit) Levels() []logrus.Level { return logrus.AllLevels }

func (h *levelSplit) Fire(e *logrus.Entry) error {
	b, err := h.formatter.Format(e)
	if err != nil {
		return err
	}
	w := h.stdout
	if e.Level <= logrus.ErrorLevel {
		w = h.stderr
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err = w.Write(b)
	return err
}

func run(args []string) error {
	c, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if c.version {
		fmt.Printf("rdma-macvlan version %s\n", version.String())
		return nil
	}
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	m := metrics.New(version.String(), version.Commit())
	// The metrics address first: a wrong one fails the start before the
	// plugin socket exists.
	var ml net.Listener
	if c.metrics != "" {
		if ml, err = listenMetrics(c.metrics); err != nil {
			return err
		}
		defer ml.Close()
	}

	// Listen first: Docker gives up on a plugin socket that does not answer
	// within seconds, and start-up work may take longer.
	l, err := plugin.Listen(c.socket)
	if err != nil {
		return err
	}
	srv := plugin.NewServer(log)
	srv.SetMetrics(m)
	metricsConns := 0
	if ml != nil {
		// Both listeners' connections within the limit on file
		// descriptors: a flood of the metrics address must not leave
		// the plugin socket unable to accept.
		caps := connlimit.Caps(connlimit.ProcessFDs(), plugin.DefaultMaxConns, metricsMaxConns)
		srv.SetMaxConns(caps[0])
		metricsConns = caps[1]
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()
	if ml != nil {
		go serveMetrics(ctx, ml, m, metricsConns, log)
	}
	log.WithFields(logrus.Fields{"version": version.String(), "socket": c.socket, "state_dir": c.stateDir, "sysfs_root": c.sysfsRoot, "cdi_dir": c.cdiDir, "metrics_address": c.metrics}).Info("listening")

	host, err := netns.Current()
	if err != nil {
		return err
	}
	defer host.Close()
	d, err := driver.New(driver.Config{
		StateDir:       c.stateDir,
		Links:          host,
		Sysfs:          rdma.NewSysfs(c.sysfsRoot),
		NetnsMode:      host.RdmaNetnsMode,
		RDMAPorts:      host,
		CDIDir:         c.cdiDir,
		GIDTimeout:     c.gidTimeout,
		UnjoinedGrace:  c.grace,
		GIDTableMaxAge: driver.DefaultGIDTableMaxAge,
		Log:            log,
		Version:        version.String(),
		Observer:       m,
		ProbeAddress: func(ctx context.Context, parent string, addr netip.Addr, own net.HardwareAddr) ([]net.HardwareAddr, error) {
			return host.ProbeAddress(ctx, parent, addr, own, netns.DefaultProbe)
		},
		WatchClaims: func(ctx context.Context, parent string, claim func(netip.Addr, net.HardwareAddr, bool)) error {
			return host.WatchClaims(ctx, parent, func(c netns.Claim) { claim(c.Addr, c.MAC, c.Probe) })
		},
	})
	if err != nil {
		return err
	}
	defer d.Close()
	srv.SetDriver(d)
	log.Info("ready")

	err = <-served
	if ctx.Err() != nil {
		log.Info("stopping on signal; container links are left as they are")
	}
	if err != nil {
		return fmt.Errorf("serve %s: %w", c.socket, err)
	}
	// Closing the listener normally unlinks the socket already.
	if err := os.Remove(c.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// listenMetrics opens the TCP address of --metrics-address, which must be
// HOST:PORT with a port.
func listenMetrics(addr string) (net.Listener, error) {
	const name = "--metrics-address (RDMA_MACVLAN_METRICS_ADDRESS)"
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s %q: want HOST:PORT, e.g. 127.0.0.1:9464 (leave it empty for no TCP address): %v", name, addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return nil, fmt.Errorf("%s %q: port %q is not a number from 1 to 65535 (e.g. 127.0.0.1:9464)", name, addr, port)
	}
	if host == "" {
		return nil, fmt.Errorf("%s %q: name the address to listen on, e.g. 127.0.0.1%s (0.0.0.0 for every address; the metrics then reach anyone on the network)", name, addr, addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %v: pick an address of this host and a free port", name, addr, err)
	}
	return l, nil
}

// metricsMaxConns caps the metrics address's open connections. A
// Prometheus server scrapes over one kept-alive connection; a pair of
// them, an agent and someone's curl need a few more. The plugin socket's
// cap gives way to it under a low limit on file descriptors (see
// connlimit.Caps).
const metricsMaxConns = 32

// serveMetrics answers GET /metrics, and nothing else, on l until ctx is
// done; the plugin API is never served on TCP. At most maxConns
// connections are open, with the plugin socket's time limits (see
// connlimit).
func serveMetrics(ctx context.Context, l net.Listener, m *metrics.Metrics, maxConns int, log *logrus.Logger) {
	mux := http.NewServeMux()
	h := m.Handler()
	mux.HandleFunc(metrics.Path, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, metrics.Path+" takes GET", http.StatusMethodNotAllowed)
			return
		}
		if r.ContentLength != 0 {
			// A scrape sends no body. Refused unread, and the connection
			// closed: kept alive, it would hold the body in front of the
			// next request, and reading it costs what the client chooses.
			size := fmt.Sprintf("%d bytes", r.ContentLength)
			if r.ContentLength < 0 {
				size = "of unknown length"
			}
			w.Header().Set("Connection", "close")
			http.Error(w, fmt.Sprintf("%s %s carries a body (%s): a scrape sends none; send the request without one", r.Method, metrics.Path, size), http.StatusBadRequest)
			return
		}
		done, ok := connlimit.Busy(r.Context())
		if !ok {
			return // closed for a newcomer
		}
		defer done()
		h.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: connlimit.HeaderTimeout, ReadTimeout: connlimit.BodyTimeout,
		WriteTimeout: connlimit.WriteTimeout, IdleTimeout: connlimit.IdleTimeout, MaxHeaderBytes: connlimit.MaxHeaderBytes,
		ConnContext: connlimit.ConnContext}
	cl := connlimit.New(l, maxConns, func(closed int64) {
		log.WithFields(logrus.Fields{"metrics_address": l.Addr().String(), "max_connections": maxConns, "closed_so_far": closed}).
			Warn("too many open connections to the metrics address: closing the longest idle ones (a client opens connections and does not use them)")
	})
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(cl); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.WithError(err).WithField("metrics_address", l.Addr().String()).Error("metrics address stopped serving")
	}
}
